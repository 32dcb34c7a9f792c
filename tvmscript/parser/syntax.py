"""Text to syntax tree: the Lark parser for ``grammar/tvmscript.lark``.

TVMScript is Python syntax, so this layer knows nothing about TVM: it turns text into a small
Python-like syntax tree (`tvmscript.parser.ast`), keeping every node's source span and every
comment. The tree is built straight from the LALR parser's callbacks (Lark's ``transformer=``
option), with positions taken from tokens, which is several times faster than building Lark's
own tree with ``propagate_positions`` and walking it afterwards. The parser tables are cached on
disk (``cache=True``) so start-up does not rebuild them.
"""

from __future__ import annotations

import ast as _pyast
import os
import re

from lark import Lark, Transformer

from ..diagnostics import Span, TVMScriptError
from . import ast

def _grammar_path() -> str:
    """Where the grammar lives: ``tvmscript/grammar`` once installed, ``grammar/`` in a checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (
        os.path.join(here, os.pardir, "grammar", "tvmscript.lark"),
        os.path.join(here, os.pardir, os.pardir, "grammar", "tvmscript.lark"),
    ):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    raise FileNotFoundError("tvmscript.lark not found next to the tvmscript package")


# ----------------------------------------------------------------------------- tree building


def _span_of_tokens(first: "Tok", last: "Tok") -> tuple[int, int, int, int]:
    return first.line, first.column, last.end_line, last.end_column


class _Builder(Transformer):
    """One callback per grammar rule; each returns a `tvmscript.parser.ast` node."""

    # ---- atoms
    def name(self, c):
        t = c[0]
        return ast.Name(t.value, t.line, t.column, t.end_line, t.end_column)

    def number(self, c):
        t = c[0]
        text = t.value
        try:
            value = _pyast.literal_eval(text.replace("_", "")) if not text.isdigit() else int(text)
        except (ValueError, SyntaxError):
            raise TVMScriptError(f"invalid number literal {text!r}", _tok_span(t)) from None
        return ast.Constant(value, t.line, t.column, t.end_line, t.end_column, text=text)

    def string(self, c):
        parts = []
        for t in c:
            text = t.value
            q = text[0]
            if (q == '"' or q == "'") and "\\" not in text and text[1:2] != q:
                parts.append(text[1:-1])  # the common case, without the cost of literal_eval
                continue
            try:
                parts.append(_pyast.literal_eval(text))
            except (ValueError, SyntaxError):
                raise TVMScriptError("invalid string literal", _tok_span(t)) from None
        first, last = c[0], c[-1]
        value = parts[0] if len(parts) == 1 else type(parts[0])().join(parts)
        return ast.Constant(value, *_span_of_tokens(first, last))

    def empty_tuple(self, c):
        return ast.Tuple([], 0, 0, 0, 0)

    def paren(self, c):
        inner = c[0]
        if isinstance(inner, ast.Tuple):
            inner.parenthesized = True
        return inner

    def tuple_list(self, c):
        items = [x for x in c if x is not None]
        first, last = items[0], items[-1]
        return ast.Tuple(items, first.line, first.col, last.end_line, last.end_col)

    expr_tuple = tuple_list

    def list_(self, c):
        items = c[0] if c and c[0] is not None else []
        line, col, eline, ecol = _span_of_items(items)
        return ast.List(items, line, col, eline, ecol)

    def list_items(self, c):
        return [x for x in c if x is not None]

    def dict_(self, c):
        items = c[0] if c and c[0] is not None else []
        line, col, eline, ecol = _span_of_items([k for k, _ in items])
        return ast.Dict([k for k, _ in items], [v for _, v in items], line, col, eline, ecol)

    def dict_items(self, c):
        return [x for x in c if x is not None]

    def dict_item(self, c):
        return (c[0], c[1])

    def ellipsis(self, c):
        return ast.Constant(Ellipsis, 0, 0, 0, 0)

    # ---- trailers
    def call(self, c):
        func = c[0]
        args, kwargs = [], []
        if len(c) > 1 and c[1] is not None:
            for a in c[1]:
                if isinstance(a, ast.Keyword):
                    kwargs.append(a)
                else:
                    if kwargs and not isinstance(a, ast.Starred):
                        raise TVMScriptError("positional argument follows keyword argument", a.span_tuple())
                    args.append(a)
        end = _last_end(func, args, kwargs)
        return ast.Call(func, args, kwargs, func.line, func.col, end[0], end[1])

    def arguments(self, c):
        return [x for x in c if x is not None]

    def keyword(self, c):
        t, value = c
        return ast.Keyword(t.value, value, t.line, t.column, value.end_line, value.end_col)

    def star_arg(self, c):
        v = c[0]
        return ast.Starred(v, v.line, v.col, v.end_line, v.end_col)

    def star_kwargs(self, c):
        v = c[0]
        raise TVMScriptError("'**' arguments are not supported in TVMScript", v.span_tuple())

    def subscript(self, c):
        value, items = c
        if len(items) == 1 and not items[0][1]:
            index = items[0][0]
        else:
            elts = [i for i, _ in items]
            index = ast.Tuple(elts, elts[0].line, elts[0].col, elts[-1].end_line, elts[-1].end_col)
        last = items[-1][0]
        return ast.Subscript(value, index, value.line, value.col, last.end_line, last.end_col + 1)

    def subscripts(self, c):
        items = [x for x in c if x is not None]
        trailing_comma = len(items) == 1 and len(c) > 1
        return [(x, trailing_comma) for x in items]

    def slice(self, c):
        lower, upper, step = (list(c) + [None, None, None])[:3]
        anchor = lower or upper or step
        if anchor is None:
            return ast.Slice(None, None, None, 0, 0, 0, 0)
        return ast.Slice(lower, upper, step, anchor.line, anchor.col, anchor.end_line, anchor.end_col)

    def attribute(self, c):
        value, t = c
        return ast.Attribute(value, t.value, value.line, value.col, t.end_line, t.end_column)

    # ---- operators
    def operation(self, c):
        """Order a flat operand/operator sequence by Python's precedence (a Pratt parser)."""
        node, i = _parse_operation(c, 0, 0)
        assert i == len(c)
        return node

    def ternary(self, c):
        body, test, orelse = c
        return ast.IfExp(test, body, orelse, body.line, body.col, orelse.end_line, orelse.end_col)

    # ---- statements
    def expr_stmt(self, c):
        v = c[0]
        return ast.ExprStmt(v, v.line, v.col, v.end_line, v.end_col)

    def assign(self, c):
        target, value = c
        return ast.Assign(target, value, target.line, target.col, value.end_line, value.end_col)

    def ann_assign(self, c):
        target, annotation, value = c
        last = value or annotation
        return ast.AnnAssign(target, annotation, value, target.line, target.col, last.end_line, last.end_col)

    def aug_assign(self, c):
        target, op, value = c
        return ast.AugAssign(target, op.value[:-1], value, target.line, target.col, value.end_line, value.end_col)

    def return_stmt(self, c):
        v = c[0]
        if v is None:
            return ast.Return(None, 0, 0, 0, 0)
        return ast.Return(v, v.line, max(v.col - 7, 1), v.end_line, v.end_col)

    def pass_stmt(self, c):
        return ast.Pass(0, 0, 0, 0)

    def assert_stmt(self, c):
        test, msg = c
        return ast.Assert(test, msg, test.line, max(test.col - 7, 1), test.end_line, test.end_col)

    def suite(self, c):
        return [s for s in c if s is not None]

    def decorator(self, c):
        return c[0]

    def decorators(self, c):
        return list(c)

    def funcdef(self, c):
        decorators, name, params, returns, body = c
        return ast.FunctionDef(
            name.value, params or [], returns, body, decorators or [],
            name.line, name.column, name.end_line, name.end_column,
        )

    def parameters(self, c):
        return [p for p in c if p is not None]

    def param(self, c):
        name, annotation, default = c
        return ast.Arg(name.value, annotation, default, name.line, name.column, name.end_line, name.end_column)

    def classdef(self, c):
        decorators, name, bases, body = c
        return ast.ClassDef(
            name.value, body, decorators or [], name.line, name.column, name.end_line, name.end_column
        )

    def for_stmt(self, c):
        target, iter_, body = c
        return ast.For(target, iter_, body, target.line, target.col, iter_.end_line, iter_.end_col)

    def with_stmt(self, c):
        item, target, body = c
        return ast.With(item, target, body, item.line, item.col, item.end_line, item.end_col)

    def if_stmt(self, c):
        test, body = c[0], c[1]
        elifs = [x for x in c[2:-1] if x is not None]
        orelse = c[-1]
        for elif_test, elif_body in reversed(elifs):
            node = ast.If(elif_test, elif_body, orelse or [], elif_test.line, elif_test.col,
                          elif_test.end_line, elif_test.end_col)
            orelse = [node]
        return ast.If(test, body, orelse or [], test.line, test.col, test.end_line, test.end_col)

    def elif_clause(self, c):
        return (c[0], c[1])

    def while_stmt(self, c):
        test, body = c
        return ast.While(test, body, test.line, test.col, test.end_line, test.end_col)

    def start(self, c):
        return [s for s in c if s is not None and not isinstance(s, Tok)]


_BINARY_PRECEDENCE = {
    "or": 1, "and": 2,
    "<": 4, ">": 4, "==": 4, ">=": 4, "<=": 4, "!=": 4, "in": 4, "not in": 4, "is": 4, "is not": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9,
    "*": 10, "/": 10, "//": 10, "%": 10, "@": 10, "**": 12,
}
_NOT_PRECEDENCE = 3
_UNARY_PRECEDENCE = 11
_COMPARISON = 4


def _parse_operation(items: list, i: int, min_prec: int):
    """Parse ``items[i:]`` (operands and operator tokens) into one expression; return it and the
    index after it. Binary operators bind left to right except ``**``; comparisons chain and
    ``and``/``or`` flatten, as in Python's own AST."""
    first = items[i]
    if isinstance(first, Tok):
        op = first.value
        prec = _NOT_PRECEDENCE if op == "not" else _UNARY_PRECEDENCE
        operand, i = _parse_operation(items, i + 1, prec)
        left = ast.UnaryOp(op, operand, first.line, first.column, operand.end_line, operand.end_col)
    else:
        left = first
        i += 1
    n = len(items)
    while i < n:
        op = " ".join(items[i].value.split())
        prec = _BINARY_PRECEDENCE[op]
        if prec < min_prec:
            break
        if prec == _COMPARISON:
            ops, comparators = [], []
            while i < n:
                op = " ".join(items[i].value.split())
                if _BINARY_PRECEDENCE[op] != _COMPARISON:
                    break
                rhs, i = _parse_operation(items, i + 1, _COMPARISON + 1)
                ops.append(op)
                comparators.append(rhs)
            left = ast.Compare(left, ops, comparators, left.line, left.col, rhs.end_line, rhs.end_col)
            continue
        rhs, i = _parse_operation(items, i + 1, prec if op == "**" else prec + 1)
        if op in ("and", "or"):
            values = left.values + [rhs] if isinstance(left, ast.BoolOp) and left.op == op else [left, rhs]
            left = ast.BoolOp(op, values, left.line, left.col, rhs.end_line, rhs.end_col)
        else:
            left = ast.BinOp(op, left, rhs, left.line, left.col, rhs.end_line, rhs.end_col)
    return left, i


def _tok_span(t: "Tok") -> tuple[int, int, int, int]:
    return t.line, t.column, t.end_line, t.end_column


def _span_of_items(items: list) -> tuple[int, int, int, int]:
    if not items:
        return 0, 0, 0, 0
    return items[0].line, items[0].col, items[-1].end_line, items[-1].end_col


def _last_end(func, args, kwargs) -> tuple[int, int]:
    last = (kwargs or args or [func])[-1]
    return last.end_line, last.end_col + 1


# ----------------------------------------------------------------------------- lexer and driver
#
# Lark builds the LALR(1) tables and the rule callbacks from grammar/tvmscript.lark; the loop
# below runs them. It is Lark's LALR algorithm with three things fused into one pass for speed
# (Lark's own lexer, post-lexer and parser loop cost about 3x more per token): a single master
# regular expression for the tokens, Python's indentation rules (INDENT/DEDENT, newlines inside
# brackets dropped, comments collected), and contextual token typing: a spelling that belongs to
# several terminals (``*`` is STAR or MUL_OP, ``in`` is IN or COMP_OP, ``for`` is FOR or NAME)
# takes the first one the parser can accept in its current state, as Lark's contextual lexer does.


class Tok:
    """A token, with the attributes the rule callbacks read (a light stand-in for lark.Token)."""

    __slots__ = ("type", "value", "line", "column", "end_line", "end_column")

    def __init__(self, type, value, line, column, end_line, end_column):
        self.type = type
        self.value = value
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column

    def __repr__(self) -> str:
        return f"Tok({self.type}, {self.value!r}, {self.line}:{self.column})"


_OPERATORS = (
    r"\*\*=|//=|>>=|<<=|\.\.\.|->|\*\*|//|<<|>>|<=|>=|==|!=|\+=|-=|\*=|/=|%=|@=|&=|\|=|\^="
    r"|[-+*/%@&|^~<>()\[\]{}:;,.=]"
)


class _Tables:
    """The grammar compiled for the driver: master regex, candidate terminals per spelling,
    integer action tables and per-rule (length, result symbol, callback)."""

    def __init__(self, lark: Lark) -> None:
        terms = {t.name: t for t in lark.terminals}
        self.terminal_patterns = {
            name: re.compile(t.pattern.to_regexp(), re.S if "STRING" in name else 0)
            for name, t in terms.items()
        }
        self.keywords: dict[str, list[str]] = {}
        for name, t in terms.items():
            value = t.pattern.value
            if type(t.pattern).__name__ == "PatternStr" and value.isidentifier():
                self.keywords.setdefault(value, []).append(name)
        for word in ("in", "is"):
            self.keywords.setdefault(word, []).append("COMP_OP")
        for names in self.keywords.values():
            names.append("NAME")
        self.master = re.compile(
            r"(?P<WS>[ \t\f]+|\\[ \t\f]*\r?\n)"
            rf"|(?P<NL>{terms['_NEWLINE'].pattern.to_regexp()})"
            rf"|(?P<STRING>{terms['STRING'].pattern.to_regexp()})"
            rf"|(?P<NUMBER>{terms['NUMBER'].pattern.to_regexp()})"
            rf"|(?P<NAME>{terms['NAME'].pattern.to_regexp()})"
            rf"|(?P<OP>{_OPERATORS})",
            re.S,
        )
        self._op_candidates: dict[str, list[str]] = {}
        self._terms = terms

        table = lark.parser.parser.parser.parse_table
        callbacks = lark.parser.parser.parser.callbacks
        rules: list = []
        rule_index: dict = {}
        self.actions: dict[int, dict[str, int]] = {}
        for state, row in table.states.items():
            out = {}
            for symbol, (action, arg) in row.items():
                if action.name == "Shift":
                    out[symbol] = arg
                else:
                    if arg not in rule_index:
                        rule_index[arg] = len(rules)
                        rules.append((len(arg.expansion), arg.origin.name, callbacks[arg]))
                    out[symbol] = -1 - rule_index[arg]
            self.actions[state] = out
        self.rules = rules
        self.start_state = table.start_states["start"]
        self.end_state = table.end_states["start"]

    def op_candidates(self, text: str) -> list[str]:
        found = self._op_candidates.get(text)
        if found is None:
            found = [
                name for name, pat in self.terminal_patterns.items()
                if name not in ("NAME", "_NEWLINE") and not name.startswith("__IGNORE") and pat.fullmatch(text)
            ]
            self._op_candidates[text] = found
        return found


_LARK: Lark | None = None
_TABLES: _Tables | None = None


def _tables() -> _Tables:
    global _LARK, _TABLES
    if _TABLES is None:
        with open(_grammar_path(), encoding="utf-8") as f:
            grammar = f.read()
        _LARK = Lark(
            grammar,
            parser="lalr",
            lexer="basic",
            transformer=_Builder(),
            maybe_placeholders=True,
            cache=_cache_file(),
        )
        _TABLES = _Tables(_LARK)
    return _TABLES


def _cache_file() -> str | bool:
    """A per-user cache file for the parser tables; falls back to Lark's temp-dir cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    try:
        import lark

        os.makedirs(os.path.join(base, "tvms"), exist_ok=True)
        return os.path.join(base, "tvms", f"grammar-lark{lark.__version__}.cache")
    except OSError:
        return True


class _SyntaxErrorAt(Exception):
    def __init__(self, tok: Tok, expected: list[str]):
        self.tok = tok
        self.expected = expected


_COMMENT_RE = re.compile(r"#[^\n]*")
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")


def _run(source: str, filename: str, tables: _Tables, comments: list) -> list:
    actions = tables.actions
    rules = tables.rules
    keywords = tables.keywords
    op_candidates = tables.op_candidates
    state_stack = [tables.start_state]
    value_stack: list = []
    indents = [0]
    paren = 0
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
            raise _SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
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
                raise _SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))

    name_only = ("NAME",)
    while pos < n:
        m = match(source, pos)
        if m is None:
            col = pos - line_start + 1
            raise TVMScriptError(f"invalid character {source[pos]!r}", Span(filename, line, col, line, col + 1))
        kind = m.lastgroup
        text = m.group()
        end = m.end()
        col = pos - line_start + 1
        if kind == "WS":
            if "\n" in text:
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
                line_start = pos + text.rfind("\n") + 1
            pos = end
            if paren:
                continue
            tok = Tok("_NEWLINE", text, tok_line, col, line, end - line_start + 1)
            feed(tok, ("_NEWLINE",))
            indent_str = text.rsplit("\n", 1)[-1]
            indent = len(indent_str.expandtabs(8))
            if end >= n:
                indent = 0
            if indent > indents[-1]:
                indents.append(indent)
                feed(Tok("_INDENT", indent_str, line, 1, line, indent + 1), ("_INDENT",))
            else:
                while indent < indents[-1]:
                    indents.pop()
                    feed(Tok("_DEDENT", "", line, 1, line, indent + 1), ("_DEDENT",))
                if indent != indents[-1]:
                    raise TVMScriptError(
                        "unindent does not match any outer indentation level",
                        Span(filename, line, 1, line, indent + 1),
                    )
            continue
        if kind == "NAME":
            candidates = keywords.get(text, name_only)
            if text in ("not", "is") and "NOT" not in actions[state_stack[-1]] or text == "is":
                two = re.compile(r"[ \t]+in\b" if text == "not" else r"[ \t]+not\b").match(source, end)
                if two and "COMP_OP" in actions[state_stack[-1]]:
                    end = two.end()
                    text = source[pos:end]
                    candidates = ("COMP_OP",)
        elif kind == "OP":
            candidates = op_candidates(text)
            if text in _OPEN:
                paren += 1
            elif text in _CLOSE and paren:
                paren -= 1
        else:
            candidates = (kind,)
            if kind == "STRING" and "\n" in text:
                tok = Tok(kind, text, line, col, line + text.count("\n"), end - (pos + text.rfind("\n")))
                line += text.count("\n")
                line_start = pos + text.rfind("\n") + 1
                pos = end
                feed(tok, candidates)
                last_tok = tok
                continue
        tok = Tok(None, text, line, col, line, end - line_start + 1)
        feed(tok, candidates)
        last_tok = tok
        pos = end
    # end of input: close the last line and every open block
    if last_tok is not None and (not value_stack or not isinstance(value_stack[-1], Tok) or value_stack[-1].type != "_NEWLINE"):
        if "_NEWLINE" in actions[state_stack[-1]]:
            feed(Tok("_NEWLINE", "\n", line, n - line_start + 1, line + 1, 1), ("_NEWLINE",))
    while len(indents) > 1:
        indents.pop()
        feed(Tok("_DEDENT", "", line, 1, line, 1), ("_DEDENT",))
    end_tok = Tok("$END", "", line, n - line_start + 1, line, n - line_start + 2)
    row = actions[state_stack[-1]]
    if "$END" not in row:
        raise _SyntaxErrorAt(end_tok, sorted(k for k in row if k.isupper()))
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
            raise _SyntaxErrorAt(end_tok, sorted(k for k in row if k.isupper()))
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


def parse_syntax(source: str, filename: str = "<string>") -> tuple[list[ast.Stmt], list[ast.Comment]]:
    """Parse TVMScript text into top-level syntax-tree statements and the list of comments."""
    if not source.endswith("\n"):
        source += "\n"
    tables = _tables()
    comments: list[ast.Comment] = []
    try:
        stmts = _run(source, filename, tables, comments)
    except TVMScriptError as err:
        if err.span is not None and err.span.filename == "<string>":
            err.span = err.span.with_filename(filename)
        raise
    except _SyntaxErrorAt as err:
        raise _syntax_error(err.tok, err.expected, source, filename) from None
    except RecursionError:
        raise TVMScriptError("expression nested too deeply", Span(filename, 1, 1, 1, 2)) from None
    return stmts, comments


_TOKEN_DESCRIPTIONS = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COLON": "':'",
    "COMMA": "','", "DOT": "'.'", "EQUAL": "'='", "_NEWLINE": "a new line",
    "_INDENT": "an indented block", "_DEDENT": "the end of the block", "$END": "the end of the file",
    "RARROW": "'->'", "AT": "'@'", "ADD_OP": "'+' or '-'", "MUL_OP": "an operator",
    "COMP_OP": "a comparison", "SEMICOLON": "';'",
}


def _describe(terminals) -> str:
    names = []
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
        names = names[:6] + ["..."]
    return ", ".join(names)


def _syntax_error(tok: Tok, expected: list[str], source: str, filename: str) -> TVMScriptError:
    line, col = tok.line, tok.column
    if tok.type == "_INDENT" or (tok.type is None and False):
        return TVMScriptError("unexpected indent", Span(filename, line, 1, line, col))
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
    described = _describe(expected)
    if described:
        msg += f"; expected {described}"
    width = len(tok.value) if tok.type not in ("_NEWLINE", "$END", "_DEDENT") else 1
    return TVMScriptError(msg, Span(filename, line, col, line, col + max(width, 1)))
