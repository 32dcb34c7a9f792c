"""Shape manipulation ops: permute_dims, reshape, expand_dims, squeeze, flatten, concat, split,
strided_slice, dynamic_strided_slice, broadcast_to, tile, repeat, flip, reverse_sequence,
collapse_sum_like/to, layout_transform and tensor_to_shape (inferred only: the VM reads a tensor
into a shape). The indexed ops (take, gather, scatter, one_hot) are `indexing`'s.

Where TVM infers a shape for a call older checks here rejected, the table follows TVM:
``split`` into sections that do not divide the axis (ceil-sized pieces, the last one shorter),
split indices out of order (a piece ending before it begins is empty), ``concat(axis=None)``
of 1-D tensors.

All are injective (every output element is one input element), expand_dims, squeeze and
broadcast_to more precisely broadcast (their loads index the output's loop variables in order,
some left out), as TVM's pattern analysis finds their PrimFuncs; they legalize to the TOPI
computes in ``compiler/topi/transform.py`` under TVM's PrimFunc names (``reshape``,
``concatenate``, ``split``, ...; ``compiler/op/manipulate.py``). Output shapes are symbolic
where the input's are, built with the same folding index arithmetic the TE uses
(`shape_arith`).
"""

from __future__ import annotations

from tvmscript.ir import relax, tir

from ..arith.index_map import map_shape
from ..index_map import IndexMap
from ..node import printer
from ..structural import StructuralEqual
from . import shape_arith
from .common import (REQUIRED, axes_attr, bool_attr, dim_equal, fmt_shape, int_attr, integer_tensor, normalize_axis,
                     optional_int_attr, static_dim, tensor_arg)
from .registry import Arg, Attr, OpError, register_op


def _i64(v: int) -> tir.IntImm:
    return tir.IntImm("int64", v)


def _int_list_attr(name: str, required: bool = False):
    """An int or a list of ints, as a list."""
    def convert(value):
        if value is REQUIRED or (value is None and required):
            raise OpError(f"{name} is required", name)
        try:
            return axes_attr(value)
        except OpError:
            raise OpError(f"{name} must be an integer or a list of integers, not {value!r}", name) from None

    return convert


def _axes(axes, ndim: int, what: str = "axis") -> list:
    out = [normalize_axis(a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise OpError(f"{what} {axes} repeats an axis", what)
    return out


# ----------------------------------------------------------------------------- permute_dims


def infer_permute_dims(args, attrs):
    x = tensor_arg(args[0], "x")
    axes = attrs["axes"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, len(axes) if axes is not None else -1)
    if axes is None:
        order = list(range(x.ndim))[::-1]
    else:
        if len(axes) != x.ndim:
            raise OpError(f"needs {x.ndim} axes for a tensor of rank {x.ndim}, got {len(axes)}", "axes")
        order = [normalize_axis(a, x.ndim, "axes") for a in axes]
        if sorted(order) != list(range(x.ndim)):
            raise OpError(f"axes {axes} are not a permutation of 0..{x.ndim - 1}", "axes")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    return relax.TensorStructInfo([x.shape[i] for i in order], x.dtype)


register_op(
    "permute_dims", ("x",), infer_permute_dims,
    attrs=(Attr("axes", None, axes_attr),), pattern="injective",
)


# ----------------------------------------------------------------------------- reshape


def _shape_values(sinfo, what: str):
    """The dims of a shape argument (None when unknown) and its rank (-1 when unknown)."""
    if not isinstance(sinfo, relax.ShapeStructInfo):
        raise OpError(f"{what} must be a shape such as R.shape([2, 3])", what)
    return (list(sinfo.values) if sinfo.values is not None else None), sinfo.ndim


def canonicalize_reshape(args, attrs):
    """TVM resolves ``-1`` (the dimension that keeps the element count) and ``0`` (the input's
    dimension at that position) when the call is made: the call holds the resolved shape."""
    x, shape = args
    if not isinstance(shape, relax.ShapeExpr):
        return args, attrs
    vals = list(shape.values)
    if not any(static_dim(d) is not None and static_dim(d) <= 0 for d in vals):
        return args, attrs
    xs = relax.struct_info_of(x)
    xshape = xs.shape if isinstance(xs, relax.TensorStructInfo) else None
    if [static_dim(d) for d in vals].count(-1) > 1:
        raise OpError(f"shape ({fmt_shape(vals)}) may have at most one -1", "shape")
    for i, d in enumerate(vals):
        if static_dim(d) == 0:
            if xshape is None or i >= len(xshape):
                raise OpError(f"shape has 0 at position {i}, but the input has no dimension {i} to copy", "shape")
            vals[i] = xshape[i]
        elif static_dim(d) is not None and static_dim(d) < -1:
            raise OpError(f"shape ({fmt_shape(vals)}) has a negative dimension {static_dim(d)}", "shape")
    if any(static_dim(d) == -1 for d in vals):
        if xshape is None:
            return args, attrs  # resolved when the input's shape is known
        known = shape_arith.product([d for d in vals if static_dim(d) != -1])
        total = shape_arith.product(list(xshape))
        if static_dim(known) == 0 or (static_dim(known) is not None and static_dim(total) is not None
                                   and static_dim(total) % static_dim(known)):
            raise OpError(f"cannot reshape a tensor of shape ({fmt_shape(xshape)}) into ({fmt_shape(vals)})",
                          "shape")
        vals = [shape_arith.floordiv(total, known) if static_dim(d) == -1 else d for d in vals]
    return [x, relax.ShapeExpr(vals, relax.ShapeStructInfo(vals))], attrs


def infer_reshape(args, attrs):
    x = tensor_arg(args[0], "x")
    vals, ndim = _shape_values(args[1], "shape")
    if vals is None:
        return relax.TensorStructInfo(None, x.dtype, ndim)
    if any(static_dim(d) is not None and static_dim(d) < 0 for d in vals):
        raise OpError(f"shape ({fmt_shape(vals)}) has a negative dimension", "shape")
    if x.shape is not None:
        old, new = shape_arith.product(list(x.shape)), shape_arith.product(vals)
        if static_dim(old) is not None and static_dim(new) is not None and static_dim(old) != static_dim(new):
            raise OpError(f"cannot reshape a tensor of shape ({fmt_shape(x.shape)}) ({static_dim(old)} elements) "
                          f"into ({fmt_shape(vals)}) ({static_dim(new)} elements)", "shape")
    return relax.TensorStructInfo(vals, x.dtype)


register_op("reshape", ("x", Arg("shape", "shape")), infer_reshape, pattern="injective",
            canonicalize=canonicalize_reshape)


def infer_flatten(args, attrs):
    x = tensor_arg(args[0], "x")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, 1)
    return relax.TensorStructInfo([shape_arith.product(list(x.shape), _i64(1))], x.dtype)


register_op("flatten", ("x",), infer_flatten, pattern="injective")


# ----------------------------------------------------------------------------- expand_dims, squeeze


def infer_expand_dims(args, attrs):
    x = tensor_arg(args[0], "x")
    axis = attrs["axis"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    ndim = x.ndim + len(axis)
    axes = set(_axes(axis, ndim))
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, ndim)
    it = iter(x.shape)
    return relax.TensorStructInfo([_i64(1) if k in axes else next(it) for k in range(ndim)], x.dtype)


register_op("expand_dims", ("x",), infer_expand_dims,
            attrs=(Attr("axis", REQUIRED, _int_list_attr("axis", required=True)),), pattern="broadcast")


def infer_squeeze(args, attrs):
    x = tensor_arg(args[0], "x")
    axis = attrs["axis"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    if axis is None:
        if x.shape is None or any(static_dim(d) is None for d in x.shape):
            return relax.TensorStructInfo(None, x.dtype, -1)  # which dims are 1 is not known
        return relax.TensorStructInfo([d for d in x.shape if static_dim(d) != 1], x.dtype)
    axes = _axes(axis, x.ndim)
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim - len(axes))
    for a in axes:
        if static_dim(x.shape[a]) not in (None, 1):
            raise OpError(f"axis {a} has extent {static_dim(x.shape[a])}; only unit dimensions can be squeezed", "axis")
    return relax.TensorStructInfo([d for k, d in enumerate(x.shape) if k not in axes], x.dtype)


register_op("squeeze", ("x",), infer_squeeze, attrs=(Attr("axis", None, _int_list_attr("axis")),),
            pattern="broadcast")


# ----------------------------------------------------------------------------- concat, split


def _tuple_fields(sinfo, what: str) -> list | None:
    if isinstance(sinfo, relax.TupleStructInfo):
        return list(sinfo.fields)
    raise OpError(f"{what} must be a tuple of tensors", what)


def infer_concat(args, attrs):
    fields = _tuple_fields(args[0], "tensors")
    if not fields:
        raise OpError("concat needs at least one tensor", "tensors")
    ts = [tensor_arg(f, "tensors") for f in fields]
    dtypes = {t.dtype for t in ts if t.dtype}
    if len(dtypes) > 1:
        raise OpError(f"the tensors' dtypes differ: {', '.join(t.dtype for t in ts)}", "tensors")
    dtype = dtypes.pop() if dtypes else ""
    ranks = {t.ndim for t in ts if t.ndim >= 0}
    if len(ranks) > 1:
        raise OpError(f"the tensors' ranks differ: {', '.join(str(t.ndim) for t in ts)}", "tensors")
    if attrs["axis"] is None:
        # TVM's axis=None concatenates the tensors flattened, which it allows for 1-D ones only.
        if ranks - {1}:
            raise OpError(f"concat with axis=None needs 1-D tensors, got ranks {', '.join(str(t.ndim) for t in ts)}",
                          "tensors")
        ranks = {1}
    if not ranks:
        return relax.TensorStructInfo(None, dtype, -1)
    ndim = ranks.pop()
    axis = normalize_axis(attrs["axis"] or 0, ndim, "axis")
    if any(t.shape is None for t in ts):
        return relax.TensorStructInfo(None, dtype, ndim)
    out = list(ts[0].shape)
    for t in ts[1:]:
        for k in range(ndim):
            if k == axis:
                out[k] = shape_arith.add(out[k], t.shape[k])
            elif static_dim(out[k]) is not None and static_dim(t.shape[k]) is not None and not dim_equal(out[k], t.shape[k]):
                raise OpError(f"the tensors' shapes differ off the concatenation axis {axis}: "
                              f"({fmt_shape(ts[0].shape)}) and ({fmt_shape(t.shape)})", "tensors")
    return relax.TensorStructInfo(out, dtype)


register_op("concat", (Arg("tensors", "tensors"),), infer_concat, attrs=(Attr("axis", 0, optional_int_attr("axis")),),
            pattern="injective")


def _sections_attr(value):
    if value is REQUIRED:
        raise OpError("indices_or_sections is required", "indices_or_sections")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise OpError(f"indices_or_sections must be a positive number of sections, got {value}",
                          "indices_or_sections")
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    raise OpError("indices_or_sections must be a number of sections or a list of indices", "indices_or_sections")


def infer_split(args, attrs):
    x = tensor_arg(args[0], "x")
    sections = attrs["indices_or_sections"]
    count = sections if isinstance(sections, int) else len(sections) + 1
    if x.ndim < 0:
        return relax.TupleStructInfo([relax.TensorStructInfo(None, x.dtype, -1) for _ in range(count)])
    axis = normalize_axis(attrs["axis"], x.ndim, "axis")
    if x.shape is None:
        return relax.TupleStructInfo([relax.TensorStructInfo(None, x.dtype, x.ndim) for _ in range(count)])
    dim = x.shape[axis]
    # As TVM: sections that do not divide the extent are ceil(extent / sections) long, the last
    # one what is left; indices need not ascend (a piece ending before it begins is empty).
    bounds = shape_arith.split_bounds(dim, sections)
    if isinstance(sections, int) and static_dim(bounds[-1][1]) is not None and static_dim(bounds[-1][1]) < 0:
        raise OpError(f"{sections} sections of {static_dim(bounds[0][1])} overrun axis {axis} of extent "
                      f"{static_dim(dim)} (the last would have a negative extent)", "indices_or_sections")
    out = []
    for _begin, extent in bounds:
        shape = list(x.shape)
        shape[axis] = extent
        out.append(relax.TensorStructInfo(shape, x.dtype))
    return relax.TupleStructInfo(out)


register_op("split", ("x",), infer_split,
            attrs=(Attr("indices_or_sections", REQUIRED, _sections_attr), Attr("axis", 0, int_attr("axis"))),
            pattern="injective")


# ----------------------------------------------------------------------------- strided_slice


def _prim_ints(sinfo, what: str) -> list | None:
    """The integer values of a tuple of prim values (None if some are not constants)."""
    if sinfo is None:
        return None
    if not isinstance(sinfo, relax.TupleStructInfo) or not all(isinstance(f, relax.PrimStructInfo) for f in sinfo.fields):
        raise OpError(f"{what} must be a tuple of prim values", what)
    out = []
    for f in sinfo.fields:
        if f.dtype and not f.dtype.startswith(("int", "uint")):
            raise OpError(f"{what} must hold integers, not {f.dtype} values", what)
        if not isinstance(f.value, tir.IntImm):
            return None
        out.append(f.value.value)
    return out


def infer_strided_slice(args, attrs):
    x = tensor_arg(args[0], "x")
    axes, begin, end = (_prim_ints(s, w) for s, w in zip(args[1:4], ("axes", "begin", "end")))
    n_axes = len(args[1].fields)
    strides = _prim_ints(args[4], "strides") if args[4] is not None else [1] * n_axes
    for what, s in (("begin", args[2]), ("end", args[3]), ("strides", args[4])):
        if s is not None and len(s.fields) != n_axes:
            raise OpError(f"{what} has {len(s.fields)} values for {n_axes} axes", what)
    if strides is not None and 0 in strides:
        raise OpError("strides may not be 0", "strides")
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    if axes is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    axes = _axes(axes, x.ndim, "axes")
    if x.shape is None or begin is None or end is None or strides is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    shape = list(x.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        shape[a] = shape_arith.slice_bounds(x.shape[a], b, e, s, attrs["assume_inbound"])[1]
    return relax.TensorStructInfo(shape, x.dtype)


register_op(
    "strided_slice",
    ("x", Arg("axes", "prims"), Arg("begin", "prims"), Arg("end", "prims"), Arg("strides", "prims", optional=True)),
    infer_strided_slice, attrs=(Attr("assume_inbound", False, bool_attr("assume_inbound")),),
    pattern="injective",
)


# ----------------------------------------------------------------------------- broadcast_to, tile, repeat


def infer_broadcast_to(args, attrs):
    x = tensor_arg(args[0], "x")
    vals, ndim = _shape_values(args[1], "shape")
    if x.ndim >= 0 and ndim >= 0 and ndim < x.ndim:
        raise OpError(f"cannot broadcast a tensor of rank {x.ndim} to rank {ndim}", "shape")
    if vals is None:
        return relax.TensorStructInfo(None, x.dtype, ndim)
    if x.shape is not None:
        off = len(vals) - x.ndim
        for k, d in enumerate(x.shape):
            t = vals[off + k]
            if static_dim(d) not in (None, 1) and static_dim(t) is not None and static_dim(d) != static_dim(t):
                raise OpError(f"cannot broadcast shape ({fmt_shape(x.shape)}) to ({fmt_shape(vals)}): "
                              f"dimension {k} is {static_dim(d)}, the target's {static_dim(t)}", "shape")
    return relax.TensorStructInfo(vals, x.dtype)


register_op("broadcast_to", ("x", Arg("shape", "shape")), infer_broadcast_to, pattern="broadcast")


def _repeats_list_attr(value):
    out = _int_list_attr("repeats", required=True)(value)
    if any(r < 0 for r in out):
        raise OpError(f"repeats {out} may not be negative", "repeats")
    return out


def infer_tile(args, attrs):
    x = tensor_arg(args[0], "data")
    reps = attrs["repeats"]
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    rank = max(x.ndim, len(reps))
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, rank)
    reps = [1] * (rank - len(reps)) + reps
    dims = [_i64(1)] * (rank - x.ndim) + list(x.shape)
    return relax.TensorStructInfo([shape_arith.mul(d, r) for d, r in zip(dims, reps)], x.dtype)


register_op("tile", ("data",), infer_tile, attrs=(Attr("repeats", REQUIRED, _repeats_list_attr),),
            pattern="injective")


def infer_repeat(args, attrs):
    x = tensor_arg(args[0], "data")
    reps, axis = attrs["repeats"], attrs["axis"]
    if axis is None:
        if x.shape is None:
            return relax.TensorStructInfo(None, x.dtype, 1)
        return relax.TensorStructInfo([shape_arith.mul(shape_arith.product(list(x.shape), _i64(1)), reps)], x.dtype)
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    axis = normalize_axis(axis, x.ndim, "axis")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    shape = list(x.shape)
    shape[axis] = shape_arith.mul(shape[axis], reps)
    return relax.TensorStructInfo(shape, x.dtype)


register_op("repeat", ("data",), infer_repeat,
            attrs=(Attr("repeats", REQUIRED, int_attr("repeats", 1)), Attr("axis", None, optional_int_attr("axis"))),
            pattern="injective")


# ----------------------------------------------------------------------------- flip


def infer_flip(args, attrs):
    """The data's struct info: flip reverses the order along ``axis`` only."""
    x = tensor_arg(args[0], "data")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


# TVM's ``relax.op.flip(data, axis)`` has no default axis; its PrimFunc is ``flip``.
register_op("flip", ("data",), infer_flip, attrs=(Attr("axis", REQUIRED, int_attr("axis")),),
            pattern="injective")


# ----------------------------------------------------------------------------- dynamic_strided_slice


def infer_dynamic_strided_slice(args, attrs):
    """The data's rank and dtype; the extents depend on the 1-D int64 begin/end/strides values,
    known only at run time (TVM infers the same)."""
    x = tensor_arg(args[0], "x")
    for sinfo, name in zip(args[1:], ("begin", "end", "strides")):
        t = integer_tensor(sinfo, name)
        if t.ndim >= 0 and t.ndim != 1:
            raise OpError(f"{name} must be 1-D (one value per axis of x), got rank {t.ndim}", name)
        if t.shape is not None and x.ndim >= 0 and static_dim(t.shape[0]) not in (None, x.ndim):
            raise OpError(f"{name} has {static_dim(t.shape[0])} values but x has rank {x.ndim}", name)
    return relax.TensorStructInfo(None, x.dtype, x.ndim)


# TVM's ``relax.op.dynamic_strided_slice(x, begin, end, strides)``. TVM legalizes it into a
# shape function, R.tensor_to_shape and a slice kernel; here the VM slices on the host
# (compiler/build.py: _HOST_OPS), with NumPy's slicing rules, which TOPI's clamping follows.
register_op("dynamic_strided_slice", ("x", "begin", "end", "strides"), infer_dynamic_strided_slice)


# ----------------------------------------------------------------------------- collapse_sum_like, collapse_sum_to


def _collapse_target(x: relax.TensorStructInfo, target, ndim: int, what: str) -> None:
    """``target`` (dims or None) must broadcast to ``x``'s shape: the sum undoes a broadcast."""
    if x.ndim >= 0 and ndim >= 0 and ndim > x.ndim:
        raise OpError(f"cannot collapse a tensor of rank {x.ndim} to rank {ndim}", what)
    if target is None or x.shape is None:
        return
    off = x.ndim - len(target)
    for k, t in enumerate(target):
        d = x.shape[off + k]
        if static_dim(t) not in (None, 1) and static_dim(d) is not None and static_dim(t) != static_dim(d):
            raise OpError(f"shape ({fmt_shape(target)}) does not broadcast to the data's shape "
                          f"({fmt_shape(x.shape)}): dimension {k} is {static_dim(t)}, the data's {static_dim(d)}",
                          what)


def infer_collapse_sum_like(args, attrs):
    """The target tensor's shape, the data's dtype."""
    x, t = tensor_arg(args[0], "data"), tensor_arg(args[1], "collapse_target")
    shape = list(t.shape) if t.shape is not None else None
    _collapse_target(x, shape, t.ndim, "collapse_target")
    return relax.TensorStructInfo(shape, x.dtype, t.ndim if shape is None else -1)


def infer_collapse_sum_to(args, attrs):
    """The given shape, the data's dtype."""
    x = tensor_arg(args[0], "data")
    vals, ndim = _shape_values(args[1], "shape")
    _collapse_target(x, vals, ndim, "shape")
    return relax.TensorStructInfo(vals, x.dtype, ndim if vals is None else -1)


register_op("collapse_sum_like", ("data", "collapse_target"), infer_collapse_sum_like, pattern="reduce")
register_op("collapse_sum_to", ("data", Arg("shape", "shape")), infer_collapse_sum_to, pattern="reduce")


# ----------------------------------------------------------------------------- tensor_to_shape


def infer_tensor_to_shape(args, attrs):
    """A shape with as many dims as the 1-D tensor has elements (its values are known only at
    run time). TVM does not legalize it: the VM reads the tensor into a shape."""
    t = tensor_arg(args[0], "expr")
    if t.ndim >= 0 and t.ndim != 1:
        raise OpError(f"tensor_to_shape needs a 1-D tensor, got rank {t.ndim}", "expr")
    if t.dtype and not t.dtype.startswith(("int", "uint")):
        raise OpError(f"tensor_to_shape needs integers, not {t.dtype}", "expr")
    n = static_dim(t.shape[0]) if t.shape is not None else None
    return relax.ShapeStructInfo(None, n if n is not None else -1)


register_op("tensor_to_shape", ("expr",), infer_tensor_to_shape)


# ----------------------------------------------------------------------------- reverse_sequence


def infer_reverse_sequence(args, attrs):
    """The data's struct info. ``seq_lengths`` holds one int32/int64 length per batch (the
    data's extent along ``batch_axis``)."""
    x, lengths = tensor_arg(args[0], "data"), tensor_arg(args[1], "seq_lengths")
    if lengths.dtype and lengths.dtype not in ("int32", "int64"):
        raise OpError(f"seq_lengths must be int32 or int64, not {lengths.dtype}", "seq_lengths")
    if lengths.ndim >= 0 and lengths.ndim != 1:
        raise OpError(f"seq_lengths must be 1-D (one length per batch), got rank {lengths.ndim}", "seq_lengths")
    if x.ndim >= 0:
        normalize_axis(attrs["seq_axis"], x.ndim, "seq_axis")
        batch = normalize_axis(attrs["batch_axis"], x.ndim, "batch_axis")
        if x.shape is not None and lengths.shape is not None:
            n, b = static_dim(lengths.shape[0]), static_dim(x.shape[batch])
            if n is not None and b is not None and n != b:
                raise OpError(f"seq_lengths has {n} lengths but the data has {b} batches along axis {batch}",
                              "seq_lengths")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


register_op("reverse_sequence", ("data", "seq_lengths"), infer_reverse_sequence,
            attrs=(Attr("seq_axis", 1, int_attr("seq_axis")), Attr("batch_axis", 0, int_attr("batch_axis"))),
            pattern="injective")


# ----------------------------------------------------------------------------- layout_transform


class IndexMapAttr:
    """The ``index_map`` attribute of ``R.layout_transform``: an `IndexMap` (the IR's, which
    the schedules take too, wrapped here) that prints as TVM prints one in an attribute,
    ``T.index_map(lambda i: (i // 4, i % 4))`` (the printer writes an attribute it does not
    know by its ``repr``), and compares by structure, its variables matched by position."""

    __slots__ = ("map",)

    def __init__(self, index_map) -> None:
        self.map = index_map

    @property
    def params(self) -> list:
        return self.map.initial_indices

    @property
    def outputs(self) -> list:
        return self.map.final_indices

    def __repr__(self) -> str:
        return printer().index_map_text(self.params, self.outputs)

    def __eq__(self, other) -> bool:
        if not isinstance(other, IndexMapAttr) or len(self.params) != len(other.params):
            return False
        return StructuralEqual(map_free_vars=True).equal([self.params, self.outputs], [other.params, other.outputs])

    def __hash__(self) -> int:
        return hash((len(self.params), len(self.outputs)))


def _index_map_attr(value):
    """An index map from the parser (an `IndexMap`) or from Python (``relax.op.layout_transform(x,
    index_map=lambda i: (i // 4, i % 4))``, a function of int64 index variables)."""
    if value is REQUIRED:
        raise OpError("index_map is required", "index_map")
    if isinstance(value, IndexMapAttr):
        return value
    if isinstance(value, IndexMap):
        return IndexMapAttr(value)
    if callable(value):
        return IndexMapAttr(IndexMap.from_func(value))
    raise OpError(f"index_map must be a function such as lambda i: (i // 4, i % 4), not {value!r}", "index_map")


def _pad_value_attr(value):
    if value is None or isinstance(value, tir.PrimExpr):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OpError(f"pad_value must be a number or None, not {value!r}", "pad_value")
    return value


def canonicalize_layout_transform(args, attrs):
    """A numeric pad value takes the data's dtype when the call is made, as TVM's does
    (printed ``pad_value=T.float32(2.0)``)."""
    pad = attrs.get("pad_value")
    x = relax.struct_info_of(args[0])
    if pad is None or isinstance(pad, tir.PrimExpr) or not isinstance(x, relax.TensorStructInfo) or not x.dtype:
        return args, attrs
    return args, dict(attrs, pad_value=tir.const(pad, x.dtype))


def infer_layout_transform(args, attrs):
    """The extents the map's outputs sweep while the data's indices cover its shape
    (``lambda i: (i // 4, i % 4)`` of (10,) is (3, 4): two padded elements)."""
    x = tensor_arg(args[0], "x")
    m = attrs["index_map"]
    if x.ndim >= 0 and x.ndim != len(m.params):
        raise OpError(f"index_map takes {len(m.params)} indices but the data has rank {x.ndim}", "index_map")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, len(m.outputs))
    try:
        shape = map_shape(m.map, list(x.shape))
    except ValueError as err:
        raise OpError(f"index_map: {err}", "index_map") from None
    return relax.TensorStructInfo(shape, x.dtype)


register_op("layout_transform", ("x",), infer_layout_transform,
            attrs=(Attr("index_map", REQUIRED, _index_map_attr), Attr("pad_value", None, _pad_value_attr)),
            pattern="injective", canonicalize=canonicalize_layout_transform)
