"""Image resizing (TVM's ``topi.image.resize1d/2d/3d`` for Relax's ``image.resize2d`` and
``image.resize3d``) and ``affine_grid``.

A resize is one stage ``resize`` over the output, loops ``i0...``: the data with its spatial axes
(named by the caller from the layout: H, W in NCHW, NHWC or NCHW16c; D, H, W in NCDHW) replaced
by the new sizes. Each output index on a spatial axis maps back to an input coordinate by the
coordinate transformation mode, computed in float32; "nearest_neighbor" rounds it by the
rounding method, "linear" blends the two neighbours on each spatial axis (bilinear, trilinear).
Input indices are clamped to the image, as TVM's are. The other axes (batch, channels, the
inner ``16c`` of a packed layout) are copied through.
"""

from __future__ import annotations

import itertools

from tvmscript.ir import tir

from .. import te
from ._util import compute

__all__ = ["resize", "resize2d", "affine_grid"]

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


def rounding_for(mode: str, rounding: str) -> str:
    """The rounding a nearest-neighbour resize uses: an empty rounding method (resize3d's
    default) means "round" for align_corners and "floor" otherwise, as in TVM."""
    if rounding:
        return rounding
    return "round" if mode == "align_corners" else "floor"


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


def resize(data: te.Tensor, axes, size, method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
           rounding_method: str = "round", out_dtype: str | None = None) -> te.Tensor:
    """``data`` with its spatial axes ``axes`` (positions, outermost first) resized to ``size``."""
    in_shape = list(data.shape)
    out_shape = list(in_shape)
    for ax, s in zip(axes, size):
        out_shape[ax] = s
    out_dtype = out_dtype or data.dtype
    mode = coordinate_transformation_mode
    rounding = rounding_for(mode, rounding_method)
    calc = data.dtype if data.dtype.startswith("float") else _F

    def f(idx):
        coords = [_source_coord(idx[ax], in_shape[ax], out_shape[ax], mode) for ax in axes]
        if method == "nearest_neighbor":
            at = list(idx)
            for ax, c in zip(axes, coords):
                at[ax] = _clamped(_round(c, rounding), in_shape[ax])
            value = data[tuple(at)]
            return value if out_dtype == data.dtype else te.cast(value, out_dtype)
        lows = [te.floor(c) for c in coords]
        weights = [te.cast(c - lo, calc) for c, lo in zip(coords, lows)]
        one = tir.const(1.0, _F)
        neighbours = [(_clamped(lo, in_shape[ax]), _clamped(lo + one, in_shape[ax])) for ax, lo in zip(axes, lows)]
        value = _blend(data, idx, axes, neighbours, weights, calc)
        return value if out_dtype == calc else te.cast(value, out_dtype)

    return compute(out_shape, f, name="resize", prefix="i")


def _blend(data, idx, axes, neighbours, weights, calc) -> tir.PrimExpr:
    """Multi-linear interpolation: the corners' values weighted along each spatial axis, the
    innermost axis blended first (bilinear: left/right, then top/bottom)."""
    unit = tir.const(1.0, calc)
    corners = {}
    for bits in itertools.product((0, 1), repeat=len(axes)):
        at = list(idx)
        for ax, pair, bit in zip(axes, neighbours, bits):
            at[ax] = pair[bit]
        corners[bits] = te.cast(data[tuple(at)], calc)
    for k in reversed(range(len(axes))):
        w = weights[k]
        corners = {bits[:k]: corners[bits[:k] + (0,)] * (unit - w) + corners[bits[:k] + (1,)] * w
                   for bits in itertools.product((0, 1), repeat=k)}
    return corners[()]


def resize2d(data: te.Tensor, size, method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "round", out_dtype: str | None = None, axes=(2, 3)) -> te.Tensor:
    """``data`` resized to ``size`` (height, width); NCHW unless ``axes`` names H and W."""
    return resize(data, axes, size, method, coordinate_transformation_mode, rounding_method, out_dtype)


def affine_grid(theta: te.Tensor, size, align_corners: bool = True) -> te.Tensor:
    """The sampling grid of ``theta`` ((batch, 2, 3) for 2-D, (batch, 3, 4) for 3-D) over an
    image of static ``size`` ((H, W) or (D, H, W)): output ``[n, d, *idx]`` is
    ``theta[n, d, k] + sum_r theta[n, d, k - 1 - r] * c_r(idx[r])`` (k = the number of spatial
    dims; the matrix's columns go x, y, z while the indices go slowest first), the coordinates
    ``c_r`` evenly spaced over [-1, 1]: the corner pixels when ``align_corners``, else the pixel
    centres; an axis of size 1 is at 0 either way. Sizes are Python ints here (the steps are
    constants)."""
    sizes = [int(_static(s)) for s in size]
    k = len(sizes)
    dtype = theta.dtype
    if align_corners:  # an axis of one pixel sits at 0, its centre (as PyTorch's affine_grid)
        starts = [-1.0 if s > 1 else 0.0 for s in sizes]
        steps = [2.0 / (s - 1) if s > 1 else 0.0 for s in sizes]
    else:
        starts = [-1.0 + 1.0 / s for s in sizes]
        steps = [2.0 / s for s in sizes]

    def f(idx):
        n, d, coords = idx[0], idx[1], idx[2:]
        value = theta[n, d, tir.IntImm("int64", k)]
        for r in range(k):
            c = tir.const(starts[r], dtype) + te.cast(coords[r], dtype) * tir.const(steps[r], dtype)
            value = value + theta[n, d, tir.IntImm("int64", k - 1 - r)] * c
        return value

    shape = [theta.shape[0], tir.IntImm("int64", k)] + [tir.IntImm("int64", s) for s in sizes]
    return te.compute(shape, lambda *idx: f(list(idx)), name="compute",
                      varargs_names=["n", "dim"] + [f"i{r}" for r in range(k)])
