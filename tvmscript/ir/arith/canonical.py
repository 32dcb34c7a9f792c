"""A canonical simplifier for TIR index expressions, in the normal form TVM's prints.

Schedules build index expressions by substitution: split a loop and ``vi`` becomes
``i_0 * 4 + i_1``; fuse the two back and it becomes ``f // 4 * 4 + f % 4``, which must print as
``f``. Printing what TVM prints for the same schedule needs the same normal form, so this
module follows the model of TVM's canonical simplifier (not its code):

* an integer expression is a `Sum` of `Split` terms plus a constant ``base``;
* a `Split` is ``((index % upper) // lower) * scale`` over an atomic ``index`` (a Var, or any
  expression the form cannot look into), with ``upper`` possibly absent;
* ``+``, ``-`` and multiplication by a constant combine sums term by term; ``//`` and ``%`` by
  a positive constant take out the part of a sum that the divisor divides, use the bounds of
  what remains (``(i*4 + j) // 4`` is ``i`` when ``0 <= j < 4``), and turn the division of a
  single term into a split; two splits of one index that are the two halves of one division
  merge (``f // 4 * 4 + f % 4`` is ``f``);
* a sum prints its terms by decreasing scale, positive ones first (``i * 32 + j * 8 + k``),
  keeping the order of equal scales, then adds a positive base, then subtracts the negative
  ones, smallest first, and a negative base (``x + 2 - z - y * 2``, ``0 - x - 1``), as TVM's
  canonical form prints.

Comparisons against constants are decided from bounds (``i * 4 + j < 128`` is true when ``i``
and ``j`` cover a 128-element range), and reduced when a common factor allows it.
"""

from __future__ import annotations

import dataclasses
from math import gcd
from typing import Optional

from tvmscript.ir import tir

from .bound import NEG_INF, POS_INF, const_int_bound, floordiv_int

__all__ = ["simplify", "expr_key", "widen", "INT_OPS"]


INT_OPS = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod, tir.Min, tir.Max)


def widen(e):
    """``e`` as the arithmetic analyses read it: integer casts dropped, every integer operation
    and constant in int64, variables as they are (so ``T.Cast("int64", i) - i`` is 0, and an
    int32 dimension compares with an int64 one). Only for analysis: the result may mix int32
    variables into int64 operations, which code generation does not take."""
    if isinstance(e, tir.IntImm) and tir.is_int(e.dtype) and e.dtype != "bool":
        return e if e.dtype == "int64" else tir.IntImm("int64", e.value)
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype) and tir.is_int(e.value.dtype) and e.dtype != "bool" \
            and e.value.dtype != "bool":
        return widen(e.value)
    if isinstance(e, INT_OPS) and tir.is_int(e.dtype):
        return type(e)("int64", widen(e.a), widen(e.b))
    return e


# ----------------------------------------------------------------------------- structural keys


def expr_key(e) -> tuple:
    """A hashable key equal for structurally equal expressions (Vars by identity)."""
    if isinstance(e, tir.Var):
        return ("v", id(e))
    if isinstance(e, (tir.IntImm, tir.FloatImm)):
        return ("c", e.dtype, e.value)
    if isinstance(e, tir.StringImm):
        return ("s", e.value)
    if isinstance(e, tir.BinaryOp):
        return (type(e).__name__, e.dtype, expr_key(e.a), expr_key(e.b))
    if isinstance(e, tir.BufferLoad):
        return ("load", id(e.buffer), tuple(expr_key(i) for i in e.indices))
    if isinstance(e, tir.Cast):
        return ("cast", e.dtype, expr_key(e.value))
    if isinstance(e, tir.Call):
        return ("call", e.op, e.dtype, tuple(expr_key(a) if isinstance(a, tir.PrimExpr) else repr(a) for a in e.args))
    if isinstance(e, tir.Not):
        return ("not", expr_key(e.a))
    if isinstance(e, tir.Select):
        return ("sel", expr_key(e.condition), expr_key(e.true_value), expr_key(e.false_value))
    return ("id", id(e))


# ----------------------------------------------------------------------------- the normal form


@dataclasses.dataclass(slots=True)
class Split:
    """``((index % upper) // lower) * scale``; ``upper`` None means no modulo."""

    index: tir.PrimExpr
    key: tuple
    lower: int = 1
    upper: Optional[int] = None
    scale: int = 1

    def same_shape(self, other: "Split") -> bool:
        return self.key == other.key and self.lower == other.lower and self.upper == other.upper


@dataclasses.dataclass(slots=True)
class Sum:
    terms: list
    base: int
    dtype: str

    def is_const(self) -> bool:
        return not self.terms


def _const_sum(value: int, dtype: str) -> Sum:
    return Sum([], value, dtype)


class Canonical:
    """One simplification context: the bounds of the variables in scope."""

    def __init__(self, ranges: dict | None = None, keep_marks: bool = False) -> None:
        self.ranges = ranges or {}
        # Schedules' bindings keep a fused iterator whole (TVM's IterMapSimplify):
        # ``(f_0 * 256 + f_1) // 128`` stays as it is instead of ``f_0 * 2 + f_1 // 128``.
        self.keep_marks = keep_marks

    # ---- bounds
    def bound(self, e) -> tuple:
        return const_int_bound(e, self.ranges)

    def split_bound(self, s: Split) -> tuple:
        lo, hi = self.bound(s.index)
        if s.upper is not None:
            if not (lo >= 0 and hi < s.upper):
                lo, hi = (0, s.upper - 1)
        lo, hi = floordiv_int(lo, s.lower), floordiv_int(hi, s.lower)
        if s.scale >= 0:
            return (lo * s.scale if lo not in (NEG_INF, POS_INF) or s.scale else 0,
                    hi * s.scale if hi not in (NEG_INF, POS_INF) or s.scale else 0)
        return (hi * s.scale, lo * s.scale)

    def sum_bound(self, s: Sum) -> tuple:
        lo = hi = s.base
        for t in s.terms:
            a, b = self.split_bound(t)
            lo, hi = lo + a, hi + b
        return (lo, hi)

    # ---- building sums
    def normalize_split(self, s: Split) -> Optional[Split]:
        """``s`` with redundant modulo/division dropped; None when it is always zero."""
        if s.scale == 0:
            return None
        lo, hi = self.bound(s.index)
        if s.upper is not None and lo >= 0 and hi < s.upper:
            s = dataclasses.replace(s, upper=None)
        if s.upper is not None and s.upper <= s.lower:
            return None
        if s.upper is None and s.lower > 1 and lo >= 0 and hi < s.lower:
            return None  # (a Var of a unit loop stays: TVM keeps unit iterators in bindings)
        return s

    def add_term(self, terms: list, t: Split) -> None:
        t = self.normalize_split(t)
        if t is None:
            return
        for n, u in enumerate(terms):
            if u.same_shape(t):
                scale = u.scale + t.scale
                if scale == 0:
                    del terms[n]
                else:
                    terms[n] = dataclasses.replace(u, scale=scale)
                return
        terms.append(t)

    def merge_splits(self, terms: list) -> list:
        """Merge ``x // (L*m) % ... * (s*m)`` with ``x % (L*m) // L * s`` into one split."""
        changed = True
        while changed:
            changed = False
            for a in terms:
                for b in terms:
                    if a is b or a.key != b.key:
                        continue
                    if b.upper == a.lower and a.scale * b.lower == b.scale * a.lower:
                        merged = Split(a.index, a.key, b.lower, a.upper, b.scale)
                        ia, ib = terms.index(a), terms.index(b)
                        first = min(ia, ib)
                        rest = [t for t in terms if t is not a and t is not b]
                        rest.insert(first, merged)
                        terms[:] = []
                        for t in rest:
                            self.add_term(terms, t)
                        changed = True
                        break
                if changed:
                    break
        return terms

    def make_sum(self, terms: list, base: int, dtype: str) -> Sum:
        out: list = []
        for t in terms:
            self.add_term(out, t)
        return Sum(self.merge_splits(out), base, dtype)

    def atom(self, e) -> Sum:
        return Sum([Split(e, expr_key(e))], 0, e.dtype)

    # ---- conversion to the normal form
    def to_sum(self, e) -> Sum:
        if isinstance(e, tir.IntImm) and e.dtype != "bool":
            return _const_sum(e.value, e.dtype)
        if isinstance(e, tir.Add):
            return self.add(self.to_sum(e.a), self.to_sum(e.b))
        if isinstance(e, tir.Sub):
            return self.add(self.to_sum(e.a), self.scale(self.to_sum(e.b), -1))
        if isinstance(e, tir.Mul):
            a, b = self.to_sum(e.a), self.to_sum(e.b)
            if b.is_const():
                return self.scale(a, b.base)
            if a.is_const():
                return self.scale(b, a.base)
            return self.atom(tir.Mul(e.dtype, self.to_expr(a), self.to_expr(b)))
        if isinstance(e, (tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod)):
            a, b = self.to_sum(e.a), self.to_sum(e.b)
            floor = isinstance(e, (tir.FloorDiv, tir.FloorMod))
            is_div = isinstance(e, (tir.FloorDiv, tir.Div))
            if b.is_const() and b.base > 0 and (floor or self.sum_bound(a)[0] >= 0):
                return self.div(a, b.base) if is_div else self.mod(a, b.base)
            if a.is_const() and b.is_const() and b.base != 0:
                q = a.base // b.base if floor else int(a.base / b.base)
                return _const_sum(q if is_div else a.base - q * b.base, e.dtype)
            return self.atom(type(e)(e.dtype, self.to_expr(a), self.to_expr(b)))
        if isinstance(e, (tir.Min, tir.Max)):
            a, b = self.simplify(e.a), self.simplify(e.b)
            ba, bb = self.bound(a), self.bound(b)
            is_min = isinstance(e, tir.Min)
            if ba[1] <= bb[0]:
                return self.to_sum(a if is_min else b)
            if bb[1] <= ba[0]:
                return self.to_sum(b if is_min else a)
            return self.atom(type(e)(e.dtype, a, b))
        if isinstance(e, tir.Cast) and tir.is_int(e.dtype):
            v = self.simplify(e.value)
            if isinstance(v, tir.IntImm):
                return _const_sum(v.value, e.dtype)
            if v.dtype == e.dtype:
                return self.to_sum(v)
            return self.atom(tir.Cast(e.dtype, v))
        return self.atom(self.simplify_other(e))

    def add(self, a: Sum, b: Sum) -> Sum:
        return self.make_sum(a.terms + b.terms, a.base + b.base, a.dtype)

    def scale(self, a: Sum, c: int) -> Sum:
        if c == 0:
            return _const_sum(0, a.dtype)
        return self.make_sum([dataclasses.replace(t, scale=t.scale * c) for t in a.terms], a.base * c, a.dtype)

    def _take_divisible(self, a: Sum, c: int) -> tuple:
        """``a`` as ``c * X + R``: X takes the terms (and base part) ``c`` divides."""
        whole = [dataclasses.replace(t, scale=t.scale // c) for t in a.terms if t.scale % c == 0]
        rest = [t for t in a.terms if t.scale % c != 0]
        q, r = divmod(a.base, c)
        if not rest:  # keep a constant base whole when nothing else remains
            return Sum(whole, q, a.dtype), Sum([], r, a.dtype)
        return Sum(whole, q, a.dtype), Sum(rest, r, a.dtype)

    def _gcd_split(self, a: Sum, c: int):
        """``a`` as ``g * X + S`` with ``g`` dividing ``c`` and ``0 <= S < g``, if there is one."""
        terms = sorted(a.terms, key=lambda t: -abs(t.scale))
        for p in range(1, len(terms) + 1):
            big, small = terms[:p], terms[p:]
            g = 0
            for t in big:
                g = gcd(g, t.scale)
            if g <= 1 or c % g != 0:
                continue
            s = Sum(small, a.base, a.dtype)
            lo, hi = self.sum_bound(s)
            if lo >= 0 and hi < g:
                return g, Sum([dataclasses.replace(t, scale=t.scale // g) for t in big], 0, a.dtype), s
        return None

    def is_fused_chain(self, a: Sum) -> bool:
        """Is ``a`` one fused iterator, ``x * e_y * e_z + y * e_z + z`` with each part a Var of a
        loop from 0 whose extent is the scale step (the outermost may be unbounded)?"""
        if len(a.terms) < 2 or a.base != 0:
            return len(a.terms) == 1 and a.base == 0
        terms = sorted(a.terms, key=lambda t: -t.scale)
        if terms[-1].scale != 1:
            return False
        for t in terms:
            if t.lower != 1 or t.upper is not None or not isinstance(t.index, tir.Var):
                return False
        for outer, inner in zip(terms, terms[1:]):
            lo, hi = self.bound(inner.index)
            if lo != 0 or hi in (NEG_INF, POS_INF) or outer.scale != inner.scale * (hi + 1):
                return False
        return True

    def _fused_mark(self, a: Sum, c: int) -> bool:
        """Is ``a`` a fused iterator (``x * e_y * e_z + y * e_z + z``, each a Var of a loop
        from 0)? A division of one stays whole, even on a boundary of its parts: TVM prints
        ``(f0 * 1024 + f1) // 1024`` for a fused loop split by 1024 (DLight's Fallback)."""
        return self.keep_marks and len(a.terms) >= 2 and self.is_fused_chain(a)

    def _mark_split(self, a: Sum, c: int, is_div: bool) -> Sum:
        e = self.to_expr(a)
        return Sum([Split(e, expr_key(e), c if is_div else 1, None if is_div else c, 1)], 0, a.dtype)

    def div(self, a: Sum, c: int) -> Sum:
        if c == 1:
            return a
        if self._fused_mark(a, c):
            return self._mark_split(a, c, True)
        whole, rest = self._take_divisible(a, c)
        return self.add(self._div_rest(rest, c), whole)

    def _div_rest(self, rest: Sum, c: int) -> Sum:
        if rest.is_const():
            return _const_sum(floordiv_int(rest.base, c), rest.dtype)
        lo, hi = self.sum_bound(rest)
        if lo >= 0 and hi < c:
            return _const_sum(0, rest.dtype)
        if len(rest.terms) == 1 and rest.base == 0:
            t = rest.terms[0]
            if t.scale > 0 and c % t.scale == 0:
                s = self.normalize_split(Split(t.index, t.key, t.lower * (c // t.scale), t.upper, 1))
                if s is None:
                    return _const_sum(0, rest.dtype)
                return Sum([s], 0, rest.dtype)
        found = self._gcd_split(rest, c)
        if found is not None:
            g, x, _ = found
            return self.div(x, c // g)
        return self.atom(tir.FloorDiv(rest.dtype, self.to_expr(rest), tir.IntImm(rest.dtype, c)))

    def mod(self, a: Sum, c: int) -> Sum:
        if c == 1:
            return _const_sum(0, a.dtype)
        if self._fused_mark(a, c):
            return self._mark_split(a, c, False)
        _, rest = self._take_divisible(a, c)
        if rest.is_const():
            return _const_sum(rest.base % c, a.dtype)
        lo, hi = self.sum_bound(rest)
        if lo >= 0 and hi < c:
            return rest
        if len(rest.terms) == 1 and rest.base == 0:
            t = rest.terms[0]
            if t.scale > 0 and c % t.scale == 0:
                m = c // t.scale
                upper = t.lower * m
                if t.upper is None or t.upper % upper == 0:
                    s = self.normalize_split(Split(t.index, t.key, t.lower, upper, t.scale))
                    return Sum([s] if s else [], 0, a.dtype)
        found = self._gcd_split(rest, c)
        if found is not None:
            g, x, small = found
            return self.add(self.scale(self.mod(x, c // g), g), small)
        return self.atom(tir.FloorMod(a.dtype, self.to_expr(rest), tir.IntImm(a.dtype, c)))

    # ---- back to expressions
    def split_expr(self, t: Split, dtype: str, scale: int) -> tir.PrimExpr:
        e = t.index
        if t.upper is not None:
            e = tir.FloorMod(dtype, e, tir.IntImm(dtype, t.upper))
        if t.lower != 1:
            e = tir.FloorDiv(dtype, e, tir.IntImm(dtype, t.lower))
        if scale != 1:
            e = tir.Mul(dtype, e, tir.IntImm(dtype, scale))
        return e

    def to_expr(self, s: Sum) -> tir.PrimExpr:
        dt = s.dtype
        pos = sorted((t for t in s.terms if t.scale > 0), key=lambda t: -t.scale)
        neg = sorted((t for t in s.terms if t.scale < 0), key=lambda t: -t.scale)
        base = s.base
        e = None
        for t in pos:
            x = self.split_expr(t, dt, t.scale)
            e = x if e is None else tir.Add(dt, e, x)
        if e is None and neg:  # only subtractions: from a positive base (``1 - i``), else 0
            e, base = tir.IntImm(dt, max(base, 0)), min(base, 0)  # (``0 - i - 1``), as TVM's
        if e is not None and base > 0:  # as TVM's: ``x + 2 - y``, a positive base before
            e, base = tir.Add(dt, e, tir.IntImm(dt, base)), 0  # the subtractions
        for t in neg:
            e = tir.Sub(dt, e, self.split_expr(t, dt, -t.scale))
        if e is None:
            return tir.IntImm(dt, base)
        if base > 0:
            e = tir.Add(dt, e, tir.IntImm(dt, base))
        elif base < 0:
            e = tir.Sub(dt, e, tir.IntImm(dt, -base))
        return e

    # ---- everything else
    def simplify(self, e) -> tir.PrimExpr:
        if not isinstance(e, tir.PrimExpr):
            return e
        if tir.is_int(e.dtype) and not isinstance(e, (tir.Var, tir.IntImm)):
            return self.to_expr(self.to_sum(e))
        return self.simplify_other(e)

    def simplify_other(self, e) -> tir.PrimExpr:
        if isinstance(e, (tir.Var, tir.IntImm, tir.FloatImm, tir.StringImm)):
            return e
        if isinstance(e, tir.COMPARISONS):
            return self.compare(e)
        if isinstance(e, (tir.And, tir.Or)):
            a, b = self.simplify(e.a), self.simplify(e.b)
            is_and = isinstance(e, tir.And)
            for x, y in ((a, b), (b, a)):
                if isinstance(x, tir.IntImm):
                    if bool(x.value) == is_and:
                        return y
                    return tir.IntImm("bool", int(not is_and))
            return type(e)("bool", a, b)
        if isinstance(e, tir.Not):
            a = self.simplify(e.a)
            if isinstance(a, tir.IntImm):
                return tir.IntImm("bool", int(not a.value))
            return tir.Not("bool", a)
        if isinstance(e, tir.BinaryOp):
            return type(e)(e.dtype, self.simplify(e.a), self.simplify(e.b))
        if isinstance(e, tir.BufferLoad):
            return tir.BufferLoad(e.dtype, e.buffer, [self.simplify(i) for i in e.indices], e.span)
        if isinstance(e, tir.Cast):
            return tir.Cast(e.dtype, self.simplify(e.value))
        if isinstance(e, tir.Select):
            c = self.simplify(e.condition)
            t, f = self.simplify(e.true_value), self.simplify(e.false_value)
            if isinstance(c, tir.IntImm):
                return t if c.value else f
            return tir.Select(e.dtype, c, t, f)
        if isinstance(e, tir.Call):
            args = [self.simplify(a) if isinstance(a, tir.PrimExpr) else a for a in e.args]
            return _fold_bitwise(e, args) or tir.Call(e.dtype, e.op, args)
        return e

    def compare(self, e) -> tir.PrimExpr:
        a, b = e.a, e.b
        if not (tir.is_int(a.dtype) and tir.is_int(b.dtype)):
            return type(e)("bool", self.simplify(a), self.simplify(b))
        diff = self.add(self.to_sum(a), self.scale(self.to_sum(b), -1))
        lo, hi = self.sum_bound(diff)
        verdict = {
            tir.LT: (hi < 0, lo >= 0), tir.LE: (hi <= 0, lo > 0),
            tir.GT: (lo > 0, hi <= 0), tir.GE: (lo >= 0, hi < 0),
            tir.EQ: (lo == hi == 0, lo > 0 or hi < 0), tir.NE: (lo > 0 or hi < 0, lo == hi == 0),
        }[type(e)]
        if verdict[0]:
            return tir.IntImm("bool", 1)
        if verdict[1]:
            return tir.IntImm("bool", 0)
        lhs = Sum(diff.terms, 0, diff.dtype)
        rhs = -diff.base
        if isinstance(e, (tir.LT, tir.GE)) and lhs.terms:
            found = self._gcd_split(lhs, abs(rhs) or 1) if rhs > 0 else None
            if found is not None and rhs % found[0] == 0:
                g, x, _ = found
                return type(e)("bool", self.to_expr(x), tir.IntImm(diff.dtype, rhs // g))
        return type(e)("bool", self.simplify(a), self.simplify(b))


def simplify(e, ranges: dict | None = None, keep_marks: bool = False):
    """``e`` in canonical form; ``ranges`` maps Var -> (min, extent) for the vars in scope.
    ``keep_marks``: keep fused loop iterators whole under ``//`` and ``%`` (block bindings)."""
    return Canonical(ranges, keep_marks).simplify(e)


_BITWISE_FOLDS = {"tir.bitwise_and": lambda a, b: a & b, "tir.bitwise_or": lambda a, b: a | b,
                  "tir.bitwise_xor": lambda a, b: a ^ b}


def _fold_bitwise(e: tir.Call, args: list):
    """An integer ``&``, ``|`` or ``^`` of two constants, as a constant; ``x ^ 0`` and ``x | 0``
    as ``x`` (a swizzle whose key is 0). None for anything else."""
    fold = _BITWISE_FOLDS.get(e.op)
    if fold is None or len(args) != 2 or not tir.is_int(e.dtype):
        return None
    a, b = args
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return tir.IntImm(e.dtype, fold(a.value, b.value))
    if e.op != "tir.bitwise_and":
        for x, y in ((a, b), (b, a)):
            if isinstance(y, tir.IntImm) and y.value == 0 and x.dtype == e.dtype:
                return x
    return None
