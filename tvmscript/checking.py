"""What `tvms check` reports for a file, shared by the CLI and the language server.

``file_errors(text, name, max_errors)`` finds every independent error of a file: parse errors
(one per function, by blanking out a broken function and parsing again), well-formedness and
struct-info errors, and accesses out of bounds for certain. Each is a `TVMScriptError` with
the span of its place in the text.
"""

from __future__ import annotations

import re

from .diagnostics import TVMScriptError
from .ir import IRModule
from .parser import parse_source
from .ir.tir import PrimFunc
from .compiler.well_formed import well_formed_errors

__all__ = ["file_errors", "function_units"]


def file_errors(text: str, name: str, max_errors: int, parsed=None) -> list:
    """The independent errors of one file, in the order found (at most ``max_errors``);
    ``parsed``: what `parse_source` already made of it, if it could (not parsed again).

    The parser stops at its first error, so after each one the function holding it is blanked
    out (its lines kept empty, so later positions stay right) and the file parsed again: an error
    in another function is independent of it. An error that names a function already blanked out
    follows from that, and is not reported; nor is an error outside every function once one has
    been blanked (an emptied class, say). A file that parses gets the well-formedness check, one
    error per function."""
    lines = text.split("\n")
    units = function_units(lines)
    removed: list = []
    errors: list = []
    while len(errors) < max_errors:
        try:
            node = parsed if parsed is not None else parse_source("\n".join(lines), name)
        except TVMScriptError as err:
            unit = _unit_at(units, err)
            if unit is None:
                if not removed:
                    errors.append(err)
                break
            if not _follows_from(err, removed):
                errors.append(err)
            start, end, fname = unit
            lines[start:end] = [""] * (end - start)
            units.remove(unit)
            removed.append(fname)
            continue
        found = [e for e in well_formed_errors(node) if not _follows_from(e, removed)]
        errors += found + _bounds_errors(node, found, units)
        break
    errors = errors[:max_errors]
    errors.sort(key=lambda e: (e.span.line, e.span.col) if e.span is not None else (0, 0))
    return errors


def _bounds_errors(node, found: list, units: list) -> list:
    """Accesses out of bounds for certain (`compiler.bounds_check.bounds_problems`), in the
    TensorIR functions that are otherwise well formed: a function whose text (its ``units``
    entry, as `function_units` finds them) holds one of the problems ``found`` is skipped."""
    from .compiler.bounds_check import bounds_problems

    lines = [e.span.line - 1 for e in found if e.span is not None]  # 0-based, as the units
    flawed = {name for start, end, name in units if any(start <= line < end for line in lines)}
    funcs = list(node.functions.items()) if isinstance(node, IRModule) else [(None, node)]
    errors: list = []
    for gv, func in funcs:
        if not isinstance(func, PrimFunc):
            continue
        name = gv.name_hint if gv is not None else func.attrs.get("global_symbol", "main")
        if name not in flawed:
            errors += bounds_problems(func, name)
    return errors


_TOP_LINE = re.compile(r"( *)(@|def\s+(\w+)|class\s)")


def function_units(lines: list) -> list:
    """(first line, end line, name) of each function at the outermost level that has functions
    (a module's methods, or a file's lone function), decorators included, 0-based, end excluded.
    Found from the text, so that files with syntax errors can be split too."""
    defs = [(len(m[1]), i) for i, line in enumerate(lines) if (m := _TOP_LINE.match(line)) and m[3]]
    if not defs:
        return []
    indent = min(d for d, _ in defs)
    units: list = []
    current = None  # [first line, name]
    in_decorators = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        depth = len(line) - len(line.lstrip(" "))
        if not stripped or stripped.startswith("#") or depth > indent:
            continue  # inside a function (or a decorator's continuation), or between them
        m = _TOP_LINE.match(line) if depth == indent else None
        kind = "decorator" if m and m[2] == "@" else "def" if m and m[3] else "other"
        if kind == "other" or not in_decorators:
            if current is not None:
                units.append((current[0], i, current[1]))
            current = None if kind == "other" else [i, None]
        if kind == "def":
            current[1] = m[3]
        in_decorators = kind == "decorator"
    if current is not None:
        units.append((current[0], len(lines), current[1]))
    return [(a, b, n) for a, b, n in units if n is not None]


def _unit_at(units: list, err):
    span = err.span
    if span is None:
        return None
    for unit in units:
        if unit[0] <= span.line - 1 < unit[1]:
            return unit
    return None


def _follows_from(err, removed: list) -> bool:
    """Whether an error names a function already reported broken (so it may be a consequence)."""
    text = str(err.message)
    return any(f"'{n}'" in text or f"cls.{n}" in text or f"\"{n}\"" in text for n in removed)
