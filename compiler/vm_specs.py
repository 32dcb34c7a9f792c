"""Struct infos as the VM checks them: the `runtime.value_specs` the compiler makes of them.

The VM does not know the IR. What it must check at run time about a value (a Relax function's
parameter, an ``R.match_cast``, an ``R.call_packed`` result) the VM's code generator hands it
as a spec made here: the struct info's kind, dtype and rank, its dimensions translated from
TIR expressions (`dim_spec`), and its text as the program writes it, for the messages.
"""

from __future__ import annotations

from tvmscript.ir import relax, tir
from tvmscript.runtime.value_specs import AnySpec, DimExpr, FuncSpec, PrimSpec, ShapeSpec, TensorSpec, TupleSpec

__all__ = ["value_spec", "dim_spec", "dim_text", "annotation_text"]


def annotation_text(sinfo) -> str:
    """``sinfo`` as the program writes it (``R.Tensor((n, 4), dtype="float32")``)."""
    from tvmscript.printer import sinfo_text

    try:
        return sinfo_text(sinfo)
    except Exception:  # pragma: no cover - printing must never hide the real error
        return type(sinfo).__name__


def value_spec(sinfo):
    """The spec the VM checks a value of struct info ``sinfo`` against."""
    text = annotation_text(sinfo)
    if isinstance(sinfo, relax.TensorStructInfo):
        shape = None if sinfo.shape is None else tuple(dim_spec(d) for d in sinfo.shape)
        return TensorSpec(text, sinfo.dtype, sinfo.ndim, shape)
    if isinstance(sinfo, relax.TupleStructInfo):
        return TupleSpec(text, tuple(value_spec(f) for f in sinfo.fields))
    if isinstance(sinfo, relax.ShapeStructInfo):
        values = None if sinfo.values is None else tuple(dim_spec(d) for d in sinfo.values)
        return ShapeSpec(text, sinfo.ndim, values)
    if isinstance(sinfo, relax.PrimStructInfo):
        return PrimSpec(text, sinfo.dtype, None if sinfo.value is None else dim_spec(sinfo.value))
    if isinstance(sinfo, relax.FuncStructInfo):
        return FuncSpec(text)
    return AnySpec(text)  # R.Object, no struct info, or one the VM does not check


def dim_text(e) -> str:
    """A TIR expression (a dimension) as the program writes it."""
    if isinstance(e, tir.IntImm):
        return str(e.value)
    if isinstance(e, tir.Var):
        return e.name
    try:
        from tvmscript.printer import to_script

        return to_script(e)
    except Exception:  # pragma: no cover
        return type(e).__name__


_BINARY = {
    tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.FloorDiv: "//", tir.FloorMod: "%", tir.Min: "min", tir.Max: "max",
    tir.Div: "/", tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">=",
    tir.And: "and", tir.Or: "or",
}
# The parts of an expression `dim_spec` cannot translate, kept for the names they use.
_PARTS = ("a", "b", "value", "condition", "true_value", "false_value")


def dim_spec(e):
    """A TIR expression as a `runtime.value_specs` dimension: an int (a bool for a boolean
    constant) for a constant, a str for a symbolic dim, a `DimExpr` for anything else (with
    the expression's text)."""
    if isinstance(e, tir.IntImm):
        return bool(e.value) if e.dtype == "bool" else int(e.value)
    if isinstance(e, tir.Var):
        return e.name
    return _expr(e, dim_text(e))


def _expr(e, text: str = ""):
    if isinstance(e, tir.IntImm) or isinstance(e, tir.Var):
        return dim_spec(e)
    if isinstance(e, tir.FloatImm):
        return DimExpr("const", (float(e.value),), text)
    op = _BINARY.get(type(e))
    if op is not None:
        return DimExpr(op, (_expr(e.a), _expr(e.b)), text)
    if isinstance(e, tir.Not):
        return DimExpr("not", (_expr(e.a),), text)
    if isinstance(e, tir.Cast):
        cast = "float" if tir.is_float(e.dtype) else ("bool" if e.dtype == "bool" else "int")
        return DimExpr(cast, (_expr(e.value),), text)
    if isinstance(e, tir.Select):
        return DimExpr("select", (_expr(e.condition), _expr(e.true_value), _expr(e.false_value)), text)
    # Not evaluable at run time (`runtime.value_specs.eval_dim` says so, naming it).
    parts = tuple(_expr(p) for p in (getattr(e, f, None) for f in _PARTS) if isinstance(p, tir.PrimExpr))
    return DimExpr(type(e).__name__, parts, text)
