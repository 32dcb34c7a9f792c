"""Padding and convolution: ``PadInput``/``ReflectPadInput``/``EdgePadInput``; ``pad_temp``
+ ``conv2d_nchw``/``group_conv2d_nchw`` (loops ``nn, ff, yy, xx, rc, ry, rx``), ``PaddedInput``
+ ``Conv2dOutput`` in NHWC (``conv2d_nhwc``, loops ``nn, yy, xx, ff, ry, rx, rc``),
``conv1d_ncw``/``group_conv1d_ncw``, ``conv3d_ncdhw`` (loops ``nn, ff, zz, yy, xx, rc, rz, ry,
rx``), and the transposed convolutions. Index arithmetic with a constant 1 (unit stride or
dilation, one channel per group) is folded as TVM's simplifier would, so the printed indices
are the same.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import (add_int, conv_out_dim, conv_transpose_out_dim, floordiv_dim, mul_dim,
                                       plain_dim, static_int)

from ... import te
from .._util import compute
from .layout import in_layouts


# ----------------------------------------------------------------------------- padding


def pad(data: te.Tensor, pad_before, pad_after=None, pad_value=0.0, name: str = "PadInput",
        prefix: str = "i") -> te.Tensor:
    """``data`` surrounded by ``pad_value``. With ``prefix="i"`` this is TVM's Python
    ``topi.nn.pad`` (loops ``i0..``; a padded dimension is guarded on both sides,
    ``0 <= i2 and i2 < 5``); with ``prefix="ax"`` the C++ pad the pooling operators use
    (loops ``ax0..``; only the padded sides are guarded)."""
    n = len(data.shape)
    pad_after = list(pad_before) if pad_after is None else list(pad_after)
    shape = _padded_shape(data, pad_before, pad_after)
    value = pad_value if isinstance(pad_value, tir.PrimExpr) else tir.const(
        pad_value if tir.is_float(data.dtype) else int(pad_value), data.dtype)

    def f(idx):
        conds, src = [], []
        for i in range(n):
            b, a = pad_before[i], pad_after[i]
            both = prefix == "i" and (a or b)
            if b or both:
                conds.append(tir.IntImm(idx[i].dtype, b) <= idx[i])
            if a or both:
                conds.append(idx[i] < add_int(plain_dim(data.shape[i]), b))
            src.append(add_int(idx[i], -b))
        load = data[tuple(src)]
        return te.if_then_else(te.all(*conds), load, value) if conds else load

    return compute(shape, f, name=name, prefix=prefix)


def _padded_shape(data: te.Tensor, pad_before, pad_after) -> list:
    return [add_int(plain_dim(d), b + a) for d, b, a in zip(data.shape, pad_before, pad_after)]


def _reflect_index(i, before: int, size):
    """The source index of output ``i`` reflected at both borders (the border element is not
    repeated: NumPy's and PyTorch's "reflect"): ``t = |i - before|``, then
    ``last - |last - t|`` with ``last = size - 1``, written with Selects as TVM's
    ``topi.nn.mirror_pad`` does."""
    dtype = i.dtype
    b = tir.IntImm(dtype, before)
    t = tir.Select(dtype, b <= i, add_int(i, -before), b - i) if before else i
    last = add_int(plain_dim(size), -1)
    return last - tir.Select(dtype, t <= last, last - t, t - last)


def reflect_pad(data: te.Tensor, pad_before, pad_after, name: str = "ReflectPadInput") -> te.Tensor:
    """``data`` padded by reflection at each border (``numpy.pad(mode="reflect")``; each pad
    must be smaller than its dimension), loops ``i0..`` as TVM's ``reflect_pad``."""
    def f(idx):
        src = [_reflect_index(i, b, d) if (b or a) else i
               for i, b, a, d in zip(idx, pad_before, pad_after, data.shape)]
        return data[tuple(src)]

    return compute(_padded_shape(data, pad_before, pad_after), f, name=name, prefix="i")


def edge_pad(data: te.Tensor, pad_before, pad_after, name: str = "EdgePadInput") -> te.Tensor:
    """``data`` padded by repeating its border elements (``numpy.pad(mode="edge")``, PyTorch's
    "replicate"): the source index is clamped to ``[0, size - 1]``."""
    def f(idx):
        src = []
        for i, b, a, d in zip(idx, pad_before, pad_after, data.shape):
            j = add_int(i, -b)
            if b:
                j = te.max(j, tir.IntImm(i.dtype, 0))
            if a:
                j = te.min(j, add_int(plain_dim(d), -1))
            src.append(j)
        return data[tuple(src)]

    return compute(_padded_shape(data, pad_before, pad_after), f, name=name, prefix="i")


# ----------------------------------------------------------------------------- convolution


def _conv_output(data, kernel, stride, padding, dilation) -> list:
    """The output extent of each spatial dimension; ``padding`` holds the pads before each
    spatial dimension, then the pads after (``[top, left, bottom, right]`` in 2-D)."""
    nsp = len(data.shape) - 2
    return [conv_out_dim(data.shape[2 + a], static_int(kernel.shape[2 + a]), stride[a], dilation[a], padding[a],
                         padding[nsp + a]) for a in range(nsp)]


def _window_index(out, stride: int, tap, dilation: int):
    """``out * stride + tap * dilation``, in the term order TVM's simplifier prints
    (``yy + ry``, ``yy * 2 + ry``, ``ry * 2 + yy``)."""
    if stride == 1 and dilation != 1:
        return mul_dim(tap, dilation) + out
    return mul_dim(out, stride) + mul_dim(tap, dilation)


# TVM's loop names of the output's spatial dimensions and of the kernel's taps, by rank.
_SPATIAL = {1: ("yy",), 2: ("yy", "xx"), 3: ("zz", "yy", "xx")}
_TAPS = {1: ("ry",), 2: ("ry", "rx"), 3: ("rz", "ry", "rx")}


def _conv(data, kernel, stride, padding, dilation, groups, out_dtype, name):
    """An N-C-spatial convolution (1-D or 2-D) against an O-I-spatial kernel: ``pad_temp``,
    then the product summed over the group's input channels ``rc`` and the taps."""
    nsp = len(data.shape) - 2
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    pad_temp = pad(data, [0, 0] + list(padding[:nsp]), [0, 0] + list(padding[nsp:]), name="pad_temp")
    out_sizes = _conv_output(data, kernel, stride, padding, dilation)
    out_c, in_per_group = kernel.shape[:2]
    rc = te.reduce_axis((0, in_per_group), name="rc")
    taps = [te.reduce_axis((0, kernel.shape[2 + a]), name=_TAPS[nsp][a]) for a in range(nsp)]
    out_per_group = floordiv_dim(plain_dim(out_c), groups)

    def channel(ff):
        if groups == 1:
            return rc
        return mul_dim(floordiv_dim(ff, out_per_group), plain_dim(in_per_group)) + rc

    def f(nn, ff, *out):
        window = [_window_index(out[a], stride[a], taps[a], dilation[a]) for a in range(nsp)]
        a = te.cast(pad_temp[(nn, channel(ff), *window)], dtype)
        b = te.cast(kernel[(ff, rc, *taps)], dtype)
        return te.sum(a * b, axis=[rc] + taps)

    return te.compute([data.shape[0], out_c] + out_sizes, lambda *i: f(*i), name=name,
                      varargs_names=["nn", "ff", *_SPATIAL[nsp]])


def conv1d_ncw(data, kernel, stride=(1,), padding=(0, 0), dilation=(1,), out_dtype=None):
    """``conv1d_ncw``: NCW data, OIW kernel, padding (left, right)."""
    return _conv(data, kernel, stride, padding, dilation, 1, out_dtype, "conv1d_ncw")


def group_conv1d_ncw(data, kernel, stride=(1,), padding=(0, 0), dilation=(1,), groups=1, out_dtype=None):
    """``group_conv1d_ncw``: output channel ``f`` reads input channels
    ``f // (O / groups) * (I / groups) + rc``."""
    return _conv(data, kernel, stride, padding, dilation, groups, out_dtype, "group_conv1d_ncw")


def conv1d(data, weight, strides=(1,), padding=(0, 0), dilation=(1,), groups=1, data_layout="NCW",
           kernel_layout="OIW", out_layout="NCW", out_dtype="void"):
    """Relax's ``nn.conv1d`` legalization: ``conv1d_ncw`` for one group, else
    ``group_conv1d_ncw`` (as TVM's), on operands in any layout (`in_layouts`)."""
    def conv(x, w):
        if groups == 1:
            return conv1d_ncw(x, w, strides, padding, dilation, out_dtype)
        return group_conv1d_ncw(x, w, strides, padding, dilation, groups, out_dtype)
    return in_layouts(conv, data, weight, (data_layout, kernel_layout, out_layout or data_layout), ("NCW", "OIW"))


def conv2d_nchw(data, kernel, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), out_dtype=None):
    """``conv2d_nchw``: NCHW data, OIHW kernel, padding (top, left, bottom, right)."""
    return _conv(data, kernel, stride, padding, dilation, 1, out_dtype, "conv2d_nchw")


def group_conv2d_nchw(data, kernel, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,
                      out_dtype=None):
    """``group_conv2d_nchw``: output channel ``f`` reads input channels
    ``f // (O / groups) * (I / groups) + rc`` (depthwise when each group has one channel)."""
    return _conv(data, kernel, stride, padding, dilation, groups, out_dtype, "group_conv2d_nchw")


def _nhwc_window(data, kernel, stride, padding, dilation, kernel_layout: str) -> tuple:
    """What the NHWC convolutions share: the output's height and width, the window's reduce
    axes ``ry`` and ``rx``, and ``tap(nn, yy, xx, c)``, the element of the padded input
    (``PaddedInput``) that tap ``(ry, rx)`` of output ``(yy, xx)`` reads in channel ``c``."""
    padded = pad(data, [0, padding[0], padding[1], 0], [0, padding[2], padding[3], 0], name="PaddedInput")
    kh, kw = (kernel.shape[kernel_layout.index(a)] for a in "HW")
    out_h = conv_out_dim(data.shape[1], static_int(kh), stride[0], dilation[0], padding[0], padding[2])
    out_w = conv_out_dim(data.shape[2], static_int(kw), stride[1], dilation[1], padding[1], padding[3])
    ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")

    def tap(nn, yy, xx, c):
        return padded[nn, _window_index(yy, stride[0], ry, dilation[0]),
                      _window_index(xx, stride[1], rx, dilation[1]), c]

    return out_h, out_w, ry, rx, tap


def conv2d_nhwc(data, kernel, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), out_dtype=None,
                kernel_layout: str = "HWIO"):
    """``conv2d_nhwc``: NHWC data, an ``HWIO`` or ``OHWI`` kernel, padding (top, left, bottom,
    right); ``PaddedInput``, then ``Conv2dOutput`` (loops ``nn, yy, xx, ff, ry, rx, rc``), as
    TVM's. The operands are indexed in place: the output and the padded input are contiguous
    along the channels, which the CPU schedule's register tile vectorizes (its stores are whole
    vectors, where an NCHW output takes one store per pixel and channel)."""
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    out_h, out_w, ry, rx, tap = _nhwc_window(data, kernel, stride, padding, dilation, kernel_layout)
    rc = te.reduce_axis((0, kernel.shape[kernel_layout.index("I")]), name="rc")

    def weight(ff):
        at = {"H": ry, "W": rx, "I": rc, "O": ff}
        return kernel[tuple(at[a] for a in kernel_layout)]

    def f(nn, yy, xx, ff):
        return te.sum(te.cast(tap(nn, yy, xx, rc), dtype) * te.cast(weight(ff), dtype), axis=[ry, rx, rc])

    out_c = kernel.shape[kernel_layout.index("O")]
    return te.compute([data.shape[0], out_h, out_w, out_c], lambda *i: f(*i), name="Conv2dOutput",
                      varargs_names=["nn", "yy", "xx", "ff"])


def depthwise_conv2d_nhwc(data, kernel, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), out_dtype=None,
                          kernel_layout: str = "HWIO"):
    """``depthwise_conv2d_nhwc``: NHWC data and one filter per channel (a grouped convolution
    with as many groups as channels, one output channel each), its kernel ``HWIO`` (``I`` of
    one) or ``HWOI``; ``PaddedInput``, then ``DepthwiseConv2d`` (loops ``nn, yy, xx, c, ry,
    rx``), as TVM's. Output channel ``c`` reads input channel ``c`` only, so the channels stay
    the innermost, contiguous dimension of every operand: the CPU's register tile vectorizes
    them, rows of pixels by vectors of channels, where in NCHW each channel's plane is a small
    problem of its own (its padding guards are partitioned away from the interior by
    `compiler.loop_partition`)."""
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    out_h, out_w, ry, rx, tap = _nhwc_window(data, kernel, stride, padding, dilation, kernel_layout)
    zero = tir.IntImm("int64", 0)

    def f(nn, yy, xx, c):
        at = {"H": ry, "W": rx, "I": zero, "O": c}
        return te.sum(te.cast(tap(nn, yy, xx, c), dtype) * te.cast(kernel[tuple(at[k] for k in kernel_layout)], dtype),
                      axis=[ry, rx])

    return te.compute([data.shape[0], out_h, out_w, data.shape[3]], lambda *i: f(*i), name="DepthwiseConv2d",
                      varargs_names=["nn", "yy", "xx", "c"])


def _is_depthwise_nhwc(data, weight, groups, kernel_layout) -> bool:
    """One filter per channel: ``groups`` equal to the input's channels and to the kernel's
    output channels (a channel multiplier of one), the kernel's input-channel axis one."""
    if kernel_layout not in DEPTHWISE_NHWC_KERNELS:
        return False
    channels = static_int(data.shape[3])
    return (channels is not None and groups == channels and groups > 1
            and static_int(weight.shape[kernel_layout.index("O")]) == channels
            and static_int(weight.shape[kernel_layout.index("I")]) == 1)


# The kernel layouts `conv2d_nhwc` reads in place (TVM's NHWC convolutions take these two),
# and those `depthwise_conv2d_nhwc` does (TVM's NHWC depthwise convolutions take HWOI).
NHWC_KERNELS = ("HWIO", "OHWI")
DEPTHWISE_NHWC_KERNELS = ("HWIO", "HWOI", "OHWI")


def conv2d(data, weight, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, data_layout="NCHW",
           kernel_layout="OIHW", out_layout="NCHW", out_dtype="void"):
    """Relax's ``nn.conv2d`` legalization: ``conv2d_nchw`` for one group, else
    ``group_conv2d_nchw`` (as TVM's), on operands in any layout (`in_layouts`). One group in
    NHWC with an ``HWIO`` or ``OHWI`` kernel is `conv2d_nhwc`, indexing the operands in place
    as TVM's NHWC kernels do; so is a depthwise one (`depthwise_conv2d_nhwc`)."""
    if groups == 1 and data_layout == "NHWC" and (out_layout or data_layout) == "NHWC" \
            and kernel_layout in NHWC_KERNELS:
        return conv2d_nhwc(data, weight, strides, padding, dilation, out_dtype, kernel_layout)
    if data_layout == "NHWC" and (out_layout or data_layout) == "NHWC" \
            and _is_depthwise_nhwc(data, weight, groups, kernel_layout):
        return depthwise_conv2d_nhwc(data, weight, strides, padding, dilation, out_dtype, kernel_layout)

    def conv(x, w):
        if groups == 1:
            return conv2d_nchw(x, w, strides, padding, dilation, out_dtype)
        return group_conv2d_nchw(x, w, strides, padding, dilation, groups, out_dtype)
    return in_layouts(conv, data, weight, (data_layout, kernel_layout, out_layout or data_layout), ("NCHW", "OIHW"))


def conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0, 0, 0, 0), dilation=(1, 1, 1), groups=1,
           data_layout="NCDHW", kernel_layout="OIDHW", out_layout="NCDHW", out_dtype="void"):
    """Relax's ``nn.conv3d`` legalization: ``conv3d_ncdhw`` for one group, else
    ``group_conv3d_ncdhw`` (loops ``nn, ff, zz, yy, xx, rc, rz, ry, rx``), on operands in any
    layout (`in_layouts`). ``padding`` is (front, top, left, back, bottom, right)."""
    name = "conv3d_ncdhw" if groups == 1 else "group_conv3d_ncdhw"
    return in_layouts(lambda x, w: _conv(x, w, strides, padding, dilation, groups, out_dtype, name), data, weight,
                      (data_layout, kernel_layout, out_layout or data_layout), ("NCDHW", "OIDHW"))


def _dilate(data: te.Tensor, strides, name: str) -> te.Tensor:
    """``data`` with ``stride - 1`` zeros between neighbours along each spatial axis (TVM's
    ``data_dilate``: loops ``i0..``); ``data`` itself when every stride is 1."""
    nsp = len(strides)
    if all(s == 1 for s in strides):
        return data
    shape = list(data.shape[:2]) + [conv_transpose_out_dim(d, 1, s, 1, 0, 0, 0)
                                    for d, s in zip(data.shape[2:], strides)]

    def f(idx):
        conds, src = [], list(idx[:2])
        for a in range(nsp):
            i, s = idx[2 + a], strides[a]
            if s == 1:
                src.append(i)
                continue
            conds.append(tir.EQ("bool", tir._binary(tir.FloorMod, i, tir.IntImm(i.dtype, s)), tir.IntImm(i.dtype, 0)))
            src.append(floordiv_dim(i, s))
        return te.if_then_else(te.all(*conds), data[tuple(src)], tir.const(0, data.dtype))

    return compute(shape, f, name=name, prefix="i")


_TRANSPOSE_LOOPS = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}


def conv_transpose(data: te.Tensor, weight: te.Tensor, strides, padding, output_padding, dilation, groups: int = 1,
                   out_dtype=None) -> te.Tensor:
    """A transposed convolution of N-C-spatial ``data`` (1-D or 2-D) with an I-O-spatial
    ``weight`` (``(C_in, C_out / groups, k...)``), as TVM's ``topi.nn.conv2d_transpose_nchw``:
    the data dilated by the strides (``data_dilate``) and padded by ``dilation * (k - 1) -
    pad`` (plus ``output_padding`` at the end: ``data_pad``), then a stride-1 convolution with
    the kernel flipped and its in/out axes swapped (``kernel_transform``; ``kernel`` in 1-D, as
    TVM names them), summed over the group's input channels ``dc`` and the taps (``compute``,
    loops ``b, c, h, w, dc, dh, dw``). A dilated kernel is read with strided taps where TVM
    first builds a dilated copy with zeros (``kernel_dilate``); the sums are the same."""
    nsp = len(data.shape) - 2
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    kernel = [static_int(k) for k in weight.shape[2:]]
    dilated = _dilate(data, strides, "data_dilate")
    before = [dilation[a] * (kernel[a] - 1) - padding[a] for a in range(nsp)]
    after = [dilation[a] * (kernel[a] - 1) - padding[nsp + a] + output_padding[a] for a in range(nsp)]
    padded = pad(dilated, [0, 0] + before, [0, 0] + after, name="data_pad")
    in_c, out_per_group = weight.shape[:2]
    in_per_group = floordiv_dim(plain_dim(in_c), groups)
    names = _TRANSPOSE_LOOPS[nsp]

    def flip(o, i, *sp):
        return weight[(i, o) + tuple(tir.IntImm(t.dtype, k - 1) - t for t, k in zip(sp, kernel))]

    flipped = te.compute([out_per_group, in_c] + list(weight.shape[2:]), flip,
                         name="kernel" if nsp == 1 else "kernel_transform", varargs_names=["o", "i", *names])
    dc = te.reduce_axis((0, in_per_group), name="dc")
    taps = [te.reduce_axis((0, weight.shape[2 + a]), name=f"d{names[a]}") for a in range(nsp)]
    out_shape = [data.shape[0], mul_dim(plain_dim(out_per_group), groups)] + [
        conv_transpose_out_dim(data.shape[2 + a], kernel[a], strides[a], dilation[a], padding[a], padding[nsp + a],
                               output_padding[a]) for a in range(nsp)]

    def f(b, c, *sp):
        group = floordiv_dim(c, plain_dim(out_per_group))
        channel = mul_dim(group, in_per_group) + dc if groups != 1 else dc
        oc = tir._binary(tir.FloorMod, c, plain_dim(out_per_group)) if groups != 1 else c
        window = [_window_index(sp[a], 1, taps[a], dilation[a]) for a in range(nsp)]
        x = te.cast(padded[(b, channel, *window)], dtype)
        w = te.cast(flipped[(oc, channel, *taps)], dtype)
        return te.sum(x * w, axis=[dc] + taps)

    return te.compute(out_shape, f, name="compute", varargs_names=["b", "c", *names])


def _conv_transpose_in(primals: tuple):
    """Relax's ``nn.conv{1,2,3}d_transpose`` legalization for ``primals`` (data's and kernel's
    canonical layouts, ``("NCHW", "IOHW")``): `conv_transpose` on operands in any layout."""
    def legalize(data, weight, strides, padding, output_padding, dilation, groups=1, data_layout=None,
                 kernel_layout=None, out_layout=None, out_dtype="void"):
        layouts = (data_layout or primals[0], kernel_layout or primals[1], out_layout or data_layout or primals[0])
        return in_layouts(lambda x, w: conv_transpose(x, w, strides, padding, output_padding, dilation, groups,
                                                      out_dtype), data, weight, layouts, primals)
    legalize.__name__ = f"conv{len(primals[0]) - 2}d_transpose"
    return legalize


conv1d_transpose = _conv_transpose_in(("NCW", "IOW"))
conv2d_transpose = _conv_transpose_in(("NCHW", "IOHW"))
conv3d_transpose = _conv_transpose_in(("NCDHW", "IODHW"))
