"""Legalization of the neural-network ops (declared in ``tvmscript/ir/op/nn.py`` and
``nn_window.py``): each is ``bb.call_te`` of a TE definition in ``compiler/topi/nn``
(PrimFuncs named as TVM names them:
``conv2d``, ``max_pool2d``, ``layer_norm``, ``attention_bias``...). Convolutions and pooling
compute in the canonical order; their operands in other layouts are brought there and back by
``T_layout_trans`` stages.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir
from tvmscript.ir.op.nn_window import POOL_ATTR_NAMES
from tvmscript.ir.op.nn_shapes import layout_to_primal_shape

from .. import topi
from .legalize import register_legalize, shapes_known, te_legalizer

_CONV_ATTRS = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_layout", "out_dtype")
_CONV_TRANSPOSE_ATTRS = ("strides", "padding", "output_padding", "dilation", "groups", "data_layout",
                         "kernel_layout", "out_layout", "out_dtype")
PAD_KERNELS = {"constant": (topi.nn.pad, "pad"), "reflect": (topi.nn.reflect_pad, "reflect_pad"),
               "edge": (topi.nn.edge_pad, "edge_pad")}


def _pool_legalizer(kind: str, nsp: int):
    fn = topi.nn.pool2d if nsp == 2 else topi.nn.pool1d

    def pool(data, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout):
        return fn(data, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout)
    pool.__name__ = f"{kind}_pool{nsp}d"
    return pool


def _adaptive_avg_pool2d(data, output_size, layout, out_layout):
    return topi.nn.adaptive_pool2d(data, output_size, "avg", layout, out_layout)


def _legalize_adaptive(bb, call):
    """Left as is when ``output_size`` is None and the input's H/W are symbolic (the output
    extents must be constants to build the windows)."""
    x = relax.struct_info_of(call.args[0])
    if call.attrs["output_size"] is None and x.shape is not None and not all(
            isinstance(d, tir.IntImm) for d in layout_to_primal_shape(x.shape, call.attrs["layout"], "NCHW")[2:]):
        return None
    return _adaptive_te(bb, call)


_adaptive_te = te_legalizer(_adaptive_avg_pool2d, "adaptive_avg_pool2d", ("output_size", "layout", "out_layout"))


def legalize_pad(bb, call):
    if not shapes_known(call):
        return None
    width, mode = call.attrs["pad_width"], call.attrs["pad_mode"]
    fn, name = PAD_KERNELS[mode]
    before, after = width[0::2], width[1::2]
    if mode == "constant":
        return bb.call_te(fn, call.args[0], before, after, call.attrs["pad_value"], primfunc_name_hint=name)
    return bb.call_te(fn, call.args[0], before, after, primfunc_name_hint=name)


def legalize_attention(bb, call):
    """TE attention (``topi.nn.attention``); a sliding ``window_size`` is not legalized (as in
    TVM, whose legalization rejects it), so the call is left for the build to report."""
    if not shapes_known(call) or call.attrs["window_size"] is not None:
        return None
    q, k, v, *rest = call.args
    name = "attention_bias" if rest else "attention"
    return bb.call_te(topi.nn.attention, q, k, v, rest[0] if rest else None, call.attrs["scale"],
                      call.attrs["causal_mask"], primfunc_name_hint=name)


def legalize_nll_loss(bb, call):
    if not shapes_known(call):
        return None
    pred, tgt = call.args[0], call.args[1]
    weights = call.args[2] if len(call.args) > 2 else None
    name = "nll_loss" if weights is not None else "nll_loss_without_weight"
    attrs = {"reduction": call.attrs["reduction"], "ignore_index": call.attrs["ignore_index"]}
    if weights is None:
        return bb.call_te(lambda p, t, **kw: topi.nn.nll_loss(p, t, None, **kw), pred, tgt,
                          primfunc_name_hint=name, **attrs)
    return bb.call_te(topi.nn.nll_loss, pred, tgt, weights, primfunc_name_hint=name, **attrs)


for _name in ("softmax", "log_softmax"):
    register_legalize(f"nn.{_name}", te_legalizer(getattr(topi.nn, _name), _name, ("axis",)))
register_legalize("nn.layer_norm",
                  te_legalizer(topi.nn.layer_norm, "layer_norm", ("axes", "epsilon", "center", "scale")))
register_legalize("nn.rms_norm", te_legalizer(topi.nn.rms_norm, "rms_norm", ("axes", "epsilon")))
register_legalize("nn.group_norm", te_legalizer(topi.nn.group_norm, "group_norm",
                                                ("num_groups", "channel_axis", "axes", "epsilon", "center", "scale")))
register_legalize("nn.batch_norm", te_legalizer(topi.nn.batch_norm, "batch_norm",
                                                ("axis", "epsilon", "center", "scale", "momentum", "training")))
for _nsp, _fn in ((1, topi.nn.conv1d), (2, topi.nn.conv2d), (3, topi.nn.conv3d)):
    register_legalize(f"nn.conv{_nsp}d", te_legalizer(_fn, f"conv{_nsp}d", _CONV_ATTRS))
for _nsp, _fn in ((1, topi.nn.conv1d_transpose), (2, topi.nn.conv2d_transpose), (3, topi.nn.conv3d_transpose)):
    register_legalize(f"nn.conv{_nsp}d_transpose", te_legalizer(_fn, f"conv{_nsp}d_transpose", _CONV_TRANSPOSE_ATTRS))
for _kind in ("max", "avg"):
    register_legalize(f"nn.{_kind}_pool2d", te_legalizer(_pool_legalizer(_kind, 2), f"{_kind}_pool2d", POOL_ATTR_NAMES))
    register_legalize(f"nn.{_kind}_pool1d", te_legalizer(_pool_legalizer(_kind, 1), f"{_kind}_pool1d", POOL_ATTR_NAMES))
register_legalize("nn.adaptive_avg_pool2d", _legalize_adaptive)
register_legalize("nn.pad", legalize_pad)
register_legalize("nn.attention", legalize_attention)
register_legalize("nn.attention_bias", legalize_attention)
register_legalize("nn.dropout", te_legalizer(topi.nn.dropout, "dropout", ("rate",)))
register_legalize("nn.dense", te_legalizer(topi.nn.dense, "dense", ("out_dtype",)))
register_legalize("nn.nll_loss", legalize_nll_loss)
register_legalize("nn.cross_entropy_with_logits",
                  te_legalizer(topi.nn.cross_entropy_with_logits, "cross_entropy_with_logits"))
# TVM legalizes batch_flatten as a reshape (PrimFunc ``reshape``).
register_legalize("nn.batch_flatten", te_legalizer(topi.nn.batch_flatten, "reshape"))
