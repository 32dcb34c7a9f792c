"""Two adjacent spatial loops merged into one where every access walks them as one contiguous
dimension (`merge_contiguous_loops`), before any nest is planned.

Why: a pointwise (1 x 1) convolution in NCHW is a matrix product over the feature map's
pixels, ``out[n, f, y, x] = sum_c in[n, c, y, x] * w[f, c]``, but its loops see a 14 x 14 map
as 14 rows of 14: too short for a 16-lane vector, so the register tile vectorized the output
channels instead, and stored each output with a scatter of 16 scalar stores. Merged, the
196 pixels are one loop that the input and output are contiguous along: the vector loop of
a matrix product's tile (the last tile shifted back, `register_tile`), the channels its rows.

How: the nest's loops ``y`` and ``x`` become one loop ``yx`` of ``Y * X`` iterations, and
every buffer they index (as the two adjacent dimensions ``[..., y, x, ...]``, covering both
whole) is read and written through a *view* of it with those dimensions merged: the same
memory (``data``) with shape ``[..., Y * X, ...]`` (TVM's ``T.decl_buffer(..., data=B.data)``).
Each element is computed by the same expression as before, so results do not change. An
intermediate buffer whose every access goes through its view is allocated as the view, so a
convolution's elementwise epilogue, merged the same way, still folds into its tile's stores.

When: only when every access of the nest's block indexes the two loops that way or not at
all, and they appear nowhere else (a padding condition, an index expression); loops of
extent 1 (a 1 x 1 window) count as their single value. Anything else is left alone.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_analysis import infer_access_regions
from tvmscript.ir.tir_arith import make_add, make_sub
from tvmscript.ir.tir_visitor import contains, vars_in

from ..schedule.common import blocks_under
from .analysis import block_accesses
from .nest import NestLoop, match_nest, perfect_nest


def merge_contiguous_loops(body):
    """``body`` (a function's, after inlining) with each reduction nest's mergeable loop pair
    merged (see the module docstring), and the nests that read what it writes into a buffer
    of the function merged the same way (its epilogue): when one of those cannot be, the
    reduction is left alone too, since its epilogue could no longer fold into its stores.
    Other nests are left as they are."""
    root = body.block if isinstance(body, tir.BlockRealize) else None
    allocated = set(root.alloc_buffers) if root is not None else set()
    nests = [(top, match_nest(top)) for top in _top_nests(root.body if root is not None else body)]
    nests = [(top, nest) for top, nest in nests if nest is not None]
    views: dict = {}  # (buffer, dim) -> view: one view per buffer, shared by every nest
    merged: dict = {}
    for top, nest in nests:
        if not nest.reduce_loops or id(top) in merged:
            continue
        plan = _merge_plan(nest, {})
        if plan is None:
            continue
        group = {id(top): (nest, plan)}
        shared = {b: d for b, d in plan[1].items() if b in allocated}
        for other_top, other in nests:
            if other_top is top or not any(_accesses_buffer(other.block, b) for b in shared):
                continue
            other_plan = _merge_plan(other, shared)
            if other_plan is None or id(other_top) in merged:
                group = None
                break
            group[id(other_top)] = (other, other_plan)
        for key, (n, (p, dims, block)) in (group or {}).items():
            merged[key] = _rebuild(n.top, n, block, p, dims, views)
    if not merged:
        return body
    out = _Replace(merged).visit_stmt(body)
    return _allocate_views(out, views) if root is not None else out


def _top_nests(stmt) -> list:
    """The For statements directly in ``stmt`` (a sequence, or one loop)."""
    if isinstance(stmt, tir.SeqStmt):
        return [s for s in stmt.seq if isinstance(s, tir.For)]
    return [stmt] if isinstance(stmt, tir.For) else []


class _Replace(IRMutator):
    def __init__(self, merged: dict) -> None:
        super().__init__()
        self.merged = merged

    def visit_stmt(self, s):
        if id(s) in self.merged:
            return self.merged[id(s)]
        return super().visit_stmt(s)


def _merge_plan(nest, required: dict) -> Optional[tuple]:
    """``(p, dims, block)``: the first pair of loops ``p, p + 1``, the inner one indexing the
    output's last dimension, that every access walks as one dimension (`_merged_dims`: buffer -> its first merged dimension), agreeing
    with ``required`` (buffer -> dimension) on the buffers both name and merging every buffer
    ``required`` names that the nest accesses; the block with its one-iteration reduce
    iterators folded. None if no pair is."""
    block = _without_unit_iterators(nest.block, nest.info)
    loops = nest.info
    for p in range(len(loops) - 1):
        outer, inner = loops[p], loops[p + 1]
        if not (_plain_spatial(outer) and _plain_spatial(inner)):
            continue
        if block.body.indices[-1] is not inner.iv.var:
            continue  # the merged loop would not be the one the output is contiguous along
        dims = _merged_dims(block, outer.iv.var, inner.iv.var, outer.const_extent, inner.const_extent)
        if dims and all(dims.get(b, d) == d and (b in dims or not _accesses_buffer(block, b))
                        for b, d in required.items()):
            return p, dims, block
    return None


def _accesses_buffer(block: tir.Block, buf) -> bool:
    return any(b is buf for b, _ in block_accesses(block))


def _plain_spatial(lp: NestLoop) -> bool:
    return (lp.kind == "S" and lp.shifts_back and lp.const_extent is not None and lp.const_extent > 1
            and tir.is_const_int(lp.iv.dom.min, 0))


def _without_unit_iterators(block: tir.Block, info: list) -> tir.Block:
    """The block with each reduce iterator of a one-iteration loop replaced by its only value
    (a 1 x 1 window's ``ry``, ``rx``), so ``y + ry`` reads as ``y``."""
    values = {lp.iv.var: lp.iv.dom.min for lp in info  # (a spatial one is a store index: kept)
              if lp.iv is not None and lp.kind == "R" and tir.is_const_int(lp.extent, 1)}
    if not values:
        return block
    folded = _FoldZero(values)
    init = folded.visit_stmt(block.init) if block.init is not None else None
    return dataclasses.replace(block, body=folded.visit_stmt(block.body), init=init)


class _FoldZero(IRMutator):
    """Substitutes constants for variables and folds the sums that leaves (``y + 0``)."""

    def __init__(self, values: dict) -> None:
        super().__init__()
        self.values = values

    def visit_expr(self, e):
        if isinstance(e, tir.Var) and e in self.values:
            return self.values[e]
        e = super().visit_expr(e)
        if isinstance(e, tir.Add):
            return make_add(e.a, e.b)
        if isinstance(e, tir.Sub):
            return make_sub(e.a, e.b)
        return e


def _merged_dims(block: tir.Block, vo, vi, n_outer: int, n_inner: int) -> Optional[dict]:
    """buffer -> the dimension ``d`` at which its accesses index ``[vo, vi]`` as ``d, d + 1``
    (each covering the whole dimension), when every access in the block either does so or
    uses neither; None otherwise (or when no access uses them)."""
    dims: dict = {}
    for buf, indices in block_accesses(block):
        used = [k for k, idx in enumerate(indices) if {vo, vi} & set(vars_in([idx]))]
        if not used:
            continue
        if len(used) != 2 or used[1] != used[0] + 1:
            return None
        d = used[0]
        if indices[d] is not vo or indices[d + 1] is not vi or buf.strides or buf.elem_offset is not None:
            return None
        if not (tir.is_const_int(buf.shape[d], n_outer) and tir.is_const_int(buf.shape[d + 1], n_inner)):
            return None
        if dims.setdefault(buf, d) != d:
            return None
    if not dims:
        return None
    # Nowhere else: a condition or value using y or x outside the indices would need them.
    for stmt in (block.init, block.body):
        if stmt is not None and {vo, vi} & set(vars_in([_StripLoads().visit_expr(stmt.value)])):
            return None
    return dims


class _StripLoads(IRMutator):
    """Replaces each load by a constant (what is left is what uses variables outside indices)."""

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad):
            return tir.IntImm("int32", 0)
        return super().visit_expr(e)


def _view(buf: tir.Buffer, d: int, views: dict) -> tir.Buffer:
    """``buf`` with dimensions ``d`` and ``d + 1`` merged, over the same memory."""
    key = (buf, d)
    if key not in views:
        if buf.data is None:
            buf.data = tir.Var("handle", buf.name)
        merged = tir.IntImm(buf.shape[d].dtype, buf.shape[d].value * buf.shape[d + 1].value)
        shape = list(buf.shape[:d]) + [merged] + list(buf.shape[d + 2:])
        views[key] = dataclasses.replace(buf, shape=shape, data=buf.data, strides=[])
    return views[key]


class _ToViews(IRMutator):
    """Accesses of the merged buffers through their views, ``[..., vo, vi, ...]`` as
    ``[..., v, ...]``."""

    def __init__(self, dims: dict, views: dict, fused) -> None:
        super().__init__()
        self.dims, self.views, self.fused = dims, views, fused

    def _indices(self, buf, indices):
        d = self.dims[buf]
        return _view(buf, d, self.views), list(indices[:d]) + [self.fused] + list(indices[d + 2:])

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer in self.dims:
            view, idx = self._indices(e.buffer, [self.visit_expr(i) for i in e.indices])
            return tir.BufferLoad(e.dtype, view, idx, e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer in self.dims:
            view, idx = self._indices(s.buffer, [self.visit_expr(i) for i in s.indices])
            return tir.BufferStore(view, self.visit_expr(s.value), idx, s.span)
        return super().visit_stmt(s)


def _rebuild(top: tir.For, nest, block: tir.Block, p: int, dims: dict, views: dict) -> tir.For:
    """The nest with loops ``p`` and ``p + 1`` merged into one and the block reading and
    writing the merged buffers through their views."""
    outer, inner = nest.info[p], nest.info[p + 1]
    extent = outer.const_extent * inner.const_extent
    dtype = outer.iv.var.dtype
    var = tir.Var(dtype, f"{outer.iv.var.name}_{inner.iv.var.name}")
    loop_var = tir.Var(outer.var.dtype, f"{outer.var.name}_{inner.var.name}")
    to_views = _ToViews(dims, views, var)
    body = to_views.visit_stmt(block.body)
    init = to_views.visit_stmt(block.init) if block.init is not None else None
    iv = dataclasses.replace(outer.iv, var=var, dom=tir.Range(tir.IntImm(dtype, 0), tir.IntImm(dtype, extent)))
    iter_vars, values = [], []
    for old_iv, value in zip(nest.realize.block.iter_vars, nest.realize.iter_values):
        if old_iv is outer.iv:
            iter_vars.append(iv)
            values.append(loop_var)
        elif old_iv is not inner.iv:
            iter_vars.append(old_iv)
            values.append(value)
    reads, writes = infer_access_regions(body, init, block.alloc_buffers)
    new_block = dataclasses.replace(block, iter_vars=iter_vars, body=body, init=init, reads=reads, writes=writes)
    stmt = dataclasses.replace(nest.realize, block=new_block, iter_values=values)
    loops, _ = perfect_nest(top)
    for k in reversed(range(len(loops))):
        lp = loops[k]
        if k == p + 1:
            continue
        if k == p:
            stmt = tir.For(loop_var, tir.IntImm(loop_var.dtype, 0), tir.IntImm(loop_var.dtype, extent), "serial", stmt)
        else:
            stmt = dataclasses.replace(lp, body=stmt)
    return stmt


def _allocate_views(body, views: dict):
    """The root block allocating, for each buffer of its own that is now accessed only through
    its view, the view instead."""
    root = body.block
    allocated = set(root.alloc_buffers)
    by_buffer = {buf: view for (buf, _), view in views.items() if buf in allocated}
    if not by_buffer:
        return body
    # A buffer still accessed as it was stays allocated so; its view shares the memory.
    alloc = [by_buffer[b] if b in by_buffer and not _still_accessed(root.body, b) else b for b in root.alloc_buffers]
    return dataclasses.replace(body, block=dataclasses.replace(root, alloc_buffers=alloc))


def _still_accessed(stmt, buf) -> bool:
    """Whether ``stmt`` loads or stores ``buf`` itself, or a block in it names it in its regions."""
    if contains(stmt, lambda n: isinstance(n, (tir.BufferLoad, tir.BufferStore)) and n.buffer is buf):
        return True
    return any(r.buffer is buf for b in blocks_under(stmt) for r in (*b.block.reads, *b.block.writes))
