"""Legalization of the gradient ops (declared in ``tvmscript/ir/op/grad.py``) where TVM
legalizes them: nll_loss_backward, the pooling backwards (on NCHW operands, brought there and
back by ``T_layout_trans``) and take_backward, each to a PrimFunc of ``compiler/topi/grad.py``.
The markers (no_grad, start/end_checkpoint) have none, as in TVM.
"""

from __future__ import annotations

from tvmscript.ir import relax
from tvmscript.ir.op.nn_window import POOL_ATTR_NAMES

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer


def legalize_nll_loss_backward(bb, call):
    if not shapes_known(call):
        return None
    g, pred, tgt, *rest = call.args
    attrs = {"reduction": call.attrs["reduction"], "ignore_index": call.attrs["ignore_index"]}
    if rest and rest[0] is not None:
        return bb.call_te(topi.grad.nll_loss_backward, g, pred, tgt, rest[0], primfunc_name_hint="nll_loss_backward",
                          **attrs)
    return bb.call_te(lambda a, b, c, **kw: topi.grad.nll_loss_backward(a, b, c, None, **kw), g, pred, tgt,
                      primfunc_name_hint="te_nll_loss_backward_no_weight", **attrs)


def _pool_backward(kind: str):
    """The backward on NCHW operands: the data (in ``layout``) and the output gradient (in
    ``out_layout``) brought to NCHW, the gradient written back in ``layout``."""
    def backward(output_grad, data, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout,
                 out_layout):
        g, x = topi.nn.to_primal(output_grad, out_layout, "NCHW"), topi.nn.to_primal(data, layout, "NCHW")
        if kind == "max":
            grad = topi.grad.max_pool2d_backward(g, x, pool_size, strides, dilation, padding, ceil_mode)
        else:
            grad = topi.grad.avg_pool2d_backward(g, x, pool_size, strides, dilation, padding, ceil_mode,
                                                 count_include_pad)
        return topi.nn.from_primal(grad, layout, "NCHW")
    backward.__name__ = f"{kind}_pool2d_backward"
    return backward


def legalize_take_backward(bb, call):
    if not shapes_known(call):
        return None
    x = relax.struct_info_of(call.args[1])
    axis = call.attrs["axis"]
    axis = axis + x.ndim if axis is not None and axis < 0 else axis
    return bb.call_te(topi.grad.take_backward, *call.args, axis=axis, primfunc_name_hint="take_backward")


register_legalize("grad.nll_loss_backward", legalize_nll_loss_backward)
for _kind in ("max", "avg"):
    register_legalize(f"grad.{_kind}_pool2d_backward",
                      te_legalizer(_pool_backward(_kind), f"{_kind}_pool2d_backward", POOL_ATTR_NAMES))
register_legalize("grad.take_backward", legalize_take_backward)
