"""Legalization of the creation ops (declared in ``tvmscript/ir/op/create.py``): zeros, ones,
full and their ``_like`` forms to ``topi.full`` (no tensor inputs; a constant fill value
inlined), ``arange`` folded into a constant when its bounds are (as TVM's) and ``T_arange``
otherwise, tril/triu to ``topi.trilu``. ``null_value`` has none: the VM makes it.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir
from tvmscript.ir.op.create import number_value

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer


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


def legalize_arange(bb, call):
    if not shapes_known(call):
        return None
    start, end, step = (a.value for a in call.args)
    dtype = call.struct_info.dtype
    nums = [number_value(v) for v in (start, end, step)]
    if None not in nums:  # constant bounds: the result is a constant, as TVM folds it
        import numpy as np  # not at import time: numpy is slow to load

        return relax.Constant(np.arange(nums[0], nums[1], nums[2]).astype(dtype)[: _length(call)],
                              relax.TensorStructInfo(list(call.struct_info.shape), dtype))
    return bb.call_te(topi.arange, start, end, step, dtype, call.struct_info.shape[0], primfunc_name_hint="arange")


def _length(call) -> int:
    return call.struct_info.shape[0].value


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


register_legalize("zeros", _full_legalizer("zeros", 0))
register_legalize("ones", _full_legalizer("ones", 1))
register_legalize("full", _full_legalizer("full"))
register_legalize("zeros_like", _full_legalizer("zeros", 0))
register_legalize("ones_like", _full_legalizer("ones", 1))
register_legalize("full_like", _full_legalizer("full"))
register_legalize("arange", legalize_arange)
register_legalize("tril", _trilu_legalizer("tril", False))
register_legalize("triu", _trilu_legalizer("triu", True))
