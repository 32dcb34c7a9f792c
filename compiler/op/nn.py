"""Neural-network ops (``R.nn.*``): softmax, normalization (layer, rms, group, batch),
convolution (1-D, 2-D, 3-D) and transposed convolution (1-D, 2-D, 3-D, I-O-spatial weights),
pooling (1-D, 2-D, adaptive 2-D), padding, attention, dropout, dense, nll_loss,
cross_entropy_with_logits, batch_flatten.

Convolutions and pooling take any layout of their axes, as TVM's do: ``NHWC``, ``NWC``,
``HWIO`` kernels, packed ``NCHW16c``, and an ``out_layout`` of its own (the data's when None,
filled in by the op's ``canonicalize`` so that it prints). Inference and legalization work in
the canonical order (``NCHW`` data, ``OIHW`` kernels): the shapes are converted with
`topi.nn.layout_to_primal_shape` / `primal_to_layout_shape`, the TE operands with
`topi.nn.to_primal` / `from_primal` (``T_layout_trans`` stages around the NCHW kernel, where
TVM has kernels indexing each layout in place; the values are the same).

Attributes, defaults and their printing order are TVM's (``R.nn.conv2d(x, w,
strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, data_layout="NCHW",
kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")``); shorthand values (an int
stride, a 2-element padding) are normalized to the lists TVM prints. The ops added from TVM
0.27 (pad, attention, rms_norm, group_norm, conv1d) print its attributes in its order, except
that ``out_dtype`` is "void" when unset as conv2d's is here (0.27 prints None), and
attention's ``scale`` is a plain float (0.27 prints ``T.float32(0.5)``). Inference checks
ranks, channel counts, axes and output sizes, raising `OpError` naming the argument or
attribute at fault. Legalization is ``bb.call_te`` of the TE definitions in
``compiler/topi/nn.py``.

The elementwise activations (``nn.relu``, ``nn.gelu``, ``nn.gelu_tanh``, ``nn.silu``,
``nn.leakyrelu``, ``nn.softplus``, ``nn.prelu``) are declared in ``elementwise.py``. Where TVM's
Python function orders its parameters differently from its printer (pad, pooling), the op's
``py_signature`` gives the Python order, which the parser follows for positional arguments.
"""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from .common import (REQUIRED, bool_attr, dim_equal, dtype_attr, fmt_shape, int_attr, is_int, normalize_axis,
                     same_dtype, shapes_known, static_dim, te_legalizer, tensor_arg)
from .registry import Arg, Attr, OpError, register_op

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


def _spatial_attr(name: str, nsp: int):
    """Strides, dilation, pool sizes of ``nsp`` spatial axes: an int or a list of 1 or ``nsp``
    ints, normalized to ``nsp`` values, positive."""
    def convert(v):
        vals = _ints(name, v, tuple(sorted({1, nsp})), 1)
        return vals * nsp if len(vals) == 1 else vals
    return convert


def _pair_attr(name: str):
    """An int or 1/2 ints, normalized to ``[h, w]``, positive."""
    return _spatial_attr(name, 2)


def _padding_attr(nsp: int):
    """Padding of ``nsp`` spatial axes: an int, ``nsp`` ints (each on both sides) or ``2 * nsp``
    (those before each axis, then those after), normalized to the last form as TVM does
    (``[top, left, bottom, right]`` in 2-D); in 2-D also 2 ints (height, width)."""
    lengths = tuple(sorted({1, nsp, 2 * nsp} | ({2} if nsp == 2 else set())))

    def convert(v):
        vals = _ints("padding", v, lengths, 0)
        if len(vals) == 1:
            return vals * 2 * nsp
        if len(vals) == nsp:
            return vals * 2
        return vals
    return convert


def _layout_attr(name: str, primal: str):
    """A layout of the axes of ``primal`` (``NCHW``: ``NHWC``, ``NCHW16c``...); inference and
    legalization compute in ``primal`` order (see `topi.nn.parse_layout`)."""
    def convert(v):
        if not isinstance(v, str):
            raise OpError(f"{name} must be a string, not {v!r}", name)
        try:
            topi.nn.parse_layout(v, primal)
        except ValueError as err:
            raise OpError(f"{name}: {err}", name) from None
        return v
    return convert


def _required(convert, name: str):
    """``convert`` for an attribute that has no default."""
    def check(v):
        if v is REQUIRED:
            raise OpError(f"{name} is required", name)
        return convert(v)
    return check


def _optional_layout_attr(name: str, primal: str):
    """An output layout: None means the data's (TVM's default), filled in by the op's
    ``canonicalize`` so that it prints as that layout."""
    convert = _layout_attr(name, primal)
    return lambda v: None if v is None else convert(v)


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


def _normalized_axes(x: relax.TensorStructInfo, axes: list) -> list:
    """``axes`` normalized for ``x``'s rank, each at most once (OpError naming ``axes``)."""
    out = [normalize_axis(a, x.ndim, "axes") for a in axes]
    if len(set(out)) != len(out):
        raise OpError(f"axes {axes} name an axis twice", "axes")
    return out


def _norm_params(x: relax.TensorStructInfo, names: tuple, args: list) -> list:
    """The ``(sinfo, name)`` of a norm's parameter tensors (gamma, beta, moving statistics),
    each of ``x``'s dtype: the norm computes in one dtype, and TVM's inference refuses a
    float16 gamma on float32 data rather than letting the kernel convert it silently."""
    params = [(tensor_arg(sinfo, what), what) for sinfo, what in zip(args, names)]
    for sinfo, what in params:
        same_dtype(sinfo, what, x)
    return params


def _check_norm_params(x: relax.TensorStructInfo, axes: list, params, op: str) -> None:
    """Each ``(sinfo, name)`` of ``params`` has the shape of ``x`` over ``axes`` (sorted)."""
    expected = [x.shape[a] for a in sorted(axes)] if x.shape is not None else None
    for sinfo, what in params:
        if sinfo.ndim >= 0 and sinfo.ndim != len(axes):
            raise OpError(f"{what} must have {len(axes)} dimension(s) (the normalized axes), "
                          f"got rank {sinfo.ndim}", what)
        if expected is not None:
            _check_dims(sinfo, expected, what, op, "the data's normalized axes")


def infer_layer_norm(args, attrs):
    """``gamma``/``beta`` have the shape of ``data`` over ``axes``; the result is ``data``'s."""
    x = _float_tensor(args[0], "data", "nn.layer_norm")
    params = _norm_params(x, ("gamma", "beta"), args[1:])
    if x.ndim >= 0:
        _check_norm_params(x, _normalized_axes(x, attrs["axes"]), params, "nn.layer_norm")
    return _same(x)


register_op(
    "nn.layer_norm", ("data", "gamma", "beta"), infer_layer_norm,
    attrs=(Attr("axes", None, _axes_list_attr), Attr("epsilon", 1e-5, _float_attr("epsilon")),
           Attr("center", True, bool_attr("center")), Attr("scale", True, bool_attr("scale"))),
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.layer_norm, "layer_norm", ("axes", "epsilon", "center", "scale")),
)


# ----------------------------------------------------------------------------- rms_norm, group_norm


def infer_rms_norm(args, attrs):
    """``weight`` has the shape of ``data`` over ``axes``; the result is ``data``'s."""
    x = _float_tensor(args[0], "data", "nn.rms_norm")
    params = _norm_params(x, ("weight",), args[1:])
    if x.ndim >= 0:
        _check_norm_params(x, _normalized_axes(x, attrs["axes"]), params, "nn.rms_norm")
    return _same(x)


register_op(
    "nn.rms_norm", ("data", "weight"), infer_rms_norm,
    attrs=(Attr("axes", [-1], _axes_list_attr), Attr("epsilon", 1e-5, _float_attr("epsilon"))),
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.rms_norm, "rms_norm", ("axes", "epsilon")),
)


def infer_group_norm(args, attrs):
    """``num_groups`` groups of the channels (axis ``channel_axis``, a multiple of
    ``num_groups``), each normalized over its channels and ``axes`` (which may not hold the
    channel axis); ``gamma``/``beta`` are 1-D with one value per channel."""
    x = _float_tensor(args[0], "data", "nn.group_norm")
    params = _norm_params(x, ("gamma", "beta"), args[1:])
    groups = attrs["num_groups"]
    if x.ndim < 0:
        return _same(x)
    caxis = normalize_axis(attrs["channel_axis"], x.ndim, "channel_axis")
    axes = _normalized_axes(x, attrs["axes"])
    if caxis in axes:
        raise OpError(f"axes {attrs['axes']} hold the channel axis {caxis}; the group's channels are "
                      "normalized together already", "axes")
    channels = x.shape[caxis] if x.shape is not None else None
    if static_dim(channels) is not None and static_dim(channels) % groups:
        raise OpError(f"the data's {static_dim(channels)} channels do not divide into {groups} groups", "num_groups")
    for sinfo, what in params:
        if channels is not None:
            _check_dims(sinfo, [channels], what, "nn.group_norm", "the data's channels")
        elif sinfo.ndim >= 0 and sinfo.ndim != 1:
            raise OpError(f"{what} must be 1-D, got rank {sinfo.ndim}", what)
    return _same(x)


register_op(
    "nn.group_norm", ("data", "gamma", "beta"), infer_group_norm,
    attrs=(Attr("num_groups", REQUIRED, int_attr("num_groups", 1)),
           Attr("channel_axis", REQUIRED, int_attr("channel_axis")),
           Attr("axes", REQUIRED, _required(_axes_list_attr, "axes")),
           Attr("epsilon", 1e-5, _float_attr("epsilon")),
           Attr("center", True, bool_attr("center")), Attr("scale", True, bool_attr("scale"))),
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.group_norm, "group_norm",
                          ("num_groups", "channel_axis", "axes", "epsilon", "center", "scale")),
)


# ----------------------------------------------------------------------------- batch_norm


def infer_batch_norm(args, attrs):
    """``(output, new moving_mean, new moving_var)``: ``gamma``, ``beta`` and the moving
    statistics are 1-D with ``data``'s channel count (its ``axis`` dimension).

    ``training`` is TVM 0.25's attribute with its default (True): the batch's statistics are
    used and the moving ones updated with ``momentum``. ``training=False`` is the inference
    form: the moving statistics normalize the data and come back unchanged. Both legalize."""
    x = _float_tensor(args[0], "data", "nn.batch_norm")
    params = _norm_params(x, ("gamma", "beta", "moving_mean", "moving_var"), args[1:])
    channels = None
    if x.ndim >= 0:
        if x.ndim == 0:
            raise OpError("needs data with at least one dimension", "data")
        axis = normalize_axis(attrs["axis"], x.ndim)
        if x.shape is not None:
            channels = x.shape[axis]
    for sinfo, what in params:
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
    # (training=False) is a broadcast of the moving statistics (see tests/compiler/test_op_nn.py).
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.batch_norm, "batch_norm",
                          ("axis", "epsilon", "center", "scale", "momentum", "training")),
)


# ----------------------------------------------------------------------------- layouts


def _rank(layout: str, primal: str) -> int:
    return len(topi.nn.parse_layout(layout, primal))


def _primal_shape(x: relax.TensorStructInfo, layout: str, primal: str):
    """``x``'s shape in ``primal`` order (packed axes unpacked), None when unknown."""
    return None if x.shape is None else topi.nn.layout_to_primal_shape(x.shape, layout, primal)


def _in_layout(shape: list, layout: str, primal: str, what: str = "out_layout") -> list:
    """A ``primal`` shape in ``layout`` (OpError naming ``what`` when a packed factor does not
    divide its axis)."""
    try:
        return [_dim(d) for d in topi.nn.primal_to_layout_shape(shape, layout, primal)]
    except ValueError as err:
        raise OpError(str(err), what) from None


def _out_layout_default(key: str):
    """``canonicalize``: an output layout left None is the data's (TVM's default), so the call
    prints it."""
    def canonicalize(args, attrs):
        if attrs["out_layout"] is None:
            attrs["out_layout"] = attrs[key]
        return args, attrs
    return canonicalize


# ----------------------------------------------------------------------------- conv1d, conv2d, conv3d

_SPATIAL_NAMES = {"D": "depth", "H": "height", "W": "width"}


def _conv_operands(args, attrs, primal: str, kernel_primal: str, op: str) -> tuple:
    """(data, weight, data/kernel/out layouts, output dtype) of a (transposed) convolution call,
    the ranks checked against the layouts."""
    x, w = tensor_arg(args[0], "data"), tensor_arg(args[1], "weight")
    dl, kl, ol = attrs["data_layout"], attrs["kernel_layout"], attrs["out_layout"]
    _check_rank(x, _rank(dl, primal), "data", op)
    _check_rank(w, _rank(kl, kernel_primal), "weight", op)
    return x, w, dl, kl, ol, _out_dtype(x, w, attrs["out_dtype"], op)


def _infer_conv(primal: str, kernel_primal: str):
    """Inference of a convolution whose data, weight and output are in the call's layouts,
    computed in the ``primal`` (``NCHW``) and ``kernel_primal`` (``OIHW``) orders: ``C ==
    groups * I``, ``O % groups == 0``; output ``(N, O, spatial')`` with each ``size' = (size +
    pads - dilated kernel) // stride + 1`` (> 0), written in ``out_layout``."""
    nsp = len(primal) - 2
    op = f"nn.conv{nsp}d"

    def infer(args, attrs):
        x, w, dl, kl, ol, dtype = _conv_operands(args, attrs, primal, kernel_primal, op)
        groups = attrs["groups"]
        if groups < 1:
            raise OpError(f"groups must be positive, got {groups}", "groups")
        if x.shape is None or w.shape is None:
            return relax.TensorStructInfo(None, dtype, _rank(ol, primal))
        n, c, *sizes = _primal_shape(x, dl, primal)
        o, i, *kernel = _primal_shape(w, kl, kernel_primal)
        if static_dim(o) is not None and static_dim(o) % groups:
            raise OpError(f"the weight's {static_dim(o)} output channels do not divide into {groups} groups", "weight")
        if static_dim(c) is not None and static_dim(i) is not None and static_dim(c) != groups * static_dim(i):
            raise OpError(
                f"data has {static_dim(c)} channels but weight expects {static_dim(i)} per group "
                f"x {groups} group(s) = {groups * static_dim(i)}", "weight")
        if any(static_dim(k) is None for k in kernel):
            return relax.TensorStructInfo(None, dtype, _rank(ol, primal))
        pads = attrs["padding"]
        out = [_positive_dim(_dim(topi.nn.conv_out_dim(size, static_dim(k), s, d, pads[a], pads[nsp + a])),
                             _SPATIAL_NAMES[primal[2 + a]], op)
               for a, (size, k, s, d) in enumerate(zip(sizes, kernel, attrs["strides"], attrs["dilation"]))]
        return relax.TensorStructInfo(_in_layout([n, o] + out, ol, primal), dtype)

    infer.__name__ = f"infer_conv{nsp}d"
    return infer


infer_conv2d = _infer_conv("NCHW", "OIHW")


def _conv_attrs(primal: str, kernel_primal: str, transpose: bool = False) -> tuple:
    """The attributes of an ``nsp``-D convolution (transposed: with ``output_padding``), in
    TVM's printing order; layouts any of ``primal``'s / ``kernel_primal``'s."""
    nsp = len(primal) - 2
    ones = [1] * nsp
    extra = (Attr("output_padding", [0] * nsp, _output_padding_attr(nsp)),) if transpose else ()
    return ((Attr("strides", ones, _spatial_attr("strides", nsp)), Attr("padding", [0] * 2 * nsp, _padding_attr(nsp)))
            + extra
            + (Attr("dilation", ones, _spatial_attr("dilation", nsp)), Attr("groups", 1, int_attr("groups", 1)),
               Attr("data_layout", primal, _layout_attr("data_layout", primal)),
               Attr("kernel_layout", kernel_primal, _layout_attr("kernel_layout", kernel_primal)),
               Attr("out_layout", None, _optional_layout_attr("out_layout", primal)),
               Attr("out_dtype", "void", dtype_attr)))


_CONV_ATTRS = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_layout", "out_dtype")

for _primal, _kernel, _fn in (("NCW", "OIW", topi.nn.conv1d), ("NCHW", "OIHW", topi.nn.conv2d),
                              ("NCDHW", "OIDHW", topi.nn.conv3d)):
    _nsp = len(_primal) - 2
    register_op(
        f"nn.conv{_nsp}d", ("data", "weight"), _infer_conv(_primal, _kernel), attrs=_conv_attrs(_primal, _kernel),
        pattern="out_ewise_fusable", canonicalize=_out_layout_default("data_layout"),
        legalize=te_legalizer(_fn, f"conv{_nsp}d", _CONV_ATTRS),
    )


# ----------------------------------------------------------------------------- conv{1,2,3}d_transpose


def _infer_conv_transpose(primal: str, kernel_primal: str):
    """Inference of a transposed convolution, computed in the ``primal`` (``NCHW``) and
    ``kernel_primal`` (``IOHW``) orders: ``C == I`` (a multiple of ``groups``), output ``(N, O *
    groups, spatial')`` with ``size' = (size - 1) * stride - pads + dilation * (k - 1) +
    output_padding + 1`` (> 0); ``output_padding`` must be below the stride or the dilation
    (PyTorch's rule: a larger one would add outputs no input reaches)."""
    nsp = len(primal) - 2
    op = f"nn.conv{nsp}d_transpose"

    def infer(args, attrs):
        x, w, dl, kl, ol, dtype = _conv_operands(args, attrs, primal, kernel_primal, op)
        groups = attrs["groups"]
        for a, (p, s, d) in enumerate(zip(attrs["output_padding"], attrs["strides"], attrs["dilation"])):
            if p >= max(s, d):
                raise OpError(f"output_padding {attrs['output_padding']} must be smaller than the stride or the "
                              f"dilation on each axis (axis {a}: stride {s}, dilation {d})", "output_padding")
        if x.shape is None or w.shape is None:
            return relax.TensorStructInfo(None, dtype, _rank(ol, primal))
        n, c, *sizes = _primal_shape(x, dl, primal)
        i, o, *kernel = _primal_shape(w, kl, kernel_primal)
        if static_dim(c) is not None and static_dim(c) % groups:
            raise OpError(f"the data's {static_dim(c)} channels do not divide into {groups} groups", "groups")
        if static_dim(c) is not None and static_dim(i) is not None and static_dim(c) != static_dim(i):
            raise OpError(f"data has {static_dim(c)} channels but weight (in, out / groups, ...) expects "
                          f"{static_dim(i)}", "weight")
        if any(static_dim(k) is None for k in kernel):
            return relax.TensorStructInfo(None, dtype, _rank(ol, primal))
        pads = attrs["padding"]
        out = [_positive_dim(_dim(topi.nn.conv_transpose_out_dim(
            size, static_dim(k), attrs["strides"][a], attrs["dilation"][a], pads[a], pads[nsp + a],
            attrs["output_padding"][a])), _SPATIAL_NAMES[primal[2 + a]], op)
            for a, (size, k) in enumerate(zip(sizes, kernel))]
        channels = _dim(static_dim(o) * groups) if static_dim(o) is not None else topi.transform.mul(o, groups)
        return relax.TensorStructInfo(_in_layout([n, channels] + out, ol, primal), dtype)

    infer.__name__ = f"infer_conv{nsp}d_transpose"
    return infer


def _output_padding_attr(count: int):
    def convert(v):
        vals = _ints("output_padding", v, (1, count) if count > 1 else (1,), 0)
        return vals * count if len(vals) == 1 else vals
    return convert


_CONV_TRANSPOSE_ATTRS = ("strides", "padding", "output_padding", "dilation", "groups", "data_layout",
                         "kernel_layout", "out_layout", "out_dtype")

for _primal, _kernel, _fn in (("NCW", "IOW", topi.nn.conv1d_transpose), ("NCHW", "IOHW", topi.nn.conv2d_transpose),
                              ("NCDHW", "IODHW", topi.nn.conv3d_transpose)):
    _nsp = len(_primal) - 2
    register_op(
        f"nn.conv{_nsp}d_transpose", ("data", "weight"), _infer_conv_transpose(_primal, _kernel),
        attrs=_conv_attrs(_primal, _kernel, transpose=True), pattern="out_ewise_fusable",
        canonicalize=_out_layout_default("data_layout"),
        legalize=te_legalizer(_fn, f"conv{_nsp}d_transpose", _CONV_TRANSPOSE_ATTRS),
    )


# ----------------------------------------------------------------------------- pooling


def _infer_pool(primal: str):
    """Inference of pooling over the spatial axes of ``primal`` (``NCW``, ``NCHW``), the data
    in ``layout`` and the result in ``out_layout``: each spatial output extent from
    `topi.nn.pool_out_dim` (unknown in ceil mode on some symbolic extents)."""
    nsp = len(primal) - 2
    name = f"nn.pool{nsp}d"

    def infer(args, attrs):
        x = tensor_arg(args[0], "data")
        layout, out_layout = attrs["layout"], attrs["out_layout"]
        _check_rank(x, _rank(layout, primal), "data", name)
        unknown = relax.TensorStructInfo(None, x.dtype, _rank(out_layout, primal))
        if x.shape is None:
            return unknown
        shape = _primal_shape(x, layout, primal)
        pads = attrs["padding"]
        out = []
        for a in range(nsp):
            o = topi.nn.pool_out_dim(shape[2 + a], attrs["pool_size"][a], attrs["strides"][a],
                                     attrs["dilation"][a], pads[a], pads[nsp + a], attrs["ceil_mode"])
            if o is None:  # ceil mode on a symbolic extent: see pool_out_dim
                return unknown
            out.append(_positive_dim(_dim(o), _SPATIAL_NAMES[primal[2 + a]], name))
        return relax.TensorStructInfo(_in_layout(list(shape[:2]) + out, out_layout, primal), x.dtype)

    infer.__name__ = f"infer_pool{nsp}d"
    return infer


infer_pool2d = _infer_pool("NCHW")


def _pool_legalizer(kind: str, nsp: int):
    fn = topi.nn.pool2d if nsp == 2 else topi.nn.pool1d

    def pool(data, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout):
        return fn(data, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad, layout, out_layout)
    pool.__name__ = f"{kind}_pool{nsp}d"
    return pool


def _pool_attrs(primal: str, count_include_pad: bool = False) -> tuple:
    """Pooling attributes in TVM's printing order, for the spatial axes of ``primal``."""
    nsp = len(primal) - 2
    ones = [1] * nsp
    return (Attr("pool_size", ones, _spatial_attr("pool_size", nsp)),
            Attr("strides", ones, _spatial_attr("strides", nsp)),
            Attr("dilation", ones, _spatial_attr("dilation", nsp)), Attr("padding", [0] * 2 * nsp, _padding_attr(nsp)),
            Attr("ceil_mode", False, bool_attr("ceil_mode")),
            Attr("count_include_pad", count_include_pad, bool_attr("count_include_pad")),
            Attr("layout", primal, _layout_attr("layout", primal)),
            Attr("out_layout", None, _optional_layout_attr("out_layout", primal)))


POOL2D_ATTRS = _pool_attrs("NCHW")
POOL_ATTR_NAMES = tuple(a.name for a in POOL2D_ATTRS)
# TVM's Python functions take padding before dilation; its printer writes dilation first.
POOL_SIGNATURE = ("data", "pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad", "layout",
                  "out_layout")
# An output layout left None is the data's.
canonicalize_pool = _out_layout_default("layout")
for _kind in ("max", "avg"):
    register_op(
        f"nn.{_kind}_pool2d", ("data",), infer_pool2d, attrs=POOL2D_ATTRS, canonicalize=canonicalize_pool,
        py_signature=POOL_SIGNATURE, pattern="out_ewise_fusable",
        legalize=te_legalizer(_pool_legalizer(_kind, 2), f"{_kind}_pool2d", POOL_ATTR_NAMES),
    )
    register_op(
        # TVM's avg_pool1d counts the padding by default (its avg_pool2d does not).
        f"nn.{_kind}_pool1d", ("data",), _infer_pool("NCW"), attrs=_pool_attrs("NCW", _kind == "avg"),
        canonicalize=canonicalize_pool, py_signature=POOL_SIGNATURE, pattern="out_ewise_fusable",
        legalize=te_legalizer(_pool_legalizer(_kind, 1), f"{_kind}_pool1d", POOL_ATTR_NAMES),
    )


def infer_adaptive_avg_pool2d(args, attrs):
    """``(N, C) + output_size`` (the input's H, W when ``output_size`` is None), the data in
    ``layout`` and the result in ``out_layout``."""
    x = tensor_arg(args[0], "data")
    layout, out_layout = attrs["layout"], attrs["out_layout"]
    _check_rank(x, _rank(layout, "NCHW"), "data", "nn.adaptive_avg_pool2d")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, _rank(out_layout, "NCHW"))
    size = attrs["output_size"]
    n, c, h, w = _primal_shape(x, layout, "NCHW")
    oh, ow = (h, w) if size is None else (_dim(size[0]), _dim(size[1]))
    return relax.TensorStructInfo(_in_layout([n, c, oh, ow], out_layout, "NCHW"), x.dtype)


def _adaptive_avg_pool2d(data, output_size, layout, out_layout):
    return topi.nn.adaptive_pool2d(data, output_size, "avg", layout, out_layout)


def _legalize_adaptive(bb, call):
    """Left as is when ``output_size`` is None and the input's H/W are symbolic (the output
    extents must be constants to build the windows)."""
    x = relax.struct_info_of(call.args[0])
    if call.attrs["output_size"] is None and x.shape is not None and not all(
            isinstance(d, tir.IntImm) for d in _primal_shape(x, call.attrs["layout"], "NCHW")[2:]):
        return None
    return _adaptive_te(bb, call)


_adaptive_te = te_legalizer(_adaptive_avg_pool2d, "adaptive_avg_pool2d", ("output_size", "layout", "out_layout"))

register_op(
    "nn.adaptive_avg_pool2d", ("data",), infer_adaptive_avg_pool2d,
    attrs=(Attr("output_size", None, _output_size_attr), Attr("layout", "NCHW", _layout_attr("layout", "NCHW")),
           Attr("out_layout", None, _optional_layout_attr("out_layout", "NCHW"))),
    canonicalize=canonicalize_pool, pattern="out_ewise_fusable", legalize=_legalize_adaptive,
)


# ----------------------------------------------------------------------------- pad


PAD_MODES = {"constant": (topi.nn.pad, "pad"), "reflect": (topi.nn.reflect_pad, "reflect_pad"),
             "edge": (topi.nn.edge_pad, "edge_pad")}


def _pad_width_attr(v):
    if not isinstance(v, (list, tuple)) or not all(is_int(x) for x in v):
        raise OpError(f"pad_width must be a list of integers (before and after each axis), not {v!r}", "pad_width")
    if any(x < 0 for x in v):
        raise OpError(f"pad_width must be non-negative, got {list(v)}", "pad_width")
    return list(v)


def _pad_mode_attr(v):
    if v not in PAD_MODES:
        raise OpError(f"pad_mode must be one of {', '.join(repr(m) for m in PAD_MODES)}, not {v!r}", "pad_mode")
    return v


def infer_pad(args, attrs):
    """``pad_width`` is ``[before_0, after_0, before_1, after_1, ...]`` (TVM's flat form); each
    dimension grows by its two pads. Reflection needs pads smaller than their dimension."""
    x = tensor_arg(args[0], "data")
    width = attrs["pad_width"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, len(width) // 2)
    if len(width) != 2 * x.ndim:
        raise OpError(f"pad_width needs 2 values per axis ({2 * x.ndim} for rank {x.ndim}), got {len(width)}",
                      "pad_width")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    shape = []
    for axis, d in enumerate(x.shape):
        before, after = width[2 * axis], width[2 * axis + 1]
        size = static_dim(d)
        if attrs["pad_mode"] == "reflect" and size is not None and max(before, after) >= size:
            raise OpError(f"reflect padding of {max(before, after)} on axis {axis} needs the axis to have more "
                          f"than {max(before, after)} elements, it has {size}", "pad_width")
        if attrs["pad_mode"] == "edge" and size == 0 and (before or after):
            raise OpError(f"edge padding needs a non-empty axis {axis}", "pad_width")
        shape.append(_dim(topi.transform.add(d, before + after)))
    return relax.TensorStructInfo(shape, x.dtype)


def legalize_pad(bb, call):
    if not shapes_known(call):
        return None
    width, mode = call.attrs["pad_width"], call.attrs["pad_mode"]
    fn, name = PAD_MODES[mode]
    before, after = width[0::2], width[1::2]
    if mode == "constant":
        return bb.call_te(fn, call.args[0], before, after, call.attrs["pad_value"], primfunc_name_hint=name)
    return bb.call_te(fn, call.args[0], before, after, primfunc_name_hint=name)


register_op(
    "nn.pad", ("data",), infer_pad,
    attrs=(Attr("pad_width", REQUIRED, _required(_pad_width_attr, "pad_width")),
           Attr("pad_value", 0.0, _float_attr("pad_value")), Attr("pad_mode", "constant", _pad_mode_attr)),
    # TVM's Python signature orders pad_mode before pad_value; its printer the other way round.
    py_signature=("data", "pad_width", "pad_mode", "pad_value"),
    pattern="injective", legalize=legalize_pad,
)


# ----------------------------------------------------------------------------- attention


def _optional_float_attr(name: str):
    convert = _float_attr(name)
    return lambda v: None if v is None else convert(v)


def _causal_mask_attr(v):
    if v not in (None, "TopLeft", "BottomRight"):
        raise OpError(f"causal_mask must be None, \"TopLeft\" or \"BottomRight\", not {v!r}", "causal_mask")
    return v


def _window_size_attr(v):
    if v is None:
        return None
    return int_attr("window_size", 1)(v)


def _same_dim(a, b, message: str, what: str) -> None:
    """OpError ``message`` (naming ``what``) when two constant dims differ."""
    if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
        raise OpError(message.format(static_dim(a), static_dim(b)), what)


def _check_bias(bias, batch, heads, seq, seq_kv) -> None:
    """The bias is (batch, heads, seq, seq_kv), each of the first three possibly 1 (broadcast)."""
    _check_rank(bias, 4, "bias", "nn.attention")
    if bias.shape is None:
        return
    names = ("batch size", "number of heads", "sequence length")
    for d, want, what in zip(bias.shape[:3], (batch, heads, seq), names):
        if static_dim(d) != 1:
            _same_dim(d, want, f"the bias's {what} is {{}} but the query's is {{}} (nor is it 1)", "bias")
    _same_dim(bias.shape[3], seq_kv, "the bias's last dimension is {} but the key's sequence length is {}", "bias")


def infer_attention(args, attrs):
    """TVM's layout: query (batch, seq, heads, head_dim), key (batch, seq_kv, kv_heads,
    head_dim), value (batch, seq_kv, kv_heads, head_dim_v) -> (batch, seq, heads, head_dim_v).
    ``heads`` must be a multiple of ``kv_heads`` (grouped-query attention when larger)."""
    q, k, v = (_float_tensor(s, w, "nn.attention") for s, w in zip(args, ("query", "key", "value")))
    for sinfo, what in ((q, "query"), (k, "key"), (v, "value")):
        if sinfo.ndim >= 0 and sinfo.ndim != 4:
            raise OpError(f"{what} must be 4-D (batch, sequence, heads, head dimension), got rank {sinfo.ndim}", what)
    dtypes = {s.dtype for s in (q, k, v) if s.dtype}
    if len(dtypes) > 1:
        raise OpError(f"query, key and value dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    if q.shape is None or k.shape is None or v.shape is None:
        return relax.TensorStructInfo(None, q.dtype, 4)
    (b, n, h, d), (bk, m, hk, dk), (bv, mv, hv, dv) = q.shape, k.shape, v.shape
    _same_dim(bk, b, "the key's batch size is {} but the query's is {}", "key")
    _same_dim(bv, b, "the value's batch size is {} but the query's is {}", "value")
    _same_dim(dk, d, "the key's head dimension is {} but the query's is {}", "key")
    _same_dim(mv, m, "the value's sequence length is {} but the key's is {}", "value")
    _same_dim(hv, hk, "the value has {} heads but the key has {}", "value")
    if static_dim(h) is not None and static_dim(hk) is not None and static_dim(h) % static_dim(hk):
        raise OpError(f"the query's {static_dim(h)} heads are not a multiple of the key's {static_dim(hk)}", "key")
    if static_dim(h) is None and not dim_equal(h, hk):
        raise OpError("with a symbolic number of query heads, key and value need the same number", "key")
    if args[3] is not None:
        bias = tensor_arg(args[3], "bias")
        if bias.dtype and q.dtype and bias.dtype != q.dtype:
            raise OpError(f"the bias dtype {bias.dtype} differs from the query's {q.dtype}", "bias")
        _check_bias(bias, b, h, n, m)
    return relax.TensorStructInfo([b, n, h, dv], q.dtype)


def legalize_attention(bb, call):
    """TE attention (``topi.nn.attention``); a sliding ``window_size`` is not legalized (as in
    TVM, whose legalization rejects it), so the call is left for the build to report."""
    if not shapes_known(call) or call.attrs["window_size"] is not None:
        return None
    q, k, v, *rest = call.args
    name = "attention_bias" if rest else "attention"
    return bb.call_te(topi.nn.attention, q, k, v, rest[0] if rest else None, call.attrs["scale"],
                      call.attrs["causal_mask"], primfunc_name_hint=name)


_ATTENTION_ATTRS = (Attr("scale", None, _optional_float_attr("scale")),
                    Attr("causal_mask", None, _causal_mask_attr), Attr("window_size", None, _window_size_attr))

# TVM's relax.op.nn.attention builds R.nn.attention without a bias and R.nn.attention_bias with
# one; both print that way. R.nn.attention(q, k, v, bias) in text (which TVM's parser also takes)
# is the same computation under the first name.
register_op(
    "nn.attention", ("query", "key", "value", Arg("bias", optional=True)), infer_attention,
    attrs=_ATTENTION_ATTRS, pattern="out_ewise_fusable", legalize=legalize_attention,
    dispatch=lambda a: "nn.attention_bias" if a.get("bias") is not None else None,
)
register_op(
    "nn.attention_bias", ("query", "key", "value", "bias"), infer_attention,
    attrs=_ATTENTION_ATTRS, pattern="out_ewise_fusable", legalize=legalize_attention,
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


# ----------------------------------------------------------------------------- nll_loss

_NLL_REDUCTIONS = ("none", "mean", "sum")


def nll_reduction_attr(value):
    if value not in _NLL_REDUCTIONS:
        raise OpError(f"reduction must be \"none\", \"mean\" or \"sum\", not {value!r}", "reduction")
    return value


def infer_nll_loss(args, attrs):
    """The targets' shape (``reduction="none"``) or a scalar, in the predictions' dtype.

    Predictions are ``(C,)`` with a scalar target, or ``(N, C, d1...)`` with targets
    ``(N, d1...)``; the weights, when given, are ``(C,)``."""
    pred, tgt = tensor_arg(args[0], "predictions"), tensor_arg(args[1], "targets")
    if tgt.dtype and not tgt.dtype.startswith(("int", "uint")):
        raise OpError(f"targets must be integers (class indices), not {tgt.dtype}", "targets")
    if pred.ndim == 0:
        raise OpError("predictions must have rank at least 1 (the classes' axis)", "predictions")
    if pred.ndim > 0 and tgt.ndim >= 0 and tgt.ndim != max(pred.ndim - 1, 0):
        raise OpError(f"targets must have rank {max(pred.ndim - 1, 0)} for predictions of rank {pred.ndim}, "
                      f"got rank {tgt.ndim}", "targets")
    classes_axis = 1 if pred.ndim > 1 else 0
    if pred.shape is not None and tgt.shape is not None:
        expected = [d for k, d in enumerate(pred.shape) if k != classes_axis]
        for a, b in zip(expected, tgt.shape):
            if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
                raise OpError(f"targets have shape ({fmt_shape(tgt.shape)}), expected ({fmt_shape(expected)}) for "
                              f"predictions of shape ({fmt_shape(pred.shape)})", "targets")
    if len(args) > 2 and args[2] is not None:
        w = tensor_arg(args[2], "weights")
        if w.ndim >= 0 and w.ndim != 1:
            raise OpError(f"weights must be 1-D (one per class), got rank {w.ndim}", "weights")
        if w.dtype and pred.dtype and w.dtype != pred.dtype:
            raise OpError(f"weights have dtype {w.dtype} but predictions have {pred.dtype}", "weights")
        if w.shape is not None and pred.shape is not None:
            c, wc = static_dim(pred.shape[classes_axis]), static_dim(w.shape[0])
            if c is not None and wc is not None and c != wc:
                raise OpError(f"weights have {wc} classes but predictions have {c}", "weights")
    if attrs["reduction"] != "none":
        return relax.TensorStructInfo([], pred.dtype)
    if tgt.shape is None:
        return relax.TensorStructInfo(None, pred.dtype, tgt.ndim)
    return relax.TensorStructInfo(list(tgt.shape), pred.dtype)


def legalize_nll_loss(bb, call):
    if not shapes_known(call):
        return None
    pred, tgt = call.args[0], call.args[1]
    weights = call.args[2] if len(call.args) > 2 else None
    name = "nll_loss" if weights is not None else "nll_loss_without_weight"
    attrs = {"reduction": call.attrs["reduction"], "ignore_index": call.attrs["ignore_index"]}
    if weights is None:
        return bb.call_te(lambda p, t, **kw: topi.nn.nll_loss(p, t, None, **kw), pred, tgt,
                          primfunc_name_hint=name, **attrs)
    return bb.call_te(topi.nn.nll_loss, pred, tgt, weights, primfunc_name_hint=name, **attrs)


# TVM's ``relax.op.nn.nll_loss(predictions, targets, weights=None, reduction="mean",
# ignore_index=-100)``; PrimFuncs ``nll_loss`` / ``nll_loss_without_weight`` as TVM names them.
# The pattern is the default reduction's ("mean": two reductions, then their quotient); "sum"
# gives a plain reduction, "none" an indexed load (injective).
register_op("nn.nll_loss", ("predictions", "targets", Arg("weights", "tensor", optional=True)), infer_nll_loss,
            attrs=(Attr("reduction", "mean", nll_reduction_attr), Attr("ignore_index", -100, int_attr("ignore_index"))),
            pattern="out_ewise_fusable", legalize=legalize_nll_loss)


# ----------------------------------------------------------------------------- cross_entropy_with_logits


def infer_cross_entropy_with_logits(args, attrs):
    """A scalar in the operands' dtype; predictions and labels have one shape and one dtype
    (TVM's checks)."""
    pred, labels = tensor_arg(args[0], "predictions"), tensor_arg(args[1], "labels")
    if pred.dtype and labels.dtype and pred.dtype != labels.dtype:
        raise OpError(f"predictions and labels dtypes differ ({pred.dtype} and {labels.dtype})", "labels")
    if pred.ndim >= 0 and labels.ndim >= 0 and pred.ndim != labels.ndim:
        raise OpError(f"labels have rank {labels.ndim} but predictions have rank {pred.ndim}", "labels")
    if pred.shape is not None and labels.shape is not None:
        for a, b in zip(pred.shape, labels.shape):
            if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
                raise OpError(f"labels have shape ({fmt_shape(labels.shape)}) but predictions have shape "
                              f"({fmt_shape(pred.shape)})", "labels")
    return relax.TensorStructInfo([], pred.dtype or labels.dtype)


register_op(
    "nn.cross_entropy_with_logits", ("predictions", "labels"), infer_cross_entropy_with_logits,
    pattern="out_ewise_fusable",
    legalize=te_legalizer(topi.nn.cross_entropy_with_logits, "cross_entropy_with_logits"),
)


# ----------------------------------------------------------------------------- batch_flatten


def infer_batch_flatten(args, attrs):
    """``(N, product of the other extents)``: data of rank at least 2 (TVM's check)."""
    x = tensor_arg(args[0], "data")
    if 0 <= x.ndim < 2:
        raise OpError(f"needs data of rank at least 2, got rank {x.ndim}", "data")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, 2)
    return relax.TensorStructInfo([x.shape[0], _dim(topi.transform.product(list(x.shape[1:])))], x.dtype)


# TVM legalizes batch_flatten as a reshape (PrimFunc ``reshape``).
register_op("nn.batch_flatten", ("data",), infer_batch_flatten, pattern="injective",
            legalize=te_legalizer(topi.nn.batch_flatten, "reshape"))
