"""Legalization of the shape manipulation ops (declared in ``tvmscript/ir/op/manipulate.py``):
each to one PrimFunc of the TOPI computes in ``compiler/topi/transform.py``, under TVM's
PrimFunc names (``transpose``, ``reshape``, ``concatenate``, ``split``, ``flip``,
``te_layout_transform``...). A shape argument's dims become int64 loops, as TVM's. Ops the VM
runs itself (tensor_to_shape, dynamic_strided_slice) have none.
"""

from __future__ import annotations

from tvmscript.ir import relax
from tvmscript.ir.op.common import normalize_axis

from .. import topi
from ..topi import transform as tt
from .legalize import register_legalize, shapes_known, te_legalizer, tuple_tensors


def legalize_reshape(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.reshape, call.args[0], list(call.struct_info.shape), primfunc_name_hint="reshape")


def legalize_concat(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.concatenate, tuple_tensors(bb, call.args[0]), axis=call.attrs["axis"] or 0,
                      primfunc_name_hint="concatenate")


def legalize_strided_slice(bb, call):
    if not shapes_known(call):
        return None
    x, *prims = call.args
    vals = [[f.value.value for f in p.fields] for p in prims]
    if len(vals) == 3:
        vals.append([1] * len(vals[0]))
    axes, begin, end, strides = vals
    return bb.call_te(topi.strided_slice, x, begin, end, strides, axes, call.attrs["assume_inbound"],
                      primfunc_name_hint="strided_slice")


def _flip_te(data, axis):
    return tt.flip(data, normalize_axis(axis, len(data.shape), "axis"))


def legalize_collapse_sum(bb, call):
    """Both ops legalize to one ``collapse_sum`` PrimFunc summing down to the result's shape."""
    if not shapes_known(call):
        return None
    return bb.call_te(topi.reduction.collapse_sum, call.args[0], list(call.struct_info.shape),
                      primfunc_name_hint="collapse_sum")


def _reverse_sequence_te(data, seq_lengths, seq_axis, batch_axis):
    n = len(data.shape)
    return tt.reverse_sequence(data, seq_lengths, normalize_axis(seq_axis, n, "seq_axis"),
                               normalize_axis(batch_axis, n, "batch_axis"))


def legalize_layout_transform(bb, call):
    """``te_layout_transform`` (``_with_pad`` when the map pads), for maps `tt.layout_transform`
    can invert; others stay as they are."""
    if not shapes_known(call):
        return None
    index_map = call.attrs["index_map"].map
    pads = tt.layout_transform_padded_axes(index_map, list(relax.struct_info_of(call.args[0]).shape))
    try:
        return bb.call_te(tt.layout_transform, call.args[0], index_map, call.attrs["pad_value"],
                          primfunc_name_hint="te_layout_transform_with_pad" if pads else "te_layout_transform")
    except ValueError:
        return None


register_legalize("permute_dims", te_legalizer(topi.transpose, "transpose", ("axes",)))
register_legalize("reshape", legalize_reshape)
register_legalize("flatten", legalize_reshape)
register_legalize("expand_dims", te_legalizer(topi.expand_dims, "expand_dims", ("axis",)))
register_legalize("squeeze", te_legalizer(topi.squeeze, "squeeze", ("axis",)))
register_legalize("concat", legalize_concat)
register_legalize("split", te_legalizer(topi.split, "split", ("indices_or_sections", "axis")))
register_legalize("strided_slice", legalize_strided_slice)
register_legalize("broadcast_to", te_legalizer(topi.broadcast_to, "broadcast_to"))
register_legalize("tile", te_legalizer(topi.tile, "tile", ("repeats",)))
register_legalize("repeat", te_legalizer(topi.repeat, "repeat", ("repeats", "axis")))
register_legalize("flip", te_legalizer(_flip_te, "flip", ("axis",)))
register_legalize("collapse_sum_like", legalize_collapse_sum)
register_legalize("collapse_sum_to", legalize_collapse_sum)
register_legalize("reverse_sequence",
                  te_legalizer(_reverse_sequence_te, "reverse_sequence", ("seq_axis", "batch_axis")))
register_legalize("layout_transform", legalize_layout_transform)
