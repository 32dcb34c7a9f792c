"""Completion and signature help: what may be written where the cursor is, and the parameters
of the call it is in. Dialect names come from the name table (`analysis_tables`), the file's
own names from its symbol index (`symbols`), with what the built IR knows of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import analysis_tables as tables
from .analysis_hover import dialect_label, function_header, param_name
from .analysis_text import PY_KEYWORDS, call_context, in_string_or_comment
from .symbols import DIALECT_ROOTS

if TYPE_CHECKING:
    from .analysis import Analysis


@dataclass
class Completion:
    label: str
    kind: str  # "function" | "module" | "keyword" | "type" | "variable"
    detail: str = ""
    documentation: str = ""


@dataclass
class Signature:
    label: str
    parameters: list[str]
    active_parameter: int
    documentation: str = ""


def completions(a: Analysis, line: int, char: int) -> list[Completion]:
    """What may be written at ``line:char``: the members of a dialect namespace or of the module
    after a dot, else the names visible there, the dialect roots and Python's keywords."""
    before = a.index.line_text(line)[:char]
    if in_string_or_comment(before, len(before)):
        return []
    m = _MEMBER_BEFORE.search(before)
    if m:
        base = re.sub(r"\s+", "", m.group(1))[:-1]
        return _member_completions(a, base, m.group(2) or "", line, char)
    word = _WORD_BEFORE.search(before)
    partial = word.group(0) if word else ""
    if partial and partial[0].isdigit():
        return []
    return _name_completions(a, partial, line, char, before)


_MEMBER_BEFORE = re.compile(r"((?:[A-Za-z_]\w*\s*\.\s*)+)([A-Za-z_]\w*)?$")
_WORD_BEFORE = re.compile(r"[A-Za-z_0-9]\w*$")
_ENTRY_KINDS = {"function": "function", "type": "type", "module": "module"}


def _member_completions(a: Analysis, base: str, partial: str, line: int, char: int) -> list[Completion]:
    symbols = a.symbols
    root = base.split(".", 1)[0]
    scope = symbols.scope_at(line, char)
    if root in DIALECT_ROOTS and scope.lookup(root, (line, char)) is None:
        out = []
        for entry in tables.name_table().members(base):
            label = entry.name.rsplit(".", 1)[-1]
            if label.startswith(partial):
                detail = entry.signature if entry.kind != "module" else entry.name
                out.append(Completion(label, _ENTRY_KINDS.get(entry.kind, "function"), detail, entry.doc))
        return out
    if "." not in base and (base == "cls" or base in symbols.module_names()):
        return [Completion(f.name, "function", function_header(a, f).split("\n")[-1], f"{dialect_label(f.dialect)} function")
                for f in symbols.functions
                if f.scope.parent is not None and f.scope.parent.kind == "class" and f.name.startswith(partial)]
    return []


def _name_completions(a: Analysis, partial: str, line: int, char: int, before: str) -> list[Completion]:
    indent = len(before) - len(before.lstrip())
    scope = a.symbols.scope_at(line, char, indent)
    out: list[Completion] = []
    seen = set()
    for name, d in sorted(scope.visible((line, char)).items()):
        if not name.startswith(partial) or d.range.start_line == line and d.range.start_char <= char <= d.range.end_char:
            continue
        seen.add(name)
        out.append(Completion(name, _completion_kind(d), _short_detail(a, d)))
    for root in sorted(DIALECT_ROOTS):
        if root not in seen and root.startswith(partial):
            entry = tables.name_table().get(root)
            out.append(Completion(root, "module", root, entry.doc if entry else ""))
    for kw in sorted(PY_KEYWORDS):
        if kw.startswith(partial) and kw not in seen:
            out.append(Completion(kw, "keyword"))
    return out


def _completion_kind(d) -> str:
    return {"function": "function", "module": "module"}.get(d.kind, "variable")


def _short_detail(a: Analysis, d) -> str:
    if d.kind == "function":
        info = a.symbols.function_named(d.name)
        return function_header(a, info).split("\n")[-1] if info else ""
    if d.kind == "module":
        return "IRModule"
    if d.dialect == "relax" and d.kind in ("parameter", "variable"):
        var = a.relax_var(d)
        if var is not None:
            from ..printer import sinfo_text

            return sinfo_text(var.struct_info)
    return d.kind.replace("_", " ")


# ----------------------------------------------------------------------------- signature help


def signature_help(a: Analysis, line: int, char: int) -> Signature | None:
    """The signature of the call ``line:char`` is in, with the parameter being written."""
    offset = a.index.offset(line, char)
    ctx = call_context(a.text, offset)
    if ctx is None:
        return None
    label, params, doc = _callee_signature(a, ctx.callee)
    if params is None:
        return None
    active = ctx.arg_index
    if ctx.keyword is not None:
        names = [param_name(p) for p in params]
        if ctx.keyword in names:
            active = names.index(ctx.keyword)
    if params:
        star = next((i for i, p in enumerate(params) if p.startswith("*") and not p.startswith("**")), None)
        if star is not None and active > star and ctx.keyword is None:
            active = star
        active = min(active, len(params) - 1)
    return Signature(label, list(params), active, doc)


def _callee_signature(a: Analysis, callee: str) -> tuple[str, list[str] | None, str]:
    root, _, rest = callee.partition(".")
    symbols = a.symbols
    if root in DIALECT_ROOTS:
        entry = tables.signature_of(callee)
        if entry is None or entry.params is None:
            return callee, None, ""
        return entry.signature, list(entry.params), entry.doc
    name = rest if rest and (root == "cls" or root in symbols.module_names()) else (callee if not rest else None)
    info = symbols.function_named(name) if name else None
    if info is None:
        return callee, None, ""
    params = []
    for arg in info.node.args:
        text = arg.name + (f": {a.source(arg.annotation)}" if arg.annotation is not None else "")
        params.append(text)
    return f"{callee}({', '.join(params)})", params, f"{dialect_label(info.dialect)} function"
