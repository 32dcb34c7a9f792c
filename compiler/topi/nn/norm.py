"""Softmax and normalization: ``T_softmax_maxelem``/``T_softmax_exp``/``T_softmax_expsum``/
``T_softmax_norm``, ``<data>_sum``/``<data>_mean``/``<data>_var_sum``/``T_layer_norm``
(``T_group_norm``), rms_norm (``T_cast``/``T_multiply``/``T_multiply_red``/``rsqrt``/
``T_rms_norm``, in float32) and batch_norm (TVM's chain of TOPI operators: reshapes of the
per-channel vectors, then broadcast arithmetic).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import floordiv_dim, mul_dim, plain_dim, static_int

from ... import te
from .._util import compute, float_const
from ..broadcast import add, divide, multiply, subtract
from ..elemwise import sqrt
from ..reduction import sum as reduce_sum
from ..transform import reshape


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


def _bn_stat_shape(data: te.Tensor, axis: int) -> list:
    """``[1, .., C, .., 1]``: the shape TVM reshapes batch_norm's per-channel vectors to, so
    that they broadcast against the data along ``axis``."""
    return [data.shape[i] if i == axis else tir.IntImm(data.shape[i].dtype, 1) for i in range(len(data.shape))]


def _divide_by_count(x: te.Tensor, count) -> te.Tensor:
    """``T_divide``: ``x / count``. TVM's division by a scalar folds a count of 1 away (a
    1-D batch_norm has nothing to reduce), leaving a copy stage of that name."""
    if isinstance(count, tir.FloatImm) and count.value == 1.0:
        return compute(x.shape, lambda idx: x[tuple(idx)], name="T_divide")
    return divide(x, count)


def _batch_stats(data: te.Tensor, axis: int, stat_shape: list) -> tuple:
    """The batch's mean and biased variance along ``axis``, flat and reshaped to
    ``stat_shape``: (mean, mean_rs, var, var_rs).

    As TVM's ``topi.nn.batch_norm``, the variance is ``sum((x - mean_rs) * (x - mean_rs))`` with
    the two differences separate stages (``T_subtract_1``/``T_subtract_2``), and each statistic
    is a sum (``<data>_red``, ``T_multiply_red``) divided by the count (``T_divide``,
    ``T_divide_1``) then reshaped (``T_reshape``, ``T_reshape_1``)."""
    others = [i for i in range(len(data.shape)) if i != axis]
    count = _count_expr(data.shape, others, data.dtype)
    mean = _divide_by_count(reduce_sum(data, others), count)
    mean_rs = reshape(mean, stat_shape)
    sq_dev = multiply(subtract(data, mean_rs), subtract(data, mean_rs))
    var = _divide_by_count(reduce_sum(sq_dev, others), count)
    return mean, mean_rs, var, reshape(var, stat_shape)


def _moving_update(moving: te.Tensor, batch: te.Tensor, momentum: float) -> te.Tensor:
    """``(1 - momentum) * moving + momentum * batch``: TVM's three stages (two ``T_multiply``
    with the constant on the left, then ``T_add``)."""
    return add(multiply(1.0 - momentum, moving), multiply(momentum, batch))


def _times_one(t: te.Tensor) -> te.Tensor:
    """``t * 1``: in inference TVM returns the moving statistics multiplied by 1 (a new
    tensor rather than the input placeholder); its multiply folds the 1 away, leaving a copy
    stage named ``T_multiply``."""
    return compute(t.shape, lambda idx: t[tuple(idx)], name="T_multiply")


def batch_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, moving_mean: te.Tensor,
               moving_var: te.Tensor, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True, momentum: float = 0.1, training: bool = True) -> list:
    """Batch normalization along channel ``axis``; returns (output, new moving mean, new moving
    var) as TVM's ``topi.nn.batch_norm``.

    ``training=True`` normalizes with the batch's statistics (mean and biased variance over
    every axis but ``axis``) and returns ``(1 - momentum) * moving + momentum * batch`` for the
    moving statistics; ``training=False`` (inference) normalizes with the moving statistics and
    returns them unchanged.

    The stages are TVM's, one TOPI operator each, rather than one fused output stage: every
    per-channel vector is reshaped to ``[1, .., C, .., 1]`` (``T_reshape*``) and broadcast, and
    ``out = (x - mean_rs) / sqrt(var_rs + eps) * gamma_rs + beta_rs`` is ``T_subtract``,
    ``T_add``, ``compute`` (the square root), ``T_divide``, ``T_multiply``, ``T_add``; so the
    legalized PrimFunc prints as TVM's, block for block. One difference is deliberate: TVM's
    ``eps`` and momentum are float32 constants, which promote float16 data to float32 (its
    float16 batch_norm returns float32); here they take the data's dtype, as the op's type says."""
    n = len(data.shape)
    axis = axis + n if axis < 0 else axis
    stat_shape = _bn_stat_shape(data, axis)
    if training:
        mean, mean_rs, var, var_rs = _batch_stats(data, axis, stat_shape)
    else:
        mean_rs, var_rs = reshape(moving_mean, stat_shape), reshape(moving_var, stat_shape)
    # Blocks print in dependency order from the outputs, so this subtract, the output's, comes
    # before the variance's two and is the one named ``T_subtract``, as in TVM.
    out = divide(subtract(data, mean_rs), sqrt(add(var_rs, epsilon)))
    if scale:
        out = multiply(out, reshape(gamma, stat_shape))
    if center:
        out = add(out, reshape(beta, stat_shape))
    if not training:
        return [out, _times_one(moving_mean), _times_one(moving_var)]
    return [out, _moving_update(moving_mean, mean, momentum), _moving_update(moving_var, var, momentum)]


def _cast_stage(x: te.Tensor, dtype: str) -> te.Tensor:
    """``T_cast``: ``x`` in ``dtype`` (a copy when it already is), TVM's C++ cast stage (loops
    ``ax0...``), which its rms_norm uses."""
    return compute(x.shape, lambda idx: te.cast(x[tuple(idx)], dtype), name="T_cast")


def rms_norm(data: te.Tensor, weight: te.Tensor, axes, epsilon: float = 1e-5) -> te.Tensor:
    """``x * rsqrt(mean(x^2 over axes) + eps) * weight`` (``weight`` has the shape of ``axes``),
    as TVM's ``topi.nn.rms_norm``: computed in float32 whatever the data's dtype, the result
    cast back to it.

    TVM's stages: ``T_cast`` (data to float32), ``T_multiply`` (the squares),
    ``T_multiply_red`` (their sum), ``rsqrt``, ``T_cast`` (weight to float32), ``T_rms_norm``,
    ``T_cast`` (back to the data's dtype). ``eps`` is a constant of the data's dtype, so for
    float64 data the float32 mean is promoted and the last stages compute in float64, as in
    TVM. TVM only handles trailing ``axes`` (it indexes the statistics by the leading loop
    variables); here any axes work, the statistics indexed by the kept ones."""
    n = len(data.shape)
    axes = sorted(a + n if a < 0 else a for a in axes)
    kept = [i for i in range(n) if i not in axes]
    data32 = _cast_stage(data, "float32")
    sq_sum = reduce_sum(multiply(data32, data32), axes)
    count = _count_expr(data.shape, axes, "float32")
    # TVM's eps has the data's dtype: added to the float32 mean, the wider of the two wins.
    eps = float_const(epsilon, "float64" if data.dtype == "float64" else "float32")
    inv = compute(sq_sum.shape, lambda idx: te.rsqrt(sq_sum[tuple(idx)] / count + eps), name="rsqrt")
    weight32 = _cast_stage(weight, "float32")

    def f(idx):
        stat = inv[tuple(idx[i] for i in kept)]
        return stat * data32[tuple(idx)] * weight32[tuple(idx[a] for a in axes)]

    return _cast_stage(compute(data.shape, f, name="T_rms_norm"), data.dtype)


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
