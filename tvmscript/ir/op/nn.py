"""Neural-network ops (``R.nn.*``): softmax, normalization (layer, rms, group, batch), padding,
attention, dropout, dense, nll_loss, cross_entropy_with_logits, batch_flatten. The
sliding-window ops (convolutions, transposed convolutions, pooling) are `nn_window`'s.

Attributes, defaults and their printing order are TVM's. The ops added from TVM 0.27 (pad,
attention, rms_norm, group_norm, conv1d) print its attributes in its order, except that
``out_dtype`` is "void" when unset as conv2d's is here (0.27 prints None), and attention's
``scale`` is a plain float (0.27 prints ``T.float32(0.5)``). Inference checks ranks, channel
counts, axes and output sizes, raising `OpError` naming the argument or attribute at fault.
Legalization (``compiler/op/nn.py``) is ``bb.call_te`` of the TE definitions in
``compiler/topi/nn``.

The elementwise activations (``nn.relu``, ``nn.gelu``, ``nn.gelu_tanh``, ``nn.silu``,
``nn.leakyrelu``, ``nn.softplus``, ``nn.prelu``) are declared in ``elementwise.py``. Where TVM's
Python function orders its parameters differently from its printer (pad, pooling), the op's
``py_signature`` gives the Python order, which the parser follows for positional arguments.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from . import shape_arith
from .common import (REQUIRED, bool_attr, dim_equal, dtype_attr, fmt_shape, int_attr, is_int, normalize_axis,
                     same_dtype, static_dim, tensor_arg)
from .registry import Arg, Attr, OpError, register_op

# ----------------------------------------------------------------------------- attribute converters


def _float_attr(name: str):
    def convert(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OpError(f"{name} must be a number, not {v!r}", name)
        return float(v)
    return convert


def _required(convert, name: str):
    """``convert`` for an attribute that has no default."""
    def check(v):
        if v is REQUIRED:
            raise OpError(f"{name} is required", name)
        return convert(v)
    return check


def _axes_list_attr(v):
    vals = [v] if is_int(v) else v
    if not isinstance(vals, (list, tuple)) or not vals or not all(is_int(x) for x in vals):
        raise OpError(f"axes must be a non-empty list of integers, not {v!r}", "axes")
    return list(vals)


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
)


# ----------------------------------------------------------------------------- pad


PAD_MODES = ("constant", "reflect", "edge")


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
        shape.append(_dim(shape_arith.add(d, before + after)))
    return relax.TensorStructInfo(shape, x.dtype)


register_op(
    "nn.pad", ("data",), infer_pad,
    attrs=(Attr("pad_width", REQUIRED, _required(_pad_width_attr, "pad_width")),
           Attr("pad_value", 0.0, _float_attr("pad_value")), Attr("pad_mode", "constant", _pad_mode_attr)),
    # TVM's Python signature orders pad_mode before pad_value; its printer the other way round.
    py_signature=("data", "pad_width", "pad_mode", "pad_value"),
    pattern="injective",
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


_ATTENTION_ATTRS = (Attr("scale", None, _optional_float_attr("scale")),
                    Attr("causal_mask", None, _causal_mask_attr), Attr("window_size", None, _window_size_attr))

# TVM's relax.op.nn.attention builds R.nn.attention without a bias and R.nn.attention_bias with
# one; both print that way. R.nn.attention(q, k, v, bias) in text (which TVM's parser also takes)
# is the same computation under the first name.
register_op(
    "nn.attention", ("query", "key", "value", Arg("bias", optional=True)), infer_attention,
    attrs=_ATTENTION_ATTRS, pattern="out_ewise_fusable",
    dispatch=lambda a: "nn.attention_bias" if a.get("bias") is not None else None,
)
register_op(
    "nn.attention_bias", ("query", "key", "value", "bias"), infer_attention,
    attrs=_ATTENTION_ATTRS, pattern="out_ewise_fusable",
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


# TVM's ``relax.op.nn.nll_loss(predictions, targets, weights=None, reduction="mean",
# ignore_index=-100)``; PrimFuncs ``nll_loss`` / ``nll_loss_without_weight`` as TVM names them.
# The pattern is the default reduction's ("mean": two reductions, then their quotient); "sum"
# gives a plain reduction, "none" an indexed load (injective).
register_op("nn.nll_loss", ("predictions", "targets", Arg("weights", "tensor", optional=True)), infer_nll_loss,
            attrs=(Attr("reduction", "mean", nll_reduction_attr), Attr("ignore_index", -100, int_attr("ignore_index"))),
            pattern="out_ewise_fusable")


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
)


# ----------------------------------------------------------------------------- batch_flatten


def infer_batch_flatten(args, attrs):
    """``(N, product of the other extents)``: data of rank at least 2 (TVM's check)."""
    x = tensor_arg(args[0], "data")
    if 0 <= x.ndim < 2:
        raise OpError(f"needs data of rank at least 2, got rank {x.ndim}", "data")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, 2)
    return relax.TensorStructInfo([x.shape[0], _dim(shape_arith.product(list(x.shape[1:])))], x.dtype)


# TVM legalizes batch_flatten as a reshape (PrimFunc ``reshape``: compiler/op/nn.py).
register_op("nn.batch_flatten", ("data",), infer_batch_flatten, pattern="injective")
