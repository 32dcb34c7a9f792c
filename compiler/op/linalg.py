"""Linear algebra: matmul (1-D, 2-D, batched with broadcast batch dims, out_dtype)."""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import te_legalizer, axes_attr, broadcast_shapes, dim_equal, dtype_attr, normalize_axis, tensor_arg
from .registry import Arg, Attr, OpError, register_op


def infer_matmul(args, attrs):
    a, b = tensor_arg(args[0], "x1"), tensor_arg(args[1], "x2")
    out_dtype = attrs["out_dtype"]
    if a.dtype and b.dtype and a.dtype != b.dtype and out_dtype == "void":
        raise OpError(f"operand dtypes differ: {a.dtype} and {b.dtype} (give out_dtype= to mix them)")
    dtype = a.dtype if out_dtype == "void" else out_dtype
    if a.ndim == 0 or b.ndim == 0:
        raise OpError("operands must have at least one dimension, not be scalars (rank-0 tensors)")
    if a.shape is None or b.shape is None:
        if a.ndim < 0 or b.ndim < 0:
            return relax.TensorStructInfo(None, dtype, -1)
        ndim = max(a.ndim, b.ndim) - (a.ndim == 1) - (b.ndim == 1)
        return relax.TensorStructInfo(None, dtype, ndim)
    sa, sb = list(a.shape), list(b.shape)
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        sa = [tir.IntImm("int64", 1)] + sa
    if b_vec:
        sb = sb + [tir.IntImm("int64", 1)]
    ka, kb = sa[-1], sb[-2]
    if isinstance(ka, tir.IntImm) and isinstance(kb, tir.IntImm) and ka.value != kb.value:
        raise OpError(
            f"reduction dimensions differ: {ka.value} (last dimension of x1) vs {kb.value} "
            f"({'only' if b_vec else 'second-to-last'} dimension of x2)"
        )
    batch = broadcast_shapes(sa[:-2], sb[:-2], "batch dimensions")
    if batch is None:
        return relax.TensorStructInfo(None, dtype, max(len(sa), len(sb)) - a_vec - b_vec)
    shape = batch + ([] if a_vec else [sa[-2]]) + ([] if b_vec else [sb[-1]])
    return relax.TensorStructInfo(shape, dtype)


register_op(
    "matmul", ("x1", "x2"), infer_matmul,
    attrs=(Attr("out_dtype", "void", dtype_attr),), pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.matmul, "matmul", ("out_dtype",)),
)
