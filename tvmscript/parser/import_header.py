"""The import header of a TVMScript file.

A TVMScript file copied from Python code starts with the imports that make it run there
(``from tvm.script import ir as I``). They carry no meaning for the parser, which knows the
dialects by their prefixes, so they are accepted as the header they are: before the first
decorator, and only the imports of TVM's script dialects. The printer writes the commented
header (``# from tvm.script import ir as I``) in their place.
"""

from __future__ import annotations

import re

from ..diagnostics import Span, TVMScriptError


# The dialect modules of ``tvm.script`` and the prefix the parser knows each by.
_DIALECT_ALIASES = {"ir": "I", "tir": "T", "tirx": "T", "relax": "R"}
_SCRIPT_PACKAGES = ("tvm.script", "tvm.script.parser")
_PLAIN_IMPORTS = frozenset({"tvm", "tvmscript"})
_IMPORT_LINE = re.compile(r"(?P<stmt>(?:import|from)\b[^#\n]*?)[ \t]*(?P<comment>#[^\n]*)?$")
IMPORT_START = re.compile(r"[ \t]*(?:import[ \t]+\S|from[ \t]+\S+[ \t]+import\b)")
_FROM_IMPORT = re.compile(r"from[ \t]+(?P<package>[\w.]+)[ \t]+import[ \t]+(?P<names>.+)")
_PLAIN_IMPORT = re.compile(r"import[ \t]+(?P<names>.+)")
_ALIAS = re.compile(r"(?P<name>[\w.]+)(?:[ \t]+as[ \t]+(?P<alias>\w+))?")


def _import_problem(stmt: str) -> str | None:
    """Why an import statement is not a TVMScript header import (None when it is one)."""
    m = _FROM_IMPORT.fullmatch(stmt)
    if m is not None:
        package = m["package"]
        if package not in _SCRIPT_PACKAGES:
            return f"'{package}' is not a TVMScript dialect package"
        names = m["names"].strip()
        if names.startswith("(") and names.endswith(")"):
            names = names[1:-1]
        for item in (x.strip() for x in names.split(",") if x.strip()):
            a = _ALIAS.fullmatch(item)
            if a is None or a["name"] not in _DIALECT_ALIASES:
                return f"'{item}' is not a TVMScript dialect (ir, tir, tirx or relax)"
            want = _DIALECT_ALIASES[a["name"]]
            if a["alias"] != want:
                return f"the {a['name']} dialect must be imported as {want} (TVMScript writes {want}.* for it)"
        return None
    m = _PLAIN_IMPORT.fullmatch(stmt)
    if m is None:
        return "this is not an import statement TVMScript understands"
    for item in (x.strip() for x in m["names"].split(",")):
        a = _ALIAS.fullmatch(item)
        if a is None or a["name"] not in _PLAIN_IMPORTS:
            return f"'{item}' is not TVM (only 'import tvm' or 'import tvmscript' may head a file)"
    return None


def strip_import_header(source: str, filename: str = "<string>") -> str:
    """``source`` with its header imports removed (comments after them stay, lines keep their
    numbers); a diagnostic for an import TVMScript does not know. Only the header is scanned:
    the first line that is not an import, a comment or blank ends it."""
    out = []
    pos = 0
    number = 0
    while pos < len(source):
        end = source.find("\n", pos)
        end = len(source) if end < 0 else end
        text = source[pos:end]
        number += 1
        stripped = text.strip()
        if stripped and not stripped.startswith("#"):
            if text[:1] in " \t" or not IMPORT_START.match(text):
                break  # the first statement that is not an import: the header is over
            m = _IMPORT_LINE.match(text)
            stmt = m["stmt"] if m else text
            problem = _import_problem(stmt.strip())
            if problem is not None:
                raise TVMScriptError(
                    f"unsupported import: {problem}", Span(filename, number, 1, number, len(stmt.rstrip()) + 1),
                    ["a TVMScript file may begin with its dialect imports only, such as "
                     "'from tvm.script import ir as I, tir as T, relax as R'"],
                )
            text = (m["comment"] or "") if m else ""
        out.append(text)
        pos = end + 1
    return "".join(line + "\n" for line in out) + source[pos:]
