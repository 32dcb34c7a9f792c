"""What `tvms fmt` writes, shared by the CLI and the language server (`tvmscript.lsp`).

``format_source(text)`` is the canonical text of a file: the printer's output for what the
parser read, with the metadata section (a file keeps its constants) and every comment the
user wrote. `unsafe_to_write` / `check_formatted` is the guard both callers apply to a
formatting: the result must parse again and keep every comment. `tvms fmt` checks before it
writes, and writes nothing if the check fails; the language server answers with the edits
first (`format_unchecked`: the check is a second parse, half the time) and checks right
after, undoing the edits if the check fails (`tvmscript.lsp.server`).
"""

from __future__ import annotations

import gc
from collections import Counter

from . import ir
from .diagnostics import TVMScriptError
from .parser.builder import build
from .parser.comments import is_printer_artifact
from .parser.syntax import parse_syntax
from .printer import to_script

__all__ = ["format_source", "format_unchecked", "check_formatted", "parse_with_comments", "formatted_text",
           "unsafe_to_write", "FormatError"]


class FormatError(ValueError):
    """The text cannot be formatted: it does not parse (``error`` is the diagnostic), or the
    result would lose something (a bug in tvms)."""

    def __init__(self, message: str, error: TVMScriptError | None = None) -> None:
        super().__init__(message)
        self.error = error

    @classmethod
    def unsafe(cls, filename: str, problem: str) -> "FormatError":
        """The error of a formatting that `check_formatted` refused (``problem``)."""
        return cls(f"not reformatting {filename}: {problem}; this is a bug in tvms")


def parse_with_comments(text: str, filename: str = "<string>") -> tuple:
    """(IR, comments) of ``text``: what `parse_source` builds, with the comments the syntax
    pass found (so that checking a formatting needs no second pass over the original)."""
    enabled = gc.isenabled()
    gc.disable()  # as parse_source: the parse allocates many small acyclic objects
    try:
        stmts, comments = parse_syntax(text, filename)
        return build(stmts, comments, text, filename), comments
    finally:
        if enabled:
            gc.enable()


def format_source(text: str, filename: str = "<string>", parsed: tuple | None = None) -> str:
    """The formatted text of ``text``; `FormatError` if it does not parse or could not be
    formatted safely. ``parsed``: ``text``'s `parse_with_comments`, when the caller has it
    (the language server's analysis of the same text)."""
    formatted, comments = format_unchecked(text, filename, parsed)
    if formatted != text:
        problem = check_formatted(comments, formatted)
        if problem:
            raise FormatError.unsafe(filename, problem)
    return formatted


def format_unchecked(text: str, filename: str = "<string>", parsed: tuple | None = None) -> tuple:
    """(the formatted text, the user's comments in ``text``), the result not yet checked:
    for a caller that answers first and runs `check_formatted` after (the language server,
    which undoes the edit if the check fails). `FormatError` if ``text`` does not parse."""
    if parsed is None:
        try:
            parsed = parse_with_comments(text, filename)
        except TVMScriptError as err:
            raise FormatError(f"{filename} does not parse: {err.message}", err) from None
    node, comments = parsed
    return formatted_text(node), _user_comments(comments)


def formatted_text(node) -> str:
    """The text `tvms fmt` writes for a parsed file: with the metadata section, so the file keeps
    its constants, and with the class name the source gave its module."""
    return to_script(node, show_meta=True, name=node.name if isinstance(node, ir.IRModule) else None)


def unsafe_to_write(original: str, formatted: str) -> str | None:
    """Why the formatted text must not replace the original, if it must not: it does not parse,
    or a comment of the original is missing from it."""
    return check_formatted(_user_comments(parse_syntax(original)[1]), formatted)


def _user_comments(comments: list) -> Counter:
    return Counter(c.text.rstrip() for c in comments if not is_printer_artifact(c.text))


def check_formatted(original_comments: Counter, formatted: str) -> str | None:
    """`unsafe_to_write`, the original's comments given (`format_unchecked` returns them): one
    parse of ``formatted`` answers both questions."""
    try:
        _, comments = parse_with_comments(formatted, "<formatted>")
    except TVMScriptError as err:
        return f"the formatted text does not parse ({err})"
    lost = original_comments - _user_comments(comments)
    if lost:
        return f"formatting would lose the comment {next(iter(lost))!r}"
    return None
