"""The strided window: a pooling window read with a stride along the output's
contiguous loop (a 3 x 3 max pooling of stride 2 reads ``X[..., 2x + rx]``), built as a row
of outputs whose window taps are loaded together (`StridedWindow`).

Why: the register tile vectorizes a loop its operands are read along with unit stride, so a
stride-2 window got scalar accumulators, one strided load per tap and output (resnet18's
max pooling: 0.9 ms of its 11; a depthwise convolution of stride 2 likewise). Here the
window's last loop (``rx``) is unrolled inside the vector loop over the outputs, so the taps
``2x, 2x + 1, 2x + 2`` of a vector of outputs are one interleaved access group, which LLVM
loads as whole vectors and shuffles apart (two vector loads and a permute per tap on
AVX-512) instead of gathering lanes one by one::

    for <the other spatial loops>:                          # the outermost one parallel
        acc[x] = init                                        # x < X, vectorized
        for <the window's other loops> (ry ...):
            acc[x] = acc[x] <op> f(rx = 0) <op> f(rx = 1) ... # vectorized; the taps unrolled
        out[..., x] = acc[x]

Each output takes its terms in the original order (the window's loops in their order, the
unrolled one innermost, as it was), so results are the same bits. Built directly, like the
dot product: no schedule primitive unrolls a reduce loop inside a spatial one."""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute

from ..lower_tir import VECTORIZE_ANN
from .analysis import reduction_rhs
from .dot_product import loop_from_zero, parallel_outermost
from .host import vector_bytes
from .nest import Nest
from .plan import worth_parallel

MAX_TAPS = 8  # window taps along the strided loop unrolled into the vector loop's body
MAX_STRIDE = 4  # strides whose interleaved groups LLVM loads as vectors and shuffles


class StridedWindow:
    """A reduction over a window whose last loop ``r`` offsets a strided read along the
    output's contiguous loop ``x`` (see the module docstring)."""

    def __init__(self, nest: Nest, x, r, lanes: int, parallel: bool) -> None:
        self.nest, self.x, self.r, self.lanes, self.parallel = nest, x, r, lanes, parallel

    def build(self) -> tir.Stmt:
        """The statement that replaces the nest."""
        nest, x, r = self.nest, self.x, self.r
        store, init = nest.store, nest.init
        out = store.buffer
        dt = out.dtype
        xv = tir.Var(x.var.dtype, x.var.name)
        acc = tir.Buffer(f"{out.name}_win", [tir.IntImm("int64", x.const_extent)], dt, scope="local")
        acc.data = tir.Var("handle", acc.name)
        mapping = {}
        for lp in nest.info:
            if lp.iv is not None and lp is not r:
                mapping[lp.iv.var] = xv if lp is x else (lp.min if tir.is_const_int(lp.extent, 1) else lp.var)
        vector = {VECTORIZE_ANN: self.lanes}
        cell = [xv]
        combine = type(store.value)
        rhs = reduction_rhs(store)
        value = tir.BufferLoad(dt, acc, cell)
        for t in range(r.const_extent):
            tap = {**mapping, r.iv.var: tir.Add(r.dtype, r.min, tir.IntImm(r.dtype, t)) if not tir.is_const_int(
                r.min, 0) else tir.IntImm(r.iv.var.dtype, t)}
            value = combine(dt, value, substitute(rhs, tap))
        update = loop_from_zero(xv, x.const_extent, tir.BufferStore(acc, value, cell, store.span), annotations=vector)
        for lp in reversed([lp for lp in nest.reduce_loops if lp is not r]):
            update = tir.For(lp.var, lp.min, lp.extent, "serial", update)
        start = loop_from_zero(xv, x.const_extent, tir.BufferStore(acc, substitute(init.value, mapping), cell),
                               annotations=vector)
        indices = [substitute(i, mapping) for i in store.indices]
        final = tir.BufferStore(out, tir.BufferLoad(dt, acc, cell), indices, store.span)
        finish = loop_from_zero(xv, x.const_extent, final, annotations=vector)
        body = tir.BlockRealize([], tir.IntImm("bool", 1), tir.Block(
            nest.block.name + "_window", [], [], [], tir.seq([start, update, finish]), alloc_buffers=[acc]))
        for lp in reversed([lp for lp in nest.nontrivial if lp.kind == "S" and lp is not x]):
            body = tir.For(lp.var, lp.min, lp.extent, "serial", body)
        return parallel_outermost(body) if self.parallel else body


def plan_strided_window(nest: Nest) -> Optional[StridedWindow]:
    """A `StridedWindow` for this nest, or None: a reduction (``+``, ``max``, ``min``, with an
    init) whose output is contiguous along a spatial loop ``x`` of constant extent (at least a
    vector), whose last reduce loop ``r`` has a constant extent of at most `MAX_TAPS`, and
    that reads some operand with a stride ``s`` (2 to `MAX_STRIDE`, at most ``r``'s extent, so
    the taps of a vector of outputs cover whole vectors of it) along ``x`` and unit stride
    along ``r``; no other read varies along both the window and ``x`` (a pooling, or a
    depthwise convolution, whose weights vary with the window only: one per tap, broadcast
    to the vector of outputs)."""
    store, init = nest.store, nest.init
    if not isinstance(store.value, (tir.Add, tir.Max, tir.Min)) or not isinstance(init, tir.BufferStore):
        return None
    if not nest.reduce_loops:
        return None
    out_strides = nest.accesses[0]
    spatial = [lp for lp in nest.nontrivial if lp.kind == "S"]
    x = next((lp for lp in spatial if out_strides.get(lp.iv.var, 0) == 1), None)
    r = nest.reduce_loops[-1]
    lanes = max(1, vector_bytes() // nest.ebytes)
    if x is None or x.const_extent is None or x.const_extent < lanes or not tir.is_const_int(x.min, 0):
        return None
    if r.const_extent is None or not 2 <= r.const_extent <= MAX_TAPS:
        return None
    strided = False
    window = [lp.iv.var for lp in nest.reduce_loops]
    for strides in nest.accesses[1:]:
        along = strides.get(x.iv.var, 0)
        if along in (0, 1):
            if along == 1 and any(strides.get(v, 0) for v in window):
                return None  # a window read contiguously: the register tile vectorizes it
            continue  # (a depthwise convolution's weights: one per tap, the same for every x)
        if not 2 <= along <= min(MAX_STRIDE, r.const_extent) or strides.get(r.iv.var, 0) != 1:
            return None
        strided = True
    if not strided:
        return None
    return StridedWindow(nest, x, r, _row_width(x.const_extent, lanes), worth_parallel(nest.info))


def _row_width(extent: int, lanes: int) -> int:
    """The vector width for a row of ``extent`` outputs: of ``lanes``, ``lanes / 2`` (at least
    4), the one with the least work, a vector iteration counting as two outputs computed one
    at a time. LLVM loads the taps' interleaved group as wide vectors that read past the last
    output's window, so it always leaves at least one output, and whatever a vector does not
    cover, to a scalar loop: 28 outputs are 1 vector and 12 scalars at 16 lanes, 3 and 4 at 8
    (0.88x the time, mobilenet_v2's second depthwise convolution of stride 2); 56 are 3 and 8
    at 16 lanes, 6 and 8 at 8."""

    def work(w: int) -> float:
        vectors = (extent - 1) // w
        return vectors + (extent - vectors * w) / 2

    return min((w for w in (lanes, lanes // 2) if w >= 4), key=lambda w: (work(w), -w))
