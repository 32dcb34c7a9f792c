"""Searching a sorted sequence (TVM's ``topi.searchsorted``, Relax's ``bucketize``): block
``searchsorted``, one count per input element of the boundaries before it.

TVM binary-searches in a sequential loop; here the position is a sum over the boundaries
(``boundaries[k] < x``, or ``<=`` for ``right``), a plain reduction the schedulers handle,
equal for sorted boundaries.
"""

from __future__ import annotations

from tvmscript.ir import tir

from .. import te

__all__ = ["searchsorted"]


def searchsorted(boundaries: te.Tensor, values: te.Tensor, right: bool = False, out_dtype: str = "int64") -> te.Tensor:
    """For each of ``values``, how many of the 1-D sorted ``boundaries`` are below it (not above
    it when ``right``): the index to insert it at, as ``torch.bucketize`` defines."""
    k = te.reduce_axis((0, boundaries.shape[0]), name="k")
    one, zero = tir.const(1, out_dtype), tir.const(0, out_dtype)

    def f(*idx):
        b, v = boundaries[(k,)], values[tuple(idx)]
        before = tir.LE("bool", b, v) if right else tir.LT("bool", b, v)
        return te.sum(tir.Select(out_dtype, before, one, zero), axis=k)

    return te.compute(values.shape, f, name="searchsorted")
