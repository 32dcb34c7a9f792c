"""Legalization of the vision ops (declared in ``tvmscript/ir/op/vision.py``): get_valid_counts,
multibox_transform_loc, roi_align (a fixed sampling grid only) and roi_pool, each to one
PrimFunc of ``compiler/topi/vision.py`` named after it. The non-maximum suppressions have none
(TVM's kernels are sorting loops with data-dependent trip counts): LegalizeOps leaves them."""

from __future__ import annotations

from ..topi import vision as tvision
from .legalize import register_legalize, shapes_known


def legalize_get_valid_counts(bb, call):
    if not shapes_known(call):
        return None
    a = call.attrs
    return bb.call_te(tvision.get_valid_counts, call.args[0], a["score_threshold"], a["id_index"], a["score_index"],
                      primfunc_name_hint="get_valid_counts")


def legalize_multibox_transform_loc(bb, call):
    if not shapes_known(call):
        return None
    a = call.attrs
    return bb.call_te(lambda c, lo, an: tvision.multibox_transform_loc(c, lo, an, a["variances"], a["clip"],
                                                                       a["threshold"], a["keep_background"],
                                                                       a["apply_softmax"]),
                      *call.args, primfunc_name_hint="multibox_transform_loc")


def legalize_roi_align(bb, call):
    """A fixed sampling grid only (see ``topi.vision.roi_align``); adaptive ones stay unlegalized."""
    if not shapes_known(call) or call.attrs["sample_ratio"] <= 0:
        return None
    a = call.attrs
    return bb.call_te(lambda data, rois: tvision.roi_align(data, rois, a["pooled_size"], a["spatial_scale"],
                                                           a["sample_ratio"], a["aligned"], a["layout"], a["mode"]),
                      call.args[0], call.args[1], primfunc_name_hint="roi_align")


def legalize_roi_pool(bb, call):
    if not shapes_known(call):
        return None
    a = call.attrs
    return bb.call_te(lambda data, rois: tvision.roi_pool(data, rois, a["pooled_size"], a["spatial_scale"],
                                                          a["layout"]),
                      call.args[0], call.args[1], primfunc_name_hint="roi_pool")


register_legalize("vision.get_valid_counts", legalize_get_valid_counts)
register_legalize("vision.multibox_transform_loc", legalize_multibox_transform_loc)
register_legalize("vision.roi_align", legalize_roi_align)
register_legalize("vision.roi_pool", legalize_roi_pool)
