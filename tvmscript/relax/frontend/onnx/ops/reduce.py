"""Reductions: ReduceSum/Mean/Max/Min/Prod, the composite ones (L1, L2, SumSquare, LogSum,
LogSumExp), ArgMax/ArgMin, and the running sum CumSum.

Where the axes come from moved between versions: an ``axes`` attribute until ReduceMean-18
(and its siblings), an input from ReduceSum-13 and from every Reduce*-18. With no axes, every
axis is reduced — unless ``noop_with_empty_axes`` (the input-taking versions) says to return
the data as it is.
"""

from __future__ import annotations

from .....ir.op import api as op
from ..registry import converter
from .common import normalize_axes


def _axes_from_attr(ctx):
    axes = ctx.attr("axes")
    return None if axes is None else normalize_axes(ctx, axes, ctx.ndim(0))


def _axes_from_input(ctx):
    if ctx.has(1):
        axes = ctx.static_ints(1, "axes")
        if axes:
            return normalize_axes(ctx, axes, ctx.ndim(0))
    return "noop" if ctx.attr("noop_with_empty_axes", 0) else None


def _reduction(ctx, axes, build):
    """``build(ctx, x, axes, keepdims)`` over `axes` (None: all axes)."""
    x = ctx.tensor(0)
    if axes == "noop":
        return x
    return build(ctx, x, axes, bool(ctx.attr("keepdims", 1)))


def _simple(fn):
    return lambda ctx, x, axes, keepdims: ctx.emit(fn(x, axes, keepdims))


def _square_sum(ctx, x, axes, keepdims):
    return ctx.emit(op.sum(ctx.emit(op.multiply(x, x)), axes, keepdims))


def _l1(ctx, x, axes, keepdims):
    return op.sum(ctx.emit(op.abs(x)), axes, keepdims)


def _l2(ctx, x, axes, keepdims):
    return op.sqrt(_square_sum(ctx, x, axes, keepdims))


def _log_sum(ctx, x, axes, keepdims):
    return op.log(ctx.emit(op.sum(x, axes, keepdims)))


def _log_sum_exp(ctx, x, axes, keepdims):
    """``max + log(sum(exp(x - max)))``: no overflow for large inputs."""
    peak = ctx.emit(op.max(x, axes, True))
    shifted = ctx.emit(op.exp(ctx.emit(op.subtract(x, peak))))
    total = ctx.emit(op.log(ctx.emit(op.sum(shifted, axes, True))))
    out = ctx.emit(op.add(total, peak))
    if not keepdims:
        out = ctx.emit(op.squeeze(out, axes if axes is not None else list(range(ctx.ndim(0)))))
    return out


_REDUCTIONS = {
    "ReduceSum": _simple(op.sum), "ReduceMean": _simple(op.mean), "ReduceMax": _simple(op.max),
    "ReduceMin": _simple(op.min), "ReduceProd": _simple(op.prod), "ReduceSumSquare": _square_sum,
    "ReduceL1": _l1, "ReduceL2": _l2, "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp,
}


def _register(op_type: str, build) -> None:
    # ReduceSum took its axes as an input from version 13, the others from version 18.
    switch = 13 if op_type == "ReduceSum" else 18

    def with_attr_axes(ctx):
        return _reduction(ctx, _axes_from_attr(ctx), build)

    def with_input_axes(ctx):
        return _reduction(ctx, _axes_from_input(ctx), build)

    if switch > 13:
        converter(op_type)(with_attr_axes)
    converter(op_type, since=switch)(with_input_axes)


for _op_type, _build in _REDUCTIONS.items():
    _register(_op_type, _build)


def _arg_reduce(fn):
    def convert(ctx):
        if ctx.attr("select_last_index", 0):
            raise ctx.error("select_last_index=1 is not supported")
        axis = normalize_axes(ctx, [ctx.attr("axis", 0)], ctx.ndim(0))[0]
        return fn(ctx.tensor(0), axis, bool(ctx.attr("keepdims", 1)))
    return convert


converter("ArgMax")(_arg_reduce(op.argmax))
converter("ArgMin")(_arg_reduce(op.argmin))


@converter("CumSum")
def cumsum(ctx):
    """Running sums along the ``axis`` input; ``exclusive`` shifts them by one, ``reverse``
    runs from the end (the axis flipped before and after)."""
    axis = ctx.static_ints(1, "axis")[0]
    axis = normalize_axes(ctx, [axis], ctx.ndim(0))[0]
    x = ctx.tensor(0)
    reverse = bool(ctx.attr("reverse", 0))
    if reverse:
        x = _flip(ctx, x, axis)
    out = ctx.emit(op.cumsum(x, axis, exclusive=bool(ctx.attr("exclusive", 0))))
    return _flip(ctx, out, axis) if reverse else out


def _flip(ctx, x, axis: int):
    return ctx.emit(op.strided_slice(x, [axis], [-1], [-(2**31) + 1], [-1]))
