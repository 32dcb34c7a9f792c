"""Collective communication ops (``R.ccl.*``) and the distributed redistribution op
(``R.dist.redistribute_replica_to_shard``), as TVM declares and legalizes them.

LegalizeOps turns each collective into a destination-passing call of the disco runtime's
function (``R.call_dps_packed("runtime.disco.allreduce", (x, R.shape([kind]), in_group), ...)``);
scatter first stacks the slices worker by worker (a reshape and a transpose, as TVM does), and
replica-to-shard takes this worker's slice by the runtime's worker id. The disco functions are
not part of a single-device VM: a program runs where they are registered (tests register
stand-ins for one worker)."""

from __future__ import annotations

from tvmscript.ir import relax, tir

from ..topi import transform as ttransform
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


def _divided(dim, n: int):
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
    shape[axis] = _divided(dim, n)
    return relax.TensorStructInfo(shape, x.dtype, vdevice=x.vdevice)


def _flag(value: bool) -> relax.PrimValue:
    """A boolean argument of a disco runtime function, passed as an int64 0/1 as TVM passes it."""
    e = tir.IntImm("int64", int(value))
    return relax.PrimValue(e, relax.PrimStructInfo("int64", e))


def _dps_packed(fname: str, args: list, out: relax.TensorStructInfo, span=None) -> relax.Call:
    """``R.call_dps_packed(fname, (args...), out_sinfo=out)``."""
    fields = list(args)
    tup = relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    return relax.Call(relax.Op("relax.call_dps_packed"), [relax.ExternFunc(fname), tup], {}, [out], out, span)


def legalize_allreduce(bb, call):
    code = [tir.IntImm("int64", ALLREDUCE_KINDS[call.attrs["op_type"]])]
    kind = relax.ShapeExpr(code, relax.ShapeStructInfo(code))
    return _dps_packed("runtime.disco.allreduce", [call.args[0], kind, _flag(call.attrs["in_group"])],
                       call.struct_info, call.span)


def legalize_allgather(bb, call):
    return _dps_packed("runtime.disco.allgather", [call.args[0], _flag(call.attrs["in_group"])],
                       call.struct_info, call.span)


def legalize_broadcast(bb, call):
    return _dps_packed("runtime.disco.broadcast_from_worker0", [call.args[0], _flag(False)], call.struct_info,
                       call.span)


def _stack_workers(bb, x, axis: int, n: int):
    """``x`` with dim ``axis`` split into (``num_workers``, the slice): a reshape."""
    shape = list(relax.struct_info_of(x).shape)
    split = [tir.IntImm("int64", n), _divided(shape[axis], n)]
    return bb.emit_te(ttransform.reshape, x, shape[:axis] + split + shape[axis + 1:])


def legalize_scatter(bb, call):
    """Worker 0's tensor split along ``axis`` into ``num_workers`` slices stacked first (a
    reshape, then a transpose bringing the worker axis to the front), which the runtime hands out
    one slice per worker."""
    x = relax.struct_info_of(call.args[0])
    if x.shape is None:
        return None
    axis, n = call.attrs["axis"] % x.ndim, call.attrs["num_workers"]
    stacked = _stack_workers(bb, call.args[0], axis, n)
    if axis:
        order = [axis] + list(range(axis)) + list(range(axis + 1, x.ndim + 1))
        stacked = bb.emit_te(ttransform.transpose, stacked, order)
    return _dps_packed("runtime.disco.scatter_from_worker0", [stacked, _flag(False)], call.struct_info, call.span)


def legalize_replica_to_shard(bb, call):
    """This worker's slice of a replicated tensor: the runtime's worker id, matched to a
    symbolic ``worker_id``, picks slice ``worker_id`` of dim ``axis`` split ``num_workers`` ways
    (TVM slices ``[id * d / n, (id + 1) * d / n)``; here the split dim is indexed, the same
    elements)."""
    x = relax.struct_info_of(call.args[0])
    if x.shape is None:
        return None
    axis, n = call.attrs["axis"] % x.ndim, call.attrs["num_workers"]
    wid = tir.Var("int64", "worker_id")
    any_shape = relax.ShapeStructInfo(None, -1)
    packed = relax.Call(relax.Op("relax.call_pure_packed"), [relax.ExternFunc("runtime.disco.worker_id")], {},
                        [any_shape], any_shape)
    bb.match_cast(bb.emit(packed), relax.ShapeStructInfo([wid]))
    stacked = _stack_workers(bb, call.args[0], axis, n)
    return bb.call_te(ttransform.take, stacked, wid, axis, primfunc_name_hint="redistribute_replica_to_shard")


_X = ("x",)
register_op("ccl.allreduce", _X, infer_same, attrs=(Attr("op_type", "sum", _op_type_attr),
                                                   Attr("in_group", True, bool_attr("in_group"))),
            legalize=legalize_allreduce)
register_op("ccl.allgather", _X, infer_allgather, attrs=(Attr("num_workers", REQUIRED, int_attr("num_workers", 1)),
                                                        Attr("in_group", True, bool_attr("in_group"))),
            legalize=legalize_allgather)
register_op("ccl.broadcast_from_worker0", _X, infer_same, legalize=legalize_broadcast)
_SHARD_ATTRS = (Attr("num_workers", REQUIRED, int_attr("num_workers", 1)), Attr("axis", 0, int_attr("axis")))
register_op("ccl.scatter_from_worker0", _X, infer_shard, attrs=_SHARD_ATTRS, legalize=legalize_scatter)
register_op("dist.redistribute_replica_to_shard", _X, infer_shard, attrs=_SHARD_ATTRS,
            legalize=legalize_replica_to_shard)
