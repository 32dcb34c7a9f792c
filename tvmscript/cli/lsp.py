"""``tvms lsp``: the language server editors start (tvmscript/lsp/server.py), imported only
when it runs, since pygls is an optional dependency."""

from __future__ import annotations

import sys


def register(sub) -> None:
    lsp = sub.add_parser(
        "lsp", help="run the language server (stdio) for editors",
        description="Run the tvms language server over standard input and output: diagnostics, formatting, "
        "hover, definitions, references, rename, completion and more for .tvms files. Editors start it; "
        "it needs the lsp extra (pip install 'tvms[lsp]').",
    )
    lsp.set_defaults(handler=lsp_command)


def lsp_command(args) -> int:
    try:
        from ..lsp.server import serve_stdio
    except ImportError as err:
        if (err.name or "").split(".")[0] in ("pygls", "lsprotocol"):
            print("error: tvms lsp needs the lsp extra: pip install 'tvms[lsp]'", file=sys.stderr)
            return 1
        raise
    return serve_stdio()
