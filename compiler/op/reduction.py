"""Legalization of the reductions (declared in ``tvmscript/ir/op/reduction.py``): sum & co.
and argmax/argmin to ``topi.reduction`` (a PrimFunc named after the op), median to its own
TensorIR (``topi.reduction.median``: ranks, then a pick), cumsum/cumprod to a scan PrimFunc
built directly (``topi.scan``: TE has no scan) and called with call_tir.
"""

from __future__ import annotations

from tvmscript.ir import relax
from tvmscript.ir.op.api import call_tir
from tvmscript.ir.op.reduction import STATISTICAL_OPS

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer

_ATTRS = ("axis", "keepdims")


def legalize_median(bb, call):
    if not shapes_known(call):
        return None
    axis = call.attrs["axis"]
    return bb.call_te(topi.reduction.median, call.args[0], axis=axis, keepdims=call.attrs["keepdims"],
                      with_indices=axis is not None and len(axis) == 1, primfunc_name_hint="median")


def _cumulative_legalizer(kind: str):
    """A scan PrimFunc built directly (``topi.scan``: TE has no scan), called with call_tir."""
    def legalize(bb, call):
        if not shapes_known(call):
            return None
        data = call.args[0]
        x = relax.struct_info_of(data)
        name = data.name_hint if isinstance(data, relax.Var) else "data"
        func = topi.scan.cumulative(list(x.shape), x.dtype, call.attrs["axis"], call.struct_info.dtype,
                                    call.attrs["exclusive"], kind, name)
        gv = bb.add_func(func, f"cum{kind}")
        return call_tir(gv, [data], call.struct_info)

    legalize.__name__ = f"legalize_cum{kind}"
    return legalize


for _name in tuple(STATISTICAL_OPS) + ("argmax", "argmin"):
    register_legalize(_name, te_legalizer(getattr(topi.reduction, _name), _name, _ATTRS))
register_legalize("median", legalize_median)
for _kind in ("sum", "prod"):
    register_legalize(f"cum{_kind}", _cumulative_legalizer(_kind))
