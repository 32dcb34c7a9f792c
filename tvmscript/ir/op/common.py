"""Helpers the op declarations share: argument checks, NumPy broadcasting of symbolic shapes,
axis normalization and attribute converters. Each raises `OpError`, which the parser reports at
the op call's location."""

from __future__ import annotations

import inspect

from tvmscript.ir import relax, tir
from tvmscript.ir.structural import StructuralEqual
from tvmscript.ir.tir_arith import is_one

from .registry import OpError

_KINDS = {
    relax.PrimStructInfo: "a prim value", relax.TupleStructInfo: "a tuple", relax.ShapeStructInfo: "a shape",
    relax.FuncStructInfo: "a function", relax.ObjectStructInfo: "an object",
}


def tensor_arg(sinfo, what: str) -> relax.TensorStructInfo:
    if not isinstance(sinfo, relax.TensorStructInfo):
        raise OpError(f"{what} must be a tensor, not {_KINDS.get(type(sinfo), 'an object')}", what)
    return sinfo


def integer_tensor(sinfo, what: str = "indices") -> relax.TensorStructInfo:
    """A tensor argument of integers (indices, positions): OpError naming ``what`` otherwise."""
    idx = tensor_arg(sinfo, what)
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise OpError(f"{what} must be integers, not {idx.dtype}", what)
    return idx


def dim_equal(a, b) -> bool:
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return a is b or StructuralEqual().equal(a, b)


def same_dtype(sinfo: relax.TensorStructInfo, what: str, data: relax.TensorStructInfo, data_what: str = "data") -> None:
    """OpError naming argument ``what`` if its dtype and ``data``'s are known and differ: an op
    whose parameters scale or shift its data (a norm's gamma, prelu's alpha) computes in one dtype,
    as TVM's inference requires."""
    if sinfo.dtype and data.dtype and sinfo.dtype != data.dtype:
        raise OpError(f"{what} has dtype {sinfo.dtype} but {data_what} has {data.dtype}; they must be the same", what)


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
        elif is_one(da):
            out.append(db)
        elif is_one(db):
            out.append(da)
        elif isinstance(da, tir.IntImm) and isinstance(db, tir.IntImm):
            raise OpError(
                f"shapes of the {what} do not broadcast: dimension {da.value} vs {db.value} "
                f"(shapes ({fmt_shape(a)}) and ({fmt_shape(b)}))"
            )
        else:
            return None
    out.reverse()
    return out


def fmt_shape(shape) -> str:
    parts = []
    for d in shape:
        parts.append(str(d.value) if isinstance(d, tir.IntImm) else getattr(d, "name", "?"))
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


# The default of an attribute that must be given (``R.zeros(shape, dtype=...)``): a converter
# meeting it raises "<name> is required".
REQUIRED = inspect.Parameter.empty


def is_int(v) -> bool:
    """A Python int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def static_dim(d):
    """The value of a constant dim, None for a symbolic one."""
    return d.value if isinstance(d, tir.IntImm) else None


def int_attr(name: str, minimum: int | None = None):
    """The converter of an integer attribute (at least ``minimum`` when given)."""
    def convert(value):
        if value is REQUIRED:
            raise OpError(f"{name} is required", name)
        if not is_int(value):
            raise OpError(f"{name} must be an integer, not {value!r}", name)
        if minimum is not None and value < minimum:
            raise OpError(f"{name} must be at least {minimum}, got {value}", name)
        return value

    return convert


def optional_int_attr(name: str):
    """The converter of an integer attribute that may be None (an axis: None for all of them)."""
    int_conv = int_attr(name)

    def convert(value):
        return None if value is None else int_conv(value)

    return convert


def bool_attr(name: str):
    """The converter of a True/False attribute (keepdims, ceil_mode, ...)."""
    def convert(value):
        if not isinstance(value, bool):
            raise OpError(f"{name} must be True or False, not {value!r}", name)
        return value

    return convert


def dtype_attr(value):
    if value is None:
        return "void"
    if not isinstance(value, str) or not tir.is_valid_dtype(value):
        raise OpError(f"unknown dtype {value!r}")
    return value


def axes_attr(value):
    if value is None:
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    raise OpError("axes must be a list of integers or None")


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise OpError(f"{what} {axis} is out of range for a tensor of rank {ndim}", what)
    return axis + ndim if axis < 0 else axis
