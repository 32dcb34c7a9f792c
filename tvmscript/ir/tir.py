"""TensorIR: the loop-level IR of `@T.prim_func` functions.

Small node classes, one per construct, mirroring Apache TVM's `tir` namespace. Variables and
buffers are compared by identity (two loops may both call their variable ``i``); structural
equality, which maps variables to variables, lives in `tvmscript.ir.structural_equal`.

Expressions carry their dtype (``"int32"``, ``"int64"``, ``"float32"``, ``"bool"``, ...), as
TVM's `PrimExpr` does: the printer needs it to decide between ``1`` and ``T.int64(1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..diagnostics import Span
from .node import Node

# ----------------------------------------------------------------------------- dtypes

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SCALAR_DTYPES = INT_DTYPES + FLOAT_DTYPES + ("bool", "handle")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype.startswith("bfloat")


def lanes_of(dtype: str) -> int:
    """Lanes of a vector dtype (``float32x4``: 4); 1 for a scalar."""
    base, sep, lanes = dtype.rpartition("x")
    return int(lanes) if sep and lanes.isdigit() else 1


def is_valid_dtype(dtype: str) -> bool:
    """``float32``, ``int64``, ``bool``, ``handle``, ``void``, or a vector ``float32x4``."""
    if dtype in SCALAR_DTYPES or dtype == "void":
        return True
    base, sep, lanes = dtype.rpartition("x")
    return bool(sep) and base in SCALAR_DTYPES and lanes.isdigit() and int(lanes) > 1


# ----------------------------------------------------------------------------- expressions


@dataclass(eq=False, slots=True)
class PrimExpr(Node):
    dtype: str

    # Python operators build the nodes TVMScript's operators build (as tvm.tir.PrimExpr's do),
    # with TVM's literal rule: a Python number takes the other operand's dtype. ``==``/``hash``
    # stay identity-based; use `equal` / `not_equal` for EQ / NE nodes.
    def __add__(self, other): return _binary(Add, self, other)
    def __radd__(self, other): return _binary(Add, other, self)
    def __sub__(self, other): return _binary(Sub, self, other)
    def __rsub__(self, other): return _binary(Sub, other, self)
    def __mul__(self, other): return _binary(Mul, self, other)
    def __rmul__(self, other): return _binary(Mul, other, self)
    def __truediv__(self, other): return _binary(Div, self, other)
    def __rtruediv__(self, other): return _binary(Div, other, self)
    def __floordiv__(self, other): return _binary(FloorDiv, self, other)
    def __rfloordiv__(self, other): return _binary(FloorDiv, other, self)
    def __mod__(self, other): return _binary(FloorMod, self, other)
    def __rmod__(self, other): return _binary(FloorMod, other, self)
    def __pow__(self, other): return _binary("tir.pow", self, other)
    def __rpow__(self, other): return _binary("tir.pow", other, self)
    def __neg__(self):
        if isinstance(self, (IntImm, FloatImm)):
            return const(-self.value, self.dtype)
        return Mul(self.dtype, self, const(-1, self.dtype))
    def __lt__(self, other): return _binary(LT, self, other)
    def __le__(self, other): return _binary(LE, self, other)
    def __gt__(self, other): return _binary(GT, self, other)
    def __ge__(self, other): return _binary(GE, self, other)
    def equal(self, other): return _binary(EQ, self, other)
    def not_equal(self, other): return _binary(NE, self, other)


@dataclass(eq=False, slots=True)
class Var(PrimExpr):
    """A scalar variable: a loop variable, a block iterator, a symbolic shape, a handle.

    ``pointer`` is a handle's pointee, ``(element dtype, storage scope)``, as TVM's
    ``T.handle("float32", "shared")`` writes it; None is an untyped handle (TVM's
    ``T.handle``, which is ``("void", "global")``). It is part of the variable's type, so
    structural equality compares it."""

    name: str = "v"
    span: Optional[Span] = None
    pointer: Optional[tuple] = None

    def __repr__(self) -> str:
        return f"tir.Var({self.name}: {self.dtype})"


@dataclass(eq=False, slots=True)
class IntImm(PrimExpr):
    value: int = 0

    # ``int(n)`` / ``float(n)`` on a constant, as TVM's IntImm allows (shapes read in Python).
    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)


@dataclass(eq=False, slots=True)
class FloatImm(PrimExpr):
    value: float = 0.0

    def __float__(self) -> float:
        return float(self.value)


@dataclass(eq=False, slots=True)
class StringImm(PrimExpr):
    value: str = ""


@dataclass(eq=False, slots=True)
class Cast(PrimExpr):
    value: PrimExpr = None


@dataclass(eq=False, slots=True)
class BinaryOp(PrimExpr):
    """Base of the two-operand expressions; ``op`` names the concrete class (``"Add"``)."""

    a: PrimExpr = None
    b: PrimExpr = None


class Add(BinaryOp): __slots__ = ()
class Sub(BinaryOp): __slots__ = ()
class Mul(BinaryOp): __slots__ = ()
class Div(BinaryOp): __slots__ = ()
class Mod(BinaryOp): __slots__ = ()
class FloorDiv(BinaryOp): __slots__ = ()
class FloorMod(BinaryOp): __slots__ = ()
class Min(BinaryOp): __slots__ = ()
class Max(BinaryOp): __slots__ = ()
class EQ(BinaryOp): __slots__ = ()
class NE(BinaryOp): __slots__ = ()
class LT(BinaryOp): __slots__ = ()
class LE(BinaryOp): __slots__ = ()
class GT(BinaryOp): __slots__ = ()
class GE(BinaryOp): __slots__ = ()
class And(BinaryOp): __slots__ = ()
class Or(BinaryOp): __slots__ = ()


COMPARISONS = (EQ, NE, LT, LE, GT, GE)


@dataclass(eq=False, slots=True)
class Not(PrimExpr):
    a: PrimExpr = None


@dataclass(eq=False, slots=True)
class Select(PrimExpr):
    condition: PrimExpr = None
    true_value: PrimExpr = None
    false_value: PrimExpr = None


@dataclass(eq=False, slots=True)
class Call(PrimExpr):
    """An intrinsic call: ``op`` is its TIR name (``"tir.exp"``, ``"tir.if_then_else"``)."""

    op: str = ""
    args: list = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Ramp(PrimExpr):
    base: PrimExpr = None
    stride: PrimExpr = None
    lanes: int = 1


@dataclass(eq=False, slots=True)
class Broadcast(PrimExpr):
    value: PrimExpr = None
    lanes: int = 1


@dataclass(eq=False, slots=True)
class Let(PrimExpr):
    var: Var = None
    value: PrimExpr = None
    body: PrimExpr = None


@dataclass(eq=False, slots=True)
class Buffer(Node):
    """A multi-dimensional view of memory. ``data`` is the handle it is stored at."""

    name: str
    shape: list
    dtype: str = "float32"
    strides: list = field(default_factory=list)
    elem_offset: Any = None
    scope: str = "global"
    data: Optional[Var] = None
    align: int = 64
    offset_factor: int = 1
    axis_separators: list = field(default_factory=list)
    span: Optional[Span] = None
    # Hints on an allocation (``T.alloc_buffer(..., annotations={...})``), kept for printing.
    annotations: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"tir.Buffer({self.name}, {self.dtype})"


@dataclass(eq=False, slots=True)
class BufferLoad(PrimExpr):
    buffer: Buffer = None
    indices: list = field(default_factory=list)
    span: Optional[Span] = None  # the ``A[i]`` it was read from: bounds-check errors name it


# ----------------------------------------------------------------------------- statements


@dataclass(eq=False, slots=True)
class Stmt(Node):
    pass


@dataclass(eq=False, slots=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: list
    span: Optional[Span] = None  # the ``A[i]`` written: bounds-check errors name it


@dataclass(eq=False, slots=True)
class Evaluate(Stmt):
    value: PrimExpr


@dataclass(eq=False, slots=True)
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(eq=False, slots=True)
class AssertStmt(Stmt):
    """``assert condition, message``. TVM 0.27 also writes ``assert c, ("ValueError", ["a",
    "b"])``: an error ``kind`` and the message's ``message_parts``, kept to print them back;
    ``message`` is then the parts joined, for code that reads one string."""

    condition: PrimExpr
    message: PrimExpr
    body: Stmt
    kind: str = ""
    message_parts: list = field(default_factory=list)


@dataclass(eq=False, slots=True)
class AttrStmt(Stmt):
    """``T.attr(node, attr_key, value)``: a key/value hint about ``node`` (a buffer, a variable
    or the constant 0) that holds over ``body`` (``"pragma_scope"``, ``"storage_alignment"``)."""

    node: Any
    attr_key: str
    value: PrimExpr
    body: Stmt


@dataclass(eq=False, slots=True)
class CommReducer(Node):
    """A commutative reduction, ``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])``: the
    combiner of ``lhs`` and ``rhs`` values (one of each per reduced value) is ``result``, and
    ``identity_element`` is its identity. It is the node of a ``"reduce_scope"`` AttrStmt
    around a ``T.tvm_thread_allreduce``."""

    lhs: list
    rhs: list
    result: list
    identity_element: list


@dataclass(eq=False, slots=True)
class DeclBuffer(Stmt):
    """``B = T.decl_buffer(shape, dtype, data=ptr)``: a buffer over memory that exists
    already (``ptr``, a handle or another buffer's ``.data``), visible in ``body``, the rest
    of the enclosing body. TVM writes a view of another buffer, ``A.view(256)``, this way."""

    buffer: "Buffer"
    body: Stmt


# The kinds of For loops, with the `T.` name each prints as.
FOR_KINDS = ("serial", "parallel", "vectorized", "unroll", "thread_binding")


@dataclass(eq=False, slots=True)
class For(Stmt):
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    thread_tag: Optional[str] = None
    annotations: dict = field(default_factory=dict)
    # ``range(lo, hi, step)``: iterations lo, lo + step, ... below lo + extent (None: 1).
    step: Optional[PrimExpr] = None


@dataclass(eq=False, slots=True)
class While(Stmt):
    condition: PrimExpr
    body: Stmt


@dataclass(eq=False, slots=True)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@dataclass(eq=False, slots=True)
class SeqStmt(Stmt):
    seq: list


@dataclass(eq=False, slots=True)
class Range(Node):
    min: PrimExpr
    extent: PrimExpr


@dataclass(eq=False, slots=True)
class BufferRegion(Node):
    buffer: Buffer
    region: list  # of Range


# Block iterator kinds: spatial ("S"), reduce ("R"), scan, opaque.
ITER_KINDS = {"S": "spatial", "R": "reduce", "C": "scan", "O": "opaque"}


@dataclass(eq=False, slots=True)
class IterVar(Node):
    """A block iterator (``kind`` one of ITER_KINDS), or a GPU thread index launched with
    ``T.launch_thread`` (``kind`` "thread", ``thread_tag`` such as "threadIdx.x"; it is the
    node of a ``"thread_extent"`` AttrStmt)."""

    var: Var
    dom: Range
    kind: str
    thread_tag: Optional[str] = None


@dataclass(eq=False, slots=True)
class MatchBufferRegion(Node):
    buffer: Buffer
    source: BufferRegion


@dataclass(eq=False, slots=True)
class Block(Stmt):
    """A ``with T.block(name):`` scope: iterators bound to values, declared reads and writes,
    an optional reduction ``init``, buffers allocated inside, and its body."""

    name: str
    iter_vars: list
    reads: list
    writes: list
    body: Stmt
    init: Optional[Stmt] = None
    alloc_buffers: list = field(default_factory=list)
    match_buffers: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    span: Optional[Span] = None  # the ``with T.block(...)`` line, for diagnostics (schedules)


@dataclass(eq=False, slots=True)
class BlockRealize(Stmt):
    iter_values: list
    predicate: PrimExpr
    block: Block


@dataclass(eq=False)
class Allocate(Stmt):
    """Storage for ``buffer`` (a 1-D buffer whose ``data`` variable the body uses) during
    ``body``. ``storage`` is ``"stack"``, ``"heap"``, or ``"auto"`` until `plan_allocations`
    decides. Made by lowering (compiler/lower_tir.py), never written in TVMScript."""

    buffer: Buffer
    body: Stmt
    storage: str = "auto"


@dataclass(eq=False, slots=True)
class PrimFunc(Node):
    """A TensorIR function. ``params`` are handle or scalar Vars; ``buffer_map`` gives the
    Buffer behind each handle parameter (a ``T.Buffer`` annotation or a ``T.match_buffer``)."""

    params: list
    buffer_map: dict
    body: Stmt
    ret_type: Optional[str] = None
    attrs: dict = field(default_factory=dict)
    private: bool = False
    span: Optional[Span] = None
    # Comments from the source, keyed by the statement node they belong to (see ir.Comments).
    comments: Optional[dict] = field(default=None, repr=False)


# ----------------------------------------------------------------------------- helpers


def const(value, dtype: str) -> PrimExpr:
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    return IntImm(dtype, int(value))


def is_const_int(e, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)


def seq(stmts: list) -> Stmt:
    flat = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(flat)


_INT_RANK = {"bool": 0, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3,
             "int64": 4, "uint64": 4}
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _wider_dtype(a: str, b: str) -> str:
    if is_float(a) and is_float(b):
        return a if _FLOAT_RANK.get(a, 0) >= _FLOAT_RANK.get(b, 0) else b
    if is_float(a):
        return a
    if is_float(b):
        return b
    return a if _INT_RANK.get(a, 0) >= _INT_RANK.get(b, 0) else b


def as_expr(value, dtype: str | None = None) -> PrimExpr:
    """A PrimExpr for ``value``: PrimExprs pass through; a Python number becomes a constant of
    ``dtype`` (default int32 / float32, as TVM's convert); objects with ``as_prim_expr()``
    (te's IterVar) give theirs."""
    if isinstance(value, PrimExpr):
        return value
    conv = getattr(value, "as_prim_expr", None)
    if conv is not None:
        return conv()
    if isinstance(value, bool):
        return IntImm("bool", int(value))
    if isinstance(value, int):
        return IntImm(dtype if dtype is not None and not is_float(dtype) and dtype != "bool" else "int32", value) \
            if not (dtype is not None and is_float(dtype)) else FloatImm(dtype, float(value))
    if isinstance(value, float):
        return FloatImm(dtype if dtype is not None and is_float(dtype) else "float32", value)
    try:  # NumPy scalars
        import numbers
        if isinstance(value, numbers.Integral):
            return as_expr(int(value), dtype)
        if isinstance(value, numbers.Real):
            return as_expr(float(value), dtype)
    except Exception:  # pragma: no cover
        pass
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a TIR expression")


def promote(a, b) -> tuple:
    """Two operands in one dtype: a Python number takes the other side's dtype; otherwise the
    narrower int is cast to the wider, an int to a float."""
    a_lit = not isinstance(a, PrimExpr) and not hasattr(a, "as_prim_expr")
    b_lit = not isinstance(b, PrimExpr) and not hasattr(b, "as_prim_expr")
    if a_lit and b_lit:
        a, b = as_expr(a), as_expr(b)
    elif a_lit:
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    elif b_lit:
        a = as_expr(a)
        b = as_expr(b, a.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        wider = _wider_dtype(a.dtype, b.dtype)
        if a.dtype != wider:
            a = Cast(wider, a)
        if b.dtype != wider:
            b = Cast(wider, b)
    return a, b


def _binary(cls, a, b):
    a, b = promote(a, b)
    if isinstance(cls, str):
        return Call(a.dtype, cls, [a, b])
    dtype = "bool" if cls in COMPARISONS else a.dtype
    return cls(dtype, a, b)


# ----------------------------------------------------------------------------- builtins

# TIR intrinsics written `T.name(args)`: name -> (TIR op name, number of args or None if any).
INTRINSICS = {
    name: (f"tir.{name}", 1)
    for name in (
        "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh",
        "sigmoid", "erf", "fabs", "floor", "ceil", "round", "trunc", "nearbyint", "sin", "cos",
        "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "isnan",
        "isinf", "isfinite", "popcount", "clz", "bitwise_not",
    )
}
INTRINSICS.update({
    "pow": ("tir.pow", 2), "atan2": ("tir.atan2", 2), "fmod": ("tir.fmod", 2),
    "hypot": ("tir.hypot", 2), "copysign": ("tir.copysign", 2), "nextafter": ("tir.nextafter", 2),
    "shift_left": ("tir.shift_left", 2), "shift_right": ("tir.shift_right", 2),
    "bitwise_and": ("tir.bitwise_and", 2), "bitwise_or": ("tir.bitwise_or", 2),
    "bitwise_xor": ("tir.bitwise_xor", 2),
})
BOOL_RESULT_INTRINSICS = {"tir.isnan", "tir.isinf", "tir.isfinite"}

# TVM's runtime and GPU builtins, written ``T.name(args..., dtype=...)``: the op each call
# builds and the dtype of its result when none is written (the printer writes ``dtype=`` only
# where it differs). tvms reads and prints them; the CPU code generator does not lower them.
BUILTINS = {
    "call_packed": ("tir.tvm_call_packed", "int32"),
    "tvm_call_packed": ("tir.tvm_call_packed", "int32"),
    "call_cpacked": ("tir.tvm_call_cpacked", "int32"),
    "tvm_call_cpacked": ("tir.tvm_call_cpacked", "int32"),
    "call_packed_lowered": ("tir.tvm_call_packed_lowered", "int32"),
    "call_cpacked_lowered": ("tir.tvm_call_cpacked_lowered", "int32"),
    "tvm_call_packed_lowered": ("tir.tvm_call_packed_lowered", "int32"),
    "tvm_call_cpacked_lowered": ("tir.tvm_call_cpacked_lowered", "int32"),
    "tvm_struct_set": ("tir.tvm_struct_set", "int32"),
    "isnullptr": ("tir.isnullptr", "bool"),
    "tvm_stack_make_array": ("tir.tvm_stack_make_array", "handle"),
    "tvm_stack_make_shape": ("tir.tvm_stack_make_shape", "handle"),
    "tvm_stack_alloca": ("tir.tvm_stack_alloca", "handle"),
    "tvm_access_ptr": ("tir.tvm_access_ptr", "handle"),
    "tvm_fill_fragment": ("tir.tvm_fill_fragment", "handle"),
    "tvm_load_matrix_sync": ("tir.tvm_load_matrix_sync", "handle"),
    "tvm_store_matrix_sync": ("tir.tvm_store_matrix_sync", "handle"),
    "tvm_mma_sync": ("tir.tvm_mma_sync", "handle"),
    "tvm_bmma_sync": ("tir.tvm_bmma_sync", "handle"),
    "tvm_thread_allreduce": ("tir.tvm_thread_allreduce", "handle"),
    "tvm_warp_activemask": ("tir.tvm_warp_activemask", "uint32"),
    "tvm_throw_last_error": ("tir.tvm_throw_last_error", "int32"),
    # PTX's tensor-core and asynchronous-copy instructions (TVM's ``tvm.tir.ptx_*``): what a
    # tensor-core matmul built from mma.sync, ldmatrix and cp.async is written with.
    "ptx_mma": ("tir.ptx_mma", "handle"),
    "ptx_ldmatrix": ("tir.ptx_ldmatrix", "handle"),
    "ptx_cp_async": ("tir.ptx_cp_async", "handle"),
    "ptx_commit_group": ("tir.ptx_commit_group", "handle"),
    "ptx_wait_group": ("tir.ptx_wait_group", "handle"),
    # Hopper's warpgroup MMA (no TVM TIR builtin spells it; tvms's own): ``ptx_wgmma`` multiplies
    # shared-memory tiles its descriptors (``ptx_wgmma_desc``) describe into registers,
    # asynchronously, between a fence and a commit / wait of its group.
    "ptx_wgmma": ("tir.ptx_wgmma", "handle"),
    "ptx_wgmma_desc": ("tir.ptx_wgmma_desc", "uint64"),
    "ptx_wgmma_fence": ("tir.ptx_wgmma_fence", "handle"),
    "ptx_wgmma_commit_group": ("tir.ptx_wgmma_commit_group", "handle"),
    "ptx_wgmma_wait_group": ("tir.ptx_wgmma_wait_group", "handle"),
    "ptx_fence_proxy_async": ("tir.ptx_fence_proxy_async", "handle"),
    "mma_store": ("tir.mma_store", "handle"),
    "mma_fill": ("tir.mma_fill", "handle"),
}
# Builtins TVM writes with their dtype first, ``T.ptx_mma("float32", "m16n8k16", ...)``
# (older TVM: ``dtype=`` last, which reads too).
DTYPE_FIRST_BUILTINS = {"tir.ptx_mma", "tir.ptx_ldmatrix", "tir.ptx_cp_async", "tir.mma_store", "tir.mma_fill",
                        "tir.ptx_wgmma"}
# The name each builtin op prints as (the first spelling in BUILTINS).
BUILTIN_NAMES = {}
for _name, (_op, _dtype) in BUILTINS.items():
    BUILTIN_NAMES.setdefault(_op, (_name, _dtype))
