"""Gradients of operators (TVM's ``topi`` gradient helpers): what the ``R.grad.*`` ops legalize
into.

Each backward is written as reductions over the forward's index space rather than as a
scatter, so every stage is a plain ``te.compute`` that TVM's analysis (and ours) can fuse and
schedule: the gradient of an input element sums the output gradients of the forward's outputs
that read it. Stage names follow TVM's (``all_weights``, ``pred_grad``, ``T_pool_grad``,
``take_backward``); TVM's take backward is an opaque scatter-add loop, its max-pool backward a
tuple (argmax, max) reduction, so those stages differ from TVM's but compute the same values.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import add_int, floordiv_dim, mul_dim, plain_dim, pool_out_dim
from tvmscript.ir.op.shape_arith import product, ravel

from .. import te
from ._util import compute
from .broadcast import broadcast_index
from .nn.conv import _window_index, pad
from .nn.pool import avg_pool_divisor

__all__ = ["nll_loss_backward", "take_backward", "max_pool2d_backward", "avg_pool2d_backward"]


# ----------------------------------------------------------------------------- nll_loss


def nll_loss_backward(output_grad: te.Tensor, predictions: te.Tensor, targets: te.Tensor, weights,
                      reduction: str = "mean", ignore_index: int = -100) -> te.Tensor:
    """The gradient of `topi.nn.nll_loss` with respect to its predictions: ``-w[t] * g`` at
    each target's class (0 elsewhere and for ignored targets), ``g`` the output gradient
    broadcast to the targets' shape, divided for ``mean`` by the summed weights of the kept
    targets (``all_weights_red``), as the forward divides. ``weights`` None weighs each class 1.

    TVM 0.27's legalization weighs ignored targets like the others; here they get no
    gradient, as PyTorch's, so this is the derivative of the forward that tvms computes."""
    dtype = predictions.dtype
    zero = tir.const(0, dtype)
    batched = len(predictions.shape) > 1
    tshape = list(targets.shape)

    def kept(idx):
        return tir.NE("bool", targets[tuple(idx)], tir.const(ignore_index, targets.dtype))

    def weight_at(idx):
        t = targets[tuple(idx)]
        w = weights[(t,)] if weights is not None else tir.const(1, dtype)
        return tir.Select(dtype, kept(idx), w, zero)

    all_weights = compute(tshape, weight_at, name="all_weights", prefix="i")
    scale = None
    if reduction == "mean":
        axes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(tshape)]
        scale = te.compute((), lambda: te.sum(all_weights[tuple(axes)], axis=axes) if axes else all_weights[()],
                           name="all_weights_red")

    def grad_at(idx):
        g = output_grad[tuple(broadcast_index(output_grad, tshape, idx))]
        return g / scale[()] if scale is not None else g

    def f(idx):
        tidx = [idx[0]] + list(idx[2:]) if batched else []
        c = idx[1] if batched else idx[0]
        t = targets[tuple(tidx)]
        hit = te.all(tir.EQ("bool", c, te.cast(t, c.dtype)), kept(tidx))
        return tir.Select(dtype, hit, all_weights[tuple(tidx)] * tir.const(-1.0, dtype) * grad_at(tidx), zero)

    return compute(predictions.shape, f, name="pred_grad", prefix="i")


# ----------------------------------------------------------------------------- take


def take_backward(output_grad: te.Tensor, x: te.Tensor, indices: te.Tensor, axis=None) -> te.Tensor:
    """The gradient of ``take(x, indices, axis)`` with respect to ``x``: each element sums the
    output gradients of the positions whose index names it (a repeated index adds up; a
    negative one counts from the end, as NumPy's). With ``axis`` None, ``x`` is read
    flattened: its element at flat position ``f`` sums ``output_grad[p]`` over the
    positions ``p`` of ``indices`` holding ``f``."""
    ishape = list(indices.shape)
    red = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(ishape)]
    xshape = list(x.shape)

    def named(position, extent):
        """The index at ``red``, wrapped if negative, as a ``position``-typed value."""
        raw = indices[tuple(red)]
        i = te.cast(raw, position.dtype)
        wrapped = tir.Select(position.dtype, raw < tir.const(0, raw.dtype), i + plain_dim(extent), i)
        return tir.EQ("bool", wrapped, position)

    def f(idx):
        if axis is None:
            hit, g = named(ravel(idx, xshape), product(xshape)), output_grad[tuple(red)]
        else:
            hit = named(idx[axis], xshape[axis])
            g = output_grad[tuple(idx[:axis]) + tuple(red) + tuple(idx[axis + 1:])]
        value = tir.Select(x.dtype, hit, g, tir.const(0, x.dtype))
        return te.sum(value, axis=red) if red else value

    return compute(xshape, f, name="take_backward")


# ----------------------------------------------------------------------------- pooling


def _covering(i, tap, stride: int, dilation: int, pad_before: int, out_extent):
    """For input index ``i`` and window tap ``tap``: (the output index whose window reads
    ``i`` at that tap, the condition that there is one): ``o * stride + tap * dilation ==
    i + pad_before`` with ``0 <= o < out_extent``."""
    start = add_int(i, pad_before) - mul_dim(tap, dilation)
    o = floordiv_dim(start, stride)
    conds = [tir.IntImm(i.dtype, 0) <= start, o < plain_dim(out_extent)]
    if stride != 1:
        conds.append(tir.EQ("bool", tir._binary(tir.FloorMod, start, tir.IntImm(i.dtype, stride)),
                            tir.IntImm(i.dtype, 0)))
    return o, conds


def _out_extents(data, pool_size, strides, dilation, padding, ceil_mode) -> list:
    nsp = len(data.shape) - 2
    return [pool_out_dim(data.shape[2 + a], pool_size[a], strides[a], dilation[a], padding[a], padding[nsp + a],
                         ceil_mode) for a in range(nsp)]


def max_pool2d_backward(output_grad: te.Tensor, data: te.Tensor, pool_size, strides, dilation, padding,
                        ceil_mode: bool = False) -> te.Tensor:
    """The gradient of NCHW max pooling with respect to its data: each window's output
    gradient goes to the first of its taps holding the maximum (PyTorch's and TVM's choice).
    Stages: ``pad_temp`` (the forward's padding, minimum value), ``maxpool_grad_max`` (each
    window's maximum), ``maxpool_grad_argmax`` (the first tap, row-major, holding it), then
    ``T_pool_grad``: for each input element the sum over the taps ``(wh, ww)`` of the
    windows that read it there and chose it."""
    nsp = 2
    out = _out_extents(data, pool_size, strides, dilation, padding, ceil_mode)
    extra = [s - 1 if ceil_mode else 0 for s in strides]
    after = [p + e for p, e in zip(padding[nsp:], extra)]
    padded = pad(data, [0, 0] + list(padding[:nsp]), [0, 0] + after, te.min_value(data.dtype), name="pad_temp",
                 prefix="ax")
    oshape = list(data.shape[:2]) + out

    def window(idx, taps):
        return padded[tuple(idx[:2]) + tuple(_window_index(idx[2 + a], strides[a], taps[a], dilation[a])
                                             for a in range(nsp))]

    taps = [te.reduce_axis((0, tir.IntImm("int64", pool_size[a])), name=f"d{'hw'[a]}") for a in range(nsp)]
    maximum = compute(oshape, lambda idx: te.max(window(idx, taps), axis=taps), name="maxpool_grad_max")
    ataps = [te.reduce_axis((0, tir.IntImm("int64", pool_size[a])), name=f"d{'hw'[a]}") for a in range(nsp)]
    count = pool_size[0] * pool_size[1]

    def first(idx):
        flat = ataps[0] * tir.IntImm("int64", pool_size[1]) + ataps[1]
        hit = tir.EQ("bool", window(idx, ataps), maximum[tuple(idx)])
        return te.min(tir.Select("int64", hit, flat, tir.IntImm("int64", count)), axis=ataps)

    argmax = compute(oshape, first, name="maxpool_grad_argmax")
    wtaps = [te.reduce_axis((0, tir.IntImm("int64", pool_size[a])), name=f"w{'hw'[a]}") for a in range(nsp)]

    def grad(idx):
        oidx, conds = _window_reading(idx, wtaps, strides, dilation, padding, out)
        chosen = tir.EQ("bool", argmax[tuple(oidx)], wtaps[0] * tir.IntImm("int64", pool_size[1]) + wtaps[1])
        value = te.if_then_else(te.all(*conds), tir.Select(data.dtype, chosen, output_grad[tuple(oidx)],
                                                           tir.const(0, data.dtype)), tir.const(0, data.dtype))
        return te.sum(value, axis=wtaps)

    return compute(data.shape, grad, name="T_pool_grad")


def _window_reading(idx, wtaps, strides, dilation, padding, out) -> tuple:
    """(output index, conditions): the pooling window whose tap ``wtaps`` reads input element
    ``idx`` (NCHW), and the conditions that such a window exists."""
    conds, oidx = [], list(idx[:2])
    for a, tap in enumerate(wtaps):
        o, c = _covering(idx[2 + a], tap, strides[a], dilation[a], padding[a], out[a])
        oidx.append(o)
        conds += c
    return oidx, conds


def avg_pool2d_backward(output_grad: te.Tensor, data: te.Tensor, pool_size, strides, dilation, padding,
                        ceil_mode: bool = False, count_include_pad: bool = False) -> te.Tensor:
    """The gradient of NCHW average pooling with respect to its data: each input element sums,
    over the taps ``(wh, ww)`` of the windows that read it, that window's output gradient over
    the window's divisor (the forward's: `avg_pool_divisor`). One stage, ``T_pool_grad``."""
    nsp = 2
    out = _out_extents(data, pool_size, strides, dilation, padding, ceil_mode)
    wtaps = [te.reduce_axis((0, tir.IntImm("int64", pool_size[a])), name=f"w{'hw'[a]}") for a in range(nsp)]

    def grad(idx):
        oidx, conds = _window_reading(idx, wtaps, strides, dilation, padding, out)
        divisor = avg_pool_divisor(oidx[2:], list(data.shape[2:]), pool_size, strides, dilation, padding,
                                   count_include_pad)
        share = output_grad[tuple(oidx)] / te.cast(divisor, data.dtype)
        return te.sum(te.if_then_else(te.all(*conds), share, tir.const(0, data.dtype)), axis=wtaps)

    return compute(data.shape, grad, name="T_pool_grad")
