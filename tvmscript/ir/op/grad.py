"""Gradient ops (``R.grad.*``): the backward of pooling, take and losses, as TVM declares them for
training graphs. Each is legalized to TensorIR where TVM legalizes it.

Every backward's result has the struct info of the forward input it differentiates
(``predictions``, ``x``, ``data``), as TVM infers it. TVM checks nothing more; the checks
here are those the legalization (``compiler/op/grad.py``) needs (integer targets and indices, an output gradient
shaped like the forward's output), so a call that passes them computes. ``no_grad``,
``start_checkpoint`` and ``end_checkpoint`` are markers for the gradient pass: identities
that TVM does not legalize either.
"""

from __future__ import annotations

from tvmscript.ir import relax

from .common import fmt_shape, int_attr, normalize_axis, static_dim, tensor_arg
from .nn import _same, nll_reduction_attr
from .nn_window import POOL2D_ATTRS, POOL_SIGNATURE, canonicalize_pool, infer_pool2d
from .registry import Arg, Attr, OpError, register_op


def _integer(sinfo: relax.TensorStructInfo, what: str, role: str) -> None:
    if sinfo.dtype and not sinfo.dtype.startswith(("int", "uint")):
        raise OpError(f"{what} must be integers ({role}), not {sinfo.dtype}", what)


def _check_broadcasts_to(g: relax.TensorStructInfo, shape, what: str, of: str) -> None:
    """``g`` broadcasts to ``shape`` (NumPy's rule, one way): rank at most ``shape``'s, each
    constant dim equal to the target's or 1."""
    if shape is None or g.ndim < 0:
        return
    if g.ndim > len(shape):
        raise OpError(f"{what} has rank {g.ndim}, more than {of} ({len(shape)})", what)
    if g.shape is None:
        return
    for got, want in zip(reversed(g.shape), reversed(shape)):
        a, b = static_dim(got), static_dim(want)
        if a is not None and b is not None and a not in (1, b):
            raise OpError(f"{what} of shape ({fmt_shape(g.shape)}) does not broadcast to {of} "
                          f"({fmt_shape(shape)})", what)


# ----------------------------------------------------------------------------- markers


def infer_marker(args, attrs):
    """The input's struct info, unchanged."""
    return args[0]


for _name in ("no_grad", "start_checkpoint", "end_checkpoint"):
    register_op(f"grad.{_name}", (Arg("input", "expr"),), infer_marker)


# ----------------------------------------------------------------------------- nll_loss_backward


def infer_nll_loss_backward(args, attrs):
    """The predictions' struct info. The output gradient broadcasts to the targets' shape
    (a scalar for ``mean``/``sum``; TVM broadcasts any shape that does)."""
    g, pred = tensor_arg(args[0], "output_grad"), tensor_arg(args[1], "predictions")
    tgt = tensor_arg(args[2], "targets")
    _integer(tgt, "targets", "class indices")
    if pred.ndim == 0:
        raise OpError("predictions must have rank at least 1 (the classes' axis)", "predictions")
    if pred.ndim > 0 and tgt.ndim >= 0 and tgt.ndim != pred.ndim - 1:
        raise OpError(f"targets must have rank {pred.ndim - 1} for predictions of rank {pred.ndim}, "
                      f"got rank {tgt.ndim}", "targets")
    _check_broadcasts_to(g, tgt.shape, "output_grad", "the targets' shape")
    if args[3] is not None:
        w = tensor_arg(args[3], "weights")
        if w.ndim >= 0 and w.ndim != 1:
            raise OpError(f"weights must be 1-D (one per class), got rank {w.ndim}", "weights")
    return _same(pred)


register_op(
    "grad.nll_loss_backward", ("output_grad", "predictions", "targets", Arg("weights", optional=True)),
    infer_nll_loss_backward,
    attrs=(Attr("reduction", "mean", nll_reduction_attr), Attr("ignore_index", -100, int_attr("ignore_index"))),
    # The default reduction's ("mean": the weights' sum, then a gather); "sum" broadcasts the
    # scalar gradient, "none" gathers it (see tests/compiler/test_op_nn_tvm.py).
    pattern="out_ewise_fusable",
)


# ----------------------------------------------------------------------------- pooling backward


def infer_pool2d_backward(args, attrs):
    """The data's struct info; the output gradient has the shape of the forward's output."""
    g, data = tensor_arg(args[0], "output_grad"), tensor_arg(args[1], "data")
    forward = infer_pool2d([data], attrs)
    if g.ndim >= 0 and g.ndim != forward.ndim:
        raise OpError(f"output_grad must have rank {forward.ndim} like the pooling's output, got rank {g.ndim}",
                      "output_grad")
    if g.shape is not None and forward.shape is not None:
        for got, want in zip(g.shape, forward.shape):
            a, b = static_dim(got), static_dim(want)
            if a is not None and b is not None and a != b:
                raise OpError(f"output_grad has shape ({fmt_shape(g.shape)}) but the pooling's output has shape "
                              f"({fmt_shape(forward.shape)})", "output_grad")
    return _same(data)


for _kind in ("max", "avg"):
    register_op(
        f"grad.{_kind}_pool2d_backward", ("output_grad", "data"), infer_pool2d_backward, attrs=POOL2D_ATTRS,
        py_signature=("output_grad",) + POOL_SIGNATURE, canonicalize=canonicalize_pool, pattern="out_ewise_fusable",
    )


# ----------------------------------------------------------------------------- take_backward


def _optional_axis(v):
    return None if v is None else int_attr("axis")(v)


def _mode_attr(v):
    """TVM keeps take's ``mode`` attribute here and prints it (``mode=""``); the backward
    wraps negative indices as NumPy's take reads them, whatever the mode."""
    if not isinstance(v, str):
        raise OpError(f"mode must be a string, not {v!r}", "mode")
    return v


def infer_take_backward(args, attrs):
    """``x``'s struct info; the output gradient is shaped like ``take(x, indices, axis)``."""
    g, x, idx = (tensor_arg(s, w) for s, w in zip(args, ("output_grad", "x", "indices")))
    _integer(idx, "indices", "positions along the axis")
    axis = attrs["axis"]
    if x.ndim >= 0 and axis is not None:
        axis = normalize_axis(axis, x.ndim)
    if x.shape is not None and idx.shape is not None and g.shape is not None:
        want = list(idx.shape) if axis is None else list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
        if len(want) != len(g.shape) or any(static_dim(a) is not None and static_dim(b) is not None
                                            and static_dim(a) != static_dim(b) for a, b in zip(g.shape, want)):
            raise OpError(f"output_grad has shape ({fmt_shape(g.shape)}) but take's output has shape "
                          f"({fmt_shape(want)})", "output_grad")
    return _same(x)


register_op(
    "grad.take_backward", ("output_grad", "x", "indices"), infer_take_backward,
    attrs=(Attr("axis", None, _optional_axis), Attr("mode", "", _mode_attr)),
    py_signature=("output_grad", "x", "indices", "axis", "mode"),
    # A sum over the index positions (TVM's is an opaque scatter-add loop).
    pattern="reduce",
)
