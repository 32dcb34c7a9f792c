"""The language server's formatting: `tvms fmt`'s text as the few edits that make it.

`whole_file_edits` is ``textDocument/formatting``: `tvmscript.formatting.format_source` (every
comment kept; `FormatError` when the text does not parse, which the server answers with no
edits and a message). The edit replaces only the lines between the common first and last
lines, so an editor keeps its cursor, folds and marks where nothing changed.

`range_edits` is ``textDocument/rangeFormatting``: the whole functions the range touches (as
`tvmscript.checking.function_units` finds them), each replaced by its text in the formatted
file, found there by name. Formatting happens in the module's context (a function's text
depends on the module: ``cls.f`` references, the metadata section), so the file is formatted
whole and only those functions' lines taken from it. If a touched function cannot be found
exactly once in both texts (a duplicate name, a printer that renamed it), the whole-file
formatting's changes are kept only where they fall within the touched functions' lines.

Edits are (start_line, start_char, end_line, end_char, new_text), 0-based, str indices.
"""

from __future__ import annotations

import difflib

from ..checking import function_units
from ..formatting import FormatError, format_source

__all__ = ["whole_file_edits", "range_edits", "apply_edits", "FormatError"]


def whole_file_edits(text: str, filename: str = "<document>", formatted: str | None = None) -> list:
    """The edits that turn ``text`` into its `tvms fmt` form (``formatted``, when the caller
    has it already); raises `FormatError`."""
    if formatted is None:
        formatted = format_source(text, filename)
    if formatted == text:
        return []
    edit = _segment_edit(_segments(text.split("\n"), True), _segments(formatted.split("\n"), True), 0)
    return [edit] if edit else []


def range_edits(text: str, first_line: int, last_line: int, filename: str = "<document>",
                formatted: str | None = None) -> list:
    """The edits that format the functions touching lines ``first_line``..``last_line``
    (0-based, inclusive); raises `FormatError`. No function touched: no edits."""
    lines = text.split("\n")
    units = function_units(lines)
    touched = [u for u in units if u[0] <= last_line and first_line < u[1]]
    if not touched:
        return []
    if formatted is None:
        formatted = format_source(text, filename)
    if formatted == text:
        return []
    new_lines = formatted.split("\n")
    new_units = function_units(new_lines)
    old_by_name = _unique_by_name(units)
    new_by_name = _unique_by_name(new_units)
    if all(name in old_by_name and name in new_by_name for _, _, name in touched):
        edits = [_unit_edit(lines, new_lines, old_by_name[name], new_by_name[name]) for _, _, name in touched]
        return [e for e in edits if e]
    return _restricted_edits(lines, new_lines, min(u[0] for u in touched), max(u[1] for u in touched))


def apply_edits(text: str, edits: list) -> str:
    """``text`` with ``edits`` (non-overlapping, as these functions make them) applied: what
    the client holds once it has applied them."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out = text
    for sl, sc, el, ec, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:starts[sl] + sc] + new + out[starts[el] + ec:]
    return out


def _unique_by_name(units: list) -> dict:
    counts: dict = {}
    for unit in units:
        counts.setdefault(unit[2], []).append(unit)
    return {name: found[0] for name, found in counts.items() if len(found) == 1}


def _unit_edit(lines: list, new_lines: list, old_unit: tuple, new_unit: tuple):
    """The edit replacing one function's lines (trailing blank lines left as they are) by its
    formatted lines."""
    old = _trimmed(lines, old_unit)
    new = _trimmed(new_lines, new_unit)
    start = old_unit[0]
    ends_doc = start + len(old) == len(lines)
    return _segment_edit(_segments(old, ends_doc), _segments(new, ends_doc), start)


def _trimmed(lines: list, unit: tuple) -> list:
    block = lines[unit[0] : unit[1]]
    while len(block) > 1 and not block[-1].strip():
        block.pop()
    return block


def _restricted_edits(lines: list, new_lines: list, lo: int, hi: int) -> list:
    """The whole-file formatting's line changes that lie within lines [lo, hi)."""
    old_segments = _segments(lines, True)
    new_segments = _segments(new_lines, True)
    matcher = difflib.SequenceMatcher(None, old_segments, new_segments, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal" and lo <= i1 and i2 <= hi and i1 < len(lines):
            edit = _segment_edit(old_segments[i1:i2], new_segments[j1:j2], i1)
            if edit:
                edits.append(edit)
    return edits


def _segments(lines: list, ends_doc: bool) -> list:
    """Lines with their newlines: the last one without, when it ends the document."""
    segments = [line + "\n" for line in lines]
    if ends_doc and segments:
        segments[-1] = lines[-1]
    return segments


def _segment_edit(old: list, new: list, base_line: int):
    """One edit turning the block of line segments ``old`` (its first line at ``base_line``)
    into ``new``, with their common first and last lines left out; None if they are equal."""
    if old == new:
        return None
    p = 0
    limit = min(len(old), len(new))
    while p < limit and old[p] == new[p]:
        p += 1
    s = 0
    while s < limit - p and old[-1 - s] == new[-1 - s]:
        s += 1
    end_index = len(old) - s
    start = (base_line + p, 0)
    if end_index < len(old) or not old:
        end = (base_line + end_index, 0)
    elif old[-1].endswith("\n"):
        end = (base_line + len(old), 0)
    else:
        end = (base_line + len(old) - 1, len(old[-1]))
    return (*start, *end, "".join(new[p : len(new) - s]))
