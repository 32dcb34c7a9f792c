"""Names of a TVMScript file resolved on the parser's syntax tree, with lexical scopes.

Scopes nest as the language does: the file, the module class (its functions are visible from
every function, whatever their order: ``cls.f`` and a bare ``f`` in ``R.call_tir(f, ...)``),
functions (their parameters), and in TensorIR the bodies of ``for`` loops (loop variables) and
of ``with T.block(...)`` / other ``with`` statements (block iterators, allocations).
``with R.dataflow():`` opens no scope: its bindings stay visible after it (``R.output``).

Within a function, scopes are ordered: a use of a name refers to the latest definition of it
that is visible at the use (an assignment is visible from the end of its statement, so
``x = R.add(x, x)`` reads the earlier ``x``). All positions are 0-based (line, character).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import tir
from ..parser import ast
from ..parser.arguments import attribute_chain

# The T.* calls whose result, assigned to a name, is a buffer.
BUFFER_CALLS = frozenset((
    "T.alloc_buffer", "T.match_buffer", "T.decl_buffer", "T.alloc_local", "T.alloc_shared",
    "T.Buffer", "T.buffer", "T.sblock_alloc_buffer",
))
DIALECT_ROOTS = frozenset(("T", "R", "I"))


@dataclass(frozen=True)
class Range:
    """A span of text, 0-based lines and characters, end exclusive."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int

    def contains(self, line: int, char: int) -> bool:
        """Whether (line, char) lies in the range or touches its end (a cursor right after a
        name is on it, as editors place it)."""
        return (self.start_line, self.start_char) <= (line, char) <= (self.end_line, self.end_char)


@dataclass(eq=False)
class Scope:
    """A lexical scope: what it defines, and the lines it covers."""

    kind: str  # "file" | "class" | "function" | "for" | "with" | "lambda"
    parent: "Scope | None"
    start_line: int
    end_line: int
    indent: int
    dialect: str = ""  # "relax" | "tir" | "" (file and class)
    function: str | None = None
    defs: dict = field(default_factory=dict)
    children: list = field(default_factory=list)

    @property
    def ordered(self) -> bool:
        """In a class (and at file level) functions see each other whatever their order."""
        return self.kind not in ("class", "file")

    def define(self, d: "Definition") -> None:
        self.defs.setdefault(d.name, []).append(d)

    def lookup(self, name: str, pos: tuple[int, int]) -> "Definition | None":
        scope = self
        while scope is not None:
            found = scope.local(name, pos)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def local(self, name: str, pos: tuple[int, int]) -> "Definition | None":
        defs = self.defs.get(name)
        if not defs:
            return None
        if not self.ordered:
            return defs[-1]
        best = None
        for d in defs:
            if d.visible_from <= pos:
                best = d
        return best

    def visible(self, pos: tuple[int, int]) -> dict:
        """Every name visible at ``pos`` from this scope: name -> Definition (innermost wins)."""
        out: dict = {}
        scope = self
        while scope is not None:
            for name in scope.defs:
                if name not in out:
                    d = scope.local(name, pos)
                    if d is not None:
                        out[name] = d
            scope = scope.parent
        return out


@dataclass(eq=False)
class Definition:
    """One definition of a name and every place that refers to it."""

    name: str
    kind: str  # "module" | "function" | "parameter" | "variable" | "buffer" | "loop_var" | "block_iter"
    range: Range
    scope: Scope
    visible_from: tuple[int, int]
    node: object = None  # the defining statement or argument (ClassDef, FunctionDef, Arg, Assign, For, With)
    value: object = None  # the value: an assignment's right side, a loop's iterator call, an annotation
    index: int = 0  # the target's position when several names are defined at once
    count: int = 1  # how many names the statement defines at once
    references: list = field(default_factory=list)

    @property
    def dialect(self) -> str:
        return self.scope.dialect

    @property
    def function(self) -> str | None:
        return self.scope.function


@dataclass(eq=False)
class Occurrence:
    """A name in the text and what it means.

    ``role``: "def" (a definition), "use" (a name that refers to a definition, or to nothing
    known), "member" (``f`` of ``cls.f``), "dotted" (a segment of a dialect name such as ``R``,
    ``nn`` and ``relu`` of ``R.nn.relu``: ``full`` is the name up to that segment), "kwarg" (a
    keyword argument's name), "block" (the name string of ``T.block("Y")``)."""

    range: Range
    role: str
    name: str
    definition: Definition | None = None
    full: str = ""
    leaf: bool = False
    node: object = None


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: ast.FunctionDef
    dialect: str
    definition: Definition
    scope: Scope
    decorator: str


@dataclass(eq=False)
class BlockInfo:
    """A ``with T.block("name"):`` (``kind`` "block") or ``with R.dataflow():`` ("dataflow")."""

    kind: str
    name: str
    node: ast.With
    range: Range
    selection: Range
    function: str | None
    children: list = field(default_factory=list)
    scope: Scope | None = None


def dotted(node) -> str | None:
    """``R.nn.relu`` for the attribute chain R.nn.relu, as written; None for anything else."""
    parts = attribute_chain(node)
    return None if parts is None else ".".join(parts)


def callee_name(node) -> str | None:
    return dotted(node.func) if isinstance(node, ast.Call) else None


def node_range(node) -> Range:
    return Range(node.line - 1, node.col - 1, node.end_line - 1, node.end_col - 1)


class SymbolIndex:
    """Scopes, definitions and name occurrences of one syntax tree."""

    def __init__(self, stmts: list, lines: list[str]) -> None:
        self.lines = lines
        self.definitions: list[Definition] = []
        self.occurrences: dict[int, list[Occurrence]] = {}
        self.functions: list[FunctionInfo] = []
        self.modules: list[Definition] = []
        self.blocks: list[BlockInfo] = []  # outermost first, nested in .children
        self.calls: list[ast.Call] = []
        self.dtype_strings: list[Range] = []
        self.folds: set[tuple[int, int]] = set()
        self.decorators: list[Range] = []
        self._uses: list[tuple[str, Range, Scope, object]] = []
        self._members: list[tuple[str, Range, object]] = []
        self.file_scope = Scope("file", None, 0, max(len(lines) - 1, 0), -1)
        self._block_stack: list[BlockInfo] = []
        self._pending: dict[int, list] = {}
        self._sorted: set[int] = set()
        for stmt in stmts:
            self._stmt(stmt, self.file_scope)
        self._resolve()

    # ---------------------------------------------------------------- queries

    def at(self, line: int, char: int) -> Occurrence | None:
        """The occurrence under (line, char): the one containing it, preferring one that
        starts there (a cursor between ``a`` and ``(`` of ``a(`` is on ``a``)."""
        found = None
        for occ in self.occurrences_on(line):
            r = occ.range
            if r.start_char <= char < r.end_char:
                return occ
            if r.end_char == char:
                found = occ
        return found

    def occurrences_on(self, line: int) -> list[Occurrence]:
        """The occurrences of one line, by position (dialect names expanded on demand)."""
        if line not in self._sorted:
            for n, full in self._pending.pop(line, ()):
                self._dialect_name(n, full)
            self.occurrences.get(line, []).sort(key=lambda o: o.range.start_char)
            self._sorted.add(line)
        return self.occurrences.get(line, [])

    def scope_at(self, line: int, char: int, indent: int | None = None) -> Scope:
        """The innermost scope at a position; a line past a scope's last statement still
        belongs to it when it is indented deeper than the scope's header (typing a new
        statement at the end of a body)."""
        scope = self.file_scope
        while True:
            nxt = None
            for child in scope.children:
                if child.start_line <= line and (
                    line <= child.end_line or (indent is not None and indent > child.indent and _nothing_between(child, scope, line))
                ):
                    nxt = child
            if nxt is None:
                return scope
            scope = nxt

    def function_named(self, name: str) -> FunctionInfo | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def function_at(self, line: int) -> FunctionInfo | None:
        best = None
        for f in self.functions:
            if ast.header_line(f.node) - 1 <= line <= ast.last_line(f.node) - 1:
                best = f
        return best

    def module_names(self) -> set[str]:
        return {m.name for m in self.modules}

    # ---------------------------------------------------------------- recording

    def _add(self, occ: Occurrence) -> None:
        self.occurrences.setdefault(occ.range.start_line, []).append(occ)

    def _define(self, name: str, kind: str, rng: Range, scope: Scope, visible_from, node=None,
                value=None, index: int = 0, count: int = 1) -> Definition:
        d = Definition(name, kind, rng, scope, visible_from, node, value, index, count)
        d.references.append(rng)
        scope.define(d)
        self.definitions.append(d)
        self._add(Occurrence(rng, "def", name, d))
        return d

    def _name_range(self, line: int, col: int, name: str, within_end: int | None = None) -> Range:
        """The range of ``name`` written at or after (line, col) (1-based, as the tree has it)."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        start = col - 1
        if text[start:start + len(name)] != name:
            m = re.compile(rf"\b{re.escape(name)}\b").search(text, start)
            if m:
                start = m.start()
        return Range(line - 1, start, line - 1, start + len(name))

    def _attr_range(self, node: ast.Attribute) -> Range:
        """Where the ``attr`` of an attribute node is written: it ends the node."""
        end = node.end_col - 1
        line = node.end_line - 1
        text = self.lines[line] if line < len(self.lines) else ""
        start = end - len(node.attr)
        if text[start:end] != node.attr:
            idx = text.rfind(node.attr, 0, end + 1)
            if idx >= 0:
                start, end = idx, idx + len(node.attr)
        return Range(line, start, line, end)

    def _indent(self, line: int) -> int:
        """The indentation of a (1-based) line: statements' own columns point at their names."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text) - len(text.lstrip())

    def _fold(self, start_line: int, end_line: int) -> None:
        if end_line > start_line:
            self.folds.add((start_line - 1, end_line - 1))

    # ---------------------------------------------------------------- statements

    def _stmt(self, s, scope: Scope) -> None:
        method = getattr(self, "_stmt_" + type(s).__name__, None)
        if method is not None:
            method(s, scope)
        else:
            for child in ast.children(s):
                if isinstance(child, ast.Stmt):
                    self._stmt(child, scope)
                else:
                    self._expr(child, scope)

    def _body(self, body: list, scope: Scope) -> None:
        for s in body:
            self._stmt(s, scope)

    def _new_scope(self, kind: str, s, parent: Scope, dialect: str | None = None, function=None) -> Scope:
        child = Scope(kind, parent, ast.header_line(s) - 1, ast.last_line(s) - 1, self._indent(s.line),
                      parent.dialect if dialect is None else dialect,
                      parent.function if function is None else function)
        parent.children.append(child)
        return child

    def _stmt_ClassDef(self, s: ast.ClassDef, scope: Scope) -> None:
        for d in s.decorators:
            self._decorator(d, scope)
        rng = self._name_range(s.line, s.col, s.name)
        module = self._define(s.name, "module", rng, scope, (rng.start_line, 0), node=s)
        self.modules.append(module)
        self._fold(ast.header_line(s), ast.last_line(s))
        inner = self._new_scope("class", s, scope)
        self._body(s.body, inner)

    def _stmt_FunctionDef(self, s: ast.FunctionDef, scope: Scope) -> None:
        decorator = ""
        for d in s.decorators:
            self._decorator(d, scope)
            name = dotted(d.func if isinstance(d, ast.Call) else d) or ""
            decorator = decorator or name
        dialect = _dialect_of(decorator, scope.dialect)
        rng = self._name_range(s.line, s.col, s.name)
        d = self._define(s.name, "function", rng, scope, (rng.start_line, 0), node=s)
        self._fold(ast.header_line(s), ast.last_line(s))
        inner = self._new_scope("function", s, scope, dialect, s.name)
        self.functions.append(FunctionInfo(s.name, s, dialect, d, inner, decorator))
        for arg in s.args:
            if arg.annotation is not None:
                self._expr(arg.annotation, scope)
            if arg.default is not None:
                self._expr(arg.default, scope)
        if s.returns is not None:
            self._expr(s.returns, scope)
        for arg in s.args:
            kind = "buffer" if dialect == "tir" and _is_buffer_annotation(arg.annotation) else "parameter"
            arng = self._name_range(arg.line, arg.col, arg.name)
            self._define(arg.name, kind, arng, inner, (rng.start_line, 0), node=arg, value=arg.annotation)
        self._body(s.body, inner)

    def _decorator(self, d, scope: Scope) -> None:
        target = d.func if isinstance(d, ast.Call) else d
        # The decorator's name (``@R.function``) is one token; its arguments are expressions.
        self.decorators.append(Range(target.line - 1, max(target.col - 2, 0), target.end_line - 1, target.end_col - 1))
        if isinstance(d, ast.Call):
            for a in d.args:
                self._expr(a, scope)
            for kw in d.keywords:
                self._keyword(kw, scope, None)

    def _stmt_Assign(self, s: ast.Assign, scope: Scope) -> None:
        self._expr(s.value, scope)
        self._targets(s.target, s, s.value, scope)

    def _stmt_AnnAssign(self, s: ast.AnnAssign, scope: Scope) -> None:
        self._expr(s.annotation, scope)
        if s.value is not None:
            self._expr(s.value, scope)
        self._targets(s.target, s, s.value if s.value is not None else s.annotation, scope)

    def _stmt_AugAssign(self, s: ast.AugAssign, scope: Scope) -> None:
        self._expr(s.value, scope)
        self._expr(s.target, scope)

    def _targets(self, target, s, value, scope: Scope) -> None:
        visible = (s.end_line - 1, s.end_col - 1)
        names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        kind = self._assign_kind(value, scope)
        for i, t in enumerate(names):
            if isinstance(t, ast.Name):
                self._define(t.id, kind, node_range(t), scope, visible, node=s, value=value, index=i, count=len(names))
            else:
                self._expr(t, scope)

    def _assign_kind(self, value, scope: Scope) -> str:
        if scope.dialect != "tir":
            return "variable"
        name = callee_name(value)
        if name in BUFFER_CALLS:
            return "buffer"
        if name is not None and name.startswith("T.axis."):
            return "block_iter"
        return "variable"

    def _stmt_For(self, s: ast.For, scope: Scope) -> None:
        self._expr(s.iter, scope)
        self._fold(s.line, ast.last_line(s))
        inner = self._new_scope("for", s, scope)
        first = s.body[0] if s.body else s
        visible = (s.line - 1, s.end_col - 1) if not s.body else (first.line - 1, 0)
        names = s.target.elts if isinstance(s.target, (ast.Tuple, ast.List)) else [s.target]
        kind = "loop_var" if scope.dialect == "tir" else "variable"
        for i, t in enumerate(names):
            if isinstance(t, ast.Name):
                self._define(t.id, kind, node_range(t), inner, visible, node=s, value=s.iter, index=i, count=len(names))
        self._body(s.body, inner)

    def _stmt_With(self, s: ast.With, scope: Scope) -> None:
        self._expr(s.item, scope)
        name = callee_name(s.item)
        self._fold(s.line, ast.last_line(s))
        header = Range(s.line - 1, self._indent(s.line), s.line - 1, self._indent(s.line) + len("with"))
        if name == "R.dataflow":
            info = BlockInfo("dataflow", "R.dataflow()", s, stmt_range(s, self.lines), header, scope.function)
            self._push_block(info)
            self._body(s.body, scope)
            self._block_stack.pop()
            return
        inner = self._new_scope("with", s, scope)
        info = None
        if name in ("T.block", "T.sblock"):
            label = _block_label(s.item)
            sel = node_range(s.item.args[0]) if s.item.args else node_range(s.item)
            info = BlockInfo("block", label, s, stmt_range(s, self.lines), sel, scope.function, scope=inner)
            self._push_block(info)
            if s.item.args and isinstance(s.item.args[0], ast.Constant):
                self._add(Occurrence(sel, "block", label, node=info))
        if s.target is not None:
            targets = s.target.elts if isinstance(s.target, (ast.Tuple, ast.List)) else [s.target]
            for i, t in enumerate(targets):
                if isinstance(t, ast.Name):
                    self._define(t.id, "variable", node_range(t), inner, (s.line - 1, s.end_col - 1), node=s,
                                 value=s.item, index=i, count=len(targets))
        self._body(s.body, inner)
        if info is not None:
            self._block_stack.pop()

    def _push_block(self, info: BlockInfo) -> None:
        (self._block_stack[-1].children if self._block_stack else self.blocks).append(info)
        self._block_stack.append(info)

    def _stmt_If(self, s: ast.If, scope: Scope) -> None:
        self._expr(s.test, scope)
        body_end = ast.last_line(s.body[-1]) if s.body else s.line
        self._fold(s.line, body_end)
        self._body(s.body, scope)
        if s.orelse:
            self._fold(s.orelse[0].line - 1, ast.last_line(s.orelse[-1]))
            self._body(s.orelse, scope)

    def _stmt_While(self, s: ast.While, scope: Scope) -> None:
        self._expr(s.test, scope)
        self._fold(s.line, ast.last_line(s))
        self._body(s.body, scope)

    # ---------------------------------------------------------------- expressions

    def _expr(self, e, scope: Scope) -> None:
        """Records the names of an expression (iteratively: expressions may nest deeply)."""
        stack = [e]
        while stack:
            n = stack.pop()
            t = type(n)
            if t is ast.Name:
                self._uses.append((n.id, node_range(n), scope, n))
            elif t is ast.Attribute:
                if not self._attribute(n, scope):
                    stack.append(n.value)
            elif t is ast.Call:
                self.calls.append(n)
                if n.end_line > n.line:
                    self._fold(n.line, n.end_line)
                name = dotted(n.func)
                stack.append(n.func)
                for a in reversed(n.args):
                    stack.append(a)
                for kw in n.keywords:
                    self._keyword(kw, scope, name)
                self._dtype_args(n, name)
            elif t is ast.Lambda:
                self._lambda(n, scope)
            elif t is ast.Subscript and isinstance(n.index, ast.Tuple):
                # ``T.Buffer[(1, 784), "float32"]``: older TVMScript's buffer annotation
                self._dtype_strings_in(n.index.elts)
                stack.append(n.index)
                stack.append(n.value)
            elif n is not None:
                if t in (ast.List, ast.Dict, ast.Tuple) and n.end_line > n.line:
                    self._fold(n.line, n.end_line)
                stack.extend(reversed(list(ast.children(n))))

    def _keyword(self, kw: ast.Keyword, scope: Scope, callee: str | None) -> None:
        if kw.arg:
            self._add(Occurrence(self._name_range(kw.line, kw.col, kw.arg), "kwarg", kw.arg, full=callee or ""))
        self._expr(kw.value, scope)

    def _dtype_args(self, call: ast.Call, name: str | None) -> None:
        """Strings naming a dtype given to a call (``"float32"``, ``dtype="int64"``)."""
        self._dtype_strings_in(list(call.args) + [kw.value for kw in call.keywords])

    def _dtype_strings_in(self, values: list) -> None:
        for v in values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value and tir.is_valid_dtype(v.value):
                self.dtype_strings.append(node_range(v))

    def _attribute(self, n: ast.Attribute, scope: Scope) -> bool:
        """Records a dialect name (``R.nn.relu``) or a module member (``cls.f``); False when
        the attribute is neither (its value is then an ordinary expression)."""
        full = dotted(n)
        if full is None:
            return False
        root = full.split(".", 1)[0]
        if root in DIALECT_ROOTS and scope.lookup(root, (n.line - 1, n.col - 1)) is None:
            # Expanded into occurrences only when its line is asked about (they are many).
            self._pending.setdefault(n.line - 1, []).append((n, full))
            return True
        base = n.value
        if isinstance(base, ast.Name) and not isinstance(base, ast.Attribute):
            self._uses.append((base.id, node_range(base), scope, base))
            self._members.append((n.attr, self._attr_range(n), base))
            return True
        return False

    def _dialect_name(self, n: ast.Attribute, full: str) -> None:
        parts = full.split(".")
        node = n
        ranges = []
        while isinstance(node, ast.Attribute):
            ranges.append(self._attr_range(node))
            node = node.value
        ranges.append(node_range(node))
        ranges.reverse()
        for i, rng in enumerate(ranges):
            self._add(Occurrence(rng, "dotted", parts[i], full=".".join(parts[: i + 1]), leaf=i == len(parts) - 1))

    def _lambda(self, n: ast.Lambda, scope: Scope) -> None:
        inner = Scope("lambda", scope, n.line - 1, n.end_line - 1, 1 << 30, scope.dialect, scope.function)
        scope.children.append(inner)
        text = self.lines[n.line - 1] if n.line - 1 < len(self.lines) else ""
        head_end = text.find(":", n.col - 1)
        for p in n.params:
            m = re.compile(rf"\b{re.escape(p)}\b").search(text, n.col - 1 + len("lambda"), head_end if head_end >= 0 else len(text))
            if m:
                rng = Range(n.line - 1, m.start(), n.line - 1, m.end())
                self._define(p, "parameter", rng, inner, (n.line - 1, 0), node=n)
        self._expr(n.body, inner)

    # ---------------------------------------------------------------- resolution

    def _resolve(self) -> None:
        for name, rng, scope, node in self._uses:
            d = scope.lookup(name, (rng.start_line, rng.start_char))
            if d is not None:
                d.references.append(rng)
            self._add(Occurrence(rng, "use", name, d, node=node))
        modules = self.module_names()
        for attr, rng, base in self._members:
            d = None
            if base.id == "cls" or base.id in modules:
                f = self.function_named(attr)
                d = f.definition if f is not None else None
                if d is not None:
                    d.references.append(rng)
            self._add(Occurrence(rng, "member", attr, d, full=f"{base.id}.{attr}", node=base))
        for d in self.definitions:
            d.references.sort(key=lambda r: (r.start_line, r.start_char))


def _nothing_between(child: Scope, parent: Scope, line: int) -> bool:
    """Whether no later sibling of ``child`` starts before ``line``."""
    return all(not (child.end_line < c.start_line <= line) for c in parent.children)


def _dialect_of(decorator: str, outer: str) -> str:
    if decorator.startswith(("R.", "relax.")):
        return "relax"
    if decorator.startswith(("T.", "tir.")):
        return "tir"
    return outer


def _is_buffer_annotation(node) -> bool:
    if isinstance(node, ast.Subscript):
        node = node.value
    name = callee_name(node) if isinstance(node, ast.Call) else dotted(node)
    return name in ("T.Buffer", "T.buffer", "T.match_buffer")


def _block_label(call: ast.Call) -> str:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return "block"


def stmt_range(s, lines: list[str]) -> Range:
    """From a statement's header (its decorators) to the end of its last nested statement."""
    last = s
    while getattr(last, "body", None) or (isinstance(last, ast.If) and last.orelse):
        last = last.orelse[-1] if isinstance(last, ast.If) and last.orelse else last.body[-1]
    first = ast.header_line(s) - 1
    text = lines[first] if first < len(lines) else ""
    return Range(first, len(text) - len(text.lstrip()), last.end_line - 1, last.end_col - 1)
