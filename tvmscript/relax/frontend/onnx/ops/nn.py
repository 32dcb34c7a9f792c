"""Neural-network ops: MatMul, Gemm, Einsum, Conv, ConvTranspose, pooling, normalizations,
Softmax, Dropout, Pad.

Convolution and pooling take NCW / NCHW data (ONNX's layout); a 1-D pool runs as a 2-D one
over a unit height. ``auto_pad`` (SAME_UPPER, SAME_LOWER, VALID) is turned into explicit pads
from the static spatial sizes, as ONNX defines it.
"""

from __future__ import annotations

import numpy as np

from ..... import relax
from .....ir.op import api as op
from .....ir.op import shape_arith
from ..registry import converter
from .common import normalize_axis, scalar

# ----------------------------------------------------------------------------- matrix products


@converter("MatMul")
def matmul(ctx):
    return op.matmul(ctx.tensor(0), ctx.tensor(1))


@converter("Gemm")
def gemm(ctx):
    """``alpha * A' @ B' + beta * C`` with ``A'``/``B'`` transposed when transA/transB say so."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = ctx.dtype(0)
    if ctx.attr("transA", 0):
        a = ctx.emit(op.permute_dims(a, [1, 0]))
    if ctx.attr("transB", 0):
        b = ctx.emit(op.permute_dims(b, [1, 0]))
    out = ctx.emit(op.matmul(a, b))
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if alpha != 1.0:
        out = ctx.emit(op.multiply(out, scalar(alpha, dtype)))
    if ctx.has(2) and beta != 0.0:
        c = ctx.tensor(2)
        if beta != 1.0:
            c = ctx.emit(op.multiply(c, scalar(beta, dtype)))
        out = ctx.emit(op.add(out, c))
    return out


@converter("Einsum")
def einsum(ctx):
    operands = [ctx.tensor(i) for i in range(ctx.num_inputs)]
    return op.einsum(operands, ctx.attr("equation").replace(" ", ""))


# ----------------------------------------------------------------------------- convolution, pooling


def _spatial_pads(ctx, sizes: list, kernel: list, strides: list, dilations: list) -> list:
    """ONNX ``pads`` (``[begin..., end...]``), from ``auto_pad`` when it is set."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    n = len(kernel)
    if auto_pad in ("NOTSET", ""):
        return list(ctx.attr("pads", [0] * (2 * n)))
    if auto_pad == "VALID":
        return [0] * (2 * n)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad {auto_pad!r}")
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        size = shape_arith.as_int(size)
        if size is None:
            raise ctx.error(f"auto_pad={auto_pad} needs static spatial sizes")
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def _conv_window(ctx) -> tuple:
    """(kernel, strides, dilations) of a Conv/ConvTranspose node, defaults filled in."""
    kernel = list(ctx.attr("kernel_shape", [shape_arith.as_int(d) for d in ctx.shape(1)[2:]]))
    n = len(kernel)
    return kernel, list(ctx.attr("strides", [1] * n)), list(ctx.attr("dilations", [1] * n))


def _with_channel_bias(ctx, out, n: int):
    """``out`` plus the node's optional third input, a per-channel bias, over `n` spatial axes."""
    if not ctx.has(2):
        return out
    return ctx.emit(op.add(out, ctx.emit(op.reshape(ctx.tensor(2), [-1] + [1] * n))))


@converter("Conv")
def conv(ctx):
    x, w = ctx.tensor(0), ctx.tensor(1)
    ndim = ctx.ndim(0)
    kernel, strides, dilations = _conv_window(ctx)
    n = len(kernel)
    pads = _spatial_pads(ctx, ctx.shape(0)[2:], kernel, strides, dilations)
    groups = ctx.attr("group", 1)
    if ndim == 3:
        out = ctx.emit(op.nn.conv1d(x, w, strides=strides, padding=pads, dilation=dilations, groups=groups))
    elif ndim == 4:
        out = ctx.emit(op.nn.conv2d(x, w, strides=strides, padding=pads, dilation=dilations, groups=groups))
    else:
        raise ctx.error(f"only 1-D and 2-D convolutions are supported, not {ndim - 2}-D")
    return _with_channel_bias(ctx, out, n)


@converter("ConvTranspose")
def conv_transpose(ctx):
    """The weight is ``(C_in, C_out / group, k...)`` (IOHW). ``output_shape``, when given,
    decides the pads (and ``auto_pad`` SAME_* asks for ``input * stride``), as ONNX defines."""
    x, w = ctx.tensor(0), ctx.tensor(1)
    ndim = ctx.ndim(0)
    kernel, strides, dilations = _conv_window(ctx)
    n = len(kernel)
    output_padding = list(ctx.attr("output_padding", [0] * n))
    pads = _transpose_pads(ctx, kernel, strides, dilations, output_padding)
    kwargs = dict(strides=strides, padding=pads, output_padding=output_padding, dilation=dilations,
                  groups=ctx.attr("group", 1))
    if ndim == 3:
        out = ctx.emit(op.nn.conv1d_transpose(x, w, **kwargs))
    elif ndim == 4:
        out = ctx.emit(op.nn.conv2d_transpose(x, w, **kwargs))
    else:
        raise ctx.error(f"only 1-D and 2-D transposed convolutions are supported, not {ndim - 2}-D")
    return _with_channel_bias(ctx, out, n)


def _transpose_pads(ctx, kernel, strides, dilations, output_padding) -> list:
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    n = len(kernel)
    output_shape = ctx.attr("output_shape")
    if output_shape is None and auto_pad in ("NOTSET", ""):
        return list(ctx.attr("pads", [0] * (2 * n)))
    if output_shape is None and auto_pad == "VALID":
        return [0] * (2 * n)
    sizes = [shape_arith.as_int(d) for d in ctx.shape(0)[2:]]
    if None in sizes:
        raise ctx.error("output_shape / auto_pad need static spatial sizes")
    if output_shape is None:
        output_shape = [size * s for size, s in zip(sizes, strides)]
    begins, ends = [], []
    for size, k, s, d, p, out in zip(sizes, kernel, strides, dilations, output_padding, output_shape[-n:]):
        total = s * (size - 1) + p + (k - 1) * d + 1 - out
        if total < 0:
            raise ctx.error(f"output_shape {list(output_shape)} is larger than the convolution can produce")
        small, big = total // 2, total - total // 2
        upper = auto_pad == "SAME_UPPER"
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


def _pool(ctx, kind: str):
    if ctx.output_used(1):
        raise ctx.error("the Indices output of MaxPool is not supported")
    x = ctx.tensor(0)
    ndim = ctx.ndim(0)
    kernel = list(ctx.attr("kernel_shape"))
    n = len(kernel)
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    pads = _spatial_pads(ctx, ctx.shape(0)[2:], kernel, strides, dilations)
    if ndim == 3:  # 1-D: a 2-D pool over a unit height
        x = ctx.emit(op.expand_dims(x, [2]))
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        pads = [0, pads[0], 0, pads[1]]
    elif ndim != 4:
        raise ctx.error(f"only 1-D and 2-D pooling is supported, not {ndim - 2}-D")
    pool = op.nn.max_pool2d if kind == "max" else op.nn.avg_pool2d
    out = ctx.emit(pool(x, pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                        ceil_mode=bool(ctx.attr("ceil_mode", 0)),
                        count_include_pad=bool(ctx.attr("count_include_pad", 0))))
    if ndim == 3:
        out = ctx.emit(op.squeeze(out, [2]))
    return out


@converter("MaxPool")
def max_pool(ctx):
    if ctx.attr("storage_order", 0):
        raise ctx.error("storage_order=1 is not supported")
    return _pool(ctx, "max")


@converter("AveragePool")
def average_pool(ctx):
    return _pool(ctx, "avg")


@converter("GlobalAveragePool")
def global_average_pool(ctx):
    return op.mean(ctx.tensor(0), list(range(2, ctx.ndim(0))), keepdims=True)


@converter("GlobalMaxPool")
def global_max_pool(ctx):
    return op.max(ctx.tensor(0), list(range(2, ctx.ndim(0))), keepdims=True)


@converter("Pad")
def pad(ctx):
    """Pad-13 and later: ``pads`` (``[begin..., end...]``), the optional ``constant_value`` and
    (Pad-18) ``axes`` are inputs."""
    ndim = ctx.ndim(0)
    pads = ctx.static_ints(1, "pads")
    axes = ([normalize_axis(ctx, a, ndim) for a in ctx.static_ints(3, "axes")] if ctx.has(3)
            else list(range(ndim)))
    if any(p < 0 for p in pads):
        raise ctx.error(f"negative pads {pads} (cropping) are not supported")
    width = [0] * (2 * ndim)
    for k, a in enumerate(axes):
        width[2 * a], width[2 * a + 1] = pads[k], pads[k + len(axes)]
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise ctx.error(f"mode {mode!r} is not supported (constant, reflect, edge are)")
    value = 0.0
    if ctx.has(2):
        constant = ctx.const(2)
        if constant is None:
            raise ctx.error("the constant_value must be known when the model is imported")
        value = constant.item()
    return op.nn.pad(ctx.tensor(0), width, pad_value=value, pad_mode=mode)


# ----------------------------------------------------------------------------- normalization


@converter("BatchNormalization")
def batch_norm(ctx):
    if ctx.attr("training_mode", 0) or ctx.output_used(1):
        raise ctx.error("training mode (running statistics as outputs) is not supported")
    out = ctx.emit(op.nn.batch_norm(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), ctx.tensor(3), ctx.tensor(4),
                                    axis=1, epsilon=ctx.attr("epsilon", 1e-5), training=False))
    return relax.TupleGetItem(out, 0)


def _zeros_like(ctx, i: int):
    """Zeros with input `i`'s shape and dtype: a constant when the shape is static."""
    dims = [shape_arith.as_int(d) for d in ctx.shape(i)]
    if None not in dims:
        return relax.const(np.zeros(dims), ctx.dtype(i))
    return ctx.emit(op.zeros_like(ctx.tensor(i)))


@converter("LayerNormalization", since=17)
def layer_norm(ctx):
    if ctx.output_used(1) or ctx.output_used(2):
        raise ctx.error("the Mean and InvStdDev outputs are not supported")
    ndim = ctx.ndim(0)
    axis = normalize_axis(ctx, ctx.attr("axis", -1), ndim)
    beta = ctx.tensor(2) if ctx.has(2) else _zeros_like(ctx, 1)
    return op.nn.layer_norm(ctx.tensor(0), ctx.tensor(1), beta, axes=list(range(axis, ndim)),
                            epsilon=ctx.attr("epsilon", 1e-5))


@converter("InstanceNormalization")
def instance_norm(ctx):
    """Each channel of each sample normalized over its spatial axes: a group norm with one
    channel per group."""
    channels = ctx.shape(0)[1]
    groups = shape_arith.as_int(channels)
    if groups is None:
        raise ctx.error("needs a static channel count")
    return op.nn.group_norm(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), num_groups=groups,
                            channel_axis=1, axes=list(range(2, ctx.ndim(0))), epsilon=ctx.attr("epsilon", 1e-5))


@converter("GroupNormalization", since=21)
def group_norm(ctx):
    """GroupNormalization-21: one scale and bias per channel (version 18, one per group, is
    deprecated: ``onnx.checker`` refuses it)."""
    return op.nn.group_norm(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), num_groups=ctx.attr("num_groups"),
                            channel_axis=1, axes=list(range(2, ctx.ndim(0))), epsilon=ctx.attr("epsilon", 1e-5))


@converter("Softmax", since=13)
def softmax(ctx):
    return op.nn.softmax(ctx.tensor(0), axis=ctx.attr("axis", -1))


@converter("LogSoftmax", since=13)
def log_softmax(ctx):
    return op.nn.log_softmax(ctx.tensor(0), axis=ctx.attr("axis", -1))


@converter("Dropout")
def dropout(ctx):
    """Inference: the identity. A ``training_mode`` input that is true is refused."""
    if ctx.has(2):
        training = ctx.const(2)
        if training is None or bool(training):
            raise ctx.error("training_mode must be a constant false")
    if ctx.output_used(1):
        raise ctx.error("the mask output is not supported")
    return ctx.tensor(0)
