"""Tensor creation (TVM's ``topi.full`` and ``topi.arange``): ``T_full`` and ``T_arange``,
loops ``ax0, ax1...``; neither reads a tensor (``full`` may read a rank-0 fill tensor)."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.shape_arith import ceildiv, sub

from .. import te
from ._util import compute, const_like

__all__ = ["full", "arange"]


def full(shape, dtype: str, fill_value) -> te.Tensor:
    """``T_full``: every element ``fill_value`` — a number (inlined as a constant of ``dtype``,
    as TVM's legalization does for constant fill values) or a rank-0 tensor (read and cast)."""
    if isinstance(fill_value, te.Tensor):
        value = te.cast(fill_value[()], dtype)
    elif isinstance(fill_value, tir.PrimExpr):
        value = te.cast(fill_value, dtype)
    else:
        value = const_like(fill_value, dtype)
    return compute(list(shape), lambda idx: value, name="T_full")


def arange(start, stop, step, dtype: str, length=None) -> te.Tensor:
    """``T_arange``: ``start + i * step``, cast to ``dtype``; ``length`` (the extent) is
    ``ceil((stop - start) / step)`` unless given."""
    def prim(v, dt):
        return v if isinstance(v, tir.PrimExpr) else tir.const(v, dt)

    calc = dtype if tir.is_float(dtype) else "int64"
    start, step = prim(start, calc), prim(step, calc)
    if length is None:
        length = _length(start, prim(stop, calc), step)

    def f(idx):
        i = te.cast(idx[0], calc)
        return te.cast(tir.Add(calc, te.cast(start, calc), tir.Mul(calc, i, te.cast(step, calc))), dtype)

    return compute([length], f, name="T_arange")


def _length(start, stop, step):
    if all(isinstance(v, tir.IntImm) for v in (start, stop, step)):
        import math

        return tir.IntImm("int64", max(math.ceil((stop.value - start.value) / step.value), 0))
    return ceildiv(sub(stop, start), step)
