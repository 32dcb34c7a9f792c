"""The syntax tree: a minimal Python-like AST with source positions.

Built by `tvmscript.parser.syntax` and consumed by `tvmscript.parser.builder`. Nodes are plain
classes with ``__slots__`` (they are created by the hundred thousand when parsing large files);
positions are 1-based ``line``/``col`` with an exclusive ``end_col``, as Lark reports them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterator


class Node:
    __slots__ = ("line", "col", "end_line", "end_col")

    def span_tuple(self) -> tuple[int, int, int, int]:
        return self.line, self.col, self.end_line, self.end_col


class Comment:
    """A ``# ...`` comment and where it stands in the source."""

    __slots__ = ("text", "line", "col")

    def __init__(self, text: str, line: int, col: int) -> None:
        self.text = text
        self.line = line
        self.col = col

    def __repr__(self) -> str:
        return f"Comment({self.text!r}, {self.line}, {self.col})"


# ----------------------------------------------------------------------------- expressions


class Expr(Node):
    __slots__ = ()


class Name(Expr):
    __slots__ = ("id",)

    def __init__(self, id: str, line, col, end_line, end_col):
        self.id = id
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Constant(Expr):
    """A number, string, ``True``/``False``/``None`` are Names resolved by the builder."""

    __slots__ = ("value", "text")

    def __init__(self, value: Any, line, col, end_line, end_col, text: str | None = None):
        self.value = value
        self.text = text
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Attribute(Expr):
    __slots__ = ("value", "attr")

    def __init__(self, value: Expr, attr: str, line, col, end_line, end_col):
        self.value = value
        self.attr = attr
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Call(Expr):
    __slots__ = ("func", "args", "keywords")

    def __init__(self, func: Expr, args: list, keywords: list, line, col, end_line, end_col):
        self.func = func
        self.args = args
        self.keywords = keywords
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Keyword(Node):
    __slots__ = ("arg", "value")

    def __init__(self, arg: str, value: Expr, line, col, end_line, end_col):
        self.arg = arg
        self.value = value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Starred(Expr):
    __slots__ = ("value",)

    def __init__(self, value: Expr, line, col, end_line, end_col):
        self.value = value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Subscript(Expr):
    __slots__ = ("value", "index")

    def __init__(self, value: Expr, index: Expr, line, col, end_line, end_col):
        self.value = value
        self.index = index
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Slice(Expr):
    __slots__ = ("lower", "upper", "step")

    def __init__(self, lower, upper, step, line, col, end_line, end_col):
        self.lower, self.upper, self.step = lower, upper, step
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Tuple(Expr):
    __slots__ = ("elts", "parenthesized")

    def __init__(self, elts: list, line, col, end_line, end_col):
        self.elts = elts
        self.parenthesized = False
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class List(Expr):
    __slots__ = ("elts",)

    def __init__(self, elts: list, line, col, end_line, end_col):
        self.elts = elts
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Dict(Expr):
    __slots__ = ("keys", "values")

    def __init__(self, keys: list, values: list, line, col, end_line, end_col):
        self.keys = keys
        self.values = values
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class BinOp(Expr):
    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Expr, right: Expr, line, col, end_line, end_col):
        self.op = op
        self.left = left
        self.right = right
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class UnaryOp(Expr):
    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Expr, line, col, end_line, end_col):
        self.op = op
        self.operand = operand
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class BoolOp(Expr):
    __slots__ = ("op", "values")

    def __init__(self, op: str, values: list, line, col, end_line, end_col):
        self.op = op
        self.values = values
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Compare(Expr):
    __slots__ = ("left", "ops", "comparators")

    def __init__(self, left: Expr, ops: list, comparators: list, line, col, end_line, end_col):
        self.left = left
        self.ops = ops
        self.comparators = comparators
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class IfExp(Expr):
    __slots__ = ("test", "body", "orelse")

    def __init__(self, test, body, orelse, line, col, end_line, end_col):
        self.test, self.body, self.orelse = test, body, orelse
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class Lambda(Expr):
    """``lambda i, j: body``: TVMScript's index maps (``R.layout_transform``) and combiners
    (``T.comm_reducer``). Only plain positional parameters, as those APIs take."""

    __slots__ = ("params", "body")

    def __init__(self, params: list[str], body: Expr, line, col, end_line, end_col):
        self.params = params
        self.body = body
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


# ----------------------------------------------------------------------------- statements


class Stmt(Node):
    # ``after`` (comments closing the statement's block) is set only when there are some.
    __slots__ = ("comments", "trailing", "after")

    def init_comments(self) -> None:
        self.comments: list[str] = []
        self.trailing: str | None = None


class ExprStmt(Stmt):
    __slots__ = ("value",)

    def __init__(self, value: Expr, line, col, end_line, end_col):
        self.value = value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class Assign(Stmt):
    __slots__ = ("target", "value")

    def __init__(self, target: Expr, value: Expr, line, col, end_line, end_col):
        self.target = target
        self.value = value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class AnnAssign(Stmt):
    __slots__ = ("target", "annotation", "value")

    def __init__(self, target, annotation, value, line, col, end_line, end_col):
        self.target, self.annotation, self.value = target, annotation, value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class AugAssign(Stmt):
    __slots__ = ("target", "op", "value")

    def __init__(self, target, op, value, line, col, end_line, end_col):
        self.target, self.op, self.value = target, op, value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class Return(Stmt):
    __slots__ = ("value",)

    def __init__(self, value, line, col, end_line, end_col):
        self.value = value
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class Pass(Stmt):
    __slots__ = ()

    def __init__(self, line, col, end_line, end_col):
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class Assert(Stmt):
    __slots__ = ("test", "msg")

    def __init__(self, test, msg, line, col, end_line, end_col):
        self.test, self.msg = test, msg
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class Arg(Node):
    __slots__ = ("name", "annotation", "default")

    def __init__(self, name, annotation, default, line, col, end_line, end_col):
        self.name, self.annotation, self.default = name, annotation, default
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col


class FunctionDef(Stmt):
    __slots__ = ("name", "args", "returns", "body", "decorators")

    def __init__(self, name, args, returns, body, decorators, line, col, end_line, end_col):
        self.name, self.args, self.returns, self.body, self.decorators = name, args, returns, body, decorators
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class ClassDef(Stmt):
    __slots__ = ("name", "body", "decorators")

    def __init__(self, name, body, decorators, line, col, end_line, end_col):
        self.name, self.body, self.decorators = name, body, decorators
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class For(Stmt):
    __slots__ = ("target", "iter", "body")

    def __init__(self, target, iter, body, line, col, end_line, end_col):
        self.target, self.iter, self.body = target, iter, body
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class With(Stmt):
    __slots__ = ("item", "target", "body")

    def __init__(self, item, target, body, line, col, end_line, end_col):
        self.item, self.target, self.body = item, target, body
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class If(Stmt):
    __slots__ = ("test", "body", "orelse")

    def __init__(self, test, body, orelse, line, col, end_line, end_col):
        self.test, self.body, self.orelse = test, body, orelse
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


class While(Stmt):
    __slots__ = ("test", "body")

    def __init__(self, test, body, line, col, end_line, end_col):
        self.test, self.body = test, body
        self.line, self.col, self.end_line, self.end_col = line, col, end_line, end_col
        self.init_comments()


def header_line(stmt: Stmt) -> int:
    """The line a statement starts on, counting decorators."""
    decorators = getattr(stmt, "decorators", None)
    if decorators:
        return min(d.line for d in decorators)
    return stmt.line


def last_line(stmt: Stmt) -> int:
    """The last source line a statement (with its nested body) covers."""
    body = getattr(stmt, "body", None)
    if isinstance(stmt, If) and stmt.orelse:
        return last_line(stmt.orelse[-1])
    if body:
        return last_line(body[-1])
    return stmt.end_line


# ----------------------------------------------------------------------------- traversal

_POSITION = frozenset(("line", "col", "end_line", "end_col"))


@lru_cache(maxsize=None)
def _child_slots(cls: type) -> tuple:
    return tuple(slot for klass in cls.__mro__ for slot in getattr(klass, "__slots__", ()) if slot not in _POSITION)


def children(node: Node) -> Iterator[Node]:
    """The syntax nodes directly below ``node``, list fields flattened, in field order."""
    for slot in _child_slots(type(node)):
        value = getattr(node, slot, None)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, list):
            for v in value:
                if isinstance(v, Node):
                    yield v


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, parents first, without recursion (expressions may
    nest a thousand levels deep)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))
