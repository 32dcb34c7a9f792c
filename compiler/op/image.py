"""Image ops: ``R.image.resize2d`` (TVM's ``relax.op.image.resize2d``, every attribute printed
as TVM prints it: ``roi`` as four ``T.float32`` values, ``out_dtype=None``).

Supported here: layout NCHW; methods "nearest_neighbor" and "linear"; the coordinate modes and
rounding methods in ``compiler/topi/image.py``. Others are errors at the call, naming the
attribute. Legalized to one PrimFunc ``resize2d`` (block ``resize``).
"""

from __future__ import annotations

from tvmscript import relax, tir

from ..topi import image as timage
from .common import dtype_attr, shapes_known, tensor_arg
from .registry import Arg, Attr, OpError, register_op

_METHODS = ("nearest_neighbor", "linear")


def _choice(name: str, allowed, unsupported=()):
    def convert(value):
        if value in unsupported:
            raise OpError(f"{name} {value!r} is not supported yet (supported: {', '.join(allowed)})", name)
        if value not in allowed:
            raise OpError(f"{name} must be one of {', '.join(allowed)}, not {value!r}", name)
        return value

    return convert


def _roi_attr(value):
    """None or four numbers (used only by tf_crop_and_resize), kept as float32 values."""
    if value is None:
        value = [0.0] * 4
    if isinstance(value, (int, float)):
        value = [value] * 4
    if not (isinstance(value, (list, tuple)) and len(value) == 4 and all(isinstance(v, (int, float, tir.FloatImm))
                                                                         for v in value)):
        raise OpError(f"roi must be four numbers, not {value!r}", "roi")
    return [v if isinstance(v, tir.FloatImm) else tir.FloatImm("float32", float(v)) for v in value]


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


def canonicalize_resize2d(args, attrs):
    """One size stands for both height and width, as in TVM's Python function."""
    size = args[1]
    if isinstance(size, relax.ShapeExpr) and len(size.values) == 1:
        values = [size.values[0], size.values[0]]
        args = [args[0], relax.ShapeExpr(values, relax.ShapeStructInfo(values))]
    return args, attrs


def infer_resize2d(args, attrs):
    """NCHW data with H, W replaced by ``size``, in ``out_dtype`` (the data's when None)."""
    x = tensor_arg(args[0], "data")
    size = args[1]
    if not isinstance(size, relax.ShapeStructInfo):
        raise OpError("size must be a shape such as (8, 8)", "size")
    if size.ndim >= 0 and size.ndim != 2:
        raise OpError(f"size must have 2 values (height, width), got {size.ndim}", "size")
    if x.ndim >= 0 and x.ndim != 4:
        raise OpError(f"data must be 4-D (NCHW), got rank {x.ndim}", "data")
    dtype = attrs["out_dtype"] or x.dtype
    if x.shape is None or size.values is None:
        return relax.TensorStructInfo(None, dtype, 4)
    return relax.TensorStructInfo(list(x.shape[:2]) + list(size.values), dtype)


def legalize_resize2d(bb, call):
    if not shapes_known(call):
        return None
    a = call.attrs

    def te_fn(data, size):
        return timage.resize2d(data, size, a["method"], a["coordinate_transformation_mode"], a["rounding_method"],
                               a["out_dtype"])

    return bb.call_te(te_fn, call.args[0], list(call.args[1].values), primfunc_name_hint="resize2d")


register_op(
    "image.resize2d", ("data", Arg("size", "shape")), infer_resize2d,
    attrs=(Attr("roi", None, _roi_attr), Attr("layout", "NCHW", _choice("layout", ("NCHW",), ("NHWC", "NCHWc"))),
           Attr("method", "linear", _choice("method", _METHODS, ("cubic",))),
           Attr("coordinate_transformation_mode", "half_pixel",
                _choice("coordinate_transformation_mode", timage.MODES, ("tf_crop_and_resize",))),
           Attr("rounding_method", "round", _choice("rounding_method", timage.ROUNDING)),
           Attr("cubic_alpha", -0.75, _float_attr("cubic_alpha")), Attr("cubic_exclude", 0, _int_attr("cubic_exclude")),
           Attr("extrapolation_value", 0.0, _float_attr("extrapolation_value")),
           Attr("out_dtype", None, _out_dtype_attr)),
    pattern="injective", legalize=legalize_resize2d, canonicalize=canonicalize_resize2d)
