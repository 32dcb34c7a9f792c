"""What a scheduled TIR body holds, collected in one walk (`walk`): its loops, blocks, ifs and
``min`` expressions (a shifted tile's start), and its stores (`stores`). The schedule tests
assert a nest's structure with them."""

from __future__ import annotations

from tvmscript import tir
from tvmscript.ir.mutator import IRMutator


class Walk(IRMutator):
    """Collects the loops, blocks, ifs, ``min`` expressions and stores of a body, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.loops, self.blocks, self.ifs, self.mins, self.stores = [], [], [], [], []

    def visit_stmt(self, s):
        if isinstance(s, tir.For):
            self.loops.append(s)
        elif isinstance(s, tir.Block):
            self.blocks.append(s)
        elif isinstance(s, tir.IfThenElse):
            self.ifs.append(s)
        elif isinstance(s, tir.BufferStore):
            self.stores.append(s)
        return super().visit_stmt(s)

    def visit_expr(self, e):
        if isinstance(e, tir.Min):
            self.mins.append(e)
        return super().visit_expr(e)


def walk(stmt) -> Walk:
    """`Walk` of ``stmt`` (a function's body, or any statement in it)."""
    w = Walk()
    w.visit_stmt(stmt)
    return w


def stores(stmt) -> list:
    """The stores in ``stmt``, in order."""
    return walk(stmt).stores
