"""Indexed ops: ``take``, ``gather_elements``/``scatter_elements``, ``one_hot`` and
``gather_nd``/``scatter_nd``: each reads (or writes) the data at positions an integer tensor
holds, so their checks are about the indices' dtype and rank against the data's.

gather_elements and one_hot print and legalize as TVM 0.27's (``gather``, ``one_hot``);
negative indices count from the end. scatter_elements reduces over the updates in TE (see
``topi.scatter_elements``), so its PrimFunc is out-ewise-fusable where TVM's sequential kernel
is opaque; its "mean" reduction (TVM's pairwise running average) is not supported. ``take`` of
a prim-value index (TVM infers it) drops the axis. The legalizations are
``compiler/op/indexing.py``.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import (REQUIRED, dim_equal, fmt_shape, int_attr, integer_tensor, normalize_axis, optional_int_attr,
                     static_dim, tensor_arg)
from .registry import Arg, Attr, OpError, register_op


# ----------------------------------------------------------------------------- take


def _mode_attr(value):
    if value not in ("fast", "clip", "wrap"):
        raise OpError(f"mode must be \"fast\", \"clip\" or \"wrap\", not {value!r}", "mode")
    return value


def _take_indices(sinfo) -> relax.TensorStructInfo:
    """The indices of a take: a tensor, or a prim value (``R.take(x, i, axis=1)``: one index,
    a 0-d tensor, so the axis is dropped)."""
    if isinstance(sinfo, relax.PrimStructInfo):
        return relax.TensorStructInfo([], sinfo.dtype)
    return tensor_arg(sinfo, "indices")


def infer_take(args, attrs):
    x, idx = tensor_arg(args[0], "x"), _take_indices(args[1])
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise OpError(f"indices must be integers, not {idx.dtype}", "indices")
    axis = attrs["axis"]
    if axis is None:
        return relax.TensorStructInfo(list(idx.shape) if idx.shape is not None else None, x.dtype,
                                      idx.ndim if idx.shape is None else -1)
    if x.ndim < 0 or idx.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    axis = normalize_axis(axis, x.ndim, "axis")
    if x.shape is None or idx.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim - 1 + idx.ndim)
    return relax.TensorStructInfo(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]), x.dtype)


register_op("take", ("x", "indices"), infer_take,
            attrs=(Attr("axis", None, optional_int_attr("axis")), Attr("mode", "fast", _mode_attr)),
            pattern="injective")


# ----------------------------------------------------------------------------- gather_elements, scatter_elements


def _same_rank(x: relax.TensorStructInfo, other: relax.TensorStructInfo, what: str) -> None:
    if x.ndim >= 0 and other.ndim >= 0 and x.ndim != other.ndim:
        raise OpError(f"{what} must have the data's rank {x.ndim}, got rank {other.ndim}", what)


def infer_gather_elements(args, attrs):
    """The indices' shape (the data's rank) with the data's dtype."""
    x, idx = tensor_arg(args[0], "data"), integer_tensor(args[1])
    _same_rank(x, idx, "indices")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(idx.shape) if idx.shape is not None else None, x.dtype,
                                  idx.ndim if idx.shape is None else -1)


register_op("gather_elements", ("data", "indices"), infer_gather_elements, attrs=(Attr("axis", 0, int_attr("axis")),),
            # TVM's analysis calls its gather opaque; an indexed load is injective here, as take's.
            pattern="injective")


_SCATTER_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _reduction_attr(value):
    if value == "mean":
        raise OpError("reduction \"mean\" is not supported (TVM averages pairwise in update order); use "
                      "\"add\" and divide", "reduction")
    if value not in _SCATTER_REDUCTIONS:
        raise OpError(f"reduction must be one of {', '.join(repr(r) for r in _SCATTER_REDUCTIONS)}, not {value!r}",
                      "reduction")
    return value


def infer_scatter_elements(args, attrs):
    """The data's struct info; ``updates`` has the indices' shape and the data's dtype, both
    the data's rank."""
    x, idx = tensor_arg(args[0], "data"), integer_tensor(args[1])
    upd = tensor_arg(args[2], "updates")
    _same_rank(x, idx, "indices")
    _same_rank(x, upd, "updates")
    if upd.dtype and x.dtype and upd.dtype != x.dtype:
        raise OpError(f"updates have dtype {upd.dtype} but data has {x.dtype}", "updates")
    if idx.shape is not None and upd.shape is not None:
        for a, b in zip(idx.shape, upd.shape):
            if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
                raise OpError(f"updates have shape ({fmt_shape(upd.shape)}) but indices ({fmt_shape(idx.shape)})",
                              "updates")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


register_op("scatter_elements", ("data", "indices", "updates"), infer_scatter_elements,
            attrs=(Attr("axis", 0, int_attr("axis")), Attr("reduction", "update", _reduction_attr)),
            # Reductions over the updates, then the output stage (see topi.scatter_elements);
            # TVM's sequential kernel is opaque.
            pattern="out_ewise_fusable")


# ----------------------------------------------------------------------------- one_hot


def infer_one_hot(args, attrs):
    """The indices' shape with ``depth`` inserted at ``axis``, in the on/off values' dtype."""
    idx = integer_tensor(args[0])
    values = []
    for sinfo, what in ((args[1], "on_value"), (args[2], "off_value")):
        if not isinstance(sinfo, relax.PrimStructInfo):
            raise OpError(f"{what} must be a prim value such as R.prim_value(T.float32(1.0)), not a tensor", what)
        values.append(sinfo.dtype)
    if values[0] != values[1]:
        raise OpError(f"on_value and off_value dtypes differ ({values[0]} and {values[1]})", "off_value")
    depth = attrs["depth"]
    if idx.ndim < 0:
        return relax.TensorStructInfo(None, values[0], -1)
    axis = attrs["axis"]
    if not -(idx.ndim + 1) <= axis <= idx.ndim:
        raise OpError(f"axis {axis} is out of range for a result of rank {idx.ndim + 1}", "axis")
    axis = axis + idx.ndim + 1 if axis < 0 else axis
    if idx.shape is None:
        return relax.TensorStructInfo(None, values[0], idx.ndim + 1)
    shape = list(idx.shape)
    return relax.TensorStructInfo(shape[:axis] + [tir.IntImm("int64", depth)] + shape[axis:], values[0])


register_op("one_hot", ("indices", Arg("on_value", "prim"), Arg("off_value", "prim")), infer_one_hot,
            attrs=(Attr("depth", REQUIRED, int_attr("depth", 1)), Attr("axis", -1, int_attr("axis"))),
            pattern="broadcast")


# ----------------------------------------------------------------------------- gather_nd


def infer_gather_nd(args, attrs):
    """The indices' shape less its last dim (``m``, the coordinates' length, which must be
    static), then the data's dims after the ``batch_dims + m`` it indexes."""
    x, idx = tensor_arg(args[0], "data"), integer_tensor(args[1])
    b = attrs["batch_dims"]
    if idx.ndim == 0:
        raise OpError("indices must have rank at least 1 (their last dim holds the coordinates)", "indices")
    if x.shape is None or idx.shape is None:
        return relax.TensorStructInfo(None, x.dtype, -1)
    m = static_dim(idx.shape[-1])
    if m is None:
        raise OpError("the indices' last dim (the coordinates' length) must be static", "indices")
    if b + m > x.ndim:
        raise OpError(f"batch_dims {b} plus the coordinates' length {m} exceed the data's rank {x.ndim}", "indices")
    if b > idx.ndim - 1:
        raise OpError(f"batch_dims {b} must be less than the indices' rank {idx.ndim}", "batch_dims")
    for k in range(b):
        if not dim_equal(x.shape[k], idx.shape[k]) and static_dim(x.shape[k]) is not None \
                and static_dim(idx.shape[k]) is not None:
            raise OpError(f"batch dim {k} differs: data ({fmt_shape(x.shape)}), indices ({fmt_shape(idx.shape)})",
                          "indices")
    return relax.TensorStructInfo(list(idx.shape[:-1]) + list(x.shape[b + m:]), x.dtype)


# TVM's ``relax.op.gather_nd(data, indices, batch_dims=0)``; its PrimFunc is ``te_gather_nd``.
register_op("gather_nd", ("data", "indices"), infer_gather_nd,
            attrs=(Attr("batch_dims", 0, int_attr("batch_dims", 0)),),
            pattern="injective")


# ----------------------------------------------------------------------------- scatter_nd


def infer_scatter_nd(args, attrs):
    """The data's struct info; ``updates`` must be the indices' shape less its last dim (``m``,
    static), then the data's dims after the first ``m``, in the data's dtype."""
    x, idx = tensor_arg(args[0], "data"), integer_tensor(args[1])
    upd = tensor_arg(args[2], "updates")
    if upd.dtype and x.dtype and upd.dtype != x.dtype:
        raise OpError(f"updates have dtype {upd.dtype} but data has {x.dtype}", "updates")
    if idx.ndim == 0:
        raise OpError("indices must have rank at least 1 (their last dim holds the coordinates)", "indices")
    if x.shape is not None and idx.shape is not None:
        m = static_dim(idx.shape[-1])
        if m is None:
            raise OpError("the indices' last dim (the coordinates' length) must be static", "indices")
        if m > x.ndim:
            raise OpError(f"the coordinates' length {m} exceeds the data's rank {x.ndim}", "indices")
        expected = list(idx.shape[:-1]) + list(x.shape[m:])
        if upd.shape is not None:
            same = len(expected) == len(upd.shape) and all(
                dim_equal(a, b) or static_dim(a) is None or static_dim(b) is None for a, b in zip(expected, upd.shape))
            if not same:
                raise OpError(f"updates have shape ({fmt_shape(upd.shape)}), expected ({fmt_shape(expected)}) for data "
                              f"({fmt_shape(x.shape)}) and indices ({fmt_shape(idx.shape)})", "updates")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def _scatter_nd_reduction_attr(value):
    if value not in ("update",) + _SCATTER_REDUCTIONS:
        raise OpError(f"reduction must be one of 'update', 'add', 'mul', 'min', 'max', not {value!r}", "reduction")
    return value


# TVM's ``relax.op.scatter_nd(data, indices, updates, reduction="update")``; PrimFunc
# ``scatter_nd``. Reductions over the updates then the output stage (out-ewise-fusable), where
# TVM's sequential kernel is opaque.
register_op("scatter_nd", ("data", "indices", "updates"), infer_scatter_nd,
            attrs=(Attr("reduction", "update", _scatter_nd_reduction_attr),),
            pattern="out_ewise_fusable")
