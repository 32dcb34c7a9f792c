"""Linear algebra: matmul (1-D, 2-D, batched with broadcast batch dims, out_dtype), linear
(``x @ weight.T + bias``) and einsum (``R.einsum((a, b), subscripts="ij,jk->ik")``, NumPy's
rules: ellipsis broadcasting, implicit output, diagonals; the notation is `einsum`'s). Their
legalizations are ``compiler/op/linalg.py``."""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import REQUIRED, broadcast_shapes, dtype_attr, tensor_arg
from .einsum import EinsumError, einsum_dims, parse_einsum
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
)


# ----------------------------------------------------------------------------- einsum


def _subscripts_attr(value):
    if value is REQUIRED:
        raise OpError("subscripts is required", "subscripts")
    if not isinstance(value, str):
        raise OpError(f"subscripts must be a string such as \"ij,jk->ik\", not {value!r}", "subscripts")
    return value


def infer_einsum(args, attrs):
    """The output's labels' extents (`parse_einsum`), in the operands' dtype."""
    if not isinstance(args[0], relax.TupleStructInfo) or not args[0].fields:
        raise OpError("operands must be a non-empty tuple of tensors", "operands")
    ts = [tensor_arg(f, "operands") for f in args[0].fields]
    dtypes = {t.dtype for t in ts if t.dtype}
    if len(dtypes) > 1:
        raise OpError(f"the operands' dtypes differ: {', '.join(t.dtype for t in ts)}", "operands")
    dtype = dtypes.pop() if dtypes else ""
    if any(t.ndim < 0 for t in ts):
        return relax.TensorStructInfo(None, dtype, -1)
    try:
        inputs, output = parse_einsum(attrs["subscripts"], [t.ndim for t in ts])
        if any(t.shape is None for t in ts):
            return relax.TensorStructInfo(None, dtype, len(output))
        dims = einsum_dims(inputs, [list(t.shape) for t in ts])
    except EinsumError as err:
        raise OpError(f"einsum {attrs['subscripts']!r}: {err}", "subscripts") from None
    return relax.TensorStructInfo([dims[x] for x in output], dtype)


register_op(
    "einsum", (Arg("operands", "tensors"),), infer_einsum,
    attrs=(Attr("subscripts", REQUIRED, _subscripts_attr),),
    # A contraction of two operands (C += A * B) is out-ewise-fusable, as TVM's analysis finds;
    # one operand summed is a plain reduction, and without a summed subscript it is injective.
    pattern="out_ewise_fusable",
)
