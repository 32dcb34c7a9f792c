"""Memory planning for the VM: which intermediate tensors of a Relax function can live in its
arena, and where each lies in it.

A tensor made by the VM (an ``R.call_tir`` output, an ``R.alloc_tensor``) with a static shape
and dtype, and only ever read by kernels (itself or through an ``R.reshape`` view of it), is
dead when its function returns: it can take a fixed slot of one aligned block, the function's
*arena*, which the VM allocates once per frame and reuses from call to call (`runtime.vm`).
`arena_candidates` finds those tensors (an escape analysis over the function's body),
`arena_layout` lays them out.
"""

from __future__ import annotations

import re

from tvmscript import ir
from tvmscript.ir import relax, tir

from .build_error import BuildError

__all__ = ["arena_candidates", "arena_layout", "static_tensor", "static_shape"]

ARENA_ALIGNMENT = 64  # bytes: every slot is aligned as the block is (`runtime.ndarray.ALIGNMENT`)


def arena_candidates(func: relax.Function, kernels: dict) -> dict:
    """Variables whose tensor can live in the function's arena: made by the VM (an R.call_tir
    output or an R.alloc_tensor) with a static shape and dtype, and only ever read by kernels
    (never returned, put in a tuple, passed to an extern or another function, ...). Such a tensor
    is dead when the function returns, so the same memory serves every call."""
    candidates = {}
    alias = {}
    escaped = set()

    def root(v):
        while v in alias:
            v = alias[v]
        return v

    def escape_all(e):
        if isinstance(e, relax.Var):
            escaped.add(root(e))
        elif isinstance(e, relax.Call):
            if not isinstance(e.op, (relax.Op, relax.ExternFunc, ir.GlobalVar)):
                escape_all(e.op)
            for a in e.args:
                escape_all(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                escape_all(f)
        elif isinstance(e, relax.TupleGetItem):
            escape_all(e.tuple_value)
        elif isinstance(e, relax.If):
            escape_all(e.cond)
            seq(e.true_branch)
            seq(e.false_branch)
        elif isinstance(e, relax.SeqExpr):
            seq(e)

    def seq(s: relax.SeqExpr):
        for block in s.blocks:
            for b in block.bindings:
                value = b.value
                if isinstance(b, relax.VarBinding) and isinstance(value, relax.Var):
                    alias[b.var] = value
                    continue
                if isinstance(b, relax.VarBinding) and _is_view(value):
                    alias[b.var] = value.args[0]  # R.reshape: the same memory under another name
                    continue
                if isinstance(b, relax.VarBinding) and _is_kernel_call(value, kernels):
                    kernel_args(value)
                    if len(value.sinfo_args) == 1 and static_tensor(value.sinfo_args[0]):
                        candidates[b.var] = value.sinfo_args[0]
                    continue
                if (isinstance(b, relax.VarBinding) and isinstance(value, relax.Call)
                        and isinstance(value.op, relax.Op) and value.op.name == "relax.builtin.alloc_tensor"):
                    if static_tensor(value.struct_info):
                        candidates[b.var] = value.struct_info
                    continue
                escape_all(value)
        if _is_kernel_call(s.body, kernels):  # an if branch ending in a call: its result escapes
            kernel_args(s.body)
        else:
            escape_all(s.body)

    def kernel_args(call):
        """A kernel reads its tensor arguments and keeps none of them."""
        for a in call.args[1].fields if isinstance(call.args[1], relax.Tuple) else [call.args[1]]:
            if not isinstance(a, relax.Var):
                escape_all(a)

    seq(func.body)
    # var -> its (static) struct info, in program order
    return {v: s for v, s in candidates.items() if root(v) not in escaped and v not in escaped}


def _is_view(value) -> bool:
    return (isinstance(value, relax.Call) and isinstance(value.op, relax.Op) and value.op.name == "relax.reshape"
            and isinstance(value.args[0], relax.Var))


def _is_kernel_call(value, kernels) -> bool:
    if not (isinstance(value, relax.Call) and isinstance(value.op, relax.Op)):
        return False
    if value.op.name == "relax.call_tir" and isinstance(value.args[0], ir.GlobalVar):
        return True
    if value.op.name in ("relax.call_tir", "relax.call_dps_packed") and isinstance(value.args[0], relax.ExternFunc):
        return value.args[0].global_symbol in kernels
    return False


def static_tensor(sinfo) -> bool:
    return (isinstance(sinfo, relax.TensorStructInfo) and bool(sinfo.dtype) and sinfo.shape is not None
            and all(isinstance(d, tir.IntImm) for d in sinfo.shape))


def static_shape(sinfo) -> tuple:
    return tuple(int(d.value) for d in sinfo.shape)


def arena_layout(candidates: dict) -> tuple:
    """``([(byte offset, shape, dtype)] in the order of ``candidates`` (`arena_candidates`),
    the arena's size in bytes)``: the slots one after another, each aligned."""
    layout = []
    nbytes = 0
    for sinfo in candidates.values():
        shape = static_shape(sinfo)
        n = 1
        for d in shape:
            n *= d
        layout.append((nbytes, shape, sinfo.dtype))
        nbytes = _align(nbytes + max(n * _itemsize(sinfo.dtype), 1))
    return layout, nbytes


def _align(n: int, a: int = ARENA_ALIGNMENT) -> int:
    return (n + a - 1) // a * a


def _itemsize(dtype: str) -> int:
    m = re.match(r"^(bool|u?int|float|bfloat)(\d+)$", dtype) if dtype != "bool" else None
    if dtype == "bool":
        return 1
    if m is not None:
        return max(1, int(m.group(2)) // 8)
    try:
        from tvmscript.runtime.ndarray import _np_dtype

        return _np_dtype(dtype).itemsize
    except TypeError:
        raise BuildError(f"unknown dtype {dtype!r}") from None
