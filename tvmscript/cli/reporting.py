"""How the ``tvms`` commands tell the user what went wrong.

Everything a user can get wrong (files, names, shapes, dtypes, a module that cannot be built) is
raised as a `Failure` carrying the text to print; `tvmscript.cli.main` prints it as
"error: ..." and exits with status 1. Diagnostics placed in a file are rendered here too, in
color on a terminal. Kept apart from the commands so that every command reports the same way.
"""

from __future__ import annotations

import os
import sys

MAX_ERRORS = 20  # what `tvms check` reports at most, and `tvms run` before it gives up


class Failure(Exception):
    """A user error; ``str(self)`` is the complete text to print (already rendered)."""


class Reported(Failure):
    """A user error whose diagnostics have been printed already: nothing is left to print, and
    the command exits with status 1."""

    def __init__(self) -> None:
        super().__init__("")


def fail(message: str) -> Failure:
    """The `Failure` for a one-line message: ``error: message``."""
    return Failure(f"error: {message}")


def print_failure(failure: Failure) -> None:
    """Print what ``failure`` has to say (a `Reported` failure said it already)."""
    if not isinstance(failure, Reported):
        print(str(failure), file=sys.stderr)


def report(err, source: str | None) -> None:
    """Print a `TVMScriptError` as a diagnostic at its place in ``source``."""
    print(err.render(source, color=stream_is_terminal(sys.stderr)), file=sys.stderr)


def report_found(found: int, stopped: bool) -> None:
    """The closing line of a check that found errors: how many, and whether it stopped early."""
    stopped_text = " (stopped at --max-errors)" if stopped else ""
    print(f"found {found} error{'s' if found != 1 else ''}{stopped_text}", file=sys.stderr)


def stream_is_terminal(stream) -> bool:
    """Whether to color what goes to ``stream``: a terminal, unless NO_COLOR is set."""
    if os.environ.get("NO_COLOR"):
        return False
    return getattr(stream, "isatty", lambda: False)()


def debugging() -> bool:
    """TVMS_DEBUG is set: errors tvms would report as the user's are raised with their traceback."""
    return bool(os.environ.get("TVMS_DEBUG"))
