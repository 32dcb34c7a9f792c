"""TVMScript's grammar, ``tvmscript.lark`` (Lark's EBNF), as ``tvmscript.grammar``.

The parser (tvmscript/parser/lalr_tables.py) compiles it into LALR(1) tables once and caches them.
"""

import os

GRAMMAR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvmscript.lark")
