"""The parse loop: text to syntax tree with the tables of `lalr_tables.py`.

It is Lark's LALR algorithm with three things fused into one pass for speed (Lark's own lexer,
post-lexer and parser loop cost about 3x more per token): a single master regular expression
for the tokens, Python's indentation rules (INDENT/DEDENT, newlines inside brackets dropped,
comments collected), and contextual token typing: a spelling that belongs to several terminals
(``*`` is STAR or MUL_OP, ``in`` is IN or COMP_OP, ``for`` is FOR or NAME) takes the first one the
parser can accept in its current state, as Lark's contextual lexer does.

Errors of the text itself (an invalid character, an unterminated string, inconsistent
indentation, mismatched brackets) are reported here; a token the grammar does not accept raises
`SyntaxErrorAt`, which `syntax_errors.syntax_error` turns into a diagnostic.
"""

from __future__ import annotations

import re
import unicodedata

from ..diagnostics import Span, TVMScriptError
from . import ast
from .lalr_tables import Tables
from .syntax_tree import Tok


class SyntaxErrorAt(Exception):
    """A token the parser cannot accept in its state, with the terminals it would have."""

    def __init__(self, tok: Tok, expected: list[str]):
        self.tok = tok
        self.expected = expected


_COMMENT_RE = re.compile(r"#[^\n]*")
_NOT_IN = re.compile(r"[ \t]+in\b")
_IS_NOT = re.compile(r"[ \t]+not\b")
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
CLOSING = {"(": ")", "[": "]", "{": "}"}
_OPENING = {")": "(", "]": "[", "}": "{"}


def bracket_at(source: str, offset: int) -> tuple[str, int, int]:
    """The bracket at ``offset`` with its line and column."""
    return source[offset], source.count("\n", 0, offset) + 1, offset - source.rfind("\n", 0, offset)


_BLANKS = re.compile(r"[ \t\f]*")


def _can_shift(actions, rules, state_stack, ttype: str) -> bool:
    """Whether the parser shifts ``ttype`` after the reductions it triggers from this state."""
    stack = list(state_stack)
    while True:
        act = actions[stack[-1]].get(ttype)
        if act is None:
            return False
        if act >= 0:
            return True
        size = rules[-1 - act][0]
        if size:
            del stack[-size:]
        stack.append(actions[stack[-1]][rules[-1 - act][1]])


def _tab_error(filename: str, line: int, indent_str: str) -> TVMScriptError:
    return TVMScriptError(
        "inconsistent use of tabs and spaces in indentation",
        Span(filename, line, 1, line, len(indent_str) + 1),
        ["indent with spaces only (TVMScript is printed with 4 spaces per level)"],
    )


def word_end(source: str, pos: int) -> int:
    """Where the name or symbol starting at ``pos`` ends (for underlining a statement's start)."""
    m = re.compile(r"\w+|\S").match(source, pos)
    return m.end() if m else pos + 1


def run_parser(source: str, filename: str, tables: Tables, comments: list, brackets: list) -> list:
    """Parse; ``comments`` collects the comments, ``brackets`` holds the offset in ``source`` of
    each bracket open at the point reached (for the diagnostic of one never closed)."""
    actions = tables.actions
    rules = tables.rules
    keywords = tables.keywords
    op_candidates = tables.op_candidates
    op_cache = tables._op_candidates
    state_stack = [tables.start_state]
    value_stack: list = []
    indents = [0]
    alt_indents = [0]  # the same indentation counting a tab as one column, to catch tab/space mixes
    line = 1
    line_start = 0
    pos = 0
    n = len(source)
    match = tables.master.match
    last_tok = None

    def feed(tok: Tok, candidates) -> None:
        # Choose the token's type (first candidate the current state accepts), then shift it,
        # reducing as long as the parser asks to.
        row = actions[state_stack[-1]]
        ttype = None
        for c in candidates:
            if c in row:
                ttype = c
                break
        if ttype is None:
            raise SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
        tok.type = ttype
        while True:
            act = row[ttype]
            if act >= 0:
                state_stack.append(act)
                value_stack.append(tok)
                return
            size, origin, callback = rules[-1 - act]
            if size:
                args = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                args = []
            value_stack.append(callback(args))
            state_stack.append(actions[state_stack[-1]][origin])
            row = actions[state_stack[-1]]
            if ttype not in row:
                raise SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))

    name_only = ("NAME",)
    filtered = tables.filtered
    newline_last = True
    while pos < n:
        m = match(source, pos)
        if m is None:
            pos = _BLANKS.match(source, pos).end()
            col = pos - line_start + 1
            ch = source[pos]
            if ch in "\"'":
                eol = source.find("\n", pos)
                quote = ch * 3 if source.startswith(ch * 3, pos) else ch
                kind = "triple-quoted string" if len(quote) == 3 else "string"
                raise TVMScriptError(
                    f"unterminated {kind} literal: the closing {quote} is missing",
                    Span(filename, line, col, line, (eol if eol >= 0 else n) - line_start + 1),
                )
            what = repr(ch) if ch.isascii() else f"{ch!r} (U+{ord(ch):04X})"
            raise TVMScriptError(f"invalid character {what}", Span(filename, line, col, line, col + 1))
        kind = m.lastgroup
        end = m.end()
        text = m.group(kind)
        start = end - len(text)
        col = start - line_start + 1
        if kind == "WS":  # a backslash continuation
            line += 1
            line_start = end
            pos = end
            continue
        if kind == "NL":
            if "#" in text:
                _collect_comments(text, line, col, comments)
            nl_count = text.count("\n")
            tok_line = line
            line += nl_count
            if nl_count:
                line_start = start + text.rfind("\n") + 1
            pos = end
            if brackets:
                continue
            newline_last = True
            feed(Tok("_NEWLINE", text, tok_line, col, line, end - line_start + 1), ("_NEWLINE",))
            indent_str = text.rsplit("\n", 1)[-1]
            indent = len(indent_str.expandtabs(8))
            alt = len(indent_str)
            if end >= n:
                indent = alt = 0
            if indent > indents[-1]:
                if alt <= alt_indents[-1]:
                    raise _tab_error(filename, line, indent_str)
                indents.append(indent)
                alt_indents.append(alt)
                feed(Tok("_INDENT", indent_str, line, 1, line, indent + 1), ("_INDENT",))
            else:
                if indent < indents[-1] and indent not in indents:
                    first = len(indent_str) + 1
                    raise TVMScriptError(
                        "unindent does not match any outer indentation level",
                        Span(filename, line, first, line, word_end(source, line_start + first - 1) - line_start + 1),
                        [f"this line is indented by {indent} columns; the enclosing blocks are indented by "
                         + ", ".join(str(i) for i in indents)],
                    )
                while indent < indents[-1]:
                    indents.pop()
                    alt_indents.pop()
                    feed(Tok("_DEDENT", "", line, 1, line, indent + 1), ("_DEDENT",))
                if alt != alt_indents[-1]:
                    raise _tab_error(filename, line, indent_str)
            continue
        newline_last = False
        if kind == "NAME":
            candidates = keywords.get(text, name_only)
            if not text.isascii():
                # Python compares identifiers in NFKC form (``ﬁ`` is ``fi``); so do we, so two
                # spellings of one name are one name here and in the code we generate.
                text = unicodedata.normalize("NFKC", text)
            if text == "is" or (text == "not" and "NOT" not in actions[state_stack[-1]]):
                two = (_NOT_IN if text == "not" else _IS_NOT).match(source, end)
                if two and "COMP_OP" in actions[state_stack[-1]]:
                    end = two.end()
                    text = source[start:end]
                    candidates = ("COMP_OP",)
        elif kind == "OP":
            candidates = op_cache.get(text) or op_candidates(text)
            if text in _OPEN:
                brackets.append(start)
            elif text in _CLOSE and brackets:
                opened = brackets.pop()
                if _OPENING[text] != source[opened]:
                    bracket, oline, ocol = bracket_at(source, opened)
                    where = "" if oline == line else f" on line {oline}"
                    raise TVMScriptError(
                        f"closing '{text}' does not match the opening '{bracket}'{where}",
                        Span(filename, line, col, line, col + 1),
                        [f"expected '{CLOSING[bracket]}' to close the '{bracket}' at line {oline}, column {ocol}"],
                    )
        else:
            candidates = (kind,)
            if kind == "STRING" and "\n" in text:
                tok = Tok(kind, text, line, col, line + text.count("\n"), end - (start + text.rfind("\n")))
                line += text.count("\n")
                line_start = start + text.rfind("\n") + 1
                pos = end
                feed(tok, candidates)
                continue
        pos = end
        # Shift the token, reducing as long as the parser asks to (`feed`, inlined: this loop
        # runs for every token). Tokens the rules drop (punctuation, keywords) are not built.
        row = actions[state_stack[-1]]
        for ttype in candidates:
            if ttype in row:
                break
        else:
            tok = Tok(None, text, line, col, line, end - line_start + 1)
            raise SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
        if ttype == "IN" and "COMP_OP" in row and not _can_shift(actions, rules, state_stack, "IN"):
            # `a in b`: the LALR tables reduce on `in` after any operand (merged states allow the
            # `for x in` keyword there), but only the comparison can follow here.
            ttype = "COMP_OP"
        act = row[ttype]
        while act < 0:
            size, origin, callback = rules[-1 - act]
            if size:
                args = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                args = []
            value_stack.append(callback(args))
            state_stack.append(actions[state_stack[-1]][origin])
            row = actions[state_stack[-1]]
            act = row.get(ttype)
            if act is None:
                tok = Tok(ttype, text, line, col, line, end - line_start + 1)
                raise SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
        state_stack.append(act)
        value_stack.append(None if ttype in filtered else Tok(ttype, text, line, col, line, end - line_start + 1))
    # end of input: close the last line and every open block
    if not newline_last and "_NEWLINE" in actions[state_stack[-1]]:
        feed(Tok("_NEWLINE", "\n", line, n - line_start + 1, line + 1, 1), ("_NEWLINE",))
    while len(indents) > 1:
        indents.pop()
        feed(Tok("_DEDENT", "", line, 1, line, 1), ("_DEDENT",))
    end_tok = Tok("$END", "", line, n - line_start + 1, line, n - line_start + 2)
    row = actions[state_stack[-1]]
    if "$END" not in row:
        raise SyntaxErrorAt(end_tok, sorted(k for k in row if k.isupper()))
    while True:
        act = row["$END"]
        if act >= 0:  # accepted
            break
        size, origin, callback = rules[-1 - act]
        if size:
            args = value_stack[-size:]
            del state_stack[-size:]
            del value_stack[-size:]
        else:
            args = []
        value = callback(args)
        state_stack.append(actions[state_stack[-1]][origin])
        value_stack.append(value)
        if state_stack[-1] == tables.end_state:
            return value
        row = actions[state_stack[-1]]
        if "$END" not in row:
            raise SyntaxErrorAt(end_tok, sorted(k for k in row if k.isupper()))
    return value_stack[-1]


def _collect_comments(text: str, line: int, col: int, out: list) -> None:
    last = 0
    for m in _COMMENT_RE.finditer(text):
        start = m.start()
        newlines = text.count("\n", last, start)
        if newlines:
            line += newlines
            col = start - text.rfind("\n", 0, start)
        else:
            col += start - last
        last = start
        out.append(ast.Comment(m.group(0), line, col))
