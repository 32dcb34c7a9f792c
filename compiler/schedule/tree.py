"""Navigating and rewriting one PrimFunc's statement tree, for the schedule primitives.

The IR is never changed in place: a primitive builds new statements and `replace` copies the
path from the root down to what it changed, sharing everything else (so a module the user got
from ``sch.mod`` earlier stays as it was). `FuncIndex` is rebuilt after each change; it tells
where every block (by name) and loop (by loop variable) sits and who its parent is.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir

__all__ = ["FuncIndex", "replace", "child_block_realizes", "stmt_children", "with_children", "fresh_name",
           "collect_names"]


def stmt_children(s) -> list:
    """The statements directly below ``s`` (a Block's init before its body)."""
    if isinstance(s, tir.SeqStmt):
        return list(s.seq)
    if isinstance(s, tir.BlockRealize):
        return [s.block]
    if isinstance(s, tir.Block):
        return [x for x in (s.init, s.body) if x is not None]
    if isinstance(s, tir.IfThenElse):
        return [x for x in (s.then_case, s.else_case) if x is not None]
    if isinstance(s, (tir.For, tir.LetStmt, tir.AssertStmt, tir.While)):
        return [s.body]
    return []


def with_children(s, old, new):
    """``s`` with its child ``old`` replaced by ``new`` (None removes it from a SeqStmt)."""
    if isinstance(s, tir.SeqStmt):
        seq = []
        for x in s.seq:
            if x is old:
                if new is not None:
                    seq.extend(new.seq if isinstance(new, tir.SeqStmt) else [new])
            else:
                seq.append(x)
        return tir.seq(seq) if seq else None
    if new is None:
        raise ValueError(f"cannot remove the only statement below a {type(s).__name__}")
    if isinstance(s, tir.BlockRealize):
        return tir.BlockRealize(s.iter_values, s.predicate, new)
    if isinstance(s, tir.Block):
        if s.init is old:
            return dataclasses.replace(s, init=new)
        return dataclasses.replace(s, body=new)
    if isinstance(s, tir.IfThenElse):
        if s.then_case is old:
            return tir.IfThenElse(s.condition, new, s.else_case)
        return tir.IfThenElse(s.condition, s.then_case, new)
    return dataclasses.replace(s, body=new)


class FuncIndex:
    """Parents, blocks by name and loops by loop variable of one function body."""

    def __init__(self, body) -> None:
        self.root = body
        self.parent: dict = {}    # id(stmt) -> parent stmt
        self.blocks: dict = {}    # name -> BlockRealize
        self.loops: dict = {}     # loop Var -> For
        self._walk(body, None)

    def _walk(self, s, parent) -> None:
        self.parent[id(s)] = parent
        if isinstance(s, tir.BlockRealize):
            self.blocks[s.block.name] = s
        elif isinstance(s, tir.For):
            self.loops[s.loop_var] = s
        for c in stmt_children(s):
            self._walk(c, s)

    def parent_of(self, s):
        return self.parent.get(id(s))

    def ancestors(self, s) -> list:
        """Parents of ``s`` from the nearest to the root."""
        out = []
        p = self.parent.get(id(s))
        while p is not None:
            out.append(p)
            p = self.parent.get(id(p))
        return out

    def scope_realize(self, s) -> Optional[tir.BlockRealize]:
        """The BlockRealize of the block that encloses ``s`` (its scope), or None at the root."""
        for a in self.ancestors(s):
            if isinstance(a, tir.BlockRealize) and a is not s:
                return a
        return None

    def siblings(self, realize) -> list:
        """Blocks of the same scope as ``realize``, in program order (itself included): the
        blocks directly inside its scope block, or at the root, nested loops included, nested
        blocks not."""
        scope = self.scope_realize(realize)
        return child_block_realizes(scope if scope is not None else self.root)

    def loops_above(self, realize) -> list:
        """The loops between ``realize`` and its scope block, outermost first."""
        out = []
        for a in self.ancestors(realize):
            if isinstance(a, tir.Block):
                break
            if isinstance(a, tir.For):
                out.append(a)
        return out[::-1]

    def is_ancestor(self, a, b) -> bool:
        return any(x is a for x in self.ancestors(b))


def replace(index: FuncIndex, old, new):
    """A new function body with ``old`` replaced by ``new`` (None removes ``old``)."""
    cur_old, cur_new = old, new
    parent = index.parent_of(cur_old)
    while parent is not None:
        rebuilt = with_children(parent, cur_old, cur_new)
        cur_old, cur_new = parent, rebuilt
        parent = index.parent_of(cur_old)
    return cur_new


def replace_many(index: FuncIndex, mapping: dict):
    """Replace several disjoint statements (``{id(old): (old, new)}``) in one copy."""
    body = index.root

    def rebuild(s):
        hit = mapping.get(id(s))
        if hit is not None:
            return hit[1]
        kids = stmt_children(s)
        if not kids:
            return s
        if isinstance(s, tir.SeqStmt):  # rebuilt in one go: a removal may collapse the sequence
            new_kids = [rebuild(k) for k in kids]
            if all(a is b for a, b in zip(new_kids, kids)):
                return s
            kept = [k for k in new_kids if k is not None]
            return tir.seq(kept) if kept else None
        out = s
        for k in kids:
            nk = rebuild(k)
            if nk is not k:
                out = with_children(out, k, nk)
                if out is None:
                    return None
        return out

    return rebuild(body)


def child_block_realizes(s) -> list:
    """BlockRealizes below ``s`` that no other block encloses, in program order."""
    out = []

    def walk(x):
        for c in stmt_children(x):
            if isinstance(c, tir.BlockRealize):
                out.append(c)
            else:
                walk(c)

    if isinstance(s, tir.BlockRealize):
        walk(s.block)
    else:
        walk(s)
    return out


def collect_names(body) -> tuple[set, set]:
    """Block names and loop/iterator/buffer names used anywhere in ``body``."""
    blocks, names = set(), set()

    def walk(x):
        if isinstance(x, tir.BlockRealize):
            blocks.add(x.block.name)
            for iv in x.block.iter_vars:
                names.add(iv.var.name)
            for b in x.block.alloc_buffers:
                names.add(b.name)
        elif isinstance(x, tir.For):
            names.add(x.loop_var.name)
        for c in stmt_children(x):
            walk(c)

    walk(body)
    return blocks, names


def fresh_name(base: str, used: set) -> str:
    """``base`` if unused, else ``base_1``, ``base_2``, ... (TVM's naming of copies); the
    name is added to ``used``."""
    name = base
    n = 0
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name
