"""TVMScript text to IR: `syntax` (Lark grammar to syntax tree) then `builder` (tree to IR)."""

from __future__ import annotations

import gc


def parse_source(source: str, filename: str = "<string>"):
    from .builder import build
    from .syntax import parse_syntax

    # Parsing allocates hundreds of thousands of small acyclic objects; the cyclic garbage
    # collector would scan them over and over (about 15% of parse time) for nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        stmts, comments = parse_syntax(source, filename)
        return build(stmts, comments, source, filename)
    finally:
        if enabled:
            gc.enable()
