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
import operator
import os
import re
import unicodedata

from ..diagnostics import Span, TVMScriptError
from ..grammar import GRAMMAR_FILE
from . import ast


# ----------------------------------------------------------------------------- tree building


def _span_of_tokens(first: "Tok", last: "Tok") -> tuple[int, int, int, int]:
    return first.line, first.column, last.end_line, last.end_column


class _Builder:
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
        if len({type(p) for p in parts}) > 1:
            raise TVMScriptError("cannot mix bytes and str literals", _span_of_tokens(first, last))
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
        # `_argument` | `arguments "," _argument` | `arguments ","`: extend the list in place.
        if isinstance(c[0], list):
            items = c[0]
            items.extend(c[1:])
            return items
        return list(c)

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

    def lambda_(self, c):
        params, body = c
        names = params or []
        first = names[0] if names else body
        return ast.Lambda([t.value for t in names], body, first.line, first.column if names else body.col,
                          body.end_line, body.end_col)

    def lambda_params(self, c):
        return [t for t in c if t is not None]

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
        kw, v = c  # the RETURN token is kept (a named terminal) for the statement's position
        if v is None:
            return ast.Return(None, kw.line, kw.column, kw.end_line, kw.end_column)
        return ast.Return(v, kw.line, kw.column, v.end_line, v.end_col)

    def pass_stmt(self, c):
        kw = c[0]
        return ast.Pass(kw.line, kw.column, kw.end_line, kw.end_column)

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
    chain = None
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
            # `a and b and c` flattens; a parenthesized `(a and b) and c` does not (as in Python):
            # only a BoolOp built by this loop is extended.
            values = left.values + [rhs] if left is chain and left.op == op else [left, rhs]
            left = chain = ast.BoolOp(op, values, left.line, left.col, rhs.end_line, rhs.end_col)
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
    integer action tables and per-rule (length, result symbol, callback).

    Built from `grammar_spec` (plain data: what Lark computed from the grammar), which is cached
    on disk keyed by the grammar's hash, so a start-up does not even import Lark."""

    def __init__(self, spec: dict) -> None:
        terms = spec["terminals"]  # name -> (regexp, literal string or None)
        self.terminal_patterns = {
            name: re.compile(regexp, re.S if "STRING" in name else 0) for name, (regexp, _) in terms.items()
        }
        self.keywords: dict[str, list[str]] = {}
        for name, (_, literal) in terms.items():
            if literal is not None and literal.isidentifier():
                self.keywords.setdefault(literal, []).append(name)
        for word in ("in", "is"):
            self.keywords.setdefault(word, []).append("COMP_OP")
        for names in self.keywords.values():
            names.append("NAME")
        # Leading blanks are part of every match, so they cost no loop iteration of their own.
        self.master = re.compile(
            r"[ \t\f]*(?:(?P<WS>\\[ \t\f]*\r?\n)"
            rf"|(?P<NL>{terms['_NEWLINE'][0]})"
            rf"|(?P<STRING>{terms['STRING'][0]})"
            rf"|(?P<NUMBER>{terms['NUMBER'][0]})"
            rf"|(?P<NAME>{terms['NAME'][0]})"
            rf"|(?P<OP>{_OPERATORS}))",
            # No re.S: a '...' or "..." string ends on its line (the triple-quoted alternative
            # carries its own (?s:...) flag), so an unclosed quote is reported where it is.
        )
        self.filtered = frozenset(spec["filtered"])
        self._op_candidates: dict[str, list[str]] = {}
        builder = _Builder()
        self.actions = spec["actions"]
        self.rules = [(r[0], r[1], _rule_callback(r, builder)) for r in spec["rules"]]
        self.start_state = spec["start"]
        self.end_state = spec["end"]

    def op_candidates(self, text: str) -> list[str]:
        found = self._op_candidates.get(text)
        if found is None:
            found = [
                name for name, pat in self.terminal_patterns.items()
                if name not in ("NAME", "_NEWLINE") and not name.startswith("__IGNORE") and pat.fullmatch(text)
            ]
            self._op_candidates[text] = found
        return found


def grammar_spec(grammar: str) -> dict:
    """Compile the grammar with Lark and keep what the driver needs, as plain data."""
    from lark import Lark  # imported only when the table cache is cold

    lark = Lark(grammar, parser="lalr", lexer="basic", maybe_placeholders=True)
    terms = {}
    for t in lark.terminals:
        literal = t.pattern.value if type(t.pattern).__name__ == "PatternStr" else None
        terms[str(t.name)] = (str(t.pattern.to_regexp()), None if literal is None else str(literal))
    table = lark.parser.parser.parser.parse_table
    rules: list = []
    rule_index: dict = {}
    actions: dict = {}
    for state, row in table.states.items():
        out = {}
        for symbol, (action, arg) in row.items():
            if action.name == "Shift":
                out[str(symbol)] = int(arg)
            else:
                if arg not in rule_index:
                    rule_index[arg] = len(rules)
                    rules.append(_rule_shape(arg))
                out[str(symbol)] = -1 - rule_index[arg]
        actions[int(state)] = out
    # Terminals every rule drops from its children (punctuation, keywords, newlines).
    kept, dropped = set(), set()
    for rule in lark.rules:
        for sym in rule.expansion:
            if sym.is_term:
                (dropped if sym.filter_out else kept).add(str(sym.name))
    return {
        "terminals": terms, "actions": actions, "rules": rules, "filtered": sorted(dropped - kept),
        "start": table.start_states["start"], "end": table.end_states["start"],
    }


def _rule_shape(rule) -> tuple:
    """How one grammar rule shapes its children, following Lark's conventions: anonymous tokens
    (punctuation, keywords) are dropped, rules named ``_x`` are spliced into their parent,
    ``[optional]`` parts absent from the text become None, and a ``?rule`` with one child is
    that child (unless the alternative has an alias)."""
    expansion = rule.expansion
    empty = rule.options.empty_indices
    if empty:
        counts = [len(ones) for ones in "".join(str(int(b)) for b in empty).split("0")]
    else:
        counts = [0] * (len(expansion) + 1)
    plan = []  # (index, splice, nones before)
    nones = 0
    for i, sym in enumerate(expansion):
        nones += counts[i]
        if not (sym.is_term and sym.filter_out):
            plan.append((i, not sym.is_term and sym.name.startswith("_"), nones))
            nones = 0
    trailing = nones + counts[len(expansion)]
    name = rule.alias or rule.origin.name
    expand1 = bool(rule.options.expand1 and not rule.alias)
    return (len(expansion), str(rule.origin.name), str(name), expand1, tuple(plan), trailing)


_FIRST = operator.itemgetter(0)


class _Splice(list):
    """The children of an inlined rule (``_stmt``, ``__suite_plus_4``), spliced into its parent."""

    __slots__ = ()


def _place_children(children: list, args: list, plan, trailing: int) -> list:
    """``children`` extended with a rule's reduced values as `_rule_shape`'s plan says: spliced
    lists inlined, absent optionals as None."""
    for i, splice, nb in plan:
        if nb:
            children.extend([None] * nb)
        if splice:
            children.extend(args[i])
        else:
            children.append(args[i])
    if trailing:
        children.extend([None] * trailing)
    return children


def _rule_callback(shape: tuple, builder: "_Builder"):
    """The reduce action of one grammar rule (see `_rule_shape`): shape the children, then call
    the `_Builder` method named after the rule."""
    size, _, name, expand1, plan, trailing = shape
    splice_result = name.startswith("_")
    method = None if splice_result else getattr(builder, name, None)
    simple = all(not sp and not nb for _, sp, nb in plan) and not trailing and len(plan) == size

    # The common shapes get a callback with no Python frame of its own.
    if simple and splice_result:
        return _Splice
    if simple and expand1 and size == 1:
        return _FIRST
    if simple and not expand1 and method is not None:
        return method
    no_splice = not any(sp for _, sp, _ in plan)
    if no_splice and not expand1 and method is not None:
        # Only dropped tokens and absent optionals: pick the kept children in C.
        slots: list = []
        for i, _, nb in plan:
            slots.extend([None] * nb)
            slots.append(i)
        slots.extend([None] * trailing)
        if None not in slots and len(slots) > 1:
            pick = operator.itemgetter(*slots)
            return lambda args: method(list(pick(args)))
        if None not in slots and len(slots) == 1:
            (only,) = slots
            return lambda args: method([args[only]])

    if splice_result and plan and plan[0][0] == 0 and plan[0][1] and not plan[0][2]:
        # A left-recursive list rule (``STRING+``, a suite's statements): its first child is the
        # list so far, no longer referenced elsewhere, so it grows in place. Copying it at every
        # reduction made a long list quadratic (a 10 MB weight in the metadata section is 100,000
        # string pieces: minutes).
        rest = plan[1:]
        return lambda args: _place_children(args[0], args, rest, trailing)

    def callback(args):
        children = args if simple else _place_children([], args, plan, trailing)
        if splice_result:
            return _Splice(children)
        if expand1 and len(children) == 1:
            return children[0]
        if method is None:
            raise AssertionError(f"no builder for grammar rule {name}")
        return method(children)

    return callback


_TABLES: _Tables | None = None


def _tables() -> _Tables:
    global _TABLES
    if _TABLES is None:
        with open(GRAMMAR_FILE, encoding="utf-8") as f:
            grammar = f.read()
        try:
            _TABLES = _Tables(_cached_spec(grammar))
        except Exception:  # noqa: BLE001 - a cache entry of the wrong shape: build afresh
            _TABLES = _Tables(_cached_spec(grammar, rebuild=True))
    return _TABLES


def _cached_spec(grammar: str, rebuild: bool = False) -> dict:
    """`grammar_spec`, from the cache (`tvmscript.cache`) when an entry matches this grammar
    and Lark version and is intact: a damaged or foreign entry is rebuilt rather than trusted
    (a bad cache must never break every command)."""
    import hashlib
    import marshal

    from tvmscript import cache as disk_cache

    folder = disk_cache.folder("parser")
    key = hashlib.sha256(grammar.encode() + _SPEC_FORMAT.encode()).hexdigest()[:20]
    path = None if folder is None else os.path.join(folder, f"tables-{key}.marshal")
    if path is not None and not rebuild:
        payload = disk_cache.read(path, _SPEC_MAGIC)
        if payload is not None:
            try:
                spec = marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                spec = None
            if isinstance(spec, dict):
                return spec
    spec = grammar_spec(grammar)
    if path is not None:
        disk_cache.write(path, _SPEC_MAGIC, marshal.dumps(spec))
    return spec


# Bump when the shape of `grammar_spec`'s result, or of the cache file, changes.
_SPEC_FORMAT = "tvms-spec-3"
_SPEC_MAGIC = b"TVMSTABLES1"


class _SyntaxErrorAt(Exception):
    def __init__(self, tok: Tok, expected: list[str]):
        self.tok = tok
        self.expected = expected


_COMMENT_RE = re.compile(r"#[^\n]*")
_NOT_IN = re.compile(r"[ \t]+in\b")
_IS_NOT = re.compile(r"[ \t]+not\b")
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
_CLOSING = {"(": ")", "[": "]", "{": "}"}
_OPENING = {")": "(", "]": "[", "}": "{"}


def _bracket_at(source: str, offset: int) -> tuple[str, int, int]:
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


def _word_end(source: str, pos: int) -> int:
    """Where the name or symbol starting at ``pos`` ends (for underlining a statement's start)."""
    m = re.compile(r"\w+|\S").match(source, pos)
    return m.end() if m else pos + 1


def _run(source: str, filename: str, tables: _Tables, comments: list, brackets: list) -> list:
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
                        Span(filename, line, first, line, _word_end(source, line_start + first - 1) - line_start + 1),
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
                    bracket, oline, ocol = _bracket_at(source, opened)
                    where = "" if oline == line else f" on line {oline}"
                    raise TVMScriptError(
                        f"closing '{text}' does not match the opening '{bracket}'{where}",
                        Span(filename, line, col, line, col + 1),
                        [f"expected '{_CLOSING[bracket]}' to close the '{bracket}' at line {oline}, column {ocol}"],
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
            raise _SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
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
                raise _SyntaxErrorAt(tok, sorted(k for k in row if k.isupper() or k == "$END"))
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


# ----------------------------------------------------------------------------- import header
#
# A TVMScript file copied from Python code starts with the imports that make it run there
# (``from tvm.script import ir as I``). They carry no meaning for the parser, which knows the
# dialects by their prefixes, so they are accepted as the header they are: before the first
# decorator, and only the imports of TVM's script dialects. The printer writes the commented
# header (``# from tvm.script import ir as I``) in their place.

# The dialect modules of ``tvm.script`` and the prefix the parser knows each by.
_DIALECT_ALIASES = {"ir": "I", "tir": "T", "tirx": "T", "relax": "R"}
_SCRIPT_PACKAGES = ("tvm.script", "tvm.script.parser")
_PLAIN_IMPORTS = frozenset({"tvm", "tvmscript"})
_IMPORT_LINE = re.compile(r"(?P<stmt>(?:import|from)\b[^#\n]*?)[ \t]*(?P<comment>#[^\n]*)?$")
_IMPORT_START = re.compile(r"[ \t]*(?:import[ \t]+\S|from[ \t]+\S+[ \t]+import\b)")
_FROM_IMPORT = re.compile(r"from[ \t]+(?P<package>[\w.]+)[ \t]+import[ \t]+(?P<names>.+)")
_PLAIN_IMPORT = re.compile(r"import[ \t]+(?P<names>.+)")
_ALIAS = re.compile(r"(?P<name>[\w.]+)(?:[ \t]+as[ \t]+(?P<alias>\w+))?")


def _import_problem(stmt: str) -> str | None:
    """Why an import statement is not a TVMScript header import (None when it is one)."""
    m = _FROM_IMPORT.fullmatch(stmt)
    if m is not None:
        package = m["package"]
        if package not in _SCRIPT_PACKAGES:
            return f"'{package}' is not a TVMScript dialect package"
        names = m["names"].strip()
        if names.startswith("(") and names.endswith(")"):
            names = names[1:-1]
        for item in (x.strip() for x in names.split(",") if x.strip()):
            a = _ALIAS.fullmatch(item)
            if a is None or a["name"] not in _DIALECT_ALIASES:
                return f"'{item}' is not a TVMScript dialect (ir, tir, tirx or relax)"
            want = _DIALECT_ALIASES[a["name"]]
            if a["alias"] != want:
                return f"the {a['name']} dialect must be imported as {want} (TVMScript writes {want}.* for it)"
        return None
    m = _PLAIN_IMPORT.fullmatch(stmt)
    if m is None:
        return "this is not an import statement TVMScript understands"
    for item in (x.strip() for x in m["names"].split(",")):
        a = _ALIAS.fullmatch(item)
        if a is None or a["name"] not in _PLAIN_IMPORTS:
            return f"'{item}' is not TVM (only 'import tvm' or 'import tvmscript' may head a file)"
    return None


def strip_import_header(source: str, filename: str = "<string>") -> str:
    """``source`` with its header imports removed (comments after them stay, lines keep their
    numbers); a diagnostic for an import TVMScript does not know. Only the header is scanned:
    the first line that is not an import, a comment or blank ends it."""
    out = []
    pos = 0
    number = 0
    while pos < len(source):
        end = source.find("\n", pos)
        end = len(source) if end < 0 else end
        text = source[pos:end]
        number += 1
        stripped = text.strip()
        if stripped and not stripped.startswith("#"):
            if text[:1] in " \t" or not _IMPORT_START.match(text):
                break  # the first statement that is not an import: the header is over
            m = _IMPORT_LINE.match(text)
            stmt = m["stmt"] if m else text
            problem = _import_problem(stmt.strip())
            if problem is not None:
                raise TVMScriptError(
                    f"unsupported import: {problem}", Span(filename, number, 1, number, len(stmt.rstrip()) + 1),
                    ["a TVMScript file may begin with its dialect imports only, such as "
                     "'from tvm.script import ir as I, tir as T, relax as R'"],
                )
            text = (m["comment"] or "") if m else ""
        out.append(text)
        pos = end + 1
    return "".join(line + "\n" for line in out) + source[pos:]


def parse_syntax(source: str, filename: str = "<string>") -> tuple[list[ast.Stmt], list[ast.Comment]]:
    """Parse TVMScript text into top-level syntax-tree statements and the list of comments."""
    if not source.endswith("\n"):
        source += "\n"
    if source.startswith(("import", "from")) or "\nimport" in source or "\nfrom" in source:
        source = strip_import_header(source, filename)
    tables = _tables()
    comments: list[ast.Comment] = []
    brackets: list = []
    try:
        stmts = _run(source, filename, tables, comments, brackets)
    except TVMScriptError as err:
        if err.span is not None and err.span.filename == "<string>":
            err.span = err.span.with_filename(filename)
        raise
    except _SyntaxErrorAt as err:
        raise _syntax_error(err.tok, err.expected, source, filename, brackets) from None
    except RecursionError:
        raise TVMScriptError("expression nested too deeply", Span(filename, 1, 1, 1, 2)) from None
    return stmts, comments


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


def _syntax_error(tok: Tok, expected: list[str], source: str, filename: str, brackets=()) -> TVMScriptError:
    line, col = tok.line, tok.column
    lines = source.split("\n")
    if brackets:
        # An open bracket swallows the line ends after it, so a missing ')' shows up as an error
        # at the end of the file or at the start of a later statement: report the bracket.
        opener, oline, ocol = _bracket_at(source, brackets[-1])
        starts_line = 1 <= line <= len(lines) and not lines[line - 1][: col - 1].strip()
        opener_indent = len(lines[oline - 1]) - len(lines[oline - 1].lstrip()) + 1
        if tok.type in ("$END", "_NEWLINE", "_DEDENT") or (line > oline and starts_line and col <= opener_indent):
            return TVMScriptError(
                f"'{opener}' was never closed", Span(filename, oline, ocol, oline, ocol + 1),
                [f"expected '{_CLOSING[opener]}' before the end of the file" if tok.type in ("$END", "_NEWLINE", "_DEDENT")
                 else f"expected '{_CLOSING[opener]}' before the statement on line {line}"],
            )
    if 1 <= line <= len(lines) and _IMPORT_START.match(lines[line - 1]):
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
            Span(filename, line, first, line, _word_end(source, line_pos + first - 1) - line_pos + 1),
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
            closer = _CLOSING[source[brackets[-1]]]
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
