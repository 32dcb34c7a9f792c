"""Detection ops (TVM's ``topi.vision.roi_align`` / ``roi_pool`` / ``multibox_transform_loc`` /
``get_valid_counts`` for Relax's ``vision.*``).

``get_valid_counts`` moves the boxes whose score passes a threshold to the top.
``multibox_transform_loc`` decodes SSD / TFLite box encodings against their anchors (TFLite's
``DecodeCenterSizeBoxes``) and post-processes the class scores (softmax over classes, a
threshold, optionally the background class zeroed).

A ROI is a row ``[batch_index, x1, y1, x2, y2]`` in input-image coordinates, scaled to the
feature map by ``spatial_scale``. ``roi_align`` splits it into ``pooled_size`` bins and, in each,
averages (or takes the max of) ``sample_ratio`` x ``sample_ratio`` bilinear samples at the
centres of a regular grid; ``roi_pool`` takes the max over the whole pixels of each bin (0 for
an empty bin). Layouts NCHW and NHWC.
"""

from __future__ import annotations

from tvmscript.ir import tir

from .. import te
from .nn import softmax

__all__ = ["roi_align", "roi_pool", "multibox_transform_loc", "get_valid_counts"]


def _i64(v) -> tir.PrimExpr:
    return tir.IntImm("int64", v)


def _is(index, value: int) -> tir.PrimExpr:
    """``index == value`` as a TIR condition."""
    return tir.EQ("bool", index, tir.IntImm(index.dtype, value))


class _Layout:
    """Reads ``data[n, c, y, x]`` whatever the layout, and names the output axes."""

    def __init__(self, data: te.Tensor, layout: str) -> None:
        self.data, self.nhwc = data, layout == "NHWC"
        shape = data.shape
        self.channels, self.height, self.width = (shape[3], shape[1], shape[2]) if self.nhwc else shape[1:]

    def load(self, n, c, y, x):
        return self.data[n, y, x, c] if self.nhwc else self.data[n, c, y, x]

    def out_shape(self, num_rois, ph: int, pw: int) -> list:
        if self.nhwc:
            return [num_rois, _i64(ph), _i64(pw), self.channels]
        return [num_rois, self.channels, _i64(ph), _i64(pw)]

    def split(self, idx):
        """(roi, channel, bin row, bin column) of an output index."""
        i, a, b, c = idx
        return (i, c, a, b) if self.nhwc else (i, a, b, c)


def _bilinear(lay: _Layout, n, c, y, x, dtype: str):
    """The bilinear sample at (y, x), coordinates clamped into the map; 0 beyond one pixel outside."""
    f = lambda v: tir.const(v, dtype)  # noqa: E731
    h_f, w_f = te.cast(lay.height, dtype), te.cast(lay.width, dtype)
    outside = te.any(y < f(-1.0), x < f(-1.0), y > h_f, x > w_f)
    y = te.min(te.max(y, f(0.0)), h_f - f(1.0))
    x = te.min(te.max(x, f(0.0)), w_f - f(1.0))
    y0, x0 = te.floor(y), te.floor(x)
    ly, lx = y - y0, x - x0
    hy, hx = f(1.0) - ly, f(1.0) - lx
    yi0, xi0 = te.cast(y0, "int64"), te.cast(x0, "int64")
    yi1 = te.min(yi0 + _i64(1), te.cast(lay.height, "int64") - _i64(1))
    xi1 = te.min(xi0 + _i64(1), te.cast(lay.width, "int64") - _i64(1))
    v = lambda yy, xx: te.cast(lay.load(n, c, yy, xx), dtype)  # noqa: E731
    value = hy * hx * v(yi0, xi0) + hy * lx * v(yi0, xi1) + ly * hx * v(yi1, xi0) + ly * lx * v(yi1, xi1)
    return te.if_then_else(outside, f(0.0), value)


def roi_align(data: te.Tensor, rois: te.Tensor, pooled_size, spatial_scale: float, sample_ratio: int = -1,
              aligned: bool = False, layout: str = "NCHW", mode: str = "avg") -> te.Tensor:
    """ROI align with a fixed sampling grid (``sample_ratio`` > 0): the adaptive grid of TVM
    (``ceil(roi size / pooled size)`` samples) has a data-dependent extent, which a static
    reduction cannot express; callers leave that case unlegalized."""
    if sample_ratio <= 0:
        raise NotImplementedError("roi_align with an adaptive sampling grid (sample_ratio <= 0)")
    lay = _Layout(data, layout)
    ph_n, pw_n = pooled_size
    dtype = rois.dtype
    f = lambda v: tir.const(float(v), dtype)  # noqa: E731
    rh = te.reduce_axis((0, sample_ratio), name="rh")
    rw = te.reduce_axis((0, sample_ratio), name="rw")

    def fcompute(*idx):
        i, c, ph, pw = lay.split(idx)
        batch = te.cast(rois[i, _i64(0)], "int64")
        start_w, start_h = rois[i, _i64(1)] * f(spatial_scale), rois[i, _i64(2)] * f(spatial_scale)
        roi_w = rois[i, _i64(3)] * f(spatial_scale) - start_w
        roi_h = rois[i, _i64(4)] * f(spatial_scale) - start_h
        if not aligned:
            roi_w, roi_h = te.max(roi_w, f(1.0)), te.max(roi_h, f(1.0))
        bin_h, bin_w = roi_h / f(ph_n), roi_w / f(pw_n)
        y = start_h + te.cast(ph, dtype) * bin_h + (te.cast(rh, dtype) + f(0.5)) * bin_h / f(sample_ratio)
        x = start_w + te.cast(pw, dtype) * bin_w + (te.cast(rw, dtype) + f(0.5)) * bin_w / f(sample_ratio)
        sample = _bilinear(lay, batch, c, y, x, dtype)
        if mode == "avg":
            return te.sum(sample / f(sample_ratio * sample_ratio), axis=[rh, rw])
        return te.max(sample, axis=[rh, rw])

    return te.compute(lay.out_shape(rois.shape[0], ph_n, pw_n), fcompute, name="roi_align")


def roi_pool(data: te.Tensor, rois: te.Tensor, pooled_size, spatial_scale: float, layout: str = "NCHW") -> te.Tensor:
    """ROI max pooling. A bin covers rows ``[floor(ph * bin_h), ceil((ph + 1) * bin_h))`` of the
    ROI (its corners rounded to whole pixels, clipped to the map); the max runs over the whole
    map with the pixels outside the bin masked (a static reduction; TVM's has the bin's
    data-dependent extent), and an empty bin gives 0."""
    lay = _Layout(data, layout)
    ph_n, pw_n = pooled_size
    dtype = data.dtype
    fdt = rois.dtype
    f = lambda v: tir.const(float(v), fdt)  # noqa: E731
    ry = te.reduce_axis((0, lay.height), name="ry")
    rx = te.reduce_axis((0, lay.width), name="rx")
    out_shape = lay.out_shape(rois.shape[0], ph_n, pw_n)

    def bounds(i, ph, pw):
        corner = lambda k: te.cast(te.round(rois[i, _i64(k)] * f(spatial_scale)), "int64")  # noqa: E731
        sw, sh, ew, eh = corner(1), corner(2), corner(3), corner(4)
        bin_h = te.cast(te.max(eh - sh + _i64(1), _i64(1)), fdt) / f(ph_n)
        bin_w = te.cast(te.max(ew - sw + _i64(1), _i64(1)), fdt) / f(pw_n)

        def clip(v, hi):
            return te.min(te.max(v, _i64(0)), te.cast(hi, "int64"))

        ph_f, pw_f = te.cast(ph, fdt), te.cast(pw, fdt)
        hs = clip(te.cast(te.floor(ph_f * bin_h), "int64") + sh, lay.height)
        he = clip(te.cast(te.ceil((ph_f + f(1.0)) * bin_h), "int64") + sh, lay.height)
        ws = clip(te.cast(te.floor(pw_f * bin_w), "int64") + sw, lay.width)
        we = clip(te.cast(te.ceil((pw_f + f(1.0)) * bin_w), "int64") + sw, lay.width)
        return hs, he, ws, we

    def pooled(*idx):
        i, c, ph, pw = lay.split(idx)
        hs, he, ws, we = bounds(i, ph, pw)
        inside = te.all(hs <= ry, ry < he, ws <= rx, rx < we)
        batch = te.cast(rois[i, _i64(0)], "int64")
        return te.max(te.if_then_else(inside, lay.load(batch, c, ry, rx), te.min_value(dtype)), axis=[ry, rx])

    best = te.compute(out_shape, pooled, name="roi_pool_max")

    def finish(*idx):
        i, c, ph, pw = lay.split(idx)
        hs, he, ws, we = bounds(i, ph, pw)
        return te.if_then_else(te.all(hs < he, ws < we), best[idx], tir.const(0, dtype))

    return te.compute(out_shape, finish, name="roi_pool")


def multibox_transform_loc(cls_pred: te.Tensor, loc_pred: te.Tensor, anchor: te.Tensor, variances, clip: bool = False,
                           threshold: float = 0.0, keep_background: bool = True, apply_softmax: bool = True):
    """(boxes (B, N, 4) as (ymin, xmin, ymax, xmax), scores (B, C, N)) for class predictions
    ``cls_pred`` (B, C, N), encodings ``loc_pred`` (B, 4 * N) holding (x, y, w, h) per anchor
    and ``anchor`` (1, N, 4) as (left, top, right, bottom). A box's centre is the anchor's moved
    by ``encoding * variance * anchor size``; its size the anchor's scaled by
    ``exp(encoding * variance)``; ``clip`` clamps the corners into [0, 1]."""
    dtype = cls_pred.dtype
    batch, _, num_anchors = cls_pred.shape
    f = lambda v: tir.const(float(v), dtype)  # noqa: E731
    vx, vy, vw, vh = (f(v) for v in variances)

    def corner(b, a, k):
        left, top, right, bottom = (anchor[_i64(0), a, _i64(i)] for i in range(4))
        ex, ey, ew, eh = (loc_pred[b, a * _i64(4) + _i64(i)] for i in range(4))
        ah, aw = bottom - top, right - left
        yc = ey * vy * ah + (top + bottom) * f(0.5)
        xc = ex * vx * aw + (left + right) * f(0.5)
        half_h = f(0.5) * te.exp(eh * vh) * ah
        half_w = f(0.5) * te.exp(ew * vw) * aw
        values = [yc - half_h, xc - half_w, yc + half_h, xc + half_w]
        if clip:
            values = [te.max(f(0.0), te.min(f(1.0), v)) for v in values]
        picked = values[3]
        for i in (2, 1, 0):
            picked = tir.Select(dtype, _is(k, i), values[i], picked)
        return picked

    boxes = te.compute([batch, num_anchors, _i64(4)], corner, name="multibox_boxes")
    probs = softmax(cls_pred, axis=1) if apply_softmax else cls_pred

    def score(b, c, n):
        s = probs[b, c, n]
        kept = te.if_then_else(s >= f(threshold), s, f(0.0))
        return kept if keep_background else te.if_then_else(_is(c, 0), f(0.0), kept)

    scores = te.compute(list(cls_pred.shape), score, name="multibox_scores")
    return boxes, scores


def get_valid_counts(data: te.Tensor, score_threshold: float = 0.0, id_index: int = 0, score_index: int = 1):
    """(valid count (B,) int32, the valid boxes moved to the top in their order (B, N, E), their
    anchor indices (B, N) int32), the rows past the count filled with -1. A box is valid when
    its score passes ``score_threshold`` and (``id_index`` >= 0) its class id is not negative.

    TVM writes this as a sequential loop; here each box's slot is the number of valid boxes
    before it (a reduction), and slot ``j`` gathers the one box whose slot it is (a masked sum):
    quadratic in the number of anchors, but plain static loops without data-dependent indexing."""
    batch, anchors, length = data.shape
    dtype = data.dtype
    m = te.reduce_axis((0, anchors), name="m")
    k = te.reduce_axis((0, anchors), name="k")
    c = te.reduce_axis((0, anchors), name="c")
    p = te.reduce_axis((0, anchors), name="p")
    zero, one = tir.IntImm("int32", 0), tir.IntImm("int32", 1)

    def is_valid(b, n):
        ok = data[b, n, _i64(score_index)] > tir.const(float(score_threshold), dtype)
        if id_index >= 0:
            ok = te.all(ok, data[b, n, _i64(id_index)] >= tir.const(0.0, dtype))
        return te.if_then_else(ok, one, zero)

    valid = te.compute([batch, anchors], is_valid, name="valid")
    count = te.compute([batch], lambda b: te.sum(valid[b, c], axis=c), name="valid_count")
    slot = te.compute([batch, anchors], lambda b, n: te.sum(te.if_then_else(m < n, valid[b, m], zero), axis=m),
                      name="slot")

    def lands_at(b, n, j):
        """Whether box ``n`` moves to slot ``j``."""
        return te.all(tir.EQ("bool", valid[b, n], one), tir.EQ("bool", slot[b, n], te.cast(j, "int32")))

    found = te.compute([batch, anchors], lambda b, j: te.sum(
        te.if_then_else(lands_at(b, k, j), te.cast(k, "int32"), zero), axis=k), name="source")
    picked = te.compute([batch, anchors, length], lambda b, j, e: te.sum(
        te.if_then_else(lands_at(b, p, j), data[b, p, e], tir.const(0.0, dtype)), axis=p), name="picked")
    kept = lambda b, j: te.cast(j, "int32") < count[b]  # noqa: E731
    indices = te.compute([batch, anchors], lambda b, j: te.if_then_else(kept(b, j), found[b, j],
                                                                        tir.IntImm("int32", -1)), name="out_indices")
    moved = te.compute([batch, anchors, length], lambda b, j, e: te.if_then_else(kept(b, j), picked[b, j, e],
                                                                                 tir.const(-1.0, dtype)),
                       name="out_tensor")
    return count, moved, indices
