"""Binary operators with NumPy broadcasting (TVM's ``topi/broadcast.h``): ``T_add`` etc.

An operand may be a tensor or a scalar (number / PrimExpr). The output shape is the broadcast
of the operands'; an operand's index along a dimension is the loop variable where its extent
equals the output's, and 0 where the operand's extent is 1 (a broadcast dimension).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import is_one

from .. import te
from ._util import compute, same_dim

__all__ = [
    "broadcast_shape", "broadcast_binary", "add", "subtract", "multiply", "divide", "floor_divide",
    "power", "atan2", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "where",
]


def broadcast_shape(a: list, b: list) -> list:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else None
        db = b[-i] if i <= len(b) else None
        if da is None:
            out.append(db)
        elif db is None or same_dim(da, db) or is_one(db):
            out.append(da)
        elif is_one(da):
            out.append(db)
        else:
            # Two different symbolic extents: TVM assumes they agree at run time.
            out.append(da)
    return out[::-1]


def broadcast_index(t: te.Tensor, oshape: list, idx: list) -> list:
    """Indices into ``t`` for output position ``idx`` (``t``'s dims are the trailing ones)."""
    off = len(oshape) - len(t.shape)
    out = []
    for k, d in enumerate(t.shape):
        o = oshape[off + k]
        out.append(tir.IntImm(idx[off + k].dtype, 0) if is_one(d) and not is_one(o) else idx[off + k])
    return out


def broadcast_binary(name: str, fn, a, b) -> te.Tensor:
    """``T_<name>[i] = fn(a[bcast(i)], b[bcast(i)])``; either operand may be a scalar."""
    if not isinstance(a, te.Tensor) and not isinstance(b, te.Tensor):
        raise TypeError(f"{name}: one operand must be a tensor")
    ta = a if isinstance(a, te.Tensor) else None
    tb = b if isinstance(b, te.Tensor) else None
    oshape = broadcast_shape(list(ta.shape) if ta else [], list(tb.shape) if tb else [])

    def load(x, t, idx):
        if t is None:
            other = tb if ta is None else ta
            return tir.const(x, other.dtype) if not isinstance(x, tir.PrimExpr) else x
        return t[tuple(broadcast_index(t, oshape, idx))] if t.shape else t[()]

    return compute(oshape, lambda idx: fn(load(a, ta, idx), load(b, tb, idx)), name=f"T_{name}")


def add(a, b):
    return broadcast_binary("add", lambda x, y: x + y, a, b)


def subtract(a, b):
    return broadcast_binary("subtract", lambda x, y: x - y, a, b)


def multiply(a, b):
    return broadcast_binary("multiply", lambda x, y: x * y, a, b)


def divide(a, b):
    return broadcast_binary("divide", lambda x, y: x / y, a, b)


def floor_divide(a, b):
    """``a // b`` rounding toward -inf as NumPy: ``FloorDiv`` on integers, ``floor(a / b)`` on
    floats (as TVM's ``topi.floor_divide``)."""
    def fn(x, y):
        if tir.is_float(x.dtype):
            return te.floor(x / y)
        return te.floordiv(x, y)

    return broadcast_binary("floor_divide", fn, a, b)


def power(a, b):
    return broadcast_binary("power", te.power, a, b)


def atan2(a, b):
    """``T_atan2[i] = atan2(a[i], b[i])``, the angle of the point (b, a), with broadcasting."""
    return broadcast_binary("atan2", te.atan2, a, b)


def maximum(a, b):
    return broadcast_binary("maximum", te.max, a, b)


def minimum(a, b):
    return broadcast_binary("minimum", te.min, a, b)


def _comparison(name: str, cls):
    def fn(a, b):
        return broadcast_binary(name, lambda x, y: tir._binary(cls, x, y), a, b)

    fn.__name__ = name
    fn.__doc__ = f"``T_{name}``: the elementwise comparison, a bool tensor."
    return fn


equal = _comparison("equal", tir.EQ)
not_equal = _comparison("not_equal", tir.NE)
less = _comparison("less", tir.LT)
less_equal = _comparison("less_equal", tir.LE)
greater = _comparison("greater", tir.GT)
greater_equal = _comparison("greater_equal", tir.GE)


def logical_and(a, b):
    return broadcast_binary("logical_and", lambda x, y: tir.And("bool", x, y), a, b)


def logical_or(a, b):
    return broadcast_binary("logical_or", lambda x, y: tir.Or("bool", x, y), a, b)


def where(condition: te.Tensor, x: te.Tensor, y: te.Tensor) -> te.Tensor:
    """``T_where[i] = condition[i] ? x[i] : y[i]``, the three shapes broadcast together."""
    oshape = broadcast_shape(broadcast_shape(list(condition.shape), list(x.shape)), list(y.shape))

    def load(t, idx):
        return t[tuple(broadcast_index(t, oshape, idx))] if t.shape else t[()]

    def f(idx):
        cond = load(condition, idx)
        if cond.dtype == "bool":  # TVM tests a bool as its simplifier leaves ``c != 0``
            cond = tir.LT("bool", tir.IntImm("int64", 0), tir.Cast("int64", cond))
        else:
            cond = tir.NE("bool", cond, tir.const(0, cond.dtype))
        return tir.Select(x.dtype, cond, load(x, idx), load(y, idx))

    return compute(oshape, f, name="T_where")
