"""Relax: the graph-level IR of `@R.function` functions.

Expressions carry *struct info* (TVM's name for a static type plus what is known of shapes):
`TensorStructInfo` knows a tensor's dtype and, when it can, its rank and shape, whose dimensions
are TIR expressions (`tir.IntImm` constants or `tir.Var` symbolic dims such as ``n``).

Variables compare by identity; a function body is a `SeqExpr` of binding blocks (plain or
dataflow) followed by the returned expression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from . import tir
from ..diagnostics import Span
from .module import GlobalVar
from .node import Node

# ----------------------------------------------------------------------------- struct info


@dataclass(eq=False, slots=True)
class StructInfo(Node):
    pass


@dataclass(eq=False, slots=True)
class ObjectStructInfo(StructInfo):
    pass


@dataclass(eq=False, slots=True)
class PrimStructInfo(StructInfo):
    dtype: str = "int64"
    value: Optional[tir.PrimExpr] = None


@dataclass(eq=False, slots=True)
class ShapeStructInfo(StructInfo):
    values: Optional[list] = None  # of tir.PrimExpr, when known
    ndim: int = -1

    def __post_init__(self):
        if self.values is not None:
            self.ndim = len(self.values)


@dataclass(eq=False, slots=True)
class TensorStructInfo(StructInfo):
    """``R.Tensor(shape, dtype)``: ``shape`` is a list of tir.PrimExpr (or None when unknown),
    ``ndim`` is -1 when the rank is unknown, ``dtype`` is "" when unknown."""

    shape: Optional[list] = None
    dtype: str = ""
    ndim: int = -1
    vdevice: Optional[str] = None

    def __post_init__(self):
        if self.shape is not None:
            # Sizes given as Python ints (from Python code) are int64 dims, as the parser makes.
            self.shape = [tir.IntImm("int64", d) if type(d) is int else d for d in self.shape]
            self.ndim = len(self.shape)


@dataclass(eq=False, slots=True)
class TupleStructInfo(StructInfo):
    fields: list = field(default_factory=list)


@dataclass(eq=False, slots=True)
class FuncStructInfo(StructInfo):
    params: Optional[list] = None
    ret: StructInfo = None
    purity: bool = True


# ----------------------------------------------------------------------------- expressions


@dataclass(eq=False, slots=True)
class Expr(Node):
    pass


@dataclass(eq=False, slots=True)
class Var(Expr):
    name_hint: str
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = None

    def __post_init__(self):
        # Older Relax: relax.Var("A", (128, 128), relax.DynTensorType(2, "float32")).
        if self.struct_info is not None and not isinstance(self.struct_info, StructInfo):
            from .op.api import fix_legacy_var

            fix_legacy_var(self)

    def __repr__(self) -> str:
        return f"relax.Var({self.name_hint})"


@dataclass(eq=False, slots=True)
class DataflowVar(Var):
    """A variable bound inside a dataflow block and not exported by ``R.output``."""

    def __repr__(self) -> str:
        return f"relax.DataflowVar({self.name_hint})"


@dataclass(eq=False, slots=True)
class Constant(Expr):
    data: Any  # a numpy.ndarray
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class Tuple(Expr):
    fields: list
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class ShapeExpr(Expr):
    values: list  # of tir.PrimExpr
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class PrimValue(Expr):
    """``R.prim_value(v)``: a TIR value as a Relax value. Built from Python, it knows its struct
    info at once, as TVM's constructor does (a Python int is an int64 immediate)."""

    value: tir.PrimExpr
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        if isinstance(self.value, bool):
            self.value = tir.IntImm("bool", int(self.value))
        elif isinstance(self.value, int):
            self.value = tir.IntImm("int64", self.value)
        if self.struct_info is None and isinstance(self.value, tir.PrimExpr):
            self.struct_info = PrimStructInfo(self.value.dtype, self.value)


@dataclass(eq=False, slots=True)
class StringImm(Expr):
    value: str
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class DataTypeImm(Expr):
    value: str
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class ExternFunc(Expr):
    """A function found by name at run time (``R.call_tir("env.linear", ...)``)."""

    global_symbol: str
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class Op(Expr):
    """A reference to a registered operator, e.g. ``relax.add``; see tvmscript/ir/op."""

    name: str

    def __repr__(self) -> str:
        return f"Op({self.name})"


@dataclass(eq=False, slots=True)
class Call(Expr):
    """A call of an Op, a GlobalVar, an ExternFunc or a Var. ``attrs`` are the op's keyword
    attributes (Python values); ``sinfo_args`` the struct info given explicitly
    (``out_sinfo=`` of call_tir, ``sinfo_args=`` of call_packed)."""

    op: Any
    args: list
    attrs: dict = field(default_factory=dict)
    sinfo_args: list = field(default_factory=list)
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = None


@dataclass(eq=False, slots=True)
class If(Expr):
    cond: Expr
    true_branch: "SeqExpr"
    false_branch: "SeqExpr"
    struct_info: Optional[StructInfo] = None


@dataclass(eq=False, slots=True)
class SeqExpr(Expr):
    blocks: list
    body: Expr
    struct_info: Optional[StructInfo] = None


# ----------------------------------------------------------------------------- bindings


@dataclass(eq=False, slots=True)
class Binding(Node):
    var: Var


@dataclass(eq=False, slots=True)
class VarBinding(Binding):
    value: Expr


@dataclass(eq=False, slots=True)
class MatchCast(Binding):
    value: Expr
    struct_info: StructInfo


@dataclass(eq=False, slots=True)
class BindingBlock(Node):
    bindings: list


@dataclass(eq=False, slots=True)
class DataflowBlock(BindingBlock):
    # The variables named by R.output, in the order written (the printer writes them back).
    outputs: list = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Function(Expr):
    params: list
    body: SeqExpr
    ret_struct_info: Optional[StructInfo] = None
    attrs: dict = field(default_factory=dict)
    is_pure: bool = True
    private: bool = False
    struct_info: Optional[StructInfo] = None
    span: Optional[Span] = None
    # Comments from the source, keyed by the node they belong to (see ir.Comments).
    comments: Optional[dict] = field(default=None, repr=False)


# ----------------------------------------------------------------------------- helpers

# The calls that run a kernel in destination-passing style: ``op(callee, (args...),
# out_sinfo, [tir_vars])``, the callee a PrimFunc or a packed function.
DPS_CALL_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace", "relax.call_tir_with_grad")



def sinfo_symbols(sinfo) -> list:
    """The names of the symbolic dims ``sinfo`` mentions (tensor and shape dims, prim values,
    tuple fields), in order of appearance."""
    from .tir_visitor import vars_in

    out: list = []

    def add(e) -> None:
        for name in [e.name] if isinstance(e, tir.Var) else sorted({v.name for v in vars_in([e])}):
            if name not in out:
                out.append(name)

    def walk(s) -> None:
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            for d in s.shape:
                add(d)
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            for d in s.values:
                add(d)
        elif isinstance(s, PrimStructInfo) and s.value is not None:
            add(s.value)
        elif isinstance(s, TupleStructInfo):
            for f in s.fields:
                walk(f)

    walk(sinfo)
    return out


def is_leaf(expr) -> bool:
    """Whether ``expr`` may stand where TVM's normal form puts an operand (a call's argument,
    a tuple's field): anything but a call, a tuple item, an if or a sequence, which the parser
    and the BlockBuilder bind to a variable first. A tuple counts when its fields are leaves."""
    return not isinstance(expr, (Call, TupleGetItem, If, SeqExpr))


def struct_info_of(expr) -> StructInfo:
    """The struct info of an expression (Object when nothing is known)."""
    sinfo = getattr(expr, "struct_info", None)
    if sinfo is None:
        if isinstance(expr, GlobalVar):
            return ObjectStructInfo()
        return ObjectStructInfo()
    return sinfo


def default_const_array(value):
    """The array of ``R.const(value)`` with no dtype: NumPy's, except that Python floats become
    float32 and ints int32, TVM's defaults."""
    import numpy as np

    array = np.array(value)
    if array.dtype == np.float64:
        return array.astype("float32")
    if array.dtype == np.int64:
        return array.astype("int32")
    return array


def tensor_sinfo(shape, dtype: str) -> TensorStructInfo:
    """``R.Tensor(shape, dtype)`` with Python ints turned into int64 dims."""
    dims = [tir.IntImm("int64", d) if isinstance(d, int) else d for d in shape]
    return TensorStructInfo(dims, dtype)
