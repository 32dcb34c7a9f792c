"""What the language server knows about one TVMScript document: hover, definitions,
references, rename, completion, signature help, semantic tokens, outline and folding.

A `Document` is cheap to make; its analysis runs once per text, on first use:

1. `analysis_text.parse_tolerant`: the parser's syntax tree (lines the parser stops at are
   replaced in a copy, so a typo halfway leaves the rest analysed);
2. `symbols.SymbolIndex`: lexical scopes over the tree, every name occurrence resolved to its
   definition (this answers definition, references, rename, completion of names);
3. `analysis_types.build_types`: the IR built from the same tree, its objects found by source
   position (struct info of Relax variables, buffers, blocks); when the text does not build,
   the last text of the same file that did lends its types to definitions that still match;
4. `analysis_tables.name_table`: every T./R./I. name from the parser's and op registry's
   tables (completion, signature help, hover of ops).

The answers are made from it by `analysis_hover` (hover texts), `analysis_completion`
(completion, signature help) and `analysis_tokens` (semantic tokens); definitions, references,
rename, the outline and folding ranges here.

Positions are 0-based; characters count Python ``str`` indices (the server converts to and
from UTF-16). No method raises on any text, except `Document.rename` (`RenameError`).
"""

from __future__ import annotations

import functools
import gc
import keyword
from collections import OrderedDict
from dataclasses import dataclass, field

from ..parser import ast
from .analysis_completion import Completion, Signature, completions, signature_help
from .analysis_hover import hover
from .analysis_text import LineIndex, parse_tolerant
from .analysis_tokens import TOKEN_MODIFIERS, TOKEN_TYPES, Token, semantic_tokens
from .analysis_types import build_types, definition_key, recall, remember
from .symbols import DIALECT_ROOTS, Range, SymbolIndex, node_range

__all__ = [
    "Range", "Document", "Completion", "Signature", "Token", "Symbol", "RenameError",
    "TOKEN_TYPES", "TOKEN_MODIFIERS",
]


@dataclass
class Symbol:
    name: str
    kind: str  # "module" | "function" | "namespace" | "variable"
    range: Range
    selection_range: Range
    children: list["Symbol"] = field(default_factory=list)


class RenameError(ValueError):
    """A rename that cannot be done: the new name is no identifier, a keyword, or clashes
    with a name visible where the renamed one is."""


def _safe(default):
    """Methods of `Document` answer ``default`` rather than raise on text the analysis did not
    foresee (an editor asks on every keystroke); `RenameError` still reaches the caller."""
    def wrap(method):
        @functools.wraps(method)
        def inner(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except RenameError:
                raise
            except Exception:  # noqa: BLE001
                return default() if callable(default) else default
        return inner
    return wrap


# ----------------------------------------------------------------------------- analysis


class Analysis:
    """The analysis of one text (see the module docstring)."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.tokens: list | None = None  # the semantic tokens, made on the first request
        self.index = LineIndex(text)
        # The analysis allocates many small acyclic objects: the cyclic collector would scan
        # them again and again for nothing (as `parse_source` does, it is paused meanwhile).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._analyse(text, filename)
        finally:
            if enabled:
                gc.enable()

    def _analyse(self, text: str, filename: str) -> None:
        self.types = None
        self.parsed_ir = None
        self.fallback = None  # (old symbols, old types): the last text that built
        self.build_error = None
        self._fallback_keys = None
        stmts, comments, self.repaired = parse_tolerant(text, filename)
        self.parsed = stmts is not None
        try:
            self.symbols = SymbolIndex(stmts or [], self.index.lines)
        except Exception:  # noqa: BLE001 - a tree the index does not expect: answer from nothing
            self.symbols, stmts = SymbolIndex([], self.index.lines), None
        if stmts is not None:
            self.types, self.build_error = build_types(stmts, comments, text, filename)
        # What formatting this very text needs (no second parse): unrepaired text only.
        self.parsed_ir = (self.types.node, comments) if self.types is not None and not self.repaired else None
        if self.types is not None and not self.repaired:
            remember(filename, self.symbols, self.types)
        elif self.types is None:
            self.fallback = recall(filename)

    # ---- text helpers

    def source(self, node) -> str:
        """The text of a syntax node, on one line (whitespace runs collapsed)."""
        start = self.index.offset(node.line - 1, node.col - 1)
        end = self.index.offset(node.end_line - 1, node.end_col - 1)
        text = self.text[start:end]
        return text if "\n" not in text else " ".join(text.split())

    # ---- IR objects of a definition

    def _ir(self, d, table: str, pos: tuple[int, int]):
        if self.types is not None:
            return getattr(self.types, table).get(pos)
        if self.fallback is None:
            return None
        old_symbols, old_types = self.fallback
        if self._fallback_keys is None:
            self._fallback_keys = {definition_key(x): x for x in old_symbols.definitions}
        old = self._fallback_keys.get(definition_key(d))
        if old is None:
            return None
        return getattr(old_types, table).get(_ir_position(old, table))

    def relax_var(self, d):
        return self._ir(d, "relax_vars", _ir_position(d, "relax_vars"))

    def buffer(self, d):
        return self._ir(d, "buffers", _ir_position(d, "buffers"))


def _ir_position(d, table: str) -> tuple[int, int]:
    """Where the IR's span of a definition's object starts: a Relax variable at its name, a
    buffer at its annotation or allocation call."""
    if table == "buffers":
        node = d.value
        if isinstance(node, ast.Subscript):
            node = node.value
        if node is not None:
            return node.line - 1, node.col - 1
    return d.range.start_line, d.range.start_char


_CACHE: "OrderedDict[tuple[str, str], Analysis]" = OrderedDict()
_CACHE_SIZE = 8


def _analysis_of(text: str, filename: str) -> Analysis:
    key = (filename, text)
    found = _CACHE.get(key)
    if found is None:
        found = Analysis(text, filename)
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return found


# ----------------------------------------------------------------------------- document


class Document:
    """One version of a file's text; every question about it is answered from one analysis,
    made on the first question."""

    def __init__(self, text: str, filename: str = "<document>") -> None:
        self.text = text
        self.filename = filename
        self._analysis: Analysis | None = None

    @property
    def analysed(self) -> Analysis | None:
        """The analysis if one was made already (None: asking would start one)."""
        return self._analysis

    @property
    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = _analysis_of(self.text, self.filename)
        return self._analysis

    # ---- hover

    @_safe(None)
    def hover(self, line: int, char: int) -> str | None:
        return hover(self.analysis, line, char)

    # ---- navigation

    @_safe(list)
    def definition(self, line: int, char: int) -> list[Range]:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None:
            return []
        return [occ.definition.range]

    @_safe(list)
    def references(self, line: int, char: int, include_declaration: bool = True) -> list[Range]:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None:
            return []
        d = occ.definition
        return [r for r in d.references if include_declaration or r != d.range]

    @_safe(None)
    def prepare_rename(self, line: int, char: int) -> Range | None:
        occ = self.analysis.symbols.at(line, char)
        if occ is None or occ.definition is None or occ.role not in ("def", "use", "member"):
            return None
        return occ.range

    def rename(self, line: int, char: int, new_name: str) -> list[tuple[Range, str]]:
        try:
            occ = self.analysis.symbols.at(line, char)
        except Exception:  # noqa: BLE001
            occ = None
        if occ is None or occ.definition is None or occ.role not in ("def", "use", "member"):
            raise RenameError("there is no renamable name here")
        d = occ.definition
        if not new_name.isidentifier():
            raise RenameError(f"'{new_name}' is not a valid name")
        if keyword.iskeyword(new_name) or keyword.issoftkeyword(new_name) and new_name != "_":
            raise RenameError(f"'{new_name}' is a keyword")
        if new_name == d.name:
            return []
        clash = _rename_clash(self.analysis.symbols, d, new_name)
        if clash:
            raise RenameError(clash)
        return [(r, new_name) for r in d.references]

    # ---- completion

    @_safe(list)
    def completions(self, line: int, char: int) -> list[Completion]:
        return completions(self.analysis, line, char)

    @_safe(None)
    def signature_help(self, line: int, char: int) -> Signature | None:
        return signature_help(self.analysis, line, char)

    # ---- tokens, outline, folding

    @_safe(list)
    def semantic_tokens(self) -> list[Token]:
        a = self.analysis
        if a.tokens is None:
            a.tokens = semantic_tokens(a)
        return list(a.tokens)

    @_safe(list)
    def document_symbols(self) -> list[Symbol]:
        return _document_symbols(self.analysis)

    @_safe(list)
    def folding_ranges(self) -> list[tuple[int, int]]:
        return sorted(self.analysis.symbols.folds)


# ----------------------------------------------------------------------------- rename


def _rename_clash(symbols: SymbolIndex, d, new_name: str) -> str | None:
    if new_name in DIALECT_ROOTS:
        return f"'{new_name}' is a dialect name (T, R, I)"
    scope = d.scope
    if new_name in scope.defs:
        return f"'{new_name}' is already defined in this scope"
    if scope.lookup(new_name, (1 << 30, 0)) is not None:
        return f"'{new_name}' is already visible here (defined in an enclosing scope)"
    stack = list(scope.children)
    while stack:
        s = stack.pop()
        if new_name in s.defs:
            return f"'{new_name}' is defined in a nested scope, where it would hide the renamed name"
        stack.extend(s.children)
    if d.kind == "function" and new_name == "cls":
        return "'cls' names the module"
    return None


# ----------------------------------------------------------------------------- outline


def _document_symbols(a: Analysis) -> list[Symbol]:
    symbols = a.symbols
    out: list[Symbol] = []
    for m in symbols.modules:
        node = m.node
        children = [_function_symbol(symbols, f) for f in symbols.functions if f.scope.parent is not None
                    and f.scope.parent.kind == "class" and _inside(f.node, node)]
        for name, defs in _class_scope_of(symbols, node).items():
            for d in defs:
                if d.kind == "variable":
                    children.append(Symbol(d.name, "variable", _whole_stmt(d.node), d.range, []))
        children.sort(key=lambda s: (s.range.start_line, s.range.start_char))
        out.append(Symbol(m.name, "module", _stmt_range(node, symbols.lines), m.range, children))
    for f in symbols.functions:
        if f.scope.parent is symbols.file_scope:
            out.append(_function_symbol(symbols, f))
    out.sort(key=lambda s: (s.range.start_line, s.range.start_char))
    return out


def _class_scope_of(symbols: SymbolIndex, node) -> dict:
    for s in symbols.file_scope.children:
        if s.kind == "class" and s.start_line == ast.header_line(node) - 1:
            return s.defs
    return {}


def _inside(inner, outer) -> bool:
    return ast.header_line(outer) <= inner.line <= ast.last_line(outer)


def _function_symbol(symbols: SymbolIndex, f) -> Symbol:
    blocks = [b for b in symbols.blocks if f.node.line <= b.node.line <= ast.last_line(f.node)]
    return Symbol(f.name, "function", _stmt_range(f.node, symbols.lines), f.definition.range, [_block_symbol(b) for b in blocks])


def _block_symbol(b) -> Symbol:
    return Symbol(b.name, "namespace", b.range, b.selection, [_block_symbol(c) for c in b.children])


def _stmt_range(node, lines: list[str]) -> Range:
    from .symbols import stmt_range

    return stmt_range(node, lines)


def _whole_stmt(node) -> Range:
    return node_range(node) if node is not None else Range(0, 0, 0, 0)


