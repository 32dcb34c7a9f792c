"""Declarations of the Relax tensor ops: struct-info inference and attributes.

Each op is one `register_op` call. Inference takes the struct infos of the tensor arguments and
the (already validated) attributes and returns the result's struct info, raising `OpError` for
calls that cannot be right: mismatched dtypes, shapes that do not broadcast, bad axes.
"""

from __future__ import annotations

from tvmscript import relax, tir
from tvmscript.structural import StructuralEqual

from .registry import Attr, OpError, register_op

# ----------------------------------------------------------------------------- helpers


_KINDS = {
    relax.PrimStructInfo: "a prim value", relax.TupleStructInfo: "a tuple", relax.ShapeStructInfo: "a shape",
    relax.FuncStructInfo: "a function", relax.ObjectStructInfo: "an object",
}


def _tensor(sinfo, what: str) -> relax.TensorStructInfo:
    if not isinstance(sinfo, relax.TensorStructInfo):
        raise OpError(f"{what} must be a tensor, not {_KINDS.get(type(sinfo), 'an object')}", what)
    return sinfo


def dim_equal(a, b) -> bool:
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return a is b or StructuralEqual().equal(a, b)


def _is_one(d) -> bool:
    return isinstance(d, tir.IntImm) and d.value == 1


def broadcast_shapes(a: list, b: list, what: str = "operands") -> list | None:
    """NumPy broadcasting of two shapes whose dims are TIR expressions; None if the result
    cannot be known statically (two different symbolic dims)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else None
        db = b[-i] if i <= len(b) else None
        if da is None:
            out.append(db)
        elif db is None or dim_equal(da, db):
            out.append(da)
        elif _is_one(da):
            out.append(db)
        elif _is_one(db):
            out.append(da)
        elif isinstance(da, tir.IntImm) and isinstance(db, tir.IntImm):
            raise OpError(
                f"shapes of the {what} do not broadcast: dimension {da.value} vs {db.value} "
                f"(shapes ({_fmt(a)}) and ({_fmt(b)}))"
            )
        else:
            return None
    out.reverse()
    return out


def _fmt(shape) -> str:
    parts = []
    for d in shape:
        parts.append(str(d.value) if isinstance(d, tir.IntImm) else getattr(d, "name", "?"))
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def _dtype_attr(value):
    if value is None:
        return "void"
    if not isinstance(value, str) or not tir.is_valid_dtype(value):
        raise OpError(f"unknown dtype {value!r}")
    return value


def _axes_attr(value):
    if value is None:
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    raise OpError("axes must be a list of integers or None")


def _normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise OpError(f"{what} {axis} is out of range for a tensor of rank {ndim}", what)
    return axis + ndim if axis < 0 else axis


# ----------------------------------------------------------------------------- elementwise


def infer_unary(args, attrs):
    (x,) = args
    x = _tensor(x, "x")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def infer_binary(args, attrs):
    a, b = (_tensor(s, w) for s, w in zip(args, ("x1", "x2")))
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
for _name in UNARY_OPS:
    register_op(_name, ("x",), infer_unary, pattern="elementwise")

BINARY_OPS = (
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
)
for _name in BINARY_OPS:
    register_op(_name, ("x1", "x2"), infer_binary, pattern="broadcast")

COMPARE_OPS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
for _name in COMPARE_OPS:
    register_op(_name, ("x1", "x2"), infer_compare, pattern="broadcast")


# ----------------------------------------------------------------------------- linear algebra


def infer_matmul(args, attrs):
    a, b = _tensor(args[0], "x1"), _tensor(args[1], "x2")
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
    attrs=(Attr("out_dtype", "void", _dtype_attr),), pattern="out_ewise_fusable",
)


# ----------------------------------------------------------------------------- shape ops


def infer_permute_dims(args, attrs):
    x = _tensor(args[0], "x")
    axes = attrs["axes"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, len(axes) if axes is not None else -1)
    if axes is None:
        order = list(range(x.ndim))[::-1]
    else:
        if len(axes) != x.ndim:
            raise OpError(f"needs {x.ndim} axes for a tensor of rank {x.ndim}, got {len(axes)}", "axes")
        order = [_normalize_axis(a, x.ndim, "axes") for a in axes]
        if sorted(order) != list(range(x.ndim)):
            raise OpError(f"axes {axes} are not a permutation of 0..{x.ndim - 1}", "axes")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    return relax.TensorStructInfo([x.shape[i] for i in order], x.dtype)


register_op(
    "permute_dims", ("x",), infer_permute_dims,
    attrs=(Attr("axes", None, _axes_attr),), pattern="injective",
)


def infer_dense(args, attrs):
    """``nn.dense(x, w)`` of older Relax (seed 002): ``x @ w.T``, weight as (units, in)."""
    x, w = _tensor(args[0], "data"), _tensor(args[1], "weight")
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
    attrs=(Attr("out_dtype", "void", _dtype_attr),), pattern="out_ewise_fusable",
)
