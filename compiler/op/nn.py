"""Neural-network ops (``R.nn.*``)."""

from __future__ import annotations

from tvmscript import relax, tir

from .common import axes_attr, broadcast_shapes, dim_equal, dtype_attr, normalize_axis, tensor_arg
from .registry import Arg, Attr, OpError, register_op


def infer_dense(args, attrs):
    """``nn.dense(x, w)`` of older Relax (seed 002): ``x @ w.T``, weight as (units, in)."""
    x, w = tensor_arg(args[0], "data"), tensor_arg(args[1], "weight")
    out_dtype = attrs["out_dtype"]
    dtype = x.dtype if out_dtype == "void" else out_dtype
    if x.shape is None or w.shape is None:
        return relax.TensorStructInfo(None, dtype, x.ndim)
    if len(w.shape) != 2:
        raise OpError(f"nn.dense weight must be 2-D (units, in), got rank {len(w.shape)}", "weight")
    if len(x.shape) < 1:
        raise OpError("nn.dense data must have at least one dimension", "data")
    if not dim_equal(x.shape[-1], w.shape[1]) and isinstance(x.shape[-1], tir.IntImm) and isinstance(w.shape[1], tir.IntImm):
        raise OpError(
            f"nn.dense reduction dimensions differ: {x.shape[-1].value} (last of data) vs "
            f"{w.shape[1].value} (second of weight)"
        )
    return relax.TensorStructInfo(list(x.shape[:-1]) + [w.shape[0]], dtype)


register_op(
    "nn.dense", ("data", "weight"), infer_dense,
    attrs=(Attr("out_dtype", "void", dtype_attr),), pattern="out_ewise_fusable",
)
