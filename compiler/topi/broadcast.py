"""Binary operators with NumPy broadcasting (TVM's ``topi/broadcast.h``): ``T_add`` etc.

An operand may be a tensor or a scalar (number / PrimExpr). The output shape is the broadcast
of the operands'; an operand's index along a dimension is the loop variable where its extent
equals the output's, and 0 where the operand's extent is 1 (a broadcast dimension).
"""

from __future__ import annotations

from tvmscript import tir

from .. import te
from ._util import compute, is_one, same_dim

__all__ = ["broadcast_shape", "broadcast_binary", "add", "subtract", "multiply", "divide"]


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
