"""The comments of a file, kept through parsing: each is attached to the statement it belongs to
(`attach_comments`), then moved onto the IR node that statement builds (`comments_of`,
`merge_comments`: a table of `ir.Comments` per node, which the printer reads back). Comments
TVM's printers write themselves are recognised (`is_printer_artifact`) and regenerated rather
than kept.
"""

from __future__ import annotations

import bisect
import re

from .. import ir
from . import ast


def attach_comments(
    stmts: list[ast.Stmt], comments: list[ast.Comment], source: str | None = None
) -> list[ast.Comment]:
    """Attach comments to statements, as a reader of the source would:

    * a comment after code belongs to the statement on that line (its ``trailing`` comment; a
      second one, on another line of a multi-line statement, goes before it);
    * a comment on its own line goes before the statement that follows it, unless it is
      indented deeper than that statement and follows the end of a block whose statements are
      indented no deeper than it: then it closes that block (``after`` of the block's owner).

    Comments after the last statement of the file are returned so the caller can keep them."""
    if not comments:
        return []
    flat: list[ast.Stmt] = []
    parent: dict[int, ast.Stmt | None] = {}

    def walk(body, owner):
        for s in body:
            flat.append(s)
            parent[id(s)] = owner
            for sub in _bodies(s):
                walk(sub, s)

    walk(stmts, None)
    lines = source.split("\n") if source is not None else None
    order = sorted(range(len(flat)), key=lambda i: ast.header_line(flat[i]))
    heads = [ast.header_line(flat[i]) for i in order]

    def indent_of(s: ast.Stmt) -> int:
        if lines is None:
            return s.col
        text = lines[ast.header_line(s) - 1] if ast.header_line(s) <= len(lines) else ""
        return len(text) - len(text.lstrip()) + 1

    # Line -> the innermost statement whose own code (not its body) covers it: statements come
    # in source order, outer before inner, so a later one overwrites. One pass over the code's
    # lines, instead of a scan of every statement for each comment (quadratic in big files).
    code_owner: dict[int, ast.Stmt] = {}
    last_line_of: dict[int, ast.Stmt] = {}
    for s in flat:
        bodies = [b for b in _bodies(s) if b]
        last = (ast.header_line(bodies[0][0]) - 1) if bodies else s.end_line
        for line in range(ast.header_line(s), max(last, s.line) + 1):
            code_owner[line] = s
        last_line_of.setdefault(s.line if bodies else s.end_line, s)

    leftovers: list[ast.Comment] = []
    for c in comments:
        own_line = lines is not None and 1 <= c.line <= len(lines) and not lines[c.line - 1][: c.col - 1].strip()
        if lines is None:
            own_line = c.line not in last_line_of
        if not own_line:
            owner = code_owner.get(c.line)
            if owner is not None:
                if owner.trailing is None:
                    owner.trailing = c.text
                else:
                    owner.comments.append(c.text)
                continue
        k = bisect.bisect_right(heads, c.line)
        nxt = flat[order[k]] if k < len(order) else None
        prev = flat[order[k - 1]] if k > 0 else None
        if nxt is not None and (prev is None or c.col <= indent_of(nxt)):
            nxt.comments.append(c.text)
            continue
        # Indented deeper than what follows: the comment closes the innermost block around the
        # previous statement that is indented no deeper than the comment.
        target, child = None, prev
        while child is not None:
            owner = parent[id(child)]
            if owner is None:
                break
            if indent_of(child) <= c.col:
                target = owner
                break
            child = owner
        if target is not None and not _inside(nxt, target, parent):
            if getattr(target, "after", None) is None:
                target.after = []
            target.after.append(c.text)
        elif nxt is not None:
            nxt.comments.append(c.text)
        else:
            leftovers.append(c)
    return leftovers


def _inside(s: ast.Stmt | None, owner: ast.Stmt, parent: dict) -> bool:
    while s is not None:
        if s is owner:
            return True
        s = parent[id(s)]
    return False


def _bodies(s: ast.Stmt) -> list:
    if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.For, ast.With, ast.While)):
        return [s.body]
    if isinstance(s, ast.If):
        return [s.body, s.orelse]
    return []


def comments_of(stmt: ast.Stmt) -> ir.Comments | None:
    after = getattr(stmt, "after", None)
    if not stmt.comments and stmt.trailing is None and not after:
        return None
    return ir.Comments(list(stmt.comments), stmt.trailing, list(after or ()))


def loose_comments(stmt: ast.Stmt) -> ir.Comments:
    """All of a statement's comments as lines before the next thing printed, for statements
    that print nothing of their own (``T.axis.remap``, ``cls = Module``, ...)."""
    return ir.Comments(
        list(stmt.comments) + ([stmt.trailing] if stmt.trailing else []) + list(getattr(stmt, "after", None) or ())
    )


# Key of the comments written on a function's T.func_attr / R.func_attr line.
FUNC_ATTR = "func_attr"


def take_comments(table: dict, key, stmt: ast.Stmt) -> None:
    """Move a statement's comments to ``table[key]``, for statements that build no node of their
    own but print back as a line (``T.func_attr``)."""
    merge_comments(table, key, comments_of(stmt))
    stmt.comments = []
    stmt.trailing = None


def merge_comments(table: dict, node, extra: ir.Comments | None) -> None:
    """Record comments for an IR node, merging with any it already has."""
    if extra is None:
        return
    have = table.get(node)
    if have is None:
        table[node] = ir.Comments(list(extra.before), extra.trailing, list(extra.after))
    else:
        have.before.extend(extra.before)
        if extra.trailing:
            have.trailing = (have.trailing + "  " + extra.trailing) if have.trailing else extra.trailing
        have.after.extend(extra.after)


# ----------------------------------------------------------------------------- TVM's own comments

_ARTIFACT = re.compile(
    r'# from tvm\.script import \w+ as \w+|# from typing import TypeVar|# from tvm\.tirx?\.layout import Axis'
    r'|# with T\.s?block\("root"\):?|# function attr dict|# body|# block \d+'
)


def is_printer_artifact(text: str) -> bool:
    """Comments TVM's printers write themselves (dialect imports, the root-block comment, old
    section markers). The printer regenerates what is still true of them, so they are not kept
    as user comments; every other comment is."""
    return _ARTIFACT.fullmatch(text.rstrip()) is not None
