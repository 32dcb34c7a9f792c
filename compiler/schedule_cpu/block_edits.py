"""Edits of a scheduled nest's blocks that no schedule primitive makes: a load replaced (by
a packed panel's or an accumulator's), iterators rebound (shifted tiles), blocks renamed (the
nest run for small symbolic extents). `fixup` and the accumulators of a register tile apply
them."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir

from tvmscript.ir.mutator import IRMutator


class _LoadReplacer(IRMutator):
    """Replaces every load of one buffer by the same expression."""

    def __init__(self, buf, new_load) -> None:
        super().__init__()
        self.buf, self.new_load = buf, new_load

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.buf:
            return self.new_load
        return super().visit_expr(e)


def replaced_loads(expr, buf, value):
    """``expr`` with every load of ``buf`` replaced by ``value``."""
    return _LoadReplacer(buf, value).visit_expr(expr)


def load_swapper(buf, new_load):
    """A block edit replacing every load of ``buf`` in the block's body by ``new_load``."""
    def edit(realize):
        return dataclasses.replace(realize, block=dataclasses.replace(
            realize.block, body=_LoadReplacer(buf, new_load).visit_stmt(realize.block.body)))

    return edit


def rebinder(values: dict):
    """A block edit binding the given iterators to new values (shifted tiles), without the
    predicate `split` added for the tiles that crossed the extent."""
    def edit(realize):
        new = [values.get(iv.var, v) for iv, v in zip(realize.block.iter_vars, realize.iter_values)]
        return dataclasses.replace(realize, iter_values=new, predicate=tir.IntImm("bool", 1))

    return edit


class _BlockRenamer(IRMutator):
    """Appends a suffix to the name of every block."""

    def __init__(self, suffix: str) -> None:
        super().__init__()
        self.suffix = suffix

    def visit_stmt(self, s):
        s = super().visit_stmt(s)
        if isinstance(s, tir.BlockRealize):
            s = dataclasses.replace(s, block=dataclasses.replace(s.block, name=s.block.name + self.suffix))
        return s


def renamed_blocks(stmt, suffix: str):
    """``stmt`` with every block's name followed by ``suffix``."""
    return _BlockRenamer(suffix).visit_stmt(stmt)
