"""Legalization of the collective communication ops and the distributed redistribution op
(declared in ``tvmscript/ir/op/ccl.py``), as TVM legalizes them.

LegalizeOps turns each collective into a destination-passing call of the disco runtime's
function (``R.call_dps_packed("runtime.disco.allreduce", (x, R.shape([kind]), in_group), ...)``);
scatter first stacks the slices worker by worker (a reshape and a transpose, as TVM does), and
replica-to-shard takes this worker's slice by the runtime's worker id. The disco functions are
not part of a single-device VM: a program runs where they are registered (tests register
stand-ins for one worker)."""

from __future__ import annotations

from tvmscript.ir import relax, tir
from tvmscript.ir.op.ccl import ALLREDUCE_KINDS, divided

from ..topi import transform as ttransform
from .legalize import register_legalize


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
    split = [tir.IntImm("int64", n), divided(shape[axis], n)]
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


register_legalize("ccl.allreduce", legalize_allreduce)
register_legalize("ccl.allgather", legalize_allgather)
register_legalize("ccl.broadcast_from_worker0", legalize_broadcast)
register_legalize("ccl.scatter_from_worker0", legalize_scatter)
register_legalize("dist.redistribute_replica_to_shard", legalize_replica_to_shard)
