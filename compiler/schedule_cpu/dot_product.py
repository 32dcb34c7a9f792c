"""The dot product: a float sum along a loop every operand reads contiguously, with no
spatial loop to vectorize (a matrix-vector product whose matrix is in rows, a row sum), built
as vectors of partial sums (`DotProduct`); a maximum or minimum (softmax's row maximum) the
same way, as vectors of partial maxima, which round nothing: the same bits on numbers (which
of two NaNs or signed zeros comes out may differ, as with the order of the inputs).

Its own module because it is the one schedule here that changes the order of additions, and
it is built directly rather than through schedule primitives (see `DotProduct`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_visitor import reads_memory

from ..lower_tir import VECTORIZE_ANN
from .analysis import impure, reduction_rhs
from .host import vector_bytes
from .nest import Nest
from .plan import worth_parallel
from .symbolic import shifted_start, symbolic_extents_small

DOT_ROWS = 8  # outputs a dot-product nest computes at once, each its own vector accumulator


class DotProduct:
    """A sum along a loop every operand reads contiguously, with no spatial loop to
    vectorize: a matrix-vector product whose matrix is in rows (``x @ W.T`` at batch 1, as
    `ReadTransposedInPlace` leaves it), a row sum. Each of `DOT_ROWS` outputs gets a vector of
    partial sums: lane ``l`` adds the terms ``k = l, l + L, l + 2L, ...``; the lanes are then
    added in order, after the init value::

        for <other spatial loops>, jo:                 # the outermost one parallel
            acc[r, l] = 0                              # r < rows (unrolled), l < L (vector)
            for ko: acc[r, l] += f(j = jo * rows + r, k = ko * L + l)
            out[j] = init; for l: out[j] += acc[r, l]
            for t < K % L: out[j] += f(j, k = (K // L) * L + t)   # the terms past the last vector

    The only schedule here that changes the order of additions (the sequential order would
    leave the vector units idle: one scalar multiply-add per load of a matrix row spread
    over 16 rows); the bound of the rounding error is the same as the sequential sum's
    (``K`` additions of the same terms), tested in tests/schedules/test_schedule_dot.py. It is built
    directly, not through schedule primitives (an rfactor would allocate the partial sums
    for the whole output, in the layout of the loops)."""

    def __init__(self, info, j, k, rows: int, lanes: int, block, store, init, parallel: bool) -> None:
        self.info, self.j, self.k, self.rows, self.lanes = info, j, k, rows, lanes
        self.block, self.store, self.init, self.parallel = block, store, init, parallel

    def build(self) -> tir.Stmt:
        """The statement that replaces the nest."""
        if self.j.const_extent is not None:
            # Rows no tile of `DOT_ROWS` divides (ViT's 197): tiles of that many, the last
            # shifted back, rather than one row at a time.
            return self._build(self.rows, self.j.const_extent % self.rows != 0, self.block.name)
        # Rows of symbolic count: tiles of `rows` outputs, the last one shifted back to end at
        # the last row (`shifted_start`), when there are that many rows; else one at a time.
        return tir.IfThenElse(tir.GE("bool", self.j.extent, tir.IntImm(self.j.dtype, self.rows)),
                              self._build(self.rows, True, self.block.name),
                              self._build(1, False, self.block.name + "_small"))

    def _build(self, rows: int, shifted: bool, name: str) -> tir.Stmt:
        """The nest, ``rows`` outputs at a time; ``shifted``: the last tile of rows ends at the
        symbolic extent, overlapping the one before it. Each output's total is then added up
        in a register and stored once: a thread recomputing an output another thread also
        computes only ever stores the same final value."""
        j, k, lanes = self.j, self.k, self.lanes
        out = self.store.buffer
        dt = out.dtype
        jo = tir.Var(j.dtype, f"{j.var.name}_o")
        r = tir.Var(j.dtype, f"{j.var.name}_r")
        ko = tir.Var(k.dtype, f"{k.var.name}_o")
        lane = tir.Var(k.dtype, f"{k.var.name}_l")
        acc = tir.Buffer(f"{out.name}_dot", [tir.IntImm("int64", rows), tir.IntImm("int64", lanes)], dt, scope="local")
        mapping = self._iterator_values(jo, r, ko, lane, rows, shifted)
        rhs = substitute(reduction_rhs(self.store), mapping)
        indices = [substitute(i, mapping) for i in self.store.indices]
        cell = [r, lane]
        vector = {VECTORIZE_ANN: lanes}
        combine = type(self.store.value)
        # Partial sums start at 0 (the init is added once, in `_totals`); partial maxima and
        # minima at the init value, which taking it again does not change.
        first = tir.const(0, dt) if combine is tir.Add else substitute(self.init.value, mapping)
        start = loop_from_zero(r, rows, loop_from_zero(lane, lanes, tir.BufferStore(acc, first, cell),
                                                       annotations=vector), kind="unroll")
        update = tir.BufferStore(acc, combine(dt, tir.BufferLoad(dt, acc, cell), rhs), cell, self.store.span)
        accumulate = loop_from_zero(ko, k.const_extent // lanes, loop_from_zero(
            r, rows, loop_from_zero(lane, lanes, update, annotations=vector), kind="unroll"))
        tail = self._tail(rhs, ko, lane)
        finish, allocs = self._totals(acc, r, lane, rows, mapping, indices, shifted, tail)
        body = tir.BlockRealize([], tir.IntImm("bool", 1), tir.Block(
            name, [], [], [], tir.seq([start, accumulate, finish]), alloc_buffers=allocs))
        return self._around(body, jo, rows, shifted)

    def _iterator_values(self, jo, r, ko, lane, rows: int, shifted: bool) -> dict:
        """Each block iterator's value in the new loops: the row ``j`` from the row tile
        ``jo`` (shifted back for the last tile when ``shifted``) and the row in it ``r``, the
        reduce iterator ``k`` from ``ko`` and the lane; the others are their loops'."""
        j, k, lanes = self.j, self.k, self.lanes
        mapping = {}
        for lp in self.info:
            if lp.iv is None:
                continue
            if lp is j:
                start = tir.Mul(j.dtype, jo, tir.IntImm(j.dtype, rows))
                if shifted:
                    start = shifted_start(start, j.extent, rows)
                mapping[lp.iv.var] = jo if rows == 1 and j.const_extent is None else tir.Add(j.dtype, start, r)
            elif lp is k:
                mapping[lp.iv.var] = tir.Add(k.dtype, tir.Mul(k.dtype, ko, tir.IntImm(k.dtype, lanes)), lane)
            else:
                mapping[lp.iv.var] = lp.var
        return mapping

    def _tail(self, rhs, ko, lane):
        """``(t, term)``: the terms past the last whole vector (``K % L`` of them), term ``t``
        as the rhs at ``k = (K // L) * L + t``; None when ``L`` divides ``K``."""
        k, lanes = self.k, self.lanes
        extra = k.const_extent % lanes
        if not extra:
            return None
        t = tir.Var(k.dtype, f"{k.var.name}_t")
        return t, extra, substitute(rhs, {ko: tir.IntImm(k.dtype, k.const_extent // lanes), lane: t})

    def _totals(self, acc, r, lane, rows: int, mapping: dict, indices: list, shifted: bool, tail=None) -> tuple:
        """The loop storing each output: the init value plus the lanes of its partial sums,
        in order; with ``shifted``, added up in a one-element buffer (a register) first.
        Returns the loop and the buffers the nest allocates."""
        out = self.store.buffer
        dt = out.dtype
        cell = [r, lane]
        combine = type(self.store.value)
        if not shifted:
            total = tir.BufferStore(out, combine(dt, tir.BufferLoad(dt, out, indices), tir.BufferLoad(dt, acc, cell)),
                                    indices, self.store.span)
            steps = [tir.BufferStore(out, substitute(self.init.value, mapping), indices, self.store.span),
                     loop_from_zero(lane, self.lanes, total)]
            if tail is not None:
                t, extra, term = tail
                steps.append(loop_from_zero(t, extra, tir.BufferStore(
                    out, combine(dt, tir.BufferLoad(dt, out, indices), term), indices, self.store.span)))
            return loop_from_zero(r, rows, tir.seq(steps)), [acc]
        one = tir.Buffer(f"{out.name}_total", [tir.IntImm("int64", 1)], dt, scope="local")
        at = [tir.IntImm("int64", 0)]
        total = tir.BufferStore(one, combine(dt, tir.BufferLoad(dt, one, at), tir.BufferLoad(dt, acc, cell)), at)
        steps = [tir.BufferStore(one, substitute(self.init.value, mapping), at),
                 loop_from_zero(lane, self.lanes, total)]
        if tail is not None:
            t, extra, term = tail
            add = tir.BufferStore(one, combine(dt, tir.BufferLoad(dt, one, at), term), at)
            steps.append(loop_from_zero(t, extra, add))
        steps.append(tir.BufferStore(out, tir.BufferLoad(dt, one, at), indices, self.store.span))
        return loop_from_zero(r, rows, tir.seq(steps)), [acc, one]

    def _around(self, body: tir.Stmt, jo, rows: int, shifted: bool = False) -> tir.Stmt:
        """``body`` (one tile of rows) in the loop over the row tiles ``jo`` and the other
        spatial loops, the outermost worth it parallel."""
        j, k = self.j, self.k
        if j.const_extent is not None:
            body = loop_from_zero(jo, -(-j.const_extent // rows) if shifted else j.const_extent // rows, body)
        else:  # tiles of rows, the last one shifted back; or, with one row each, every row
            count = j.extent if rows == 1 else tir.FloorDiv(
                j.dtype, tir.Add(j.dtype, j.extent, tir.IntImm(j.dtype, rows - 1)), tir.IntImm(j.dtype, rows))
            body = tir.For(jo, tir.IntImm(j.dtype, 0), count, "serial", body)
        outer = [lp for lp in self.info if lp is not j and lp is not k]
        for lp in reversed(outer):
            body = tir.For(lp.var, lp.min, lp.extent, "serial", body)
        if self.parallel:
            body = parallel_outermost(body)
        return body


def loop_from_zero(var, extent: int, body, kind="serial", annotations=None) -> tir.For:
    """A loop of ``var`` from 0 to the constant ``extent``."""
    return tir.For(var, tir.IntImm(var.dtype, 0), tir.IntImm(var.dtype, extent), kind, body,
                   annotations=dict(annotations or {}))


def parallel_outermost(stmt: tir.Stmt) -> tir.Stmt:
    """``stmt`` (a loop nest) with its outermost loop of more than one iteration parallel (in
    a `small_nest`, a loop of symbolic extent counts as one of a few iterations: the loop
    inside it goes parallel, as in the nest's static twin)."""
    if not isinstance(stmt, tir.For):
        return stmt
    few = tir.is_const_int(stmt.extent, 1) or (
        symbolic_extents_small.get() and not isinstance(stmt.extent, tir.IntImm) and isinstance(stmt.body, tir.For))
    if few:
        return dataclasses.replace(stmt, body=parallel_outermost(stmt.body))
    return dataclasses.replace(stmt, kind="parallel")


def plan_dot_product(nest: Nest, symbolic: bool = True) -> Optional[DotProduct]:
    """A `DotProduct` for this nest, or None: a float sum, maximum or minimum (``+``,
    ``max``, ``min``, with an init) along one reduce loop of constant extent, at least two
    vectors long, along which every read is
    contiguous or invariant (and one at least contiguous); the innermost spatial loop of
    constant extent gives the rows; with ``symbolic``, one of symbolic extent may
    (`DotProduct.build`: tiles of rows, the last one shifted back)."""
    info, block, store, init, ebytes = nest.info, nest.block, nest.store, nest.init, nest.ebytes
    nontrivial, accesses = nest.nontrivial, nest.accesses
    if not isinstance(store.value, (tir.Add, tir.Max, tir.Min)) or init is None or not isinstance(init, tir.BufferStore):
        return None
    if not tir.is_float(store.buffer.dtype) or any(not tir.is_const_int(lp.min, 0) for lp in info):
        return None
    if not isinstance(store.value, tir.Add) and (impure(init.value) or reads_memory(init.value)):
        return None  # the lanes start from the init value: it must be a value, the same for all
    reduce_ = [lp for lp in nontrivial if lp.kind == "R"]
    spatial = [lp for lp in nontrivial if lp.kind == "S"]
    if len(reduce_) != 1 or not spatial:
        return None
    k, j = reduce_[0], spatial[-1]
    lanes = max(1, vector_bytes() // ebytes)
    if k.const_extent is None or k.const_extent < 2 * lanes:
        return None  # (a remainder of K % L terms is added after the lanes: `DotProduct._tail`)
    if j.const_extent is None:
        if not (symbolic and j.shiftable):
            return None
        return DotProduct(info, j, k, DOT_ROWS, lanes, block, store, init, worth_parallel(info))
    strides = [st.get(k.iv.var, 0) for st in accesses[1:]]
    if any(st not in (0, 1) for st in strides) or 1 not in strides:
        return None
    rows = max(d for d in range(1, min(j.const_extent, DOT_ROWS) + 1) if j.const_extent % d == 0)
    if rows < DOT_ROWS // 2 and j.const_extent >= DOT_ROWS and tir.is_const_int(j.min, 0) and j.iv is not None:
        rows = DOT_ROWS  # the last tile shifted back (`DotProduct.build`)
    return DotProduct(info, j, k, rows, lanes, block, store, init, worth_parallel(info))
