"""Tensor creation ops: zeros, ones, full (and their _like forms), arange, and tril/triu (where
TVM declares them: ``relax.op.create``); and ``null_value``, the one value made from nothing
that is not a tensor (TVM declares it among its base ops).

zeros/ones/full/arange read no tensor data (the ``_like`` forms take only the shape and dtype of
``x``), so their legalized PrimFuncs have no inputs: ``R.call_tir(cls.zeros, R.tuple(), ...)``. Constant fill
values are inlined into the TIR as TVM's legalization does; ``arange`` with constant bounds is
folded into a constant at legalization (as TVM's), and computed by ``T_arange`` otherwise.
"""

from __future__ import annotations

import math

from tvmscript import relax, tir

from .. import topi
from .common import REQUIRED, dtype_attr, shapes_known, te_legalizer, tensor_arg
from .registry import Arg, Attr, OpError, register_op


def _required_dtype(value):
    if value is REQUIRED or value is None:
        raise OpError("dtype is required", "dtype")
    return dtype_attr(value)


def _shape_arg(sinfo):
    if not isinstance(sinfo, relax.ShapeStructInfo):
        raise OpError("shape must be a shape such as R.shape([2, 3])", "shape")
    if sinfo.values is not None:
        for d in sinfo.values:
            if isinstance(d, tir.IntImm) and d.value < 0:
                raise OpError(f"shape has a negative dimension {d.value}", "shape")
        return list(sinfo.values), -1
    return None, sinfo.ndim


def _fill_arg(sinfo):
    fill = tensor_arg(sinfo, "fill_value")
    if fill.ndim > 0:
        raise OpError(f"fill_value must be a scalar (a rank-0 tensor such as R.const(1.0)), not of rank {fill.ndim}",
                      "fill_value")
    return fill


def _out_dtype(dtype: str, default: str) -> str:
    return default if dtype in ("void", "") else dtype


# ----------------------------------------------------------------------------- zeros, ones, full


def infer_zeros(args, attrs):
    shape, ndim = _shape_arg(args[0])
    return relax.TensorStructInfo(shape, attrs["dtype"], ndim)


def infer_full(args, attrs):
    shape, ndim = _shape_arg(args[0])
    fill = _fill_arg(args[1])
    return relax.TensorStructInfo(shape, _out_dtype(attrs["dtype"], fill.dtype), ndim)


def infer_like(args, attrs):
    x = tensor_arg(args[0], "x")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None,
                                  _out_dtype(attrs["dtype"], x.dtype), x.ndim if x.shape is None else -1)


def infer_full_like(args, attrs):
    _fill_arg(args[1])
    return infer_like(args, attrs)


def _fill_value(call, value):
    """A constant fill value as a Python number, else the expression (a tensor read by TE).
    ``value`` is zeros'/ones' own fill (0 or 1), None for full's argument."""
    if value is not None:
        return value
    value = call.args[1]
    if isinstance(value, relax.Constant):
        return value.data.item()
    return value


def _full_legalizer(name: str, fill=None):
    def legalize(bb, call):
        if not shapes_known(call):
            return None
        sinfo = call.struct_info
        value = _fill_value(call, fill)
        return bb.call_te(topi.full, list(sinfo.shape), sinfo.dtype, value, primfunc_name_hint=name)

    legalize.__name__ = f"legalize_{name}"
    return legalize


register_op("zeros", (Arg("shape", "shape"),), infer_zeros, attrs=(Attr("dtype", REQUIRED, _required_dtype),),
            pattern="elementwise", legalize=_full_legalizer("zeros", 0))
register_op("ones", (Arg("shape", "shape"),), infer_zeros, attrs=(Attr("dtype", REQUIRED, _required_dtype),),
            pattern="elementwise", legalize=_full_legalizer("ones", 1))
# full/full_like broadcast a rank-0 fill tensor (a constant one is inlined: elementwise then).
register_op("full", (Arg("shape", "shape"), "fill_value"), infer_full, attrs=(Attr("dtype", "void", dtype_attr),),
            pattern="broadcast", legalize=_full_legalizer("full"))
register_op("zeros_like", ("x",), infer_like, attrs=(Attr("dtype", "void", dtype_attr),),
            pattern="elementwise", legalize=_full_legalizer("zeros", 0))
register_op("ones_like", ("x",), infer_like, attrs=(Attr("dtype", "void", dtype_attr),),
            pattern="elementwise", legalize=_full_legalizer("ones", 1))
register_op("full_like", ("x", "fill_value"), infer_full_like, attrs=(Attr("dtype", "void", dtype_attr),),
            pattern="broadcast", legalize=_full_legalizer("full"))


# ----------------------------------------------------------------------------- arange


def _prim(sinfo, what: str):
    if sinfo is None:
        return None
    if not isinstance(sinfo, relax.PrimStructInfo):
        raise OpError(f"{what} must be a prim value such as R.prim_value(0)", what)
    return sinfo


def canonicalize_arange(args, attrs):
    """As TVM's ``relax.op.arange``: ``arange(n)`` is ``arange(0, n, 1)``; the dtype defaults to
    int64 when the bounds are integers, float32 otherwise."""
    start, end, step = args
    if end is None:
        start, end = relax.PrimValue(tir.IntImm("int64", 0), relax.PrimStructInfo("int64", tir.IntImm("int64", 0))), start
    if step is None:
        one = tir.IntImm("int64", 1)
        step = relax.PrimValue(one, relax.PrimStructInfo("int64", one))
    if attrs["dtype"] is None:
        ints = all(_prim(relax.struct_info_of(e), w).dtype.startswith(("int", "uint"))
                   for e, w in ((start, "start"), (end, "end"), (step, "step")))
        attrs["dtype"] = "int64" if ints else "float32"
    return [start, end, step], attrs


def _arange_dtype(value):
    return None if value is None else dtype_attr(value)


def _number(v):
    if isinstance(v, tir.IntImm):
        return v.value
    if isinstance(v, tir.FloatImm):
        return v.value
    return None


def infer_arange(args, attrs):
    start, end, step = (_prim(a, w) for a, w in zip(args, ("start", "end", "step")))
    dtype = attrs["dtype"]
    vals = [_number(s.value) if s.value is not None else None for s in (start, end, step)]
    if vals[2] == 0:
        raise OpError("step may not be 0", "step")
    if None not in vals:
        n = max(math.ceil((vals[1] - vals[0]) / vals[2]), 0)
        return relax.TensorStructInfo([tir.IntImm("int64", n)], dtype)
    if all(s.value is not None and s.dtype.startswith("int") for s in (start, end, step)):
        from ..topi.transform import ceildiv, sub

        if vals[2] is not None and vals[2] > 0:
            return relax.TensorStructInfo([ceildiv(sub(end.value, start.value), step.value)], dtype)
    return relax.TensorStructInfo(None, dtype, 1)


def legalize_arange(bb, call):
    if not shapes_known(call):
        return None
    start, end, step = (a.value for a in call.args)
    dtype = call.struct_info.dtype
    nums = [_number(v) for v in (start, end, step)]
    if None not in nums:  # constant bounds: the result is a constant, as TVM folds it
        import numpy as np  # not at import time: the parser loads the op table, numpy is slow

        return relax.Constant(np.arange(nums[0], nums[1], nums[2]).astype(dtype)[: _length(call)],
                              relax.TensorStructInfo(list(call.struct_info.shape), dtype))
    return bb.call_te(topi.arange, start, end, step, dtype, call.struct_info.shape[0], primfunc_name_hint="arange")


def _length(call) -> int:
    return call.struct_info.shape[0].value


register_op(
    "arange", (Arg("start", "prim"), Arg("end", "prim", optional=True), Arg("step", "prim", optional=True)),
    infer_arange, attrs=(Attr("dtype", None, _arange_dtype),), pattern="elementwise",
    legalize=legalize_arange, canonicalize=canonicalize_arange,
)


# ----------------------------------------------------------------------------- tril, triu


def _int64(value: int) -> relax.PrimValue:
    v = tir.IntImm("int64", value)
    return relax.PrimValue(v, relax.PrimStructInfo("int64", v))


def canonicalize_trilu(args, attrs):
    """``tril(x)`` is ``tril(x, 0)``: TVM's calls always hold the diagonal offset ``k``."""
    x, k = args
    return [x, _int64(0) if k is None else k], attrs


def infer_trilu(args, attrs):
    """``x``'s struct info; ``x`` has at least two dimensions (the triangle is of the last two)
    and ``k`` is an integer prim value (the diagonal offset: > 0 above the main one)."""
    x = tensor_arg(args[0], "x")
    if 0 <= x.ndim < 2:
        raise OpError(f"needs a tensor of rank 2 or more (a matrix or a batch of them), got rank {x.ndim}", "x")
    k = _prim(args[1], "k")
    if k.dtype and not k.dtype.startswith(("int", "uint")):
        raise OpError(f"k must be an integer, not a {k.dtype} value", "k")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype,
                                  x.ndim if x.shape is None else -1)


def _trilu_legalizer(name: str, upper: bool):
    """``trilu`` with a constant ``k``, or one whose variables the input's shape defines (the
    PrimFunc has no other way to receive them); otherwise the call is left as it is."""
    te_call = te_legalizer(lambda x, k: topi.trilu(x, k, upper), name)

    def legalize(bb, call):
        k = call.args[1].value if isinstance(call.args[1], relax.PrimValue) else None
        if k is None or not _defined_by_shape(k, relax.struct_info_of(call.args[0])):
            return None
        return te_call(bb, call)

    legalize.__name__ = f"legalize_{name}"
    return legalize


def _defined_by_shape(e, x) -> bool:
    if isinstance(e, tir.IntImm):
        return True
    names = {d for d in (x.shape or []) if isinstance(d, tir.Var)}
    return isinstance(e, tir.Var) and e in names


for _name, _upper in (("tril", False), ("triu", True)):
    register_op(_name, ("x", Arg("k", "prim", optional=True)), infer_trilu, pattern="elementwise",
                legalize=_trilu_legalizer(_name, _upper), canonicalize=canonicalize_trilu)


def infer_null_value(args, attrs):
    return relax.ObjectStructInfo()


# ``R.null_value()``: an empty object (TVM's ``relax.op.null_value``), the initial state of
# relax.frontend.nn's debug effect (``_io``). Nothing to legalize: the VM makes it directly
# (compiler/vm_codegen.py), as TVM's VM calls its ``vm.builtin.null_value``.
register_op("null_value", (), infer_null_value)
