"""Neural-network operators (TVM's ``topi.nn``): softmax, normalization, convolution, pooling,
padding, attention.

Stage (block) and loop names follow TVM's TOPI so legalized modules read like TVM's:
``T_softmax_maxelem``/``T_softmax_exp``/``T_softmax_expsum``/``T_softmax_norm``,
``<data>_sum``/``<data>_mean``/``<data>_var_sum``/``T_layer_norm`` (``T_group_norm``),
``T_multiply_red``/``rsqrt``/``T_rms_norm``, ``pad_temp`` + ``conv2d_nchw``/``group_conv2d_nchw``
(loops ``nn, ff, yy, xx, rc, ry, rx``) or ``conv1d_ncw``/``group_conv1d_ncw``, ``pad_temp`` +
``pool_max`` or ``pool_sum``/``pool_avg`` (loops ``ax0.., rv0, rv1``), ``PadInput``/
``ReflectPadInput``, ``T_batch_matmul_NT``/``T_batch_matmul_NN`` around attention's softmax,
``T_matmul_NT``.

Convolution and pooling in other layouts (``NHWC``, ``HWIO`` kernels, packed ``NCHW16c``) bring
their operands to the canonical order with `to_primal` (``T_layout_trans``), compute there, and
write the result in the output layout with `from_primal`. 3-D convolution is ``conv3d_ncdhw``
(loops ``nn, ff, zz, yy, xx, rc, rz, ry, rx``).

Index arithmetic with a constant 1 (unit stride or dilation, one channel per group) is folded
as TVM's simplifier would, so the printed indices are the same. Where TVM's own TE is an
elaborate composition (batch_norm's chain of reshapes, adaptive pooling's variable-extent
loops, avg-pool's divisor, attention's transposes and reshapes to 3-D batch matmuls, group
norm's reshapes) the stages here are fewer but compute the same values.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import (add_int, conv_out_dim, conv_transpose_out_dim, floordiv_dim, layout_to_primal_shape,
                                       mul_dim, packed_factors, parse_layout, plain_dim, pool_out_dim,
                                       primal_to_layout_shape, static_int)
from tvmscript.ir.op.shape_arith import add, product, sub

from .. import te
from ._util import compute
from .broadcast import broadcast_index
from .transform import reshape

__all__ = [
    "softmax", "log_softmax", "layer_norm", "batch_norm", "pad", "reflect_pad", "edge_pad", "conv2d_nchw",
    "group_conv2d_nchw",
    "conv2d", "pool", "pool1d", "pool2d", "adaptive_pool2d", "dropout", "dense", "conv_out_dim", "pool_out_dim",
    "attention",
    "rms_norm", "group_norm", "conv1d", "conv1d_ncw", "group_conv1d_ncw", "conv_transpose", "conv_transpose_out_dim",
    "conv1d_transpose", "conv2d_transpose", "nll_loss", "conv3d", "conv3d_transpose", "parse_layout",
    "layout_to_primal_shape", "primal_to_layout_shape", "to_primal", "from_primal", "in_layouts",
    "avg_pool_divisor", "cross_entropy_with_logits", "batch_flatten",
]


# ----------------------------------------------------------------------------- layouts


def to_primal(t: te.Tensor, layout: str, primal: str) -> te.Tensor:
    """``t`` (in ``layout``) transposed and unpacked into ``primal`` order (``T_layout_trans``);
    ``t`` itself when the layouts are the same."""
    if layout == primal:
        return t
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)

    def f(idx):
        src = []
        for a, fac in axes:
            i = idx[primal.index(a.upper())]
            if fac is not None:
                src.append(tir._binary(tir.FloorMod, i, tir.IntImm(i.dtype, fac)))
            else:
                src.append(floordiv_dim(i, factors[a]) if a in factors else i)
        return t[tuple(src)]

    return compute(layout_to_primal_shape(t.shape, layout, primal), f, name="T_layout_trans")


def from_primal(t: te.Tensor, layout: str, primal: str) -> te.Tensor:
    """``t`` (in ``primal`` order) written in ``layout`` (``T_layout_trans``); ``t`` itself when
    the layouts are the same."""
    if layout == primal:
        return t
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)
    at = {a: i for i, (a, _) in enumerate(axes)}

    def f(idx):
        src = []
        for p in primal:
            i = idx[at[p]]
            if p in factors:
                inner = idx[at[p.lower()]]
                i = mul_dim(i, factors[p]) + inner
            src.append(i)
        return t[tuple(src)]

    return compute(primal_to_layout_shape(t.shape, layout, primal), f, name="T_layout_trans")


# ----------------------------------------------------------------------------- softmax


def _with_axis(idx, axis: int, v) -> tuple:
    idx = list(idx)
    return tuple(idx[:axis] + [v] + idx[axis:])


def _without_axis(idx, axis: int) -> tuple:
    idx = list(idx)
    return tuple(idx[:axis] + idx[axis + 1:])


def _reduced_shape(shape, axis: int) -> list:
    return [d for i, d in enumerate(shape) if i != axis]


def _max_along(x: te.Tensor, axis: int, where=None) -> te.Tensor:
    """``T_softmax_maxelem``: the maximum along ``axis`` (reduce loop ``k``) of the elements
    ``where(index)`` keeps (all when None)."""
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def f(*i):
        idx = _with_axis(i, axis, k)
        load = x[idx]
        if where is not None:
            load = tir.Select(x.dtype, where(idx), load, te.min_value(x.dtype))
        return te.max(load, axis=k)

    return te.compute(_reduced_shape(x.shape, axis), f, name="T_softmax_maxelem")


def softmax(x: te.Tensor, axis: int = -1, where=None) -> te.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, in TVM's four stages. ``where``
    (a function of the full index giving a bool, or None) masks elements out: they take no part
    in the maximum and their exponential is 0 (attention's causal mask)."""
    axis = axis + len(x.shape) if axis < 0 else axis
    maxelem = _max_along(x, axis, where)

    def exp_f(*i):
        e = te.exp(x[i] - maxelem[_without_axis(i, axis)])
        return e if where is None else tir.Select(x.dtype, where(i), e, tir.const(0, x.dtype))

    exp = te.compute(x.shape, exp_f, name="T_softmax_exp")
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    expsum = te.compute(_reduced_shape(x.shape, axis), lambda *i: te.sum(exp[_with_axis(i, axis, k)], axis=k),
                        name="T_softmax_expsum")
    return te.compute(x.shape, lambda *i: exp[i] / expsum[_without_axis(i, axis)], name="T_softmax_norm",
                      attrs={"axis": axis})


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``: TVM's ``T_softmax_maxelem`` and two
    ``compute`` stages (the sum of exponentials, then the result)."""
    axis = axis + len(x.shape) if axis < 0 else axis
    maxelem = _max_along(x, axis)
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def expsum(*i):
        red = _without_axis(_with_axis(i, axis, k), axis)
        return te.sum(te.exp(x[_with_axis(i, axis, k)] - maxelem[red]), axis=k)

    total = te.compute(_reduced_shape(x.shape, axis), expsum, name="compute")
    return te.compute(
        x.shape, lambda *i: x[i] - maxelem[_without_axis(i, axis)] - te.log(total[_without_axis(i, axis)]),
        name="compute", attrs={"axis": axis},
    )


# ----------------------------------------------------------------------------- normalization


def _float_const(value: float, dtype: str):
    return tir.FloatImm(dtype, float(value))


def _count(dims) -> tuple:
    """The product of ``dims``: (constant part, product of the symbolic dims or None)."""
    n = 1
    sym = None
    for d in dims:
        v = static_int(d)
        if v is None:
            sym = plain_dim(d) if sym is None else sym * plain_dim(d)
        else:
            n *= v
    return n, sym


def _count_expr(shape, axes, dtype: str, extra=()):
    """The element count over ``axes`` (times the ``extra`` dims) as a ``dtype`` value: a
    constant (``T.float32(8.0)``) or a cast of the symbolic product."""
    n, sym = _count([shape[a] for a in axes] + list(extra))
    if sym is None:
        return _float_const(n, dtype)
    return te.cast(mul_dim(sym, n), dtype)


def _reduce_over(data: te.Tensor, axes: list, name: str, body) -> te.Tensor:
    """A reduction over ``axes`` of ``data``: loops ``ax0..`` over the kept dims, ``k<axis>``
    over the reduced ones (TVM's naming); ``body(full_index)`` is the summand."""
    kept = [i for i in range(len(data.shape)) if i not in axes]
    red = {a: te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}

    def f(idx):
        full, it = [], iter(idx)
        for i in range(len(data.shape)):
            full.append(red[i] if i in red else next(it))
        return te.sum(body(full), axis=[red[a] for a in axes])

    return compute([data.shape[i] for i in kept], f, name=name)


def layer_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, axes, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True) -> te.Tensor:
    """``(x - mean) * rsqrt(var + eps) * gamma + beta`` over ``axes``: TVM's ``<data>_sum``,
    ``<data>_mean``, ``<data>_var_sum`` and ``T_layer_norm`` stages (two-pass variance)."""
    n = len(data.shape)
    axes = sorted(a + n if a < 0 else a for a in axes)
    kept = [i for i in range(n) if i not in axes]
    dtype = data.dtype
    count = _count_expr(data.shape, axes, dtype)

    def kept_index(full):
        return tuple(full[i] for i in kept)

    total = _reduce_over(data, axes, f"{data.name}_sum", lambda full: data[tuple(full)])
    mean = compute(total.shape, lambda idx: total[tuple(idx)] / count, name=f"{data.name}_mean")

    def sq_dev(full):
        d = data[tuple(full)] - mean[kept_index(full)]
        return d * d

    var_sum = _reduce_over(data, axes, f"{data.name}_var_sum", sq_dev)

    def f(idx):
        k = kept_index(idx)
        out = (data[tuple(idx)] - mean[k]) * te.rsqrt(var_sum[k] / count + _float_const(epsilon, dtype))
        norm_idx = tuple(idx[a] for a in axes)
        if scale:
            out = out * gamma[norm_idx]
        if center:
            out = out + beta[norm_idx]
        return out

    return compute(data.shape, f, name="T_layer_norm")


def batch_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, moving_mean: te.Tensor,
               moving_var: te.Tensor, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True, momentum: float = 0.1, training: bool = True) -> list:
    """Batch normalization along channel ``axis``; returns (output, new moving mean, new moving
    var) as TVM's ``topi.nn.batch_norm``.

    ``training=True`` normalizes with the batch's statistics (mean and biased variance over
    every axis but ``axis``: stages ``<data>_red``/``T_divide``/``T_multiply_red``/
    ``T_divide_1``) and returns ``(1 - momentum) * moving + momentum * batch`` for the moving
    statistics; ``training=False`` (inference) normalizes with the moving statistics and
    returns them unchanged. The output is one stage rather than TVM's chain of reshapes."""
    n = len(data.shape)
    axis = axis + n if axis < 0 else axis
    dtype = data.dtype
    eps = _float_const(epsilon, dtype)
    if training:
        others = [i for i in range(n) if i != axis]
        count = _count_expr(data.shape, others, dtype)
        total = _reduce_over(data, others, f"{data.name}_red", lambda full: data[tuple(full)])
        mean = compute(total.shape, lambda idx: total[tuple(idx)] / count, name="T_divide")

        def sq_dev(full):
            d = data[tuple(full)] - mean[full[axis]]
            return d * d

        sq_sum = _reduce_over(data, others, "T_multiply_red", sq_dev)
        var = compute(sq_sum.shape, lambda idx: sq_sum[tuple(idx)] / count, name="T_divide")
    else:
        mean, var = moving_mean, moving_var

    def f(idx):
        c = idx[axis]
        out = (data[tuple(idx)] - mean[c]) / te.sqrt(var[c] + eps)
        if scale:
            out = out * gamma[c]
        if center:
            out = out + beta[c]
        return out

    last = "T_add" if center else ("T_multiply" if scale else "T_divide")
    out = compute(data.shape, f, name=last)
    if not training:
        keep_mean = compute(moving_mean.shape, lambda idx: moving_mean[tuple(idx)], name="T_multiply")
        keep_var = compute(moving_var.shape, lambda idx: moving_var[tuple(idx)], name="T_multiply")
        return [out, keep_mean, keep_var]
    keep = _float_const(1.0 - momentum, dtype)
    mom = _float_const(momentum, dtype)
    new_mean = compute(moving_mean.shape, lambda idx: keep * moving_mean[idx[0]] + mom * mean[idx[0]], name="T_add")
    new_var = compute(moving_var.shape, lambda idx: keep * moving_var[idx[0]] + mom * var[idx[0]], name="T_add")
    return [out, new_mean, new_var]


def rms_norm(data: te.Tensor, weight: te.Tensor, axes, epsilon: float = 1e-5) -> te.Tensor:
    """``x * rsqrt(mean(x^2 over axes) + eps) * weight``: TVM's ``T_multiply_red`` (the sum of
    squares), ``rsqrt`` and ``T_rms_norm`` stages (``weight`` has the shape of ``axes``)."""
    n = len(data.shape)
    axes = sorted(a + n if a < 0 else a for a in axes)
    kept = [i for i in range(n) if i not in axes]
    dtype = data.dtype
    count = _count_expr(data.shape, axes, dtype)

    def square(full):
        x = data[tuple(full)]
        return x * x

    sq_sum = _reduce_over(data, axes, "T_multiply_red", square)
    inv = compute(sq_sum.shape, lambda idx: te.rsqrt(sq_sum[tuple(idx)] / count + _float_const(epsilon, dtype)),
                  name="rsqrt")

    def f(idx):
        return inv[tuple(idx[i] for i in kept)] * data[tuple(idx)] * weight[tuple(idx[a] for a in axes)]

    return compute(data.shape, f, name="T_rms_norm")


def group_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, num_groups: int, channel_axis: int, axes,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> te.Tensor:
    """Group normalization: the ``C`` channels (axis ``channel_axis``) fall into ``num_groups``
    groups of ``C / num_groups`` consecutive channels; each group is normalized over its
    channels and ``axes`` (two-pass mean and variance, stages ``<data>_sum``, ``<data>_mean``,
    ``<data>_var_sum``), then scaled by ``gamma`` and shifted by ``beta`` per channel
    (``T_group_norm``). The statistics have the data's shape with ``axes`` dropped and the
    channel axis holding the group."""
    n = len(data.shape)
    caxis = channel_axis + n if channel_axis < 0 else channel_axis
    axes = sorted(a + n if a < 0 else a for a in axes)
    kept = [i for i in range(n) if i not in axes]
    per_group = floordiv_dim(plain_dim(data.shape[caxis]), num_groups)
    dtype = data.dtype
    groups = tir.IntImm(plain_dim(data.shape[caxis]).dtype, num_groups)
    stat_shape = [groups if i == caxis else data.shape[i] for i in kept]
    red = {a: te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}
    kc = te.reduce_axis((0, per_group), name=f"k{caxis}")
    count = _count_expr(data.shape, axes, dtype, [per_group])

    def source(stat_idx):
        """The data index of reduction element (kc, red) of the group at ``stat_idx``."""
        full, it = [], iter(stat_idx)
        for i in range(n):
            if i in red:
                full.append(red[i])
            else:
                j = next(it)
                full.append(mul_dim(j, per_group) + kc if i == caxis else j)
        return tuple(full)

    def reduce(name, body):
        """``body(data index, statistics index)`` summed over each group."""
        return compute(stat_shape, lambda idx: te.sum(body(source(idx), tuple(idx)),
                                                      axis=[kc] + [red[a] for a in axes]), name=name)

    def stat_index(full):
        return tuple(floordiv_dim(full[i], per_group) if i == caxis else full[i] for i in kept)

    total = reduce(f"{data.name}_sum", lambda full, _: data[full])
    mean = compute(stat_shape, lambda idx: total[tuple(idx)] / count, name=f"{data.name}_mean")

    def sq_dev(full, stat):
        dev = data[full] - mean[stat]
        return dev * dev

    var_sum = reduce(f"{data.name}_var_sum", sq_dev)

    def f(idx):
        k = stat_index(idx)
        out = (data[tuple(idx)] - mean[k]) * te.rsqrt(var_sum[k] / count + _float_const(epsilon, dtype))
        if scale:
            out = out * gamma[idx[caxis]]
        if center:
            out = out + beta[idx[caxis]]
        return out

    return compute(data.shape, f, name="T_group_norm")


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


def in_layouts(fn, data, weight, layouts: tuple, primals: tuple):
    """``fn(data, weight)`` on operands given in ``layouts`` = (data's, kernel's, output's):
    each operand brought to its ``primals`` order (data's, kernel's) first, the result written
    in the output layout after (`to_primal`, `from_primal`)."""
    data_layout, kernel_layout, out_layout = layouts
    out = fn(to_primal(data, data_layout, primals[0]), to_primal(weight, kernel_layout, primals[1]))
    return from_primal(out, out_layout, primals[0])


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


def conv2d(data, weight, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, data_layout="NCHW",
           kernel_layout="OIHW", out_layout="NCHW", out_dtype="void"):
    """Relax's ``nn.conv2d`` legalization: ``conv2d_nchw`` for one group, else
    ``group_conv2d_nchw`` (as TVM's), on operands in any layout (`in_layouts`; TVM's own
    NHWC kernels index the operands in place, with the same sums)."""
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


# ----------------------------------------------------------------------------- pooling


def _taps(start, lo: int, hi, kernel: int, dilation: int):
    """How many of the taps ``start + k * dilation`` (``0 <= k < kernel``) lie in [lo, hi)
    (``start >= 0``, so a window never misses ``lo == 0``)."""
    zero = tir.IntImm(start.dtype, 0)
    last = te.min(floordiv_dim(add_int(hi, -1) - start, dilation), tir.IntImm(start.dtype, kernel - 1))
    if lo == 0:
        return last + 1
    first = te.max(floordiv_dim(tir.IntImm(start.dtype, lo + dilation - 1) - start, dilation), zero)
    return last - first + 1


def pool(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
         count_include_pad: bool = False) -> te.Tensor:
    """N-C-spatial max/avg pooling (1-D or 2-D) as TVM's ``topi.nn.pool1d``/``pool2d``:
    ``pad_temp`` (minimum value or zero; ceil mode pads ``stride - 1`` more at the end), then
    ``pool_max``, or ``pool_sum`` and ``pool_avg``. ``padding`` is the pads before each spatial
    axis, then those after. The average divides by the number of taps inside the input (inside
    the explicitly padded input with ``count_include_pad``), at least 1."""
    nsp = len(data.shape) - 2
    spatial = list(data.shape[2:])
    before_pads, after_pads = list(padding[:nsp]), list(padding[nsp:])
    out = []
    for a in range(nsp):
        o = pool_out_dim(spatial[a], pool_size[a], strides[a], dilation[a], before_pads[a], after_pads[a], ceil_mode)
        if o is None:
            raise ValueError(f"pool{nsp}d: the ceil-mode output extent of a symbolic input is not known")
        out.append(o)
    extra = [s - 1 if ceil_mode else 0 for s in strides]
    before = [0, 0] + before_pads
    after = [0, 0] + [p + e for p, e in zip(after_pads, extra)]
    if any(before) or any(after):
        value = te.min_value(data.dtype) if kind == "max" else tir.const(0, data.dtype)
        src = pad(data, before, after, value, name="pad_temp", prefix="ax")
    else:
        src = data
    taps = [te.reduce_axis((0, tir.IntImm(spatial[a].dtype, pool_size[a])), name=f"rv{a}") for a in range(nsp)]
    oshape = list(data.shape[:2]) + out

    def window(idx):
        return src[tuple(idx[:2]) + tuple(_window_index(idx[2 + a], strides[a], taps[a], dilation[a])
                                          for a in range(nsp))]

    if kind == "max":
        return compute(oshape, lambda idx: te.max(window(idx), axis=taps), name="pool_max",
                       attrs={"schedule_rule": "meta_schedule.pool_max"})
    total = compute(oshape, lambda idx: te.sum(window(idx), axis=taps), name="pool_sum")

    def avg(idx):
        count = avg_pool_divisor(idx[2:], spatial, pool_size, strides, dilation, padding, count_include_pad)
        return total[tuple(idx)] / te.cast(count, data.dtype)

    return compute(oshape, avg, name="pool_avg", attrs={"schedule_rule": "meta_schedule.pool_avg"})


def avg_pool_divisor(out_idx, spatial, pool_size, strides, dilation, padding, count_include_pad: bool):
    """The divisor of average-pooling output ``out_idx`` (its spatial indices): the number of
    its taps inside the input (inside the explicitly padded input with ``count_include_pad``),
    at least 1. ``padding`` is the pads before each spatial axis, then those after."""
    nsp = len(spatial)
    count = None
    for a in range(nsp):
        start = mul_dim(out_idx[a], strides[a])
        size = plain_dim(spatial[a])
        pb, pa = padding[a], padding[nsp + a]
        lo, hi = (0, add_int(size, pb + pa)) if count_include_pad else (pb, add_int(size, pb))
        n = _taps(start, lo, hi, pool_size[a], dilation[a])
        count = n if count is None else count * n
    return te.max(count, tir.IntImm(count.dtype, 1))


def pool2d(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
           count_include_pad: bool = False, layout: str = "NCHW", out_layout=None) -> te.Tensor:
    """2-D pooling (``padding`` is top, left, bottom, right): `pool` on two spatial axes, the
    data in ``layout`` (``NHWC``, ``NCHW16c``: brought to NCHW first) and the result written in
    ``out_layout`` (the data's by default)."""
    out = pool(to_primal(data, layout, "NCHW"), kind, pool_size, strides, dilation, padding, ceil_mode,
               count_include_pad)
    return from_primal(out, out_layout or layout, "NCHW")


def pool1d(data: te.Tensor, kind: str, pool_size, strides, dilation, padding, ceil_mode: bool = False,
           count_include_pad: bool = False, layout: str = "NCW", out_layout=None) -> te.Tensor:
    """1-D pooling (``padding`` is left, right): `pool` on one spatial axis, in any layout as
    `pool2d`."""
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
    """Adaptive average pooling of ``data`` in ``layout`` (brought to NCHW first), the result
    in ``out_layout`` (the data's by default); ``output_size`` None keeps the input's H, W."""
    if kind != "avg":
        raise ValueError("adaptive_pool2d: only average pooling is implemented")
    x = to_primal(data, layout, "NCHW")
    size = output_size if output_size is not None else [int(d) for d in x.shape[2:]]
    return from_primal(_adaptive_avg_pool2d_nchw(x, size), out_layout or layout, "NCHW")


def _adaptive_avg_pool2d_nchw(data: te.Tensor, output_size) -> te.Tensor:
    """NCHW adaptive average pooling: output ``(i, j)`` averages the window
    ``[floor(i*H/oh), ceil((i+1)*H/oh)) x [floor(j*W/ow), ceil((j+1)*W/ow))`` (TVM's
    ``adaptive_pool_sum`` and ``adaptive_pool_avg``). The sum loops over the widest window and
    guards the taps beyond a narrower one, where TVM loops over each window's own extent."""
    n, c, h, w = data.shape
    oh, ow = (int(o) for o in output_size)
    out_shape = (n, c, tir.IntImm(h.dtype, oh), tir.IntImm(w.dtype, ow))
    rv0 = te.reduce_axis((0, _widest_window(h, oh)), name="rv0")
    rv1 = te.reduce_axis((0, _widest_window(w, ow)), name="rv1")

    def summand(idx):
        a0, a1, a2, a3 = idx
        sh, eh = _adaptive_window(a2, h, oh)
        sw, ew = _adaptive_window(a3, w, ow)
        load = data[a0, a1, sh + rv0, sw + rv1]
        conds = []
        if not _static_uniform(h, oh):
            conds.append(rv0 < eh)
        if not _static_uniform(w, ow):
            conds.append(rv1 < ew)
        value = te.if_then_else(te.all(*conds), load, tir.const(0, data.dtype)) if conds else load
        return te.sum(value, axis=[rv0, rv1])

    total = compute(out_shape, summand, name="adaptive_pool_sum")

    def avg(idx):
        eh = _adaptive_window(idx[2], h, oh)[1]
        ew = _adaptive_window(idx[3], w, ow)[1]
        if static_int(eh) is not None and static_int(ew) is not None:
            count = static_int(eh) * static_int(ew)
            return total[tuple(idx)] if count == 1 else total[tuple(idx)] / _float_const(count, data.dtype)
        return total[tuple(idx)] / te.cast(eh * ew, data.dtype)

    return compute(out_shape, avg, name="adaptive_pool_avg",
                   attrs={"schedule_rule": "meta_schedule.adaptive_pool_avg"})


# ----------------------------------------------------------------------------- dropout, dense


def dropout(data: te.Tensor, rate: float = 0.5) -> list:
    """Inference dropout: the data unchanged (``T_identity``) and an all-ones mask
    (``T_full_like``); ``rate`` only matters in training, which is not compiled here."""
    out = compute(data.shape, lambda idx: data[tuple(idx)], name="T_identity")
    mask = compute(data.shape, lambda idx: tir.const(1, data.dtype), name="T_full_like")
    return [out, mask]


def dense(data: te.Tensor, weight: te.Tensor, out_dtype: str = "void") -> te.Tensor:
    """``data @ weight.T`` (weight as (units, in)): TVM's ``T_matmul_NT``, loops ``i0.., k``."""
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    k = te.reduce_axis((0, data.shape[-1]), name="k")
    shape = list(data.shape[:-1]) + [weight.shape[0]]

    def f(*i):
        a = te.cast(data[tuple(i[:-1]) + (k,)], dtype)
        b = te.cast(weight[i[-1], k], dtype)
        return te.sum(a * b, axis=k)

    return te.compute(shape, f, name="T_matmul_NT")



# ----------------------------------------------------------------------------- attention


def _causal_visible(seq, seq_kv, causal_mask: str):
    """The condition on a (batch, head, query i, key j) index that key ``j`` is visible to query
    ``i``: ``j <= i`` ("TopLeft"), ``j <= i + seq_kv - seq`` ("BottomRight": the last query sees
    every key, as when decoding after a cache)."""
    offset = sub(plain_dim(seq_kv), plain_dim(seq)) if causal_mask == "BottomRight" else 0
    return lambda idx: idx[3] <= add(idx[2], offset)


def attention(query: te.Tensor, key: te.Tensor, value: te.Tensor, bias=None, scale=None,
              causal_mask=None) -> te.Tensor:
    """Scaled dot-product attention in TVM's layout: ``query`` (batch, seq, heads, head_dim),
    ``key`` (batch, seq_kv, kv_heads, head_dim), ``value`` (batch, seq_kv, kv_heads, head_dim_v),
    output (batch, seq, heads, head_dim_v).

    Stages: ``T_batch_matmul_NT`` (scores per batch and head: ``q . k``), ``T_divide`` by
    ``sqrt(head_dim)`` (``T_multiply`` by ``scale`` when given; ``T_add`` of the broadcast
    (batch, heads, seq, seq_kv) ``bias`` after it), TVM's four softmax stages along ``seq_kv``
    (masked when ``causal_mask`` is "TopLeft": key ``j`` visible to query ``i`` when
    ``j <= i``, or "BottomRight": when ``j <= i + seq_kv - seq``), then ``T_batch_matmul_NN``
    (probabilities times values) written in the output layout. TVM's legalization transposes
    and reshapes to 3-D batch matmuls instead; indexing the 4-D tensors directly computes the
    same values in fewer stages. With fewer kv heads than heads (grouped-query attention), query
    head ``h`` reads kv head ``h // (heads // kv_heads)``."""
    batch, seq, heads, head_dim = query.shape
    seq_kv, kv_heads = key.shape[1], key.shape[2]
    dtype = query.dtype
    ratio = 1
    if static_int(heads) is not None and static_int(kv_heads) is not None:
        ratio = static_int(heads) // static_int(kv_heads)

    def kv(h):
        return floordiv_dim(h, ratio) if ratio != 1 else h

    d = te.reduce_axis((0, head_dim), name="k")
    scores = te.compute((batch, heads, seq, seq_kv),
                        lambda b, h, i, j: te.sum(query[b, i, h, d] * key[b, j, kv(h), d], axis=d),
                        name="T_batch_matmul_NT")
    if scale is None:
        size = static_int(head_dim)
        root = te.sqrt(_float_const(size, dtype) if size is not None else te.cast(head_dim, dtype))
        scaled = compute(scores.shape, lambda idx: scores[tuple(idx)] / root, name="T_divide")
    else:
        factor = _float_const(scale, dtype)
        scaled = compute(scores.shape, lambda idx: scores[tuple(idx)] * factor, name="T_multiply")
    if bias is not None:
        logits = compute(scaled.shape, lambda idx: scaled[tuple(idx)] + bias[tuple(broadcast_index(
            bias, list(scaled.shape), idx))], name="T_add")
    else:
        logits = scaled
    where = None if causal_mask is None else _causal_visible(seq, seq_kv, causal_mask)
    probs = softmax(logits, 3, where)
    r = te.reduce_axis((0, seq_kv), name="k")
    return te.compute((batch, seq, heads, value.shape[3]),
                      lambda b, i, h, j: te.sum(probs[b, h, i, r] * value[b, r, kv(h), j], axis=r),
                      name="T_batch_matmul_NN")


# ----------------------------------------------------------------------------- nll_loss


def nll_loss(predictions: te.Tensor, targets: te.Tensor, weights, reduction: str, ignore_index: int) -> te.Tensor:
    """Negative log-likelihood: stage ``nll_loss`` holds ``-predictions[n, t, d...] * w[t]``
    per target (0 where ``t == ignore_index``; the load then reads class 0, so it stays in
    bounds); ``sum`` reduces it to ``nll_loss_red``, ``mean`` divides that by the summed
    weights of the targets not ignored (``nll_loss_weight_red``), as PyTorch does. ``weights``
    None weighs every class 1."""
    dtype = predictions.dtype
    zero, ignore = tir.const(0, dtype), tir.const(ignore_index, targets.dtype)
    # Class axis: 0 for 1-D predictions (one sample), 1 otherwise.
    batched = len(predictions.shape) > 1

    def target(idx):
        t = targets[tuple(idx)]
        kept = tir.NE("bool", t, ignore)
        return kept, tir.Select(t.dtype, kept, t, tir.const(0, t.dtype))

    def weight_of(t):
        return weights[(t,)] if weights is not None else tir.const(1, dtype)

    def loss(idx):
        kept, t = target(idx)
        at = (idx[0], t, *idx[1:]) if batched else (t,)
        return tir.Select(dtype, kept, (zero - predictions[at]) * weight_of(t), zero)

    per_target = compute(targets.shape, loss, name="nll_loss")
    if reduction == "none" or (reduction == "sum" and not targets.shape):
        return per_target

    def kept_weight(*idx):
        kept, t = target(list(idx))
        return tir.Select(dtype, kept, weight_of(t), zero)

    if not targets.shape:  # one sample: its loss over its weight
        return te.compute((), lambda: per_target[()] / kept_weight(), name="T_divide")
    axes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(targets.shape)]
    total = te.compute((), lambda: te.sum(per_target[tuple(axes)], axis=axes), name="nll_loss_red")
    if reduction == "sum":
        return total
    waxes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(targets.shape)]
    wsum = te.compute((), lambda: te.sum(kept_weight(*waxes), axis=waxes), name="nll_loss_weight_red")
    return te.compute((), lambda: total[()] / wsum[()], name="T_divide")


# ----------------------------------------------------------------------------- cross_entropy_with_logits


def cross_entropy_with_logits(predictions: te.Tensor, labels: te.Tensor) -> te.Tensor:
    """``-sum(predictions * labels)``, divided by the batch size (the first extent) for a batch
    (rank 2 and more), as TVM's: stages ``T_multiply``, ``T_multiply_red``, ``T_multiply``
    (by -1) and ``T_divide``."""
    dtype = predictions.dtype
    product = compute(predictions.shape, lambda idx: predictions[tuple(idx)] * labels[tuple(idx)], name="T_multiply")
    axes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(predictions.shape)]
    total = te.compute((), lambda: te.sum(product[tuple(axes)], axis=axes), name="T_multiply_red")
    negated = te.compute((), lambda: total[()] * tir.const(-1.0, dtype), name="T_multiply")
    if len(predictions.shape) < 2:
        return negated
    batch = plain_dim(predictions.shape[0])
    size = static_int(batch)
    divisor = _float_const(size, dtype) if size is not None else te.cast(batch, dtype)
    return te.compute((), lambda: negated[()] / divisor, name="T_divide")


# ----------------------------------------------------------------------------- batch_flatten


def batch_flatten(data: te.Tensor) -> te.Tensor:
    """``data`` reshaped to (first extent, product of the others): TVM legalizes it as
    ``reshape`` (stage ``T_reshape``)."""
    return reshape(data, [data.shape[0], product(list(data.shape[1:]))])
