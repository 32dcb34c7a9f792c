"""Pooling: ``pad_temp`` + ``pool_max`` or ``pool_sum``/``pool_avg`` (loops ``ax0.., rv0,
rv1``), 1-D and 2-D, and adaptive average pooling (whose variable-extent windows TVM builds
differently; the values are the same).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.arith.rewrite import tvm_simplify
from tvmscript.ir.op.nn_shapes import add_int, floordiv_dim, mul_dim, plain_dim, pool_out_dim, static_int

from ... import te
from .._util import compute, float_const
from .conv import _window_index, pad
from .layout import from_primal, to_primal


# ----------------------------------------------------------------------------- pooling


def pool(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
         count_include_pad: bool = False, spatial_axes=None) -> te.Tensor:
    """N-C-spatial max/avg pooling (1-D or 2-D) as TVM's ``topi.nn.pool1d``/``pool2d``:
    ``pad_temp`` (minimum value or zero; ceil mode pads ``stride - 1`` more at the end), then
    ``pool_max``, or ``pool_sum`` and ``pool_avg``. ``padding`` is the pads before each spatial
    axis, then those after. The average divides by the number of taps inside the input (inside
    the explicitly padded input with ``count_include_pad``), at least 1. ``spatial_axes``: where
    the pooled axes are in ``data`` (after N and C by default; ``NHWC`` data is pooled in place,
    as TVM's pooling reads any layout)."""
    nsp = len(data.shape) - 2
    axes = list(spatial_axes) if spatial_axes is not None else list(range(2, 2 + nsp))
    spatial = [data.shape[a] for a in axes]
    before_pads, after_pads = list(padding[:nsp]), list(padding[nsp:])
    out = []
    for a in range(nsp):
        o = pool_out_dim(spatial[a], pool_size[a], strides[a], dilation[a], before_pads[a], after_pads[a], ceil_mode)
        if o is None:
            raise ValueError(f"pool{nsp}d: the ceil-mode output extent of a symbolic input is not known")
        out.append(o)
    extra = [s - 1 if ceil_mode else 0 for s in strides]
    before, after = [0] * len(data.shape), [0] * len(data.shape)
    for a, axis in enumerate(axes):
        before[axis], after[axis] = before_pads[a], after_pads[a] + extra[a]
    if any(before) or any(after):
        value = te.min_value(data.dtype) if kind == "max" else tir.const(0, data.dtype)
        src = pad(data, before, after, value, name="pad_temp", prefix="ax")
    else:
        src = data
    taps = [te.reduce_axis((0, tir.IntImm(spatial[a].dtype, pool_size[a])), name=f"rv{a}") for a in range(nsp)]
    oshape = list(data.shape)
    for a, axis in enumerate(axes):
        oshape[axis] = out[a]

    def window(idx):
        at = list(idx)
        for a, axis in enumerate(axes):
            at[axis] = _window_index(idx[axis], strides[a], taps[a], dilation[a])
        return src[tuple(at)]

    if kind == "max":
        return compute(oshape, lambda idx: te.max(window(idx), axis=taps), name="pool_max",
                       attrs={"schedule_rule": "meta_schedule.pool_max"})
    total = compute(oshape, lambda idx: te.sum(window(idx), axis=taps), name="pool_sum")

    def avg(idx):
        count = avg_pool_divisor([idx[a] for a in axes], spatial, pool_size, strides, dilation, padding,
                                 count_include_pad)
        return total[tuple(idx)] / te.cast(count, data.dtype)

    return compute(oshape, avg, name="pool_avg", attrs={"schedule_rule": "meta_schedule.pool_avg"})


def avg_pool_divisor(out_idx, spatial, pool_size, strides, dilation, padding, count_include_pad: bool):
    """The divisor of average-pooling output ``out_idx`` (its spatial indices): the number of
    its taps inside the input (inside the explicitly padded input with ``count_include_pad``),
    at least 1. ``padding`` is the pads before each spatial axis, then those after.

    Built as TOPI builds it (the first and last tap in the input, per axis) and simplified as
    TVM simplifies it (`arith.rewrite.tvm_simplify`), so the legalized avg_pool prints TVM's
    expression, ``T.min(1, 7 - v) + 2 - T.max(1 - v, 0)`` for a 3-wide window padded by 1."""
    nsp = len(spatial)
    count = None
    for a in range(nsp):
        n = tvm_simplify(_topi_taps(out_idx[a], plain_dim(spatial[a]), pool_size[a], strides[a], dilation[a],
                                    padding[a], padding[nsp + a], count_include_pad))
        count = n if count is None else count * n
    # every tap of a window in the padded input is counted: at least one, no floor needed
    return count if count_include_pad else te.max(count, tir.IntImm(count.dtype, 1))


def _topi_taps(out, size, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int,
               count_include_pad: bool):
    """TOPI's count of the taps of window ``out`` along one axis: from its first tap in the
    input (or, with ``count_include_pad``, in the padded input) to its last, stepping by the
    dilation; constants folded as TVM's expression constructors fold them."""
    dt = out.dtype

    def c(v):
        return tir.IntImm(dt, v)

    start = out if stride == 1 else tir.Mul(dt, out, c(stride))
    if pad_before:
        start = tir.Sub(dt, start, c(pad_before))
    reach = (kernel - 1) * dilation
    end = tir.Add(dt, start, c(reach)) if reach else start
    if count_include_pad:
        end = te.min(end, add_int(size, pad_after - 1))
        first = start
    else:
        # the taps before the input: (dilation - 1 - start) // dilation of them, at least 0
        jumps = tir.Sub(dt, c(dilation - 1), start)
        if dilation != 1:
            jumps = tir.Div(dt, jumps, c(dilation))
        jumps = te.max(jumps, c(0))
        end = te.min(end, add_int(size, -1))
        first = tir.Add(dt, start, jumps if dilation == 1 else tir.Mul(dt, c(dilation), jumps))
    span = tir.Sub(dt, end, first)
    if dilation != 1:
        span = tir.Div(dt, span, c(dilation))
    return tir.Add(dt, span, c(1))


def pool2d(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
           count_include_pad: bool = False, layout: str = "NCHW", out_layout=None) -> te.Tensor:
    """2-D pooling (``padding`` is top, left, bottom, right): `pool` on two spatial axes, the
    data in ``layout`` (an unpacked one, ``NHWC``, pooled in place; a packed one, ``NCHW16c``,
    brought to NCHW first) and the result written in ``out_layout`` (the data's by default)."""
    axes = _in_place_axes(layout, out_layout, "HW")
    if axes is not None:
        return pool(data, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, axes)
    out = pool(to_primal(data, layout, "NCHW"), kind, pool_size, strides, dilation, padding, ceil_mode,
               count_include_pad)
    return from_primal(out, out_layout or layout, "NCHW")


def _in_place_axes(layout: str, out_layout, spatial: str):
    """Where the ``spatial`` axes are in ``layout`` when the pooling can read and write it in
    place (an unpacked layout, the output's the same), else None (brought to the primal layout
    and back: a packed ``NCHW16c``)."""
    if layout.isalpha() and layout.isupper() and (out_layout or layout) == layout:
        return [layout.index(a) for a in spatial]
    return None


def pool1d(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
           count_include_pad: bool = False, layout: str = "NCW", out_layout=None) -> te.Tensor:
    """1-D pooling (``padding`` is left, right): `pool` on one spatial axis, in any layout as
    `pool2d`."""
    axes = _in_place_axes(layout, out_layout, "W")
    if axes is not None:
        return pool(data, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, axes)
    out = pool(to_primal(data, layout, "NCW"), kind, pool_size, strides, dilation, padding, ceil_mode,
               count_include_pad)
    return from_primal(out, out_layout or layout, "NCW")


def _adaptive_window(i, size, out: int):
    """Window ``[floor(i * size / out), ceil((i + 1) * size / out))`` of output ``i``:
    (start, extent). Equal windows (``size`` a multiple of ``out``) fold to ``i * step``."""
    if _static_uniform(size, out):
        step = static_int(size) // out
        return mul_dim(i, step), tir.IntImm(i.dtype, step)
    size = plain_dim(size)
    start = floordiv_dim(i * size, out)
    end = floordiv_dim((i + 1) * size + (out - 1), out)
    return start, end - start


def _widest_window(size, out: int):
    """The largest window extent: exact for a static ``size``, else the bound
    ``ceil(size / out) + 1``."""
    s = static_int(size)
    if s is not None:
        return tir.IntImm(size.dtype, max(-(-(j + 1) * s // out) - (j * s // out) for j in range(out)))
    return add_int(floordiv_dim(add_int(plain_dim(size), out - 1), out), 1)


def _static_uniform(size, out: int) -> bool:
    s = static_int(size)
    return s is not None and s % out == 0


def adaptive_pool2d(data: te.Tensor, output_size, kind: str = "avg", layout: str = "NCHW",
                    out_layout=None) -> te.Tensor:
    """Adaptive average pooling of ``data`` in ``layout`` (an unpacked one pooled in place, a
    packed one brought to NCHW first), the result in ``out_layout`` (the data's by default);
    ``output_size`` None keeps the input's H, W."""
    if kind != "avg":
        raise ValueError("adaptive_pool2d: only average pooling is implemented")
    axes = _in_place_axes(layout, out_layout, "HW")
    if axes is not None:
        size = output_size if output_size is not None else [int(data.shape[a]) for a in axes]
        return _adaptive_avg_pool2d(data, size, axes)
    x = to_primal(data, layout, "NCHW")
    size = output_size if output_size is not None else [int(d) for d in x.shape[2:]]
    return from_primal(_adaptive_avg_pool2d(x, size, [2, 3]), out_layout or layout, "NCHW")


def _adaptive_avg_pool2d(data: te.Tensor, output_size, axes) -> te.Tensor:
    """Adaptive average pooling over the spatial ``axes`` of ``data`` (``[2, 3]`` in NCHW,
    ``[1, 2]`` in NHWC): output ``(i, j)`` averages the window
    ``[floor(i*H/oh), ceil((i+1)*H/oh)) x [floor(j*W/ow), ceil((j+1)*W/ow))`` (TVM's
    ``adaptive_pool_sum`` and ``adaptive_pool_avg``). The sum loops over the widest window and
    guards the taps beyond a narrower one, where TVM loops over each window's own extent."""
    ah, aw = axes
    h, w = data.shape[ah], data.shape[aw]
    oh, ow = (int(o) for o in output_size)
    out_shape = list(data.shape)
    out_shape[ah], out_shape[aw] = tir.IntImm(h.dtype, oh), tir.IntImm(w.dtype, ow)
    rv0 = te.reduce_axis((0, _widest_window(h, oh)), name="rv0")
    rv1 = te.reduce_axis((0, _widest_window(w, ow)), name="rv1")

    def summand(idx):
        sh, eh = _adaptive_window(idx[ah], h, oh)
        sw, ew = _adaptive_window(idx[aw], w, ow)
        at = list(idx)
        at[ah], at[aw] = sh + rv0, sw + rv1
        load = data[tuple(at)]
        conds = []
        if not _static_uniform(h, oh):
            conds.append(rv0 < eh)
        if not _static_uniform(w, ow):
            conds.append(rv1 < ew)
        value = te.if_then_else(te.all(*conds), load, tir.const(0, data.dtype)) if conds else load
        return te.sum(value, axis=[rv0, rv1])

    total = compute(out_shape, summand, name="adaptive_pool_sum")

    def avg(idx):
        eh = _adaptive_window(idx[ah], h, oh)[1]
        ew = _adaptive_window(idx[aw], w, ow)[1]
        if static_int(eh) is not None and static_int(ew) is not None:
            count = static_int(eh) * static_int(ew)
            return total[tuple(idx)] if count == 1 else total[tuple(idx)] / float_const(count, data.dtype)
        return total[tuple(idx)] / te.cast(eh * ew, data.dtype)

    return compute(out_shape, avg, name="adaptive_pool_avg",
                   attrs={"schedule_rule": "meta_schedule.adaptive_pool_avg"})
