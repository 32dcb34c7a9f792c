"""The range an index expression covers while some of its variables sweep their loops.

`eval_range(e, dom)` gives ``(min, extent)`` of ``e`` when each Var of ``dom`` takes every value
of its `tir.Range`, as expressions in the variables that stay fixed: relaxing ``i_0 * 8 + ax0``
over ``ax0 in [0, 8)`` gives ``(i_0 * 8, 8)``. Schedules ask it for the part of a buffer a block
touches under a loop (`compute_at`, `cache_read`, inferred ``T.reads``/``T.writes``). Each term
of the canonical form is bounded on its own (a sum of intervals), which is exact for the
affine and split expressions schedules produce and an over-approximation otherwise; an
expression it cannot bound at all gives None and the caller falls back to the whole buffer.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from .canonical import Canonical, Split, Sum  # noqa: F401

__all__ = ["eval_range", "relax_region"]


def _ranges_of(dom: dict, ranges: dict | None) -> dict:
    out = dict(ranges or {})
    for v, r in dom.items():
        out[v] = (r.min, r.extent)
    return out


def _interval(c: Canonical, e, dom: dict) -> Optional[tuple]:
    """Inclusive (lo, hi) expressions of ``e`` over ``dom``, or None."""
    used = [v for v in vars_in([e]) if v in dom]
    if not used:
        return (e, e)
    if isinstance(e, tir.Var):
        r = dom[e]
        return (r.min, tir.Add(e.dtype, r.min, tir.Sub(e.dtype, r.extent, tir.IntImm(e.dtype, 1))))
    if not tir.is_int(e.dtype):
        return None
    s = c.to_sum(e)
    if len(s.terms) == 1 and s.base == 0 and not isinstance(s.terms[0].index, tir.Var):
        t = s.terms[0]
        if t.scale == 1 and t.lower == 1 and t.upper is None:
            # ``e`` is an atom of the normal form (``(i + j) % 128``, ``T.min(i, j)``): bound
            # its operands instead of decomposing it again.
            return _atom_interval(c, t.index, dom)
    lo = hi = Sum([], s.base, s.dtype)
    for t in s.terms:
        if not any(v in dom for v in vars_in([t.index])):
            lo, hi = c.add(lo, Sum([t], 0, s.dtype)), c.add(hi, Sum([t], 0, s.dtype))
            continue
        inner = _term_index_interval(c, t, dom)
        if inner is None:
            return None
        a, b = inner if t.scale > 0 else inner[::-1]
        lo = c.add(lo, c.scale(c.to_sum(a), t.scale))
        hi = c.add(hi, c.scale(c.to_sum(b), t.scale))
    return (c.to_expr(lo), c.to_expr(hi))


def _atom_interval(c: Canonical, e, dom: dict) -> Optional[tuple]:
    """Interval of an expression the canonical form keeps whole (``(f * 96 + g) // 64``, a
    min or a max): bound its operands, then apply the operation to the bounds. Passing it back
    to `_interval` would only meet the same atom again."""
    if isinstance(e, tir.Var):
        return _interval(c, e, dom)
    if isinstance(e, (tir.FloorDiv, tir.FloorMod)) and isinstance(e.b, tir.IntImm) and e.b.value > 0:
        inner = _interval(c, e.a, dom)
        if inner is None:
            return None
        a, b = inner
        dt, d = e.dtype, e.b
        if isinstance(e, tir.FloorDiv):
            return (c.simplify(tir.FloorDiv(dt, a, d)), c.simplify(tir.FloorDiv(dt, b, d)))
        same_period = c.simplify(tir.Sub(dt, tir.FloorDiv(dt, b, d), tir.FloorDiv(dt, a, d)))
        if isinstance(same_period, tir.IntImm) and same_period.value == 0:
            return (c.simplify(tir.FloorMod(dt, a, d)), c.simplify(tir.FloorMod(dt, b, d)))
        return (tir.IntImm(dt, 0), tir.IntImm(dt, d.value - 1))
    if isinstance(e, (tir.Min, tir.Max)):
        x, y = _interval(c, e.a, dom), _interval(c, e.b, dom)
        if x is None or y is None:
            return None
        op = type(e)
        return (c.simplify(op(e.dtype, x[0], y[0])), c.simplify(op(e.dtype, x[1], y[1])))
    return None


def _term_index_interval(c: Canonical, t: Split, dom: dict) -> Optional[tuple]:
    """Interval of ``(index % upper) // lower`` (unscaled)."""
    inner = _atom_interval(c, t.index, dom)
    if inner is None:
        return None
    a, b = inner
    dt = t.index.dtype
    if t.upper is not None:
        full = _ranges_of(dom, c.ranges)
        lo_b = Canonical(full).bound(t.index)
        if not (lo_b[0] >= 0 and lo_b[1] < t.upper):
            a, b = tir.IntImm(dt, 0), tir.IntImm(dt, t.upper - 1)
    if t.lower != 1:
        a = c.simplify(tir.FloorDiv(dt, a, tir.IntImm(dt, t.lower)))
        b = c.simplify(tir.FloorDiv(dt, b, tir.IntImm(dt, t.lower)))
    return (a, b)


def eval_range(e, dom: dict, ranges: dict | None = None) -> Optional[tuple]:
    """``(min, extent)`` covered by ``e`` when the Vars of ``dom`` (Var -> `tir.Range`) sweep
    their ranges; ``ranges`` bounds the other variables (Var -> (min, extent)). None if ``e``
    cannot be bounded."""
    c = Canonical(dict(ranges or {}))
    iv = _interval(c, e, dom)
    if iv is None:
        return None
    lo, hi = iv
    lo = c.simplify(lo)
    ext = c.simplify(tir.Add(e.dtype, tir.Sub(e.dtype, hi, lo), tir.IntImm(e.dtype, 1)))
    return lo, ext


def relax_region(region: list, dom: dict, ranges: dict | None = None) -> Optional[list]:
    """Each `tir.Range` of ``region`` widened over ``dom``; None where a dimension cannot be."""
    out = []
    c = Canonical(dict(ranges or {}))
    for r in region:
        lo = _interval(c, r.min, dom)
        if lo is None:
            return None
        mn = c.simplify(lo[0])
        last = c.simplify(tir.Add(r.min.dtype, lo[1], tir.Sub(r.min.dtype, r.extent, tir.IntImm(r.min.dtype, 1))))
        out.append(tir.Range(mn, c.simplify(tir.Add(r.min.dtype, tir.Sub(r.min.dtype, last, mn), tir.IntImm(r.min.dtype, 1)))))
    return out
