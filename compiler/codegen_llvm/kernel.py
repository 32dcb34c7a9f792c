"""Kernels: one LLVM function per PrimFunc, with the ABI the runtime calls, and `codegen`.

Kernel ABI (the contract with `runtime.kernel.Kernel`), for a function named ``name`` in the
IRModule, exported as the symbol ``tvms_<name>`` (non-identifier characters become ``_``)::

    void tvms_name(ptr buf0, ..., <scalar params>..., i64 sym0, ...)

first the data pointer of every buffer parameter in parameter order, then every scalar
(non-buffer) parameter in order with its C type (``bool`` as ``i8``; ``float16`` and
``bfloat16`` are passed as a C ``float``), then one ``i64`` per symbolic shape/stride variable
of the buffer parameters that is not itself a scalar parameter, in order of first appearance
(`kernel_params.kernel_signature`). Buffer pointers are ``noalias`` when the function has the
``tir.noalias`` attribute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import llvmlite.ir as ir

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in
from tvmscript.runtime.host_cpu import HostTarget, host_target
from tvmscript.runtime.kernel_abi import KernelInfo

from .. import progress
from ..kernel_params import kernel_signature
from ..lower_tir import lower
from .cost import starts_a_team
from .dtypes import I8, I64, PTR, VOID, abi_type, constant, value_type
from .function import FuncGen, ModuleGen
from .scratch import emit_release_function


def symbol_name(name: str) -> str:
    """The exported symbol of the kernel for IRModule function ``name``."""
    return "tvms_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


@dataclass
class CodegenResult:
    """The LLVM module of `codegen` and a `KernelInfo` per kernel in it, in order."""

    module: ir.Module
    kernels: list = field(default_factory=list)
    parallel_runtime: str = "gomp"

    def __str__(self) -> str:
        return str(self.module)


def _truthy(value) -> bool:
    """An attribute value as a bool: ``True`` and ``T.bool(True)`` (an IntImm) alike."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        return bool(value.value)
    return bool(value)


def _emit_kernel(mg: ModuleGen, name: str, symbol: str, func: tir.PrimFunc, bounds_check: bool,
                 places: dict | None = None) -> KernelInfo:
    """One kernel. An error compiling it (a form the CPU code generator does not take) leaves
    as it was raised, told which kernel (``kernel``) and, where known, which statement or load
    of the source (``span``, see `at_span`)."""
    try:
        return _emit_kernel_code(mg, name, symbol, func, bounds_check, places)
    except (NotImplementedError, ValueError, TypeError) as err:
        if getattr(err, "kernel", None) is None:
            err.kernel = name
        raise


def _emit_kernel_code(mg: ModuleGen, name: str, symbol: str, func: tir.PrimFunc, bounds_check: bool,
                      places: dict | None) -> KernelInfo:
    func = lower(func, bounds_check=bounds_check, places=places)
    specs, sym_names, buffers, scalars, sym_vars = kernel_signature(name, func)
    arg_types = [PTR] * len(buffers) + [abi_type(p.dtype) for p in scalars] + [I64] * len(sym_vars)
    fn = ir.Function(mg.module, ir.FunctionType(VOID, arg_types), name=symbol)
    fn.attributes.add("nounwind")
    noalias_attr = _truthy(func.attrs.get("tir.noalias"))
    env: dict = {}
    nonneg: set = set()
    noalias: set = set()
    gen = FuncGen(mg, fn, name, env, nonneg, noalias, False, places)
    args = list(fn.args)
    for (p, buf), arg in zip(buffers, args):
        arg.name = p.name
        env[p] = arg
        if buf.data is not None:
            env[buf.data] = arg
        if noalias_attr:
            arg.add_attribute("noalias")
            noalias.add(p)
            if buf.data is not None:
                noalias.add(buf.data)
    args = args[len(buffers):]
    b = gen.entry_builder
    for p, arg in zip(scalars, args):
        arg.name = p.name
        if p.dtype == "bool":
            env[p] = b.icmp_unsigned("!=", arg, ir.Constant(I8, 0))
        elif p.dtype == "float16":
            env[p] = b.fptrunc(arg, ir.HalfType())
        elif p.dtype == "bfloat16":
            env[p] = gen.round_bf16(arg)  # in the start block, which every use follows
        else:
            env[p] = arg
    args = args[len(scalars):]
    shape_vars = set(vars_in([dim for _, buf in buffers for dim in buf.shape]))
    for v, arg in zip(sym_vars, args):
        arg.name = v.name
        ty = value_type(v.dtype)
        env[v] = arg if ty.width == 64 else b.trunc(arg, ty)
        if v in shape_vars:
            nonneg.add(v)  # a dimension (a stride may be negative)
    # Symbolic element offsets of parameters: the runtime passes pointers to the first element.
    for _, buf in buffers:
        if isinstance(buf.elem_offset, tir.Var) and buf.elem_offset not in env:
            env[buf.elem_offset] = constant(buf.elem_offset.dtype, 0)
    gen.beside_team = starts_a_team(func.body)
    gen.stmt(func.body)
    gen.finish()
    return KernelInfo(name, symbol, specs, sym_names)


def codegen(funcs: dict, parallel_runtime: str = "gomp", target: Optional[HostTarget] = None,
            bounds_check: bool = True, places: dict | None = None) -> CodegenResult:
    """One LLVM module holding a kernel per PrimFunc of ``funcs`` (name -> PrimFunc).

    ``parallel_runtime`` is ``"gomp"`` (parallel loops call libgomp's ``GOMP_parallel``) or
    ``"serial"`` (they run on the calling thread). ``bounds_check``: buffer accesses not
    proven in bounds at compile time are checked when they run (`compiler.bounds_check`).
    ``places`` (name -> `kernel_places.numbered_spans` of the function before it was
    scheduled) lets a failed check say where in the source it is."""
    target = target or host_target()
    mg = ModuleGen(target, parallel_runtime)
    result = CodegenResult(mg.module, parallel_runtime=parallel_runtime)
    used: set = set()
    for i, (name, func) in enumerate(funcs.items()):
        progress.report("generating code", i, len(funcs))
        if not isinstance(func, tir.PrimFunc):
            raise TypeError(f"codegen: '{name}' is a {type(func).__name__}, not a tir.PrimFunc")
        symbol = symbol_name(name)
        base, i = symbol, 1
        while symbol in used:
            symbol, i = f"{base}_{i}", i + 1
        used.add(symbol)
        result.kernels.append(_emit_kernel(mg, name, symbol, func, bounds_check, (places or {}).get(name)))
    emit_release_function(mg)
    return result
