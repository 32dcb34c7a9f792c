"""Pass 5: on-chip buffers shrink to what one thread, block or warp touches.

Local and shared buffers shrink to the region one thread (local) or one thread block (shared)
touches, fragments to one warp's, rebased on the region's corner (`compact_buffers`), and take
the padded strides a schedule's `storage_align` asked for (`collect_dim_aligns`,
`aligned_strides`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import TIRVisitor

from ...ir.arith import const_int_bound, eval_range
from ...ir.arith.canonical import Canonical
from .common import ON_CHIP_SCOPES, THREAD_TAGS, THREAD_VARS, buffer_accesses, is_shared


def collect_dim_aligns(func: tir.PrimFunc) -> dict:
    """The ``buffer_dim_align`` annotations `storage_align` leaves on blocks, gathered before
    the blocks are gone: buffer data Var -> {axis: (factor, offset)}."""
    aligns: dict = {}

    class V(TIRVisitor):
        def visit_Block(self, node) -> None:
            for entry in node.annotations.get("buffer_dim_align", ()):
                index, axis, factor, offset = (int(getattr(v, "value", v)) for v in entry)
                if index < len(node.writes):
                    aligns.setdefault(node.writes[index].buffer.data, {})[axis] = (factor, offset)
            self.generic_visit(node)

    V().visit(func.body)
    return aligns


def aligned_strides(shape: list, dims: dict) -> Optional[list]:
    """Strides (in elements) for a buffer of constant ``shape`` whose dimensions ``dims``
    (axis -> (factor, offset)) must have ``stride % factor == offset % factor``: built from the
    innermost dimension out, each aligned stride rounded up to the next such value, as TVM's
    buffer compaction does. None when the shape is not constant or nothing is padded."""
    if not all(isinstance(d, tir.IntImm) for d in shape):
        return None
    strides = [0] * len(shape)
    stride = 1
    for axis in reversed(range(len(shape))):
        if axis in dims:
            factor, offset = dims[axis]
            stride += (factor + offset - stride % factor) % factor
        strides[axis] = stride
        stride *= shape[axis].value
    row_major = [1] * len(shape)
    for axis in reversed(range(len(shape) - 1)):
        row_major[axis] = row_major[axis + 1] * shape[axis + 1].value
    return None if strides == row_major else strides


def compact_buffers(body: tir.Stmt, extents: dict, aligns: Optional[dict] = None) -> tir.Stmt:
    """Shrink each local/shared `Allocate` of a kernel to the box its accesses cover, relaxing
    the loops inside the allocation and, for shared memory, the thread indices (the block's
    threads share it); indices are rebased on the box's corner. A buffer named in ``aligns``
    (`collect_dim_aligns`) then gets the padded strides `aligned_strides` gives its new shape.

    Why: a cache declared with the shape of the whole tensor would not fit on chip; each
    thread (local) or block (shared) only ever touches a tile of it. The padding is computed
    here because it depends on the tile's shape, which only compaction knows."""
    aligns = aligns or {}
    thread_dom = {THREAD_VARS[t]: tir.Range(tir.IntImm("int32", 0), make_cast(e, "int32"))
                  for t, e in extents.items() if t.startswith("threadIdx")}
    ranges = {THREAD_VARS[t]: (tir.IntImm("int32", 0), make_cast(e, "int32")) for t, e in extents.items()}
    # Buffers also used through their data pointer (a tensor-core fragment or a shared tile
    # handed to an intrinsic): what that touches is not known here, so they keep the shape
    # they are declared with. (Fragments a schedule made are loads and stores until
    # `tensorize_wmma`, which runs after this, and shrink like local buffers: to one warp's.)
    opaque = buffer_accesses(body).pointers

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For):  # the loops around an allocation bound what it depends on
                ranges[s.loop_var] = (s.min, s.extent)
            s = super().visit_stmt(s)
            if isinstance(s, Allocate) and s.buffer.scope in ON_CHIP_SCOPES and s.buffer.shape:
                dims = aligns.get(s.buffer.data)
                if s.buffer.data not in opaque:
                    s = _compact_one(s, thread_dom if is_shared(s.buffer) else {}, ranges)
                if dims:
                    s = _align_one(s, dims)
            return s

    return M().visit_stmt(body)


def _align_one(alloc: Allocate, dims: dict) -> Allocate:
    buf = alloc.buffer
    strides = aligned_strides(buf.shape, dims)
    if strides is None or buf.strides:
        return alloc
    dtype = buf.shape[0].dtype
    new = dataclasses.replace(buf, strides=[tir.IntImm(dtype, v) for v in strides])
    return Allocate(new, _rebind(alloc.body, buf, new), alloc.storage)


def _rebind(stmt, old: tir.Buffer, new: tir.Buffer, rebase=None):
    """``stmt`` with every load and store of ``old`` going to ``new``, indices mapped by
    ``rebase`` (a function of the index list) when given."""
    rebase = rebase or (lambda indices: indices)

    class R(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, tir.BufferLoad) and e.buffer is old:
                return tir.BufferLoad(e.dtype, new, rebase([self.visit_expr(i) for i in e.indices]), e.span)
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore) and s.buffer is old:
                return tir.BufferStore(new, self.visit_expr(s.value), rebase([self.visit_expr(i) for i in s.indices]), s.span)
            return super().visit_stmt(s)

    return R().visit_stmt(stmt)


class _AccessCollector(TIRVisitor):
    """``(indices, loop domain)`` of every access to one buffer: the loops (Var -> Range)
    enclosing it inside the statement walked."""

    def __init__(self, buf) -> None:
        self.buf = buf
        self.dom: dict = {}
        self.found: list = []

    def visit_For(self, node) -> None:
        outer = self.dom
        self.dom = {**outer, node.loop_var: tir.Range(node.min, node.extent)}
        self.visit(node.body)
        self.dom = outer

    def visit_BufferLoad(self, node) -> None:
        if node.buffer is self.buf:
            self.found.append((node.indices, self.dom))
        self.generic_visit(node)

    visit_BufferStore = visit_BufferLoad


def _accesses(stmt, buf) -> list:
    c = _AccessCollector(buf)
    c.visit(stmt)
    return c.found


# int64 stand-ins for the thread indices: int64 index expressions hold ``int64(threadIdx.x)``,
# which the range analysis sees through only as a variable of its own.
_WIDE_THREAD_VARS = {tag: tir.Var("int64", tag) for tag in THREAD_TAGS}


def _widen_threads(e):
    class M(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.Cast) and x.dtype == "int64" and isinstance(x.value, tir.Var):
                for tag, var in THREAD_VARS.items():
                    if x.value is var:
                        return _WIDE_THREAD_VARS[tag]
            return super().visit_expr(x)

    return M().visit_expr(e)


def _narrow_threads(e):
    return substitute(e, {w: tir.Cast("int64", THREAD_VARS[t]) for t, w in _WIDE_THREAD_VARS.items()})


def _compact_one(alloc: Allocate, thread_dom: dict, ranges: dict) -> Allocate:
    buf = alloc.buffer
    accesses = [([_widen_threads(i) for i in idx], dom) for idx, dom in _accesses(alloc.body, buf)]
    if not accesses or buf.strides:
        return alloc
    thread_dom = {**thread_dom, **{_WIDE_THREAD_VARS[v.name]: tir.Range(tir.IntImm("int64", 0),
                                                                          make_cast(r.extent, "int64"))
                                   for v, r in thread_dom.items()}}
    ranges = {**ranges, **{_WIDE_THREAD_VARS[v.name]: (tir.IntImm("int64", 0), make_cast(r[1], "int64"))
                           for v, r in ranges.items() if v.name in _WIDE_THREAD_VARS and v in THREAD_VARS.values()}}
    ndim = len(buf.shape)
    lows: list = [None] * ndim
    highs: list = [None] * ndim
    c = Canonical(dict(ranges))
    for indices, dom in accesses:
        dom = {**thread_dom, **dom}
        for d, idx in enumerate(indices):
            if lows[d] is False:
                continue
            r = eval_range(idx, dom, ranges)
            if r is None:
                lows[d] = False
                continue
            lo, ext = r
            hi = c.simplify(tir.Add(lo.dtype, lo, make_cast(ext, lo.dtype)))
            if lows[d] is None:
                lows[d], highs[d] = lo, hi
                continue
            lows[d] = _merge(lows[d], lo, c, ranges, lower=True)
            highs[d] = _merge(highs[d], hi, c, ranges, lower=False) if lows[d] is not None else None
            if lows[d] is None or highs[d] is None:
                lows[d] = False
    new_shape, offsets = [], []
    changed = False
    for d in range(ndim):
        old = buf.shape[d]
        if lows[d] in (None, False) or highs[d] is None:
            new_shape.append(old)
            offsets.append(None)
            continue
        ext = c.simplify(tir.Sub(lows[d].dtype, highs[d], lows[d]))
        if not isinstance(ext, tir.IntImm):
            hi = const_int_bound(ext, ranges)[1]
            ext = tir.IntImm(lows[d].dtype, hi) if isinstance(hi, int) and hi < 2**31 else None
        if ext is None or (isinstance(old, tir.IntImm) and ext.value >= old.value):
            new_shape.append(old)
            offsets.append(None)
            continue
        new_shape.append(tir.IntImm(old.dtype if isinstance(old, tir.PrimExpr) else "int32", max(ext.value, 1)))
        offsets.append(_narrow_threads(lows[d]))
        changed = True
    if not changed:
        return alloc
    new = tir.Buffer(buf.name, new_shape, buf.dtype, data=buf.data, scope=buf.scope,
                     align=buf.align)

    def rebase(indices):
        out = []
        for i, off in zip(indices, offsets):
            out.append(i if off is None else c.simplify(tir.Sub(i.dtype, i, make_cast(off, i.dtype))))
        return out

    return Allocate(new, _rebind(alloc.body, buf, new, rebase), alloc.storage)


def _merge(a, b, c: Canonical, ranges: dict, lower: bool):
    """The smaller (``lower``) or larger of two bounds when their difference is a constant
    (given the ranges of the variables around); None otherwise."""
    d = c.simplify(tir.Sub(a.dtype, a, make_cast(b, a.dtype)))
    if not isinstance(d, tir.IntImm):
        lo, hi = const_int_bound(d, ranges)
        if lo != hi or not isinstance(lo, int):
            return None
        d = tir.IntImm(a.dtype, lo)
    if lower:
        return b if d.value > 0 else a
    return b if d.value < 0 else a
