"""Converters of shape ops: reshapes, transposes, concatenation and splitting, slicing and
indexing (symbolic bounds included), padding, triangles (a mixin of `base.BaseTranslator`)."""

from __future__ import annotations

import operator

import numpy as np

from .... import relax, tir
from ....ir.op import api as _op
from ..common import FrontendError
from .graph import _is_expr, _static, dim_add, dim_mul, from_end, simplify_dim, tir_min


def _nonnegative(idx) -> bool:
    """Whether an index tensor is a constant with no negative entry (a take needs no wrap)."""
    if not isinstance(idx, relax.Constant):
        return False
    data = idx.data.numpy() if hasattr(idx.data, "numpy") else np.asarray(idx.data)
    return not (data < 0).any()


class ShapeOps:
    """Reshape, layout, slicing and indexing converters."""

    # ------------------------------------------------------------------ shapes
    def reshape(self, x, shape):
        shape = list(shape)
        if shape == self.shape_of(x) and all(isinstance(d, int) for d in shape):
            return self.emit(_op.reshape(x, shape))
        return self.emit(_op.reshape(x, self._resolve_minus_one(x, shape)))

    def _resolve_minus_one(self, x, shape: list) -> list:
        """``-1`` replaced by the dimension that keeps the element count, as TVM prints it.
        The input's dims that the new shape names again cancel first, so ``view(-1, n)`` of a
        ``(3, n)`` tensor gives ``3``, not ``3 * n // n``."""
        if -1 not in [_static(d) for d in shape]:
            return shape
        factors = list(self.shape_of(x))
        rest = []
        for d in shape:
            if _static(d) == -1:
                continue
            same = next((i for i, f in enumerate(factors) if f is d or (_static(f) is not None and _static(f) == _static(d))), None)
            if same is None:
                rest.append(d)
            else:
                factors.pop(same)
        total, known = 1, 1
        for f in factors:
            total = dim_mul(total, f)
        for d in rest:
            known = dim_mul(known, d)
        if isinstance(known, int) and known == 1:
            missing = total
        elif isinstance(total, int) and isinstance(known, int):
            missing = total // known
        else:
            missing = simplify_dim(total // known)
        return [missing if _static(d) == -1 else d for d in shape]

    def _view(self, node):
        x = self.arg(node, 0, "input")
        shape = self.retrieve(node.args[1:]) if len(node.args) > 1 else [self.arg(node, 1, "size")]
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        return self.reshape(x, shape)

    def _flatten(self, node):
        x = self.arg(node, 0, "input")
        start = self.arg(node, 1, "start_dim", 0)
        end = self.arg(node, 2, "end_dim", -1)
        shape = self.shape_of(x)
        if not shape:
            return self.reshape(x, [1])
        start, end = self.normalize_axis(start, len(shape)), self.normalize_axis(end, len(shape))
        flat = 1
        for d in shape[start:end + 1]:
            flat = flat * d
        return self.reshape(x, shape[:start] + [flat] + shape[end + 1:])

    def _unflatten(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        sizes = list(self.arg(node, 2, "sizes"))
        shape = self.shape_of(x)
        dim = self.normalize_axis(dim, len(shape))
        if -1 in sizes:
            known = 1
            for s in sizes:
                if s != -1:
                    known = known * s
            sizes = [shape[dim] // known if s == -1 else s for s in sizes]
        return self.reshape(x, shape[:dim] + sizes + shape[dim + 1:])

    def _transpose(self, node):
        x = self.arg(node, 0, "input")
        n = self.ndim(x)
        d0 = self.normalize_axis(self.arg(node, 1, "dim0"), n)
        d1 = self.normalize_axis(self.arg(node, 2, "dim1"), n)
        axes = list(range(n))
        axes[d0], axes[d1] = axes[d1], axes[d0]
        return self.emit(_op.permute_dims(x, axes=axes))

    def _t(self, node):
        x = self.arg(node, 0, "input")
        if self.ndim(x) < 2:
            return x
        return self.emit(_op.permute_dims(x, axes=[1, 0]))

    def _permute(self, node):
        x = self.arg(node, 0, "input")
        dims = self.retrieve(node.args[1:]) if len(node.args) > 1 else self.arg(node, 1, "dims")
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = dims[0]
        return self.emit(_op.permute_dims(x, axes=[self.normalize_axis(d, self.ndim(x)) for d in dims]))

    def _unsqueeze(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        dim = dim + self.ndim(x) + 1 if dim < 0 else dim
        return self.emit(_op.expand_dims(x, axis=[dim]))

    def _squeeze(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        if dim is None:
            return self.emit(_op.squeeze(x, axis=None))
        dims = self.int_list(dim)
        shape = self.shape_of(x)
        # torch ignores dims whose size is not 1; R.squeeze would reject them.
        dims = [d for d in dims if _static(shape[self.normalize_axis(d, len(shape))]) == 1]
        if not dims:
            return x
        return self.emit(_op.squeeze(x, axis=dims))

    def _expand(self, node):
        x = self.arg(node, 0, "input")
        sizes = self.retrieve(node.args[1:]) if len(node.args) > 1 else self.arg(node, 1, "size")
        if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
            sizes = sizes[0]
        sizes = list(sizes)
        shape = self.shape_of(x)
        offset = len(sizes) - len(shape)
        target = [shape[i - offset] if _static(s) == -1 else s for i, s in enumerate(sizes)]
        return self.emit(_op.broadcast_to(x, target))

    def _expand_as(self, node):
        x = self.arg(node, 0, "input")
        other = self.arg(node, 1, "other")
        return self.emit(_op.broadcast_to(x, self.shape_of(other)))

    def _repeat(self, node):
        x = self.arg(node, 0, "input")
        reps = self.retrieve(node.args[1:]) if len(node.args) > 1 else self.arg(node, 1, "repeats")
        if len(reps) == 1 and isinstance(reps[0], (list, tuple)):
            reps = reps[0]
        return self.emit(_op.tile(x, repeats=list(reps)))

    def _cat(self, node):
        tensors = self.arg(node, 0, "tensors")
        dim = self.arg(node, 1, "dim", 0)
        return self.emit(_op.concat(list(tensors), axis=dim))

    def _stack(self, node):
        return self.stack(list(self.arg(node, 0, "tensors")), self.arg(node, 1, "dim", 0))

    def stack(self, tensors: list, dim: int):
        """Tensors of one shape stacked along a new axis ``dim``."""
        dim = self.normalize_axis(dim, self.ndim(tensors[0]) + 1)
        expanded = [self.emit(_op.expand_dims(t, axis=[dim])) for t in tensors]
        return expanded[0] if len(expanded) == 1 else self.emit(_op.concat(expanded, axis=dim))

    def _split(self, node):
        x = self.arg(node, 0, "input")
        size = self.arg(node, 1, "split_size_or_sections", self.arg(node, 1, "split_size"))
        dim = self.arg(node, 2, "dim", 0)
        extent = self.shape_of(x)[self.normalize_axis(dim, self.ndim(x))]
        if isinstance(size, (list, tuple)):
            indices = list(np.cumsum(size)[:-1].tolist())
        else:
            if not isinstance(extent, int):
                raise self.unsupported(node, "splitting a symbolic dimension")
            indices = list(range(size, extent, size))
        return self.emit(_op.split(x, indices_or_sections=indices, axis=dim))

    def _chunk(self, node):
        x = self.arg(node, 0, "input")
        chunks = self.arg(node, 1, "chunks")
        dim = self.arg(node, 2, "dim", 0)
        extent = self.shape_of(x)[self.normalize_axis(dim, self.ndim(x))]
        if not isinstance(extent, int):
            raise self.unsupported(node, "chunking a symbolic dimension")
        size = -(-extent // chunks)
        indices = list(range(size, extent, size))
        return self.emit(_op.split(x, indices_or_sections=indices, axis=dim))

    def _unbind(self, node):
        x = self.arg(node, 0, "input")
        dim = self.normalize_axis(self.arg(node, 1, "dim", 0), self.ndim(x))
        extent = self.shape_of(x)[dim]
        if not isinstance(extent, int):
            raise self.unsupported(node, "unbinding a symbolic dimension")
        parts = self.emit(_op.split(x, indices_or_sections=extent, axis=dim))
        return tuple(self.emit(_op.squeeze(self.emit(relax.TupleGetItem(parts, i)), axis=[dim]))
                     for i in range(extent))

    def _select(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        index = self.arg(node, 2, "index")
        if isinstance(index, int) and index < 0:
            extent = self.shape_of(x)[self.normalize_axis(dim, self.ndim(x))]
            index = index + extent
        return self.emit(_op.take(x, self.index_const(index), axis=dim))

    def index_const(self, index):
        if isinstance(index, tir.PrimExpr):
            raise FrontendError("selecting with a symbolic index is not supported")
        return self.const(index, "int64")

    def _slice(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim", 0)
        start = self.arg(node, 2, "start")
        end = self.arg(node, 3, "end")
        step = self.arg(node, 4, "step", 1)
        return self.slice_axis(node, x, dim, start, end, step)

    def slice_axis(self, node, x, dim: int, start, end, step):
        """``x[start:end:step]`` along ``dim``; an identity slice emits nothing."""
        shape = self.shape_of(x)
        dim = self.normalize_axis(dim, len(shape))
        extent = shape[dim]
        start = 0 if start is None else start
        big = end is None or (isinstance(end, int) and isinstance(extent, int) and end >= extent) \
            or (isinstance(end, int) and end >= 2 ** 62)
        step = 1 if step is None else step
        if start == 0 and step == 1 and (big or end is extent):
            return x
        if isinstance(start, tir.PrimExpr):
            start = from_end(start, extent)
        if isinstance(end, tir.PrimExpr):
            end = from_end(end, extent)
            big = isinstance(end, int) and end == 0
            if start == 0 and step == 1 and big:
                return x
        if isinstance(start, tir.PrimExpr) or isinstance(end, tir.PrimExpr):
            return self.symbolic_slice(node, x, dim, start, end, step)
        end = 2 ** 63 - 1 if end is None or big else end
        return self.emit(_op.strided_slice(x, axes=[dim], begin=[start], end=[end], strides=[step]))

    def symbolic_slice(self, node, x, dim: int, start, end, step):
        """A slice whose bounds are symbolic sizes. R.strided_slice takes constant bounds
        only, so the rows are gathered: ``R.take(x, R.arange(start, end, step), axis)``. The
        graph's own shape for the result (torch's, which knows the ranges of its symbols)
        decides the extent, so a slice ``[:t]`` of a buffer longer than ``t`` has length ``t``."""
        if not (isinstance(step, int) and step > 0):
            raise self.unsupported(node, f"a symbolic slice with step {step}")
        extent = self.shape_of(x)[dim]
        length = self.node_dim(node, dim)
        if length is None:
            length = tir_min(end, extent) - start if isinstance(step, int) and step == 1 else None
        if length is None:
            raise self.unsupported(node, "a symbolic slice whose length is unknown")
        if isinstance(start, int) and start < 0:
            start = start + extent
        stop = dim_add(start, dim_mul(length, step))
        idx = self.emit(_op.arange(start, stop, step, dtype="int64"))
        return self.emit(_op.take(x, idx, axis=dim))

    def node_dim(self, node, dim: int):
        """Dimension ``dim`` of the node's result as the graph records it (torch.export's
        ``meta["val"]``), as an int or tir expression; None when the graph does not say."""
        return None

    def _getitem(self, node):
        value = self.retrieve(node.args[0])
        index = self.retrieve(node.args[1])
        if isinstance(value, (list, tuple)):
            return value[index]
        if _is_expr(value) and isinstance(relax.struct_info_of(value), relax.TupleStructInfo):
            return self.emit(relax.TupleGetItem(value, index))
        if _is_expr(value):
            return self.index_tensor(node, value, index)
        return operator.getitem(value, index)

    def advanced_getitem(self, node, x, index: tuple):
        """``x[:, idx]`` in an fx graph: index tensors (or lists of ints) where the other
        entries take their axis whole, as `advanced_index`; mixed with ints, partial slices or
        None it is not supported."""
        indices = []
        for i in index:
            if isinstance(i, slice) and i == slice(None):
                indices.append(None)
            elif _is_expr(i):
                indices.append(i)
            elif isinstance(i, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in i):
                indices.append(self.const(np.asarray(i, "int64"), "int64"))
            else:
                raise self.unsupported(node, "index tensors mixed with ints, partial slices or None")
        return self.advanced_index(node, x, indices)

    def index_tensor(self, node, x, index):
        """``x[...]`` with ints, slices, None and Ellipsis (what fx graphs of ``x[:, 0]``
        hold): one slice per sliced axis, a take per integer, expand_dims per None; with index
        tensors, `advanced_getitem`."""
        if not isinstance(index, tuple):
            index = (index,)
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim(x) - n_real) + index[at + 1:]
        if any(_is_expr(i) or isinstance(i, (list, tuple)) for i in index):
            return self.advanced_getitem(node, x, index)
        axis = 0
        for i in index:
            if i is None:
                x = self.emit(_op.expand_dims(x, axis=[axis]))
                axis += 1
            elif isinstance(i, slice):
                x = self.slice_axis(node, x, axis, i.start, i.stop, i.step)
                axis += 1
            elif isinstance(i, int):
                if i < 0:
                    i = i + self.shape_of(x)[axis]
                x = self.emit(_op.take(x, self.index_const(i), axis=axis))
            else:
                raise self.unsupported(node, f"indexing with {type(i).__name__}")
        return x

    def _index(self, node):
        """``aten.index.Tensor(x, indices)``: ``x[i0, None, i2]`` with index tensors (None
        where an axis is taken whole)."""
        return self.advanced_index(node, self.arg(node, 0, "input"), list(self.arg(node, 1, "indices")))

    def advanced_index(self, node, x, indices: list):
        """PyTorch's (NumPy's) advanced indexing: the index tensors, one per leading axis of
        ``x`` (None: that axis whole), broadcast together to a shape B, and each element of the
        result picks ``x`` at their coordinates (negative ones count from the end). B replaces
        the indexed axes where they are adjacent, else it comes first.

        One index tensor is an ``R.take`` along its axis. Several are stacked into one tensor
        of coordinates for ``R.gather_nd``, with the indexed axes moved to the front first and
        B moved back to their place after."""
        ndim = self.ndim(x)
        if len(indices) > ndim:
            raise self.unsupported(node, f"{len(indices)} indices for a {ndim}-d tensor")
        given = [(axis, idx) for axis, idx in enumerate(indices) if idx is not None]
        if not given:
            return x
        for axis, idx in given:
            if not _is_expr(idx):
                raise self.unsupported(node, f"index {axis} is {type(idx).__name__}, not a tensor")
            if self.dtype_of(idx) == "bool":
                raise self.unsupported(node, "a boolean mask as an index (the result's size would depend "
                                             "on the mask's values)")
        if len(given) == 1:
            axis, idx = given[0]
            return self.emit(_op.take(x, idx, axis=axis, mode="fast" if _nonnegative(idx) else "wrap"))
        axes = [axis for axis, _ in given]
        shape = self.broadcast_index_shape(node, [idx for _, idx in given])
        coords = []
        for _, idx in given:
            idx = self.emit(_op.astype(idx, "int64")) if self.dtype_of(idx) != "int64" else idx
            if list(self.sinfo(idx).shape) != shape:
                idx = self.emit(_op.broadcast_to(idx, shape))
            coords.append(self.emit(_op.expand_dims(idx, axis=[-1])))
        coords = self.emit(_op.concat(coords, axis=-1))
        rest = [a for a in range(ndim) if a not in axes]
        if axes + rest != list(range(ndim)):
            x = self.emit(_op.permute_dims(x, axes=axes + rest))
        out = self.emit(_op.gather_nd(x, coords))
        adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
        if not adjacent or axes[0] == 0:
            return out
        # out is (B..., x's other axes...): B goes back where the indexed axes were.
        b = len(shape)
        before = list(range(b, b + axes[0]))
        after = list(range(b + axes[0], b + len(rest)))
        return self.emit(_op.permute_dims(out, axes=before + list(range(b)) + after))

    def broadcast_index_shape(self, node, indices: list) -> list:
        """The shape the index tensors broadcast to (as dims of their struct info)."""
        from ....ir.op.common import broadcast_shapes
        from ....ir.op import OpError

        shape = list(self.sinfo(indices[0]).shape)
        for idx in indices[1:]:
            try:
                shape = broadcast_shapes(shape, list(self.sinfo(idx).shape), "index tensors")
            except OpError as err:
                raise self.unsupported(node, str(err)) from None
            if shape is None:
                raise self.unsupported(node, "index tensors whose symbolic shapes may not broadcast")
        return shape

    def _slice_scatter(self, node):
        """``aten.slice_scatter(x, src, dim, start, end, step)``: ``x`` with ``x[start:end:step]``
        along ``dim`` replaced by ``src`` (what torch.export's functionalization writes for an
        assignment into a slice, ``mask[:4, 2:] = 1``)."""
        return self.slice_scatter(node, self.arg(node, 0, "input"), self.arg(node, 1, "src"),
                                  self.arg(node, 2, "dim", 0), self.arg(node, 3, "start"), self.arg(node, 4, "end"),
                                  self.arg(node, 5, "step", 1))

    def _select_scatter(self, node):
        """``aten.select_scatter(x, src, dim, index)`` (``x[:, 2] = src`` functionalized): the
        slice ``index:index + 1`` replaced by ``src`` with the axis put back."""
        x, src = self.arg(node, 0, "input"), self.arg(node, 1, "src")
        dim = self.normalize_axis(self.arg(node, 2, "dim"), self.ndim(x))
        index = self.arg(node, 3, "index")
        extent = self.shape_of(x)[dim]
        if isinstance(index, int) and index < 0 and isinstance(extent, int):
            index += extent
        src = self.emit(_op.expand_dims(src, axis=[dim]))
        return self.slice_scatter(node, x, src, dim, index, index + 1, 1)

    def slice_scatter(self, node, x, src, dim: int, start, end, step):
        """``x`` with ``x[start:end:step]`` along ``dim`` replaced by ``src``: for a step of 1,
        the parts before and after concatenated with ``src``; for others, ``src``'s rows
        scattered to their positions."""
        shape = self.shape_of(x)
        dim = self.normalize_axis(dim, len(shape))
        extent = shape[dim]
        if not all(isinstance(v, int) for v in (extent, step)) or not all(
                v is None or isinstance(v, int) for v in (start, end)):
            raise self.unsupported(node, "a slice_scatter with symbolic bounds")
        start, end, step = slice(start, end, step).indices(extent)
        if step == 1:
            parts = [self.slice_axis(node, x, dim, 0, start, 1)] if start > 0 else []
            parts.append(src)
            if end < extent:
                parts.append(self.slice_axis(node, x, dim, end, None, 1))
            return parts[0] if len(parts) == 1 else self.emit(_op.concat(parts, axis=dim))
        rows = np.arange(start, end, step, dtype="int64")
        index_shape = [1] * len(shape)
        index_shape[dim] = len(rows)
        index = self.emit(_op.broadcast_to(self.const(rows.reshape(index_shape), "int64"), self.shape_of(src)))
        return self.emit(_op.scatter_elements(x, index, src, axis=dim))

    def _roll(self, node):
        """``torch.roll(x, shifts, dims)``: per rolled axis, its last ``shift`` rows moved to
        the front (two slices concatenated); without dims, the flattened tensor rolled."""
        x = self.arg(node, 0, "input")
        shifts = self.int_list(self.arg(node, 1, "shifts"))
        dims = self.arg(node, 2, "dims", [])
        dims = self.int_list(dims) if dims not in (None, [], ()) else []
        if not dims:
            shape = self.shape_of(x)
            flat = self.roll_axis(node, self.reshape(x, [-1]), shifts[0], 0)
            return self.reshape(flat, shape)
        if len(shifts) != len(dims):
            raise self.unsupported(node, f"{len(shifts)} shifts for {len(dims)} dims")
        for shift, dim in zip(shifts, dims):
            x = self.roll_axis(node, x, shift, self.normalize_axis(dim, self.ndim(x)))
        return x

    def roll_axis(self, node, x, shift: int, axis: int):
        extent = self.shape_of(x)[axis]
        if not isinstance(extent, int):
            raise self.unsupported(node, "rolling a symbolic dimension")
        shift = shift % extent if extent else 0
        if shift == 0:
            return x
        tail = self.slice_axis(node, x, axis, extent - shift, None, 1)
        head = self.slice_axis(node, x, axis, 0, extent - shift, 1)
        return self.emit(_op.concat([tail, head], axis=axis))

    def _index_select(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        index = self.arg(node, 2, "index")
        return self.emit(_op.take(x, index, axis=dim))

    def _tril(self, node):
        return self._triangle(node, "tril")

    def _triu(self, node):
        return self._triangle(node, "triu")

    def _triangle(self, node, name: str):
        x = self.arg(node, 0, "input")
        k = self.arg(node, 1, "diagonal", 0)
        return self.emit(self.require_op(node, name)(x, k))

    def _pad(self, node):
        x = self.arg(node, 0, "input")
        pad = list(self.arg(node, 1, "pad"))
        mode = self.arg(node, 2, "mode", "constant")
        value = self.arg(node, 3, "value", 0.0)
        if mode != "constant":
            raise self.unsupported(node, f"mode={mode!r}")
        return self.constant_pad(node, x, pad, 0.0 if value is None else value)

    def _constant_pad_nd(self, node):
        return self.constant_pad(node, self.arg(node, 0, "input"), list(self.arg(node, 1, "pad")),
                                 self.arg(node, 2, "value", 0.0))

    def constant_pad(self, node, x, pad: list, value):
        """torch lists (before, after) pairs from the last axis backwards; R.nn.pad takes
        them from the first axis forwards."""
        n = self.ndim(x)
        widths = [0] * (2 * n)
        for i in range(len(pad) // 2):
            axis = n - 1 - i
            widths[2 * axis], widths[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
        fn = self.require_op(node, "nn.pad")
        return self.emit(fn(x, pad_width=widths, pad_value=float(value)))

