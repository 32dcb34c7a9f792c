"""Small helpers the converters share: scalars of a tensor's dtype, axes, broadcasting."""

from __future__ import annotations

import numpy as np

from ..... import relax, tir
from ..values import same_element


def scalar(value, dtype: str) -> relax.Constant:
    """A rank-0 constant of `dtype` (bfloat16 too, which NumPy's own dtypes lack)."""
    return relax.const(value, dtype)


def dtype_limits(dtype: str) -> tuple:
    """The smallest and largest finite values of a float or integer dtype (bfloat16's from
    ml_dtypes, which onnx depends on, as NumPy's finfo does not know it)."""
    if dtype == "bfloat16":
        import ml_dtypes

        info = ml_dtypes.finfo(ml_dtypes.bfloat16)
    else:
        info = np.finfo(dtype) if is_float(dtype) else np.iinfo(dtype)
    return info.min, info.max


def normalize_axis(ctx, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ctx.error(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(ctx, axes, ndim: int) -> list:
    return [normalize_axis(ctx, int(a), ndim) for a in axes]


def broadcast_shapes(ctx, a: list, b: list) -> list:
    """NumPy's broadcast of two shapes (lists of ints / PrimExprs), for Expand."""
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if _is_one(x):
            out.append(y)
        elif _is_one(y) or same_element(x, y):
            out.append(x)
        elif same_element(x, y) is False:
            raise ctx.error(f"shapes {a} and {b} do not broadcast")
        else:
            out.append(x)  # two symbolic dims: the model promises they agree
    return out


def _is_one(d) -> bool:
    return (isinstance(d, int) and d == 1) or (isinstance(d, tir.IntImm) and d.value == 1)


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))
