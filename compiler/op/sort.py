"""Legalization of the sorting and searching ops (declared in ``tvmscript/ir/op/sort.py``):
bucketize to TOPI's ``searchsorted`` (PrimFunc ``searchsorted``); nonzero and unique, whose
output sizes depend on the data, to ``R.call_pure_packed`` of the runtime functions
"relax.run.nonzero"/"relax.run.unique" (runtime/vm_helpers.py registers them), as TVM's. sort, argsort
and topk have none: TVM's LegalizeOps leaves them alone, and the VM sorts on the host.
"""

from __future__ import annotations

from tvmscript.ir import relax

from .. import topi
from .legalize import register_legalize, te_legalizer


def _bucketize_te(input_tensor, boundaries, out_int32, right):
    return topi.search.searchsorted(boundaries, input_tensor, right, "int32" if out_int32 else "int64")


def _packed_legalizer(fname: str):
    """The legalizer of an op whose output size depends on the data: TVM calls its runtime
    function ``fname`` (``R.call_pure_packed("relax.run.nonzero", x, ...)``); so does this, the
    function being registered by runtime/vm_helpers.py."""

    def legalize(bb, call):
        sinfo = call.struct_info
        return relax.Call(relax.Op("relax.call_pure_packed"), [relax.ExternFunc(fname)] + list(call.args), {},
                          [sinfo], sinfo, call.span)

    legalize.__name__ = "legalize_" + fname.rsplit(".", 1)[-1]
    return legalize


register_legalize("bucketize", te_legalizer(_bucketize_te, "searchsorted", ("out_int32", "right")))
register_legalize("nonzero", _packed_legalizer("relax.run.nonzero"))
register_legalize("unique", _packed_legalizer("relax.run.unique"))
