"""Intervals of index expressions, as TVM's analyzer computes them for ``compute_at``.

An interval is ``(lo, hi)``, inclusive, with None for an unbounded side; `NOTHING` is the
empty set (TVM's IntSet::Nothing), which a union ignores. Everything is simplified with the
loops in scope bound (``ranges``: Var -> (min, extent)), the way TVM's Analyzer sees them, so
that the loops ``compute_at`` makes match TVM's: bounds fold where one provably lies below the
other (`min_bound`, `max_bound`), regions relax over loops (`relax_region`), and what
simplification cannot decide about floor division and modulo by constants is decided by
evaluating one period (`_periodic_range`).
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import vars_in

from ...ir.arith import const_int_bound, eval_range, simplify
from .common import const_value

# An interval is (lo, hi), inclusive, with None for an unbounded side; NOTHING is the empty
# set (TVM's IntSet::Nothing), which a union ignores.

NOTHING = None


def simplify_in(e, ranges):
    """Simplify as TVM's Analyzer does with the loops in scope bound: within their ranges, and
    with a loop of extent 1 replaced by its only value (TVM binds such a variable to it)."""
    unit = {v: r[0] for v, r in ranges.items() if const_value(r[1]) == 1}
    return simplify(substitute(e, unit) if unit else e, ranges)


def _prove_le(a, b, ranges) -> bool:
    """a <= b provably (b - a >= 0)."""
    d = simplify_in(tir.Sub(b.dtype, b, make_cast(a, b.dtype)), ranges)
    if const_int_bound(d, ranges)[0] >= 0:
        return True
    r = _periodic_range(d, ranges)
    return r is not None and r[0] >= 0


def can_prove_equal(a, b, ranges) -> bool:
    if a is None or b is None:
        return a is None and b is None
    d = simplify_in(tir.Sub(a.dtype, a, make_cast(b, a.dtype)), ranges)
    return isinstance(d, tir.IntImm) and d.value == 0


def _absorbs(outer, inner, kind, ranges) -> bool:
    """``outer`` is ``kind(x, y)`` with ``x`` or ``y`` equal to ``inner``: then
    ``min(inner, max(inner, y))`` is ``inner`` (and ``max(inner, min(inner, y))`` too)."""
    return isinstance(outer, kind) and (can_prove_equal(outer.a, inner, ranges) or
                                        can_prove_equal(outer.b, inner, ranges))


def _extreme(a, b, ranges, smaller: bool):
    """``min(a, b)`` (``smaller``) or ``max(a, b)``, as TVM's analyzer folds it: an operand
    absorbing the other (``min(a, max(a, y))`` is ``a``), one provably below or above the
    other, else the simplified min/max; None when either is unbounded."""
    if a is None or b is None:
        return None
    dual = tir.Max if smaller else tir.Min
    if _absorbs(b, a, dual, ranges):
        return a
    if _absorbs(a, b, dual, ranges):
        return b
    if _prove_le(a, b, ranges) if smaller else _prove_le(b, a, ranges):
        return a
    if _prove_le(b, a, ranges) if smaller else _prove_le(a, b, ranges):
        return b
    return simplify_in((tir.Min if smaller else tir.Max)(a.dtype, a, make_cast(b, a.dtype)), ranges)


def min_bound(a, b, ranges):
    return _extreme(a, b, ranges, smaller=True)


def max_bound(a, b, ranges):
    return _extreme(a, b, ranges, smaller=False)


def interval_union(x, y, ranges):
    if x is NOTHING:
        return y
    if y is NOTHING:
        return x
    return (min_bound(x[0], y[0], ranges), max_bound(x[1], y[1], ranges))


def interval_intersect(x, y, ranges):
    if x is NOTHING or y is NOTHING:
        return NOTHING
    lo = x[0] if y[0] is None else y[0] if x[0] is None else max_bound(x[0], y[0], ranges)
    hi = x[1] if y[1] is None else y[1] if x[1] is None else min_bound(x[1], y[1], ranges)
    return (lo, hi)


def interval_simplified(x, ranges):
    if x is NOTHING:
        return NOTHING
    return tuple(simplify_in(e, ranges) if e is not None else None for e in x)


def last_of(lo, ext):
    """``lo + ext - 1``, the last point of a (min, extent) range (not simplified)."""
    dt = lo.dtype
    return tir.Sub(dt, tir.Add(dt, lo, make_cast(ext, dt)), tir.IntImm(dt, 1))


def region_intervals(region: list) -> list:
    """One (min, max) per dimension of a list of `tir.Range`."""
    return [(r.min, r.min if const_value(r.extent) == 1 else simplify(last_of(r.min, r.extent))) for r in region]


def _relax(e, dom: dict, ranges: dict) -> Optional[tuple]:
    """Inclusive (lo, hi) of ``e`` while the Vars of ``dom`` sweep their ranges."""
    got = eval_range(e, dom, ranges)
    if got is None:
        return None
    lo, ext = got
    return lo, simplify_in(last_of(lo, ext), ranges)


def relax_region(region: list, dom: dict, ranges: dict) -> Optional[list]:
    out = []
    for r in region:
        first = _relax(r.min, dom, ranges)
        last = first if const_value(r.extent) == 1 else _relax(last_of(r.min, r.extent), dom, ranges)
        if first is None or last is None:
            return None
        out.append((first[0], last[1]))
    return out



def _eval_int(e, env: dict) -> int:
    if isinstance(e, tir.IntImm):
        return e.value
    if isinstance(e, tir.Var):
        return env[e]
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype):
        return _eval_int(e.value, env)
    ops = {tir.Add: lambda x, y: x + y, tir.Sub: lambda x, y: x - y, tir.Mul: lambda x, y: x * y,
           tir.FloorDiv: lambda x, y: x // y, tir.FloorMod: lambda x, y: x % y, tir.Min: min, tir.Max: max}
    op = ops.get(type(e))
    if op is None:
        raise ValueError(type(e).__name__)
    return op(_eval_int(e.a, env), _eval_int(e.b, env))


def _periodic_range(e, ranges: dict, limit: int = 4096) -> Optional[tuple]:
    """Exact (min, max) of ``e`` over the whole ranges of its variables, found by evaluating
    it over one period, or None. Built of +, -, * and floor division/modulo by positive
    constants, ``e(v + P) - e(v)`` is the same for every ``v`` once the shift ``P`` is a
    multiple of every divisor, so checking it is 0 at one point proves ``e`` periodic, and one
    period holds every value. This decides what TVM's simplifier proves from residues, e.g.
    that the extent ``(f * 96 + 95) // 64 - f * 96 // 64 + 1`` (a tile of a fused loop split by
    a size the row length does not divide) is 2 for every ``f``."""
    divisors = []

    def collect(x) -> bool:
        if isinstance(x, (tir.IntImm, tir.Var)):
            return True
        if isinstance(x, tir.Cast):
            return collect(x.value)
        if isinstance(x, (tir.FloorDiv, tir.FloorMod)):
            if not (isinstance(x.b, tir.IntImm) and x.b.value > 0):
                return False
            divisors.append(x.b.value)
        elif not isinstance(x, (tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max)):
            return False
        return collect(x.a) and collect(x.b)

    if not collect(e):
        return None
    period = 1
    for d in divisors:
        period *= d
    windows = []
    for v in vars_in([e]):
        r = ranges.get(v)
        lo, ext = (const_value(r[0]), const_value(r[1])) if r is not None else (None, None)
        if lo is None or ext is None or ext <= 0:
            return None
        windows.append((v, lo, ext))
    total = 1
    for _, _, ext in windows:
        total *= min(ext, period)
    if total > limit:
        return None
    try:
        base = {v: lo for v, lo, _ in windows}
        for v, lo, ext in windows:  # periodic in each variable that spans more than a period
            if ext > period and _eval_int(e, {**base, v: lo + period}) != _eval_int(e, base):
                return None
        points = [dict()]
        for v, lo, ext in windows:
            points = [{**p, v: lo + k} for p in points for k in range(min(ext, period))]
        values = [_eval_int(e, p) for p in points]
    except (ValueError, KeyError, ZeroDivisionError):
        return None
    return (min(values), max(values)) if values else None


def exact_constant(e, ranges: dict) -> Optional[tir.IntImm]:
    """``e`` as a constant when it takes one value over the ranges of its variables."""
    r = _periodic_range(e, ranges)
    return tir.IntImm(e.dtype, r[0]) if r is not None and r[0] == r[1] else None


def proven(cond, ranges) -> bool:
    """``cond`` holds for every value of the loops in ``ranges``. Besides what simplification
    decides, a comparison is proven from the symbolic bounds of its two sides' difference
    (TVM's kSymbolicBound): ``i_0 * 32 + ax0 < (m + 31) // 32 * 32`` holds when ``i_0`` runs
    below ``(m + 31) // 32`` and ``ax0`` below 32, whatever ``m`` is."""
    r = simplify_in(cond, ranges)
    if isinstance(r, tir.IntImm):
        return bool(r.value)
    if not isinstance(cond, (tir.LT, tir.LE, tir.GT, tir.GE)) or not tir.is_int(cond.a.dtype):
        return False
    dt = cond.a.dtype
    diff = simplify_in(tir.Sub(dt, cond.a, make_cast(cond.b, dt)), ranges)
    dom = {v: tir.Range(r[0], r[1]) for v, r in ranges.items() if v in set(vars_in([diff]))}
    got = eval_range(diff, dom, ranges)
    if got is None:
        return False
    lo, ext = got
    if isinstance(cond, (tir.LT, tir.LE)):
        hi = simplify_in(last_of(lo, ext), {})
        return isinstance(hi, tir.IntImm) and (hi.value < 0 if isinstance(cond, tir.LT) else hi.value <= 0)
    lo = simplify_in(lo, {})
    return isinstance(lo, tir.IntImm) and (lo.value > 0 if isinstance(cond, tir.GT) else lo.value >= 0)



def exact_zero(e, ranges) -> bool:
    if isinstance(e, tir.IntImm):
        return e.value == 0
    r = _periodic_range(e, ranges)
    return r == (0, 0)
