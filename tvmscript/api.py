"""The Python entry points for reading TVMScript: `parse`, `load`, `from_source`."""

from __future__ import annotations

import os

from .diagnostics import TVMScriptError


def parse(source: str, filename: str = "<string>"):
    """Parse TVMScript text into an `IRModule` (or a function, for a file holding one)."""
    from .parser import parse_source

    return parse_source(source, filename)


def load(path: str | os.PathLike):
    """Read and parse a ``.tvms`` file."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return parse(decode_source(data, path), filename=path)


def decode_source(data: bytes, filename: str) -> str:
    """UTF-8 text of a source file, or a diagnostic for binary / non-UTF-8 input."""
    from .diagnostics import Span

    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise TVMScriptError("this is a binary file, not TVMScript text", Span(filename, line, 1, line, 2))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        line_start = data.rfind(b"\n", 0, err.start) + 1
        # The column counts characters, as everywhere else: decode the line's good prefix.
        col = len(data[line_start:err.start].decode("utf-8", "replace")) + 1
        diag = TVMScriptError(
            f"the file is not valid UTF-8 (byte 0x{data[err.start]:02x})", Span(filename, line, col, line, col + 1),
            ["TVMScript files are UTF-8 text; re-save the file as UTF-8"],
        )
        # What the user would see in an editor, so the diagnostic can show the line.
        diag.source = data.decode("utf-8", "replace")
        raise diag from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")
