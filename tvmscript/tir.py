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

from .ir import Node, Span

# ----------------------------------------------------------------------------- dtypes

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SCALAR_DTYPES = INT_DTYPES + FLOAT_DTYPES + ("bool", "handle")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype.startswith("bfloat")


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


@dataclass(eq=False, slots=True)
class Var(PrimExpr):
    """A scalar variable: a loop variable, a block iterator, a symbolic shape, a handle."""

    name: str = "v"
    span: Optional[Span] = None

    def __repr__(self) -> str:
        return f"tir.Var({self.name}: {self.dtype})"


@dataclass(eq=False, slots=True)
class IntImm(PrimExpr):
    value: int = 0


@dataclass(eq=False, slots=True)
class FloatImm(PrimExpr):
    value: float = 0.0


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

    def __repr__(self) -> str:
        return f"tir.Buffer({self.name}, {self.dtype})"


@dataclass(eq=False, slots=True)
class BufferLoad(PrimExpr):
    buffer: Buffer = None
    indices: list = field(default_factory=list)


# ----------------------------------------------------------------------------- statements


@dataclass(eq=False, slots=True)
class Stmt(Node):
    pass


@dataclass(eq=False, slots=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: list


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
    condition: PrimExpr
    message: PrimExpr
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
    var: Var
    dom: Range
    kind: str  # one of ITER_KINDS


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


@dataclass(eq=False, slots=True)
class BlockRealize(Stmt):
    iter_values: list
    predicate: PrimExpr
    block: Block


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
