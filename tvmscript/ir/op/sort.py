"""Sorting, searching and set ops: ``R.sort``, ``R.argsort`` and ``R.topk`` (TVM's
``relax.op.sort``/``argsort``/``topk``, with its attributes, defaults and printing),
``R.bucketize`` (legalized, to TOPI's ``searchsorted``), ``R.nonzero`` and ``R.unique`` (whose
output sizes depend on the data: legalized, as TVM's, to ``R.call_pure_packed`` of the runtime
functions "relax.run.nonzero"/"relax.run.unique", which runtime/vm_helpers.py registers); the
legalizations are ``compiler/op/sort.py``.

TVM's LegalizeOps leaves sort, argsort and topk alone (its pipeline dispatches them to a sort library
later), so here too they are never legalized; the VM runs them itself on the host
(compiler/vm_codegen.py emits the calls, runtime/vm_helpers.py's ``_sort``/``_argsort``/``_topk`` sort with
NumPy's stable sort, so equal elements keep their order, as TVM's sort does).
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import bool_attr, int_attr, normalize_axis, tensor_arg
from .registry import Arg, Attr, OpError, register_op

_INDEX_DTYPES = ("int32", "int64")


def _index_dtype_attr(value):
    if value not in _INDEX_DTYPES:
        raise OpError(f"dtype must be \"int32\" or \"int64\" (the indices' type), not {value!r}", "dtype")
    return value


def _ret_type_attr(value):
    if value not in ("both", "values", "indices"):
        raise OpError(f"ret_type must be \"both\", \"values\" or \"indices\", not {value!r}", "ret_type")
    return value


def _check_axis(x: relax.TensorStructInfo, axis: int) -> int | None:
    """The normalized axis, or None when the rank is unknown."""
    if x.ndim < 0:
        return None
    if x.ndim == 0:
        raise OpError("cannot sort a scalar (a tensor of rank 0)", "data")
    return normalize_axis(axis, x.ndim, "axis")


def _like(x: relax.TensorStructInfo, dtype: str, shape=None) -> relax.TensorStructInfo:
    if shape is None:
        shape = list(x.shape) if x.shape is not None else None
    return relax.TensorStructInfo(shape, dtype, x.ndim if shape is None else -1)


def infer_sort(args, attrs):
    """The data's shape and dtype."""
    x = tensor_arg(args[0], "data")
    _check_axis(x, attrs["axis"])
    return _like(x, x.dtype)


def infer_argsort(args, attrs):
    """The data's shape, in the index dtype."""
    x = tensor_arg(args[0], "data")
    _check_axis(x, attrs["axis"])
    return _like(x, attrs["dtype"])


def topk_length(dim, k: int):
    """How many elements topk keeps along a dim: ``k``, or all of them when ``k < 1`` (TVM's
    convention); a static ``k`` larger than a static dim is an error."""
    if k < 1:
        return dim
    if isinstance(dim, tir.IntImm) and k > dim.value:
        raise OpError(f"k={k} is larger than the dimension ({dim.value}) topk selects from", "k")
    return tir.IntImm("int64", k)


def infer_topk(args, attrs):
    """The data's shape with ``k`` at ``axis``: values (the data's dtype) and/or indices."""
    x = tensor_arg(args[0], "data")
    axis = _check_axis(x, attrs["axis"])
    shape = None
    if x.shape is not None:
        shape = list(x.shape)
        shape[axis] = topk_length(shape[axis], attrs["k"])
    values, indices = _like(x, x.dtype, shape), _like(x, attrs["dtype"], shape)
    ret = attrs["ret_type"]
    if ret == "values":
        return values
    if ret == "indices":
        return indices
    return relax.TupleStructInfo([values, indices])


register_op("sort", ("x",), infer_sort,
            attrs=(Attr("axis", -1, int_attr("axis")), Attr("descending", False, bool_attr("descending"))))
register_op("argsort", ("data",), infer_argsort,
            attrs=(Attr("axis", -1, int_attr("axis")), Attr("descending", False, bool_attr("descending")),
                   Attr("dtype", "int32", _index_dtype_attr)))
register_op("topk", ("data",), infer_topk,
            attrs=(Attr("k", 1, int_attr("k")), Attr("axis", -1, int_attr("axis")),
                   Attr("ret_type", "both", _ret_type_attr), Attr("largest", True, bool_attr("largest")),
                   Attr("dtype", "int32", _index_dtype_attr)))


# ----------------------------------------------------------------------------- bucketize


def infer_bucketize(args, attrs):
    """The input's shape, int32 (``out_int32``) or int64; the boundaries are 1-D."""
    x, b = tensor_arg(args[0], "input_tensor"), tensor_arg(args[1], "boundaries")
    if b.ndim >= 0 and b.ndim != 1:
        raise OpError(f"boundaries must be 1-D, got rank {b.ndim}", "boundaries")
    if x.dtype and b.dtype and x.dtype != b.dtype:
        raise OpError(f"boundaries have dtype {b.dtype} but input_tensor has {x.dtype}", "boundaries")
    return _like(x, "int32" if attrs["out_int32"] else "int64")


# TVM's ``relax.op.bucketize(input_tensor, boundaries, out_int32=False, right=False)``: it
# legalizes to TOPI's ``searchsorted`` (PrimFunc ``searchsorted``).
register_op("bucketize", ("input_tensor", "boundaries"), infer_bucketize,
            attrs=(Attr("out_int32", False, bool_attr("out_int32")), Attr("right", False, bool_attr("right"))),
            pattern="reduce")


# ----------------------------------------------------------------------------- nonzero, unique


def infer_nonzero(args, attrs):
    """``(rank, count)`` int64 coordinates of the nonzero elements: 2-D, the count unknown."""
    x = tensor_arg(args[0], "x")
    if x.ndim == 0:
        raise OpError("nonzero needs a tensor of rank 1 or more", "x")
    return relax.TensorStructInfo(None, "int64", 2)


# TVM's ``relax.op.nonzero(x)``, legalized to its runtime function "relax.run.nonzero".
register_op("nonzero", ("x",), infer_nonzero)


def _static_flag(sinfo, name: str) -> bool:
    """A prim-value argument that must be a known True/False (it decides the result's type)."""
    value = getattr(sinfo, "value", None) if isinstance(sinfo, relax.PrimStructInfo) else None
    if not isinstance(value, tir.IntImm):
        raise OpError(f"{name} must be a constant True or False", name)
    return bool(value.value)


def infer_unique(args, attrs):
    """The unique values (1-D when ``axis`` is None, else the data's rank, their count unknown),
    then, as asked, the int64 first-occurrence indices, inverse indices and counts (1-D)."""
    x = tensor_arg(args[0], "x")
    _static_flag(args[1], "sorted")
    flags = [_static_flag(args[k], n) for k, n in ((2, "return_index"), (3, "return_inverse"), (4, "return_counts"))]
    axis = args[5] if len(args) > 5 else None
    ndim = 1
    if axis is not None:
        if not isinstance(axis, relax.PrimStructInfo) or not isinstance(axis.value, tir.IntImm):
            raise OpError("axis must be a constant integer or None", "axis")
        if x.ndim >= 0:
            normalize_axis(axis.value.value, x.ndim, "axis")
        ndim = x.ndim
    values = relax.TensorStructInfo(None, x.dtype, ndim)
    extra = [relax.TensorStructInfo(None, "int64", 1) for f in flags if f]
    return relax.TupleStructInfo([values] + extra) if extra else values


def _canonicalize_unique(args, attrs):
    """The flags as bool prim values (``True`` in the text is read as the number 1)."""
    out = list(args)
    for k in range(1, 5):
        v = out[k]
        if isinstance(v, relax.PrimValue) and isinstance(v.value, tir.IntImm) and v.value.dtype != "bool":
            b = tir.IntImm("bool", int(bool(v.value.value)))
            out[k] = relax.PrimValue(b, relax.PrimStructInfo("bool", b))
    return out, attrs


# TVM's ``relax.op.unique(x, sorted=True, return_index=False, return_inverse=False,
# return_counts=False, axis=None)``: its flags are prim-value arguments (printed positionally),
# legalized to its runtime function "relax.run.unique".
register_op("unique", ("x", Arg("sorted", "prim"), Arg("return_index", "prim"), Arg("return_inverse", "prim"),
                       Arg("return_counts", "prim"), Arg("axis", "prim", optional=True)),
            infer_unique, canonicalize=_canonicalize_unique)

