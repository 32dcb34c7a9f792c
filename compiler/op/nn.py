"""Neural-network ops (``R.nn.*``): softmax, normalization, convolution, pooling, dropout, dense.

Attributes, defaults and their printing order are TVM 0.25's (``R.nn.conv2d(x, w,
strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, data_layout="NCHW",
kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")``); shorthand values (an int
stride, a 2-element padding) are normalized to the lists TVM prints. Inference checks ranks,
channel counts, axes and output sizes, raising `OpError` naming the argument or attribute at
fault. Legalization is ``bb.call_te`` of the TE definitions in ``compiler/topi/nn.py``.

``nn.relu``/``nn.gelu``/``nn.silu`` are unary elementwise ops, declared in ``elementwise.py``.
"""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import (bool_attr, dim_equal, dtype_attr, fmt_shape, int_attr, is_int, normalize_axis, static_dim,
                     te_legalizer, tensor_arg)
from .registry import Attr, OpError, register_op

# ----------------------------------------------------------------------------- attribute converters


def _float_attr(name: str):
    def convert(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OpError(f"{name} must be a number, not {v!r}", name)
        return float(v)
    return convert


def _ints(name: str, v, lengths: tuple, minimum: int) -> list:
    """``v`` (an int or a list of ints of one of ``lengths``) as a list, each >= ``minimum``."""
    vals = [v] if is_int(v) else v
    if not isinstance(vals, (list, tuple)) or not all(is_int(x) for x in vals) or len(vals) not in lengths:
        counts = ", ".join(str(n) for n in lengths[:-1]) + f" or {lengths[-1]}"
        raise OpError(f"{name} must be an integer or a list of {counts} integers, not {v!r}", name)
    if any(x < minimum for x in vals):
        what = "positive" if minimum == 1 else "non-negative"
        raise OpError(f"{name} must be {what}, got {list(vals)}", name)
    return list(vals)


def _pair_attr(name: str):
    """Strides, dilation, pool sizes: an int or 1/2 ints, normalized to ``[h, w]``, positive."""
    def convert(v):
        vals = _ints(name, v, (1, 2), 1)
        return vals * 2 if len(vals) == 1 else vals
    return convert


def _padding_attr(v):
    """An int or 1, 2 or 4 ints, normalized to ``[top, left, bottom, right]`` as TVM does."""
    vals = _ints("padding", v, (1, 2, 4), 0)
    if len(vals) == 1:
        return vals * 4
    if len(vals) == 2:
        return vals * 2
    return vals


def _layout_attr(name: str, supported: str):
    """Only the default layout is implemented (for inference and legalization alike)."""
    def convert(v):
        if not isinstance(v, str):
            raise OpError(f"{name} must be a string, not {v!r}", name)
        if v != supported:
            raise OpError(f"{name} {v!r} is not supported: only {supported!r} is implemented", name)
        return v
    return convert


def _axes_list_attr(v):
    vals = [v] if is_int(v) else v
    if not isinstance(vals, (list, tuple)) or not vals or not all(is_int(x) for x in vals):
        raise OpError(f"axes must be a non-empty list of integers, not {v!r}", "axes")
    return list(vals)


def _output_size_attr(v):
    if v is None:
        return None
    return _pair_attr("output_size")(v)


def _rate_attr(v):
    rate = _float_attr("rate")(v)
    if not 0.0 <= rate < 1.0:
        raise OpError(f"rate must be in [0, 1), got {rate}", "rate")
    return rate


# ----------------------------------------------------------------------------- inference helpers


def _same(x: relax.TensorStructInfo) -> relax.TensorStructInfo:
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def _float_tensor(sinfo, what: str, op: str) -> relax.TensorStructInfo:
    x = tensor_arg(sinfo, what)
    if x.dtype and not tir.is_float(x.dtype):
        raise OpError(f"needs a floating-point {what}, not {x.dtype}", what)
    return x


def _check_rank(x: relax.TensorStructInfo, ndim: int, what: str, op: str) -> None:
    if x.ndim >= 0 and x.ndim != ndim:
        raise OpError(f"needs a {ndim}-D {what}, got rank {x.ndim}", what)


def _check_dims(x: relax.TensorStructInfo, expected: list, what: str, op: str, of: str) -> None:
    """``x`` must have shape ``expected`` (the dims ``of`` names); mismatching constants fail."""
    if x.ndim >= 0 and x.ndim != len(expected):
        raise OpError(f"{what} must have {len(expected)} dimension(s) ({of}), got rank {x.ndim}", what)
    if x.shape is None:
        return
    for got, want in zip(x.shape, expected):
        if static_dim(got) is not None and static_dim(want) is not None and got.value != want.value:
            raise OpError(f"{what} has shape ({fmt_shape(x.shape)}), expected ({fmt_shape(expected)}) ({of})", what)


def _positive_dim(d, what: str, op: str):
    v = static_dim(d)
    if v is not None and v <= 0:
        raise OpError(f"the output {what} would be {v}; the input is too small for the window")
    return d


def _out_dtype(data, weight, out_dtype: str, op: str) -> str:
    if out_dtype != "void":
        return out_dtype
    if data.dtype and weight.dtype and data.dtype != weight.dtype:
        raise OpError(f"data and weight dtypes differ ({data.dtype} and {weight.dtype}); give out_dtype=")
    return data.dtype or weight.dtype


def _dim(value) -> tir.PrimExpr:
    return tir.IntImm("int64", value) if isinstance(value, int) else value


# ----------------------------------------------------------------------------- softmax


def _infer_softmax(name: str):
    def infer(args, attrs):
        x = _float_tensor(args[0], "data", name)
        if x.ndim >= 0:
            if x.ndim == 0:
                raise OpError("needs a tensor with at least one dimension", "data")
            normalize_axis(attrs["axis"], x.ndim)
        return _same(x)
    return infer


for _name in ("softmax", "log_softmax"):
    register_op(
        f"nn.{_name}", ("data",), _infer_softmax(f"nn.{_name}"),
        attrs=(Attr("axis", -1, int_attr("axis")),), pattern="out_ewise_fusable",
        legalize=te_legalizer(getattr(topi.nn, _name), _name, ("axis",)),
    )


# ----------------------------------------------------------------------------- layer_norm


def infer_layer_norm(args, attrs):
    """``gamma``/``beta`` have the shape of ``data`` over ``axes``; the result is ``data``'s."""
    x = _float_tensor(args[0], "data", "nn.layer_norm")
    gamma, beta = tensor_arg(args[1], "gamma"), tensor_arg(args[2], "beta")
    if x.ndim < 0:
        return _same(x)
    axes = [normalize_axis(a, x.ndim, "axes") for a in attrs["axes"]]
    if len(set(axes)) != len(axes):
        raise OpError(f"axes {attrs['axes']} name an axis twice", "axes")
    if x.shape is not None:
        expected = [x.shape[a] for a in sorted(axes)]
    else:
        expected = [None] * len(axes)
    for sinfo, what in ((gamma, "gamma"), (beta, "beta")):
        if sinfo.ndim >= 0 and sinfo.ndim != len(axes):
            raise OpError(f"{what} must have {len(axes)} dimension(s) (the normalized axes), "
                          f"got rank {sinfo.ndim}", what)
        if x.shape is not None:
            _check_dims(sinfo, expected, what, "nn.layer_norm", "the data's normalized axes")
    return _same(x)


register_op(
    "nn.layer_norm", ("data", "gamma", "beta"), infer_layer_norm,
    attrs=(Attr("axes", None, _axes_list_attr), Attr("epsilon", 1e-5, _float_attr("epsilon")),
           Attr("center", True, bool_attr("center")), Attr("scale", True, bool_attr("scale"))),
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.layer_norm, "layer_norm", ("axes", "epsilon", "center", "scale")),
)


# ----------------------------------------------------------------------------- batch_norm


def infer_batch_norm(args, attrs):
    """``(output, new moving_mean, new moving_var)``: ``gamma``, ``beta`` and the moving
    statistics are 1-D with ``data``'s channel count (its ``axis`` dimension).

    ``training`` is TVM 0.25's attribute with its default (True): the batch's statistics are
    used and the moving ones updated with ``momentum``. ``training=False`` is the inference
    form: the moving statistics normalize the data and come back unchanged. Both legalize."""
    x = _float_tensor(args[0], "data", "nn.batch_norm")
    params = [tensor_arg(s, w) for s, w in zip(args[1:], ("gamma", "beta", "moving_mean", "moving_var"))]
    channels = None
    if x.ndim >= 0:
        if x.ndim == 0:
            raise OpError("needs data with at least one dimension", "data")
        axis = normalize_axis(attrs["axis"], x.ndim)
        if x.shape is not None:
            channels = x.shape[axis]
    for sinfo, what in zip(params, ("gamma", "beta", "moving_mean", "moving_var")):
        if channels is not None:
            _check_dims(sinfo, [channels], what, "nn.batch_norm", "the data's channels")
        elif sinfo.ndim >= 0 and sinfo.ndim != 1:
            raise OpError(f"{what} must be 1-D, got rank {sinfo.ndim}", what)
    stat = relax.TensorStructInfo([channels] if channels is not None else None, x.dtype, 1)
    return relax.TupleStructInfo([_same(x), stat, stat])


register_op(
    "nn.batch_norm", ("data", "gamma", "beta", "moving_mean", "moving_var"), infer_batch_norm,
    attrs=(Attr("axis", 1, int_attr("axis")), Attr("epsilon", 1e-5, _float_attr("epsilon")),
           Attr("center", True, bool_attr("center")), Attr("scale", True, bool_attr("scale")),
           Attr("momentum", 0.1, _float_attr("momentum")), Attr("training", True, bool_attr("training"))),
    # training=True (the default) reduces: out-elementwise-fusable as TVM's; the inference form
    # (training=False) is a broadcast of the moving statistics (see tests/test_op_nn.py).
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.batch_norm, "batch_norm",
                          ("axis", "epsilon", "center", "scale", "momentum", "training")),
)


# ----------------------------------------------------------------------------- conv2d


def infer_conv2d(args, attrs):
    """NCHW data, OIHW weight: ``C == groups * I``, ``O % groups == 0``; output
    ``(N, O, H', W')`` with ``H' = (H + pads - dilated kernel) // stride + 1`` (> 0)."""
    x, w = tensor_arg(args[0], "data"), tensor_arg(args[1], "weight")
    _check_rank(x, 4, "data", "nn.conv2d")
    _check_rank(w, 4, "weight", "nn.conv2d")
    dtype = _out_dtype(x, w, attrs["out_dtype"], "nn.conv2d")
    groups = attrs["groups"]
    if groups < 1:
        raise OpError(f"groups must be positive, got {groups}", "groups")
    if x.shape is None or w.shape is None:
        return relax.TensorStructInfo(None, dtype, 4)
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    if static_dim(o) is not None and static_dim(o) % groups:
        raise OpError(f"the weight's {static_dim(o)} output channels do not divide into {groups} groups", "weight")
    if static_dim(c) is not None and static_dim(i) is not None and static_dim(c) != groups * static_dim(i):
        raise OpError(
            f"data has {static_dim(c)} channels but weight expects {static_dim(i)} per group "
            f"x {groups} group(s) = {groups * static_dim(i)}", "weight")
    if static_dim(kh) is None or static_dim(kw) is None:
        return relax.TensorStructInfo(None, dtype, 4)
    pt, pl, pb, pr = attrs["padding"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    oh = _positive_dim(_dim(topi.nn.conv_out_dim(h, static_dim(kh), sh, dh, pt, pb)), "height", "nn.conv2d")
    ow = _positive_dim(_dim(topi.nn.conv_out_dim(wd, static_dim(kw), sw, dw, pl, pr)), "width", "nn.conv2d")
    return relax.TensorStructInfo([n, o, oh, ow], dtype)


register_op(
    "nn.conv2d", ("data", "weight"), infer_conv2d,
    attrs=(Attr("strides", [1, 1], _pair_attr("strides")), Attr("padding", [0, 0, 0, 0], _padding_attr),
           Attr("dilation", [1, 1], _pair_attr("dilation")), Attr("groups", 1, int_attr("groups")),
           Attr("data_layout", "NCHW", _layout_attr("data_layout", "NCHW")),
           Attr("kernel_layout", "OIHW", _layout_attr("kernel_layout", "OIHW")),
           Attr("out_layout", "NCHW", _layout_attr("out_layout", "NCHW")),
           Attr("out_dtype", "void", dtype_attr)),
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.conv2d, "conv2d", ("strides", "padding", "dilation", "groups", "data_layout",
                                                     "kernel_layout", "out_layout", "out_dtype")),
)


# ----------------------------------------------------------------------------- pooling


def _infer_pool2d(name: str):
    def infer(args, attrs):
        x = tensor_arg(args[0], "data")
        _check_rank(x, 4, "data", name)
        if x.shape is None:
            return relax.TensorStructInfo(None, x.dtype, 4)
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (dh, dw) = attrs["pool_size"], attrs["strides"], attrs["dilation"]
        pt, pl, pb, pr = attrs["padding"]
        ceil = attrs["ceil_mode"]
        oh = topi.nn.pool_out_dim(h, kh, sh, dh, pt, pb, ceil)
        ow = topi.nn.pool_out_dim(w, kw, sw, dw, pl, pr, ceil)
        if oh is None or ow is None:  # ceil mode on a symbolic extent: see pool_out_dim
            return relax.TensorStructInfo(None, x.dtype, 4)
        oh = _positive_dim(_dim(oh), "height", name)
        ow = _positive_dim(_dim(ow), "width", name)
        return relax.TensorStructInfo([n, c, oh, ow], x.dtype)
    return infer


def _pool_legalizer(kind: str):
    def pool(data, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout):
        return topi.nn.pool2d(data, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad)
    pool.__name__ = f"{kind}_pool2d"
    return pool


_POOL_ATTRS = ("pool_size", "strides", "dilation", "padding", "ceil_mode", "count_include_pad", "layout", "out_layout")
for _kind in ("max", "avg"):
    register_op(
        f"nn.{_kind}_pool2d", ("data",), _infer_pool2d(f"nn.{_kind}_pool2d"),
        attrs=(Attr("pool_size", [1, 1], _pair_attr("pool_size")), Attr("strides", [1, 1], _pair_attr("strides")),
               Attr("dilation", [1, 1], _pair_attr("dilation")), Attr("padding", [0, 0, 0, 0], _padding_attr),
               Attr("ceil_mode", False, bool_attr("ceil_mode")),
               Attr("count_include_pad", False, bool_attr("count_include_pad")),
               Attr("layout", "NCHW", _layout_attr("layout", "NCHW")),
               Attr("out_layout", "NCHW", _layout_attr("out_layout", "NCHW"))),
        pattern="out_ewise_fusable",
        legalize=te_legalizer(_pool_legalizer(_kind), f"{_kind}_pool2d", _POOL_ATTRS),
    )


def infer_adaptive_avg_pool2d(args, attrs):
    """``(N, C) + output_size`` (the input's H, W when ``output_size`` is None)."""
    x = tensor_arg(args[0], "data")
    _check_rank(x, 4, "data", "nn.adaptive_avg_pool2d")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, 4)
    size = attrs["output_size"]
    n, c, h, w = x.shape
    oh, ow = (h, w) if size is None else (_dim(size[0]), _dim(size[1]))
    return relax.TensorStructInfo([n, c, oh, ow], x.dtype)


def _adaptive_avg_pool2d(data, output_size, layout, out_layout):
    size = output_size if output_size is not None else [int(d) for d in data.shape[2:]]
    return topi.nn.adaptive_pool2d(data, size, "avg")


def _legalize_adaptive(bb, call):
    """Left as is when ``output_size`` is None and the input's H/W are symbolic (the output
    extents must be constants to build the windows)."""
    x = relax.struct_info_of(call.args[0])
    if call.attrs["output_size"] is None and x.shape is not None and not all(
            isinstance(d, tir.IntImm) for d in x.shape[2:]):
        return None
    return _adaptive_te(bb, call)


_adaptive_te = te_legalizer(_adaptive_avg_pool2d, "adaptive_avg_pool2d", ("output_size", "layout", "out_layout"))

register_op(
    "nn.adaptive_avg_pool2d", ("data",), infer_adaptive_avg_pool2d,
    attrs=(Attr("output_size", None, _output_size_attr), Attr("layout", "NCHW", _layout_attr("layout", "NCHW")),
           Attr("out_layout", "NCHW", _layout_attr("out_layout", "NCHW"))),
    pattern="out_ewise_fusable", legalize=_legalize_adaptive,
)


# ----------------------------------------------------------------------------- dropout


def infer_dropout(args, attrs):
    """``(output, mask)``, both shaped like ``data`` (TVM's)."""
    x = tensor_arg(args[0], "data")
    return relax.TupleStructInfo([_same(x), _same(x)])


register_op(
    "nn.dropout", ("data",), infer_dropout, attrs=(Attr("rate", 0.5, _rate_attr),),
    # TVM leaves dropout to be removed before building; here it legalizes to its inference form,
    # the data unchanged and an all-ones mask.
    pattern="elementwise",
    legalize=te_legalizer(topi.nn.dropout, "dropout", ("rate",)),
)


# ----------------------------------------------------------------------------- dense


def infer_dense(args, attrs):
    """``nn.dense(x, w)`` of older Relax (seed 002): ``x @ w.T``, weight as (units, in)."""
    x, w = tensor_arg(args[0], "data"), tensor_arg(args[1], "weight")
    dtype = _out_dtype(x, w, attrs["out_dtype"], "nn.dense")
    if x.ndim == 0:
        raise OpError("data must have at least one dimension", "data")
    if w.ndim >= 0 and w.ndim != 2:
        raise OpError(f"weight must be 2-D (units, in), got rank {w.ndim}", "weight")
    if x.shape is None or w.shape is None:
        return relax.TensorStructInfo(None, dtype, x.ndim)
    if not dim_equal(x.shape[-1], w.shape[1]) and static_dim(x.shape[-1]) is not None and static_dim(w.shape[1]) is not None:
        raise OpError(
            f"reduction dimensions differ: {x.shape[-1].value} (last of data) vs "
            f"{w.shape[1].value} (second of weight)", "weight"
        )
    return relax.TensorStructInfo(list(x.shape[:-1]) + [w.shape[0]], dtype)


register_op(
    "nn.dense", ("data", "weight"), infer_dense,
    attrs=(Attr("out_dtype", "void", dtype_attr),), pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.dense, "dense", ("out_dtype",)),
)
