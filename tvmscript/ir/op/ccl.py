"""Collective communication ops (``R.ccl.*``) and the distributed redistribution op
(``R.dist.redistribute_replica_to_shard``), as TVM declares them: their attributes and struct
info. LegalizeOps turns each into a call of the disco runtime's function
(``compiler/op/ccl.py``)."""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import REQUIRED, bool_attr, int_attr, tensor_arg
from .registry import Attr, OpError, register_op

# The reduction codes of the runtime's ``runtime.disco.allreduce`` (its ReduceKind).
ALLREDUCE_KINDS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}


def _op_type_attr(value):
    if value not in ALLREDUCE_KINDS:
        raise OpError(f"op_type must be one of {', '.join(ALLREDUCE_KINDS)}, not {value!r}", "op_type")
    return value


def infer_same(args, attrs):
    """allreduce and broadcast_from_worker0 keep the tensor's shape and dtype."""
    return tensor_arg(args[0], "x")


def infer_allgather(args, attrs):
    """The workers' tensors stacked along axis 0: its first dim times ``num_workers``."""
    x = tensor_arg(args[0], "x")
    if x.ndim == 0:
        raise OpError("allgather needs a tensor of rank 1 or more", "x")
    if x.shape is None:
        return x
    first = x.shape[0]
    n = attrs["num_workers"]
    first = tir.IntImm("int64", first.value * n) if isinstance(first, tir.IntImm) else first * tir.IntImm("int64", n)
    return relax.TensorStructInfo([first] + list(x.shape[1:]), x.dtype, vdevice=x.vdevice)


def divided(dim, n: int):
    """One worker's share of a dim: folded when static, else a truncating division (as TVM
    writes it; the dims are not negative)."""
    if isinstance(dim, tir.IntImm):
        return tir.IntImm("int64", dim.value // n)
    return tir.Div("int64", dim, tir.IntImm("int64", n))


def infer_shard(args, attrs):
    """One worker's shard: dim ``axis`` divided by ``num_workers`` (which must divide it)."""
    x = tensor_arg(args[0], "x")
    axis, n = attrs["axis"], attrs["num_workers"]
    if x.ndim >= 0 and not -x.ndim <= axis < x.ndim:
        raise OpError(f"axis {axis} is out of range for a tensor of rank {x.ndim}", "axis")
    if x.shape is None:
        return x
    axis %= x.ndim
    dim = x.shape[axis]
    if isinstance(dim, tir.IntImm) and dim.value % n:
        raise OpError(f"dim {axis} of size {dim.value} is not divisible by num_workers={n}", "num_workers")
    shape = list(x.shape)
    shape[axis] = divided(dim, n)
    return relax.TensorStructInfo(shape, x.dtype, vdevice=x.vdevice)


_X = ("x",)
register_op("ccl.allreduce", _X, infer_same, attrs=(Attr("op_type", "sum", _op_type_attr),
                                                   Attr("in_group", True, bool_attr("in_group"))))
register_op("ccl.allgather", _X, infer_allgather, attrs=(Attr("num_workers", REQUIRED, int_attr("num_workers", 1)),
                                                        Attr("in_group", True, bool_attr("in_group"))))
register_op("ccl.broadcast_from_worker0", _X, infer_same)
_SHARD_ATTRS = (Attr("num_workers", REQUIRED, int_attr("num_workers", 1)), Attr("axis", 0, int_attr("axis")))
register_op("ccl.scatter_from_worker0", _X, infer_shard, attrs=_SHARD_ATTRS)
register_op("dist.redistribute_replica_to_shard", _X, infer_shard, attrs=_SHARD_ATTRS)
