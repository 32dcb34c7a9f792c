"""The sliding-window ops of ``R.nn``: convolutions (1-D, 2-D, 3-D), transposed convolutions
and pooling (1-D, 2-D, adaptive 2-D), in any layout of their axes (``NHWC``, ``NWC``, ``HWIO``
kernels, packed ``NCHW16c``) with an ``out_layout`` of their own (the data's when None, filled
in by the op's ``canonicalize`` so that it prints).

Inference works in the canonical order (``NCHW`` data, ``OIHW`` kernels), the shapes converted
with `nn_shapes.layout_to_primal_shape` / `primal_to_layout_shape`, each spatial output extent
from `nn_shapes.conv_out_dim` / `pool_out_dim`, as the TE definitions compute them. Attributes,
defaults and their printing order are TVM's; shorthand values (an int stride, a 2-element
padding) are normalized to the lists TVM prints. The other ``R.nn`` ops are `nn`'s.
"""

from __future__ import annotations

from tvmscript.ir import relax

from . import nn_shapes, shape_arith
from .common import bool_attr, dtype_attr, int_attr, is_int, static_dim, tensor_arg
from .nn import _check_rank, _dim, _out_dtype
from .registry import Attr, OpError, register_op


# ----------------------------------------------------------------------------- attribute converters


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
    legalization compute in ``primal`` order (see `nn_shapes.parse_layout`)."""
    def convert(v):
        if not isinstance(v, str):
            raise OpError(f"{name} must be a string, not {v!r}", name)
        try:
            nn_shapes.parse_layout(v, primal)
        except ValueError as err:
            raise OpError(f"{name}: {err}", name) from None
        return v
    return convert


def _optional_layout_attr(name: str, primal: str):
    """An output layout: None means the data's (TVM's default), filled in by the op's
    ``canonicalize`` so that it prints as that layout."""
    convert = _layout_attr(name, primal)
    return lambda v: None if v is None else convert(v)


def _output_size_attr(v):
    if v is None:
        return None
    return _pair_attr("output_size")(v)


# ----------------------------------------------------------------------------- inference helpers


def _positive_dim(d, what: str, op: str):
    v = static_dim(d)
    if v is not None and v <= 0:
        raise OpError(f"the output {what} would be {v}; the input is too small for the window")
    return d


# ----------------------------------------------------------------------------- layouts


def _rank(layout: str, primal: str) -> int:
    return len(nn_shapes.parse_layout(layout, primal))


def _primal_shape(x: relax.TensorStructInfo, layout: str, primal: str):
    """``x``'s shape in ``primal`` order (packed axes unpacked), None when unknown."""
    return None if x.shape is None else nn_shapes.layout_to_primal_shape(x.shape, layout, primal)


def _in_layout(shape: list, layout: str, primal: str, what: str = "out_layout") -> list:
    """A ``primal`` shape in ``layout`` (OpError naming ``what`` when a packed factor does not
    divide its axis)."""
    try:
        return [_dim(d) for d in nn_shapes.primal_to_layout_shape(shape, layout, primal)]
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
        out = [_positive_dim(_dim(nn_shapes.conv_out_dim(size, static_dim(k), s, d, pads[a], pads[nsp + a])),
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


for _primal, _kernel in (("NCW", "OIW"), ("NCHW", "OIHW"), ("NCDHW", "OIDHW")):
    _nsp = len(_primal) - 2
    register_op(
        f"nn.conv{_nsp}d", ("data", "weight"), _infer_conv(_primal, _kernel), attrs=_conv_attrs(_primal, _kernel),
        pattern="out_ewise_fusable", canonicalize=_out_layout_default("data_layout"),
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
        out = [_positive_dim(_dim(nn_shapes.conv_transpose_out_dim(
            size, static_dim(k), attrs["strides"][a], attrs["dilation"][a], pads[a], pads[nsp + a],
            attrs["output_padding"][a])), _SPATIAL_NAMES[primal[2 + a]], op)
            for a, (size, k) in enumerate(zip(sizes, kernel))]
        channels = _dim(static_dim(o) * groups) if static_dim(o) is not None else shape_arith.mul(o, groups)
        return relax.TensorStructInfo(_in_layout([n, channels] + out, ol, primal), dtype)

    infer.__name__ = f"infer_conv{nsp}d_transpose"
    return infer


def _output_padding_attr(count: int):
    def convert(v):
        vals = _ints("output_padding", v, (1, count) if count > 1 else (1,), 0)
        return vals * count if len(vals) == 1 else vals
    return convert


for _primal, _kernel in (("NCW", "IOW"), ("NCHW", "IOHW"), ("NCDHW", "IODHW")):
    _nsp = len(_primal) - 2
    register_op(
        f"nn.conv{_nsp}d_transpose", ("data", "weight"), _infer_conv_transpose(_primal, _kernel),
        attrs=_conv_attrs(_primal, _kernel, transpose=True), pattern="out_ewise_fusable",
        canonicalize=_out_layout_default("data_layout"),
    )


# ----------------------------------------------------------------------------- pooling


def _infer_pool(primal: str):
    """Inference of pooling over the spatial axes of ``primal`` (``NCW``, ``NCHW``), the data
    in ``layout`` and the result in ``out_layout``: each spatial output extent from
    `nn_shapes.pool_out_dim` (unknown in ceil mode on some symbolic extents)."""
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
            o = nn_shapes.pool_out_dim(shape[2 + a], attrs["pool_size"][a], attrs["strides"][a],
                                     attrs["dilation"][a], pads[a], pads[nsp + a], attrs["ceil_mode"])
            if o is None:  # ceil mode on a symbolic extent: see pool_out_dim
                return unknown
            out.append(_positive_dim(_dim(o), _SPATIAL_NAMES[primal[2 + a]], name))
        return relax.TensorStructInfo(_in_layout(list(shape[:2]) + out, out_layout, primal), x.dtype)

    infer.__name__ = f"infer_pool{nsp}d"
    return infer


infer_pool2d = _infer_pool("NCHW")


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
    )
    register_op(
        # TVM's avg_pool1d counts the padding by default (its avg_pool2d does not).
        f"nn.{_kind}_pool1d", ("data",), _infer_pool("NCW"), attrs=_pool_attrs("NCW", _kind == "avg"),
        canonicalize=canonicalize_pool, py_signature=POOL_SIGNATURE, pattern="out_ewise_fusable",
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


register_op(
    "nn.adaptive_avg_pool2d", ("data",), infer_adaptive_avg_pool2d,
    attrs=(Attr("output_size", None, _output_size_attr), Attr("layout", "NCHW", _layout_attr("layout", "NCHW")),
           Attr("out_layout", None, _optional_layout_attr("out_layout", "NCHW"))),
    canonicalize=canonicalize_pool, pattern="out_ewise_fusable",
)
