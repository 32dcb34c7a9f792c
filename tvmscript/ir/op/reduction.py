"""Reductions over axes: ``sum``, ``mean``, ``max``, ``min``, ``prod``, ``variance``, ``std`` (``axis``: None
= every axis, an int or a list of ints, negative ones counting from the end; ``keepdims``
keeps reduced dimensions as 1) and ``argmax``/``argmin`` (``axis``: one int or None; the result
is int64 indices).

Printed as TVM 0.25 prints them: ``R.sum(x, axis=[1], keepdims=True)``,
``R.argmax(x, axis=1, keepdims=False)``.

Pattern: the op table declares what the analysis (``analyze_op_pattern``) gives the legalized
PrimFunc (``compiler/op/reduction.py`` legalizes them), the same kinds TVM's analysis gives.
sum/max/min/prod are one reduction block:
``reduce`` (kCommReduce). mean and variance end with an elementwise ``T_divide`` writing the
output after the reduction, which the analysis (TVM's rule, as for softmax) calls
``out_ewise_fusable``. argmax/argmin are two reduction blocks here, so ``reduce``; TVM's
tuple-reducer block followed by a copy analyzes as kOutEWiseFusable there (a deviation in
the kind, not in the results). std is variance's stages and a square root.

``median(x, axis, keepdims)`` is the lower median; over a single axis it also gives the int64
index a stable argsort puts there (a tuple, as TVM's). TVM legalizes it through a packed
argsort; here it is TensorIR of its own (``topi.reduction.median``: ranks, then a pick).

``cumsum``/``cumprod(data, axis=None, dtype=None, exclusive=False)`` are scans, legalized into a
PrimFunc built directly (``topi.scan``), which AnnotateTIROpPattern finds opaque (its scan
iterator), as TVM's scan kernels are.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from . import shape_arith

from .common import bool_attr, is_int, normalize_axis, tensor_arg
from .registry import Attr, OpError, register_op


# ----------------------------------------------------------------------------- attributes


def axis_list_attr(value):
    """``axis`` of sum & co.: None, or a list of ints (a single int becomes ``[int]``)."""
    if value is None:
        return None
    if is_int(value):
        return [value]
    if isinstance(value, (list, tuple)) and all(is_int(v) for v in value):
        return list(value)
    raise OpError(f"axis must be an integer, a list of integers or None, not {value!r}", "axis")


def axis_int_attr(value):
    """``axis`` of argmax/argmin: one int or None."""
    if value is None or is_int(value):
        return value
    raise OpError(f"axis must be an integer or None, not {value!r}", "axis")


keepdims_attr = bool_attr("keepdims")


# ----------------------------------------------------------------------------- inference


def reduced_axes(axis, ndim: int) -> list:
    """The reduced axes, normalized; OpError (naming ``axis``) when one is out of range or
    repeated."""
    if axis is None:
        return list(range(ndim))
    axes = [normalize_axis(a, ndim, "axis") for a in axis]
    for i, a in enumerate(axes):
        if a in axes[:i]:
            raise OpError(f"axis {a} appears more than once in axis={axis}", "axis")
    return axes


def reduce_sinfo(x: relax.TensorStructInfo, axis, keepdims: bool, dtype: str) -> relax.TensorStructInfo:
    """Struct info of reducing ``x`` over ``axis`` (a list or None)."""
    if x.ndim < 0:
        if axis is None and not keepdims:
            return relax.TensorStructInfo([], dtype)
        return relax.TensorStructInfo(None, dtype, -1)
    axes = set(reduced_axes(axis, x.ndim))
    ndim = x.ndim if keepdims else x.ndim - len(axes)
    if x.shape is None:
        return relax.TensorStructInfo(None, dtype, ndim)
    shape = []
    for i, d in enumerate(x.shape):
        if i not in axes:
            shape.append(d)
        elif keepdims:
            shape.append(tir.IntImm("int64", 1))
    return relax.TensorStructInfo(shape, dtype)


def infer_reduce(args, attrs):
    x = tensor_arg(args[0], "x")
    return reduce_sinfo(x, attrs["axis"], attrs["keepdims"], x.dtype)


def infer_arg_reduce(args, attrs):
    x = tensor_arg(args[0], "x")
    axis = attrs["axis"]
    return reduce_sinfo(x, None if axis is None else [axis], attrs["keepdims"], "int64")


# ----------------------------------------------------------------------------- registration

# name -> fusion pattern of its legalized PrimFunc (see the module docstring)
STATISTICAL_OPS = {"sum": "reduce", "mean": "out_ewise_fusable", "max": "reduce", "min": "reduce",
                   "prod": "reduce", "variance": "out_ewise_fusable", "std": "out_ewise_fusable"}
for _name, _pattern in STATISTICAL_OPS.items():
    register_op(
        _name, ("x",), infer_reduce,
        attrs=(Attr("axis", None, axis_list_attr), Attr("keepdims", False, keepdims_attr)),
        pattern=_pattern,
    )

for _name in ("argmax", "argmin"):
    register_op(
        _name, ("x",), infer_arg_reduce,
        attrs=(Attr("axis", None, axis_int_attr), Attr("keepdims", False, keepdims_attr)),
        pattern="reduce",
    )


# ----------------------------------------------------------------------------- median


def infer_median(args, attrs):
    """The lower median over ``axis``: over one axis, a tuple of the values and their int64
    indices along it (TVM's form, the positions a stable argsort gives); over several axes or
    all (None), the values alone."""
    x = tensor_arg(args[0], "x")
    axis, keepdims = attrs["axis"], attrs["keepdims"]
    values = reduce_sinfo(x, axis, keepdims, x.dtype)
    if axis is None or len(axis) != 1:
        return values
    indices = reduce_sinfo(x, axis, keepdims, "int64")
    return relax.TupleStructInfo([values, indices])


register_op("median", ("x",), infer_median,
            attrs=(Attr("axis", None, axis_list_attr), Attr("keepdims", False, keepdims_attr)),
            pattern="reduce")


# ----------------------------------------------------------------------------- cumsum, cumprod


def _optional_dtype_attr(value):
    """``dtype`` of cumsum/cumprod: None (the data's), printed ``dtype=None`` as TVM 0.27 does;
    TVM 0.25's ``"void"`` means the same."""
    if value is None or value == "void":
        return None
    if not isinstance(value, str) or not tir.is_valid_dtype(value):
        raise OpError(f"dtype must be a dtype such as \"float32\" or None, not {value!r}", "dtype")
    return value


def infer_cumulative(args, attrs):
    """``data``'s shape along an ``axis`` (the flattened 1-D length when ``axis`` is None),
    in ``dtype`` (the data's when None)."""
    x = tensor_arg(args[0], "data")
    dtype = attrs["dtype"] or x.dtype
    if dtype == "bool":
        raise OpError("a running sum or product of bools needs a numeric dtype= (such as \"int64\")", "dtype")
    axis = attrs["axis"]
    if axis is None:
        if x.shape is None:
            return relax.TensorStructInfo(None, dtype, 1)
        return relax.TensorStructInfo([shape_arith.product(list(x.shape))], dtype)
    if x.ndim >= 0:
        normalize_axis(axis, x.ndim)
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, dtype, x.ndim)


for _kind in ("sum", "prod"):
    register_op(
        f"cum{_kind}", ("data",), infer_cumulative,
        attrs=(Attr("axis", None, axis_int_attr), Attr("dtype", None, _optional_dtype_attr),
               Attr("exclusive", False, bool_attr("exclusive"))),
        # A scan: opaque to fusion, as TVM's (its IR-builder kernel is opaque too).
        pattern="opaque",
    )
