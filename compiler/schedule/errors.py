"""`ScheduleError`: a schedule primitive's precondition that does not hold."""

from __future__ import annotations

import os

from tvmscript.diagnostics import render_diagnostic


class ScheduleError(Exception):
    """Raised by a primitive whose preconditions fail; the schedule is left unchanged.

    The message names the primitive, the block or loop, and the reason; when the block came
    from a file, `render()` also shows its line with a caret (``str()`` gives ``file:line:col``)."""

    def __init__(self, primitive: str, subject: str, reason: str, span=None) -> None:
        self.primitive, self.subject, self.reason, self.span = primitive, subject, reason, span
        where = f" (block at {span})" if span is not None else ""
        super().__init__(f"ScheduleError: {primitive}: {subject}: {reason}{where}")

    def render(self, color: bool = False) -> str:
        """The diagnostic with the block's source line, when its file can be read."""
        message = f"{self.primitive}: {self.subject}: {self.reason}"
        source = None
        if self.span is not None and os.path.isfile(self.span.filename):
            try:
                with open(self.span.filename, encoding="utf-8") as f:
                    source = f.read()
            except OSError:
                source = None
        return render_diagnostic(message, self.span, source, [], color=color)
