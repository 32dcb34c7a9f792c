"""Reading the ``.tvms`` files the commands are given, and reporting why one cannot be used.

A file that cannot be read, does not parse, or (for `tvms run`) fails `tvms check` is reported
here, as a diagnostic at its place when it has one, and the caller gets `Reported`: every
command says the same about the same file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .reporting import MAX_ERRORS, Reported, report, report_found


@dataclass(frozen=True)
class Source:
    """The text of a file or of standard input, and the name diagnostics give it."""

    text: str
    name: str


@dataclass(frozen=True)
class Parsed:
    """What a file parsed to (an IRModule or a lone function) and its text."""

    node: object
    text: str


def read(path: str) -> Source:
    """The `Source` of ``path`` ('-': standard input); raises `Reported` after saying why it
    cannot be read (no such file, bad bytes, ...)."""
    from ..api import decode_source
    from ..diagnostics import TVMScriptError

    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            name = "<stdin>"
        else:
            with open(path, "rb") as f:
                data = f.read()
            name = path
        return Source(decode_source(data, name), name)
    except TVMScriptError as err:
        report(err, getattr(err, "source", None))
    except FileNotFoundError:
        print(f"error: no such file: {path}", file=sys.stderr)
    except IsADirectoryError:
        print(f"error: {path} is a directory", file=sys.stderr)
    except PermissionError:
        print(f"error: permission denied: {path}", file=sys.stderr)
    except OSError as err:
        print(f"error: cannot read {path}: {err.strerror or err}", file=sys.stderr)
    raise Reported()


def parse(path: str) -> Parsed:
    """Read and parse one file; raises `Reported` after reporting what went wrong."""
    from ..diagnostics import TVMScriptError
    from ..parser import parse_source

    source = read(path)
    try:
        return Parsed(parse_source(source.text, source.name), source.text)
    except TVMScriptError as err:
        report(err, source.text)
    raise Reported()


def parse_checked(path: str) -> Parsed:
    """Parse one file and check it as `tvms check` does; raises `Reported` after reporting what
    check finds, exactly as check reports it."""
    from ..checking import file_errors
    from ..diagnostics import TVMScriptError
    from ..parser import parse_source

    source = read(path)
    try:
        node = parse_source(source.text, source.name)
    except TVMScriptError:
        node = None  # file_errors finds it again, and the errors after it
    errors = file_errors(source.text, source.name, MAX_ERRORS, parsed=node)
    if not errors:
        return Parsed(node, source.text)
    for err in errors:
        report(err, source.text)
    report_found(len(errors), len(errors) >= MAX_ERRORS)
    raise Reported()
