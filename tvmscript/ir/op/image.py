"""Image ops: ``R.image.resize2d``, ``R.image.resize3d`` and ``R.image.affine_grid`` (TVM's
``relax.op.image.*``, every attribute printed as TVM prints it: ``roi`` as four (six)
``T.float32`` values, ``out_dtype=None``).

Resizes take any layout naming the axes N, C and H, W (and D for resize3d) once each, in any
order, with inner split axes of the non-spatial ones (``NHWC``, ``NCHW16c``, ``NDHWC``); the
spatial axes are replaced by ``size`` and everything else is copied through. Methods
"nearest_neighbor" and "linear"; the coordinate modes (`MODES`) and rounding methods
(`ROUNDING`) that ``compiler/topi/image.py`` computes. Others are errors at the call, naming
the attribute. Each op is legalized to one PrimFunc named after it (``compiler/op/image.py``).
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import bool_attr, dtype_attr, tensor_arg
from .registry import Arg, Attr, OpError, register_op

_METHODS = ("nearest_neighbor", "linear")
# The coordinate transformation modes and rounding methods the resizes compute.
MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")
ROUNDING = ("round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


def _choice(name: str, allowed, unsupported=()):
    def convert(value):
        if value in unsupported:
            raise OpError(f"{name} {value!r} is not supported yet (supported: {', '.join(allowed)})", name)
        if value not in allowed:
            raise OpError(f"{name} must be one of {', '.join(allowed)}, not {value!r}", name)
        return value

    return convert


def _roi_attr(count: int):
    """None or ``count`` numbers (a box; used only by tf_crop_and_resize), kept as float32 values."""

    def convert(value):
        if value is None:
            value = [0.0] * count
        if isinstance(value, (int, float)):
            value = [value] * count
        if not (isinstance(value, (list, tuple)) and len(value) == count
                and all(isinstance(v, (int, float, tir.FloatImm)) for v in value)):
            raise OpError(f"roi must be {count} numbers, not {value!r}", "roi")
        return [v if isinstance(v, tir.FloatImm) else tir.FloatImm("float32", float(v)) for v in value]

    return convert


def _float_attr(name: str):
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OpError(f"{name} must be a number, not {value!r}", name)
        return float(value)

    return convert


def _int_attr(name: str):
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise OpError(f"{name} must be an integer, not {value!r}", name)
        return value

    return convert


def _out_dtype_attr(value):
    return None if value is None or value == "void" else dtype_attr(value)


def layout_axes(layout: str, spatial: str) -> tuple[int, list[int]]:
    """(rank, positions of the ``spatial`` axes) of a data layout such as ``NCHW16c``: upper-case
    letters are axes, a number and a lower-case letter an inner split of that axis. The layout
    must name N, C and the spatial axes once each; splitting a spatial axis is not supported."""
    primal, splits, i = [], [], 0
    while i < len(layout):
        ch = layout[i]
        if ch.isupper():
            primal.append(ch)
            i += 1
            continue
        j = i
        while j < len(layout) and layout[j].isdigit():
            j += 1
        if j == i or j == len(layout) or not layout[j].islower():
            raise OpError(f"layout {layout!r} is not a layout such as NCHW or NCHW16c", "layout")
        splits.append(layout[j].upper())
        primal.append(None)
        i = j + 1
    need = "NC" + spatial
    named = [a for a in primal if a is not None]
    if sorted(named) != sorted(need) or len(set(named)) != len(named):
        raise OpError(f"layout must name the axes {', '.join(need)} once each, not {layout!r}", "layout")
    for axis in splits:
        if axis not in named or axis in spatial:
            raise OpError(f"layout {layout!r}: an inner split of axis {axis} is not supported", "layout")
    return len(primal), [primal.index(a) for a in spatial]


def _layout_attr(spatial: str):
    def convert(value):
        if not isinstance(value, str):
            raise OpError(f"layout must be a string such as {'NC' + spatial!r}, not {value!r}", "layout")
        layout_axes(value, spatial)
        return value

    return convert


def _canonicalize_size(k: int):
    """One size stands for every spatial axis, as in TVM's Python functions."""

    def canonicalize(args, attrs):
        size = args[1]
        if isinstance(size, relax.ShapeExpr) and len(size.values) == 1:
            values = [size.values[0]] * k
            args = [args[0], relax.ShapeExpr(values, relax.ShapeStructInfo(values))]
        return args, attrs

    return canonicalize


def _infer_resize(args, attrs, spatial: str):
    """The data with its ``spatial`` axes (found in the layout) replaced by ``size``, in
    ``out_dtype`` (the data's when None)."""
    rank, axes = layout_axes(attrs["layout"], spatial)
    x = tensor_arg(args[0], "data")
    size = args[1]
    k = len(spatial)
    if not isinstance(size, relax.ShapeStructInfo):
        raise OpError(f"size must be a shape such as {(8,) * k}", "size")
    if size.ndim >= 0 and size.ndim != k:
        raise OpError(f"size must have {k} values ({', '.join(spatial)}), got {size.ndim}", "size")
    if x.ndim >= 0 and x.ndim != rank:
        raise OpError(f"data must be {rank}-D (layout {attrs['layout']}), got rank {x.ndim}", "data")
    dtype = attrs["out_dtype"] or x.dtype
    if x.shape is None or size.values is None:
        return relax.TensorStructInfo(None, dtype, rank)
    shape = list(x.shape)
    for ax, v in zip(axes, size.values):
        shape[ax] = v
    return relax.TensorStructInfo(shape, dtype)


def infer_resize2d(args, attrs):
    return _infer_resize(args, attrs, "HW")


def infer_resize3d(args, attrs):
    return _infer_resize(args, attrs, "DHW")


def _resize_attrs(spatial: str, layout: str, rounding: str) -> tuple:
    k = len(spatial)
    return (Attr("roi", None, _roi_attr(2 * k)), Attr("layout", layout, _layout_attr(spatial)),
            Attr("method", "linear", _choice("method", _METHODS, ("cubic",))),
            Attr("coordinate_transformation_mode", "half_pixel",
                 _choice("coordinate_transformation_mode", MODES, ("tf_crop_and_resize",))),
            Attr("rounding_method", rounding, _choice("rounding_method", ROUNDING + ("",))),
            Attr("cubic_alpha", -0.75, _float_attr("cubic_alpha")),
            Attr("cubic_exclude", 0, _int_attr("cubic_exclude")),
            Attr("extrapolation_value", 0.0, _float_attr("extrapolation_value")),
            Attr("out_dtype", None, _out_dtype_attr))


def infer_affine_grid(args, attrs):
    """(batch, k, *size) in theta's dtype, for theta of shape (batch, k, k + 1) and k = 2 or 3
    sizes."""
    theta = tensor_arg(args[0], "data")
    size = args[1]
    if not isinstance(size, relax.ShapeStructInfo) or size.ndim not in (2, 3):
        raise OpError("size must be a shape of 2 values (H, W) or 3 (D, H, W)", "size")
    if theta.ndim >= 0 and theta.ndim != 3:
        raise OpError(f"data must be 3-D (batch, {size.ndim}, {size.ndim + 1}), got rank {theta.ndim}", "data")
    k = size.ndim
    if theta.shape is not None:
        for got, want in zip(theta.shape[1:], (k, k + 1)):
            if isinstance(got, tir.IntImm) and got.value != want:
                raise OpError(f"data must have shape (batch, {k}, {k + 1}) for {k} sizes, got "
                              f"({', '.join(str(d) for d in theta.shape)})", "data")
    if theta.shape is None or size.values is None:
        return relax.TensorStructInfo(None, theta.dtype, k + 2)
    return relax.TensorStructInfo([theta.shape[0], tir.IntImm("int64", k)] + list(size.values), theta.dtype)


register_op("image.resize2d", ("data", Arg("size", "shape")), infer_resize2d,
            attrs=_resize_attrs("HW", "NCHW", "round"), pattern="injective", canonicalize=_canonicalize_size(2))
register_op("image.resize3d", ("data", Arg("size", "shape")), infer_resize3d,
            attrs=_resize_attrs("DHW", "NCDHW", ""), pattern="injective", canonicalize=_canonicalize_size(3))
register_op("image.affine_grid", ("data", Arg("size", "shape")), infer_affine_grid,
            attrs=(Attr("align_corners", True, bool_attr("align_corners")),), pattern="injective")
