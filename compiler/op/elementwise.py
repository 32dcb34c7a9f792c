"""Legalization of the elementwise ops (declared in ``tvmscript/ir/op/elementwise.py``): each
to one PrimFunc of its TOPI compute, named as TVM 0.25's LegalizeOps names it (``tir_exp``,
``erf``, ``add``, ``cast``...). A scalar constant operand of a binary op becomes a TIR
immediate rather than a buffer parameter, as in TVM. ``ewise_fma`` has none (TVM has none
either).
"""

from __future__ import annotations

from tvmscript.ir import relax, tir
from tvmscript.ir.op.elementwise import BINARY_OPS, COMPARE_OPS, LOGICAL_OPS

from .. import topi
from ..topi._util import const_like
from .legalize import register_legalize, shapes_known, te_legalizer

# name -> (TOPI function, PrimFunc name TVM 0.25 gives it)
UNARY_KERNELS = {
    "exp": (topi.exp, "tir_exp"),
    "log": (topi.log, "tir_log"),
    "sqrt": (topi.sqrt, "tir_sqrt"),
    "rsqrt": (topi.rsqrt, "tir_rsqrt"),
    "tanh": (topi.tanh, "tir_tanh"),
    "sigmoid": (topi.sigmoid, "tir_sigmoid"),
    "sin": (topi.sin, "tir_sin"),
    "cos": (topi.cos, "tir_cos"),
    "erf": (topi.erf, "erf"),
    "negative": (topi.negative, "tir_negative"),
    "abs": (topi.abs, "tir_abs"),
    "floor": (topi.floor, "tir_floor"),
    "ceil": (topi.ceil, "tir_ceil"),
    "round": (topi.round, "tir_round"),
    "square": (topi.square, "tir_square"),
    "logical_not": (topi.logical_not, "tir_logical_not"),
    "nn.relu": (topi.relu, "relu"),
    "nn.gelu": (topi.gelu, "gelu"),
    "nn.silu": (topi.silu, "silu"),
    "trunc": (topi.trunc, "tir_trunc"),
    "sign": (topi.sign, "tir_sign"),
    "nn.gelu_tanh": (topi.gelu_tanh, "gelu_tanh"),
}
for _name, (_fn, _hint) in UNARY_KERNELS.items():
    register_legalize(_name, te_legalizer(_fn, _hint))

for _name in ("isnan", "isinf", "isfinite"):
    register_legalize(_name, te_legalizer(getattr(topi, _name), f"tir_{_name}"))


def _prelu_te(data, alpha, axis):
    return topi.prelu(data, alpha, axis + len(data.shape) if axis < 0 else axis)


register_legalize("nn.leakyrelu", te_legalizer(topi.leaky_relu, "leaky_relu", ("alpha",)))
register_legalize("nn.softplus", te_legalizer(topi.softplus, "softplus", ("beta", "threshold")))
register_legalize("nn.prelu", te_legalizer(_prelu_te, "prelu", ("axis",)))
register_legalize("clip", te_legalizer(topi.clip, "tir_clip"))
register_legalize("astype", te_legalizer(topi.cast, "cast", ("dtype",)))
register_legalize("where", te_legalizer(topi.where, "where"))


# ----------------------------------------------------------------------------- binary


def scalar_constant(e):
    """The TIR immediate of a scalar constant operand (a 0-d ``R.const`` or an
    ``R.prim_value`` of a number), None for anything else."""
    if isinstance(e, relax.Constant) and e.data.ndim == 0:
        return const_like(e.data[()].item(), str(e.data.dtype))
    if isinstance(e, relax.PrimValue) and isinstance(e.value, (tir.IntImm, tir.FloatImm)):
        return e.value
    return None


def binary_legalizer(topi_fn, name_hint: str):
    """Legalize a binary op as TVM does: a scalar constant second operand (else first) becomes a
    TIR immediate in the PrimFunc (``x + T.float32(1.0)``), not a 0-d buffer parameter, so the
    kernel takes one argument fewer. A prim-value variable operand would need to become a
    scalar parameter of the PrimFunc, which ``call_te`` cannot pass yet: such a call (and one
    of two prim values, which TVM does not legalize either) stays as it is."""
    def legalize(bb, call):
        if not shapes_known(call) or not isinstance(call.struct_info, relax.TensorStructInfo):
            return None
        args = list(call.args)
        k = 1 if scalar_constant(args[1]) is not None else 0
        imm = scalar_constant(args[k])
        if imm is not None and isinstance(relax.struct_info_of(args[1 - k]), relax.TensorStructInfo):
            args[k] = imm
        if any(isinstance(a, relax.Expr) and isinstance(relax.struct_info_of(a), relax.PrimStructInfo)
               for a in args):
            return None
        return bb.call_te(topi_fn, *args, primfunc_name_hint=name_hint)

    legalize.__name__ = f"legalize_{name_hint}"
    return legalize


for _name in BINARY_OPS + COMPARE_OPS + LOGICAL_OPS:
    register_legalize(_name, binary_legalizer(getattr(topi, _name), _name))
