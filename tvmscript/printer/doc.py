"""The layout layer of the printer: statements in, text out.

The dialect printers (`tir_printer`, `relax_printer`) emit statements into a `Doc`: a line of
code at the current depth, nested blocks, blank lines, and the user's comments. All layout rules
live here: four spaces per level, where comments go (their own lines before a statement, after
the statement on its line, or after a block), and the final newline.
"""

from __future__ import annotations

from contextlib import contextmanager

INDENT = "    "


class Doc:
    __slots__ = ("lines", "depth")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str, comments=None) -> None:
        """One statement; ``comments`` (an ir.Comments) are written around it."""
        pad = INDENT * self.depth
        if comments is not None:
            for c in comments.before:
                self.lines.append(pad + c)
            if comments.trailing:
                text = f"{text}  {comments.trailing}"
        self.lines.append(pad + text)

    def after(self, comments) -> None:
        """Comments that closed a block (after its last statement), at the block's depth."""
        if comments is not None and comments.after:
            pad = INDENT * (self.depth + 1)
            for c in comments.after:
                self.lines.append(pad + c)

    def comment(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text)

    def blank(self) -> None:
        self.lines.append("")

    @contextmanager
    def indent(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
