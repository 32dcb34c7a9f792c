"""Memory planning for the VM: which intermediate tensors of a Relax function can live in its
arena, and where each lies in it.

A tensor made by the VM (an ``R.call_tir`` output, an ``R.alloc_tensor``) with a static shape
and dtype, and only ever read by kernels (itself or through an ``R.reshape`` view of it), is
dead when its function returns: it can take a fixed slot of one aligned block, the function's
*arena*, which the VM allocates once per frame and reuses from call to call (`runtime.vm`).
`arena_candidates` finds those tensors (an escape analysis over the function's body) and the
span of bindings each is live over, `arena_layout` lays them out: tensors whose spans do not
meet share memory, as TVM's ``StaticPlanBlockMemory`` reuses storage.

Why share: with a slot per tensor, mobilenet_v2's arena was 26.7 MB, every kernel wrote
memory no recent kernel had touched (write misses all the way to DRAM) and the next one read
it back from there; its kernels took 1.7x their time run alone. Shared, a few slots take
turns and stay in the caches.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from tvmscript import ir
from tvmscript.ir import relax, tir

from .build_error import BuildError
from .transform._common import op_name

__all__ = ["ArenaTensor", "arena_candidates", "arena_layout", "static_tensor", "static_shape"]

ARENA_ALIGNMENT = 64  # bytes: every slot is aligned as the block is (`runtime.ndarray.ALIGNMENT`)


@dataclass(frozen=True)
class ArenaTensor:
    """A tensor of the arena: its struct info (static shape and dtype), and the first and last
    binding it is live at (positions in program order, nested branches included): made at
    ``first``, read by kernels (itself or through views) up to ``last``."""

    sinfo: relax.TensorStructInfo
    first: int
    last: int


def arena_candidates(func: relax.Function, kernels: dict) -> dict:
    """Variables whose tensor can live in the function's arena (`ArenaTensor` each, in program
    order): made by the VM (an R.call_tir output or an R.alloc_tensor) with a static shape and
    dtype, and only ever read by kernels (never returned, put in a tuple, passed to an extern
    or another function, ...). Such a tensor is dead when the function returns, so the same
    memory serves every call."""
    candidates = {}
    alias = {}
    escaped = set()
    made: dict = {}  # var -> the position of its binding
    last_use: dict = {}  # root var -> the last position a kernel reads it (or a view of it) at
    pos = 0

    def use(v) -> None:
        last_use[root(v)] = pos

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
        nonlocal pos
        for block in s.blocks:
            for b in block.bindings:
                pos += 1
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
                        candidates[b.var], made[b.var] = value.sinfo_args[0], pos
                    continue
                if isinstance(b, relax.VarBinding) and op_name(value) == "relax.builtin.alloc_tensor":
                    if static_tensor(value.struct_info):
                        candidates[b.var], made[b.var] = value.struct_info, pos
                    continue
                escape_all(value)
        pos += 1
        if _is_kernel_call(s.body, kernels):  # an if branch ending in a call: its result escapes
            kernel_args(s.body)
        else:
            escape_all(s.body)

    def kernel_args(call):
        """A kernel reads its tensor arguments and keeps none of them."""
        for a in call.args[1].fields if isinstance(call.args[1], relax.Tuple) else [call.args[1]]:
            if isinstance(a, relax.Var):
                use(a)
            else:
                escape_all(a)

    seq(func.body)
    return {v: ArenaTensor(s, made[v], max(made[v], last_use.get(v, made[v])))
            for v, s in candidates.items() if root(v) not in escaped and v not in escaped}


def _is_view(value) -> bool:
    return op_name(value) == "relax.reshape" and isinstance(value.args[0], relax.Var)


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
    the arena's size in bytes)``. Two tensors live at the same time never overlap; others
    may share memory. Placed largest first, each at the lowest aligned offset clear of the
    tensors already placed that it is live with (the greedy-by-size heuristic of static
    memory planners: the large activations decide the arena's size, and small ones fill in
    around them)."""
    tensors = list(candidates.values())
    sizes = [_align(max(_nbytes(t.sinfo), 1)) for t in tensors]
    offsets = [0] * len(tensors)
    placed: list = []  # indices, by offset
    for i in sorted(range(len(tensors)), key=lambda i: (-sizes[i], tensors[i].first)):
        t = tensors[i]
        offset = 0
        for j in placed:
            u = tensors[j]
            if u.last < t.first or t.last < u.first:
                continue  # never live together
            if offsets[j] + sizes[j] <= offset or offset + sizes[i] <= offsets[j]:
                continue
            offset = offsets[j] + sizes[j]
        offsets[i] = offset
        bisect.insort(placed, i, key=offsets.__getitem__)
    layout = [(offsets[i], static_shape(t.sinfo), t.sinfo.dtype) for i, t in enumerate(tensors)]
    return layout, max((offsets[i] + sizes[i] for i in range(len(tensors))), default=0)


def _nbytes(sinfo) -> int:
    n = 1
    for d in static_shape(sinfo):
        n *= d
    return n * _itemsize(sinfo.dtype)


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
