"""The syntax tree of a TVMScript text, built as the parser reduces each grammar rule.

`TreeBuilder` has one callback per rule of ``grammar/tvmscript.lark``; each returns a node of
`tvmscript.parser.ast` whose position comes from the rule's tokens (`Tok`). Building the tree
straight from the LALR parser's reductions (what Lark's ``transformer=`` option does) is several
times faster than building Lark's own tree with ``propagate_positions`` and walking it
afterwards. Operators arrive as a flat sequence and are ordered by Python's precedence here
(`_parse_operation`, a Pratt parser).
"""

from __future__ import annotations

import ast as _pyast

from ..diagnostics import TVMScriptError
from . import ast


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


def _span_of_tokens(first: "Tok", last: "Tok") -> tuple[int, int, int, int]:
    return first.line, first.column, last.end_line, last.end_column


class TreeBuilder:
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
