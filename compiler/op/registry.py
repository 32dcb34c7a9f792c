"""The operator registry: one declaration per Relax op.

An `OpDef` says everything the toolchain knows about an op, in one place: its TVMScript name
(``R.add``), its tensor arguments, its keyword attributes with defaults and validation, how to
infer the struct info of a call, and (filled in by later stages) how to legalize it into
TensorIR and which fusion pattern it has. The parser, printer and passes all read this table,
so adding an op is one `register_op` call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class OpDef:
    name: str                     # registry name, "relax.add"
    args: tuple                   # names of the tensor (expression) arguments
    infer: Callable               # (arg struct infos, attrs) -> StructInfo
    attrs: tuple = ()             # Attr declarations, in printing order
    pattern: str = "opaque"       # fusion pattern kind (elementwise, broadcast, injective, ...)
    legalize: Optional[Callable] = None

    @property
    def script_name(self) -> str:
        return "R." + self.name[len("relax."):]


_OPS: dict[str, OpDef] = {}


def register_op(name: str, args, infer, attrs=(), pattern: str = "opaque") -> OpDef:
    full = name if name.startswith("relax.") else "relax." + name
    if full in _OPS:
        raise ValueError(f"op {full} registered twice")
    op = OpDef(full, tuple(args), infer, tuple(attrs), pattern)
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
