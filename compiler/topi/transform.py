"""Shape manipulation (TVM's ``topi/transform.h``): ``T_transpose``, ``T_reshape``,
``T_squeeze``, ``T_concat``, ``T_split``, ``T_strided_slice_with_axes``, ``T_take``,
``T_broadcast_to``, ``T_tile``, ``T_repeat`` (loops ``ax0, ax1...``) and ``expand_dims``
(TVM's Python-style compute: loops ``i0, i1...``), and ``trilu`` (tril/triu, also Python-style);
``T_gather`` (gather_elements), ``T_one_hot`` and scatter_elements' stages.

Index arithmetic goes through the folding helpers of `tvmscript.ir.op.shape_arith` (``add``,
``mul``, ``floordiv``, ``floormod``), so that constant parts are folded and unit factors
dropped: there is no general arithmetic simplifier, and these keep the printed TIR close to
what TVM's prints. The ops' inference computes their symbolic output shapes with the same
helpers.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.arith.index_map import inverse_indices, map_shape
from tvmscript.ir.op.shape_arith import (add, as_int, dim_expr, floordiv, floormod, int_imm, mul, product, ravel,
                                         slice_bounds, split_bounds, sub, unify_dtypes, unravel)
from tvmscript.ir.tir_arith import is_one

from .. import te
from ._util import compute

__all__ = [
    "transpose", "reshape", "expand_dims", "squeeze", "concatenate", "split", "strided_slice", "take",
    "broadcast_to", "tile", "repeat", "trilu", "gather_elements", "scatter_elements", "one_hot", "flip",
    "gather_nd", "scatter_nd",
]


def _cast_index(i, dtype: str):
    return i if i.dtype == dtype else te.cast(i, dtype)


# ----------------------------------------------------------------------------- operators


def transpose(x: te.Tensor, axes=None) -> te.Tensor:
    """``T_transpose``: output dim ``i`` is input dim ``axes[i]`` (reversed when None)."""
    n = len(x.shape)
    axes = list(range(n))[::-1] if axes is None else [a + n if a < 0 else a for a in axes]
    oshape = [x.shape[a] for a in axes]

    def f(idx):
        src = [None] * n
        for i, a in enumerate(axes):
            src[a] = idx[i]
        return x[tuple(src)]

    return compute(oshape, f, name="T_transpose")


def reshape(x: te.Tensor, newshape) -> te.Tensor:
    """``T_reshape``: element ``i`` of the output is the element at the same row-major position
    of ``x`` (``newshape`` fully resolved: no -1 or 0)."""
    oshape = list(newshape)
    ishape = list(x.shape)
    if not ishape:
        return compute(oshape, lambda idx: x[()], name="T_reshape")
    return compute(oshape, lambda idx: x[tuple(_source_indices(ravel(idx, oshape), ishape))], name="T_reshape")


def _source_indices(flat, shape: list) -> list:
    """TOPI's unravel of a flat index, ``% d`` on every dimension (the outermost too) over nested
    divisions, put in canonical form without the loops' ranges: the form TVM's legalized
    reshape prints, as its ``create_prim_func`` simplifies each body (``(v_ax1 // 48 + v_ax0)
    % 2``, ``v_ax1 % 16 // 4``)."""
    out = []
    for d in reversed(shape):
        out.append(simplify(floormod(flat, d)))
        flat = floordiv(flat, d)
    return out[::-1]


def expand_dims(x: te.Tensor, axis) -> te.Tensor:
    """``expand_dims``: unit dimensions inserted at the (normalized, output) positions ``axis``."""
    axes = set(axis if isinstance(axis, (list, tuple)) else [axis])
    ndim = len(x.shape) + len(axes)
    axes = {a + ndim if a < 0 else a for a in axes}
    oshape, it = [], iter(x.shape)
    for k in range(ndim):
        oshape.append(tir.IntImm(x.shape[0].dtype if x.shape else "int64", 1) if k in axes else next(it))
    keep = [k for k in range(ndim) if k not in axes]
    return te.compute(oshape, lambda *i: x[tuple(i[k] for k in keep)], name="expand_dims")


def squeeze(x: te.Tensor, axis=None) -> te.Tensor:
    """``T_squeeze``: the unit dimensions ``axis`` (all static unit ones when None) dropped."""
    n = len(x.shape)
    if axis is None:
        axes = {k for k, d in enumerate(x.shape) if is_one(d)}
    else:
        axes = {a + n if a < 0 else a for a in axis}
    keep = [k for k in range(n) if k not in axes]
    oshape = [x.shape[k] for k in keep]

    def f(idx):
        src, it = [], iter(idx)
        for k, d in enumerate(x.shape):
            src.append(int_imm(0, d) if k in axes else next(it))
        return x[tuple(src)]

    return compute(oshape, f, name="T_squeeze")


def concatenate(tensors, axis: int = 0) -> te.Tensor:
    """``T_concat``: nested ``if_then_else(offset_j <= i, t_j[i - offset_j], ...)`` along
    ``axis``, last tensor outermost (as TOPI writes it)."""
    tensors = list(tensors)
    n = len(tensors[0].shape)
    axis = axis + n if axis < 0 else axis
    offsets = [int_imm(0, tensors[0].shape[axis])]
    for t in tensors[:-1]:
        offsets.append(add(offsets[-1], t.shape[axis]))
    oshape = list(tensors[0].shape)
    oshape[axis] = add(offsets[-1], tensors[-1].shape[axis])

    def f(idx):
        def load(j):
            src = list(idx)
            src[axis] = sub(idx[axis], offsets[j])
            return tensors[j][tuple(src)]

        out = load(0)
        for j in range(1, len(tensors)):
            out = te.if_then_else(tir.LE("bool", offsets[j], idx[axis]), load(j), out)
        return out

    return compute(oshape, f, name="T_concat")


def split(x: te.Tensor, indices_or_sections, axis: int = 0) -> list:
    """``T_split_sections``/``T_split`` (``_1``, ``_2``... for the later outputs): the pieces of
    ``x`` along ``axis``, equal sections or cut at the given indices (clamped to the extent)."""
    n = len(x.shape)
    axis = axis + n if axis < 0 else axis
    bounds = split_bounds(x.shape[axis], indices_or_sections)
    base = "T_split_sections" if isinstance(indices_or_sections, int) else "T_split"
    outs = []
    for j, (begin, extent) in enumerate(bounds):
        oshape = list(x.shape)
        oshape[axis] = extent

        def f(idx, begin=begin):
            src = list(idx)
            src[axis] = add(idx[axis], begin)
            return x[tuple(src)]

        outs.append(compute(oshape, f, name=base if j == 0 else f"{base}_{j}"))
    return outs


def strided_slice(x: te.Tensor, begin: list, end: list, strides: list, axes: list,
                  assume_inbound: bool = False) -> te.Tensor:
    """``T_strided_slice_with_axes``: along each of ``axes``, index ``begin + i * stride``."""
    n = len(x.shape)
    oshape = list(x.shape)
    starts = {}
    for a, b, e, s in zip(axes, begin, end, strides):
        a = a + n if a < 0 else a
        start, extent = slice_bounds(x.shape[a], b, e, s, assume_inbound)
        starts[a] = (start, s)
        oshape[a] = extent

    def f(idx):
        src = list(idx)
        for a, (start, s) in starts.items():
            src[a] = add(mul(idx[a], s), start) if s > 0 else sub(start, mul(idx[a], -s))
        return x[tuple(src)]

    return compute(oshape, f, name="T_strided_slice_with_axes")


def take(x: te.Tensor, indices, axis=None, mode: str = "fast") -> te.Tensor:
    """``T_take``: ``x`` gathered along ``axis`` at ``indices`` (``x`` flattened when axis is
    None). ``mode``: "fast" (indices assumed in bounds), "clip" (clamped), "wrap" (modulo).
    ``indices`` may be a scalar (a PrimExpr, Relax's prim-value index): the axis is dropped."""
    if not isinstance(indices, te.Tensor):
        scalar = dim_expr(indices)
        indices = _ScalarIndex(scalar)
    ishape = list(indices.shape)
    if axis is None:
        extent = product(list(x.shape))
        oshape = ishape
    else:
        n = len(x.shape)
        axis = axis + n if axis < 0 else axis
        extent = x.shape[axis]
        oshape = list(x.shape[:axis]) + ishape + list(x.shape[axis + 1:])

    def gather_index(i):
        dtype = extent.dtype
        if mode == "clip":
            i = _cast_index(i, dtype)
            return tir.Min(dtype, tir.Max(dtype, int_imm(0, extent), i), sub(extent, 1))
        if mode == "wrap":
            i = _cast_index(i, dtype)
            return tir.Mod(dtype, tir.Add(dtype, tir.Mod(dtype, i, extent), extent), extent)
        return i

    def f(idx):
        if axis is None:
            k = gather_index(indices[tuple(idx)] if ishape else indices[()])
            src = unravel(_cast_index(k, extent.dtype), list(x.shape)) if len(x.shape) != 1 else [k]
            return x[tuple(src)]
        m = len(ishape)
        k = gather_index(indices[tuple(idx[axis:axis + m])] if ishape else indices[()])
        return x[tuple(idx[:axis] + [k] + idx[axis + m:])]

    return compute(oshape, f, name="T_take")


class _ScalarIndex:
    """A scalar index standing in for a 0-d index tensor (``indices[()]`` is the scalar)."""

    shape: list = []

    def __init__(self, value) -> None:
        self.value = value

    def __getitem__(self, idx):
        return self.value


def broadcast_to(x: te.Tensor, shape) -> te.Tensor:
    """``T_broadcast_to``: ``x`` read at index 0 along its unit dimensions that are broadcast."""
    oshape = list(shape)
    off = len(oshape) - len(x.shape)

    def f(idx):
        src = []
        for k, d in enumerate(x.shape):
            src.append(int_imm(0, d) if is_one(d) and not is_one(oshape[off + k]) else idx[off + k])
        return x[tuple(src)]

    return compute(oshape, f, name="T_broadcast_to")


def tile(x: te.Tensor, repeats) -> te.Tensor:
    """``T_tile``: the output dims are ``x``'s (padded with leading ones) times ``repeats``
    (padded with leading ones); element ``i`` reads ``x[i % dim]`` on ``x``'s dimensions."""
    repeats = [repeats] if isinstance(repeats, int) else list(repeats)
    n = len(x.shape)
    rank = max(n, len(repeats))
    reps = [1] * (rank - len(repeats)) + repeats
    dims = [None] * (rank - n) + list(x.shape)
    like = x.shape[0] if x.shape else None
    oshape = [int_imm(r, like) if d is None else mul(d, r) for d, r in zip(dims, reps)]
    off = rank - n

    def f(idx):
        if not n:
            return x[()]
        return x[tuple(floormod(idx[off + k], d) for k, d in enumerate(x.shape))]

    return compute(oshape, f, name="T_tile")


def flip(x: te.Tensor, axis: int) -> te.Tensor:
    """``T_reverse_sequence`` (TVM's flip): element ``i`` reads ``x`` at ``dim - 1 - i`` along
    ``axis`` (already normalized), at ``i`` elsewhere."""
    dim = x.shape[axis]

    def f(idx):
        return x[tuple(sub(sub(dim, 1), i) if k == axis else i for k, i in enumerate(idx))]

    return compute(x.shape, f, name="T_reverse_sequence")


def reverse_sequence(x: te.Tensor, seq_lengths: te.Tensor, seq_axis: int, batch_axis: int) -> te.Tensor:
    """``T_reverse_sequence``: along ``seq_axis`` (normalized), the first ``seq_lengths[b]``
    elements of batch ``b`` (its index along ``batch_axis``) reversed, the rest kept; a length
    above the axis's extent reverses the whole axis, one of at most 1 nothing (TVM's rule)."""
    dim = x.shape[seq_axis]

    def f(idx):
        i, n = idx[seq_axis], seq_lengths[idx[batch_axis]]
        n = _cast_index(n, i.dtype)
        keep = tir.Or("bool", tir.LE("bool", n, int_imm(1, i)), tir.LE("bool", n, i))
        whole = tir.LT("bool", dim if dim.dtype == i.dtype else _cast_index(dim, i.dtype), n)
        rev = te.if_then_else(whole, sub(sub(dim, 1), i), sub(sub(n, i), 1))
        src = list(idx)
        src[seq_axis] = te.if_then_else(keep, i, rev)
        return x[tuple(src)]

    return compute(x.shape, f, name="T_reverse_sequence")


def repeat(x: te.Tensor, repeats: int, axis=None) -> te.Tensor:
    """``T_repeat``: each element repeated ``repeats`` times along ``axis`` (along the flattened
    tensor, computed by a ``T_reshape`` stage first, when None)."""
    if axis is None:
        x = reshape(x, [product(list(x.shape))])
        axis = 0
    n = len(x.shape)
    axis = axis + n if axis < 0 else axis
    oshape = list(x.shape)
    oshape[axis] = mul(oshape[axis], repeats)

    def f(idx):
        src = list(idx)
        src[axis] = floordiv(idx[axis], repeats)
        return x[tuple(src)]

    return compute(oshape, f, name="T_repeat")


def trilu(x: te.Tensor, k, upper: bool) -> te.Tensor:
    """``trilu``: ``x`` with the elements off the kept triangle of its last two dimensions set
    to zero. Lower (tril) keeps column ``j <= i + k``, upper (triu) keeps ``i + k <= j`` (as
    TVM's ``topi.trilu`` selects; ``k`` is a number or PrimExpr, symbolic extents welcome)."""
    zero = tir.const(0, x.dtype) if x.dtype != "bool" else tir.IntImm("bool", 0)

    def f(*idx):
        i, j = idx[-2], idx[-1]
        shifted = add(i, k if isinstance(k, tir.PrimExpr) else int_imm(k, i))
        keep = tir.LE("bool", shifted, j) if upper else tir.LE("bool", j, shifted)
        return tir.Select(x.dtype, keep, x[tuple(idx)], zero)

    return te.compute(x.shape, f, name="trilu")


# ----------------------------------------------------------------------------- gather, scatter, one_hot


def _wrap_negative(i, extent):
    """An index that counts from the end when negative (ONNX's and PyTorch's convention):
    ``i + extent`` where ``i < 0``."""
    extent = extent if isinstance(extent, tir.PrimExpr) else int_imm(extent, i)
    i = _cast_index(i, extent.dtype)
    return tir.Select(extent.dtype, tir.LT("bool", i, int_imm(0, extent)), add(i, extent), i)


def gather_nd(data: te.Tensor, indices: te.Tensor, batch_dims: int = 0) -> te.Tensor:
    """``T_gather_nd`` (ONNX GatherND): the indices' last dim (``m``) holds coordinates into
    ``data``'s dims after the ``batch_dims`` leading ones, which both share; the output is the
    indices' shape less that last dim, then ``data``'s dims after the ``batch_dims + m``
    indexed ones. Negative coordinates count from the end."""
    m = as_int(indices.shape[-1])
    b = batch_dims
    nidx = len(indices.shape) - 1
    oshape = list(indices.shape[:-1]) + list(data.shape[b + m:])

    def f(idx):
        head, rest = idx[:nidx], idx[nidx:]
        coords = [_wrap_negative(indices[tuple(head) + (int_imm(k, head[0] if head else None),)], data.shape[b + k])
                  for k in range(m)]
        return data[tuple(head[:b]) + tuple(coords) + tuple(rest)]

    return compute(oshape, f, name="T_gather_nd")


def gather_elements(data: te.Tensor, indices: te.Tensor, axis: int = 0) -> te.Tensor:
    """``out[p] = data[p with p[axis] = indices[p]]`` (ONNX GatherElements, ``torch.gather``):
    block ``T_gather``, loops ``ax0..`` over the indices' shape, as TVM's ``topi.gather``;
    negative indices count from the end."""
    n = len(data.shape)
    axis = axis + n if axis < 0 else axis

    def f(idx):
        src = list(idx)
        src[axis] = _wrap_negative(indices[tuple(idx)], data.shape[axis])
        return data[tuple(src)]

    return compute(indices.shape, f, name="T_gather")


_SCATTER_REDUCERS = {"add": "sum", "mul": "prod", "min": "min", "max": "max"}


def scatter_elements(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, axis: int = 0,
                     reduction: str = "update") -> te.Tensor:
    """``data`` with ``updates[q]`` written at ``q with q[axis] = indices[q]`` (ONNX
    ScatterElements, ``torch.scatter``/``scatter_reduce(include_self=True)``); ``reduction``
    "update" (the last update to an element wins, as a sequential loop gives), "add", "mul",
    "min" or "max" (combined with the element).

    TVM writes a sequential loop over the updates; TE has none, so each output element reduces
    over the updates that could reach it (those in its line along ``axis``, ``k`` from 0 to the
    indices' extent there): ``T_scatter_hit`` (for "update": the last ``k`` hitting the element,
    or -1) or ``T_scatter_red`` (the combined updates), then ``T_scatter_elements``. That is
    ``O(n * m)`` for lines of ``n`` outputs and ``m`` updates, where TVM's loop is ``O(n + m)``."""
    n = len(data.shape)
    axis = axis + n if axis < 0 else axis
    ishape = list(indices.shape)
    k = te.reduce_axis((0, ishape[axis]), name="k")

    def source(idx):
        q = list(idx)
        q[axis] = k
        return tuple(q)

    def in_range(idx):
        """The element's line exists in ``indices`` (it may be smaller than ``data``)."""
        conds = [tir.LT("bool", idx[d], ishape[d]) for d in range(n)
                 if d != axis and not (as_int(ishape[d]) is not None and as_int(ishape[d]) == as_int(data.shape[d]))]
        return te.all(*conds) if conds else None

    def hit(idx):
        j = _wrap_negative(indices[source(idx)], data.shape[axis])
        return tir.EQ("bool", j, _cast_index(idx[axis], j.dtype))

    def guarded(idx, value, miss):
        cond = in_range(idx)
        return value if cond is None else te.if_then_else(cond, value, miss)

    if reduction == "update":
        none = tir.IntImm("int64", -1)

        def last(idx):
            kk = _cast_index(k.var, "int64")
            return te.max(guarded(idx, tir.Select("int64", hit(idx), kk, none), none), axis=k)

        winner = compute(data.shape, last, name="T_scatter_hit")

        def out(idx):
            w = winner[tuple(idx)]
            q = list(idx)
            q[axis] = _cast_index(w, ishape[axis].dtype if isinstance(ishape[axis], tir.PrimExpr) else "int64")
            return te.if_then_else(tir.LE("bool", int_imm(0, w), w), updates[tuple(q)], data[tuple(idx)])

        return compute(data.shape, out, name="T_scatter_elements")
    reducer, identity, combine = _scatter_reducer("scatter_elements", reduction, data.dtype)

    def red(idx):
        value = tir.Select(data.dtype, hit(idx), updates[source(idx)], identity)
        return reducer(guarded(idx, value, identity), axis=k)

    combined = compute(data.shape, red, name="T_scatter_red")
    return compute(data.shape, lambda idx: combine(data[tuple(idx)], combined[tuple(idx)]), name="T_scatter_elements")


def _scatter_reducer(op: str, reduction: str, dtype: str):
    """(TE reducer, its identity, how the result combines with the data's element) of a
    scatter's ``reduction`` other than "update"."""
    if reduction not in _SCATTER_REDUCERS:
        raise ValueError(f"{op}: reduction must be update, add, mul, min or max, not {reduction!r}")
    kind = _SCATTER_REDUCERS[reduction]
    identity = {"sum": tir.const(0, dtype), "prod": tir.const(1, dtype),
                "min": te.max_value(dtype), "max": te.min_value(dtype)}[kind]
    combine = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "min": te.min, "max": te.max}[kind]
    return getattr(te, kind), identity, combine


def scatter_nd(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, reduction: str = "update") -> te.Tensor:
    """``data`` with ``updates[q, r...]`` written at ``(indices[q, 0..m-1], r...)`` (ONNX
    ScatterND, the indices' last dim ``m`` holding coordinates; negative ones count from the
    end); ``reduction`` "update" (the last update to an element wins, in the updates' order),
    "add", "mul", "min" or "max".

    As in `scatter_elements`, each output element reduces over all update positions ``q``
    (stage ``T_scatter_nd_hit``: the last flat ``q`` hitting it, or -1; ``T_scatter_nd_red``:
    the combined updates), then ``T_scatter_nd``."""
    qshape = list(indices.shape[:-1])
    m = as_int(indices.shape[-1])
    ks = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(qshape)]

    def hit(idx):
        conds = []
        for c in range(m):
            j = _wrap_negative(indices[tuple(ks) + (int_imm(c, None),)], data.shape[c])
            conds.append(tir.EQ("bool", j, _cast_index(idx[c], j.dtype)))
        return te.all(*conds)

    def update_at(q, idx):
        return updates[tuple(q) + tuple(idx[m:])]

    if not ks:  # one update (1-D indices): no reduction over update positions
        if reduction == "update":
            return compute(data.shape, lambda idx: te.if_then_else(hit(idx), update_at([], idx), data[tuple(idx)]),
                           name="T_scatter_nd")
        combine = _scatter_reducer("scatter_nd", reduction, data.dtype)[2]
        return compute(data.shape, lambda idx: te.if_then_else(hit(idx), combine(data[tuple(idx)], update_at([], idx)),
                                                                data[tuple(idx)]), name="T_scatter_nd")
    if reduction == "update":
        none = tir.IntImm("int64", -1)

        def last(idx):
            flat = _cast_index(ravel([k.var for k in ks], qshape), "int64")
            return te.max(tir.Select("int64", hit(idx), flat, none), axis=ks)

        winner = compute(data.shape, last, name="T_scatter_nd_hit")

        def out(idx):
            w = winner[tuple(idx)]
            q = [_cast_index(i, d.dtype) for i, d in zip(unravel(w, [_cast_index(d, "int64") for d in qshape]), qshape)]
            return te.if_then_else(tir.LE("bool", int_imm(0, w), w), update_at(q, idx), data[tuple(idx)])

        return compute(data.shape, out, name="T_scatter_nd")
    reducer, identity, combine = _scatter_reducer("scatter_nd", reduction, data.dtype)

    def red(idx):
        return reducer(tir.Select(data.dtype, hit(idx), update_at([k.var for k in ks], idx), identity), axis=ks)

    combined = compute(data.shape, red, name="T_scatter_nd_red")
    return compute(data.shape, lambda idx: combine(data[tuple(idx)], combined[tuple(idx)]), name="T_scatter_nd")


def one_hot(indices: te.Tensor, on_value, off_value, depth: int, axis: int = -1, dtype: str = "float32") -> te.Tensor:
    """``on_value`` where the new axis ``axis`` equals the index, ``off_value`` elsewhere:
    block ``T_one_hot``, loops ``ax0..`` (TVM's ``topi.one_hot``). The values are scalars in
    ``dtype``; an index outside ``[0, depth)`` gives a row of ``off_value``."""
    n = len(indices.shape) + 1
    axis = axis + n if axis < 0 else axis
    ishape = list(indices.shape)
    like = ishape[0] if ishape else None
    oshape = ishape[:axis] + [int_imm(depth, like)] + ishape[axis:]
    on = _scalar(on_value, dtype)
    off = _scalar(off_value, dtype)

    def f(idx):
        i = indices[tuple(idx[:axis] + idx[axis + 1:])]
        j = idx[axis]
        i, j = unify_dtypes(i, j) if i.dtype != j.dtype else (i, j)
        return tir.Select(dtype, tir.EQ("bool", i, j), on, off)

    return compute(oshape, f, name="T_one_hot")


def _scalar(value, dtype: str):
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        value = value.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return tir.const(value, dtype)
    return value if value.dtype == dtype else te.cast(value, dtype)


# ----------------------------------------------------------------------------- layout_transform


def _split_inverse(params: list, outputs: list, out_vars: list):
    """The input indices of an index map made of whole indices and splits (``i`` ->
    ``i // c`` and ``i % c``) in any order, in terms of the output indices ``out_vars``, and
    for each input the split factor (None for a whole index); None for any other map."""
    parts: dict = {id(v): {} for v in params}
    for e, o in zip(outputs, out_vars):
        if isinstance(e, tir.Var) and id(e) in parts:
            parts[id(e)]["whole"] = o
        elif isinstance(e, (tir.FloorDiv, tir.FloorMod)) and isinstance(e.a, tir.Var) and id(e.a) in parts \
                and as_int(e.b) is not None and as_int(e.b) > 0:
            kind = "div" if isinstance(e, tir.FloorDiv) else "mod"
            parts[id(e.a)][kind] = (o, as_int(e.b))
        else:
            return None
    inverse, factors = [], []
    for v in params:
        p = parts[id(v)]
        if set(p) == {"whole"}:
            inverse.append(p["whole"])
            factors.append(None)
        elif set(p) == {"div", "mod"} and p["div"][1] == p["mod"][1]:
            (hi, c), (lo, _) = p["div"], p["mod"]
            inverse.append(add(mul(hi, c), lo))
            factors.append(c)
        else:
            return None
    return inverse, factors


def layout_transform_padded_axes(index_map, shape: list) -> list:
    """The input axes a split pads (its factor does not divide the extent, or the extent is
    symbolic): where the output of `layout_transform` has elements the input lacks."""
    probe = [tir.Var("int64", f"axis{k}") for k in range(len(index_map.final_indices))]
    found = _split_inverse(index_map.initial_indices, index_map.final_indices, probe)
    if found is None:
        return []  # a fusion covers its input exactly
    return [k for k, c in enumerate(found[1])
            if c is not None and not (as_int(shape[k]) is not None and as_int(shape[k]) % c == 0)]


def layout_transform(x: te.Tensor, index_map, pad_value=None):
    """The data laid out as ``index_map`` (an `IndexMap`: input indices -> output indices)
    says, computed over the output: each element reads the input at the inverse of the map.
    Maps of whole indices, splits (``i // 4, i % 4``) and their permutations are inverted
    here, fusions by `inverse_indices`. Where a split's output covers more than its
    input (10 split by 4 gives 3 x 4), the extra elements are ``pad_value`` (0 when None):
    stage ``te_layout_transform_with_pad``, else ``te_layout_transform`` (TVM's names). Raises
    ValueError for a map it cannot invert."""
    shape = list(x.shape)
    oshape = map_shape(index_map, shape)
    params, outputs = index_map.initial_indices, index_map.final_indices

    def inverse(out_idx):
        found = _split_inverse(params, outputs, out_idx)
        if found is not None:
            return found
        fused = inverse_indices(index_map, out_idx, shape)
        if fused is None:
            raise ValueError("layout_transform: the index map is neither splits nor fusions of the indices")
        return fused, [None] * len(params)

    padded = layout_transform_padded_axes(index_map, shape)
    pad = _scalar(0 if pad_value is None else pad_value, x.dtype)

    def f(idx):
        src, _ = inverse(idx)
        value = x[tuple(src)]
        if not padded:
            return value
        inside = None
        for k in padded:
            cond = tir.LT("bool", src[k], dim_expr(shape[k], src[k]))
            inside = cond if inside is None else tir.And("bool", inside, cond)
        return te.if_then_else(inside, value, pad)

    name = "te_layout_transform_with_pad" if padded else "te_layout_transform"
    return compute(oshape, f, name=name, prefix="axis")
