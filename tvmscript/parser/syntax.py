"""Text to syntax tree: `parse_syntax`, the first step of the parser.

TVMScript is Python syntax, so this step knows nothing about TVM: it turns text into a small
Python-like syntax tree (`tvmscript.parser.ast`), keeping every node's source span and every
comment. Its pieces:

- import_header.py: the ``from tvm.script import ...`` lines a file may start with;
- lalr_tables.py: the grammar (``grammar/tvmscript.lark``) compiled by Lark into LALR(1)
  tables, cached on disk;
- lalr_parser.py: the parse loop, lexer and indentation fused into it;
- syntax_tree.py: the tree built as the parser reduces each grammar rule;
- syntax_errors.py: the diagnostic of a token the grammar does not accept.
"""

from __future__ import annotations

from ..diagnostics import Span, TVMScriptError
from . import ast
from .import_header import strip_import_header
from .lalr_parser import SyntaxErrorAt, run_parser
from .lalr_tables import tables
from .syntax_errors import syntax_error


def parse_syntax(source: str, filename: str = "<string>") -> tuple[list[ast.Stmt], list[ast.Comment]]:
    """Parse TVMScript text into top-level syntax-tree statements and the list of comments."""
    if not source.endswith("\n"):
        source += "\n"
    if source.startswith(("import", "from")) or "\nimport" in source or "\nfrom" in source:
        source = strip_import_header(source, filename)
    compiled = tables()
    comments: list[ast.Comment] = []
    brackets: list = []
    try:
        stmts = run_parser(source, filename, compiled, comments, brackets)
    except TVMScriptError as err:
        if err.span is not None and err.span.filename == "<string>":
            err.span = err.span.with_filename(filename)
        raise
    except SyntaxErrorAt as err:
        raise syntax_error(err.tok, err.expected, source, filename, brackets) from None
    except RecursionError:
        raise TVMScriptError("expression nested too deeply", Span(filename, 1, 1, 1, 2)) from None
    return stmts, comments
