"""Softmax and normalization: ``T_softmax_maxelem``/``T_softmax_exp``/``T_softmax_expsum``/
``T_softmax_norm``, ``<data>_sum``/``<data>_mean``/``<data>_var_sum``/``T_layer_norm``
(``T_group_norm``), ``T_multiply_red``/``rsqrt``/``T_rms_norm``, and batch_norm (where TVM's
chain of reshapes is fewer stages here, computing the same values).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import floordiv_dim, mul_dim, plain_dim, static_int

from ... import te
from .._util import compute, float_const


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
        return float_const(n, dtype)
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
        out = (data[tuple(idx)] - mean[k]) * te.rsqrt(var_sum[k] / count + float_const(epsilon, dtype))
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
    eps = float_const(epsilon, dtype)
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
    keep = float_const(1.0 - momentum, dtype)
    mom = float_const(momentum, dtype)
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
    inv = compute(sq_sum.shape, lambda idx: te.rsqrt(sq_sum[tuple(idx)] / count + float_const(epsilon, dtype)),
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
        out = (data[tuple(idx)] - mean[k]) * te.rsqrt(var_sum[k] / count + float_const(epsilon, dtype))
        if scale:
            out = out * gamma[idx[caxis]]
        if center:
            out = out + beta[idx[caxis]]
        return out

    return compute(data.shape, f, name="T_group_norm")
