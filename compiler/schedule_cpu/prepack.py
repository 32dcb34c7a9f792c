"""Weights packed once, at compile time: a register tile's panel taken as the layout of a
parameter the build binds to a constant, instead of copied on every call.

A register tile reads its packed operand (a matrix product's weight) through panels
(``reduce extents x tile``, contiguous along the vector tile, `packing.packed_panel`), filled
from the operand on every call: with a 7-token GPT step, most of a matmul's time. When every
call of the kernel passes a constant there (weights bound, ``BindParams``), the build marks
the parameter layout-free (`LAYOUT_FREE_ATTR`, TVM's ``layout_free_buffers``); the schedule
then gives that parameter the layout of all its panels side by side,
``[outer spatial extents..., vector tiles, reduce extents..., tile]``, reads it there with
unit stride and fills nothing, and records the layout in the scheduled function
(`PACKED_LAYOUTS_ATTR`: parameter index -> `PackedLayout`). The build packs the constants
into it once (`compiler.prepack_constants`), as TVM's RewriteLayout + FoldConstant do.

The panel a tile reads is the same elements in the same order, so results do not change.
Other reads of the parameter in the function (the nest run for a few rows, `small_nest`)
read the new layout through the forward map (`_ForwardReads`)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.index_map import IndexMap
from tvmscript.ir.mutator import IRMutator, substitute

from .symbolic import shifted_start

LAYOUT_FREE_ATTR = "layout_free_buffers"  # parameter indices whose layout the schedule may choose
PACKED_LAYOUTS_ATTR = "tvms.packed_layouts"  # parameter index -> PackedLayout, in a scheduled function


@dataclasses.dataclass
class PackedLayout:
    """The layout a layout-free parameter was given: its ``shape``, and for each element of
    it, the element of the original tensor it holds (``source``: packed indices -> original
    indices; an element may be held twice, by a vector tile shifted back)."""

    shape: tuple
    source: IndexMap

    def __repr__(self) -> str:  # as a scheduled function's attribute prints
        from tvmscript.printer import index_map_text

        return f"PackedLayout({self.shape}, {index_map_text(self.source.initial_indices, self.source.final_indices)})"


class _Prepacking:
    """The layout-free parameters of the function being scheduled (buffer -> parameter index),
    and those given a layout (buffer -> (new buffer, `PackedLayout`, forward map, signature:
    what two nests compare to share it))."""

    def __init__(self, buffers: dict) -> None:
        self.buffers = buffers
        self.claimed: dict = {}
        self.frozen = False  # scheduling a nest run instead of another: it reads the layout given


_current: contextvars.ContextVar = contextvars.ContextVar("prepacking", default=None)


@contextlib.contextmanager
def prepacking(func: tir.PrimFunc):
    """Schedule ``func`` with its layout-free parameters (`LAYOUT_FREE_ATTR`) open to packing."""
    indices = func.attrs.get(LAYOUT_FREE_ATTR) or ()
    buffers = {}
    for i in indices:
        i = int(i)
        if 0 <= i < len(func.params) and func.params[i] in func.buffer_map:
            buffers[func.buffer_map[func.params[i]]] = i
    token = _current.set(_Prepacking(_only_loaded(func.body, buffers)) if buffers else None)
    try:
        yield
    finally:
        _current.reset(token)


@contextlib.contextmanager
def frozen():
    """No new layouts while scheduling a fallback nest (`driver.small_nest`): the nest it
    replaces decides the layout, and the fallback reads it through the forward map."""
    state = _current.get()
    if state is None:
        yield
        return
    was, state.frozen = state.frozen, True
    try:
        yield
    finally:
        state.frozen = was


def prepackable(load: tir.BufferLoad, nontrivial: list) -> bool:
    """Whether a register tile may read ``load`` from panels packed at compile time: its
    buffer is a layout-free parameter of constant shape, read whole by this nest with each
    index one loop's iterator from 0 over the whole axis (or 0 on an axis of one); not yet
    given a layout, or, in a fallback nest, given one (which its tile then takes,
    `prepacked_tile`)."""
    state = _current.get()
    if state is None or load.buffer not in state.buffers or (load.buffer in state.claimed) != state.frozen:
        return False
    return _index_loops(load, nontrivial) is not None


def prepacked_tile(load: tir.BufferLoad) -> Optional[int]:
    """The tile of the layout ``load``'s buffer was given (a fallback nest's tile must read
    the same panels), None if none."""
    state = _current.get()
    claim = state.claimed.get(load.buffer) if state is not None else None
    return claim[3][-1] if claim is not None else None


def _index_loops(load: tir.BufferLoad, loops: list) -> Optional[list]:
    """For each index of ``load``: the loop (`NestLoop`) whose iterator it is, or None on an
    axis of one; None when the nest does not read the buffer that simply and whole."""
    by_var = {lp.iv.var: lp for lp in loops if lp.iv is not None}
    found, seen = [], set()
    for index, dim in zip(load.indices, load.buffer.shape):
        if not isinstance(dim, tir.IntImm):
            return None
        if dim.value == 1:  # index 0 (or the iterator of a loop of one iteration, a 1x1 kernel's)
            found.append(None)
            continue
        lp = by_var.get(index) if isinstance(index, tir.Var) else None
        if lp is None or lp in seen or not tir.is_const_int(lp.min, 0) or lp.const_extent != dim.value:
            return None
        seen.add(lp)
        found.append(lp)
    return found


def prepacked_panel(plan, base):
    """The panels of ``plan`` (a register tile whose `plan.prepack` is set) read from the
    parameter itself, given their layout: ``(wrap, (buffer, load))`` as `packed_panel`
    returns, ``wrap`` adding nothing; None when the parameter cannot take it (another nest
    gave it a layout first)."""
    state = _current.get()
    ld, vec = plan.pack, plan.inner
    loops = _index_loops(ld, list(plan.outer_s) + [vec] + list(plan.others_r))
    if state is None or loops is None or \
            {id(lp) for lp in loops if lp is not None} != {id(lp) for lp in [*plan.outer_s, vec, *plan.others_r]}:
        return None
    axes = [*plan.outer_s, "tiles", *plan.others_r, "tile"]
    tile = plan.tile
    # The layout, by the original axis each packed axis runs along, and the tiles' shift.
    signature = tuple(a if isinstance(a, str) else loops.index(a) for a in axes) + (
        id(vec) in plan.shifted, tile)
    claim = state.claimed.get(ld.buffer)
    if claim is not None and claim[3] != signature:
        return None  # another nest gave it another layout
    n_tiles = -(-vec.const_extent // tile)
    shape = tuple(n_tiles if a == "tiles" else tile if a == "tile" else a.const_extent for a in axes)
    dtype = vec.dtype
    buffer = dataclasses.replace(ld.buffer, shape=[tir.IntImm("int64", n) for n in shape], strides=[])

    def start(t):  # where the vector tile ``t`` starts (the last shifted back, `shifted_start`)
        first = tir.Mul(dtype, t, tir.IntImm(dtype, tile))
        return shifted_start(first, vec.extent, tile) if id(vec) in plan.shifted else first

    # Packed indices -> original: the inverse, which the build gathers the constant by.
    q = [tir.Var(dtype, f"p{i}") for i in range(len(axes))]
    at = {id(a): v for a, v in zip(axes, q) if not isinstance(a, str)}
    at[id(vec)] = tir.Add(dtype, start(q[len(plan.outer_s)]), q[-1])
    source = IndexMap(q, [tir.IntImm(dtype, 0) if lp is None else at[id(lp)] for lp in loops])
    # Original -> packed: what other reads of the parameter in the function go through.
    x = [tir.Var(dtype, f"i{d}") for d in range(len(loops))]
    of = {id(lp): v for lp, v in zip(loops, x) if lp is not None}
    t = tir.FloorDiv(dtype, of[id(vec)], tir.IntImm(dtype, tile))
    forward = IndexMap(x, [t if a == "tiles" else tir.Sub(dtype, of[id(vec)], start(t)) if a == "tile"
                           else of[id(a)] for a in axes])
    if claim is None:
        state.claimed[ld.buffer] = (buffer, PackedLayout(shape, source), forward, signature)
    buffer = state.claimed[ld.buffer][0]
    # In the tile: param[outer iterators..., vector tile, reduce iterators..., position in the tile].
    tile_index = plan.vec_outer if plan.vec_outer is not None else tir.IntImm(dtype, 0)
    origin = base.get(vec.iv.var)
    position = vec.iv.var if origin is None else tir.Sub(dtype, vec.iv.var, origin)
    index = [tile_index if a == "tiles" else position if a == "tile" else a.iv.var for a in axes]
    return (lambda stmt: stmt), (ld.buffer, tir.BufferLoad(ld.dtype, buffer, index))


def claim_whole(buffer: tir.Buffer, new: tir.Buffer, layout, signature: tuple) -> bool:
    """Give the layout-free parameter ``buffer`` the layout ``layout`` (an object the build
    packs with, `prepack_constants.pack_array`) as the buffer ``new``, when it is open to one
    and has none yet; whether it did. The caller reads only ``new`` from then on: nothing reads
    ``buffer`` through a forward map (a Winograd convolution's transformed weights,
    `winograd`)."""
    state = _current.get()
    if state is None or state.frozen or buffer not in state.buffers or buffer in state.claimed:
        return False
    state.claimed[buffer] = (new, layout, None, signature)
    return True


def with_packed_params(func: tir.PrimFunc, body) -> tuple:
    """``(buffer_map, body, attrs)`` of the scheduled ``func`` with the layouts given: each
    packed parameter's new buffer, the reads left of the old one through its forward map,
    and `PACKED_LAYOUTS_ATTR` (unchanged when none was given)."""
    state = _current.get()
    attrs = dict(func.attrs)
    if state is None or not state.claimed:
        return func.buffer_map, body, attrs
    body = _ForwardReads(state.claimed).visit_stmt(body)
    buffer_map = {p: state.claimed[b][0] if b in state.claimed else b for p, b in func.buffer_map.items()}
    attrs[PACKED_LAYOUTS_ATTR] = {state.buffers[b]: layout for b, (_, layout, _, _) in state.claimed.items()}
    return buffer_map, body, attrs


class _ForwardReads(IRMutator):
    """Reads of a packed parameter's old buffer turned into reads of its new one (the forward
    map), and block regions naming it into the whole new buffer."""

    def __init__(self, claimed: dict) -> None:
        super().__init__()
        self.claimed = claimed

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer in self.claimed:
            buffer, _, forward, _ = self.claimed[e.buffer]
            indices = [self.visit_expr(i) for i in e.indices]
            mapping = dict(zip(forward.initial_indices, indices))
            return tir.BufferLoad(e.dtype, buffer, [substitute(f, mapping) for f in forward.final_indices], e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        s = super().visit_stmt(s)
        if isinstance(s, tir.Block) and any(r.buffer in self.claimed for r in s.reads):
            s = dataclasses.replace(s, reads=[self._whole(r) for r in s.reads])
        return s

    def _whole(self, region):
        if region.buffer not in self.claimed:
            return region
        buffer = self.claimed[region.buffer][0]
        return tir.BufferRegion(buffer, [tir.Range(tir.IntImm("int64", 0), d) for d in buffer.shape])


def _only_loaded(body, buffers: dict) -> dict:
    """The ``buffers`` the function only loads from (a store or a match_buffer keeps a layout)."""
    kept = dict(buffers)

    class _Writes(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                kept.pop(s.buffer, None)
            if isinstance(s, tir.Block):
                for m in s.match_buffers:
                    kept.pop(getattr(getattr(m, "source", None), "buffer", None), None)
            return super().visit_stmt(s)

    _Writes().visit_stmt(body)
    return kept
