"""The language server's diagnostics: what `tvms check` reports, fast enough to follow typing.

`tvmscript.checking.file_errors` checks a whole file: a few hundred milliseconds for a
2,000-line module, too slow to answer each keystroke. An edit usually changes one function, and
the errors of the other functions do not depend on it unless they name it. So `Checker` keeps
the errors of its last whole-file check per function (keyed by the function's text) and answers
an edit with `quick`: the functions whose text changed, and the unchanged ones that name a
changed or removed function, are checked again by `file_errors` on a copy of the file in which
every other function is blanked out (its lines kept empty, so positions stay right) except those
they name (transitively, so that `cls.f` and `R.call_tir(cls.f, ...)` resolve); the rest keep
their errors, moved to their new lines. The server publishes that at once, then runs the
whole-file `full` check when typing pauses and publishes it if it differs: the last word is
always exactly `tvms check`'s.

`Problem` is a diagnostic in Python positions (0-based lines, str indices, end exclusive),
with the range LSP wants: the span's own range, or the word under a zero-width span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..checking import file_errors, function_units

__all__ = ["Checker", "Problem", "problem_from_error", "QUICK_LIMIT"]

# More changed functions than this in one edit (a paste, a search-and-replace) and the whole-file
# check is as quick as checking them one by one.
QUICK_LIMIT = 8

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Problem:
    """One error: 0-based (line, str index) start and end, end exclusive; ``message`` holds the
    notes too, one ``note:`` line each."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int
    message: str

    def moved(self, lines: int) -> "Problem":
        return replace(self, start_line=self.start_line + lines, end_line=self.end_line + lines)


def problem_from_error(err, lines: list) -> Problem:
    """The `Problem` of a `TVMScriptError` in a text split into ``lines``: its span converted to
    0-based positions (a span without a place points at the file's first word)."""
    message = str(err.message) + "".join(f"\nnote: {note}" for note in err.notes or [])
    span = err.span
    if span is None:
        line, char, end_line, end_char = 0, 0, 0, 0
    else:
        line, char = span.line - 1, span.col - 1
        end_line, end_char = span.end_line - 1, span.end_col - 1
    line, char = _clamp(lines, line, char)
    end_line, end_char = _clamp(lines, end_line, end_char)
    if (end_line, end_char) <= (line, char):
        end_line, (char, end_char) = line, _word_at(lines[line], char)
    return Problem(line, char, end_line, end_char, message)


def _clamp(lines: list, line: int, char: int) -> tuple[int, int]:
    if line >= len(lines):
        line = len(lines) - 1
        return line, len(lines[line])
    line = max(line, 0)
    return line, max(0, min(char, len(lines[line])))


def _word_at(text: str, char: int) -> tuple[int, int]:
    """(start, end) of what a zero-width span at ``char`` points at: the identifier or number
    around it, else the one character there (the last one at the end of a line), else nothing."""
    for m in _WORD.finditer(text):
        if m.start() <= char < m.end():
            return m.start(), m.end()
    if char < len(text):
        return char, char + 1
    stripped = len(text.rstrip())
    if stripped:
        return stripped - 1, stripped
    return char, char


@dataclass(frozen=True)
class _Unit:
    """One function of a checked text: where it starts, its text (trailing blank lines left
    out, so they do not count as a change) and its problems, relative to its first line."""

    start: int
    text: str
    problems: tuple


@dataclass(frozen=True)
class _Checked:
    """What the last whole-file check found, per function; ``outside`` are the lines that
    belong to no function (the class header, comments between), which must be unchanged for a
    quick check, and ``stray`` its problems outside every function."""

    units: dict
    outside: tuple
    stray: tuple


class Checker:
    """The diagnostics of one document, with the memory that makes edits quick to check.

    Thread-safe in the way the server uses it: `full` replaces the whole memory at once, and
    `quick` reads one consistent memory, so they may run at the same time."""

    def __init__(self, filename: str, max_errors: int = 100) -> None:
        self.filename = filename
        self.max_errors = max_errors
        self._checked: _Checked | None = None

    def full(self, text: str) -> list:
        """Exactly `tvms check`'s errors (`file_errors`), as Problems; remembered for `quick`."""
        lines = text.split("\n")
        problems = [problem_from_error(e, lines) for e in file_errors(text, self.filename, self.max_errors)]
        units = function_units(lines)
        by_unit: dict = {}
        stray = []
        for p in problems:
            unit = _unit_of(units, p.start_line)
            if unit is None:
                stray.append(p)
            else:
                by_unit.setdefault(unit[2], []).append(p.moved(-unit[0]))
        names = [name for _, _, name in units]
        if len(set(names)) == len(names):
            self._checked = _Checked(
                {name: _Unit(a, _unit_text(lines, a, b), tuple(by_unit.get(name, ()))) for a, b, name in units},
                _outside_lines(lines, units),
                tuple(stray),
            )
        else:  # a duplicate name: functions cannot be told apart by name, so no quick checks
            self._checked = None
        return problems

    def quick(self, text: str) -> list | None:
        """The errors of ``text`` from the last `full` check and the functions the edit touched
        (see the module docstring); None when the edit is not one that can be checked so: no
        full check yet, a change outside every function, a duplicate name, errors outside the
        functions, or more than `QUICK_LIMIT` functions to check."""
        checked = self._checked
        if checked is None or checked.stray:
            return None
        lines = text.split("\n")
        units = function_units(lines)
        names = [name for _, _, name in units]
        if len(set(names)) != len(names) or _outside_lines(lines, units) != checked.outside:
            return None
        texts = {name: _unit_text(lines, a, b) for a, b, name in units}
        changed = {n for n, t in texts.items() if n not in checked.units or checked.units[n].text != t}
        dirty = changed | (set(checked.units) - set(texts))
        to_check = set(changed)
        if dirty:
            naming = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(dirty))) + r")\b")
            to_check |= {n for n, t in texts.items() if naming.search(t)}
        if len(to_check) > QUICK_LIMIT:
            return None
        problems = []
        for a, _, name in units:
            if name not in to_check:
                problems += [p.moved(a) for p in checked.units[name].problems]
        if to_check:
            problems += self._recheck(lines, units, texts, to_check)
        problems.sort(key=lambda p: (p.start_line, p.start_char))
        return problems[: self.max_errors]

    def _recheck(self, lines: list, units: list, texts: dict, to_check: set) -> list:
        """`file_errors` of the functions ``to_check``, in a copy of the text holding only them
        and the functions they name (transitively); the problems inside them."""
        keep = _named_closure(to_check, texts)
        reduced = list(lines)
        for a, b, name in units:
            if name not in keep:
                reduced[a:b] = [""] * (b - a)
        found = file_errors("\n".join(reduced), self.filename, self.max_errors)
        spans = [(a, b) for a, b, name in units if name in to_check]
        problems = [problem_from_error(e, lines) for e in found]
        return [p for p in problems if any(a <= p.start_line < b for a, b in spans)]


def _unit_text(lines: list, start: int, end: int) -> str:
    return "\n".join(lines[start:end]).rstrip()


def _unit_of(units: list, line: int):
    for unit in units:
        if unit[0] <= line < unit[1]:
            return unit
    return None


def _outside_lines(lines: list, units: list) -> tuple:
    """The lines outside every function, in order (blank lines left out: they may move)."""
    inside = bytearray(len(lines))
    for a, b, _ in units:
        inside[a:b] = b"\x01" * (b - a)
    return tuple(line for i, line in enumerate(lines) if not inside[i] and line.strip())


def _named_closure(start: set, texts: dict) -> set:
    """``start`` and every function their text names, and every function those name, ..."""
    keep = set(start)
    todo = list(start)
    names = set(texts)
    while todo:
        name = todo.pop()
        for word in set(_WORD.findall(texts[name])) & names:
            if word not in keep:
                keep.add(word)
                todo.append(word)
    return keep
