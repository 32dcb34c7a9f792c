"""Elementwise ops: unary math (``trunc`` and ``sign`` too), the predicates ``isnan``/``isinf``/
``isfinite``, activations (``nn.relu``/``gelu``/``gelu_tanh``/``silu``, ``nn.leakyrelu(data,
alpha)``, ``nn.softplus(data, beta, threshold)``, ``nn.prelu(data, alpha, axis)``), ``clip``,
binary arithmetic with NumPy broadcasting, comparisons, logical ops, ``where`` and ``astype``.
(``nn.relu6`` is TVM's Python helper building ``clip(x, 0, 6)``: see ``api.py``.)

Unary ops keep their operand's shape and dtype (pattern elementwise); binary ones (``atan2``
too) broadcast their operands' shapes, symbolic dims included (pattern broadcast). As in TVM,
either operand of a binary op may be a prim value (``R.add(x, y)`` with ``y: R.Prim("float32")``,
a 0-d operand; two prim values give a prim value). ``ewise_fma`` (``x1 * x2 + x3``) is
inferred only: TVM does not legalize it either. Their legalizations are
``compiler/op/elementwise.py``.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import broadcast_shapes, int_attr, normalize_axis, same_dtype, static_dim, tensor_arg
from .registry import Arg, Attr, OpError, register_op


# ----------------------------------------------------------------------------- dtype checks


def _require(x: relax.TensorStructInfo, what: str, ok, kind: str, op: str) -> None:
    """OpError naming argument ``what`` unless its dtype (when known) satisfies ``ok``."""
    if x.dtype and not ok(x.dtype):
        raise OpError(f"{op} needs {kind} {what}, got {x.dtype}", what)


def _is_float(dtype: str) -> bool:
    return tir.is_float(dtype)


def _is_bool(dtype: str) -> bool:
    return dtype == "bool"


def _like(x: relax.TensorStructInfo, dtype: str | None = None) -> relax.TensorStructInfo:
    """``x``'s shape (or rank) with ``dtype`` (default ``x``'s)."""
    dtype = x.dtype if dtype is None else dtype
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, dtype, x.ndim)


def _broadcast(sinfos: list, dtype: str) -> relax.TensorStructInfo:
    """The broadcast of the tensors' shapes (their rank only when two symbolic dims differ or a
    shape is unknown); OpError when two static dims cannot broadcast."""
    if all(s.shape is not None for s in sinfos):
        shape = list(sinfos[0].shape)
        for s in sinfos[1:]:
            shape = broadcast_shapes(shape, list(s.shape))
            if shape is None:
                break
        if shape is not None:
            return relax.TensorStructInfo(shape, dtype)
    ndims = [s.ndim for s in sinfos]
    return relax.TensorStructInfo(None, dtype, max(ndims) if all(n >= 0 for n in ndims) else -1)


# ----------------------------------------------------------------------------- unary


def infer_unary(args, attrs):
    return _like(tensor_arg(args[0], "x"))


def _unary_infer(op: str, ok, kind: str):
    """Inference of a unary op whose operand must have a dtype satisfying ``ok``."""
    def infer(args, attrs):
        x = tensor_arg(args[0], "x")
        _require(x, "x", ok, kind, op)
        return _like(x)

    infer.__name__ = f"infer_{op.replace('.', '_')}"
    return infer


# name -> operand dtype rule (the test, what messages call it), None for any dtype
_FLOAT = (_is_float, "a floating-point")
_NUMERIC = (lambda d: d != "bool", "a numeric")
UNARY_OPS = {
    "exp": _FLOAT, "log": _FLOAT, "sqrt": _FLOAT, "rsqrt": _FLOAT, "tanh": _FLOAT, "sigmoid": _FLOAT,
    "sin": _FLOAT, "cos": _FLOAT, "erf": _FLOAT, "negative": _NUMERIC, "abs": _NUMERIC, "floor": None,
    "ceil": None, "round": None, "square": None, "logical_not": (_is_bool, "a bool"), "nn.relu": None,
    "nn.gelu": _FLOAT, "nn.silu": _FLOAT, "trunc": None, "sign": _NUMERIC, "nn.gelu_tanh": _FLOAT,
}
for _name, _rule in UNARY_OPS.items():
    # TVM names the operand of its nn.* activations ``data`` (``nn.gelu_tanh(data)``); the
    # older ones here keep ``x``.
    _arg = "data" if _name == "nn.gelu_tanh" else "x"
    register_op(_name, (_arg,), _unary_infer(f"R.{_name}", *_rule) if _rule else infer_unary, pattern="elementwise")


# ----------------------------------------------------------------------------- isnan, isinf, isfinite


def infer_predicate(args, attrs):
    """A bool tensor shaped like ``x`` (integers are never NaN nor infinite)."""
    x = tensor_arg(args[0], "x")
    _require(x, "x", lambda d: d != "bool", "a numeric", "a floating-point predicate")
    return _like(x, "bool")


for _name in ("isnan", "isinf", "isfinite"):
    register_op(_name, ("x",), infer_predicate, pattern="elementwise")


# ----------------------------------------------------------------------------- activations with attributes


def _number_attr(name: str):
    def convert(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OpError(f"{name} must be a number, not {v!r}", name)
        return float(v)
    return convert


def _positive_beta(v):
    beta = _number_attr("beta")(v)
    if beta == 0.0:
        raise OpError("beta must not be 0 (softplus divides by it)", "beta")
    return beta


def infer_float_unary(args, attrs):
    x = tensor_arg(args[0], "data")
    _require(x, "data", _is_float, "a floating-point", "this activation")
    return _like(x)


register_op("nn.leakyrelu", ("data",), infer_float_unary, attrs=(Attr("alpha", 0.01, _number_attr("alpha")),),
            pattern="elementwise")
register_op("nn.softplus", ("data",), infer_float_unary,
            attrs=(Attr("beta", 1.0, _positive_beta), Attr("threshold", 20.0, _number_attr("threshold"))),
            pattern="elementwise")


def infer_prelu(args, attrs):
    """``alpha`` is 1-D with one slope per element of ``data``'s ``axis``."""
    x = tensor_arg(args[0], "data")
    _require(x, "data", _is_float, "a floating-point", "R.nn.prelu")
    alpha = tensor_arg(args[1], "alpha")
    same_dtype(alpha, "alpha", x)
    if alpha.ndim >= 0 and alpha.ndim != 1:
        raise OpError(f"alpha must be 1-D (one slope per channel), got rank {alpha.ndim}", "alpha")
    if x.ndim >= 0:
        axis = normalize_axis(attrs["axis"], x.ndim)
        if x.shape is not None and alpha.shape is not None:
            c, a = static_dim(x.shape[axis]), static_dim(alpha.shape[0])
            if c is not None and a is not None and c != a and a != 1:  # one slope serves every channel
                raise OpError(f"alpha has {a} slopes but data has {c} elements along axis {axis}", "alpha")
    return _like(x)


register_op("nn.prelu", ("data", "alpha"), infer_prelu, attrs=(Attr("axis", 1, int_attr("axis")),),
            # TVM's analysis calls it elementwise; the slope's load (alpha[i1]) is a broadcast here.
            pattern="broadcast")


# ----------------------------------------------------------------------------- clip


def _bound(sinfo, what: str) -> None:
    """A clip bound must be a scalar prim value (``R.prim_value(0)``), not a tensor."""
    if not isinstance(sinfo, relax.PrimStructInfo):
        raise OpError(f"{what} must be a prim value such as R.prim_value(0) (a number), not a tensor", what)
    if sinfo.dtype == "bool":
        raise OpError(f"{what} must be a number, not a bool", what)


def infer_clip(args, attrs):
    """``R.clip(x, min, max)``: ``x``'s struct info; the bounds are PrimValue arguments (TVM's
    form), converted to ``x``'s dtype when legalized."""
    x = tensor_arg(args[0], "x")
    _require(x, "x", lambda d: d != "bool", "a numeric", "R.clip")
    _bound(args[1], "min")
    _bound(args[2], "max")
    return _like(x)


register_op("clip", ("x", Arg("min", "prim"), Arg("max", "prim")), infer_clip, pattern="elementwise")


# ----------------------------------------------------------------------------- astype


def _astype_dtype(value):
    if not isinstance(value, str) or not tir.is_valid_dtype(value):
        raise OpError(f"astype needs a dtype such as \"float32\", not {value!r}", "dtype")
    return value


def infer_astype(args, attrs):
    return _like(tensor_arg(args[0], "x"), attrs["dtype"])


register_op("astype", ("x",), infer_astype, attrs=(Attr("dtype", None, _astype_dtype),), pattern="elementwise")


# ----------------------------------------------------------------------------- binary


def _operands(args, names=("x1", "x2")):
    sinfos = [tensor_arg(s, w) for s, w in zip(args, names)]
    dtypes = {s.dtype for s in sinfos if s.dtype}
    if len(dtypes) > 1:
        a, b = sinfos
        raise OpError(f"operand dtypes differ: {a.dtype} and {b.dtype}")
    return sinfos, (dtypes.pop() if dtypes else "")


def _scalar_or_tensor(sinfo, what: str) -> relax.TensorStructInfo:
    """A binary operand as a tensor: a prim value (``R.Prim("float32")``, ``R.prim_value(2)``)
    counts as a 0-d tensor of its dtype, as TVM's binary ops take one on either side."""
    if isinstance(sinfo, relax.PrimStructInfo):
        return relax.TensorStructInfo([], sinfo.dtype)
    return tensor_arg(sinfo, what)


def _binary(args, result_dtype, check_dtypes: bool = True):
    """The struct info of a binary op whose operands are tensors or prim values: a prim value
    when both are prim values, else the broadcast tensor (``result_dtype(dtype)`` gives its
    dtype from the operands' common one)."""
    sinfos = [_scalar_or_tensor(s, w) for s, w in zip(args, ("x1", "x2"))]
    if check_dtypes:
        _, dtype = _operands(sinfos)
    else:
        dtype = next((s.dtype for s in sinfos if s.dtype), "")
    dtype = result_dtype(dtype)
    if all(isinstance(s, relax.PrimStructInfo) for s in args):
        return relax.PrimStructInfo(dtype)
    return _broadcast(sinfos, dtype)


def infer_binary(args, attrs):
    return _binary(args, lambda d: d)


def infer_compare(args, attrs):
    """A bool result. Unlike arithmetic, a comparison of a tensor with a prim value of another
    dtype is allowed (TVM casts the operand); two tensors must still agree."""
    mixed = any(isinstance(s, relax.PrimStructInfo) for s in args)
    return _binary(args, lambda d: "bool", check_dtypes=not mixed)


def infer_logical(args, attrs):
    for s, w in zip(args, ("x1", "x2")):
        _require(tensor_arg(s, w), w, _is_bool, "a bool", "a logical op")
    sinfos, _ = _operands(args)
    return _broadcast(sinfos, "bool")


BINARY_OPS = (
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "atan2", "maximum", "minimum",
)
for _name in BINARY_OPS:
    register_op(_name, ("x1", "x2"), infer_binary, pattern="broadcast")

COMPARE_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
for _name in COMPARE_OPS:
    register_op(_name, ("x1", "x2"), infer_compare, pattern="broadcast")

LOGICAL_OPS = ("logical_and", "logical_or")
for _name in LOGICAL_OPS:
    register_op(_name, ("x1", "x2"), infer_logical, pattern="broadcast")


# ----------------------------------------------------------------------------- ewise_fma


def infer_ewise_fma(args, attrs):
    """``x1 * x2 + x3`` without broadcasting: the three tensors must have one rank, one dtype
    and (where known) one shape, which the result has. TVM has no legalization for it (it
    exists for backends with a fused multiply-add), so neither has this table."""
    sinfos = [tensor_arg(s, w) for s, w in zip(args, ("x1", "x2", "x3"))]
    dtypes = {s.dtype for s in sinfos if s.dtype}
    if len(dtypes) > 1:
        raise OpError(f"the operands' dtypes differ: {', '.join(s.dtype for s in sinfos)}")
    ranks = {s.ndim for s in sinfos if s.ndim >= 0}
    if len(ranks) > 1:
        raise OpError(f"the operands' ranks differ: {', '.join(str(s.ndim) for s in sinfos)}")
    dtype = dtypes.pop() if dtypes else ""
    ndim = ranks.pop() if ranks else -1
    if any(s.shape is None for s in sinfos):
        return relax.TensorStructInfo(None, dtype, ndim)
    shape = list(sinfos[0].shape)
    for s in sinfos[1:]:
        for k, (a, b) in enumerate(zip(shape, s.shape)):
            if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
                raise OpError(f"the operands' shapes differ at dimension {k}: {static_dim(a)} vs {static_dim(b)}")
    return relax.TensorStructInfo(shape, dtype)


register_op("ewise_fma", ("x1", "x2", "x3"), infer_ewise_fma, pattern="elementwise")


# ----------------------------------------------------------------------------- where


def infer_where(args, attrs):
    cond = tensor_arg(args[0], "condition")
    _require(cond, "condition", _is_bool, "a bool", "R.where")
    (x1, x2), dtype = _operands(args[1:])
    return _broadcast([cond, x1, x2], dtype)


register_op("where", ("condition", "x1", "x2"), infer_where, pattern="broadcast")
