"""tvmscript.lsp: the language server editors start as ``tvms lsp`` (pygls, over stdio).

`analysis` answers questions about one document (hover, definitions, references, rename,
completion, semantic tokens) from the parser's syntax tree and IR; `server` speaks the
protocol and shares `tvmscript.checking` and `tvmscript.formatting` with ``tvms check`` and
``tvms fmt``.
"""
