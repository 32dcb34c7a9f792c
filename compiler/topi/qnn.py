"""Quantization (TVM's ``topi`` for Relax's ``quantize``/``dequantize``): stages ``quantized``
and ``dequantized``, loops ``i0, i1...`` as TVM's Python compute names them.

``scale`` and ``zero_point`` are scalars (rank-0 tensors) or 1-D tensors along ``axis`` (one
value per channel).
"""

from __future__ import annotations

from tvmscript.ir import tir

from .. import te
from ._util import compute

__all__ = ["quantize", "dequantize"]


def _per_axis(t: te.Tensor, idx: list, axis: int):
    """``t``'s value for output position ``idx``: its only element, or the one at ``idx[axis]``."""
    return t[()] if len(t.shape) == 0 else t[(idx[axis],)]


def quantize(data: te.Tensor, scale: te.Tensor, zero_point: te.Tensor, axis: int, out_dtype: str) -> te.Tensor:
    """``clip(round(data / scale) + zero_point)`` to ``out_dtype``'s range, then cast; round is
    to nearest, ties to even (``T.round`` as TVM prints it)."""
    dtype = data.dtype
    lo, hi = (tir.const(float(te.min_value(out_dtype).value), dtype),
              tir.const(float(te.max_value(out_dtype).value), dtype))

    def f(idx):
        q = te.round(data[tuple(idx)] / _per_axis(scale, idx, axis)) + te.cast(_per_axis(zero_point, idx, axis), dtype)
        return te.cast(te.max(te.min(q, hi), lo), out_dtype)

    return compute(data.shape, f, name="quantized", prefix="i")


def dequantize(data: te.Tensor, scale: te.Tensor, zero_point: te.Tensor, axis: int, out_dtype: str) -> te.Tensor:
    """``(int32(data) - int32(zero_point)) * scale`` in ``scale``'s float type, cast to ``out_dtype``."""
    def f(idx):
        diff = te.cast(data[tuple(idx)], "int32") - te.cast(_per_axis(zero_point, idx, axis), "int32")
        value = te.cast(diff, scale.dtype) * _per_axis(scale, idx, axis)
        return value if out_dtype == scale.dtype else te.cast(value, out_dtype)

    return compute(data.shape, f, name="dequantized", prefix="i")
