"""Loop partitioning for padding guards (TVM's ``LoopPartition``): a loop whose body reads
through ``T.if_then_else`` guards that hold on most of its range runs that middle range
without them, and only its edges with them.

Why: an inlined padding stage leaves every tap of a convolution or pooling window a guarded
load, ``if_then_else(1 <= y + ry and y + ry < 57 and ..., x[...], 0)``. Inside a register tile
the guards either become per-lane selects or branches around each load, and the tile's
accumulators go through memory around them (a depthwise convolution in NHWC took 1.3-2x the
time of the same tile over a padded copy). Only the border rows and columns need the guard:

    for yy in T.parallel(56):                for yy in T.parallel(56):
        for xx_0 in range(7):          ->        if 1 <= yy and yy < 55:
            <tile: taps guarded>                     for xx_0 in range(0, 1): <tile: rows proven, columns guarded>
                                                     for xx_0 in range(1, 6): <tile: no guard>
                                                     for xx_0 in range(6, 7): <tile: rows proven, columns guarded>
                                                 else: <the same three, rows guarded>

A serial loop is split in three loops (an edge of one iteration runs at a constant, and LLVM
folds its guards); a parallel loop keeps its iterations and branches on the range inside, so
the threads still share it as before. Each iteration runs the same statements in the same
order, and a guard is dropped only where it is proven true (`_holds_from`), so results are
the same bits.

Which guards: conjuncts ``a <= b`` / ``a < b`` (and ``>=``, ``>``) whose difference is affine
in the partitioned loop and loops nested inside it of constant range; a conjunct that also
depends on an outer loop or anything else is left for that loop's own partition. Innermost
loops (their body has no loop) are not partitioned: the guard of a vector loop is the
vectorizer's business, and a loop around one statement gains nothing from three copies.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import all_of, conjuncts, const_int, make_and
from tvmscript.ir.tir_visitor import contains, vars_in

from .schedule_cpu.analysis import affine

IF_THEN_ELSE = "tir.if_then_else"
MAX_COPIES = 8  # copies of one innermost statement that partitions of nested loops may make


def partition_guarded_loops(func: tir.PrimFunc) -> tir.PrimFunc:
    """``func`` with each loop partitioned around its padding guards (module docstring)."""
    if not contains(func.body, _is_guard):  # most kernels: nothing to look at
        return func
    body = _Partitioner().visit_stmt(func.body)
    if body is func.body:
        return func
    return tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs), func.private, func.span)


class _Partitioner(IRMutator):
    def __init__(self, copies: int = 1) -> None:
        self.copies = copies  # how many copies of the current statement partitions above made

    def visit_stmt(self, s):
        if isinstance(s, tir.For) and s.kind in ("serial", "parallel") and not s.annotations:
            split = _partition(s, self.copies)
            if split is not None:
                return split
        return super().visit_stmt(s)


def _partition(loop: tir.For, copies: int) -> Optional[tir.Stmt]:
    """``loop`` partitioned around the guards that hold on a middle range of it, the pieces'
    bodies partitioned in turn; None when nothing would change."""
    lo, ext = const_int(loop.min), const_int(loop.extent)
    if lo is None or ext is None or ext < 2 or not (loop.step is None or const_int(loop.step) == 1) \
            or not contains(loop.body, lambda n: isinstance(n, tir.For)):
        return None
    hi = lo + ext
    guards = _guard_conjuncts(loop.body, loop.loop_var)
    if not guards:
        return None
    inner = _inner_ranges(loop.body)
    proven, a, b = [], lo, hi
    for conj in guards:
        got = _holds_from(conj, loop.loop_var, inner)
        if got is None:
            continue
        c_lo, c_hi = got
        a, b = max(a, c_lo), min(b, c_hi)
        proven.append(conj)
    if not proven or a >= b:
        return None
    pieces = (a > lo) + (b < hi)
    bodies = 1 if not pieces else 2 if loop.kind == "parallel" else pieces + 1
    if copies * bodies > MAX_COPIES:
        return None
    mid = _drop(loop.body, {id(c) for c in proven})
    sub = _Partitioner(copies * bodies)
    mid, edge = sub.visit_stmt(mid), sub.visit_stmt(loop.body) if pieces else None
    if not pieces:  # the guards hold everywhere
        return tir.For(loop.loop_var, loop.min, loop.extent, loop.kind, mid, loop.thread_tag, {}, loop.step)
    if loop.kind == "parallel":
        v = loop.loop_var
        cond = make_and(tir.LE("bool", tir.IntImm(v.dtype, a), v), tir.LT("bool", v, tir.IntImm(v.dtype, b)))
        return tir.For(v, loop.min, loop.extent, loop.kind, tir.IfThenElse(cond, mid, edge), loop.thread_tag, {},
                       loop.step)
    parts = [(lo, a, edge), (a, b, mid), (b, hi, edge)]
    return tir.SeqStmt([_range_loop(loop, p, q, body) for p, q, body in parts if q > p])


def _range_loop(loop: tir.For, p: int, q: int, body) -> tir.For:
    """``loop`` over ``[p, q)`` with ``body``, its variable a fresh one (each piece defines its own)."""
    v = loop.loop_var
    nv = tir.Var(v.dtype, v.name)
    return tir.For(nv, tir.IntImm(v.dtype, p), tir.IntImm(v.dtype, q - p), loop.kind, substitute(body, {v: nv}),
                   loop.thread_tag, {}, loop.step)


def _inner_ranges(body) -> dict:
    """{Var: (first, last)} of the loops inside ``body`` with constant ranges (unit step); a
    variable several loops define (a tile's loop in its init, update and store nests) gets
    the union of their ranges, and one also defined with another range is left out."""
    out: dict = {}
    unknown: set = set()

    def visit(n) -> None:
        if isinstance(n, tir.For):
            lo, ext = const_int(n.min), const_int(n.extent)
            v = n.loop_var
            if lo is None or ext is None or ext <= 0 or not (n.step is None or const_int(n.step) == 1):
                unknown.add(v)
            elif v in out:
                out[v] = (min(out[v][0], lo), max(out[v][1], lo + ext - 1))
            else:
                out[v] = (lo, lo + ext - 1)

    contains(body, lambda n: visit(n) or False)
    return {v: r for v, r in out.items() if v not in unknown}


def _is_guard(n) -> bool:
    return isinstance(n, tir.Call) and n.op == IF_THEN_ELSE


def _guard_conjuncts(body, var: tir.Var) -> list:
    """The conjuncts of every ``if_then_else`` condition in ``body`` that mention ``var``."""
    found: list = []

    def visit(n) -> bool:
        if _is_guard(n):
            for c in conjuncts(n.args[0]):
                if any(u is var for u in vars_in([c])):
                    found.append(c)
        return False

    contains(body, visit)
    return found


def _holds_from(conj, var: tir.Var, inner: dict) -> Optional[tuple]:
    """``[a, b)``: the values of ``var`` for which ``conj`` holds at every value of the inner
    loops (``inner``), when it is an affine comparison of ``var`` and those loops; else None."""
    if not isinstance(conj, (tir.LT, tir.LE, tir.GT, tir.GE)) or not tir.is_int(conj.a.dtype):
        return None
    small, big = (conj.a, conj.b) if isinstance(conj, (tir.LT, tir.LE)) else (conj.b, conj.a)
    form = affine(tir.Sub(small.dtype, big, small)) if small.dtype == big.dtype else None
    if form is None:
        return None
    # conj: sum(c_i * v_i) + k >= strict (0 for <=, 1 for <)
    strict = 1 if isinstance(conj, (tir.LT, tir.GT)) else 0
    k = form.get(None, 0) - strict
    coef = 0
    for v, c in form.items():
        if v is None or c == 0:
            continue
        if v is var:
            coef = c
        elif isinstance(v, tir.Var) and v in inner:
            first, last = inner[v]
            k += min(c * first, c * last)
        else:
            return None  # an outer loop, a parameter, a load: not this loop's to decide
    if coef == 0:
        return None
    # coef * var + k >= 0
    if coef > 0:
        return -(k // coef), 1 << 62  # var >= ceil(-k / coef)
    return -(1 << 62), k // -coef + 1  # var <= floor(k / -coef)


class _Dropper(IRMutator):
    """Removes the proven conjuncts (by identity) from ``if_then_else`` conditions."""

    def __init__(self, proven: set) -> None:
        self.proven = proven

    def visit_expr(self, e):
        if _is_guard(e):
            kept = [c for c in conjuncts(e.args[0]) if id(c) not in self.proven]
            then, other = self.visit_expr(e.args[1]), self.visit_expr(e.args[2])
            if not kept:
                return then
            cond = self.visit_expr(all_of(kept))
            return tir.Call(e.dtype, e.op, [cond, then, other])
        return super().visit_expr(e)


def _drop(body, proven: set):
    return _Dropper(proven).visit_stmt(body)

