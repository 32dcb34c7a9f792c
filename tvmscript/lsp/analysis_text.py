"""Text-level helpers of the language server's analysis, that work whether or not a file parses.

- `LineIndex`: offsets <-> 0-based (line, character) positions;
- `tokenize`: a tolerant tokenizer (comments, strings, numbers, names, ``@``) for semantic
  tokens and for telling whether a position is inside a string or a comment;
- `parse_tolerant`: the syntax tree of a file, repairing (only in a copy) the lines that stop
  the parser, so a file with a typo halfway still has its other functions analysed;
- `call_context`: the call a cursor stands in and which argument it is at, read backwards
  from the cursor (signature help works while the call is still unfinished).
"""

from __future__ import annotations

import bisect
import keyword
import re
from dataclasses import dataclass
from typing import NamedTuple

from ..diagnostics import TVMScriptError

PY_KEYWORDS = frozenset(keyword.kwlist)

_TOKEN = re.compile(
    r"""
     (?P<comment>\#[^\n]*)
    |(?P<string>(?:\b[rRbBuUfF]{1,2})?(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)
        |"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?))
    |(?P<number>0[xXoObB][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?)
    |(?P<name>[A-Za-z_]\w*)
    |(?P<at>@)
    """,
    re.X,
)


class RawToken(NamedTuple):
    """One lexical token: its kind (comment/string/number/name/at), offsets and text (a
    tuple: a 2,000-line file has some 16,000)."""

    kind: str
    start: int
    end: int
    text: str


class LineIndex:
    """Converts between string offsets and 0-based (line, character) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.lines = text.split("\n")

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, offset - self.starts[line]

    def offset(self, line: int, char: int) -> int:
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        return min(self.starts[line] + max(char, 0), len(self.text))

    def line_text(self, line: int) -> str:
        return self.lines[line] if 0 <= line < len(self.lines) else ""


def tokenize(text: str) -> list[RawToken]:
    """Every comment, string, number, name and ``@`` of ``text``, in order (never fails)."""
    return [RawToken(m.lastgroup, m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]


def in_string_or_comment(line_text: str, char: int) -> bool:
    """Whether ``char`` of this line stands inside a string or after a ``#``."""
    for m in _TOKEN.finditer(line_text):
        if m.start() >= char:
            return False
        if m.lastgroup in ("comment", "string") and m.start() < char and (char < m.end() or _unterminated(m)):
            return True
    return False


def _unterminated(m: re.Match) -> bool:
    """A comment runs to the end of its line; a string without its closing quote does too."""
    text = m.group()
    if m.lastgroup == "comment":
        return True
    body = text.lstrip("rRbBuUfF")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    return len(body) < 2 * len(quote) or not body.endswith(quote)


# ----------------------------------------------------------------------------- tolerant parse

MAX_REPAIRS = 6


def parse_tolerant(text: str, filename: str):
    """(statements, comments, repaired_lines) of ``text``: the parser's syntax tree, parsing a copy
    with each line the parser stops at replaced (by ``pass``, or a header that keeps its indented
    body) until it parses or `MAX_REPAIRS` lines were replaced. Line numbers never move, so the
    tree's positions are the document's. Returns (None, [], lines) when it gives up."""
    from ..parser.syntax import parse_syntax

    lines = text.split("\n")
    tries: dict[int, int] = {}
    for _ in range(MAX_REPAIRS + 1):
        try:
            stmts, comments = parse_syntax("\n".join(lines), filename)
            return stmts, comments, sorted(tries)
        except TVMScriptError as err:
            line = _line_to_repair(err, lines, tries)
        except Exception:  # noqa: BLE001 - the parser may fail in unforeseen ways on odd text
            return None, [], sorted(tries)
        if line is None or len(tries) > MAX_REPAIRS:
            break
        attempt = tries.get(line, 0)
        replacement = _repair(lines, line, attempt)
        if replacement is None:
            break
        tries[line] = attempt + 1
        lines[line] = replacement
    return None, [], sorted(tries)


def _line_to_repair(err: TVMScriptError, lines: list[str], tries: dict) -> int | None:
    if err.span is None:
        return None
    line = min(max(err.span.line - 1, 0), len(lines) - 1)
    # A blank line or a comment cannot be the culprit: the statement before it is.
    while line > 0 and (not lines[line].strip() or lines[line].lstrip().startswith("#")):
        line -= 1
    # Inside an unclosed bracket, the parser stops where the next statement begins; the line
    # that opened the bracket is the one being typed.
    opened = _open_bracket_line(lines, line)
    return opened if opened is not None else line


def _open_bracket_line(lines: list[str], line: int) -> int | None:
    """The line of the outermost bracket still open where ``line`` begins, if any."""
    stack: list[int] = []
    for number in range(line):
        text = lines[number]
        hidden = [(m.start(), m.end()) for m in _TOKEN.finditer(text) if m.lastgroup in ("string", "comment")]
        for i, ch in enumerate(text):
            if ch in "([{)]}" and not any(a <= i < b for a, b in hidden):
                if ch in "([{":
                    stack.append(number)
                elif stack:
                    stack.pop()
    return stack[0] if stack else None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _next_is_deeper(lines: list[str], line: int) -> bool:
    own = len(_indent(lines[line]))
    for other in lines[line + 1:]:
        if other.strip() and not other.lstrip().startswith("#"):
            return len(_indent(other)) > own
    return False


def _repair(lines: list[str], line: int, attempt: int) -> str | None:
    """The replacement of a line the parser stopped at, the ``attempt``-th one tried: a header
    missing its colon gets one, then becomes ``if True:``; any other line becomes ``pass``."""
    original = lines[line]
    indent = _indent(original)
    if _next_is_deeper(lines, line):
        options = [original.rstrip() + ":", indent + "if True:"]
    else:
        options = [indent + "pass"]
    return options[attempt] if attempt < len(options) else None


# ----------------------------------------------------------------------------- call context

_CLOSE = {")": "(", "]": "[", "}": "{"}
_CALLEE_BEFORE = re.compile(r"([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*$")
_KEYWORD_AT = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")


@dataclass
class CallContext:
    """The call around a cursor: its dotted callee, the index of the argument the cursor is in
    (commas before it at the call's own depth), and the keyword that argument names, if any."""

    callee: str
    arg_index: int
    keyword: str | None
    open_offset: int


def call_context(text: str, offset: int, max_back: int = 4000) -> CallContext | None:
    """Scans back from ``offset`` for the unclosed ``(`` of a call (skipping strings, comments
    and nested brackets); None when the cursor is not in a call's parentheses."""
    start = max(0, offset - max_back)
    segment = text[start:offset]
    depth_stack: list[str] = []
    commas = 0
    last_comma = None
    for tok_kind, pos, ch in _reverse_chars(segment):
        if tok_kind != "char":
            continue
        if ch in _CLOSE:
            depth_stack.append(ch)
        elif ch in "([{":
            if depth_stack:
                depth_stack.pop()
                continue
            m = _CALLEE_BEFORE.search(segment[:pos]) if ch == "(" else None
            if not m or keyword.iskeyword(m.group(1).split(".")[-1].strip()):
                # a tuple, list, dict or subscript inside the call: its commas are not the call's
                commas, last_comma = 0, None
                continue
            callee = re.sub(r"\s+", "", m.group(1))
            arg_from = (last_comma if last_comma is not None else pos) + 1
            kw = _KEYWORD_AT.match(segment[arg_from:])
            return CallContext(callee, commas, kw.group(1) if kw else None, start + pos)
        elif ch == "," and not depth_stack:
            commas += 1
            if last_comma is None:
                last_comma = pos
        elif ch == "\n" and not depth_stack:
            # A line break at depth 0 ends the search only outside brackets: a statement
            # boundary is a line that starts with no open bracket, which is found by the
            # indentation of the next line being a statement's (cheap approximation: stop at
            # a colon-terminated header).
            if segment[:pos].rstrip().endswith(":"):
                return None
    return None


def _reverse_chars(segment: str):
    """The characters of ``segment`` from its end backwards, as ("char", index, ch), skipping
    those inside strings and comments (found by tokenizing forwards once)."""
    hidden = [False] * len(segment)
    for m in _TOKEN.finditer(segment):
        if m.lastgroup in ("string", "comment"):
            for i in range(m.start(), m.end()):
                hidden[i] = True
    for i in range(len(segment) - 1, -1, -1):
        if not hidden[i]:
            yield "char", i, segment[i]
