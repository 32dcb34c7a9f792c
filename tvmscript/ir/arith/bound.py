"""Constant integer bounds of TIR index expressions.

`const_int_bound(e, ranges)` answers "between which two integers can ``e`` lie" when each Var of
``ranges`` lies in its ``(min, extent)``: what schedules ask before dropping a ``% n`` whose
operand is already below ``n``, or proving a split needs no predicate. Bounds are inclusive;
`NEG_INF` / `POS_INF` stand for "unbounded". Unknown constructs are unbounded, never wrong.
"""

from __future__ import annotations

from tvmscript.ir import tir

NEG_INF = float("-inf")
POS_INF = float("inf")

__all__ = ["const_int_bound", "NEG_INF", "POS_INF", "floordiv_int", "dtype_bound"]


def floordiv_int(a, b):
    """Floor division that also takes the infinities."""
    if a in (NEG_INF, POS_INF):
        return a if b > 0 else -a
    return a // b


def dtype_bound(dtype: str) -> tuple:
    if dtype == "bool":
        return (0, 1)
    if dtype.startswith("uint"):
        return (0, (1 << int(dtype[4:] or 32)) - 1)
    if dtype.startswith("int"):
        bits = int(dtype[3:] or 32)
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return (NEG_INF, POS_INF)


def _mul(a: tuple, b: tuple) -> tuple:
    products = []
    for x in a:
        for y in b:
            if (x == 0 and y in (NEG_INF, POS_INF)) or (y == 0 and x in (NEG_INF, POS_INF)):
                products.append(0)
            else:
                products.append(x * y)
    return (min(products), max(products))


def const_int_bound(e, ranges: dict | None = None) -> tuple:
    """Inclusive ``(lo, hi)`` of integer expression ``e``; ``ranges`` maps Var -> (min, extent)
    as ints or as IntImms (other entries are ignored)."""
    ranges = ranges or {}
    return _bound(e, ranges)


def _var_bound(v, ranges) -> tuple:
    r = ranges.get(v)
    if r is None:
        return dtype_bound(v.dtype) if v.dtype.startswith("uint") or v.dtype == "bool" else (NEG_INF, POS_INF)
    lo, ext = r
    lo = lo.value if isinstance(lo, tir.IntImm) else lo
    ext = ext.value if isinstance(ext, tir.IntImm) else ext
    if isinstance(lo, int) and isinstance(ext, int):
        return (lo, lo + ext - 1)
    if isinstance(lo, int):
        return (lo, POS_INF)
    return (NEG_INF, POS_INF)


def _bound(e, ranges) -> tuple:
    if isinstance(e, tir.IntImm):
        return (e.value, e.value)
    if isinstance(e, tir.Var):
        return _var_bound(e, ranges)
    if isinstance(e, tir.Add):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        return (a[0] + b[0], a[1] + b[1])
    if isinstance(e, tir.Sub):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        return (a[0] - b[1], a[1] - b[0])
    if isinstance(e, tir.Mul):
        return _mul(_bound(e.a, ranges), _bound(e.b, ranges))
    if isinstance(e, (tir.FloorDiv, tir.Div)):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        if b[0] > 0 and b[0] == b[1]:
            c = b[0]
            if isinstance(e, tir.Div) and a[0] < 0:
                return (-floordiv_int(-a[0], c), floordiv_int(a[1], c) if a[1] >= 0 else -floordiv_int(-a[1], c))
            return (floordiv_int(a[0], c), floordiv_int(a[1], c))
        if b[0] > 0 and a[0] >= 0:
            return (0, a[1])
        return (NEG_INF, POS_INF)
    if isinstance(e, (tir.FloorMod, tir.Mod)):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        if b[0] > 0:
            if a[0] >= 0 and a[1] < b[0]:
                return a
            if isinstance(e, tir.Mod) and a[0] < 0:
                return (-(b[1] - 1), b[1] - 1)
            return (0, b[1] - 1)
        return (NEG_INF, POS_INF)
    if isinstance(e, tir.Min):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        return (min(a[0], b[0]), min(a[1], b[1]))
    if isinstance(e, tir.Max):
        a, b = _bound(e.a, ranges), _bound(e.b, ranges)
        return (max(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, tir.Cast):
        if tir.is_int(e.dtype) and tir.is_int(e.value.dtype):
            inner = _bound(e.value, ranges)
            outer = dtype_bound(e.dtype)
            if outer[0] <= inner[0] and inner[1] <= outer[1]:
                return inner
        return dtype_bound(e.dtype)
    if isinstance(e, tir.Select):
        a, b = _bound(e.true_value, ranges), _bound(e.false_value, ranges)
        return (min(a[0], b[0]), max(a[1], b[1]))
    if e.dtype == "bool" or isinstance(e, (tir.COMPARISONS, tir.And, tir.Or, tir.Not)):
        return (0, 1)
    if isinstance(e, tir.Call) and e.op in BITWISE_OPS and len(e.args) == 2:
        a, b = _bound(e.args[0], ranges), _bound(e.args[1], ranges)
        if a[0] >= 0 and b[0] >= 0 and a[1] != POS_INF and b[1] != POS_INF:
            if e.op == "tir.bitwise_and":
                return (0, min(a[1], b[1]))
            # Or and xor set no bit above the highest either operand can have.
            return (0, (1 << max(a[1], b[1]).bit_length()) - 1)
    return dtype_bound(e.dtype) if e.dtype.startswith("uint") else (NEG_INF, POS_INF)


# The integer bitwise intrinsics a swizzled index uses, bounded above (and narrowed to int32 by
# the GPU lowering's `narrow_indices`).
BITWISE_OPS = ("tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor")
