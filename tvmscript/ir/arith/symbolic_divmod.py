"""Integer division and modulo by a symbolic divisor, simplified with the variables' ranges.

Why: a reshape with a symbolic dimension (a sequence length ``n``) legalizes into indices
such as ``((v0 * n + v2) * 256 + v1 * 32 + v3) // (256 * n)`` and ``... // 256 % n``.
With ``0 <= v2 < n``, ``0 <= v1 < 8`` and ``0 <= v3 < 32`` these are ``v0`` and ``v2``: what
the same reshape gives at a static length, where the canonical simplifier (`canonical`) sees
it, since it works with constant bounds. Left as they are, the indices are not affine, so
the CPU schedule can neither vectorize nor parallelize the kernel.

`simplify_divmod(e, ranges)` rewrites ``a // d`` and ``a % d`` (floor division; ``d`` not a
constant) when ``a`` is a sum of terms: the terms that are multiples of ``d`` (``d``'s
factors times a multiple of its coefficient) form the quotient ``q``, the others the
remainder ``r``; if ``0 <= r < d`` is proven from the ranges (each remaining term a constant
times one variable or a constant, the variable's range known, ``d``'s sign positive), then
``a // d = q`` and ``a % d = r``. Anything it cannot prove is left unchanged.
"""

from __future__ import annotations

from collections import Counter

from tvmscript.ir import tir

from .canonical import Canonical

__all__ = ["simplify_divmod"]


def simplify_divmod(e, ranges: dict):
    """``e`` with each floor division or modulo by a symbolic divisor that the ranges
    (``var -> (min, extent)``) resolve rewritten (see the module docstring)."""
    return _DivMod(ranges).visit(e)


class _DivMod:
    def __init__(self, ranges: dict) -> None:
        self.ranges = ranges
        self.canonical = Canonical(ranges)

    def visit(self, e):
        if isinstance(e, (tir.FloorDiv, tir.FloorMod)):
            a, d = self.visit(e.a), self.visit(e.b)
            if not isinstance(d, tir.IntImm) and tir.is_int(e.dtype):
                done = self._divmod(e, a, d)
                if done is not None:
                    return done
            return type(e)(e.dtype, a, d) if (a is not e.a or d is not e.b) else e
        if isinstance(e, tir.BinaryOp):
            a, b = self.visit(e.a), self.visit(e.b)
            return e if a is e.a and b is e.b else type(e)(e.dtype, a, b)
        if isinstance(e, tir.Cast):
            v = self.visit(e.value)
            return e if v is e.value else tir.Cast(e.dtype, v)
        return e

    def _divmod(self, e, a, d):
        d_coef, d_factors = _product(self.canonical.simplify(d))
        if d_coef is None or d_coef <= 0 or not d_factors or not self._positive(d_factors):
            return None
        terms = _terms(self.canonical.simplify(a))
        if terms is None:
            return None
        quotient, remainder = [], []
        for coef, factors in terms:
            rest = factors - d_factors
            if sum(rest.values()) == sum(factors.values()) - sum(d_factors.values()) and coef % d_coef == 0:
                quotient.append((coef // d_coef, rest))
            else:
                remainder.append((coef, factors))
        dt = e.dtype
        bounds = self._bounds(remainder, dt)
        if bounds is None:
            return None
        lo, hi = bounds
        if not (_proven(self.canonical.simplify(tir.GE("bool", lo, tir.IntImm(dt, 0))))
                and _proven(self.canonical.simplify(tir.LT("bool", hi, d)))):
            return None
        return _sum(quotient if isinstance(e, tir.FloorDiv) else remainder, dt)

    def _positive(self, factors: Counter) -> bool:
        """Whether every factor of a divisor is positive wherever the expression is evaluated:
        a free symbolic dimension (never negative; where it is 0, the loops over it have no
        iterations, so nothing is divided by it), or a variable whose range starts at 1 or
        more."""
        for f in factors:
            if not isinstance(f, tir.Var):
                return False
            dom = self.ranges.get(f)
            if dom is not None and not _proven(self.canonical.simplify(tir.GE("bool", dom[0], tir.IntImm(f.dtype, 1)))):
                return False
        return True

    def _bounds(self, terms: list, dtype: str):
        """(least, greatest) value of a sum of ``coef * var`` and constant terms, each
        variable in its range; None if a term is something else."""
        lo, hi = [], []
        for coef, factors in terms:
            if not factors:
                lo.append((coef, Counter()))
                hi.append((coef, Counter()))
                continue
            if sum(factors.values()) != 1:
                return None
            (var,) = factors
            dom = self.ranges.get(var)
            if dom is None:
                return None
            least = dom[0]
            greatest = tir.Sub(var.dtype, tir.Add(var.dtype, dom[0], dom[1]), tir.IntImm(var.dtype, 1))
            low, high = (least, greatest) if coef >= 0 else (greatest, least)
            lo.append((coef, Counter({low: 1})))
            hi.append((coef, Counter({high: 1})))
        return _sum(lo, dtype), _sum(hi, dtype)


def _proven(cond) -> bool:
    return isinstance(cond, tir.IntImm) and bool(cond.value)


def _product(e):
    """(integer coefficient, Counter of the other factors) of a product; (None, None) if ``e``
    is not a product of variables, constants and other expressions."""
    if isinstance(e, tir.IntImm):
        return e.value, Counter()
    if isinstance(e, tir.Mul):
        ca, fa = _product(e.a)
        cb, fb = _product(e.b)
        if ca is None or cb is None:
            return None, None
        return ca * cb, fa + fb
    return 1, Counter({e: 1})


def _terms(e):
    """The terms of a sum as (coefficient, factors); None if a term is not a product."""
    if isinstance(e, tir.Add):
        a, b = _terms(e.a), _terms(e.b)
        return None if a is None or b is None else a + b
    if isinstance(e, tir.Sub):
        a, b = _terms(e.a), _terms(e.b)
        return None if a is None or b is None else a + [(-c, f) for c, f in b]
    coef, factors = _product(e)
    return None if coef is None else [(coef, factors)]


def _sum(terms: list, dtype: str):
    """The expression of a list of (coefficient, factors) terms."""
    total = None
    for coef, factors in terms:
        term = None
        for f, times in sorted(factors.items(), key=lambda kv: str(kv[0])):
            for _ in range(times):
                term = f if term is None else tir.Mul(dtype, term, f)
        if term is None:
            term = tir.IntImm(dtype, coef)
        elif coef != 1:
            term = tir.Mul(dtype, term, tir.IntImm(dtype, coef))
        total = term if total is None else tir.Add(dtype, total, term)
    return total if total is not None else tir.IntImm(dtype, 0)
