"""CUDA C spellings of TIR dtypes, constants and names.

Scalar types are written as CUDA names them (``half`` from cuda_fp16.h, ``nv_bfloat16`` from
cuda_bf16.h, ``signed char``); 8- and 16-bit integers compute in ``int`` and are cast back
(`NARROW_INTS`); ``float16``/``bfloat16`` convert through ``float`` (`HALF_TYPES`). Literals
keep their dtype exactly: ``2147483648LL``, ``1.000000000e+00f``, NaN and infinities as bit
patterns, the smallest integers as an expression (``(-2147483647 - 1)``).
"""

from __future__ import annotations

import re

from tvmscript.ir import tir

from ..lower_gpu import GPULoweringError
from ..lower_tir import dtype_bytes

CTYPES = {
    "float32": "float", "float64": "double", "float16": "half", "bfloat16": "nv_bfloat16",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
    "bool": "bool",
}
NARROW_INTS = ("int8", "int16", "uint8", "uint16")
HALF_TYPES = {"float16": ("__float2half_rn", "__half2float"), "bfloat16": ("__float2bfloat16_rn", "__bfloat162float")}


def ctype(dtype: str) -> str:
    """The CUDA C type of a ``dtype`` value."""
    try:
        return CTYPES[dtype]
    except KeyError:
        raise GPULoweringError(f"the CUDA backend has no type for dtype '{dtype}'") from None


def ident(name: str) -> str:
    """``name`` as a C identifier."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if s and not s[0].isdigit() else "v_" + s


def is_zero(e) -> bool:
    return isinstance(e, tir.IntImm) and e.value == 0


def is_zero_literal(e) -> bool:
    """An integer or floating-point zero (whose bytes are all zero: not -0.0)."""
    return isinstance(e, (tir.IntImm, tir.FloatImm)) and e.value == 0 and str(e.value)[0] != "-"


def int_literal(dtype: str, value: int) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype == "int64":
        if value == -(2**63):
            return "(-9223372036854775807LL - 1)"
        return f"{value}LL" if value >= 0 else f"({value}LL)"
    if dtype == "uint64":
        return f"{value}ULL"
    if dtype == "uint32":
        return f"{value}U"
    if dtype == "int32":
        if value == -(2**31):
            return "(-2147483647 - 1)"
        return str(value) if value >= 0 else f"({value})"
    return f"(({ctype(dtype)}){value})"


def float_literal(dtype: str, value: float) -> str:
    if dtype in HALF_TYPES:
        return f"{HALF_TYPES[dtype][0]}({float_literal('float32', value)})"
    if value != value:
        return "__int_as_float(0x7fc00000)" if dtype == "float32" else "__longlong_as_double(0x7ff8000000000000LL)"
    if value in (float("inf"), float("-inf")):
        sign = "-" if value < 0 else ""
        return (f"({sign}__int_as_float(0x7f800000))" if dtype == "float32"
                else f"({sign}__longlong_as_double(0x7ff0000000000000LL))")
    if dtype == "float64":
        return f"{value!r}" if "e" in repr(value) or "." in repr(value) else f"{value!r}.0"
    text = f"{value:.9e}f"
    return f"({text})" if value < 0 else text


_FLOAT_LIMITS = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308, "float16": 65504.0,
                 "bfloat16": 3.3895313892515355e38}


def limit_literal(dtype: str, upper: bool) -> str:
    if dtype in _FLOAT_LIMITS:
        v = _FLOAT_LIMITS[dtype]
        return float_literal(dtype, v if upper else -v)
    if dtype == "bool":
        return "true" if upper else "false"
    bits = dtype_bytes(dtype) * 8
    if dtype.startswith("uint"):
        return int_literal(dtype, (1 << bits) - 1 if upper else 0)
    return int_literal(dtype, (1 << (bits - 1)) - 1 if upper else -(1 << (bits - 1)))
