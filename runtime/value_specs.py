"""What the VM checks a value against, as plain data: the annotations (struct infos) of a
Relax function's parameters, of an ``R.match_cast``, of an ``R.call_packed`` result.

The VM runs without the IR: the compiler translates each struct info it needs at run time
into a spec (`compiler.vm_specs`), and the VM's checks (`runtime.value_checks`) read only
these. A spec's ``text`` is the struct info as the program writes it (the printer's text,
made when compiling), for error messages.

A dimension (of a tensor's shape, a shape value, a prim value) is an ``int`` or ``bool`` (a
constant), a ``str`` (a symbolic dim, by name) or a `DimExpr` (an expression over symbolic
dims). `eval_dim` computes one from the values bound so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["DimExpr", "eval_dim", "dim_text", "free_names", "AnySpec", "TensorSpec", "TupleSpec", "ShapeSpec",
           "PrimSpec", "FuncSpec"]


@dataclass(frozen=True)
class DimExpr:
    """``op`` applied to ``args`` (dimensions themselves): ``"+"``, ``"//"``, ``"min"``,
    ``"select"`` (condition, then, else), ``"float"`` (a cast), ``"const"`` (a float
    constant)... as `eval_dim` reads them. An op it does not know is the name of an expression
    the compiler could not translate, which cannot be evaluated. ``text``: how the program
    writes the expression (set on the outermost one)."""

    op: str
    args: tuple
    text: str = ""


def _truncdiv(a, b):
    """TIR's Div: truncating for integers, true division otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
    "%": lambda a, b: a % b, "min": min, "max": max, "/": _truncdiv,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "and": lambda a, b: a and b, "or": lambda a, b: a or b,
}
_CASTS = {"float": float, "bool": bool, "int": int}


def eval_dim(dim, env: dict):
    """The value of ``dim`` over the symbolic dims in ``env`` (a KeyError naming the first
    one missing; a ValueError for an expression that cannot be evaluated)."""
    if isinstance(dim, (int, float)):
        return dim
    if isinstance(dim, str):
        return env[dim]
    op, args = dim.op, dim.args
    binary = _BINARY.get(op)
    if binary is not None:
        return binary(eval_dim(args[0], env), eval_dim(args[1], env))
    if op == "not":
        return not eval_dim(args[0], env)
    cast = _CASTS.get(op)
    if cast is not None:
        return cast(eval_dim(args[0], env))
    if op == "select":
        return eval_dim(args[1], env) if eval_dim(args[0], env) else eval_dim(args[2], env)
    if op == "const":
        return args[0]
    raise ValueError(f"cannot evaluate {op} in a shape")


def dim_text(dim) -> str:
    """``dim`` as the program writes it."""
    return dim.text if isinstance(dim, DimExpr) else str(dim)


def free_names(dim) -> set:
    """The names of the symbolic dims ``dim`` uses."""
    if isinstance(dim, str):
        return {dim}
    out: set = set()
    if isinstance(dim, DimExpr):
        for arg in dim.args:
            out |= free_names(arg)
    return out


# ----------------------------------------------------------------------------- specs


@dataclass(frozen=True, eq=False)
class AnySpec:
    """``R.Object``, or an annotation the VM does not check: any value fits."""

    text: str


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """``R.Tensor(shape, dtype)``: ``dtype`` "" and ``ndim`` -1 when unknown, ``shape`` a
    tuple of dimensions, or None when unknown."""

    text: str
    dtype: str
    ndim: int
    shape: Optional[tuple]


@dataclass(frozen=True, eq=False)
class TupleSpec:
    """``R.Tuple(...)``: one spec per field."""

    text: str
    fields: tuple


@dataclass(frozen=True, eq=False)
class ShapeSpec:
    """``R.Shape(...)``: ``ndim`` -1 when unknown, ``values`` a tuple of dimensions or None."""

    text: str
    ndim: int
    values: Optional[tuple]


@dataclass(frozen=True, eq=False)
class PrimSpec:
    """``R.Prim(dtype)``, with its ``value`` (a dimension) when the annotation gives one."""

    text: str
    dtype: str
    value: object = None


@dataclass(frozen=True, eq=False)
class FuncSpec:
    """``R.Callable(...)``: any function."""

    text: str

