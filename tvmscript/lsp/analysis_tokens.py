"""Semantic tokens: the kind of every token of the text (a dialect namespace, a function, a
parameter, a type, a keyword, a dtype string, a decorator, a comment...), as the language server
sends them for highlighting, from the tokenizer (`analysis_text.tokenize`) and what the symbol
index resolved each name to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..parser import ast
from . import analysis_tables as tables
from .analysis_text import PY_KEYWORDS, tokenize
from .symbols import SymbolIndex

if TYPE_CHECKING:
    from .analysis import Analysis


TOKEN_TYPES = ["namespace", "function", "variable", "parameter", "type", "keyword", "string", "number",
               "decorator", "property", "comment"]
TOKEN_MODIFIERS = ["declaration", "readonly", "defaultLibrary"]


@dataclass
class Token:
    line: int
    char: int
    length: int
    type: str
    modifiers: tuple[str, ...] = ()


def semantic_tokens(a: Analysis) -> list[Token]:
    """Every token of the text with its kind, in order."""
    symbols = a.symbols
    dtype_at = {(r.start_line, r.start_char) for r in symbols.dtype_strings}
    decorators = {}
    for r in symbols.decorators:
        decorators.setdefault(r.start_line, []).append(r)
    out: list[Token] = []
    starts = a.index.starts
    line = 0
    nlines = len(starts)
    for tok in tokenize(a.text):
        while line + 1 < nlines and starts[line + 1] <= tok.start:
            line += 1
        char = tok.start - starts[line]
        kind = tok.kind
        if kind == "comment":
            out.append(Token(line, char, len(tok.text), "comment"))
        elif kind == "string":
            ttype = "type" if (line, char) in dtype_at else "string"
            out.extend(_multiline_token(tok.text, line, char, ttype))
        elif kind == "number":
            out.append(Token(line, char, len(tok.text), "number"))
        elif kind == "at":
            for r in decorators.get(line, ()):
                if r.start_char == char:
                    out.append(Token(line, char, r.end_char - r.start_char, "decorator"))
        elif kind == "name":
            if any(r.start_char <= char < r.end_char for r in decorators.get(line, ())):
                continue
            token = _name_token(symbols, tok.text, line, char)
            if token is not None:
                out.append(token)
    return out


def _multiline_token(text: str, line: int, char: int, ttype: str) -> list[Token]:
    parts = text.split("\n")
    tokens = []
    for i, part in enumerate(parts):
        if part:
            tokens.append(Token(line + i, char if i == 0 else 0, len(part), ttype))
    return tokens


_DECLARATION = ("declaration",)
_LIBRARY = ("defaultLibrary",)


def _name_token(symbols: SymbolIndex, text: str, line: int, char: int) -> Token | None:
    length = len(text)
    if text in PY_KEYWORDS:
        return Token(line, char, length, "keyword")
    occ = None
    for o in symbols.occurrences_on(line):
        if o.range.start_char == char:
            occ = o
            break
    if occ is None:
        return Token(line, char, length, "variable") if text != "range" else Token(line, char, length, "function", _LIBRARY)
    role = occ.role
    if role == "dotted":
        if not occ.leaf:
            return Token(line, char, length, "namespace")
        entry = tables.signature_of(occ.full)
        if entry is not None and entry.kind == "type":
            return Token(line, char, length, "type", _LIBRARY)
        if entry is not None and entry.kind == "module":
            return Token(line, char, length, "namespace")
        return Token(line, char, length, "function", _LIBRARY)
    if role == "kwarg":
        return Token(line, char, length, "parameter")
    if role == "member":
        return Token(line, char, length, "function" if occ.definition is not None else "property")
    d = occ.definition
    if d is None:
        if text == "range":
            return Token(line, char, length, "function", _LIBRARY)
        return Token(line, char, length, "variable")
    mods = _DECLARATION if role == "def" else ()
    if d.kind == "module":
        return Token(line, char, length, "namespace", mods)
    if d.kind == "function":
        return Token(line, char, length, "function", mods)
    if isinstance(d.node, ast.Arg) or (d.kind == "parameter"):
        return Token(line, char, length, "parameter", mods)
    return Token(line, char, length, "variable", mods)
