"""Converters of element-wise ops, binary ops with PyTorch's type promotion, reductions,
dtype casts and tensor creation (a mixin of `base.BaseTranslator`)."""

from __future__ import annotations

import math
import operator
from typing import Callable

from ....ir.op import api as _op
from ..common import FrontendError
from .graph import _is_expr, _is_float, _is_torch_dtype, convert_dtype


class MathOps:
    """Element-wise, binary, reduction, cast and creation converters."""

    # ------------------------------------------------------------------ elementwise
    def unary(self, fn_name: str) -> Callable:
        """A converter for an elementwise op of one tensor (``relu``, ``exp``, ...)."""
        def convert(node):
            x = self.arg(node, 0, "input")
            return self.emit(self.require_op(node, fn_name)(x))

        return convert

    def _identity(self, node):
        return self.arg(node, 0, "input")

    def _gelu(self, node):
        x = self.arg(node, 0, "input")
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        if approximate == "none":
            return self.emit(_op.nn.gelu(x))
        if approximate == "tanh":
            return self.emit(self.require_op(node, "nn.gelu_tanh")(x))
        raise self.unsupported(node, f"approximate={approximate!r}")

    def _hardtanh(self, node):
        x = self.arg(node, 0, "input")
        lo = self.arg(node, 1, "min_val", -1.0)
        hi = self.arg(node, 2, "max_val", 1.0)
        return self.emit(self.require_op(node, "clip")(x, lo, hi))

    def _relu6(self, node):
        x = self.arg(node, 0, "input")
        return self.emit(self.require_op(node, "clip")(x, 0, 6))

    def _clamp(self, node):
        x = self.arg(node, 0, "input")
        lo = self.arg(node, 1, "min")
        hi = self.arg(node, 2, "max")
        if _is_expr(lo) or _is_expr(hi):
            raise self.unsupported(node, "tensor bounds")
        lo = -math.inf if lo is None else lo
        hi = math.inf if hi is None else hi
        return self.emit(self.require_op(node, "clip")(x, lo, hi))

    def _clamp_min(self, node):
        return self._clip_one_side(node, lower=True)

    def _clamp_max(self, node):
        return self._clip_one_side(node, lower=False)

    def _clip_one_side(self, node, lower: bool):
        x = self.arg(node, 0, "input")
        bound = self.arg(node, 1, "min" if lower else "max")
        if _is_expr(bound):
            raise self.unsupported(node, "a tensor bound")
        lo, hi = (bound, math.inf) if lower else (-math.inf, bound)
        return self.emit(self.require_op(node, "clip")(x, lo, hi))

    def _hardsigmoid(self, node):
        # relu6(x + 3) / 6, as TVM writes it.
        x = self.arg(node, 0, "input")
        dtype = self.dtype_of(x)
        clip = self.require_op(node, "clip")
        shifted = self.emit(_op.add(x, self.const(3, dtype)))
        clipped = self.emit(clip(shifted, 0, 6))
        return self.emit(_op.divide(clipped, self.const(6, dtype)))

    def _hardswish(self, node):
        x = self.arg(node, 0, "input")
        dtype = self.dtype_of(x)
        clip = self.require_op(node, "clip")
        shifted = self.emit(_op.add(x, self.const(3, dtype)))
        clipped = self.emit(clip(shifted, 0, 6))
        scaled = self.emit(_op.divide(clipped, self.const(6, dtype)))
        return self.emit(_op.multiply(x, scaled))

    def _leaky_relu(self, node):
        x = self.arg(node, 0, "input")
        slope = self.arg(node, 1, "negative_slope", 0.01)
        return self.emit(self.require_op(node, "nn.leakyrelu")(x, alpha=slope))

    def _softmax(self, node):
        return self._softmax_like(node, _op.nn.softmax)

    def _log_softmax(self, node):
        return self._softmax_like(node, _op.nn.log_softmax)

    def _softmax_like(self, node, fn):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim", -1)
        # aten.softmax.int's third argument is a dtype, aten._softmax's a flag, F.softmax's
        # a stack level: only a dtype means a cast.
        dtype = node.kwargs.get("dtype", node.args[2] if len(node.args) > 2 else None)
        if _is_torch_dtype(dtype):
            x = self.astype(x, convert_dtype(dtype))
        return self.emit(fn(x, axis=-1 if dim is None else dim))

    # ------------------------------------------------------------------ binary
    def binary(self, relax_fn: Callable, py_fn: Callable) -> Callable:
        """A converter for a binary op: tensors through ``relax_fn``, Python and symbolic
        scalars (sizes of a symbolic shape) through ``py_fn``."""
        def convert(node):
            lhs = self.arg(node, 0, "input")
            rhs = self.arg(node, 1, "other")
            return self.binary_values(relax_fn, py_fn, lhs, rhs)

        return convert

    def binary_values(self, relax_fn, py_fn, lhs, rhs):
        if not _is_expr(lhs) and not _is_expr(rhs):
            return py_fn(lhs, rhs)
        lhs, rhs = self.promote(lhs, rhs)
        return self.emit(relax_fn(lhs, rhs))

    def promote(self, lhs, rhs):
        """Both operands as tensors of the dtype PyTorch's type promotion gives them
        (`result_dtype`), cast where they differ from it: a Python float with a float16
        tensor stays float16, with an int tensor gives float32; float16 with float32 gives
        float32, and float16 with bfloat16 float32 too."""
        dtype = self.result_dtype(lhs, rhs)
        return self.operand_as(lhs, dtype), self.operand_as(rhs, dtype)

    def result_dtype(self, lhs, rhs) -> str:
        """The dtype ``torch.result_type`` gives two operands (tensors, Python or symbolic
        scalars), asked of torch itself with stand-ins of the same kinds: its rules weigh
        dimensioned tensors over 0-d ones over scalars, by category (bool < integer < float),
        which a table written here would have to copy. Two scalars (``where(c, 1.0, 0.0)``)
        give what a tensor of the first would."""
        import torch

        a, b = self.torch_stand_in(lhs), self.torch_stand_in(rhs)
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            a = torch.tensor(a)
        return convert_dtype(torch.result_type(a, b))

    def torch_stand_in(self, value):
        """An empty torch tensor of a Relax tensor's dtype and kind (0-d or dimensioned), or
        the Python scalar (a symbolic size is an int)."""
        import torch

        if not _is_expr(value):
            return value if isinstance(value, (bool, int, float)) else 0
        dtype = getattr(torch, self.dtype_of(value), None)
        if not isinstance(dtype, torch.dtype):
            raise FrontendError(f"an operand of dtype {self.dtype_of(value)!r} has no PyTorch dtype to promote by")
        return torch.empty(() if self.ndim(value) == 0 else (1,), dtype=dtype)

    def operand_as(self, value, dtype: str):
        """A binary op's operand as a tensor of ``dtype``: a tensor cast, a number a constant."""
        if _is_expr(value):
            return self.astype(value, dtype)
        return self.as_tensor(value, dtype)

    def _add(self, node):
        return self._add_sub(node, _op.add, operator.add)

    def _sub(self, node):
        return self._add_sub(node, _op.subtract, operator.sub)

    def _add_sub(self, node, relax_fn, py_fn):
        lhs = self.arg(node, 0, "input")
        rhs = self.arg(node, 1, "other")
        alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        if alpha != 1:
            rhs = self.binary_values(_op.multiply, operator.mul, rhs, alpha)
        return self.binary_values(relax_fn, py_fn, lhs, rhs)

    def _rsub(self, node):
        lhs = self.arg(node, 0, "input")
        rhs = self.arg(node, 1, "other")
        alpha = self.arg(node, 2, "alpha", 1)
        if alpha != 1:
            lhs = self.binary_values(_op.multiply, operator.mul, lhs, alpha)
        return self.binary_values(_op.subtract, operator.sub, rhs, lhs)

    def _div(self, node):
        lhs = self.arg(node, 0, "input")
        rhs = self.arg(node, 1, "other")
        mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
        if mode is None:
            if not _is_expr(lhs) and not _is_expr(rhs):
                return lhs / rhs
            lhs, rhs = self.promote(lhs, rhs)
            if not _is_float(self.dtype_of(lhs)):  # true division of integers gives floats
                dtype = self.default_float()
                lhs = self.emit(_op.astype(lhs, dtype))
                rhs = self.emit(_op.astype(rhs, dtype))
            return self.emit(_op.divide(lhs, rhs))
        if mode == "floor":
            return self.binary_values(_op.floor_divide, operator.floordiv, lhs, rhs)
        raise self.unsupported(node, f"rounding_mode={mode!r}")

    def _pow(self, node):
        lhs = self.arg(node, 0, "input")
        rhs = self.arg(node, 1, "exponent")
        return self.binary_values(_op.power, operator.pow, lhs, rhs)

    def _where(self, node):
        cond = self.arg(node, 0, "condition")
        x = self.arg(node, 1, "input")
        y = self.arg(node, 2, "other")
        x, y = self.promote(x, y)
        return self.emit(_op.where(cond, x, y))

    def _masked_fill(self, node):
        x = self.arg(node, 0, "input")
        mask = self.arg(node, 1, "mask")
        value = self.arg(node, 2, "value")
        value = self.as_tensor(value, self.dtype_of(x))
        return self.emit(_op.where(mask, value, x))

    # ------------------------------------------------------------------ reductions
    def reduce(self, fn) -> Callable:
        def convert(node):
            x = self.arg(node, 0, "input")
            dim = self.arg(node, 1, "dim")
            keepdim = self.arg(node, 2, "keepdim", False)
            dtype = node.kwargs.get("dtype")
            if isinstance(dim, bool):  # torch.any/all(x, keepdim) style mix-ups never reach here
                raise self.unsupported(node, "a boolean dim")
            if dtype is not None:
                x = self.emit(_op.astype(x, convert_dtype(dtype)))
            axis = None if dim is None else self.int_list(dim)
            if axis == []:
                axis = None
            return self.emit(fn(x, axis=axis, keepdims=bool(keepdim)))

        return convert

    def _var(self, node):
        return self._variance(node, std=False)

    def _std(self, node):
        return self._variance(node, std=True)

    def _variance(self, node, std: bool):
        """``var``/``std`` with Bessel's correction: ``(x, dim, unbiased=True, keepdim=False)``
        positionally (``aten.var.dim``, ``torch.var``) or ``correction=``/``keepdim=`` by
        keyword (``aten.var.correction``). R.variance is the population variance, scaled by
        ``n / (n - correction)``."""
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        unbiased = self.arg(node, 2, "unbiased", True)
        if isinstance(dim, bool):  # torch.var(x, unbiased)
            unbiased, dim = dim, None
        keepdim = self.arg(node, 3, "keepdim", False)
        correction = node.kwargs.get("correction")
        if correction is None:
            correction = 1 if unbiased else 0
        axis = None if dim is None else self.int_list(dim)
        v = self.emit(_op.variance(x, axis=axis, keepdims=bool(keepdim)))
        if correction:
            shape = self.shape_of(x)
            axes = range(len(shape)) if axis is None else [self.normalize_axis(a, len(shape)) for a in axis]
            count = 1
            for a in axes:
                count = count * shape[a]
            if not isinstance(count, int):
                raise self.unsupported(node, "an unbiased variance over symbolic dims")
            dtype = self.dtype_of(v)
            v = self.emit(_op.multiply(v, self.const(count / max(count - correction, 1), dtype)))
        return self.emit(_op.sqrt(v)) if std else v

    def _argmax(self, node):
        return self._arg_reduce(node, _op.argmax)

    def _argmin(self, node):
        return self._arg_reduce(node, _op.argmin)

    def _arg_reduce(self, node, fn):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        keepdim = self.arg(node, 2, "keepdim", False)
        return self.emit(fn(x, axis=dim, keepdims=bool(keepdim)))

    def _cumsum(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        dtype = node.kwargs.get("dtype")
        fn = self.require_op(node, "cumsum")
        kwargs = {"dtype": convert_dtype(dtype)} if dtype is not None else {}
        return self.emit(fn(x, axis=dim, **kwargs))

    # ------------------------------------------------------------------ dtypes, creation
    def _to(self, node):
        x = self.arg(node, 0, "input")
        dtype = node.kwargs.get("dtype")
        for a in node.args[1:]:
            a = self.retrieve(a)
            if _is_torch_dtype(a):
                dtype = a
            elif _is_expr(a):  # x.to(other): other's dtype
                dtype = self.dtype_of(a)
        if dtype is None:
            return x
        return self.astype(x, convert_dtype(dtype))

    def astype(self, x, dtype: str):
        if self.dtype_of(x) == dtype:
            return x
        return self.emit(_op.astype(x, dtype))

    def _type_as(self, node):
        x = self.arg(node, 0, "input")
        other = self.arg(node, 1, "other")
        return self.astype(x, self.dtype_of(other))

    def cast_method(self, dtype: str) -> Callable:
        def convert(node):
            return self.astype(self.arg(node, 0, "input"), dtype)

        return convert

    def _arange(self, node):
        args = [self.retrieve(a) for a in node.args]
        if len(args) == 1:
            start, end, step = 0, args[0], 1
        else:
            start, end = args[0], args[1]
            step = args[2] if len(args) > 2 else node.kwargs.get("step", 1)
        dtype = node.kwargs.get("dtype")
        if dtype is None:
            floats = any(isinstance(v, float) for v in (start, end, step))
            dtype = self.node_dtype(node, self.default_float() if floats else "int64")
        else:
            dtype = convert_dtype(dtype)
        return self.emit(_op.arange(start, end, step, dtype=dtype))

    def _full(self, node):
        size = self.arg(node, 0, "size")
        value = self.arg(node, 1, "fill_value")
        dtype = node.kwargs.get("dtype")
        if dtype is None:
            dtype = self.node_dtype(node, _scalar_dtype(value, self.default_float()))
        else:
            dtype = convert_dtype(dtype)
        return self.emit(_op.full(list(size), self.const(value, dtype), dtype=dtype))

    def creation(self, value) -> Callable:
        """``torch.zeros/ones(size, dtype=...)`` (sizes varargs in fx, a list in ATen)."""
        def convert(node):
            sizes = [self.retrieve(a) for a in node.args]
            if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
                sizes = list(sizes[0])
            if not sizes and "size" in node.kwargs:
                sizes = list(self.retrieve(node.kwargs["size"]))
            dtype = node.kwargs.get("dtype")
            dtype = convert_dtype(dtype) if dtype is not None else self.node_dtype(node, self.default_float())
            return self.emit(_op.full(sizes, self.const(value, dtype), dtype=dtype))

        return convert

    def creation_like(self, value) -> Callable:
        def convert(node):
            x = self.arg(node, 0, "input")
            dtype = node.kwargs.get("dtype")
            dtype = convert_dtype(dtype) if dtype is not None else self.dtype_of(x)
            fill = value if value is not None else self.arg(node, 1, "fill_value")
            return self.emit(_op.full_like(x, self.const(fill, dtype), dtype=dtype))

        return convert

    def new_creation(self, value) -> Callable:
        """``x.new_zeros(size)``/``new_ones``/``new_full(size, value)``: a new tensor of ``x``'s
        dtype unless ``dtype=`` says otherwise."""
        def convert(node):
            x = self.arg(node, 0, "input")
            sizes = self.arg(node, 1, "size")
            sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
            dtype = node.kwargs.get("dtype")
            dtype = convert_dtype(dtype) if dtype is not None else self.dtype_of(x)
            fill = value if value is not None else self.arg(node, 2, "fill_value")
            return self.emit(_op.full(sizes, self.const(fill, dtype), dtype=dtype))

        return convert

    def _fill(self, node):
        """``aten.fill(x, value)`` (``fill_`` in place): ``x``'s shape and dtype, every element
        ``value`` (a number, or a 0-d tensor)."""
        x = self.arg(node, 0, "input")
        value = self.arg(node, 1, "value")
        dtype = self.dtype_of(x)
        if _is_expr(value):
            return self.emit(_op.broadcast_to(self.astype(value, dtype), self.shape_of(x)))
        return self.emit(_op.full_like(x, self.const(value, dtype), dtype=dtype))

    def _copy(self, node):
        """``aten.copy(x, src)`` (``x.copy_(src)`` functionalized): ``src`` in ``x``'s dtype,
        broadcast to ``x``'s shape."""
        x, src = self.arg(node, 0, "input"), self.arg(node, 1, "src")
        src = self.astype(self.as_tensor(src, self.dtype_of(x)), self.dtype_of(x))
        shape = self.shape_of(x)
        return src if self.shape_of(src) == shape else self.emit(_op.broadcast_to(src, shape))

    def _sym_size(self, node):
        x = self.arg(node, 0, "input")
        return self.shape_of(x)[self.arg(node, 1, "dim")]

    def _size(self, node):
        x = self.arg(node, 0, "input")
        dim = self.arg(node, 1, "dim")
        shape = self.shape_of(x)
        return tuple(shape) if dim is None else shape[dim]

    def _assert_noop(self, node):
        """Runtime checks torch.export records (shape asserts, metadata checks): the shapes
        they guard are in the struct info already."""
        return None


def _scalar_dtype(value, float_dtype: str) -> str:
    """The dtype torch gives a tensor filled with a Python number: bool, int64, or the default
    float dtype."""
    if isinstance(value, bool):
        return "bool"
    return "int64" if isinstance(value, int) else float_dtype
