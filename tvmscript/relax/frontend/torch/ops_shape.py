"""Converters of shape ops: reshapes, transposes, concatenation and splitting, slicing and
indexing (symbolic bounds included), padding, triangles (a mixin of `base.BaseTranslator`)."""

from __future__ import annotations

import operator

import numpy as np

from .... import relax, tir
from ....compiler.op import api as _op
from ..common import FrontendError
from .graph import _is_expr, _static, dim_add, dim_mul, from_end, simplify_dim, tir_min


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
        tensors = self.arg(node, 0, "tensors")
        dim = self.arg(node, 1, "dim", 0)
        ndim = self.ndim(tensors[0]) + 1
        dim = self.normalize_axis(dim, ndim)
        expanded = [self.emit(_op.expand_dims(t, axis=[dim])) for t in tensors]
        return self.emit(_op.concat(expanded, axis=dim))

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

    def index_tensor(self, node, x, index):
        """``x[...]`` with ints, slices, None and Ellipsis (what fx graphs of ``x[:, 0]``
        hold): one slice per sliced axis, a take per integer, expand_dims per None."""
        if not isinstance(index, tuple):
            index = (index,)
        if any(_is_expr(i) or isinstance(i, (list, tuple)) for i in index):
            raise self.unsupported(node, "indexing a tensor with tensors or lists")
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim(x) - n_real) + index[at + 1:]
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

