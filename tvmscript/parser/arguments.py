"""What the builders read from a call, whatever its dialect: the callee's dotted name (with the
spellings of older and newer TVM versions mapped onto the classic ones), its arguments bound to
parameter names (`bind_arguments`), and literal values (`literal`), which may come from the
Python scope around TVMScript written in Python.
"""

from __future__ import annotations

from typing import Any

from . import ast
from .context import Context

# ----------------------------------------------------------------------------- callee names

# Spellings of other TVMScript generations, mapped to the classic names the builder dispatches
# on. Older TVM (seeds 002/004) wrote `tvm.script.ir_module` and `relax.add`; TVM 0.25+ writes
# `T.sblock` and `tirx`. Everything prints in the classic dialect.
CALLEE_ALIASES = {
    "tvm.script.ir_module": "I.ir_module",
    "tvm.script.ir.ir_module": "I.ir_module",
    "ir_module": "I.ir_module",
    "I.ir_module": "I.ir_module",
    "tvms.script.ir_module": "I.ir_module",
    "tvmscript.script.ir_module": "I.ir_module",
    "script.ir_module": "I.ir_module",
    "tvms.script.tir.prim_func": "T.prim_func",
    "tvmscript.script.tir.prim_func": "T.prim_func",
    "tvms.script.relax.function": "R.function",
    "tvmscript.script.relax.function": "R.function",
    "T.sblock": "T.block",
    "T.sblock_alloc_buffer": "T.alloc_buffer",
    "T.sblock_attr": "T.block_attr",
    "Tensor": "R.Tensor",
    "Tuple": "R.Tuple",
    "Shape": "R.Shape",
    "Object": "R.Object",
    "R.Any": "R.Object",
    "T.serial": "T.serial",
    "T.buffer": "T.Buffer",  # TVM's lowercase spelling of the parameter annotation
}

PREFIX_ALIASES = {"tir": "T", "tirx": "T", "relax": "R", "ir": "I"}


def attribute_chain(node) -> list | None:
    """``["T", "axis", "remap"]`` for the expression ``T.axis.remap``, as written; None if it
    is not a name followed by attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def dotted_name(node) -> str | None:
    """``T.axis.remap`` for the callee of ``T.axis.remap(...)``, aliases resolved; None if
    not a dotted name."""
    parts = attribute_chain(node)
    if parts is None:
        return None
    if parts[0] in PREFIX_ALIASES and len(parts) > 1:
        parts[0] = PREFIX_ALIASES[parts[0]]
    name = ".".join(parts)
    return CALLEE_ALIASES.get(name, name)


# ----------------------------------------------------------------------------- literals

_MISSING = object()


def _is_python_literal(value) -> bool:
    """A Python value TVMScript could have written as a literal (a number, a string, or a
    tuple/list of them): what a name from the Python scope may stand for in `literal`."""
    if isinstance(value, (tuple, list)):
        return all(_is_python_literal(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def literal(ctx: Context, node, other=None) -> Any:
    """Evaluate a Python literal: numbers, strings, True/False/None, tuples, lists, dicts.

    ``other(node)``, if given, is the value of a node that is none of these, at any depth (what
    a reference into the metadata section stands for, in ``R.func_attr``); it raises if the
    node means nothing to it either."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id == "True":
            return True
        if node.id == "False":
            return False
        if node.id == "None":
            return None
        value = ctx.py_value(node.id, _MISSING)
        if value is not _MISSING and _is_python_literal(value):
            return _as_literal(value)
    if isinstance(node, ast.UnaryOp) and node.op in ("-", "+") and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            return -value if node.op == "-" else value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [literal(ctx, e, other) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = literal(ctx, k)
            if isinstance(key, (list, dict)):
                raise ctx.error("a dict key must be a string or a number", k)
            out[key] = literal(ctx, v, other)
        return out
    if other is not None:
        return other(node)
    raise ctx.error("expected a literal value", node)


def _as_literal(value):
    """A Python value in the shape `literal` returns (sequences as lists)."""
    if isinstance(value, (tuple, list)):
        return [_as_literal(v) for v in value]
    return value


# ----------------------------------------------------------------------------- arguments


def bind_arguments(
    ctx: Context, call: ast.Call, name: str, params: list[str], defaults: dict | None = None
) -> dict[str, Any]:
    """Match a call's arguments to parameter names; error on unknown or missing ones.

    ``params`` lists the parameter names in order; a name ending in ``*`` takes the remaining
    positional arguments as a list. Missing parameters take ``defaults`` or are an error."""
    defaults = defaults or {}
    bound: dict[str, Any] = {}
    positional = list(call.args)
    plain = [p for p in params if not p.endswith("*")]
    star = next((p[:-1] for p in params if p.endswith("*")), None)
    for p in params:
        if p.endswith("*"):
            bound[p[:-1]] = positional
            positional = []
            break
        if not positional:
            break
        bound[p] = positional.pop(0)
    if positional:
        raise ctx.error(
            f"{name}() takes {len(plain)} positional argument{'s' if len(plain) != 1 else ''} but "
            f"{len(call.args)} were given",
            positional[0],
        )
    for kw in call.keywords:
        if kw.arg not in plain:
            raise ctx.error(f"{name}() got an unexpected keyword argument '{kw.arg}'", kw)
        if kw.arg in bound:
            raise ctx.error(f"{name}() got multiple values for argument '{kw.arg}'", kw)
        bound[kw.arg] = kw.value
    for p in plain:
        if p not in bound:
            if p in defaults:
                bound[p] = defaults[p]
            else:
                raise ctx.error(f"{name}() missing required argument '{p}'", call)
    if star and star not in bound:
        bound[star] = []
    return bound


def split_declarations(ctx: Context, stmt: ast.Assign, is_declaration) -> list[ast.Assign] | None:
    """``m, n = T.int64(), T.int64()``: a tuple of fresh variable declarations, as one
    assignment per name; None when ``stmt`` is not that (``is_declaration(value)`` tells a
    declaration). A count mismatch is an error."""
    target, value = stmt.target, stmt.value
    if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)):
        return None
    if not all(is_declaration(v) for v in value.elts):
        return None
    if len(target.elts) != len(value.elts):
        raise ctx.error(f"{len(target.elts)} names but {len(value.elts)} declarations", stmt)
    for t in target.elts:
        if not isinstance(t, ast.Name):
            raise ctx.error("expected a variable name", t)
    return [ast.Assign(t, v, t.line, t.col, v.end_line, v.end_col) for t, v in zip(target.elts, value.elts)]
