"""TIR dtypes as LLVM types and constants: what every part of the CPU code generator shares.

A dtype has three LLVM types: its value in registers (`value_type`, ``bool`` as ``i1``), its
element in memory (`memory_type`, ``bool`` as a byte, as in NumPy) and its scalar kernel
argument (`abi_type`, the C type the runtime passes). The short names ``I1`` ... ``VOID`` are
the LLVM types the generated code uses most; pointers are opaque throughout.

``bfloat16`` is a ``float`` in registers whose value is always a bfloat16 one (each result is
rounded, `bf16_value` here and ``ExprGen.round_bf16`` in the code) and its top 16 bits, an
``i16``, in memory. LLVM has a ``bfloat`` type, but on a CPU without AVX512-BF16 it rounds a
float to it by calling ``__truncsfbf2``, which libgcc only has since GCC 13 and MCJIT would
have to find; the rounding written out is a few integer operations, and LLVM vectorizes them.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir

from tvmscript.ir import tir

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()


def value_type(dtype: str) -> ir.Type:
    """The LLVM type of a value of ``dtype`` (``bool`` is ``i1``)."""
    if dtype == "bool":
        return I1
    if dtype in ("int8", "uint8"):
        return I8
    if dtype in ("int16", "uint16"):
        return ir.IntType(16)
    if dtype in ("int32", "uint32"):
        return I32
    if dtype in ("int64", "uint64"):
        return I64
    if dtype == "float16":
        return ir.HalfType()
    if dtype in ("float32", "bfloat16"):
        return ir.FloatType()
    if dtype == "float64":
        return ir.DoubleType()
    if dtype == "handle":
        return PTR
    raise NotImplementedError(f"the CPU code generator does not support dtype '{dtype}'")


def memory_type(dtype: str) -> ir.Type:
    """The LLVM type of a ``dtype`` element in memory (``bool`` is a byte, as in NumPy;
    ``bfloat16`` its 16 bits)."""
    if dtype == "bfloat16":
        return I16
    return I8 if dtype == "bool" else value_type(dtype)


def abi_type(dtype: str) -> ir.Type:
    """The LLVM type of a scalar kernel argument (``bool`` as ``i8``, ``float16`` and
    ``bfloat16`` as float)."""
    if dtype == "bool":
        return I8
    if dtype == "float16":
        return ir.FloatType()
    return value_type(dtype)


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("uint") or dtype == "bool"


def dtype_bits(dtype: str) -> int:
    if dtype == "bool":
        return 1
    if dtype == "handle":
        return 64
    return int("".join(ch for ch in dtype if ch.isdigit()))


def constant(dtype: str, value) -> ir.Constant:
    """``value`` as an LLVM constant of ``dtype`` (integers wrap to its width, as stored)."""
    ty = value_type(dtype)
    if isinstance(ty, ir.IntType):
        v = int(value)
        w = ty.width
        if w == 1:
            return ir.Constant(ty, 1 if v else 0)
        v &= (1 << w) - 1
        if v >= 1 << (w - 1):
            v -= 1 << w
        return ir.Constant(ty, v)
    if dtype == "bfloat16":
        return ir.Constant(ty, bf16_value(float(value)))
    return ir.Constant(ty, float(value))


BF16_MAX = float.fromhex("0x1.fep127")


def bf16_value(x: float) -> float:
    """``x`` rounded once to the nearest bfloat16 (ties to even; beyond the largest finite
    one, to infinity): 8 significant bits, subnormals spaced 2**-133 as float32's exponents."""
    if x == 0 or math.isnan(x) or math.isinf(x):
        return x
    _, exp = math.frexp(x)
    quantum = max(exp - 8, -133)
    rounded = math.ldexp(round(math.ldexp(abs(x), -quantum)), quantum)
    return math.copysign(math.inf if rounded > BF16_MAX else rounded, x)  # -1e-300 is -0.0


def elem_align(dtype: str) -> int:
    """The bytes of a ``dtype`` element in memory, which is also its alignment."""
    return 1 if dtype == "bool" else max(1, dtype_bits(dtype) // 8)


def dtype_limit(dtype: str, upper: bool) -> ir.Constant:
    """The largest (``upper``) or smallest finite value of ``dtype``: ``T.max_value``/``T.min_value``."""
    if dtype == "bfloat16":
        return constant(dtype, BF16_MAX if upper else -BF16_MAX)
    if tir.is_float(dtype):
        import numpy as np

        fi = np.finfo(dtype)
        return constant(dtype, float(fi.max if upper else fi.min))
    bits = dtype_bits(dtype)
    if is_unsigned(dtype):
        return constant(dtype, (1 << bits) - 1 if upper else 0)
    return constant(dtype, (1 << (bits - 1)) - 1 if upper else -(1 << (bits - 1)))

