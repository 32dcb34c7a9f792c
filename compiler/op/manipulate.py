"""Shape manipulation ops: permute_dims, reshape, expand_dims, squeeze, flatten, concat, split,
strided_slice, take, broadcast_to, tile, repeat, reverse_sequence, collapse_sum_like/to,
layout_transform and tensor_to_shape (inferred only: the VM reads a tensor into a shape); and
the indexed ops gather_elements, scatter_elements and one_hot.

Where TVM infers a shape for a call older checks here rejected, the table follows TVM:
``split`` into sections that do not divide the axis (ceil-sized pieces, the last one shorter),
split indices out of order (a piece ending before it begins is empty), ``concat(axis=None)``
of 1-D tensors, ``take`` of a prim-value index.

All are injective (every output element is one input element), expand_dims, squeeze and
broadcast_to more precisely broadcast (their loads index the output's loop variables in order,
some left out), as TVM's pattern analysis finds their PrimFuncs; they legalize to the TOPI
computes in ``compiler/topi/transform.py`` under TVM's PrimFunc names (``reshape``,
``concatenate``, ``split``, ...). Output shapes are symbolic where the input's are, built with
the same folding index arithmetic the TE uses.

gather_elements and one_hot print and legalize as TVM 0.27's (``gather``, ``one_hot``);
negative indices count from the end. scatter_elements reduces over the updates in TE (see
``topi.scatter_elements``), so its PrimFunc is out-ewise-fusable where TVM's sequential kernel
is opaque; its "mean" reduction (TVM's pairwise running average) is not supported.
"""

from __future__ import annotations

from tvmscript import relax, tir

from .. import topi
from ..topi import transform as tt
from .common import (REQUIRED, axes_attr, bool_attr, dim_equal, fmt_shape, int_attr, normalize_axis,
                     shapes_known, static_dim, te_legalizer, tensor_arg)
from .registry import Arg, Attr, OpError, register_op


def _i64(v: int) -> tir.IntImm:
    return tir.IntImm("int64", v)


def _optional_int_attr(name: str):
    int_conv = int_attr(name)

    def convert(value):
        return None if value is None else int_conv(value)

    return convert


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


def _mode_attr(value):
    if value not in ("fast", "clip", "wrap"):
        raise OpError(f"mode must be \"fast\", \"clip\" or \"wrap\", not {value!r}", "mode")
    return value


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
    legalize=te_legalizer(topi.transpose, "transpose", ("axes",)),
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
        known = tt.product([d for d in vals if static_dim(d) != -1])
        total = tt.product(list(xshape))
        if static_dim(known) == 0 or (static_dim(known) is not None and static_dim(total) is not None
                                   and static_dim(total) % static_dim(known)):
            raise OpError(f"cannot reshape a tensor of shape ({fmt_shape(xshape)}) into ({fmt_shape(vals)})",
                          "shape")
        vals = [tt.floordiv(total, known) if static_dim(d) == -1 else d for d in vals]
    return [x, relax.ShapeExpr(vals, relax.ShapeStructInfo(vals))], attrs


def infer_reshape(args, attrs):
    x = tensor_arg(args[0], "x")
    vals, ndim = _shape_values(args[1], "shape")
    if vals is None:
        return relax.TensorStructInfo(None, x.dtype, ndim)
    if any(static_dim(d) is not None and static_dim(d) < 0 for d in vals):
        raise OpError(f"shape ({fmt_shape(vals)}) has a negative dimension", "shape")
    if x.shape is not None:
        old, new = tt.product(list(x.shape)), tt.product(vals)
        if static_dim(old) is not None and static_dim(new) is not None and static_dim(old) != static_dim(new):
            raise OpError(f"cannot reshape a tensor of shape ({fmt_shape(x.shape)}) ({static_dim(old)} elements) "
                          f"into ({fmt_shape(vals)}) ({static_dim(new)} elements)", "shape")
    return relax.TensorStructInfo(vals, x.dtype)


def legalize_reshape(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.reshape, call.args[0], list(call.struct_info.shape), primfunc_name_hint="reshape")


register_op("reshape", ("x", Arg("shape", "shape")), infer_reshape, pattern="injective",
            legalize=legalize_reshape, canonicalize=canonicalize_reshape)


def infer_flatten(args, attrs):
    x = tensor_arg(args[0], "x")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, 1)
    return relax.TensorStructInfo([tt.product(list(x.shape), _i64(1))], x.dtype)


register_op("flatten", ("x",), infer_flatten, pattern="injective", legalize=legalize_reshape)


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
            attrs=(Attr("axis", REQUIRED, _int_list_attr("axis", required=True)),), pattern="broadcast",
            legalize=te_legalizer(topi.expand_dims, "expand_dims", ("axis",)))


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
            pattern="broadcast", legalize=te_legalizer(topi.squeeze, "squeeze", ("axis",)))


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
                out[k] = tt.add(out[k], t.shape[k])
            elif static_dim(out[k]) is not None and static_dim(t.shape[k]) is not None and not dim_equal(out[k], t.shape[k]):
                raise OpError(f"the tensors' shapes differ off the concatenation axis {axis}: "
                              f"({fmt_shape(ts[0].shape)}) and ({fmt_shape(t.shape)})", "tensors")
    return relax.TensorStructInfo(out, dtype)


def _tuple_tensors(bb, tup) -> list:
    """The fields of a tuple expression (a ``relax.Tuple`` as they are, else ``TupleGetItem``s
    bound to variables) to pass to TE as separate tensors."""
    if isinstance(tup, relax.Tuple):
        return list(tup.fields)
    n = len(relax.struct_info_of(tup).fields)
    return [bb.emit(relax.TupleGetItem(tup, i)) for i in range(n)]


def legalize_concat(bb, call):
    if not shapes_known(call):
        return None
    return bb.call_te(topi.concatenate, _tuple_tensors(bb, call.args[0]), axis=call.attrs["axis"] or 0,
                      primfunc_name_hint="concatenate")


register_op("concat", (Arg("tensors", "tensors"),), infer_concat, attrs=(Attr("axis", 0, _optional_int_attr("axis")),),
            pattern="injective", legalize=legalize_concat)


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
    bounds = tt.split_bounds(dim, sections)
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
            pattern="injective", legalize=te_legalizer(topi.split, "split", ("indices_or_sections", "axis")))


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
        shape[a] = tt.slice_bounds(x.shape[a], b, e, s, attrs["assume_inbound"])[1]
    return relax.TensorStructInfo(shape, x.dtype)


def legalize_strided_slice(bb, call):
    if not shapes_known(call):
        return None
    x, *prims = call.args
    vals = [[f.value.value for f in p.fields] for p in prims]
    if len(vals) == 3:
        vals.append([1] * len(vals[0]))
    axes, begin, end, strides = vals
    return bb.call_te(topi.strided_slice, x, begin, end, strides, axes, call.attrs["assume_inbound"],
                      primfunc_name_hint="strided_slice")


register_op(
    "strided_slice",
    ("x", Arg("axes", "prims"), Arg("begin", "prims"), Arg("end", "prims"), Arg("strides", "prims", optional=True)),
    infer_strided_slice, attrs=(Attr("assume_inbound", False, bool_attr("assume_inbound")),),
    pattern="injective", legalize=legalize_strided_slice,
)


# ----------------------------------------------------------------------------- take


def _take_indices(sinfo) -> relax.TensorStructInfo:
    """The indices of a take: a tensor, or a prim value (``R.take(x, i, axis=1)``: one index,
    a 0-d tensor, so the axis is dropped)."""
    if isinstance(sinfo, relax.PrimStructInfo):
        return relax.TensorStructInfo([], sinfo.dtype)
    return tensor_arg(sinfo, "indices")


def legalize_take(bb, call):
    """``T_take``; a prim-value index (``R.prim_value(2)``, ``n - 1`` of the data's symbolic
    dims) is an expression in the PrimFunc. A prim-value variable index would be a scalar
    parameter, which ``call_te`` cannot pass yet: that call stays as it is."""
    if not shapes_known(call):
        return None
    x, idx = call.args
    if isinstance(relax.struct_info_of(idx), relax.PrimStructInfo):
        if not isinstance(idx, relax.PrimValue):
            return None
        idx = idx.value
    return bb.call_te(topi.take, x, idx, axis=call.attrs["axis"], mode=call.attrs["mode"], primfunc_name_hint="take")


def infer_take(args, attrs):
    x, idx = tensor_arg(args[0], "x"), _take_indices(args[1])
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise OpError(f"indices must be integers, not {idx.dtype}", "indices")
    axis = attrs["axis"]
    if axis is None:
        return relax.TensorStructInfo(list(idx.shape) if idx.shape is not None else None, x.dtype,
                                      idx.ndim if idx.shape is None else -1)
    if x.ndim < 0 or idx.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    axis = normalize_axis(axis, x.ndim, "axis")
    if x.shape is None or idx.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim - 1 + idx.ndim)
    return relax.TensorStructInfo(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]), x.dtype)


register_op("take", ("x", "indices"), infer_take,
            attrs=(Attr("axis", None, _optional_int_attr("axis")), Attr("mode", "fast", _mode_attr)),
            pattern="injective", legalize=legalize_take)


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


register_op("broadcast_to", ("x", Arg("shape", "shape")), infer_broadcast_to, pattern="broadcast",
            legalize=te_legalizer(topi.broadcast_to, "broadcast_to"))


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
    return relax.TensorStructInfo([tt.mul(d, r) for d, r in zip(dims, reps)], x.dtype)


register_op("tile", ("data",), infer_tile, attrs=(Attr("repeats", REQUIRED, _repeats_list_attr),),
            pattern="injective", legalize=te_legalizer(topi.tile, "tile", ("repeats",)))


def infer_repeat(args, attrs):
    x = tensor_arg(args[0], "data")
    reps, axis = attrs["repeats"], attrs["axis"]
    if axis is None:
        if x.shape is None:
            return relax.TensorStructInfo(None, x.dtype, 1)
        return relax.TensorStructInfo([tt.mul(tt.product(list(x.shape), _i64(1)), reps)], x.dtype)
    if x.ndim < 0:
        return relax.TensorStructInfo(None, x.dtype, -1)
    axis = normalize_axis(axis, x.ndim, "axis")
    if x.shape is None:
        return relax.TensorStructInfo(None, x.dtype, x.ndim)
    shape = list(x.shape)
    shape[axis] = tt.mul(shape[axis], reps)
    return relax.TensorStructInfo(shape, x.dtype)


register_op("repeat", ("data",), infer_repeat,
            attrs=(Attr("repeats", REQUIRED, int_attr("repeats", 1)), Attr("axis", None, _optional_int_attr("axis"))),
            pattern="injective", legalize=te_legalizer(topi.repeat, "repeat", ("repeats", "axis")))


# ----------------------------------------------------------------------------- gather_elements, scatter_elements


def _integer_indices(sinfo, what: str = "indices") -> relax.TensorStructInfo:
    idx = tensor_arg(sinfo, what)
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise OpError(f"{what} must be integers, not {idx.dtype}", what)
    return idx


def _same_rank(x: relax.TensorStructInfo, other: relax.TensorStructInfo, what: str) -> None:
    if x.ndim >= 0 and other.ndim >= 0 and x.ndim != other.ndim:
        raise OpError(f"{what} must have the data's rank {x.ndim}, got rank {other.ndim}", what)


def infer_gather_elements(args, attrs):
    """The indices' shape (the data's rank) with the data's dtype."""
    x, idx = tensor_arg(args[0], "data"), _integer_indices(args[1])
    _same_rank(x, idx, "indices")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(idx.shape) if idx.shape is not None else None, x.dtype,
                                  idx.ndim if idx.shape is None else -1)


register_op("gather_elements", ("data", "indices"), infer_gather_elements, attrs=(Attr("axis", 0, int_attr("axis")),),
            # TVM's analysis calls its gather opaque; an indexed load is injective here, as take's.
            pattern="injective", legalize=te_legalizer(topi.gather_elements, "gather", ("axis",)))


_SCATTER_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _reduction_attr(value):
    if value == "mean":
        raise OpError("reduction \"mean\" is not supported (TVM averages pairwise in update order); use "
                      "\"add\" and divide", "reduction")
    if value not in _SCATTER_REDUCTIONS:
        raise OpError(f"reduction must be one of {', '.join(repr(r) for r in _SCATTER_REDUCTIONS)}, not {value!r}",
                      "reduction")
    return value


def infer_scatter_elements(args, attrs):
    """The data's struct info; ``updates`` has the indices' shape and the data's dtype, both
    the data's rank."""
    x, idx = tensor_arg(args[0], "data"), _integer_indices(args[1])
    upd = tensor_arg(args[2], "updates")
    _same_rank(x, idx, "indices")
    _same_rank(x, upd, "updates")
    if upd.dtype and x.dtype and upd.dtype != x.dtype:
        raise OpError(f"updates have dtype {upd.dtype} but data has {x.dtype}", "updates")
    if idx.shape is not None and upd.shape is not None:
        for a, b in zip(idx.shape, upd.shape):
            if static_dim(a) is not None and static_dim(b) is not None and static_dim(a) != static_dim(b):
                raise OpError(f"updates have shape ({fmt_shape(upd.shape)}) but indices ({fmt_shape(idx.shape)})",
                              "updates")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


register_op("scatter_elements", ("data", "indices", "updates"), infer_scatter_elements,
            attrs=(Attr("axis", 0, int_attr("axis")), Attr("reduction", "update", _reduction_attr)),
            # Reductions over the updates, then the output stage (see topi.scatter_elements);
            # TVM's sequential kernel is opaque.
            pattern="out_ewise_fusable",
            legalize=te_legalizer(topi.scatter_elements, "scatter_elements", ("axis", "reduction")))


# ----------------------------------------------------------------------------- one_hot


def infer_one_hot(args, attrs):
    """The indices' shape with ``depth`` inserted at ``axis``, in the on/off values' dtype."""
    idx = _integer_indices(args[0])
    values = []
    for sinfo, what in ((args[1], "on_value"), (args[2], "off_value")):
        if not isinstance(sinfo, relax.PrimStructInfo):
            raise OpError(f"{what} must be a prim value such as R.prim_value(T.float32(1.0)), not a tensor", what)
        values.append(sinfo.dtype)
    if values[0] != values[1]:
        raise OpError(f"on_value and off_value dtypes differ ({values[0]} and {values[1]})", "off_value")
    depth = attrs["depth"]
    if idx.ndim < 0:
        return relax.TensorStructInfo(None, values[0], -1)
    axis = attrs["axis"]
    if not -(idx.ndim + 1) <= axis <= idx.ndim:
        raise OpError(f"axis {axis} is out of range for a result of rank {idx.ndim + 1}", "axis")
    axis = axis + idx.ndim + 1 if axis < 0 else axis
    if idx.shape is None:
        return relax.TensorStructInfo(None, values[0], idx.ndim + 1)
    shape = list(idx.shape)
    return relax.TensorStructInfo(shape[:axis] + [_i64(depth)] + shape[axis:], values[0])


def _one_hot_te(indices, on_value, off_value, depth, axis):
    return topi.one_hot(indices, on_value, off_value, depth, axis, on_value.dtype)


register_op("one_hot", ("indices", Arg("on_value", "prim"), Arg("off_value", "prim")), infer_one_hot,
            attrs=(Attr("depth", REQUIRED, int_attr("depth", 1)), Attr("axis", -1, int_attr("axis"))),
            pattern="broadcast", legalize=te_legalizer(_one_hot_te, "one_hot", ("depth", "axis")))


# ----------------------------------------------------------------------------- flip


def infer_flip(args, attrs):
    """The data's struct info: flip reverses the order along ``axis`` only."""
    x = tensor_arg(args[0], "data")
    if x.ndim >= 0:
        normalize_axis(attrs["axis"], x.ndim, "axis")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def _flip_te(data, axis):
    return tt.flip(data, normalize_axis(axis, len(data.shape), "axis"))


# TVM's ``relax.op.flip(data, axis)`` has no default axis; its PrimFunc is ``flip``.
register_op("flip", ("data",), infer_flip, attrs=(Attr("axis", REQUIRED, int_attr("axis")),),
            pattern="injective", legalize=te_legalizer(_flip_te, "flip", ("axis",)))


# ----------------------------------------------------------------------------- gather_nd


def infer_gather_nd(args, attrs):
    """The indices' shape less its last dim (``m``, the coordinates' length, which must be
    static), then the data's dims after the ``batch_dims + m`` it indexes."""
    x, idx = tensor_arg(args[0], "data"), _integer_indices(args[1])
    b = attrs["batch_dims"]
    if idx.ndim == 0:
        raise OpError("indices must have rank at least 1 (their last dim holds the coordinates)", "indices")
    if x.shape is None or idx.shape is None:
        return relax.TensorStructInfo(None, x.dtype, -1)
    m = static_dim(idx.shape[-1])
    if m is None:
        raise OpError("the indices' last dim (the coordinates' length) must be static", "indices")
    if b + m > x.ndim:
        raise OpError(f"batch_dims {b} plus the coordinates' length {m} exceed the data's rank {x.ndim}", "indices")
    if b > idx.ndim - 1:
        raise OpError(f"batch_dims {b} must be less than the indices' rank {idx.ndim}", "batch_dims")
    for k in range(b):
        if not dim_equal(x.shape[k], idx.shape[k]) and static_dim(x.shape[k]) is not None \
                and static_dim(idx.shape[k]) is not None:
            raise OpError(f"batch dim {k} differs: data ({fmt_shape(x.shape)}), indices ({fmt_shape(idx.shape)})",
                          "indices")
    return relax.TensorStructInfo(list(idx.shape[:-1]) + list(x.shape[b + m:]), x.dtype)


# TVM's ``relax.op.gather_nd(data, indices, batch_dims=0)``; its PrimFunc is ``te_gather_nd``.
register_op("gather_nd", ("data", "indices"), infer_gather_nd,
            attrs=(Attr("batch_dims", 0, int_attr("batch_dims", 0)),),
            pattern="injective", legalize=te_legalizer(topi.gather_nd, "te_gather_nd", ("batch_dims",)))


# ----------------------------------------------------------------------------- scatter_nd


def infer_scatter_nd(args, attrs):
    """The data's struct info; ``updates`` must be the indices' shape less its last dim (``m``,
    static), then the data's dims after the first ``m``, in the data's dtype."""
    x, idx = tensor_arg(args[0], "data"), _integer_indices(args[1])
    upd = tensor_arg(args[2], "updates")
    if upd.dtype and x.dtype and upd.dtype != x.dtype:
        raise OpError(f"updates have dtype {upd.dtype} but data has {x.dtype}", "updates")
    if idx.ndim == 0:
        raise OpError("indices must have rank at least 1 (their last dim holds the coordinates)", "indices")
    if x.shape is not None and idx.shape is not None:
        m = static_dim(idx.shape[-1])
        if m is None:
            raise OpError("the indices' last dim (the coordinates' length) must be static", "indices")
        if m > x.ndim:
            raise OpError(f"the coordinates' length {m} exceeds the data's rank {x.ndim}", "indices")
        expected = list(idx.shape[:-1]) + list(x.shape[m:])
        if upd.shape is not None:
            same = len(expected) == len(upd.shape) and all(
                dim_equal(a, b) or static_dim(a) is None or static_dim(b) is None for a, b in zip(expected, upd.shape))
            if not same:
                raise OpError(f"updates have shape ({fmt_shape(upd.shape)}), expected ({fmt_shape(expected)}) for data "
                              f"({fmt_shape(x.shape)}) and indices ({fmt_shape(idx.shape)})", "updates")
    return relax.TensorStructInfo(list(x.shape) if x.shape is not None else None, x.dtype, x.ndim)


def _scatter_nd_reduction_attr(value):
    if value not in ("update",) + _SCATTER_REDUCTIONS:
        raise OpError(f"reduction must be one of 'update', 'add', 'mul', 'min', 'max', not {value!r}", "reduction")
    return value


# TVM's ``relax.op.scatter_nd(data, indices, updates, reduction="update")``; PrimFunc
# ``scatter_nd``. Reductions over the updates then the output stage (out-ewise-fusable), where
# TVM's sequential kernel is opaque.
register_op("scatter_nd", ("data", "indices", "updates"), infer_scatter_nd,
            attrs=(Attr("reduction", "update", _scatter_nd_reduction_attr),),
            pattern="out_ewise_fusable", legalize=te_legalizer(topi.scatter_nd, "scatter_nd", ("reduction",)))


# ----------------------------------------------------------------------------- dynamic_strided_slice


def infer_dynamic_strided_slice(args, attrs):
    """The data's rank and dtype; the extents depend on the 1-D int64 begin/end/strides values,
    known only at run time (TVM infers the same)."""
    x = tensor_arg(args[0], "x")
    for sinfo, name in zip(args[1:], ("begin", "end", "strides")):
        t = _integer_indices(sinfo, name)
        if t.ndim >= 0 and t.ndim != 1:
            raise OpError(f"{name} must be 1-D (one value per axis of x), got rank {t.ndim}", name)
        if t.shape is not None and x.ndim >= 0 and static_dim(t.shape[0]) not in (None, x.ndim):
            raise OpError(f"{name} has {static_dim(t.shape[0])} values but x has rank {x.ndim}", name)
    return relax.TensorStructInfo(None, x.dtype, x.ndim)


# TVM's ``relax.op.dynamic_strided_slice(x, begin, end, strides)``. TVM legalizes it into a
# shape function, R.tensor_to_shape and a slice kernel; here the VM slices on the host
# (compiler/vm_codegen.py: _HOST_OPS), with NumPy's slicing rules, which TOPI's clamping follows.
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


def legalize_collapse_sum(bb, call):
    """Both ops legalize to one ``collapse_sum`` PrimFunc summing down to the result's shape."""
    if not shapes_known(call):
        return None
    return bb.call_te(topi.reduction.collapse_sum, call.args[0], list(call.struct_info.shape),
                      primfunc_name_hint="collapse_sum")


register_op("collapse_sum_like", ("data", "collapse_target"), infer_collapse_sum_like, pattern="reduce",
            legalize=legalize_collapse_sum)
register_op("collapse_sum_to", ("data", Arg("shape", "shape")), infer_collapse_sum_to, pattern="reduce",
            legalize=legalize_collapse_sum)


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


def _reverse_sequence_te(data, seq_lengths, seq_axis, batch_axis):
    n = len(data.shape)
    return tt.reverse_sequence(data, seq_lengths, normalize_axis(seq_axis, n, "seq_axis"),
                               normalize_axis(batch_axis, n, "batch_axis"))


register_op("reverse_sequence", ("data", "seq_lengths"), infer_reverse_sequence,
            attrs=(Attr("seq_axis", 1, int_attr("seq_axis")), Attr("batch_axis", 0, int_attr("batch_axis"))),
            pattern="injective",
            legalize=te_legalizer(_reverse_sequence_te, "reverse_sequence", ("seq_axis", "batch_axis")))


# ----------------------------------------------------------------------------- layout_transform


def _index_map_class():
    # Imported when first needed: the schedule package imports the op table's users.
    from ..schedule.reindex import IndexMap

    return IndexMap


class IndexMapAttr:
    """The ``index_map`` attribute of ``R.layout_transform``: an `IndexMap` (the schedule's
    own class, which this wraps) that prints as TVM prints one in an attribute,
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
        from tvmscript.printer.tir_printer import TIRPrinter

        printer = TIRPrinter()
        printer.default_int = "int64"  # the map's variables are int64: ``i // 4``, not ``T.int64(4)``
        outs = [printer.expr(e) for e in self.outputs]
        body = "(" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")"
        return f"T.index_map(lambda {', '.join(v.name for v in self.params)}: {body})"

    def __eq__(self, other) -> bool:
        from tvmscript.structural import StructuralEqual

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
    cls = _index_map_class()
    if isinstance(value, cls):
        return IndexMapAttr(value)
    if callable(value):
        return IndexMapAttr(cls.from_func(value))
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
        shape = m.map.map_shape(list(x.shape))
    except ValueError as err:
        raise OpError(f"index_map: {err}", "index_map") from None
    return relax.TensorStructInfo(shape, x.dtype)


def legalize_layout_transform(bb, call):
    """``te_layout_transform`` (``_with_pad`` when the map pads), for maps `tt.layout_transform`
    can invert; others stay as they are."""
    if not shapes_known(call):
        return None
    index_map = call.attrs["index_map"].map
    pads = tt.layout_transform_padded_axes(index_map, list(relax.struct_info_of(call.args[0]).shape))
    try:
        return bb.call_te(tt.layout_transform, call.args[0], index_map, call.attrs["pad_value"],
                          primfunc_name_hint="te_layout_transform_with_pad" if pads else "te_layout_transform")
    except ValueError:
        return None


register_op("layout_transform", ("x",), infer_layout_transform,
            attrs=(Attr("index_map", REQUIRED, _index_map_attr), Attr("pad_value", None, _pad_value_attr)),
            pattern="injective", canonicalize=canonicalize_layout_transform, legalize=legalize_layout_transform)
