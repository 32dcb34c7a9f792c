"""Generic traversal of TensorIR, so an analysis writes only the cases it cares about.

`TIRVisitor.visit` dispatches on the node's class to ``visit_<ClassName>`` when the subclass
defines one, and otherwise walks every child (expressions, statements, buffers' shapes are
not entered: a buffer is a definition, not an expression in the tree). `vars_in` is the common
question "which variables does this expression use"; `calls_extern` and `reads_memory` ask
whether an expression may do more than arithmetic on its operands.
"""

from __future__ import annotations

import dataclasses

from . import tir

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of ``cls`` that can hold TIR nodes (computed once per class)."""
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        skip = {"dtype", "name", "span", "kind", "thread_tag", "annotations", "op", "lanes", "value"}
        fields = tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)
        if cls in (tir.Cast, tir.Broadcast, tir.Let, tir.BufferStore, tir.Evaluate, tir.LetStmt,
                   tir.AttrStmt):
            fields = fields + ("value",)
        _CHILD_FIELDS[cls] = fields
    return fields


class TIRVisitor:
    """Walks TIR in program order (a store's value before its indices, a block's init before
    its body). Override ``visit_<ClassName>(node)``; call ``self.generic_visit(node)`` in it to
    keep walking below."""

    def visit(self, node) -> None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node) -> None:
        if isinstance(node, (tir.Var, tir.IntImm, tir.FloatImm, tir.StringImm, tir.Buffer)):
            return
        if isinstance(node, tir.BufferStore):
            self.visit(node.value)
            for i in node.indices:
                self.visit(i)
            return
        if isinstance(node, tir.Block):
            for child in (node.init, node.body):
                if child is not None:
                    self.visit(child)
            return
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, (tir.PrimExpr, tir.Stmt, tir.Range, tir.IterVar, tir.BufferRegion)):
                        self.visit(item)
            elif isinstance(value, (tir.PrimExpr, tir.Stmt, tir.Range, tir.IterVar, tir.BufferRegion)):
                self.visit(value)


class _VarCollector(TIRVisitor):
    def __init__(self) -> None:
        self.found: dict = {}

    def visit_Var(self, node) -> None:
        self.found.setdefault(node, None)


def vars_in(exprs) -> list:
    """The variables the expressions use, in order of first use (None entries are skipped)."""
    collector = _VarCollector()
    for e in exprs:
        if e is not None:
            collector.visit(e)
    return list(collector.found)


# Calls into code outside the kernel: they may do any amount of work, touch any memory.
EXTERN_CALLS = frozenset(("tir.call_extern", "tir.call_pure_extern", "tir.call_packed"))


class _Found(Exception):
    pass


class _Finder(TIRVisitor):
    def __init__(self, predicate) -> None:
        self.predicate = predicate

    def visit(self, node) -> None:
        if self.predicate(node):
            raise _Found
        super().visit(node)


def contains(node, predicate) -> bool:
    """Whether ``node`` or a node below it satisfies ``predicate`` (the walk stops at the first)."""
    try:
        _Finder(predicate).visit(node)
    except _Found:
        return True
    return False


def _is_extern_call(node) -> bool:
    return isinstance(node, tir.Call) and node.op in EXTERN_CALLS


def calls_extern(e) -> bool:
    """Whether ``e`` calls a function outside the kernel (`EXTERN_CALLS`)."""
    return contains(e, _is_extern_call)


def reads_memory(e) -> bool:
    """Whether ``e`` loads from a buffer or calls outside the kernel: its value may then differ
    from one evaluation to the next."""
    return contains(e, lambda n: isinstance(n, tir.BufferLoad) or _is_extern_call(n))
