"""Syntax tree to IR: the part of the parser that knows what TVMScript means.

`build` walks the top-level statements: an ``@I.ir_module`` class becomes an `IRModule`, an
``@R.function`` a `relax.Function`, a ``@T.prim_func`` a `tir.PrimFunc`. The dialect-specific work
is in `tir_builder.py` and `relax_builder.py`; this file holds what they share: scopes, dotted
callee names (with the spellings of older and newer TVM versions mapped onto the classic ones),
argument checking, comment attachment and module assembly.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Callable

from .. import ir
from ..ir import relax, tir
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


# How deeply a program may nest (a 900-term sum is a 900-deep Add chain). Deeper programs are
# refused here with a diagnostic; ``import tvmscript`` raises Python's recursion limit so that
# every later stage (passes, printer, pickling, code generation) has room for this depth.
MAX_NESTING = 1000


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
        self._lines: list[str] | None = None
        self.module_names: dict[str, ir.GlobalVar] = {}
        self.module_kinds: dict[str, str] = {}
        self.module_defs: dict[str, Any] = {}  # each module function's definition (its signature)
        self.prim_funcs: dict[str, Any] = {}  # the module's prim_funcs built so far, by name
        # What a call of each Relax function returns (see `_build_module`).
        self.relax_signatures: dict[str, Any] = {}
        self.type_vars: dict[str, tir.Var] = {}
        self.metadata: dict[str, list] = {}  # the file's metadata section (large constants)
        self.class_name: str | None = None  # the @I.ir_module class being built
        self.global_infos: dict = {}  # the module's I.module_global_infos (R.Tensor's "vdevice:i")
        # Names of the Python scope around TVMScript written inside Python (tvmscript/script.py),
        # consulted only where a name is otherwise undefined; None for a .tvms file.
        self.py_scope: dict[str, Any] | None = None
        self.col_offset = 0  # the indentation removed from TVMScript inside Python

    def py_value(self, name: str, default=None):
        """The value of ``name`` in the enclosing Python scope, or ``default`` (always, for
        TVMScript text, which has no Python scope)."""
        if self.py_scope is None:
            return default
        value = self.py_scope.get(name, default)
        if isinstance(value, tir.Var) and value.name == "":
            value.name = name  # ``n = T.int64()`` in Python: the variable takes its Python name
        return value

    def py_prim(self, name: str):
        """A Python-scope name as TIR sees it: a PrimExpr or buffer as is, a number as a
        constant (an int as TVMScript's own literals type it); None if it is neither."""
        return self.py_prim_of(self.py_value(name))

    @staticmethod
    def py_prim_of(value):
        """`py_prim` of a Python value."""
        if isinstance(value, (tir.PrimExpr, tir.Buffer)):
            return value
        if isinstance(value, bool):
            return tir.IntImm("bool", int(value))
        if isinstance(value, int):
            return tir.IntImm("int32" if -(2**31) <= value < 2**31 else "int64", value)
        if isinstance(value, float):
            return tir.FloatImm("float32", value)
        return None

    def is_module_ref(self, node) -> bool:
        """``cls`` or the module class's own name (``Expected.fused_add`` inside ``class
        Expected``, which TVM's tests write): both mean the module being built."""
        return isinstance(node, ast.Name) and (
            node.id == "cls" or (self.class_name is not None and node.id == self.class_name)
        )

    # ---- errors
    def span(self, node) -> Span:
        """The place of ``node`` that the IR keeps: in the user's file (TVMScript inside Python
        is parsed dedented, so its columns move back by `col_offset`)."""
        if node is None or not getattr(node, "line", 0):
            return Span(self.filename, 1, 1, 1, 1)
        off = self.col_offset
        return Span(self.filename, node.line, node.col + off, node.end_line, node.end_col + off)

    def error_span(self, node) -> Span:
        """`span`, made exact for a diagnostic's caret (this reads the source, so it is kept
        off the paths that build IR)."""
        if node is None or not getattr(node, "line", 0):
            return Span(self.filename, 1, 1, 1, 1)
        line, col, end_line, end_col = node.line, node.col, node.end_line, node.end_col
        # The syntax tree does not keep bracket tokens: a call, subscript, list or dict ends at
        # its closing bracket, and a list, dict or parenthesized tuple starts at its opening one.
        try:
            if isinstance(node, (ast.List, ast.Dict)) or (isinstance(node, ast.Tuple) and node.parenthesized):
                opened = _before(self.lines, line, col, "([{")
                if opened is not None:
                    line, col = opened
                    end_line, end_col = _matching(self.lines, line, col)
            elif isinstance(node, (ast.Call, ast.Subscript)):
                head = node.func if isinstance(node, ast.Call) else node.value
                opened = _after(self.lines, head.end_line, head.end_col, "([")
                if opened is not None:
                    end_line, end_col = _matching(self.lines, *opened)
        except (IndexError, ValueError):
            pass  # keep the span the parser gave
        return Span(self.filename, line, col, end_line, end_col)

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.source.split("\n")
        return self._lines

    def error(self, message: str, node, notes: list[str] | None = None) -> TVMScriptError:
        return TVMScriptError(message, self.error_span(node), notes)

    # ---- comments
    def take_comments(self, stmts: list[ast.Stmt]) -> None:
        """Hand each comment to the statement it belongs to (see `attach_comments`)."""
        attach_comments(stmts, self.comments)


def _before(lines: list[str], line: int, col: int, brackets: str):
    """The (line, col) of the opening bracket just before ``line:col`` (blanks between), if any."""
    text = lines[line - 1][: col - 1].rstrip()
    if text and text[-1] in brackets:
        return line, len(text)
    return None


def _after(lines: list[str], line: int, col: int, brackets: str):
    """The (line, col) of the opening bracket at or just after ``line:col``, if any."""
    text = lines[line - 1]
    i = col - 1
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] in brackets:
        return line, i + 1
    return None


_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _matching(lines: list[str], line: int, col: int) -> tuple[int, int]:
    """The end (line, exclusive col) of the bracket group opening at ``line:col``; skips strings
    and comments. ValueError if it does not close."""
    depth = 0
    quote = None
    for ln in range(line, len(lines) + 1):
        text = lines[ln - 1]
        i = col - 1 if ln == line else 0
        while i < len(text):
            ch = text[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif text.startswith(quote, i):
                    i += len(quote) - 1
                    quote = None
            elif ch in "\"'":
                quote = ch * 3 if text.startswith(ch * 3, i) else ch
                i += len(quote) - 1
            elif ch == "#":
                break
            elif ch in _CLOSER:
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth == 0:
                    return ln, i + 2
            i += 1
        if quote is not None and len(quote) == 1:
            quote = None
    raise ValueError("unclosed bracket")


def attach_comments(
    stmts: list[ast.Stmt], comments: list[ast.Comment], source: str | None = None
) -> list[ast.Comment]:
    """Attach comments to statements, as a reader of the source would:

    * a comment after code belongs to the statement on that line (its ``trailing`` comment; a
      second one, on another line of a multi-line statement, goes before it);
    * a comment on its own line goes before the statement that follows it, unless it is
      indented deeper than that statement and follows the end of a block whose statements are
      indented no deeper than it: then it closes that block (``after`` of the block's owner).

    Comments after the last statement of the file are returned so the caller can keep them."""
    if not comments:
        return []
    flat: list[ast.Stmt] = []
    parent: dict[int, ast.Stmt | None] = {}

    def walk(body, owner):
        for s in body:
            flat.append(s)
            parent[id(s)] = owner
            for sub in _bodies(s):
                walk(sub, s)

    walk(stmts, None)
    lines = source.split("\n") if source is not None else None
    order = sorted(range(len(flat)), key=lambda i: ast.header_line(flat[i]))
    heads = [ast.header_line(flat[i]) for i in order]

    def indent_of(s: ast.Stmt) -> int:
        if lines is None:
            return s.col
        text = lines[ast.header_line(s) - 1] if ast.header_line(s) <= len(lines) else ""
        return len(text) - len(text.lstrip()) + 1

    # Line -> the innermost statement whose own code (not its body) covers it: statements come
    # in source order, outer before inner, so a later one overwrites. One pass over the code's
    # lines, instead of a scan of every statement for each comment (quadratic in big files).
    code_owner: dict[int, ast.Stmt] = {}
    last_line_of: dict[int, ast.Stmt] = {}
    for s in flat:
        bodies = [b for b in _bodies(s) if b]
        last = (ast.header_line(bodies[0][0]) - 1) if bodies else s.end_line
        for line in range(ast.header_line(s), max(last, s.line) + 1):
            code_owner[line] = s
        last_line_of.setdefault(s.line if bodies else s.end_line, s)

    leftovers: list[ast.Comment] = []
    for c in comments:
        own_line = lines is not None and 1 <= c.line <= len(lines) and not lines[c.line - 1][: c.col - 1].strip()
        if lines is None:
            own_line = c.line not in last_line_of
        if not own_line:
            owner = code_owner.get(c.line)
            if owner is not None:
                if owner.trailing is None:
                    owner.trailing = c.text
                else:
                    owner.comments.append(c.text)
                continue
        k = bisect.bisect_right(heads, c.line)
        nxt = flat[order[k]] if k < len(order) else None
        prev = flat[order[k - 1]] if k > 0 else None
        if nxt is not None and (prev is None or c.col <= indent_of(nxt)):
            nxt.comments.append(c.text)
            continue
        # Indented deeper than what follows: the comment closes the innermost block around the
        # previous statement that is indented no deeper than the comment.
        target, child = None, prev
        while child is not None:
            owner = parent[id(child)]
            if owner is None:
                break
            if indent_of(child) <= c.col:
                target = owner
                break
            child = owner
        if target is not None and not _inside(nxt, target, parent):
            if getattr(target, "after", None) is None:
                target.after = []
            target.after.append(c.text)
        elif nxt is not None:
            nxt.comments.append(c.text)
        else:
            leftovers.append(c)
    return leftovers


def _inside(s: ast.Stmt | None, owner: ast.Stmt, parent: dict) -> bool:
    while s is not None:
        if s is owner:
            return True
        s = parent[id(s)]
    return False


def _bodies(s: ast.Stmt) -> list:
    if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.For, ast.With, ast.While)):
        return [s.body]
    if isinstance(s, ast.If):
        return [s.body, s.orelse]
    return []


def comments_of(stmt: ast.Stmt) -> ir.Comments | None:
    after = getattr(stmt, "after", None)
    if not stmt.comments and stmt.trailing is None and not after:
        return None
    return ir.Comments(list(stmt.comments), stmt.trailing, list(after or ()))


def loose_comments(stmt: ast.Stmt) -> ir.Comments:
    """All of a statement's comments as lines before the next thing printed, for statements
    that print nothing of their own (``T.axis.remap``, ``cls = Module``, ...)."""
    return ir.Comments(
        list(stmt.comments) + ([stmt.trailing] if stmt.trailing else []) + list(getattr(stmt, "after", None) or ())
    )


# Key of the comments written on a function's T.func_attr / R.func_attr line.
FUNC_ATTR = "func_attr"


def take_comments(table: dict, key, stmt: ast.Stmt) -> None:
    """Move a statement's comments to ``table[key]``, for statements that build no node of their
    own but print back as a line (``T.func_attr``)."""
    merge_comments(table, key, comments_of(stmt))
    stmt.comments = []
    stmt.trailing = None


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


def _as_literal(value):
    """A Python value in the shape `literal` returns (sequences as lists)."""
    if isinstance(value, (tuple, list)):
        return [_as_literal(v) for v in value]
    return value


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


def build(
    stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str,
    py_scope: dict[str, Any] | None = None, col_offset: int = 0,
):
    """Build the IR for a whole file: an IRModule, or a single function. ``py_scope`` holds the
    Python names around TVMScript written inside Python, ``col_offset`` the indentation removed
    from it (see tvmscript/script.py)."""
    where, depth = _deepest_statement(stmts)
    if depth > MAX_NESTING:
        raise Context(source, filename, []).error(
            f"expression nested too deeply: {depth} levels, at most {MAX_NESTING}", where,
            ["split it into several statements (a long sum into partial sums)"])
    try:
        return _build(stmts, comments, source, filename, py_scope, col_offset)
    except RecursionError:
        # Building recurses on the syntax tree; the limit above keeps it within its room.
        raise Context(source, filename, []).error("expression nested too deeply", where) from None


def _deepest_statement(stmts: list[ast.Stmt]) -> tuple:
    """(the statement holding the most deeply nested expression, its depth in syntax-tree
    levels), found without recursion."""
    best, best_depth = None, -1
    todo = [(s, 0, s) for s in stmts]
    while todo:
        node, depth, stmt = todo.pop()
        if isinstance(node, ast.Stmt):
            stmt = node
        if depth > best_depth:
            best, best_depth = stmt, depth
        todo.extend((c, depth + 1, stmt) for c in ast.children(node))
    return best, best_depth


def _build(stmts: list[ast.Stmt], comments: list[ast.Comment], source: str, filename: str, py_scope=None, col_offset=0):
    from .relax_builder import RelaxFunctionBuilder
    from .tir_builder import PrimFuncBuilder

    header = _source_header(stmts, comments)
    comments = [c for c in comments if not is_printer_artifact(c.text)]
    ctx = Context(source, filename, comments)
    ctx.py_scope = py_scope
    ctx.col_offset = col_offset
    leftovers = attach_comments(stmts, comments, source)

    items = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "metadata":
            ctx.metadata = read_metadata(ctx, stmt.value)
            continue
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
        wanted = "expected an @I.ir_module class, an @R.function or a @T.prim_func"
        if not source.strip():
            raise TVMScriptError(f"the file is empty: {wanted}", Span(filename, 1, 1, 1, 1))
        if not stmts:
            first = comments[0] if comments else None
            line = first.line if first is not None else 1
            raise TVMScriptError(f"the file holds only comments: {wanted}", Span(filename, line, 1, line, 1))
        raise TVMScriptError(f"no @I.ir_module, @R.function or @T.prim_func found: {wanted}", Span(filename, 1, 1, 1, 1))
    if len(items) > 1:
        raise ctx.error("a file holds one module or one function; found another definition", items[1])
    item = items[0]
    if isinstance(item, ast.ClassDef):
        result = _build_module(ctx, item, PrimFuncBuilder, RelaxFunctionBuilder)
        result.source_header = header
        _keep_leftovers(result.comments, result, leftovers)
        return result
    kind = function_kind(ctx, item)
    builder = PrimFuncBuilder if kind == "tir" else RelaxFunctionBuilder
    func = builder(ctx).build(item)
    _keep_leftovers(func.comments, func, leftovers)
    return func


def _keep_leftovers(table: dict, node, leftovers: list[ast.Comment]) -> None:
    """Comments after the last statement: at the left margin they end the file (the printer
    puts them last, unindented); indented, they close the module or function."""
    closing = [c.text for c in leftovers if c.col > 1]
    end = [c.text for c in leftovers if c.col == 1]
    if closing:
        merge_comments(table, node, ir.Comments(after=closing))
    if end:
        merge_comments(table, ("end", node), ir.Comments(after=end))


def read_metadata(ctx: Context, node) -> dict:
    """The file's metadata section, ``metadata = {"relax.expr.Constant": [R.const_data(shape,
    dtype, "base64..."), ...], "ffi.Tensor": [...]}`` (tvmscript/metadata.py), as {table name:
    [numpy arrays]}; the entries of the attribute tensors' table are `tvms.nd` tensors, made
    once here so that two references to one entry give the same tensor."""
    from ..metadata import TENSOR_ALIASES, TENSOR_KEY, decode

    if not isinstance(node, ast.Dict):
        raise ctx.error("the metadata section must be a dict of lists", node)
    tables = {}
    for key_node, value in zip(node.keys, node.values):
        key = literal(ctx, key_node)
        if not isinstance(key, str) or not isinstance(value, (ast.List, ast.Tuple)):
            raise ctx.error("the metadata section must map names to lists", key_node)
        entries = []
        for entry in value.elts:
            if not (isinstance(entry, ast.Call) and dotted_name(entry.func) == "R.const_data"):
                raise ctx.error("a metadata entry is R.const_data(shape, dtype, \"base64\")", entry)
            args = bind_arguments(ctx, entry, "R.const_data", ["shape", "dtype", "data"])
            shape, dtype, data = (literal(ctx, args[k]) for k in ("shape", "dtype", "data"))
            if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
                raise ctx.error("the shape of a metadata entry is a tuple of sizes", args["shape"])
            if not isinstance(dtype, str) or not isinstance(data, str):
                raise ctx.error("a metadata entry needs a dtype string and a base64 string", entry)
            try:
                entries.append(decode(tuple(shape), dtype, data))
            except (ValueError, TypeError) as err:
                raise ctx.error(f"bad metadata entry: {err}", args["data"]) from None
        if key in TENSOR_ALIASES:
            key = TENSOR_KEY
        if key == TENSOR_KEY:
            from ..runtime.ndarray import array as nd_array  # aligned, as the importers' own

            entries = [nd_array(a) for a in entries]
        tables[key] = entries
    return tables


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
    externs = []
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
            ctx.module_defs[stmt.name] = stmt
            funcs.append((gv, kind, stmt))
        elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "I.module_attrs":
            args = bind_arguments(ctx, stmt.value, "I.module_attrs", ["attrs"])
            mod.attrs.update(literal(ctx, args["attrs"]))
        elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "I.module_global_infos":
            mod.global_infos.update(_module_global_infos(ctx, stmt.value))
            ctx.global_infos = mod.global_infos
        elif isinstance(stmt, ast.Pass):
            continue
        elif _is_extern_func_def(stmt):
            # ``my_ext = R.ExternFunc("my_ext")``: a global naming an extern function, as TVM has.
            from .relax_calls import extern_func

            gv = ir.GlobalVar(stmt.target.id)
            ctx.module_names[gv.name_hint] = gv
            ctx.module_kinds[gv.name_hint] = "extern"
            externs.append((gv, extern_func(relax_builder(ctx), stmt.value, "R.ExternFunc")))
        else:
            raise ctx.error("expected a function definition inside the module class", stmt)
    ctx.class_name = cdef.name
    ctx.relax_signatures = {name: ret for _, kind, stmt in funcs if kind != "tir"
                            for name, ret in [(stmt.name, _declared_return(ctx, relax_builder, stmt))]
                            if ret is not None}
    # Prim funcs first, so Relax functions can see their signatures; a Relax function after the
    # Relax functions it calls, so a call has its callee's inferred return wherever it is written.
    for gv, kind, stmt in _build_order(funcs):
        builder = prim_builder if kind == "tir" else relax_builder
        func = builder(ctx).build(stmt)
        mod[gv] = func
        if kind == "tir":
            ctx.prim_funcs[stmt.name] = func  # what the Relax functions' call_tirs are checked against
        if kind != "tir" and func.ret_struct_info is not None and not relax.sinfo_symbols(func.ret_struct_info):
            ctx.relax_signatures[stmt.name] = func.ret_struct_info
    # Keep the source order of functions (the printer sorts them canonically).
    ordered = ir.IRModule()
    for gv, value in externs:
        ordered[gv] = value
    for gv, _, _ in funcs:
        ordered[gv] = mod[gv]
    mod.functions = ordered.functions
    mod._by_name = ordered._by_name
    return mod


def _is_extern_func_def(stmt) -> bool:
    return (isinstance(stmt, ast.Assign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.value, ast.Call)
            and dotted_name(stmt.value.func) == "R.ExternFunc")


def _build_order(funcs: list) -> list:
    """``funcs`` (GlobalVar, kind, def) in the order to build them: the prim_funcs, then each Relax
    function after the module's Relax functions it refers to (source order among the rest, and
    for functions that call each other)."""
    relax_defs = {stmt.name: (gv, kind, stmt) for gv, kind, stmt in funcs if kind != "tir"}
    order = [f for f in funcs if f[1] == "tir"]
    placed: set = set()
    visiting: set = set()

    def place(name: str) -> None:
        if name in placed or name in visiting:
            return
        visiting.add(name)
        for callee in _names_used(relax_defs[name][2]):
            if callee in relax_defs and callee != name:
                place(callee)
        visiting.discard(name)
        placed.add(name)
        order.append(relax_defs[name])

    for name in relax_defs:
        place(name)
    return order


def _names_used(node) -> set:
    """The names and attribute names a definition mentions (``cls.f``, ``Module.f``, ``f``)."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _declared_return(ctx: Context, relax_builder, fdef: ast.FunctionDef):
    """What a call of a Relax function defined later in the module returns, as TVM's parser
    sees it: the function's return annotation when it has one written with constant shapes
    (one with the callee's own symbolic dims means nothing at the caller), else unknown."""
    if fdef.returns is None:
        return None
    try:
        ret = relax_builder(ctx).sinfo(fdef.returns)
    except TVMScriptError:
        return None  # reported where the function itself is built
    return None if relax.sinfo_symbols(ret) else ret


def _module_global_infos(ctx: Context, call: ast.Call) -> dict:
    """``I.module_global_infos({"vdevice": [I.vdevice("llvm"), ...]})``: a dict of lists of global
    infos (``I.vdevice(target, vdevice_id=0, memory_scope="global")``, ``I.dummy_global_info()``),
    kept as plain data on the module (ir.VDevice, ir.DummyGlobalInfo)."""
    name = "I.module_global_infos"
    args = bind_arguments(ctx, call, name, ["global_infos"])

    def info(node):
        callee = dotted_name(node.func) if isinstance(node, ast.Call) else None
        if callee == "I.vdevice":
            a = bind_arguments(ctx, node, callee, ["target", "vdevice_id", "memory_scope"],
                               {"vdevice_id": None, "memory_scope": None})
            target = literal(ctx, a["target"])
            vid = 0 if a["vdevice_id"] is None else literal(ctx, a["vdevice_id"])
            scope = "global" if a["memory_scope"] is None else literal(ctx, a["memory_scope"])
            if not isinstance(target, (str, dict)):
                raise ctx.error("I.vdevice's target must be a target string or a dict of its attributes", a["target"])
            if not isinstance(vid, int) or not isinstance(scope, str):
                raise ctx.error("I.vdevice takes (target, vdevice_id: int, memory_scope: str)", node)
            return ir.VDevice(target, vid, scope)
        if callee == "I.dummy_global_info":
            bind_arguments(ctx, node, callee, [])
            return ir.DummyGlobalInfo()
        raise ctx.error(f"{name}: expected I.vdevice(...) or I.dummy_global_info() here", node)

    value = literal(ctx, args["global_infos"], info)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (list, tuple)) for k, v in value.items()):
        raise ctx.error(f'{name} takes a dict of lists: {{"vdevice": [I.vdevice("llvm")]}}', args["global_infos"])
    return {k: list(v) for k, v in value.items()}
