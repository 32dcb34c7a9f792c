"""TVMScript text to IR: `syntax` (Lark grammar to syntax tree) then `builder` (tree to IR)."""

from __future__ import annotations


def parse_source(source: str, filename: str = "<string>"):
    from .builder import build
    from .syntax import parse_syntax

    stmts, comments = parse_syntax(source, filename)
    return build(stmts, comments, source, filename)
