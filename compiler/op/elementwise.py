"""Elementwise ops: unary math, binary arithmetic with NumPy broadcasting, comparisons."""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import axes_attr, broadcast_shapes, dim_equal, dtype_attr, normalize_axis, tensor_arg, te_legalizer
from .registry import Arg, Attr, OpError, register_op


def infer_unary(args, attrs):
    (x,) = args
    x = tensor_arg(x, "x")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def infer_binary(args, attrs):
    a, b = (tensor_arg(s, w) for s, w in zip(args, ("x1", "x2")))
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise OpError(f"operand dtypes differ: {a.dtype} and {b.dtype}")
    dtype = a.dtype or b.dtype
    if a.shape is not None and b.shape is not None:
        shape = broadcast_shapes(a.shape, b.shape)
        if shape is not None:
            return relax.TensorStructInfo(shape, dtype)
        return relax.TensorStructInfo(None, dtype, max(a.ndim, b.ndim))
    ndim = max(a.ndim, b.ndim) if a.ndim >= 0 and b.ndim >= 0 else -1
    return relax.TensorStructInfo(None, dtype, ndim)


def infer_compare(args, attrs):
    out = infer_binary(args, attrs)
    return relax.TensorStructInfo(out.shape, "bool", out.ndim)


UNARY_OPS = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "negative", "abs", "floor", "ceil", "round",
    "sin", "cos", "erf", "square", "nn.relu", "nn.gelu", "nn.silu",
)
_UNARY_TOPI = {"nn.relu": topi.relu}
for _name in UNARY_OPS:
    _fn = _UNARY_TOPI.get(_name)
    register_op(_name, ("x",), infer_unary, pattern="elementwise",
                legalize=te_legalizer(_fn, _name.rsplit(".", 1)[-1]) if _fn else None)

BINARY_OPS = (
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
)
for _name in BINARY_OPS:
    _fn = getattr(topi, _name, None)
    register_op(_name, ("x1", "x2"), infer_binary, pattern="broadcast",
                legalize=te_legalizer(_fn, _name) if _fn else None)

COMPARE_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
for _name in COMPARE_OPS:
    register_op(_name, ("x1", "x2"), infer_compare, pattern="broadcast")
