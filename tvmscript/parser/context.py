"""What the TIR and Relax builders share while they work: `Context`, one per file (its source
and comments, the module being built, the Python scope around TVMScript written in Python,
errors with exact spans), and `Scope`, the nested name scopes of one function.

A diagnostic's span is made exact here (`Context.error_span`): the syntax tree keeps no bracket
tokens, so the source is read to find where a call or a list really ends.
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..ir import tir
from ..diagnostics import Span, TVMScriptError
from . import ast


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
