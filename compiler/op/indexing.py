"""Legalization of the indexed ops (declared in ``tvmscript/ir/op/indexing.py``): take,
gather_elements, scatter_elements, one_hot, gather_nd and scatter_nd, each to one PrimFunc of
``compiler/topi/transform.py`` under TVM's names (``take``, ``gather``, ``scatter_elements``,
``one_hot``, ``te_gather_nd``, ``scatter_nd``).
"""

from __future__ import annotations

from tvmscript.ir import relax

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer


def legalize_take(bb, call):
    """``T_take``; a prim-value index (``R.prim_value(2)``, ``n - 1`` of the data's symbolic
    dims) is an expression in the PrimFunc. A prim-value variable index would be a scalar
    parameter, which ``call_te`` cannot pass yet: that call stays as it is."""
    if not shapes_known(call):
        return None
    x, idx = call.args
    if isinstance(relax.struct_info_of(idx), relax.PrimStructInfo):
        if not isinstance(idx, relax.PrimValue):
            return None
        idx = idx.value
    return bb.call_te(topi.take, x, idx, axis=call.attrs["axis"], mode=call.attrs["mode"], primfunc_name_hint="take")


def _one_hot_te(indices, on_value, off_value, depth, axis):
    return topi.one_hot(indices, on_value, off_value, depth, axis, on_value.dtype)


register_legalize("take", legalize_take)
register_legalize("gather_elements", te_legalizer(topi.gather_elements, "gather", ("axis",)))
register_legalize("scatter_elements", te_legalizer(topi.scatter_elements, "scatter_elements", ("axis", "reduction")))
register_legalize("one_hot", te_legalizer(_one_hot_te, "one_hot", ("depth", "axis")))
register_legalize("gather_nd", te_legalizer(topi.gather_nd, "te_gather_nd", ("batch_dims",)))
register_legalize("scatter_nd", te_legalizer(topi.scatter_nd, "scatter_nd", ("reduction",)))
