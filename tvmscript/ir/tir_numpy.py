"""TIR integer expressions evaluated over NumPy arrays of their variables' values
(`evaluate_on_arrays`): one evaluation of an index expression gives the index of every
point of an iteration space at once.

Why one place: three questions need it, each over a whole space of indices: whether an
index map is a bijection (`compiler.schedule.layout`), which element of a constant each
packed element holds (`compiler.prepack_constants`), and which elements of a scratch
buffer its first statements write (`compiler.written_first`)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import tir

__all__ = ["evaluate_on_arrays"]


_CONDITIONS = {tir.EQ: np.equal, tir.NE: np.not_equal, tir.LT: np.less, tir.LE: np.less_equal, tir.GT: np.greater,
              tir.GE: np.greater_equal, tir.And: np.logical_and, tir.Or: np.logical_or}


def evaluate_on_arrays(e, env: dict) -> Optional[object]:
    """``e`` evaluated with each variable its NumPy integer array (or integer) in ``env``
    (arrays broadcast against each other); None where ``e`` uses a variable not in ``env``,
    a division by zero, or anything but integer arithmetic (``+ - * // % min max``, TIR's
    truncating ``Div``/``Mod``, casts, ``Select``) and conditions over it (comparisons,
    ``and``, ``or``, ``not``: boolean arrays)."""
    if isinstance(e, tir.Var):
        return env.get(e)
    if isinstance(e, tir.IntImm):
        return np.int64(e.value)
    if isinstance(e, tir.Cast):
        return evaluate_on_arrays(e.value, env)
    if isinstance(e, tir.BinaryOp):
        a, b = evaluate_on_arrays(e.a, env), evaluate_on_arrays(e.b, env)
        if a is None or b is None:
            return None
        if isinstance(e, tir.Add):
            return a + b
        if isinstance(e, tir.Sub):
            return a - b
        if isinstance(e, tir.Mul):
            return a * b
        if isinstance(e, (tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod)):
            if np.any(b == 0):
                return None
            if isinstance(e, tir.FloorDiv):
                return np.floor_divide(a, b)
            if isinstance(e, tir.FloorMod):
                return np.mod(a, b)
            q = np.trunc(a / b).astype(np.int64)
            return q if isinstance(e, tir.Div) else a - q * b
        if isinstance(e, tir.Min):
            return np.minimum(a, b)
        if isinstance(e, tir.Max):
            return np.maximum(a, b)
        condition = _CONDITIONS.get(type(e))
        return None if condition is None else condition(a, b)
    if isinstance(e, tir.Not):
        a = evaluate_on_arrays(e.a, env)
        return None if a is None else np.logical_not(a)
    if isinstance(e, tir.Select):
        c, t, f = (evaluate_on_arrays(x, env) for x in (e.condition, e.true_value, e.false_value))
        return None if c is None or t is None or f is None else np.where(c, t, f)
    return None
