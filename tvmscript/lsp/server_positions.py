"""Positions between Python's str indices and an editor's: the language server's one converter.

The analysis (`tvmscript.lsp.analysis`) and the diagnostics count a line's characters as Python
does (code points); LSP counts them in the code units the client and server agreed on at
initialization: UTF-16 by default (so a character beyond the Basic Multilingual Plane, an
emoji in a comment, is 2), or UTF-8 / UTF-32 when the client offers them. Lines are split at
"\\n" only, as the parser and `tvmscript.checking` split them, so line numbers always agree.
"""

from __future__ import annotations

__all__ = ["LineIndex"]


def _units_utf16(text: str) -> int:
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _units_utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _units_utf32(text: str) -> int:
    return len(text)


_COUNTERS = {"utf-16": _units_utf16, "utf-8": _units_utf8, "utf-32": _units_utf32}


class LineIndex:
    """One snapshot of a document's text, answering position conversions for it.

    ``encoding`` is the negotiated LSP position encoding ("utf-16", "utf-8" or "utf-32").
    ASCII lines, nearly every line of a .tvms file, convert without counting."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.lines = text.split("\n")
        self._count = _COUNTERS.get(str(encoding), _units_utf16)

    def line(self, number: int) -> str:
        """The text of 0-based line ``number`` ("" past the end)."""
        if 0 <= number < len(self.lines):
            return self.lines[number]
        return ""

    def to_client(self, line: int, char: int) -> tuple[int, int]:
        """(line, character in client units) of a 0-based (line, str index); clamped to the text."""
        line, char = self.clamp(line, char)
        text = self.lines[line]
        if text.isascii():
            return line, char
        return line, self._count(text[:char])

    def from_client(self, line: int, units: int) -> tuple[int, int]:
        """(line, str index) of a client position; a position inside a character or past the
        line's end is moved to the nearest character boundary at or before it."""
        if line < 0:
            return 0, 0
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return last, len(self.lines[last])
        text = self.lines[line]
        if text.isascii():
            return line, max(0, min(units, len(text)))
        seen = 0
        for index, c in enumerate(text):
            width = self._count(c)
            if seen + width > units:
                return line, index
            seen += width
        return line, len(text)

    def length_to_client(self, line: int, char: int, length: int) -> int:
        """The client-unit length of the ``length`` characters at (line, char)."""
        text = self.line(line)
        if text.isascii():
            return length
        return self._count(text[char : char + length])

    def clamp(self, line: int, char: int) -> tuple[int, int]:
        """The nearest position inside the text."""
        if line < 0:
            return 0, 0
        if line >= len(self.lines):
            line = len(self.lines) - 1
            return line, len(self.lines[line])
        return line, max(0, min(char, len(self.lines[line])))
