"""Constructors of TIR arithmetic that fold what is constant: ``make_add(x, 0)`` is ``x``.

Passes and schedule primitives build index expressions with these, so that the TIR they print
reads as TVM's does (its operators fold the same way) and no ``+ 0`` or ``* 1`` survives.
"""

from __future__ import annotations

from typing import Optional

from . import tir

__all__ = ["const_int", "is_one", "make_cast", "make_add", "make_sub", "make_mul", "make_floordiv", "make_floormod",
           "make_and"]


def const_int(e) -> Optional[int]:
    return e.value if isinstance(e, tir.IntImm) else None


def is_one(e) -> bool:
    """Whether ``e`` is the constant 1: a unit dimension, a loop of one iteration."""
    return isinstance(e, tir.IntImm) and e.value == 1


def make_cast(e, dtype: str):
    """``e`` (a PrimExpr or a Python int) in ``dtype``: itself, a constant of that type, or a
    `tir.Cast`."""
    if isinstance(e, int):
        return tir.IntImm(dtype, e)
    if e.dtype == dtype:
        return e
    if isinstance(e, tir.IntImm) and tir.is_int(dtype):
        return tir.IntImm(dtype, e.value)
    return tir.Cast(dtype, e)


def make_add(a, b):
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return tir.IntImm(a.dtype, ca + cb)
    if cb == 0:
        return a
    if ca == 0:
        return b
    return tir.Add(a.dtype, a, b)


def make_sub(a, b):
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return tir.IntImm(a.dtype, ca - cb)
    if cb == 0:
        return a
    return tir.Sub(a.dtype, a, b)


def make_mul(a, b):
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return tir.IntImm(a.dtype, ca * cb)
    if cb == 1:
        return a
    if ca == 1:
        return b
    if ca == 0 or cb == 0:
        return tir.IntImm(a.dtype, 0)
    return tir.Mul(a.dtype, a, b)


def make_floordiv(a, b):
    """``a // b`` folded as TVM's operators fold it (``x // 1`` is ``x``)."""
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb:
        return tir.IntImm(a.dtype, ca // cb)
    if cb == 1:
        return a
    return tir.FloorDiv(a.dtype, a, b)


def make_floormod(a, b):
    """``a % b`` folded as TVM's operators fold it (``x % 1`` is ``0``)."""
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb:
        return tir.IntImm(a.dtype, ca % cb)
    if cb == 1:
        return tir.IntImm(a.dtype, 0)
    return tir.FloorMod(a.dtype, a, b)


def make_and(a, b):
    """``a and b``, where a missing condition (None) is true."""
    if a is None:
        return b
    return tir.And("bool", a, b)


def all_of(conds: list):
    """The conjunction of ``conds``, folded from the left with `make_and` (``True`` for none)."""
    out = None
    for c in conds:
        out = make_and(out, c)
    return out if out is not None else tir.IntImm("bool", 1)


def conjuncts(pred) -> list:
    """The terms of an ``and`` chain (none for a true or missing predicate): the inverse of
    `all_of`."""
    if pred is None or (isinstance(pred, tir.IntImm) and pred.value):
        return []
    if isinstance(pred, tir.And):
        return conjuncts(pred.a) + conjuncts(pred.b)
    return [pred]
