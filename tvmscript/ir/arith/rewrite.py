"""A few rules of TVM's rewrite simplifier, and the order in which TVM's legalized code meets
them (`tvm_simplify`).

Why: tvms's `canonical` simplifier normalizes sums; TVM's also pattern-matches min, max and
subtraction (``min(x + y, z) - x`` is ``min(y, z - x)``). Where a TOPI formula leaves such
terms, what TVM prints depends on those rules: avg_pool2d's divisor, the count of a window's
taps inside the input, prints ``T.min(1, 7 - v) + 2 - T.max(1 - v, 0)``, not the canonical
form's ``T.min(v + 1, 7) + 2 - v - T.max(1 - v, 0)``. Only the rules such formulas need are
here, each a small function; anything else is left as it is.

Rules (``c`` an integer constant):

* ``(x + c) - y``  ->  ``(x - y) + c``, then the rules again on ``x - y``;
* ``min(x + y, z) - x``  ->  ``min(y, z - x)``, and ``min(z, x + y) - x``  ->  ``min(z - x, y)``
  (``y + x`` in place of ``x + y`` too; ``x`` alone as ``x + 0``), the same for ``max``;
* ``0 - x * c``  ->  ``x * -c``;
* ``x * c - y * c``  ->  ``(x - y) * c``;
* ``max(x * c1, c2)``  ->  ``max(x, c2 / c1) * c1`` for ``c1 > 0``, ``min(x, c2 / c1) * c1``
  for ``c1 < 0``, when ``c1`` divides ``c2``; a factor common to a sum and the bound comes out
  the same way (``max(2 - x * 2, 0)``  ->  ``max(1 - x, 0) * 2``); the same for ``min``;
* ``e / c`` (truncating) when ``c`` divides every coefficient and constant of ``e``.
"""

from __future__ import annotations

from math import gcd

from tvmscript.ir import tir
from tvmscript.ir.structural import structural_equal

from .canonical import INT_OPS, simplify

__all__ = ["rewrite_simplify", "tvm_simplify"]


def tvm_simplify(e, ranges: dict | None = None):
    """``e`` as TVM's simplification of a TOPI body leaves it: canonical form, the rewrite
    rules, canonical form again."""
    return simplify(rewrite_simplify(simplify(e, ranges)), ranges)


def rewrite_simplify(e):
    """``e`` with the module's rules applied bottom-up."""
    if isinstance(e, INT_OPS) and tir.is_int(e.dtype):
        a, b = rewrite_simplify(e.a), rewrite_simplify(e.b)
        e = e if a is e.a and b is e.b else type(e)(e.dtype, a, b)
        if isinstance(e, tir.Sub):
            return _sub(e)
        if isinstance(e, (tir.Min, tir.Max)):
            return _min_max_of_multiple(e)
        if isinstance(e, tir.Div):
            return _exact_division(e)
    return e


def _int(e) -> int | None:
    return e.value if isinstance(e, tir.IntImm) else None


def _same(a, b) -> bool:
    return structural_equal(a, b)


def _sub(e: tir.Sub):
    dt, x, y = e.dtype, e.a, e.b
    if isinstance(x, tir.Add) and _int(x.b) is not None and _int(y) is None:
        return tir.Add(dt, _sub(tir.Sub(dt, x.a, y)), x.b)
    if isinstance(x, (tir.Min, tir.Max)):
        folded = _fold_into_min_max(x, y)
        if folded is not None:
            return folded
    if _int(x) == 0 and isinstance(y, tir.Mul) and _int(y.b) is not None:
        return tir.Mul(dt, y.a, tir.IntImm(dt, -y.b.value))
    if isinstance(x, tir.Mul) and isinstance(y, tir.Mul) and _int(x.b) is not None and _int(x.b) == _int(y.b):
        return tir.Mul(dt, _sub(tir.Sub(dt, x.a, y.a)), x.b)
    return e


def _divided(e, c: int):
    """``e / c`` when every coefficient and constant of the canonical sum ``e`` is a multiple
    of ``c`` (so the division is exact, truncating or not); else None."""
    if _int(e) is not None:
        return tir.IntImm(e.dtype, e.value // c) if e.value % c == 0 else None
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _divided(e.a, c), _divided(e.b, c)
        return None if a is None or b is None else type(e)(e.dtype, a, b)
    if isinstance(e, tir.Mul) and _int(e.b) is not None and e.b.value % c == 0:
        k = e.b.value // c
        return e.a if k == 1 else tir.Mul(e.dtype, e.a, tir.IntImm(e.dtype, k))
    return None


def _exact_division(e: tir.Div):
    """``(x * 2 + 4) / 2`` as ``x + 2``."""
    c = _int(e.b)
    q = _divided(e.a, c) if c and c > 0 else None
    return e if q is None else q


def _without(s, x):
    """``y`` when the sum ``s`` is ``x + y`` or ``y + x``; else None."""
    if isinstance(s, tir.Add):
        if _same(s.a, x):
            return s.b
        if _same(s.b, x):
            return s.a
    return None


def _fold_into_min_max(m, x):
    """``min(x + y, z) - x`` as ``min(y, z - x)``, and ``min(x, z) - x`` as ``min(0, z - x)``
    (either operand, ``min`` or ``max``)."""
    dt, kind = m.dtype, type(m)
    zero = tir.IntImm(dt, 0)
    if _same(m.a, x):
        return kind(dt, zero, _sub(tir.Sub(dt, m.b, x)))
    if _same(m.b, x):
        return kind(dt, _sub(tir.Sub(dt, m.a, x)), zero)
    y = _without(m.a, x)
    if y is not None:
        return kind(dt, y, _sub(tir.Sub(dt, m.b, x)))
    y = _without(m.b, x)
    if y is not None:
        return kind(dt, _sub(tir.Sub(dt, m.a, x)), y)
    return None


def _common_factor(e) -> int:
    """The largest ``g`` that divides every coefficient and the constant of the canonical sum
    ``e`` (0 when it has a term without a coefficient)."""
    if _int(e) is not None:
        return abs(e.value)
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _common_factor(e.a), _common_factor(e.b)
        return gcd(a, b) if a and b else 0
    if isinstance(e, tir.Mul) and _int(e.b) is not None:
        return abs(e.b.value)
    return 0


def _min_max_of_multiple(e):
    """``max(x * c1, c2)`` as ``max(x, c2 / c1) * c1`` (``min`` for a negative ``c1``), and
    ``max(2 - x * 2, 0)`` as ``max(1 - x, 0) * 2`` (a factor common to a sum and the bound)."""
    a, c2 = e.a, _int(e.b)
    g = _common_factor(a) if isinstance(a, (tir.Add, tir.Sub)) and c2 is not None else 0
    if g > 1 and c2 % g == 0:
        return tir.Mul(e.dtype, type(e)(e.dtype, _divided(a, g), tir.IntImm(e.dtype, c2 // g)),
                       tir.IntImm(e.dtype, g))
    if not (isinstance(a, tir.Mul) and _int(a.b) not in (None, 0) and c2 is not None):
        return e
    c1 = a.b.value
    if c2 % c1:
        return e
    kind = type(e)
    if c1 < 0:
        kind = tir.Min if kind is tir.Max else tir.Max
    return tir.Mul(e.dtype, kind(e.dtype, a.a, tir.IntImm(e.dtype, c2 // c1)), a.b)
