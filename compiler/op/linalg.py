"""Legalization of the linear-algebra ops (declared in ``tvmscript/ir/op/linalg.py``):
``matmul`` to ``topi.matmul`` (PrimFunc ``matmul``), ``einsum`` to ``topi.linalg.einsum``
(PrimFunc ``einsum``), its operands passed as separate tensors."""

from __future__ import annotations

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer, tuple_tensors


def legalize_einsum(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.linalg.einsum, call.attrs["subscripts"], *tuple_tensors(bb, call.args[0]),
                      primfunc_name_hint="einsum")


register_legalize("matmul", te_legalizer(topi.matmul, "matmul", ("out_dtype",)))
register_legalize("einsum", legalize_einsum)
