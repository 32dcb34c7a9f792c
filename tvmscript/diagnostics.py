"""Source spans and the diagnostics that point at them.

Every error a user can cause by what they wrote is a `TVMScriptError` carrying a `Span`; the CLI
renders it as::

    error: undefined name 'lv9'
      --> model.tvms:12:33
       |
    12 |             lv1 = R.nn.relu(lv9)
       |                             ^^^

and exits with status 1. Nothing here knows about TVM; spans are 1-based, end column exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    filename: str
    line: int
    col: int
    end_line: int
    end_col: int

    def with_filename(self, filename: str) -> "Span":
        return Span(filename, self.line, self.col, self.end_line, self.end_col)

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}"


class TVMScriptError(Exception):
    """An error in the user's program, with the place it was found.

    ``span`` may be given as a `Span` or as a ``(line, col, end_line, end_col)`` tuple, to which
    the parser adds the file name as the error travels up.
    """

    def __init__(self, message: str, span=None, notes: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if isinstance(span, tuple):
            span = Span("<string>", *span)
        self.span: Span | None = span
        self.notes = notes or []
        self.source: str | None = None

    def __str__(self) -> str:
        if self.span is None:
            return self.message
        return f"{self.message} ({self.span})"

    def render(self, source: str | None = None, color: bool = False) -> str:
        """The full diagnostic text: message, location, source line, caret."""
        return render_diagnostic(self.message, self.span, source or self.source, self.notes, color=color)


def render_diagnostic(
    message: str,
    span: Span | None,
    source: str | None,
    notes: list[str] | None = None,
    *,
    color: bool = False,
    severity: str = "error",
) -> str:
    """Format a diagnostic like rustc does: headline, arrow to the location, line and caret."""
    red, blue, bold, reset = ("\x1b[31;1m", "\x1b[34;1m", "\x1b[1m", "\x1b[0m") if color else ("",) * 4
    out = [f"{red}{severity}{reset}{bold}: {message}{reset}"]
    if span is not None:
        line_text = None
        if source is not None:
            lines = source.split("\n")
            if 1 <= span.line <= len(lines):
                line_text = lines[span.line - 1].rstrip("\r")
        gutter = " " * len(str(span.line))
        out.append(f"{gutter}{blue}-->{reset} {span.filename}:{span.line}:{span.col}")
        if line_text is not None:
            expanded = line_text.expandtabs(4)
            col = max(span.col, 1)
            if span.end_line == span.line and span.end_col > span.col:
                width = span.end_col - span.col
            else:
                width = max(len(expanded.rstrip()) - col + 1, 1)
            width = max(1, min(width, max(len(expanded) - col + 1, 1)))
            out.append(f"{gutter} {blue}|{reset}")
            out.append(f"{blue}{span.line} |{reset} {expanded}")
            out.append(f"{gutter} {blue}|{reset} {' ' * (col - 1)}{red}{'^' * width}{reset}")
    for note in notes or []:
        out.append(f"{' ' * (len(str(span.line)) if span else 0)} = note: {note}")
    return "\n".join(out)
