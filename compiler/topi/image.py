"""Image resizing (TVM's ``topi.image.resize2d`` for Relax's ``image.resize2d``): one stage
``resize`` over an NCHW output, loops ``i0..i3``.

Each output pixel maps back to an input coordinate by the coordinate transformation mode,
computed in float32; "nearest_neighbor" rounds it by the rounding method, "linear" blends the
two neighbours on each axis. Input indices are clamped to the image, as TVM's are.
"""

from __future__ import annotations

from tvmscript import tir

from .. import te
from ._util import compute

__all__ = ["resize2d"]

MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")
ROUNDING = ("round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")

_F = "float32"


def _static(v):
    return v.value if isinstance(v, tir.IntImm) else v if isinstance(v, int) else None


def _f(v) -> tir.PrimExpr:
    """A dim as float32: folded when static."""
    return tir.const(float(_static(v)), _F) if _static(v) is not None else te.cast(v, _F)


def _source_coord(x, in_dim, out_dim, mode: str) -> tir.PrimExpr:
    """The input coordinate output index ``x`` reads, in float32."""
    xf, i, o = te.cast(x, _F), _f(in_dim), _f(out_dim)
    half = tir.const(0.5, _F)
    if mode == "align_corners":
        one = tir.const(1.0, _F)
        return tir.Select(_F, o > one, xf * (i - one) / (o - one), tir.const(0.0, _F))
    if mode == "asymmetric":
        return xf * (i / o)
    if mode == "tf_half_pixel_for_nn":
        return (xf + half) * (i / o)
    coord = (xf + half) * (i / o) - half
    if mode == "pytorch_half_pixel":
        return tir.Select(_F, o > tir.const(1.0, _F), coord, tir.const(0.0, _F))
    return coord


def _round(v, method: str) -> tir.PrimExpr:
    half = tir.const(0.5, _F)
    if method == "floor":
        return te.floor(v)
    if method == "ceil":
        return te.ceil(v)
    if method == "round_prefer_floor":
        return te.ceil(v - half)
    if method == "round_prefer_ceil":
        return te.floor(v + half)
    return te.round(v)  # to nearest, ties to even


def _clamped(v, dim) -> tir.PrimExpr:
    """A float coordinate (already whole) as an index inside ``[0, dim)``."""
    i = te.cast(v, "int64")
    hi = tir.IntImm("int64", _static(dim) - 1) if _static(dim) is not None else te.cast(dim, "int64") - tir.IntImm("int64", 1)
    return te.max(te.min(i, hi), tir.IntImm("int64", 0))


def resize2d(data: te.Tensor, size, method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "round", out_dtype: str | None = None) -> te.Tensor:
    """``data`` (NCHW) resized to ``size`` (height, width)."""
    n, c, ih, iw = data.shape
    oh, ow = size
    out_dtype = out_dtype or data.dtype
    mode = coordinate_transformation_mode
    calc = data.dtype if data.dtype.startswith("float") else _F

    def f(idx):
        b, ch, y, x = idx
        sy, sx = _source_coord(y, ih, oh, mode), _source_coord(x, iw, ow, mode)
        if method == "nearest_neighbor":
            value = data[b, ch, _clamped(_round(sy, rounding_method), ih), _clamped(_round(sx, rounding_method), iw)]
            return value if out_dtype == data.dtype else te.cast(value, out_dtype)
        y0, x0 = te.floor(sy), te.floor(sx)
        wy, wx = te.cast(sy - y0, calc), te.cast(sx - x0, calc)
        one = tir.const(1.0, _F)
        ys = (_clamped(y0, ih), _clamped(y0 + one, ih))
        xs = (_clamped(x0, iw), _clamped(x0 + one, iw))
        px = [[te.cast(data[b, ch, yy, xx], calc) for xx in xs] for yy in ys]
        unit = tir.const(1.0, calc)
        top = px[0][0] * (unit - wx) + px[0][1] * wx
        bottom = px[1][0] * (unit - wx) + px[1][1] * wx
        value = top * (unit - wy) + bottom * wy
        return value if out_dtype == calc else te.cast(value, out_dtype)

    return compute([n, c, oh, ow], f, name="resize", prefix="i")
