"""Vision ops (``R.vision.*``): detection post-processing (non-maximum suppression, box
decoding, ROI align and pooling), declared as TVM declares them: the same arguments, attributes
(printed in TVM's order) and struct info.

``roi_align``, ``roi_pool``, ``multibox_transform_loc`` and ``get_valid_counts`` are legalized
into TensorIR (``compiler/op/vision.py``, ``compiler/topi/vision.py``); ``non_max_suppression`` and
``all_class_non_max_suppression``, whose TVM kernels are sorting loops with data-dependent trip
counts, are declared and inferred only, so LegalizeOps leaves those calls as they are."""

from __future__ import annotations

from tvmscript.ir import relax, tir

from .common import REQUIRED, bool_attr, int_attr, tensor_arg
from .registry import Attr, OpError, register_op


def _float_attr(name: str):
    """A number attribute, kept (and printed) as a Python float as TVM's double attributes are."""
    def convert(value):
        if value is REQUIRED:
            raise OpError(f"{name} is required", name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OpError(f"{name} must be a number, not {value!r}", name)
        return float(value)

    return convert


def _choice(name: str, allowed: tuple):
    def convert(value):
        if value not in allowed:
            raise OpError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}", name)
        return value

    return convert


def _pooled_size_attr(value):
    """One size for both, or (height, width)."""
    if value is REQUIRED:
        raise OpError("pooled_size is required", "pooled_size")
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value, value]
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        raise OpError(f"pooled_size must be a positive integer or two of them, not {value!r}", "pooled_size")
    return list(value)


def _variances_attr(value):
    if not (isinstance(value, (list, tuple)) and len(value) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise OpError(f"variances must be four numbers, not {value!r}", "variances")
    return [float(v) for v in value]


def _rank(x: relax.TensorStructInfo, n: int, what: str) -> None:
    if x.ndim >= 0 and x.ndim != n:
        raise OpError(f"{what} must be {n}-D, got rank {x.ndim}", what)


def _dims(x: relax.TensorStructInfo):
    return list(x.shape) if x.shape is not None else None


def _tensor(shape, dtype: str, ndim: int) -> relax.TensorStructInfo:
    return relax.TensorStructInfo(shape, dtype) if shape is not None else relax.TensorStructInfo(None, dtype, ndim)


def _i64(v: int) -> tir.IntImm:
    return tir.IntImm("int64", v)


def _product(dims: list):
    out = dims[0]
    for d in dims[1:]:
        out = _i64(out.value * d.value) if isinstance(out, tir.IntImm) and isinstance(d, tir.IntImm) else out * d
    return out


# ----------------------------------------------------------------------------- non-maximum suppression


def infer_all_class_nms(args, attrs):
    """ONNX form: (batch * classes * boxes, 3) int64 selected (batch, class, box) rows and
    their count (1,). TensorFlow form: (batch, classes * boxes, 2) int64 (class, box) indices,
    their scores and the per-batch counts (batch,)."""
    boxes, scores = tensor_arg(args[0], "boxes"), tensor_arg(args[1], "scores")
    for i, what in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"), (4, "score_threshold")):
        tensor_arg(args[i], what)
    _rank(boxes, 3, "boxes")
    _rank(scores, 3, "scores")
    b, s = _dims(boxes), _dims(scores)
    if attrs["output_format"] == "onnx":
        count = None if b is None or s is None else [_product([b[0], s[1], b[1]]), _i64(3)]
        return relax.TupleStructInfo([_tensor(count, "int64", 2), relax.TensorStructInfo([_i64(1)], "int64")])
    known = b is not None and s is not None
    per = _product([s[1], b[1]]) if known else None
    return relax.TupleStructInfo([
        _tensor([b[0], per, _i64(2)] if known else None, "int64", 3),
        _tensor([b[0], per] if known else None, scores.dtype, 2),
        _tensor([b[0]] if b is not None else None, "int64", 1),
    ])


def infer_get_valid_counts(args, attrs):
    """(valid count per batch (batch,) int32, the boxes moved to the top, their indices
    (batch, anchors) int32)."""
    data = tensor_arg(args[0], "data")
    _rank(data, 3, "data")
    d = _dims(data)
    return relax.TupleStructInfo([
        _tensor(d[:1] if d else None, "int32", 1), data, _tensor(d[:2] if d else None, "int32", 2),
    ])


def infer_nms(args, attrs):
    """The boxes with the suppressed ones invalidated; with ``return_indices``, the kept
    indices (batch, anchors) int32 and their count (batch, 1) int32, preceded by the rescored
    boxes when soft-NMS (``soft_nms_sigma`` > 0) is on."""
    data = tensor_arg(args[0], "data")
    tensor_arg(args[1], "valid_count")
    tensor_arg(args[2], "indices")
    _rank(data, 3, "data")
    if not attrs["return_indices"]:
        return data
    d = _dims(data)
    fields = [_tensor(d[:2] if d else None, "int32", 2), _tensor([d[0], _i64(1)] if d else None, "int32", 2)]
    if attrs["soft_nms_sigma"] > 0:
        fields.insert(0, data)
    return relax.TupleStructInfo(fields)


# ----------------------------------------------------------------------------- box decoding


def _known(d):
    return d.value if isinstance(d, tir.IntImm) else None


def infer_multibox_transform_loc(args, attrs):
    """(decoded boxes (batch, anchors, 4), class scores (batch, classes, anchors)) for class
    predictions (batch, classes, anchors), box encodings (batch, 4 * anchors) and anchors
    (1, anchors, 4), all of one dtype."""
    cls, loc, anchor = (tensor_arg(a, w) for a, w in zip(args, ("cls_pred", "loc_pred", "anchor")))
    _rank(cls, 3, "cls_pred")
    _rank(loc, 2, "loc_pred")
    _rank(anchor, 3, "anchor")
    if len({cls.dtype, loc.dtype, anchor.dtype} - {""}) > 1:
        raise OpError(f"cls_pred, loc_pred and anchor must have one dtype, got {cls.dtype}, {loc.dtype}, "
                      f"{anchor.dtype}", "loc_pred")
    c, lo, an = _dims(cls), _dims(loc), _dims(anchor)
    if lo is not None and _known(lo[1]) is not None and _known(lo[1]) % 4:
        raise OpError(f"loc_pred.shape[1] must be divisible by 4, got {_known(lo[1])}", "loc_pred")
    if c is not None and lo is not None and None not in (_known(c[0]), _known(lo[0])) and _known(c[0]) != _known(lo[0]):
        raise OpError(f"cls_pred and loc_pred must have one batch size, got {_known(c[0])} and {_known(lo[0])}",
                      "loc_pred")
    if c is not None:
        n = _known(c[2])
        if n is not None and lo is not None and _known(lo[1]) not in (None, 4 * n):
            raise OpError(f"loc_pred.shape[1] must be 4 * {n} anchors, got {_known(lo[1])}", "loc_pred")
        if n is not None and an is not None and [_known(v) for v in an] not in ([1, n, 4], [1, None, 4]):
            raise OpError(f"anchor must have shape (1, {n}, 4)", "anchor")
    boxes = [c[0], c[2], _i64(4)] if c is not None else None
    return relax.TupleStructInfo([_tensor(boxes, cls.dtype, 3), cls])


# ----------------------------------------------------------------------------- ROI align / pool


def _roi_out(args, attrs) -> relax.TensorStructInfo:
    """(rois, channels, pooled height, width) in NCHW, (rois, height, width, channels) in NHWC."""
    data, rois = tensor_arg(args[0], "data"), tensor_arg(args[1], "rois")
    _rank(data, 4, "data")
    _rank(rois, 2, "rois")
    r = _dims(rois)
    if r is not None and _known(r[1]) not in (None, 5):
        raise OpError(f"rois must have shape (num_rois, 5) as [batch, x1, y1, x2, y2], got {_known(r[1])} columns",
                      "rois")
    d = _dims(data)
    ph, pw = (_i64(v) for v in attrs["pooled_size"])
    if d is None or r is None:
        return relax.TensorStructInfo(None, data.dtype, 4)
    nhwc = attrs["layout"] == "NHWC"
    shape = [r[0], ph, pw, d[3]] if nhwc else [r[0], d[1], ph, pw]
    return relax.TensorStructInfo(shape, data.dtype)


def infer_roi_align(args, attrs):
    return _roi_out(args, attrs)


def infer_roi_pool(args, attrs):
    return _roi_out(args, attrs)


_LAYOUT = Attr("layout", "NCHW", _choice("layout", ("NCHW", "NHWC")))

register_op("vision.all_class_non_max_suppression",
            ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
            infer_all_class_nms,
            attrs=(Attr("output_format", "onnx", _choice("output_format", ("onnx", "tensorflow"))),))
register_op("vision.get_valid_counts", ("data",), infer_get_valid_counts,
            attrs=(Attr("score_threshold", 0.0, _float_attr("score_threshold")),
                   Attr("id_index", 0, int_attr("id_index")), Attr("score_index", 1, int_attr("score_index", 0))))
register_op("vision.non_max_suppression", ("data", "valid_count", "indices"), infer_nms,
            attrs=(Attr("max_output_size", -1, int_attr("max_output_size")),
                   Attr("iou_threshold", 0.5, _float_attr("iou_threshold")),
                   Attr("force_suppress", False, bool_attr("force_suppress")), Attr("top_k", -1, int_attr("top_k")),
                   Attr("coord_start", 2, int_attr("coord_start", 0)),
                   Attr("score_index", 1, int_attr("score_index", 0)),
                   Attr("id_index", 0, int_attr("id_index")), Attr("return_indices", True, bool_attr("return_indices")),
                   Attr("invalid_to_bottom", False, bool_attr("invalid_to_bottom")),
                   Attr("soft_nms_sigma", 0.0, _float_attr("soft_nms_sigma")),
                   Attr("score_threshold", 0.0, _float_attr("score_threshold"))))
register_op("vision.multibox_transform_loc", ("cls_pred", "loc_pred", "anchor"), infer_multibox_transform_loc,
            attrs=(Attr("clip", False, bool_attr("clip")), Attr("threshold", 0.0, _float_attr("threshold")),
                   Attr("variances", (1.0, 1.0, 1.0, 1.0), _variances_attr),
                   Attr("keep_background", True, bool_attr("keep_background")),
                   Attr("apply_softmax", True, bool_attr("apply_softmax"))))
register_op("vision.roi_align", ("data", "rois"), infer_roi_align,
            attrs=(Attr("pooled_size", REQUIRED, _pooled_size_attr),
                   Attr("spatial_scale", REQUIRED, _float_attr("spatial_scale")),
                   Attr("sample_ratio", -1, int_attr("sample_ratio")), Attr("aligned", False, bool_attr("aligned")),
                   _LAYOUT, Attr("mode", "avg", _choice("mode", ("avg", "max")))),
            pattern="out_ewise_fusable")
register_op("vision.roi_pool", ("data", "rois"), infer_roi_pool,
            attrs=(Attr("pooled_size", REQUIRED, _pooled_size_attr),
                   Attr("spatial_scale", REQUIRED, _float_attr("spatial_scale")), _LAYOUT),
            pattern="out_ewise_fusable")
