"""Legalization of the quantization ops (declared in ``tvmscript/ir/op/qnn.py``): quantize and
dequantize to one elementwise-style PrimFunc each (``topi.qnn``), the axis normalized first."""

from __future__ import annotations

from tvmscript.ir.op.common import normalize_axis

from .. import topi
from .legalize import register_legalize, te_legalizer


def _axis_normalized(fn):
    def te_fn(data, scale, zero_point, axis, out_dtype):
        return fn(data, scale, zero_point, normalize_axis(axis, len(data.shape)) if data.shape else 0, out_dtype)

    return te_fn


register_legalize("quantize", te_legalizer(_axis_normalized(topi.qnn.quantize), "quantize", ("axis", "out_dtype")))
register_legalize("dequantize",
                  te_legalizer(_axis_normalized(topi.qnn.dequantize), "dequantize", ("axis", "out_dtype")))
