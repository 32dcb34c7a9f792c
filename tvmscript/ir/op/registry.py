"""The operator registry: one declaration per Relax op.

An `OpDef` says everything the IR knows about an op, in one place: its TVMScript name
(``R.add``), its tensor arguments, its keyword attributes with defaults and validation, how to
infer the struct info of a call, and which fusion pattern its legalized PrimFunc has. The
parser, printer and passes all read this table, so declaring an op is one `register_op` call.
How to legalize it into TensorIR is attached later by the compiler (``compiler/op``:
``register_legalize``), as TVM registers ``FLegalize`` as an attribute of the op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


class OpError(Exception):
    """A user error in an op call (bad attribute, incompatible shapes). The parser reports it at
    the call's location; ``arg`` names the argument or attribute at fault, when one is."""

    def __init__(self, message: str, arg: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.arg = arg


@dataclass(frozen=True)
class Attr:
    """A keyword attribute: its name, default, and a function validating/normalizing a value."""

    name: str
    default: Any = None
    convert: Optional[Callable[[Any], Any]] = None


ARG_KINDS = ("tensor", "tensors", "shape", "prim", "prims", "expr")


@dataclass(frozen=True)
class Arg:
    """A positional (expression) argument of an op, printed before the attributes.

    ``kind`` says what the argument holds and how plain values are turned into Relax
    expressions, by the parser and by ``relax.op.*`` alike (see ``op/api.py: coerce_arg``):

    - ``tensor``: a tensor expression (the default); Python numbers/arrays become ``R.const``;
    - ``tensors``: a tuple of tensors (``R.concat((a, b))``);
    - ``shape``: ``R.shape([2, 3])``; a tuple/list of ints or PrimExprs becomes one;
    - ``prim``: ``R.prim_value(0)``; a number or PrimExpr becomes one;
    - ``prims``: a tuple of prim values (``R.strided_slice``'s axes/begin/end);
    - ``expr``: any Relax expression, as written.

    An ``optional`` argument may be left out (``R.strided_slice``'s strides, ``linear``'s bias);
    the call then has fewer arguments and ``infer`` gets ``None`` in its place.
    """

    name: str
    kind: str = "tensor"
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"unknown argument kind {self.kind!r}")


@dataclass
class OpDef:
    """Everything known about one op.

    ``infer(arg_sinfos, attrs)`` returns the call's struct info (``OpError`` for bad calls);
    ``pattern`` is the fusion pattern kind the op's legalized PrimFunc has (elementwise,
    broadcast, injective, reduce, out_ewise_fusable, opaque); ``legalize(bb, call)``, attached
    by the compiler (``compiler/op``), returns the expression replacing the call after
    LegalizeOps (usually ``bb.call_te(topi_fn, ...)``), or None to leave it. An op the compiler
    attaches none to stays as it is."""

    name: str                     # registry name, "relax.add"
    params: tuple                 # Arg declarations of the expression arguments
    infer: Callable               # (arg struct infos, attrs) -> StructInfo
    attrs: tuple = ()             # Attr declarations, in printing order
    pattern: str = "opaque"       # fusion pattern kind (elementwise, broadcast, injective, ...)
    legalize: Optional[Callable] = None  # attached by compiler/op (register_legalize)
    # (args, attrs) -> (args, attrs): the call's canonical arguments, run after they are coerced
    # and the attrs converted, before ``infer`` (``arange(5)`` -> ``arange(0, 5, 1)``, reshape's
    # -1 resolved); it must be idempotent. Args are expressions (None for a missing optional).
    canonicalize: Optional[Callable] = None
    # The parameter order of the Python function ``relax.op.X`` (argument and attribute names),
    # when TVM's Python signature orders them differently from the printed attributes
    # (``nn.pad(data, pad_width, pad_mode, pad_value)`` prints ``pad_value`` before ``pad_mode``).
    py_signature: Optional[tuple] = None
    # (bound Python arguments by name) -> the name of another op to call instead, or None: TVM's
    # Python helpers that pick an op from their arguments (``nn.attention`` given a bias builds
    # ``nn.attention_bias``). Only ``relax.op.X`` consults it; text names its op itself.
    dispatch: Optional[Callable] = None

    @property
    def args(self) -> tuple:
        """Names of the expression arguments."""
        return tuple(a.name for a in self.params)

    @property
    def script_name(self) -> str:
        return "R." + self.name[len("relax."):]


_OPS: dict[str, OpDef] = {}


PATTERNS = ("elementwise", "broadcast", "injective", "reduce", "out_ewise_fusable", "opaque")


def register_op(name: str, args, infer, attrs=(), pattern: str = "opaque", canonicalize: Optional[Callable] = None,
                py_signature: Optional[tuple] = None, dispatch: Optional[Callable] = None) -> OpDef:
    """Declare an op. ``args`` are `Arg`s or plain names (tensor arguments)."""
    full = name if name.startswith("relax.") else "relax." + name
    if full in _OPS:
        raise ValueError(f"op {full} registered twice")
    if pattern not in PATTERNS:
        raise ValueError(f"op {full}: unknown fusion pattern {pattern!r}")
    params = tuple(a if isinstance(a, Arg) else Arg(a) for a in args)
    if py_signature is not None and sorted(py_signature) != sorted([a.name for a in params] + [a.name for a in attrs]):
        raise ValueError(f"op {full}: py_signature {py_signature} must name each argument and attribute once")
    op = OpDef(full, params, infer, tuple(attrs), pattern, None, canonicalize,
               tuple(py_signature) if py_signature is not None else None, dispatch)
    _OPS[full] = op
    return op


def get_op(name: str) -> OpDef:
    """The op for ``relax.add``/``R.add``/``add``; KeyError if there is none."""
    if name.startswith("R."):
        name = "relax." + name[2:]
    elif not name.startswith("relax."):
        name = "relax." + name
    return _OPS[name]


def find_op(name: str) -> OpDef | None:
    try:
        return get_op(name)
    except KeyError:
        return None


def all_ops() -> dict[str, OpDef]:
    return dict(_OPS)
