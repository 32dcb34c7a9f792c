"""Linear algebra: matmul (1-D, 2-D, batched with broadcast batch dims, out_dtype), linear
(``x @ weight.T + bias``) and einsum (``R.einsum((a, b), subscripts="ij,jk->ik")``, NumPy's
rules: ellipsis broadcasting, implicit output, diagonals)."""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import REQUIRED, broadcast_shapes, dtype_attr, shapes_known, te_legalizer, tensor_arg
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


# ----------------------------------------------------------------------------- linear


def infer_linear(args, attrs):
    """``x @ weight.T (+ bias)``: the struct info of ``matmul(x, permute_dims(weight))`` (plus the
    broadcast bias, whose dtype must be the product's)."""
    x, w = tensor_arg(args[0], "x"), tensor_arg(args[1], "weight")
    if w.ndim > 2:
        raise OpError(f"weight must have rank 1 or 2, not {w.ndim}", "weight")
    wt = relax.TensorStructInfo(list(w.shape)[::-1] if w.shape is not None else None, w.dtype,
                                w.ndim if w.shape is None else -1)
    try:
        out = infer_matmul([x, wt], attrs)
    except OpError as err:
        raise OpError(err.message.replace("x1", "x").replace("x2", "weight.T"), err.arg) from None
    if args[2] is None:
        return out
    bias = tensor_arg(args[2], "bias")
    if bias.dtype and out.dtype and bias.dtype != out.dtype:
        raise OpError(f"bias dtype {bias.dtype} differs from the product's {out.dtype}", "bias")
    if out.shape is not None and bias.shape is not None:
        try:
            shape = broadcast_shapes(list(out.shape), list(bias.shape), "product and bias")
        except OpError as err:
            raise OpError(err.message, "bias") from None
        if shape is not None:
            return relax.TensorStructInfo(shape, out.dtype)
    ndim = max(out.ndim, bias.ndim) if out.ndim >= 0 and bias.ndim >= 0 else -1
    return relax.TensorStructInfo(None, out.dtype, ndim)


def legalize_linear(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.linear, *call.args, out_dtype=call.attrs["out_dtype"], primfunc_name_hint="linear")


# TVM's relax.op.linear is a Python helper that emits permute_dims + matmul (+ add); its R.linear
# parses into those three bindings and is never printed. Here linear is a registered op instead:
# one call that prints as R.linear(x, w, b, out_dtype="void") (which TVM's parser accepts), with
# its own legalization computing the product against the transposed weight directly (no
# transpose stage) and the bias add in the same PrimFunc. Why: this toolchain's parser and
# BlockBuilder do not expand one call into several bindings, and one op keeps x @ w.T + b a
# single fusable unit.
register_op(
    "linear", ("x", "weight", Arg("bias", "tensor", optional=True)), infer_linear,
    attrs=(Attr("out_dtype", "void", dtype_attr),), pattern="out_ewise_fusable", legalize=legalize_linear,
)


# ----------------------------------------------------------------------------- einsum


def _subscripts_attr(value):
    if value is REQUIRED:
        raise OpError("subscripts is required", "subscripts")
    if not isinstance(value, str):
        raise OpError(f"subscripts must be a string such as \"ij,jk->ik\", not {value!r}", "subscripts")
    return value


def infer_einsum(args, attrs):
    """The output's labels' extents (`topi.linalg.parse_einsum`), in the operands' dtype."""
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
        inputs, output = topi.linalg.parse_einsum(attrs["subscripts"], [t.ndim for t in ts])
        if any(t.shape is None for t in ts):
            return relax.TensorStructInfo(None, dtype, len(output))
        dims = topi.linalg.einsum_dims(inputs, [list(t.shape) for t in ts])
    except topi.linalg.EinsumError as err:
        raise OpError(f"einsum {attrs['subscripts']!r}: {err}", "subscripts") from None
    return relax.TensorStructInfo([dims[x] for x in output], dtype)


def legalize_einsum(bb, call):
    if not shapes_known(call):
        return None
    from .manipulate import _tuple_tensors

    return bb.call_te(topi.linalg.einsum, call.attrs["subscripts"], *_tuple_tensors(bb, call.args[0]),
                      primfunc_name_hint="einsum")


register_op(
    "einsum", (Arg("operands", "tensors"),), infer_einsum,
    attrs=(Attr("subscripts", REQUIRED, _subscripts_attr),),
    # A contraction of two operands (C += A * B) is out-ewise-fusable, as TVM's analysis finds;
    # one operand summed is a plain reduction, and without a summed subscript it is injective.
    pattern="out_ewise_fusable", legalize=legalize_einsum,
)
