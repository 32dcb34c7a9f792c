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


@dataclass(frozen=True, slots=True)
class FusedPart:
    """One call of the user's program that a fused call stands for: the binding ``binding`` of
    Relax function ``function``, whose call is at ``span``."""

    function: str
    binding: str
    span: Span | None

    def where(self) -> str:
        return f"in function '{self.function}', binding '{self.binding}'"


@dataclass(frozen=True, slots=True)
class FusedSpan(Span):
    """The span of a call that FuseOps made of several (TVM's ``SequentialSpan``): as a `Span`,
    the place of the part whose result the call returns; ``parts`` are all of them, in order.

    ``params`` says, for each tensor the fused kernel takes (its arguments in order, then its
    result), ``(part index, what)``: the part that uses it first (makes it, for the result)
    and what the tensor is to it (``argument 'x'``, ``the result``), so an error about a kernel
    parameter is told in the user's terms, not in the kernel's (``T_add_intermediate``).

    FuseTIR says, per part, where the kernel's TIR for it is: ``stamped``, the span it wrote on
    the TIR that has no place of its own (what LegalizeOps made), and ``owned``, the spans the
    part's TIR has of its own (a PrimFunc of the user). They are those of the group the kernel
    was first fused for, which may be another group computing the same thing:
    `place_in_kernel` translates them to this call's parts."""

    parts: tuple = ()
    params: tuple = ()
    stamped: tuple = ()
    owned: tuple = ()

    @staticmethod
    def of(parts: tuple, params: tuple, result_part: int) -> "Span | None":
        """The span of a call fused from ``parts``, placed at part ``result_part`` (or the
        first part that has a place); None when no part has one."""
        placed = [p.span for p in parts if p.span is not None]
        if not placed:
            return None
        at = parts[result_part].span or placed[0]
        return FusedSpan(*_fields(at), parts=tuple(parts), params=tuple(params))

    def place_in_kernel(self, span) -> "tuple[FusedPart, Span | None] | None":
        """For ``span``, a place in the kernel's TIR: the part it is in, and the place to show
        (``span`` itself in a user's PrimFunc; None, meaning the part's call, in TIR that has
        no place of its own). None when no part is known to have it."""
        if span is None:
            return None
        for k, part in enumerate(self.parts):
            if k < len(self.owned) and span in self.owned[k]:
                return part, span
            if k < len(self.stamped) and self.stamped[k] == span:
                return part, None
        return None

    def param(self, index: int) -> "tuple[FusedPart, str] | None":
        """(part, what it is to the part) of the kernel's tensor parameter ``index``."""
        if 0 <= index < len(self.params):
            k, name = self.params[index]
            return self.parts[k], name
        return None

    def where(self) -> str:
        return f"in function '{self.parts[0].function}'" if self.parts else ""

    def note(self, kernel: str) -> str:
        """The line saying what was fused."""
        names = ", ".join(f"'{p.binding}' ({p.span})" if p.span else f"'{p.binding}'" for p in self.parts)
        return f"bindings {names} run as one fused kernel, '{kernel}'"


def plain_span(span) -> Span | None:
    """``span`` as a plain `Span` (a `FusedSpan`'s own place)."""
    if span is None or type(span) is Span:
        return span
    return Span(*_fields(span))


def _fields(span: Span) -> tuple:
    return span.filename, span.line, span.col, span.end_line, span.end_col


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
        return render_diagnostic(
            self.message, self.span, self.source if source is None else source, self.notes, color=color
        )


# Lines longer than this are shown as a window around the span, so a caret under column 20000
# of a generated file stays readable.
MAX_SHOWN = 100


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
            shown, caret_at, width = _caret_line(line_text, span)
            out.append(f"{gutter} {blue}|{reset}")
            out.append(f"{blue}{span.line} |{reset} {shown}")
            out.append(f"{gutter} {blue}|{reset} {' ' * caret_at}{red}{'^' * width}{reset}")
    for note in notes or []:
        out.append(f"{' ' * (len(str(span.line)) if span else 0)} = note: {note}")
    return "\n".join(out)


def _caret_line(line_text: str, span: Span) -> tuple[str, int, int]:
    """The line as shown (tabs expanded, long lines cut to a window) and where the caret run
    starts and how wide it is, in shown characters."""
    col = max(span.col, 1)
    if span.end_line == span.line and span.end_col > col:
        end_col = span.end_col
    else:  # a span running past this line: underline the rest of it
        end_col = max(len(line_text.rstrip()) + 1, col + 1)
    # Measure in expanded text so a tab before the span does not shift the caret.
    start = len(line_text[: col - 1].expandtabs(4))
    end = len(line_text[: end_col - 1].expandtabs(4))
    shown = line_text.expandtabs(4)
    if start >= len(shown):
        end = start + 1
    width = max(1, end - start)
    if len(shown) > MAX_SHOWN:
        # Keep the start of the span near the left, with some context before it.
        lo = max(0, min(start - 20, len(shown) - MAX_SHOWN))
        hi = lo + MAX_SHOWN
        prefix = "..." if lo > 0 else ""
        suffix = "..." if hi < len(shown) else ""
        shown_cut = prefix + shown[lo:hi] + suffix
        start_cut = start - lo + len(prefix)
        width = max(1, min(width, hi - start))
        return shown_cut, start_cut, width
    return shown, start, width


def did_you_mean(name: str, candidates) -> list[str]:
    """A note suggesting the closest of ``candidates`` to a misspelt ``name`` (none if nothing
    is close)."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.75)
    return [f"did you mean '{close[0]}'?"] if close else []
