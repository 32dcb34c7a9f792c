"""Shape manipulation ops: permute_dims, ..."""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import te_legalizer, axes_attr, broadcast_shapes, dim_equal, dtype_attr, normalize_axis, tensor_arg
from .registry import Arg, Attr, OpError, register_op


def infer_permute_dims(args, attrs):
    x = tensor_arg(args[0], "x")
    axes = attrs["axes"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, len(axes) if axes is not None else -1)
    if axes is None:
        order = list(range(x.ndim))[::-1]
    else:
        if len(axes) != x.ndim:
            raise OpError(f"needs {x.ndim} axes for a tensor of rank {x.ndim}, got {len(axes)}", "axes")
        order = [normalize_axis(a, x.ndim, "axes") for a in axes]
        if sorted(order) != list(range(x.ndim)):
            raise OpError(f"axes {axes} are not a permutation of 0..{x.ndim - 1}", "axes")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    return relax.TensorStructInfo([x.shape[i] for i in order], x.dtype)


register_op(
    "permute_dims", ("x",), infer_permute_dims,
    attrs=(Attr("axes", None, axes_attr),), pattern="injective",
    legalize=te_legalizer(topi.transpose, "transpose", ("axes",)),
)
