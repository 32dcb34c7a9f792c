"""Analyses of TensorIR shared by the parser and the passes.

`collect_accesses` finds the buffer regions a statement reads and writes, the way TVM's block
access-region detector does, so that blocks written without ``T.reads``/``T.writes`` get the
same regions TVM would print.
"""

from __future__ import annotations

from tvmscript import tir
from tvmscript.tir_visitor import TIRVisitor


def collect_accesses(body: tir.Stmt, init: tir.Stmt | None = None) -> tuple[list, list]:
    """Buffer regions read and written by ``init`` then ``body``, in first-access order.

    Each access is a point; several accesses to one buffer are widened to cover them all.
    Loop variables of loops inside the statement are relaxed to their whole range."""
    collector = _AccessCollector()
    if init is not None:
        collector.stmt(init)
    collector.stmt(body)
    return collector.regions(collector.reads), collector.regions(collector.writes)


class _LoadCollector(TIRVisitor):
    def __init__(self, owner: "_AccessCollector") -> None:
        self.owner = owner

    def visit_BufferLoad(self, e) -> None:
        self.owner._add(self.owner.reads, e.buffer, e.indices)
        self.generic_visit(e)


class _AccessCollector:
    def __init__(self) -> None:
        self.reads: dict = {}
        self.writes: dict = {}
        self.loops: dict = {}  # loop var -> (min, extent) of loops inside the statement

    # ---- statements
    def stmt(self, s) -> None:
        if isinstance(s, tir.BufferStore):
            self._add(self.writes, s.buffer, s.indices)
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, tir.For):
            self.loops[s.loop_var] = (s.min, s.extent)
            self.stmt(s.body)
        elif isinstance(s, tir.IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, (tir.LetStmt,)):
            self.expr(s.value)
            self.stmt(s.body)
        elif isinstance(s, tir.AssertStmt):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.While):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.Evaluate):
            self.expr(s.value)
        elif isinstance(s, tir.BlockRealize):
            block = s.block
            subst = {iv.var: v for iv, v in zip(block.iter_vars, s.iter_values)}
            local = set(block.alloc_buffers)
            for r in block.reads:
                if r.buffer not in local:
                    self._add_region(self.reads, r, subst)
            for r in block.writes:
                if r.buffer not in local:
                    self._add_region(self.writes, r, subst)

    def expr(self, e) -> None:
        _LoadCollector(self).visit(e)

    # ---- regions
    def _add(self, table: dict, buf, indices) -> None:
        ranges = [self._relax(i) for i in indices]
        table.setdefault(buf, []).append(ranges)

    def _add_region(self, table: dict, region: tir.BufferRegion, subst: dict) -> None:
        from .substitute import substitute_expr

        ranges = []
        for r in region.region:
            lo = substitute_expr(r.min, subst)
            if tir.is_const_int(r.extent, 1):
                ranges.append(self._relax(lo))
            else:
                ranges.append((lo, r.extent, False))
        table.setdefault(region.buffer, []).append(ranges)

    def _relax(self, index):
        """(min, extent, is_point) of one index over the loops inside the statement."""
        if isinstance(index, tir.Var) and index in self.loops:
            lo, extent = self.loops[index]
            return (lo, extent, False)
        return (index, None, True)

    def regions(self, table: dict) -> list:
        out = []
        for buf, accesses in table.items():
            out.append(tir.BufferRegion(buf, [_merge(buf, dim, [a[dim] for a in accesses]) for dim in range(len(buf.shape))]))
        return out


def _merge(buf, dim: int, ranges: list) -> tir.Range:
    from tvmscript.structural import StructuralEqual

    first = ranges[0]
    eq = StructuralEqual().equal
    if all(r[2] for r in ranges) and all(eq(r[0], first[0]) for r in ranges[1:]):
        return tir.Range(first[0], tir.IntImm(first[0].dtype, 1))
    if not first[2] and all(eq(r[0], first[0]) and r[1] is not None and eq(r[1], first[1]) for r in ranges[1:]):
        return tir.Range(first[0], first[1])
    # Points that differ by constants around one base expression: cover them.
    offsets = []
    base = None
    for lo, extent, is_point in ranges:
        b, off = _split_offset(lo)
        if base is None:
            base = b
        elif not ((b is None and base is None) or (b is not None and base is not None and eq(b, base))):
            return _full(buf, dim)
        span = 1 if is_point else (extent.value if isinstance(extent, tir.IntImm) else None)
        if span is None:
            return _full(buf, dim)
        offsets.append((off, off + span))
    lo_off = min(o[0] for o in offsets)
    hi_off = max(o[1] for o in offsets)
    dtype = ranges[0][0].dtype
    start = tir.IntImm(dtype, lo_off) if base is None else (base if lo_off == 0 else tir.Add(dtype, base, tir.IntImm(dtype, lo_off)))
    return tir.Range(start, tir.IntImm(dtype, hi_off - lo_off))


def _split_offset(e):
    if isinstance(e, tir.IntImm):
        return None, e.value
    if isinstance(e, tir.Add) and isinstance(e.b, tir.IntImm):
        return e.a, e.b.value
    if isinstance(e, tir.Sub) and isinstance(e.b, tir.IntImm):
        return e.a, -e.b.value
    return e, 0


def _full(buf, dim: int) -> tir.Range:
    extent = buf.shape[dim]
    return tir.Range(tir.IntImm(extent.dtype, 0), extent)
