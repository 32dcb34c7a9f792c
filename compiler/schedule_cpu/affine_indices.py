"""Indices that divide by a symbolic extent, rewritten affine before the nests are planned.

A reshape over a symbolic sequence length indexes through ``// n`` and ``% n``, which no rule
can take a stride of; the block iterators' ranges resolve them (`arith.symbolic_divmod`), and
the nest is then scheduled as its static twin is. A rewrite of the function before any rule
runs, so it lives apart from them."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir

from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_visitor import contains, vars_in

from ...ir.arith.canonical import Canonical
from ...ir.arith.symbolic_divmod import simplify_divmod


class AffineSymbolicIndices(IRMutator):
    """Rewrites, in each block, the indices that divide by a symbolic extent and that the
    block iterators' ranges resolve (`arith.symbolic_divmod`: a reshape over a symbolic
    sequence length indexes ``x[(... ) // (256 * n), (...) // 256 % n, ...]`` where the static
    reshape has ``x[v0, v2, ...]``): the same values, but affine, so the nest can be
    vectorized and run in parallel as its static twin is. Static indices are left as they
    are, unless ``static``: once stages are inlined (`inline`), a reshape's and a transpose's
    indices compose into nests of ``//`` and ``%`` by constants that the iterators' ranges
    also resolve (ViT's split of the attention heads reads ``x[v1, 0, v2 * 64 + v3]``)."""

    def __init__(self, static: bool = False) -> None:
        super().__init__()
        self.ranges: dict = {}
        self.static = static  # constant divisors too (`index`)

    def visit_stmt(self, s):
        if isinstance(s, tir.Block) and s.iter_vars:
            saved = self.ranges
            self.ranges = dict(saved)
            self.ranges.update({iv.var: (iv.dom.min, iv.dom.extent) for iv in s.iter_vars})
            try:
                block = super().visit_stmt(s)
                regions = [[self.region(r) for r in rs] for rs in (block.reads, block.writes)]
                if any(a is not b for new, old in zip(regions, (block.reads, block.writes)) for a, b in zip(new, old)):
                    block = dataclasses.replace(block, reads=regions[0], writes=regions[1])
                return block
            finally:
                self.ranges = saved
        if isinstance(s, tir.BufferStore) and self.ranges:
            s = super().visit_stmt(s)
            indices = [self.index(i) for i in s.indices]
            return s if all(a is b for a, b in zip(indices, s.indices)) else dataclasses.replace(s, indices=indices)
        return super().visit_stmt(s)

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if isinstance(e, tir.BufferLoad) and self.ranges:
            indices = [self.index(i) for i in e.indices]
            if any(a is not b for a, b in zip(indices, e.indices)):
                return tir.BufferLoad(e.dtype, e.buffer, indices, e.span)
        return e

    def index(self, e):
        """``e`` resolved (`simplify_divmod`) and put in canonical form, if it divides and
        mentions a symbolic dimension (or, with ``static``, divides at all); else ``e`` itself.
        Only a result that no longer divides replaces it."""
        if not contains(e, lambda x: isinstance(x, (tir.FloorDiv, tir.FloorMod))) or \
                not self.static and all(v in self.ranges for v in vars_in([e])):
            return e
        new = Canonical(self.ranges).simplify(simplify_divmod(e, self.ranges))
        return e if contains(new, lambda x: isinstance(x, (tir.FloorDiv, tir.FloorMod))) else new

    def region(self, r: tir.BufferRegion) -> tir.BufferRegion:
        ranges = [tir.Range(self.index(x.min), x.extent) for x in r.region]
        if all(a.min is b.min for a, b in zip(ranges, r.region)):
            return r
        return dataclasses.replace(r, region=ranges)
