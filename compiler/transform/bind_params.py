"""BindParams: turn parameters of a Relax function into constants, as TVM's pass does.

Why: weights known ahead of time (``tvms run --params w.npz --bind``) become ``relax.Constant``s
inside the function, so FoldConstant can run the work that depends only on them (transposes,
reshapes) once at compile time, and the function takes only its real inputs. The bound
parameters are removed from the signature; shapes and dtypes are checked against their
annotations, and symbolic dims the arrays fix are substituted in the rest of the function.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tvmscript import ir
from tvmscript.ir import relax, tir

from ._common import copy_module, substitute_relax


class BindParams:
    """``BindParams(func_name, {name or relax.Var: array})``: ``IRModule -> IRModule``."""

    def __init__(self, func_name: str, params: dict) -> None:
        self.func_name = func_name
        self.params = dict(params)

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        if self.func_name not in mod:
            raise ValueError(f"BindParams: the module has no function named '{self.func_name}'")
        func = mod[self.func_name]
        if not isinstance(func, relax.Function):
            raise ValueError(f"BindParams: '{self.func_name}' is not a Relax function")
        out = copy_module(mod)
        out[mod.get_global_var(self.func_name)] = bind_params(func, self.params)
        return out

    def __repr__(self) -> str:
        return f"BindParams({self.func_name!r}, [{', '.join(map(str, self.params))}])"


def bind_params(func: relax.Function, params: dict) -> relax.Function:
    """``func`` with the parameters named in ``params`` replaced by constants. Names that are
    not parameters are skipped, so binding twice is harmless (the CLI checks names itself)."""
    by_name: dict = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, p)
    binding: dict = {}
    for key, value in params.items():
        var = key if isinstance(key, relax.Var) else by_name.get(key)
        if var is None or var not in func.params:
            continue  # already bound (the pass runs twice safely), or not a parameter: as TVM
        binding[var] = _constant_for(var, value)
    if not binding:
        return func
    symbols: dict = {}
    for var, const in binding.items():
        _bind_dims(var, const.data.shape, symbols)
    new_params = [p for p in func.params if p not in binding]
    new_func = dataclasses.replace(func, params=new_params, struct_info=None)
    return substitute_relax(new_func, binding, symbols)


def _constant_for(var: relax.Var, value) -> relax.Constant:
    if isinstance(value, relax.Constant):
        data = value.data
    else:
        if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
            value = value.numpy()
        data = np.asarray(value)
    sinfo = var.struct_info
    if isinstance(sinfo, relax.TensorStructInfo):
        if sinfo.dtype and str(data.dtype) != sinfo.dtype:
            raise ValueError(f"BindParams: parameter '{var.name_hint}' is {sinfo.dtype}, the array is {data.dtype}")
        if sinfo.ndim >= 0 and data.ndim != sinfo.ndim:
            raise ValueError(f"BindParams: parameter '{var.name_hint}' has rank {sinfo.ndim}, "
                             f"the array has shape {data.shape}")
        for i, (d, n) in enumerate(zip(sinfo.shape or [], data.shape)):
            if isinstance(d, tir.IntImm) and d.value != n:
                raise ValueError(f"BindParams: parameter '{var.name_hint}' has shape "
                                 f"({', '.join(_dim_text(x) for x in sinfo.shape)}), the array {data.shape}")
    return relax.Constant(data, relax.TensorStructInfo([tir.IntImm("int64", n) for n in data.shape], str(data.dtype)))


def _dim_text(d) -> str:
    return str(d.value) if isinstance(d, tir.IntImm) else getattr(d, "name", "?")


def _bind_dims(var: relax.Var, shape: tuple, symbols: dict) -> None:
    sinfo = var.struct_info
    if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.shape is None:
        return
    for d, n in zip(sinfo.shape, shape):
        if isinstance(d, tir.Var):
            prev = symbols.get(d)
            if prev is not None and prev.value != n:
                raise ValueError(f"BindParams: '{d.name}' would be both {prev.value} and {n} "
                                 f"(from parameter '{var.name_hint}')")
            symbols[d] = tir.IntImm(d.dtype, n)
