"""Syntax tree to IR: the part of the parser that knows what TVMScript means.

`build` walks the top-level statements: an ``@I.ir_module`` class becomes an `IRModule`, an
``@R.function`` a `relax.Function`, a ``@T.prim_func`` a `tir.PrimFunc`. The dialect-specific work
is in `tir_builder.py` and `relax_builder.py`; this file holds what they share: scopes, dotted
callee names (with the spellings of older and newer TVM versions mapped onto the classic ones),
argument checking, comment attachment and module assembly.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .. import ir, relax, tir
from ..diagnostics import Span, TVMScriptError
from . import ast

# Spellings of other TVMScript generations, mapped to the classic names the builder dispatches
# on. Older TVM (seeds 002/004) wrote `tvm.script.ir_module` and `relax.add`; TVM 0.25+ writes
# `T.sblock` and `tirx`. Everything prints in the classic dialect.
CALLEE_ALIASES = {
    "tvm.script.ir_module": "I.ir_module",
    "tvm.script.ir.ir_module": "I.ir_module",
    "ir_module": "I.ir_module",
    "I.ir_module": "I.ir_module",
    "T.sblock": "T.block",
    "T.sblock_alloc_buffer": "T.alloc_buffer",
    "T.sblock_attr": "T.block_attr",
    "Tensor": "R.Tensor",
    "Tuple": "R.Tuple",
    "Shape": "R.Shape",
    "Object": "R.Object",
    "R.Any": "R.Object",
    "T.serial": "T.serial",
}

PREFIX_ALIASES = {"tir": "T", "tirx": "T", "relax": "R", "ir": "I"}


def dotted_name(node) -> str | None:
    """``T.axis.remap`` for the callee of ``T.axis.remap(...)``; None if not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    if parts[0] in PREFIX_ALIASES and len(parts) > 1:
        parts[0] = PREFIX_ALIASES[parts[0]]
    name = ".".join(parts)
    return CALLEE_ALIASES.get(name, name)


class Scope:
    """Nested name scopes: a chain of dicts, innermost last."""

    __slots__ = ("frames",)

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = [{}]

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> dict:
        return self.frames.pop()

    def define(self, name: str, value: Any) -> None:
        self.frames[-1][name] = value

    def lookup(self, name: str, default=None):
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        return default


class Context:
    """What a builder needs while it works: file name, source, comments, error helpers."""

    def __init__(self, source: str, filename: str, comments: list[ast.Comment]) -> None:
        self.source = source
        self.filename = filename
        self.comments = comments
        self._comment_index = 0
        self.module_names: dict[str, ir.GlobalVar] = {}
        self.module_kinds: dict[str, str] = {}
        self.type_vars: dict[str, tir.Var] = {}

    # ---- errors
    def span(self, node) -> Span:
        if node is None or not getattr(node, "line", 0):
            return Span(self.filename, 1, 1, 1, 1)
        return Span(self.filename, node.line, node.col, node.end_line, node.end_col)

    def error(self, message: str, node, notes: list[str] | None = None) -> TVMScriptError:
        return TVMScriptError(message, self.span(node), notes)

    # ---- comments
    def take_comments(self, stmts: list[ast.Stmt]) -> None:
        """Hand each comment to the statement it belongs to (see `attach_comments`)."""
        attach_comments(stmts, self.comments)


def attach_comments(stmts: list[ast.Stmt], comments: list[ast.Comment]) -> list[ast.Comment]:
    """Attach comments to statements: a comment on its own line goes to the statement that
    follows it; a comment after code goes to the statement on that line. Comments after the last
    statement of a body are returned so the caller can keep them too."""
    flat: list[ast.Stmt] = []

    def walk(body):
        for s in body:
            flat.append(s)
            for sub in _bodies(s):
                walk(sub)

    walk(stmts)
    starts = sorted(((ast.header_line(s), i) for i, s in enumerate(flat)))
    leftovers: list[ast.Comment] = []
    si = 0
    # For trailing comments: map each header line to its statement.
    by_line = {}
    for s in flat:
        by_line.setdefault(s.end_line if not _bodies(s) else s.line, s)
    for c in comments:
        owner = by_line.get(c.line)
        if owner is not None and owner.line <= c.line and not _own_line(c, owner):
            if owner.trailing is None:
                owner.trailing = c.text
                continue
        while si < len(starts) and starts[si][0] <= c.line:
            si += 1
        if si < len(starts):
            flat[starts[si][1]].comments.append(c.text)
        else:
            leftovers.append(c)
    return leftovers


def _own_line(comment: ast.Comment, owner: ast.Stmt) -> bool:
    return comment.line > owner.line and comment.line > owner.end_line


def _bodies(s: ast.Stmt) -> list:
    if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.For, ast.With, ast.While)):
        return [s.body]
    if isinstance(s, ast.If):
        return [s.body, s.orelse]
    return []


def comments_of(stmt: ast.Stmt) -> ir.Comments | None:
    if not stmt.comments and stmt.trailing is None:
        return None
    return ir.Comments(list(stmt.comments), stmt.trailing)


def merge_comments(table: dict, node, extra: ir.Comments | None) -> None:
    """Record comments for an IR node, merging with any it already has."""
    if extra is None:
        return
    have = table.get(node)
    if have is None:
        table[node] = ir.Comments(list(extra.before), extra.trailing, list(extra.after))
    else:
        have.before.extend(extra.before)
        if extra.trailing:
            have.trailing = (have.trailing + "  " + extra.trailing) if have.trailing else extra.trailing
        have.after.extend(extra.after)


# ----------------------------------------------------------------------------- literals


def literal(ctx: Context, node) -> Any:
    """Evaluate a Python literal: numbers, strings, True/False/None, tuples, lists, dicts."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id == "True":
            return True
        if node.id == "False":
            return False
        if node.id == "None":
            return None
    if isinstance(node, ast.UnaryOp) and node.op == "-" and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [literal(ctx, e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = literal(ctx, k)
            if isinstance(key, (list, dict)):
                raise ctx.error("a dict key must be a string or a number", k)
            out[key] = literal(ctx, v)
        return out
    raise ctx.error("expected a literal value", node)


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


# ----------------------------------------------------------------------------- entry point


def build(stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str):
    """Build the IR for a whole file: an IRModule, or a single function."""
    try:
        return _build(stmts, comments, source, filename)
    except RecursionError:
        # Building recurses on the syntax tree; only absurdly deep expressions get here.
        where = _deepest_statement(stmts)
        raise Context(source, filename, []).error("expression nested too deeply", where) from None


def _deepest_statement(stmts: list[ast.Stmt]):
    """The statement holding the most deeply nested expression (found without recursion)."""
    best, best_depth = None, -1
    todo = [(s, 0, s) for s in stmts]
    while todo:
        node, depth, stmt = todo.pop()
        if isinstance(node, ast.Stmt):
            stmt = node
        if depth > best_depth:
            best, best_depth = stmt, depth
        for cls in type(node).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                child = getattr(node, slot, None)
                for c in child if isinstance(child, list) else (child,):
                    if isinstance(c, ast.Node):
                        todo.append((c, depth + 1, stmt))
    return best


def _build(stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str):
    from .relax_builder import RelaxFunctionBuilder
    from .tir_builder import PrimFuncBuilder

    header = _source_header(stmts, comments)
    comments = [c for c in comments if not is_printer_artifact(c.text)]
    ctx = Context(source, filename, comments)
    leftovers = attach_comments(stmts, comments)

    items = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and _is_type_var(stmt):
            name = stmt.target.id
            ctx.type_vars[name] = tir.Var("int64", name)
            continue
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
            items.append(stmt)
            continue
        if isinstance(stmt, ast.Pass):
            continue
        raise ctx.error(
            "expected an @I.ir_module class, an @R.function or a @T.prim_func at the top level", stmt
        )
    if not items:
        raise TVMScriptError("no @I.ir_module, @R.function or @T.prim_func found", Span(filename, 1, 1, 1, 1))
    if len(items) > 1:
        raise ctx.error("a file holds one module or one function; found another definition", items[1])
    item = items[0]
    if isinstance(item, ast.ClassDef):
        result = _build_module(ctx, item, PrimFuncBuilder, RelaxFunctionBuilder)
        result.source_header = header
        if leftovers:
            merge_comments(result.comments, result, ir.Comments(after=[c.text for c in leftovers]))
        return result
    kind = function_kind(ctx, item)
    builder = PrimFuncBuilder if kind == "tir" else RelaxFunctionBuilder
    func = builder(ctx).build(item)
    if leftovers:
        merge_comments(func.comments, func, ir.Comments(after=[c.text for c in leftovers]))
    return func


def _is_type_var(stmt: ast.Assign) -> bool:
    v = stmt.value
    return (
        isinstance(stmt.target, ast.Name)
        and isinstance(v, ast.Call)
        and dotted_name(v.func) == "TypeVar"
    )


HEADER_PREFIX = "# from tvm.script import "
_ARTIFACT = re.compile(
    r'# from tvm\.script import \w+ as \w+|# from typing import TypeVar|# from tvm\.tirx?\.layout import Axis'
    r'|# with T\.s?block\("root"\):?|# function attr dict|# body|# block \d+'
)


def is_printer_artifact(text: str) -> bool:
    """Comments TVM's printers write themselves (dialect imports, the root-block comment, old
    section markers). The printer regenerates what is still true of them, so they are not kept
    as user comments; every other comment is."""
    return _ARTIFACT.fullmatch(text.rstrip()) is not None


def _source_header(stmts, comments) -> list[str] | None:
    """The ``# from tvm.script import X as Y`` lines at the top of the file, if any."""
    first_line = ast.header_line(stmts[0]) if stmts else 10**9
    lines = [c.text for c in comments if c.line < first_line and c.text.startswith(HEADER_PREFIX)]
    return lines or None


def function_kind(ctx: Context, fdef: ast.FunctionDef) -> str:
    for dec in fdef.decorators:
        name = dotted_name(dec.func if isinstance(dec, ast.Call) else dec)
        if name == "T.prim_func":
            return "tir"
        if name == "R.function":
            return "relax"
    if fdef.decorators:
        raise ctx.error("unknown decorator: expected @T.prim_func or @R.function", fdef.decorators[0])
    raise ctx.error(f"function '{fdef.name}' needs a @T.prim_func or @R.function decorator", fdef)


def _build_module(ctx: Context, cdef: ast.ClassDef, prim_builder, relax_builder) -> ir.IRModule:
    if not any(
        dotted_name(d.func if isinstance(d, ast.Call) else d) == "I.ir_module" for d in cdef.decorators
    ):
        raise ctx.error(f"class '{cdef.name}' needs the @I.ir_module decorator", cdef)
    mod = ir.IRModule()
    mod.name = cdef.name
    merge_comments(mod.comments, mod, comments_of(cdef))
    funcs = []
    for stmt in cdef.body:
        if isinstance(stmt, ast.FunctionDef):
            kind = function_kind(ctx, stmt)
            if stmt.name in ctx.module_names:
                first = next(f for _, _, f in funcs if f.name == stmt.name)
                raise ctx.error(
                    f"duplicate function name '{stmt.name}' in module", stmt,
                    [f"'{stmt.name}' is first defined on line {first.line}"],
                )
            gv = ir.GlobalVar(stmt.name)
            ctx.module_names[stmt.name] = gv
            ctx.module_kinds[stmt.name] = kind
            funcs.append((gv, kind, stmt))
        elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "I.module_attrs":
            args = bind_arguments(ctx, stmt.value, "I.module_attrs", ["attrs"])
            mod.attrs.update(literal(ctx, args["attrs"]))
        elif isinstance(stmt, ast.Pass):
            continue
        else:
            raise ctx.error("expected a function definition inside the module class", stmt)
    ctx.class_name = cdef.name
    # Prim funcs first, so Relax functions can see their signatures.
    for gv, kind, stmt in sorted(funcs, key=lambda f: f[1] != "tir"):
        builder = prim_builder if kind == "tir" else relax_builder
        func = builder(ctx).build(stmt)
        mod[gv] = func
    # Keep the source order of functions (the printer sorts them canonically).
    ordered = ir.IRModule()
    for gv, _, _ in funcs:
        ordered[gv] = mod[gv]
    mod.functions = ordered.functions
    mod._by_name = ordered._by_name
    return mod
