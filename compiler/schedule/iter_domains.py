"""Which instances of a moved block must run: its iterators' domains (``compute_at`` step 2).

The moved block provides one point of each buffer per instance (``B[vi, vj]``); solving
"provided covers required" dimension by dimension gives an interval per block iterator
(``vj in [j_0 * 4, j_0 * 4 + 3]``), kept apart from the bound the iterator's domain and the
buffer's shape put on it (`_VarDomain`), so that a bound cutting into the interval becomes a
predicate instead of shrinking the loop. A provided mapping that is a bijection of the
iterators (a fused index ``v0 * 4 + v1``) is inverted first, as TVM does (`_affine_domains`).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import make_cast

from ...ir.arith import const_int_bound, simplify
from ...ir.arith.canonical import Canonical
from .common import const_value
from .intervals import (NOTHING, can_prove_equal, exact_zero, interval_intersect, interval_simplified, interval_union,
                        last_of, max_bound, min_bound, simplify_in)

class DomainError(Exception):
    """No iterator domain provides the required region (the message says why)."""


def _solve(provided: tuple, required: tuple, dim_max, ranges):
    """The block iterator that indexes one provided dimension and the interval of it that
    covers the required interval, with the bound the buffer's shape puts on it:
    ``(var, dom, bound)``. ``var`` may be None when the dimension constrains nothing."""
    p_min = simplify_in(provided[0], ranges)
    p_max = simplify_in(provided[1], ranges) if provided[1] is not None else None
    r_min = simplify_in(required[0], ranges) if required[0] is not None else None
    r_max = simplify_in(required[1], ranges) if required[1] is not None else None
    dt = p_min.dtype

    def fdiv(a, b):
        return None if a is None else tir.FloorDiv(dt, make_cast(a, dt), make_cast(b, dt))

    if isinstance(p_min, tir.Mul) and (isinstance(p_min.a, tir.Var) or isinstance(p_min.b, tir.Var)):
        var, e = (p_min.a, p_min.b) if isinstance(p_min.a, tir.Var) else (p_min.b, p_min.a)
        return var, (fdiv(r_min, e), fdiv(r_max, e)), (tir.IntImm(dt, 0), fdiv(dim_max, e))
    if p_max is not None and can_prove_equal(p_min, p_max, ranges):
        if isinstance(p_min, tir.Var):
            return p_min, (r_min, r_max), (tir.IntImm(dt, 0), dim_max)
        if isinstance(p_min, tir.FloorDiv) and const_int_bound(p_min.b, ranges)[0] >= 1:
            x, fac = p_min.a, p_min.b
            # a <= x // f <= b with f > 0  <=>  a * f <= x <= b * f + f - 1
            lo = None if r_min is None else tir.Mul(dt, r_min, fac)
            hi = None if r_max is None else simplify_in(last_of(tir.Mul(dt, r_max, fac), fac), ranges)
            if isinstance(x, tir.Var):
                bound_hi = simplify_in(last_of(tir.Mul(dt, dim_max, fac), fac), ranges)
                return x, (lo, hi), (tir.IntImm(dt, 0), bound_hi)
            return _solve((x, x), (lo, hi), dim_max, ranges)
        if isinstance(p_min, tir.FloorMod):
            x, fac = p_min.a, p_min.b
            if isinstance(x, tir.Var):
                return x, NOTHING, NOTHING  # x % f says nothing about x's range
            if const_int_bound(x, ranges)[0] >= 1 and const_int_bound(fac, ranges)[0] >= 1 and \
                    r_min is not None and const_int_bound(r_min, ranges)[0] >= 0:
                return _solve((x, x), (r_min, None), dim_max, ranges)
    raise DomainError(f"cannot solve which block iterator values provide the region: the provided index "
                       f"'{_expr_text(p_min)}' is not an iterator, its multiple or its quotient")


def _expr_text(e) -> str:
    from tvmscript.printer import to_script

    return to_script(e)


class _VarDomain:
    """TVM's BlockVarDomainInfo: the interval an iterator must sweep (``dom``) and the bound
    its domain and the buffer's shape put on it (``bound``), kept apart so that a bound that
    cuts into ``dom`` becomes a predicate instead of shrinking the loop."""

    __slots__ = ("dom", "bound")

    def __init__(self, dom=NOTHING, bound=NOTHING) -> None:
        self.dom, self.bound = dom, bound

    def union(self, dom, bound, ranges) -> None:
        self.dom = interval_union(self.dom, dom, ranges)
        self.bound = interval_union(self.bound, bound, ranges)

    def finish(self, ranges) -> None:
        if self.dom is NOTHING:
            if self.bound is not NOTHING and None not in self.bound:
                self.dom, self.bound = interval_simplified(self.bound, ranges), NOTHING
            return
        self.dom = interval_simplified(self.dom, ranges)
        self.bound = interval_simplified(self.bound, ranges)
        inter = interval_simplified(interval_intersect(self.dom, self.bound, ranges), ranges)
        if can_prove_equal(self.dom[0], inter[0], ranges) and can_prove_equal(self.dom[1], inter[1], ranges):
            self.bound = NOTHING
        elif can_prove_equal(self.bound[0], inter[0], ranges) and can_prove_equal(self.bound[1], inter[1], ranges):
            self.dom, self.bound = self.bound, NOTHING
        elif isinstance(inter[0], tir.IntImm) and isinstance(inter[1], tir.IntImm):
            self.dom, self.bound = inter, NOTHING


def _affine_inverse(block: tir.Block, points: list, ranges: dict):
    """When the provided indices are one point per dimension and together a bijection of the
    block iterators (each index a mixed-radix fusion ``v0 * 4 + v1`` of iterators used nowhere
    else, maybe plus a constant): the function mapping one index value per dimension back to
    each iterator (TVM's InverseAffineIterMap: ``v0 = o // 4``, ``v1 = o % 4``) and, per
    dimension, its iterators outermost first with their scales and extents. Else None."""
    iters = {}
    for iv in block.iter_vars:
        if const_value(iv.dom.min) != 0 or const_value(iv.dom.extent) is None:
            return None
        iters[iv.var] = const_value(iv.dom.extent)
    canon = Canonical(ranges)
    used, dims = set(), []
    for p in points:
        s = canon.to_sum(p)
        terms = []
        for t in s.terms:
            if not (isinstance(t.index, tir.Var) and t.index in iters and t.lower == 1 and t.upper is None) \
                    or t.index in used or t.scale <= 0:
                return None
            used.add(t.index)
            terms.append((t.index, t.scale, iters[t.index]))
        terms.sort(key=lambda x: -x[1])
        expected = 1
        for _, scale, ext in reversed(terms):  # innermost first: scales 1, e_n, e_n * e_(n-1), ...
            if scale != expected:
                return None
            expected *= ext
        dims.append((terms, s.base, p.dtype))
    if used != set(iters):
        return None
    return _inverse_of(dims), dims


def _inverse_of(dims: list):
    def inverse(outputs: list) -> dict:
        out = {}
        for (terms, base, dt), o in zip(dims, outputs):
            o = make_cast(o, dt)
            if base:
                o = tir.Sub(dt, o, tir.IntImm(dt, base))
            for n, (var, scale, ext) in enumerate(terms):
                value = o if scale == 1 else tir.FloorDiv(dt, o, tir.IntImm(dt, scale))
                if n > 0:  # the outermost part needs no modulo
                    value = tir.FloorMod(dt, value, tir.IntImm(dt, ext))
                out[var] = value
        return out

    return inverse


def _affine_domains(block: tir.Block, buf, prov: list, req: list, ranges: dict):
    """Iterator domains (var -> (dom, bound)) by inverting a bijective provided mapping, as
    TVM tries first: each iterator spans what the inverse gives at the required region's
    first and last points (and the buffer shape bounds it the same way). None when the
    provided indices are no such mapping.

    For a fused index that is only right when the region stays within one row of the outer
    iterator, or when the inner iterator's span is its whole extent anyway. Where neither can
    be proven (TVM 0.27 then yields loops that miss part of the region, and its own checker
    flags the result), the inner iterator sweeps its whole extent: more work, same values."""
    if not all(p[1] is not None and can_prove_equal(p[0], p[1], ranges) for p in prov):
        return None
    found = _affine_inverse(block, [p[0] for p in prov], ranges)
    if found is None or any(r[0] is None or r[1] is None for r in req):
        return None
    inverse, dims = found
    shape_last = [tir.Max(d.dtype, tir.Sub(d.dtype, d, tir.IntImm(d.dtype, 1)), tir.IntImm(d.dtype, 0))
                  for d in buf.shape]

    def spans(firsts: list, lasts: list) -> dict:
        lo_pt, hi_pt = inverse(firsts), inverse(lasts)
        out = {}
        for (terms, base, dt), first, last in zip(dims, firsts, lasts):
            for k, (var, _, ext) in enumerate(terms):
                a, b = simplify_in(lo_pt[var], ranges), simplify_in(hi_pt[var], ranges)
                span = (min_bound(a, b, ranges), max_bound(a, b, ranges))
                if k > 0:
                    outer_scale = tir.IntImm(dt, terms[k - 1][1])

                    def row(o):
                        o = make_cast(o, dt)
                        return tir.FloorDiv(dt, tir.Sub(dt, o, tir.IntImm(dt, base)) if base else o, outer_scale)

                    same_row = simplify_in(tir.Sub(dt, row(last), row(first)), ranges)
                    full = (tir.IntImm(dt, 0), tir.IntImm(dt, ext - 1))
                    if not (exact_zero(same_row, ranges) or
                            (can_prove_equal(span[0], full[0], ranges) and can_prove_equal(span[1], full[1], ranges))):
                        span = full
                out[var] = span
        return out

    doms = spans([r[0] for r in req], [r[1] for r in req])
    bounds = spans([tir.IntImm(d.dtype, 0) for d in buf.shape], shape_last)
    return {var: (doms[var], bounds[var]) for var in doms}



def iter_domains(block: tir.Block, provided: dict, required: dict, ranges: dict) -> list:
    """One `_VarDomain` per block iterator, covering every required region."""
    doms = {iv.var: _VarDomain() for iv in block.iter_vars}
    for buf, prov_list in provided.items():
        req_list = required.get(buf)
        if not req_list:
            continue
        req = req_list[0]
        for other in req_list[1:]:
            req = [interval_union(a, b, ranges) for a, b in zip(req, other)]
        prov = prov_list[0]
        for other in prov_list[1:]:
            prov = [interval_union(a, b, ranges) for a, b in zip(prov, other)]
        affine = _affine_domains(block, buf, prov, req, ranges)
        if affine is not None:
            for var, (dom, bound) in affine.items():
                doms[var].union(dom, bound, ranges)
            continue
        for d, (p, r) in enumerate(zip(prov, req)):
            shape_d = buf.shape[d]
            dim_max = simplify_in(tir.Max(shape_d.dtype, tir.Sub(shape_d.dtype, shape_d, tir.IntImm(shape_d.dtype, 1)),
                                       tir.IntImm(shape_d.dtype, 0)), ranges)
            if isinstance(p[0], tir.IntImm) and can_prove_equal(p[0], p[1], ranges):
                if not (can_prove_equal(r[0], r[1], ranges) and can_prove_equal(p[0], r[0], ranges)):
                    raise DomainError(f"the block provides only element {p[0].value} of dimension {d} of buffer "
                                       f"'{buf.name}', but more is required there")
                continue
            var, dom, bound = _solve(p, r, make_cast(dim_max, p[0].dtype), ranges)
            if var in doms:
                doms[var].union(dom, bound, ranges)
    out = []
    for iv in block.iter_vars:
        info = doms[iv.var]
        whole = (iv.dom.min, simplify(last_of(iv.dom.min, iv.dom.extent)))
        info.bound = whole if info.bound is NOTHING else interval_intersect(info.bound, whole, ranges)
        info.finish(ranges)
        if info.dom is NOTHING:
            info.dom = whole
        out.append(info)
    return out
