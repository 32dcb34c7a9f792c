"""The diagnostic of a syntax error: what the parser found where, and what it expected there in
words (``expected an expression, ')' or ','``), or a likelier cause than the token: a bracket
never closed, an import after the header, an unexpected indent, a missing comma.
"""

from __future__ import annotations

from ..diagnostics import Span, TVMScriptError
from .import_header import IMPORT_START
from .lalr_parser import CLOSING, bracket_at, word_end
from .syntax_tree import Tok


_TOKEN_DESCRIPTIONS = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COLON": "':'",
    "COMMA": "','", "DOT": "'.'", "EQUAL": "'='", "_NEWLINE": "a new line",
    "_INDENT": "an indented block", "_DEDENT": "the end of the block", "$END": "the end of the file",
    "RARROW": "'->'", "AT": "'@'", "ADD_OP": "'+' or '-'", "MUL_OP": "an operator",
    "COMP_OP": "a comparison", "SEMICOLON": "';'", "INVERT": "'~'", "POW_OP": "'**'",
    "AUGOP": "an augmented assignment such as '+='", "SHIFT_OP": "'<<' or '>>'", "BIT_OP": "'|', '&' or '^'",
    "STAR": "'*'",
}


_EXPRESSION_START = frozenset({"NAME", "NUMBER", "STRING", "LPAR", "LSQB", "LBRACE"})
_AFTER_OPERAND = frozenset({"ADD_OP", "MUL_OP", "COMP_OP", "COMMA", "DOT", "LPAR", "LSQB"})
_UNARY = frozenset({"ADD_OP", "INVERT", "NOT"})


def _describe(terminals) -> str:
    names = []
    terminals = set(terminals)
    if _EXPRESSION_START <= terminals:
        # Anything that starts an expression is welcome: say so instead of listing them all.
        names.append("an expression")
        terminals -= _EXPRESSION_START | _UNARY
    for t in sorted(terminals):
        if t in _TOKEN_DESCRIPTIONS:
            d = _TOKEN_DESCRIPTIONS[t]
        elif t.isupper() and t.isalpha():
            d = f"'{t.lower()}'"
        else:
            continue
        if d not in names:
            names.append(d)
    if not names:
        return ""
    if len(names) > 6:
        return ", ".join(names[:6]) + ", ..."
    if len(names) > 1:
        return ", ".join(names[:-1]) + " or " + names[-1]
    return names[0]


def syntax_error(tok: Tok, expected: list[str], source: str, filename: str, brackets=()) -> TVMScriptError:
    """The diagnostic for ``tok``, which the parser could not accept; ``expected`` are the
    terminals it would have, ``brackets`` the offsets of the brackets still open there."""
    line, col = tok.line, tok.column
    lines = source.split("\n")
    if brackets:
        # An open bracket swallows the line ends after it, so a missing ')' shows up as an error
        # at the end of the file or at the start of a later statement: report the bracket.
        opener, oline, ocol = bracket_at(source, brackets[-1])
        starts_line = 1 <= line <= len(lines) and not lines[line - 1][: col - 1].strip()
        opener_indent = len(lines[oline - 1]) - len(lines[oline - 1].lstrip()) + 1
        if tok.type in ("$END", "_NEWLINE", "_DEDENT") or (line > oline and starts_line and col <= opener_indent):
            return TVMScriptError(
                f"'{opener}' was never closed", Span(filename, oline, ocol, oline, ocol + 1),
                [f"expected '{CLOSING[opener]}' before the end of the file" if tok.type in ("$END", "_NEWLINE", "_DEDENT")
                 else f"expected '{CLOSING[opener]}' before the statement on line {line}"],
            )
    if 1 <= line <= len(lines) and IMPORT_START.match(lines[line - 1]):
        stmt = lines[line - 1].strip()
        return TVMScriptError(
            "an import statement here: imports may only head the file, before the first decorator",
            Span(filename, line, 1 + len(lines[line - 1]) - len(lines[line - 1].lstrip()), line, len(lines[line - 1]) + 1),
            [f"move '{stmt}' to the top of the file, or delete it (the dialects need no import)"],
        )
    if tok.type == "_INDENT":
        first = len(tok.value) + 1
        line_pos = sum(len(x) + 1 for x in lines[: line - 1])
        return TVMScriptError(
            "unexpected indent",
            Span(filename, line, first, line, word_end(source, line_pos + first - 1) - line_pos + 1),
            ["this line is indented more than the one before it, which does not open a block with ':'"],
        )
    if tok.type == "$END":
        lines = source.rstrip("\n").split("\n")
        line = len(lines)
        col = len(lines[-1]) + 1
        found = "end of file"
    elif tok.type == "_NEWLINE":
        found = "end of line"
    elif tok.type == "_DEDENT":
        found = "end of the indented block"
    else:
        found = repr(tok.value)
    msg = f"invalid syntax: unexpected {found}"
    if _AFTER_OPERAND <= set(expected):
        # After a complete operand the merged LALR states accept every operator and closer;
        # the bracket the token stands in says more about what was meant.
        if brackets:
            closer = CLOSING[source[brackets[-1]]]
            msg += f"; expected ',' or '{closer}' (is a comma missing?)"
        else:
            msg += "; expected an operator, '=' or the end of the line"
        width = len(tok.value) if tok.type not in ("_NEWLINE", "$END", "_DEDENT") else 1
        return TVMScriptError(msg, Span(filename, line, col, line, col + max(width, 1)))
    described = _describe(expected)
    if described:
        msg += f"; expected {described}"
    width = len(tok.value) if tok.type not in ("_NEWLINE", "$END", "_DEDENT") else 1
    return TVMScriptError(msg, Span(filename, line, col, line, col + max(width, 1)))
