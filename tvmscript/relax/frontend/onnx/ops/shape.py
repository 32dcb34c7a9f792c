"""Shape, layout and indexing ops: Shape, Size, Constant, ConstantOfShape, Range, Reshape,
Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather, GatherElements,
ScatterElements, OneHot, Expand, Tile, Trilu, DepthToSpace, SpaceToDepth.

Shapes, axes, starts/ends and repeats must be known when the model is imported (constants, or
values computed from symbolic dims — see values.py); the ops that exporters use to compute
shapes (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape) also compute on such values,
so the shape arithmetic folds away.
"""

from __future__ import annotations

import numpy as np

from ..... import relax, tir
from .....ir.op import api as op
from .....ir.op import shape_arith
from ..registry import converter
from ..values import as_dim, as_object_array, inferred_dim, known_value, object_array, same_element
from .common import broadcast_shapes, normalize_axes, normalize_axis

# ----------------------------------------------------------------------------- constants


@converter("Constant")
def constant(ctx):
    for name, dtype in (("value_float", "float32"), ("value_int", "int64"), ("value_floats", "float32"),
                        ("value_ints", "int64")):
        if name in ctx.attrs:
            return np.asarray(ctx.attrs[name], dtype=dtype)
    if "value" in ctx.attrs:
        return ctx.attrs["value"]
    raise ctx.error(f"only numeric tensor values are supported (attributes: {sorted(ctx.attrs)})")


@converter("Shape")
def shape(ctx):
    """Shape-15 and later slice the shape with ``start``/``end`` (defaults: all of it)."""
    dims = ctx.shape(0)
    start, end = ctx.attr("start", 0), ctx.attr("end", len(dims))
    return known_value(object_array(dims)[start:end], "int64")


@converter("Size")
def size(ctx):
    return known_value(np.asarray(shape_arith.product(ctx.shape(0)), dtype=object), "int64")


@converter("ConstantOfShape")
def constant_of_shape(ctx):
    value = ctx.attr("value")
    fill = np.asarray(value).reshape(()) if value is not None else np.zeros((), "float32")
    dims = ctx.shape_input(0)
    return op.full(dims, relax.const(fill), str(fill.dtype))


@converter("Range")
def range_(ctx):
    """Constant bounds fold before this runs; here a bound depends on a symbolic dim."""
    bounds = []
    for i, what in enumerate(("start", "limit", "delta")):
        values = ctx.ints(i) if np.issubdtype(np.dtype(ctx.dtype(i)), np.integer) else None
        if values is None or len(values) != 1:
            raise ctx.error(f"the {what} must be known when the model is imported")
        bounds.append(values[0])
    return op.arange(*bounds, dtype=ctx.dtype(0))


# ----------------------------------------------------------------------------- reshaping


@converter("Reshape")
def reshape(ctx):
    target = ctx.ints(1)
    if target is None:
        raise ctx.error("the target shape must be known when the model is imported")
    if ctx.is_symbolic(0):
        return known_value(ctx.known(0).reshape([int(v) for v in target]), ctx.dtype(0))
    if ctx.attr("allowzero", 0) and any(isinstance(v, int) and v == 0 for v in target):
        raise ctx.error("allowzero=1 with a zero in the shape (an empty tensor) is not supported")
    return op.reshape(ctx.tensor(0), _resolve_shape(ctx, target))


def _resolve_shape(ctx, target: list) -> list:
    """ONNX's 0 (copy the input's dim) and -1 (what keeps the element count) resolved, the
    latter cancelling symbolic factors (``[1, seq, -1]`` of a ``(1, seq, 4, 8)`` input is
    ``[1, seq, 32]``); a -1 that cannot be resolved so is left to ``R.reshape``."""
    dims = ctx.shape(0)
    out = []
    for k, v in enumerate(target):
        if isinstance(v, int) and v == 0:
            if k >= len(dims):
                raise ctx.error(f"shape entry {k} is 0 but the input has rank {len(dims)}")
            out.append(dims[k])
        else:
            out.append(as_dim(v) if not isinstance(v, int) else v)
    holes = [k for k, v in enumerate(out) if isinstance(v, int) and v == -1]
    if len(holes) == 1:
        known = [as_dim(v) for k, v in enumerate(out) if k != holes[0]]
        extent = inferred_dim(dims, known)
        if extent is not None:
            out[holes[0]] = extent
    return out


@converter("Flatten")
def flatten(ctx):
    dims = ctx.shape(0)
    axis = normalize_axis(ctx, ctx.attr("axis", 1), len(dims) + 1)
    outer = shape_arith.product(dims[:axis], tir.IntImm("int64", 1))
    inner = shape_arith.product(dims[axis:], tir.IntImm("int64", 1))
    return op.reshape(ctx.tensor(0), [outer, inner])


@converter("Transpose")
def transpose(ctx):
    perm = ctx.attr("perm")
    return op.permute_dims(ctx.tensor(0), perm)


def _axes_input(ctx, i: int, ndim: int):
    """Axes given as input `i` (Squeeze/Unsqueeze-13, Reduce*-18), normalized for `ndim`."""
    if not ctx.has(i):
        return None
    return normalize_axes(ctx, ctx.static_ints(i, "axes"), ndim)


@converter("Squeeze")
def squeeze(ctx):
    ndim = ctx.ndim(0)
    axes = _axes_input(ctx, 1, ndim)
    if ctx.is_symbolic(0):
        return known_value(np.squeeze(ctx.known(0), axis=tuple(axes) if axes is not None else None), ctx.dtype(0))
    if axes is None:
        axes = [k for k, d in enumerate(ctx.shape(0)) if shape_arith.as_int(d) == 1]
    return op.squeeze(ctx.tensor(0), axes)


@converter("Unsqueeze")
def unsqueeze(ctx):
    axes = sorted(_axes_input(ctx, 1, ctx.ndim(0) + len(ctx.static_ints(1, "axes"))))
    if ctx.is_symbolic(0):
        out = ctx.known(0)
        for a in axes:
            out = np.expand_dims(out, a)
        return known_value(out, ctx.dtype(0))
    return op.expand_dims(ctx.tensor(0), axes)


# ----------------------------------------------------------------------------- joining, splitting


@converter("Concat")
def concat(ctx):
    indices = [i for i in range(ctx.num_inputs) if ctx.has(i)]
    axis = normalize_axis(ctx, ctx.attr("axis"), ctx.ndim(indices[0]))
    if ctx.symbolic():
        parts = [ctx.known(i) for i in indices]
        if any(p is None for p in parts):
            raise ctx.error("joins values computed from symbolic dims with run-time ones")
        return known_value(np.concatenate([as_object_array(p) for p in parts], axis=axis), ctx.dtype(indices[0]))
    return op.concat([ctx.tensor(i) for i in indices], axis=axis)


@converter("Split")
def split_13(ctx):
    """Split-13: sizes in the optional ``split`` input, else equal parts, one per output."""
    return _split(ctx, ctx.static_ints(1, "split sizes") if ctx.has(1) else None, ctx.num_outputs)


@converter("Split", since=18)
def split_18(ctx):
    """Split-18: sizes in ``split``, or ``num_outputs`` parts of ``ceil(dim / n)`` (the last
    one smaller)."""
    if ctx.has(1):
        return _split(ctx, ctx.static_ints(1, "split sizes"), ctx.num_outputs)
    count = ctx.attr("num_outputs")
    if count is None:
        raise ctx.error("needs the split input or the num_outputs attribute")
    dim = shape_arith.as_int(ctx.shape(0)[normalize_axis(ctx, ctx.attr("axis", 0), ctx.ndim(0))])
    if dim is not None and dim % count:
        chunk = -(-dim // count)
        return _split(ctx, [min(chunk, dim - k * chunk) for k in range(count)], count)
    return _split(ctx, None, count)


def _split(ctx, sizes, count: int):
    axis = normalize_axis(ctx, ctx.attr("axis", 0), ctx.ndim(0))
    if sizes is None:
        sections = count
    else:
        sections = list(np.cumsum(sizes[:-1]).tolist())
    out = ctx.emit(op.split(ctx.tensor(0), sections, axis))
    return [ctx.emit(relax.TupleGetItem(out, i)) for i in range(count)]


@converter("Slice")
def slice_(ctx):
    """Slice-10 and later: starts, ends, axes and steps are inputs."""
    ndim = ctx.ndim(0)
    starts, ends = ctx.ints(1), ctx.ints(2)
    if starts is None or ends is None:
        raise ctx.error("starts and ends must be known when the model is imported")
    axes = normalize_axes(ctx, ctx.static_ints(3, "axes"), ndim) if ctx.has(3) else list(range(len(starts)))
    steps = ctx.static_ints(4, "steps") if ctx.has(4) else [1] * len(starts)
    if ctx.is_symbolic(0):
        return _slice_known(ctx, axes, starts, ends, steps)
    x = ctx.tensor(0)
    dims = ctx.shape(0)
    # An end that is the axis' own (symbolic) extent is the "to the end" sentinel.
    ends = [2**31 - 1 if not isinstance(e, int) and same_element(e, dims[a]) else e for a, e in zip(axes, ends)]
    if all(isinstance(v, int) for v in starts + ends):
        begin = [_clamp_int(v) for v in starts]
        end = [_clamp_int(v) for v in ends]
        return op.strided_slice(x, axes, begin, end, steps)
    # A bound depends on a symbolic dim: gather the positions along each such axis.
    for a, b, e, s in zip(axes, starts, ends, steps):
        positions = ctx.emit(op.arange(_bound(ctx, b, a), _bound(ctx, e, a), s, dtype="int64"))
        x = ctx.emit(op.take(x, positions, axis=a))
    return x


def _clamp_int(v: int) -> int:
    """INT64_MAX / INT64_MIN (exporters' "to the end") as the largest int32 the ops accept."""
    return max(min(v, 2**31 - 1), -(2**31) + 1)


def _bound(ctx, v, axis: int):
    """A slice bound as an index into the axis (negative ones counted from its end)."""
    dim = ctx.shape(0)[axis]
    if isinstance(v, int):
        if v >= 2**31 - 1:
            return dim
        if v < 0:
            return shape_arith.add(dim, v)
        return dim if shape_arith.as_int(dim) is not None and v > shape_arith.as_int(dim) else v
    return v


def _slice_known(ctx, axes, starts, ends, steps):
    data = ctx.known(0)
    index = [slice(None)] * data.ndim
    for a, b, e, s in zip(axes, starts, ends, steps):
        if not all(isinstance(v, int) for v in (b, e)):
            raise ctx.error("slices values computed from symbolic dims at symbolic positions")
        index[a] = slice(b, e, s)
    return known_value(as_object_array(data)[tuple(index)], ctx.dtype(0))


@converter("Gather")
def gather(ctx):
    ndim = ctx.ndim(0)
    axis = normalize_axis(ctx, ctx.attr("axis", 0), ndim)
    indices = ctx.const(1)
    if ctx.is_symbolic(0):
        if indices is None:
            raise ctx.error("the indices must be known to gather from values computed from symbolic dims")
        return known_value(np.take(as_object_array(ctx.known(0)), indices, axis=axis), ctx.dtype(0))
    x = ctx.tensor(0)
    if indices is not None:
        dim = shape_arith.as_int(ctx.shape(0)[axis])
        if dim is not None:
            indices = np.where(indices < 0, indices + dim, indices)
            return op.take(x, relax.const(indices), axis=axis)
    # Run-time (or negative, against a symbolic dim) indices: "wrap" maps -1 to the last entry.
    return op.take(x, ctx.tensor(1), axis=axis, mode="wrap")


def _wrapped_indices(ctx, i: int, extent):
    """Index input `i` with negative entries counted from the end of an axis of `extent`:
    folded for constant indices, a ``where`` at run time (the ops expect non-negative ones)."""
    indices = ctx.const(i)
    static = shape_arith.as_int(extent)
    if indices is not None and static is not None:
        return relax.const(np.where(indices < 0, indices + static, indices))
    if static is None:
        raise ctx.error("run-time indices on an axis of symbolic extent are not supported")
    x = ctx.tensor(i)
    dtype = ctx.dtype(i)
    negative = ctx.emit(op.less(x, relax.const(np.zeros((), dtype))))
    return ctx.emit(op.where(negative, ctx.emit(op.add(x, relax.const(np.asarray(static, dtype)))), x))


@converter("GatherElements")
def gather_elements(ctx):
    axis = normalize_axis(ctx, ctx.attr("axis", 0), ctx.ndim(0))
    indices = _wrapped_indices(ctx, 1, ctx.shape(0)[axis])
    return op.gather_elements(ctx.tensor(0), indices, axis)


_SCATTER_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@converter("ScatterElements")
def scatter_elements(ctx):
    axis = normalize_axis(ctx, ctx.attr("axis", 0), ctx.ndim(0))
    reduction = ctx.attr("reduction", "none")
    if reduction not in _SCATTER_REDUCTIONS:
        raise ctx.error(f"unknown reduction {reduction!r}")
    indices = _wrapped_indices(ctx, 1, ctx.shape(0)[axis])
    return op.scatter_elements(ctx.tensor(0), indices, ctx.tensor(2), axis, _SCATTER_REDUCTIONS[reduction])


@converter("OneHot")
def one_hot(ctx):
    """``values`` is ``[off, on]``; negative indices count back from ``depth``."""
    depth, values = ctx.const(1), ctx.const(2)
    if depth is None:
        raise ctx.error("the depth must be known when the model is imported")
    depth = int(depth.reshape(-1)[0])
    if values is None:
        raise ctx.error("the values (off, on) must be known when the model is imported")
    off, on = (np.asarray(v, dtype=values.dtype).item() for v in values.reshape(-1)[:2])
    indices = _wrapped_indices(ctx, 0, depth)
    dtype = str(values.dtype)
    return op.one_hot(indices, tir.const(on, dtype), tir.const(off, dtype), depth, ctx.attr("axis", -1))


# ----------------------------------------------------------------------------- broadcasting, tiling


@converter("Expand")
def expand(ctx):
    target = ctx.ints(1)
    if target is None:
        raise ctx.error("the target shape must be known when the model is imported")
    if ctx.is_symbolic(0):
        return known_value(np.broadcast_to(ctx.known(0), [int(v) for v in target]), ctx.dtype(0))
    dims = broadcast_shapes(ctx, ctx.shape(0), [as_dim(v) for v in target])
    return op.broadcast_to(ctx.tensor(0), [as_dim(d) for d in dims])


@converter("Tile")
def tile(ctx):
    return op.tile(ctx.tensor(0), ctx.static_ints(1, "repeats"))


@converter("Trilu")
def trilu(ctx):
    """The upper (``upper=1``) or lower triangle of the last two axes, from diagonal ``k``."""
    k = ctx.static_ints(1, "k")[0] if ctx.has(1) else 0
    upper = bool(ctx.attr("upper", 1))
    x = ctx.tensor(0)
    return (op.triu if upper else op.tril)(x, k)


# ----------------------------------------------------------------------------- depth <-> space


@converter("DepthToSpace")
def depth_to_space(ctx):
    n, c, h, w = ctx.shape(0)
    b = ctx.attr("blocksize")
    x = ctx.tensor(0)
    if ctx.attr("mode", "DCR") == "DCR":
        x = ctx.emit(op.reshape(x, [n, b, b, shape_arith.floordiv(c, b * b), h, w]))
        x = ctx.emit(op.permute_dims(x, [0, 3, 4, 1, 5, 2]))
    else:
        x = ctx.emit(op.reshape(x, [n, shape_arith.floordiv(c, b * b), b, b, h, w]))
        x = ctx.emit(op.permute_dims(x, [0, 1, 4, 2, 5, 3]))
    return op.reshape(x, [n, shape_arith.floordiv(c, b * b), shape_arith.mul(h, b), shape_arith.mul(w, b)])


@converter("SpaceToDepth")
def space_to_depth(ctx):
    n, c, h, w = ctx.shape(0)
    b = ctx.attr("blocksize")
    hb, wb = shape_arith.floordiv(h, b), shape_arith.floordiv(w, b)
    x = ctx.emit(op.reshape(ctx.tensor(0), [n, c, hb, b, wb, b]))
    x = ctx.emit(op.permute_dims(x, [0, 3, 5, 1, 2, 4]))
    return op.reshape(x, [n, shape_arith.mul(c, b * b), hb, wb])

