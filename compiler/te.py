"""Tensor expressions (TE): TVM's ``te`` namespace, lowered to TensorIR by `create_prim_func`.

::

    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
    func = te.create_prim_func([A, B, C])

A `Tensor` is a placeholder (an input) or the output of a `compute`; indexing one (``A[i, j]``
or ``A(i, j)``) gives a `tir.BufferLoad` of the tensor's buffer. `create_prim_func` turns the
stages reachable from its arguments into one block per stage, as TVM's ``te.create_prim_func``:
loops named after the compute's axes (spatial, then reduce), block iterators ``v_<axis>``, reads
and writes inferred, a ``T.init()`` holding the reducer's identity for reductions, intermediate
tensors allocated in the root block, and ``T.func_attr({"tir.noalias": True})``.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from typing import Callable, Optional, Sequence

from tvmscript.ir import tir

__all__ = [
    "Tensor", "IterVar", "Reduce", "PlaceholderOp", "ComputeOp", "placeholder", "compute",
    "reduce_axis", "thread_axis", "sum", "max", "min", "min_value", "max_value", "if_then_else", "const", "var",
    "size_var",
    "create_prim_func", "exp", "log", "sqrt", "tanh", "sigmoid", "abs", "all", "any", "prod",
]

_builtin_sum, _builtin_max, _builtin_min, _builtin_abs = sum, max, min, abs


# ----------------------------------------------------------------------------- helpers


class ShapeDim(tir.IntImm):
    """A constant entry of `Tensor.shape`: an IntImm that also compares by value with ints and
    other IntImms, as TVM's (``assert A.shape[1] == B.shape[0]``). Turned back into a plain
    IntImm wherever te builds IR."""

    __slots__ = ()

    def __eq__(self, other):
        if isinstance(other, tir.IntImm):
            return self.value == other.value
        if isinstance(other, numbers.Integral):
            return self.value == int(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tir.IntImm.__hash__

    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __repr__(self) -> str:
        return str(self.value)


def _plain(e):
    """``e`` with ShapeDims replaced by plain IntImms."""
    if type(e) is ShapeDim:
        return tir.IntImm(e.dtype, e.value)
    if isinstance(e, tir.PrimExpr) and not isinstance(e, (tir.Var, tir.IntImm, tir.FloatImm)):
        return _rewrite(e, {}, {})
    return e


def _dim(d) -> tir.PrimExpr:
    """A shape entry: Python ints become int32 IntImms (as TVM), PrimExprs stay."""
    if isinstance(d, IterVar):
        return d.var
    if isinstance(d, ShapeDim):
        return tir.IntImm(d.dtype, d.value)
    if isinstance(d, tir.PrimExpr):
        return d
    if isinstance(d, numbers.Integral) and not isinstance(d, bool):
        v = int(d)
        dtype = "int64" if type(d).__name__ == "int64" else "int32"
        if dtype == "int32" and not -(2**31) <= v < 2**31:
            dtype = "int64"
        return tir.IntImm(dtype, v)
    raise TypeError(f"a shape entry must be an integer or a PrimExpr, not {type(d).__name__}")


def _shape(shape) -> list:
    if isinstance(shape, (tir.PrimExpr, numbers.Integral)):
        shape = (shape,)
    return [_dim(d) for d in shape]


def _index(i) -> tir.PrimExpr:
    if isinstance(i, IterVar):
        return i.var
    return tir.as_expr(i)


class _ExprOps:
    """Arithmetic for objects that stand for a PrimExpr (IterVar): converted, then tir's ops."""

    def as_prim_expr(self) -> tir.PrimExpr:  # pragma: no cover - overridden
        raise NotImplementedError

    def __add__(self, o): return self.as_prim_expr() + o
    def __radd__(self, o): return tir._binary(tir.Add, o, self.as_prim_expr())
    def __sub__(self, o): return self.as_prim_expr() - o
    def __rsub__(self, o): return tir._binary(tir.Sub, o, self.as_prim_expr())
    def __mul__(self, o): return self.as_prim_expr() * o
    def __rmul__(self, o): return tir._binary(tir.Mul, o, self.as_prim_expr())
    def __floordiv__(self, o): return self.as_prim_expr() // o
    def __rfloordiv__(self, o): return tir._binary(tir.FloorDiv, o, self.as_prim_expr())
    def __truediv__(self, o): return self.as_prim_expr() / o
    def __mod__(self, o): return self.as_prim_expr() % o
    def __neg__(self): return -self.as_prim_expr()
    def __lt__(self, o): return self.as_prim_expr() < o
    def __le__(self, o): return self.as_prim_expr() <= o
    def __gt__(self, o): return self.as_prim_expr() > o
    def __ge__(self, o): return self.as_prim_expr() >= o


class IterVar(_ExprOps):
    """An axis of a compute: ``var`` ranges over ``dom``; ``kind`` is "S" (spatial) or "R"
    (reduce). Usable in expressions as its variable."""

    def __init__(self, var: tir.Var, dom: tir.Range, kind: str) -> None:
        self.var = var
        self.dom = dom
        self.kind = kind

    def as_prim_expr(self) -> tir.Var:
        return self.var

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"te.IterVar({self.var.name}, [{self.dom.min}, {self.dom.extent}), {self.kind})"


# ----------------------------------------------------------------------------- operations


class Operation:
    name: str
    tag: str = ""
    attrs: dict

    @property
    def input_tensors(self) -> list:
        return []

    def output(self, index: int = 0) -> "Tensor":
        if index != 0:
            raise IndexError("te operations here have a single output")
        return self._output


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: list, dtype: str) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.attrs = {}

    def __repr__(self) -> str:
        return f"te.PlaceholderOp({self.name})"


class ComputeOp(Operation):
    def __init__(self, name: str, tag: str, attrs: dict, axis: list, reduce_axis: list, body) -> None:
        self.name = name
        self.tag = tag
        self.attrs = attrs
        self.axis = axis
        self.reduce_axis = reduce_axis
        self.body = body  # a PrimExpr, or a Reduce

    @property
    def input_tensors(self) -> list:
        found: list = []
        seen: set = set()

        class _Loads(_Visitor):
            def load(self, e):
                t = _TENSOR_OF.get(id(e.buffer))
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    found.append(t)

        v = _Loads()
        body = self.body
        if isinstance(body, Reduce):
            v.visit(body.source)
            if body.condition is not None:
                v.visit(body.condition)
        else:
            v.visit(body)
        return found

    def __repr__(self) -> str:
        return f"te.ComputeOp({self.name})"


# Buffer (by id) -> the Tensor it stands for, so loads can be traced back to their stage.
_TENSOR_OF: dict = {}


class Tensor:
    """The result of a `placeholder` or a `compute`: ``shape`` (PrimExprs), ``dtype``,
    ``name``, ``op``. ``A[i, j]`` / ``A(i, j)`` read an element (a `tir.BufferLoad`)."""

    def __init__(self, op: Operation, shape: list, dtype: str, name: str) -> None:
        self.op = op
        self._shape = shape
        self.dtype = dtype
        self.name = name
        self.buffer = tir.Buffer(name, list(shape), dtype)
        op._output = self
        _TENSOR_OF[id(self.buffer)] = self

    @property
    def shape(self) -> list:
        """The shape; constant entries compare equal to equal ints (``A.shape[1] == 128``)."""
        return [ShapeDim(d.dtype, d.value) if type(d) is tir.IntImm else d for d in self._shape]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def value_index(self) -> int:
        return 0

    def __getitem__(self, indices) -> tir.BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self._shape):
            raise IndexError(f"tensor {self.name} has {len(self._shape)} dimensions, indexed with {len(indices)}")
        return tir.BufferLoad(self.dtype, self.buffer, [_plain(_index(i)) for i in indices])

    def __call__(self, *indices) -> tir.BufferLoad:
        return self[tuple(indices)]

    def __repr__(self) -> str:
        return f"te.Tensor({self.name}, shape={[str(s) for s in self._shape]}, {self.dtype})"


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    shape = _shape(shape)
    return Tensor(PlaceholderOp(name, shape, dtype), shape, dtype, name)


def reduce_axis(dom, name: str = "rv", thread_tag: str = "", span=None) -> IterVar:
    """A reduction axis over ``(lo, hi)`` (or ``extent``, from 0)."""
    if isinstance(dom, tir.Range):
        lo, extent = _plain(dom.min), _plain(dom.extent)
    elif isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ValueError("reduce_axis takes (min, max) or an extent")
        lo, hi = _dim(dom[0]), _dim(dom[1])
        # A plain int bound takes the other bound's dtype ((0, T.int64(784)) is int64), as in TVM.
        if lo.dtype != hi.dtype and isinstance(dom[0], int) and isinstance(lo, tir.IntImm):
            lo = tir.IntImm(hi.dtype, lo.value)
        elif lo.dtype != hi.dtype and isinstance(dom[1], int) and isinstance(hi, tir.IntImm):
            hi = tir.IntImm(lo.dtype, hi.value)
        lo, hi = tir.promote(lo, hi) if lo.dtype != hi.dtype else (lo, hi)
        extent = hi if tir.is_const_int(lo, 0) else _simplify_sub(hi, lo)
    else:
        extent = _dim(dom)
        lo = tir.IntImm(extent.dtype, 0)
    return IterVar(tir.Var(extent.dtype, name), tir.Range(lo, extent), "R")


def thread_axis(*args, **kwargs):  # pragma: no cover - GPU schedules are not part of te here
    raise NotImplementedError("te.thread_axis: schedule with tvms.s_tir / TensorIR instead")


def _simplify_sub(hi, lo):
    if isinstance(hi, tir.IntImm) and isinstance(lo, tir.IntImm):
        return tir.IntImm(hi.dtype, hi.value - lo.value)
    return hi - lo


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs: Optional[dict] = None,
            varargs_names=None) -> Tensor:
    """``fcompute`` gets one variable per output dimension (named after its parameters, or
    ``i0, i1, ...`` for ``lambda *i``) and returns the element: an expression or a reduction."""
    shape = _shape(shape)
    code = fcompute.__code__
    nparams = code.co_argcount
    if code.co_flags & inspect.CO_VARARGS:
        names = [f"i{k}" for k in range(len(shape))] if varargs_names is None else list(varargs_names)
    else:
        names = list(code.co_varnames[:nparams])
        if nparams != len(shape):
            raise ValueError(f"fcompute takes {nparams} arguments but the shape has {len(shape)} dimensions")
    axis = [IterVar(tir.Var(d.dtype, n), tir.Range(tir.IntImm(d.dtype, 0), d), "S") for n, d in zip(names, shape)]
    body = fcompute(*[a.var for a in axis])
    if isinstance(body, (list, tuple)):
        if len(body) != 1:
            raise NotImplementedError("te.compute with several outputs is not supported")
        body = body[0]
    if isinstance(body, Reduce):
        reduce_axes = list(body.axis)
        dtype = body.dtype
    else:
        body = tir.as_expr(body)
        reduce_axes = []
        dtype = body.dtype
    op = ComputeOp(name, tag, dict(attrs or {}), axis, reduce_axes, body)
    return Tensor(op, shape, dtype, name)


# ----------------------------------------------------------------------------- reductions


class Reduce:
    """``combiner(acc, source)`` over ``axis``, starting from ``identity``: the body of a
    reduction compute (it may not be nested in another expression)."""

    def __init__(self, kind: str, source: tir.PrimExpr, axis: list, condition=None) -> None:
        self.kind = kind
        self.source = source
        self.axis = axis
        self.condition = condition
        self.dtype = source.dtype

    def identity(self) -> tir.PrimExpr:
        dtype = self.dtype
        if self.kind == "sum":
            return tir.const(0, dtype)
        if self.kind == "prod":
            return tir.const(1, dtype)
        if self.kind == "max":
            return min_value(dtype)
        return max_value(dtype)

    def combine(self, acc: tir.PrimExpr, value: tir.PrimExpr) -> tir.PrimExpr:
        if self.kind == "sum":
            return tir.Add(self.dtype, acc, value)
        if self.kind == "prod":
            return tir.Mul(self.dtype, acc, value)
        cls = tir.Max if self.kind == "max" else tir.Min
        return cls(self.dtype, acc, value)

    def __repr__(self) -> str:
        return f"te.{self.kind}({self.source}, axis={[a.name for a in self.axis]})"


_FLOAT_LIMITS = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
                 "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def min_value(dtype: str) -> tir.PrimExpr:
    if tir.is_float(dtype):
        return tir.FloatImm(dtype, -_FLOAT_LIMITS[dtype])
    if dtype == "bool":
        return tir.IntImm("bool", 0)
    if dtype.startswith("u"):
        return tir.IntImm(dtype, 0)
    return tir.IntImm(dtype, -(2 ** (int(dtype[3:]) - 1)))


def max_value(dtype: str) -> tir.PrimExpr:
    if tir.is_float(dtype):
        return tir.FloatImm(dtype, _FLOAT_LIMITS[dtype])
    if dtype == "bool":
        return tir.IntImm("bool", 1)
    bits = int(dtype.lstrip("uint"))
    return tir.IntImm(dtype, 2**bits - 1 if dtype.startswith("u") else 2 ** (bits - 1) - 1)


def _axes(axis) -> list:
    if isinstance(axis, IterVar):
        return [axis]
    return list(axis)


def _reducer(kind: str, elementwise):
    def fn(expr, *rest, axis=None, where=None, init=None, **kwargs):
        if axis is None and kwargs.get("keepdims") is None and rest and not isinstance(rest[0], (IterVar, list, tuple)):
            if elementwise is None:
                raise TypeError(f"te.{kind} needs axis=")
            return elementwise(expr, rest[0])
        if axis is None and rest:
            axis = rest[0]
        if axis is None:
            raise TypeError(f"te.{kind} needs axis= (or two operands for the elementwise {kind})")
        if init is not None:
            raise NotImplementedError(f"te.{kind}(init=...) is not supported")
        source = tir.as_expr(expr)
        red = Reduce(kind, source, _axes(axis), None if where is None else tir.as_expr(where))
        return red

    fn.__name__ = kind
    fn.__doc__ = f"``te.{kind}(expr, axis=k)``: a reduction" + (
        f"; ``te.{kind}(a, b)``: the elementwise {kind}." if elementwise else "."
    )
    return fn


def _elementwise(cls):
    def fn(a, b):
        a, b = tir.promote(a, b)
        return cls(a.dtype, a, b)
    return fn


sum = _reducer("sum", None)
prod = _reducer("prod", None)  # TVM spells it comm_reducer(lambda x, y: x * y, ...); topi.prod uses it
max = _reducer("max", _elementwise(tir.Max))
min = _reducer("min", _elementwise(tir.Min))


# ----------------------------------------------------------------------------- scalar helpers


def const(value, dtype: Optional[str] = None) -> tir.PrimExpr:
    if dtype is None:
        dtype = "float32" if isinstance(value, float) else ("bool" if isinstance(value, bool) else "int32")
    return tir.const(value, dtype) if dtype != "bool" else tir.IntImm("bool", int(bool(value)))


def var(name: str = "tindex", dtype: str = "int32", span=None) -> tir.Var:
    return tir.Var(dtype, name)


size_var = var


def if_then_else(cond, t, f) -> tir.PrimExpr:
    cond = tir.as_expr(cond)
    t, f = tir.promote(t, f)
    return tir.Call(t.dtype, "tir.if_then_else", [cond, t, f])


def all(*conds) -> tir.PrimExpr:
    out = None
    for c in conds:
        c = tir.as_expr(c)
        out = c if out is None else tir.And("bool", out, c)
    return out


def any(*conds) -> tir.PrimExpr:
    out = None
    for c in conds:
        c = tir.as_expr(c)
        out = c if out is None else tir.Or("bool", out, c)
    return out


def abs(x) -> tir.PrimExpr:
    x = tir.as_expr(x)
    return tir.Call(x.dtype, "tir.fabs", [x]) if tir.is_float(x.dtype) else tir.Call(x.dtype, "tir.abs", [x])


def _unary_intrinsic(name: str):
    op = f"tir.{name}"

    def fn(x):
        x = tir.as_expr(x)
        dtype = "bool" if name in ("isnan", "isinf", "isfinite") else x.dtype
        return tir.Call(dtype, op, [x])

    fn.__name__ = name
    return fn


def _binary_intrinsic(name: str):
    op = f"tir.{name}"

    def fn(a, b):
        a, b = tir.promote(a, b)
        return tir.Call(a.dtype, op, [a, b])

    fn.__name__ = name
    return fn


_UNARY = ("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
          "erf", "floor", "ceil", "round", "trunc", "nearbyint", "sin", "cos", "tan", "sinh", "cosh",
          "asin", "acos", "atan", "asinh", "acosh", "atanh", "isnan", "isinf", "isfinite", "popcount",
          "clz", "fabs")
_BINARY = ("pow", "atan2", "fmod", "hypot", "copysign", "nextafter")
for _n in _UNARY:
    globals()[_n] = _unary_intrinsic(_n)
for _n in _BINARY:
    globals()[_n] = _binary_intrinsic(_n)
power = globals()["pow"]
__all__ += list(_UNARY) + list(_BINARY) + ["power"]


def floordiv(a, b): return tir._binary(tir.FloorDiv, a, b)
def floormod(a, b): return tir._binary(tir.FloorMod, a, b)
def truncdiv(a, b): return tir._binary(tir.Div, a, b)
def truncmod(a, b): return tir._binary(tir.Mod, a, b)
def div(a, b): return tir._binary(tir.Div, a, b)


def cast(x, dtype: str) -> tir.PrimExpr:
    x = tir.as_expr(x, dtype)
    return x if x.dtype == dtype else tir.Cast(dtype, x)


# ----------------------------------------------------------------------------- rewriting


class _Visitor:
    """Walks an expression, calling ``load`` on each BufferLoad."""

    def load(self, e) -> None:  # pragma: no cover - overridden
        pass

    def visit(self, e) -> None:
        if isinstance(e, tir.BufferLoad):
            self.load(e)
            for i in e.indices:
                self.visit(i)
            return
        if not dataclasses.is_dataclass(e) or isinstance(e, (tir.Var, tir.IntImm, tir.FloatImm, tir.StringImm)):
            return
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, tir.PrimExpr):
                self.visit(v)
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, tir.PrimExpr):
                        self.visit(x)


def _rewrite(e, var_map: dict, buf_map: dict, index_dtype: Optional[str] = None):
    """``e`` with variables and buffers replaced (and, with ``index_dtype``, int32 index
    constants widened)."""
    if isinstance(e, tir.Var):
        return var_map.get(e, e)
    if type(e) is ShapeDim:
        return tir.IntImm(e.dtype, e.value)
    if isinstance(e, (tir.IntImm, tir.FloatImm, tir.StringImm)):
        return e
    if isinstance(e, tir.BufferLoad):
        idx = [_rewrite(i, var_map, buf_map, index_dtype) for i in e.indices]
        if index_dtype is not None:
            idx = [_to_index(i, index_dtype) for i in idx]
        return tir.BufferLoad(e.dtype, buf_map.get(e.buffer, e.buffer), idx)
    if dataclasses.is_dataclass(e):
        changes = {}
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, tir.PrimExpr):
                changes[f.name] = _rewrite(v, var_map, buf_map, index_dtype)
            elif isinstance(v, list) and v and isinstance(v[0], tir.PrimExpr):
                changes[f.name] = [_rewrite(x, var_map, buf_map, index_dtype) for x in v]
        if index_dtype is not None and isinstance(e, tir.BinaryOp):
            a, b = changes.get("a", e.a), changes.get("b", e.b)
            if a.dtype != b.dtype and tir.is_int(a.dtype) and tir.is_int(b.dtype):
                a, b = _to_index(a, index_dtype), _to_index(b, index_dtype)
                changes["a"], changes["b"] = a, b
                if not isinstance(e, tir.COMPARISONS):
                    changes["dtype"] = index_dtype
        if changes:
            return dataclasses.replace(e, **changes)
    return e


def _to_index(e, dtype: str):
    if e.dtype == dtype or not tir.is_int(e.dtype):
        return e
    if isinstance(e, tir.IntImm):
        return tir.IntImm(dtype, e.value)
    return tir.Cast(dtype, e)


# ----------------------------------------------------------------------------- create_prim_func


def _ordered_tensors(args: Sequence[Tensor]) -> list:
    """Every tensor the arguments depend on, producers before consumers (post-order DFS)."""
    order: list = []
    seen: set = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for inp in t.op.input_tensors:
            visit(inp)
        order.append(t)

    for t in args:
        visit(t)
    return order


def create_prim_func(ops: Sequence, index_dtype_override: Optional[str] = None) -> tir.PrimFunc:
    """A `tir.PrimFunc` computing the tensors in ``ops`` from the placeholders in ``ops``.
    Parameters are the listed tensors, in order, then the listed `tir.Var`s as scalar
    parameters (symbolic sizes no buffer's shape binds); computes not listed are allocated in
    the root block. ``index_dtype_override`` ("int32"/"int64") sets the dtype of shapes and loops."""
    args = [a for a in ops if not isinstance(a, tir.Var)]
    scalars = [a for a in ops if isinstance(a, tir.Var)]  # scalar parameters, after the buffers
    for a in args:
        if not isinstance(a, Tensor):
            raise TypeError(f"create_prim_func takes te.Tensors and tir.Vars, not {type(a).__name__}")
    idt = index_dtype_override

    def dim(d):
        return _to_index(d, idt) if idt is not None else d

    var_map: dict = {}
    tensors = _ordered_tensors(args)
    arg_ids = {id(t) for t in args}
    buf_map: dict = {}
    params: list = []
    buffer_map: dict = {}
    # Symbolic shape variables in another index dtype would need their own vars: map them.
    for t in tensors:
        for d in t._shape:
            for v in _vars_of(d):
                if idt is not None and v.dtype != idt and v not in var_map:
                    var_map[v] = tir.Var(idt, v.name)
    for t in tensors:
        shape = [_rewrite(dim(d), var_map, {}, idt) for d in t._shape]
        buf_map[t.buffer] = tir.Buffer(t.name, shape, t.dtype)
    for t in args:
        buf = buf_map[t.buffer]
        # The handle has the buffer's name, as TVM 0.27's parameter is the buffer itself; a
        # symbolic one prints as ``x_handle: T.handle`` and its T.match_buffer.
        handle = tir.Var("handle", t.name)
        buf.data = handle
        params.append(handle)
        buffer_map[handle] = buf
    params.extend(var_map.get(v, v) for v in scalars)
    allocs: list = []
    stages: list = []
    block_names: set = set()
    for t in tensors:
        if isinstance(t.op, PlaceholderOp):
            if id(t) not in arg_ids:
                raise ValueError(f"placeholder {t.name} is used but not passed to create_prim_func")
            continue
        if id(t) not in arg_ids:
            buf = buf_map[t.buffer]
            buf.data = tir.Var("handle", t.name)
            allocs.append(buf)
        stages.append(_stage(t, buf_map, var_map, idt, _fresh_name(t.op.name, block_names)))
    body = tir.seq(stages)
    root = tir.Block("root", [], [], [], body, alloc_buffers=allocs)
    body = tir.BlockRealize([], tir.IntImm("bool", 1), root)
    return tir.PrimFunc(params, buffer_map, body, attrs={"tir.noalias": True})


def _fresh_name(name: str, used: set) -> str:
    """``name``, or ``name_1``, ``name_2``... if taken: TVM's create_prim_func gives stages of
    the same name distinct block names this way (gelu's ``T_multiply``, ``T_multiply_1``)."""
    fresh, k = name, 0
    while fresh in used:
        k += 1
        fresh = f"{name}_{k}"
    used.add(fresh)
    return fresh


def _vars_of(e) -> list:
    from tvmscript.ir.tir_visitor import vars_in

    return vars_in([e])


def _is_static(shape) -> bool:
    return _builtin_all_(isinstance(d, tir.IntImm) for d in shape)


def _builtin_all_(it) -> bool:
    for x in it:
        if not x:
            return False
    return True


def _stage(t: Tensor, buf_map: dict, outer_map: dict, idt: Optional[str], block_name: Optional[str] = None) -> tir.Stmt:
    from tvmscript.ir.tir_analysis import infer_access_regions

    op: ComputeOp = t.op
    out = buf_map[t.buffer]
    axes = list(op.axis) + list(op.reduce_axis)
    var_map = dict(outer_map)
    loops = []
    iter_vars = []
    for ax in axes:
        lo = _rewrite(ax.dom.min, outer_map, {}, idt)
        extent = _rewrite(ax.dom.extent, outer_map, {}, idt)
        if idt is not None:
            lo, extent = _to_index(lo, idt), _to_index(extent, idt)
        dtype = extent.dtype
        loop_var = tir.Var(dtype, ax.var.name)
        block_var = tir.Var(dtype, f"v_{ax.var.name}")
        var_map[ax.var] = block_var
        loops.append((loop_var, lo, extent))
        iter_vars.append(tir.IterVar(block_var, tir.Range(lo, extent), ax.kind))
    indices = [var_map[ax.var] for ax in op.axis]
    if isinstance(op.body, Reduce):
        red = op.body
        source = _rewrite(red.source, var_map, buf_map, idt)
        acc = tir.BufferLoad(out.dtype, out, list(indices))
        value = red.combine(acc, source)
        if red.condition is not None:
            cond = _rewrite(red.condition, var_map, buf_map, idt)
            value = tir.Select(out.dtype, cond, value, acc)
        init = tir.BufferStore(out, red.identity(), list(indices))
        store = tir.BufferStore(out, value, list(indices))
    else:
        init = None
        store = tir.BufferStore(out, _rewrite(op.body, var_map, buf_map, idt), list(indices))
    reads, writes = infer_access_regions(store, init, [])
    annotations = dict(op.attrs) if op.attrs else {}
    block = tir.Block(block_name or op.name, iter_vars, reads, writes, store, init=init, annotations=annotations)
    realize = tir.BlockRealize([lv for lv, _, _ in loops], tir.IntImm("bool", 1), block)
    stmt: tir.Stmt = realize
    for lv, lo, extent in reversed(loops):
        stmt = tir.For(lv, lo, extent, "serial", stmt)
    return stmt
