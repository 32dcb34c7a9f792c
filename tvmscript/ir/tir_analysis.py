"""Analyses of TensorIR shared by the parser and the passes.

`collect_accesses` finds the buffer regions a statement reads and writes, the way TVM's block
access-region detector does, and `infer_access_regions` a block's ``T.reads``/``T.writes`` from
them (widening over the block's inner loops), so that blocks written without them, and blocks
the schedule and TE make, get the same regions TVM would print.
"""

from __future__ import annotations

from . import tir
from .tir_visitor import TIRVisitor, vars_in


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
        from tvmscript.ir.mutator import substitute
        ranges = []
        for r in region.region:
            lo = substitute(r.min, subst)
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
    from tvmscript.ir.structural import StructuralEqual

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


# ----------------------------------------------------------------------------- block regions


def contains_block(stmt) -> bool:
    if isinstance(stmt, tir.BlockRealize):
        return True
    if isinstance(stmt, tir.SeqStmt):
        return any(contains_block(s) for s in stmt.seq)
    if isinstance(stmt, (tir.For, tir.While, tir.LetStmt, tir.AssertStmt, tir.AttrStmt)):
        return contains_block(stmt.body)
    if isinstance(stmt, tir.IfThenElse):
        return contains_block(stmt.then_case) or (stmt.else_case is not None and contains_block(stmt.else_case))
    return False


def infer_access_regions(body, init, alloc_buffers) -> tuple[list, list]:
    """The regions a block reads and writes, as TVM infers them when a block does not say:
    each access is a point; several accesses to one buffer widen to cover them all; buffers
    allocated in the block are not listed; in a reduction (a block with ``init``) the written
    buffers are not listed as reads."""
    reads, writes = collect_accesses(body, init)
    loops = _inner_loops(body, init)
    if loops:
        reads, writes = [_relax_region(r, loops) for r in reads], [_relax_region(r, loops) for r in writes]
    local = set(alloc_buffers)
    writes = [r for r in writes if r.buffer not in local]
    written = {r.buffer for r in writes}
    reads = [r for r in reads if r.buffer not in local and not (init is not None and r.buffer in written)]
    return reads, writes


def _inner_loops(body, init) -> dict:
    """The loops inside a block's body (and init): variable -> (min, extent)."""
    loops: dict = {}

    class _Loops(TIRVisitor):
        def visit_For(self, node) -> None:
            loops[node.loop_var] = (node.min, node.extent)
            self.generic_visit(node)

    for stmt in (init, body):
        if stmt is not None:
            _Loops().visit(stmt)
    return loops


def _relax_region(region: tir.BufferRegion, loops: dict) -> tir.BufferRegion:
    """A region whose bounds use loop variables of loops inside the block, widened to what
    those loops cover, as TVM infers it: ``C[vi * 4 + ii]`` over ``ii in range(4)`` is
    ``C[vi * 4:vi * 4 + 4]``. Bounds affine in the loop variables (constant coefficients and
    ranges) widen exactly; any other use of them widens to the whole dimension."""
    out = []
    changed = False
    for r, dim in zip(region.region, region.buffer.shape):
        if not any(v in loops for v in vars_in([r.min, r.extent])):
            out.append(r)
            continue
        changed = True
        out.append(_widen(r, loops) or tir.Range(tir.IntImm(dim.dtype, 0), dim))
    return tir.BufferRegion(region.buffer, out) if changed else region


def _widen(r: tir.Range, loops: dict):
    """`_relax_region` of one dimension, or None if it is not affine with constant terms."""
    if not isinstance(r.extent, tir.IntImm):
        return None
    terms = _affine(r.min, loops)
    if terms is None:
        return None
    base, coeffs = terms
    lo_off = hi_off = 0
    for var, c in coeffs.items():
        lo, extent = loops[var]
        if not (isinstance(lo, tir.IntImm) and isinstance(extent, tir.IntImm)) or extent.value < 1:
            return None
        first, last = c * lo.value, c * (lo.value + extent.value - 1)
        lo_off += min(first, last)
        hi_off += max(first, last)
    dtype = r.min.dtype
    if base is None:
        start = tir.IntImm(dtype, lo_off)
    elif lo_off == 0:
        start = base
    else:
        start = tir.Add(dtype, base, tir.IntImm(dtype, lo_off)) if lo_off > 0 else tir.Sub(dtype, base, tir.IntImm(dtype, -lo_off))
    return tir.Range(start, tir.IntImm(r.extent.dtype, hi_off - lo_off + r.extent.value))


def _affine(e, loops: dict):
    """``e`` as (loop-free part or None, {loop var: constant coefficient}); None if ``e`` uses
    a loop variable other than linearly."""
    if isinstance(e, tir.Var) and e in loops:
        return None, {e: 1}
    if not any(v in loops for v in vars_in([e])):
        return e, {}
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _affine(e.a, loops), _affine(e.b, loops)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, tir.Add) else -1
        coeffs = dict(a[1])
        for v, c in b[1].items():
            coeffs[v] = coeffs.get(v, 0) + sign * c
        if a[0] is None and b[0] is None:
            base = None
        elif b[0] is None:
            base = a[0]
        elif a[0] is None:
            base = b[0] if sign == 1 else tir.Mul(b[0].dtype, b[0], tir.IntImm(b[0].dtype, -1))
        else:
            base = type(e)(e.dtype, a[0], b[0])
        return base, coeffs
    if isinstance(e, tir.Mul):
        for x, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, tir.IntImm):
                inner = _affine(x, loops)
                if inner is None:
                    return None
                base = None if inner[0] is None else tir.Mul(e.dtype, inner[0], k)
                return base, {v: c * k.value for v, c in inner[1].items()}
    return None
