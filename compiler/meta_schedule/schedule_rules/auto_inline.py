"""`AutoInline`: fold elementwise stages into the blocks that use them (TVM's AutoInline).

Why: a stage that only maps each element (a bias add, a cast, a ReLU, a padding) costs a trip
through memory of its own when it is a loop nest; inlined into its consumer (or, reversed, into
the producer it follows) it costs a few instructions inside a loop that runs anyway, and the
tiling rules see one block to tile instead of a chain.

Which blocks: those writing one buffer whose indices are a function of their iterators that a
consumer can substitute; on the CPU (TVM's settings) also only where each read maps the written
indices one-to-one and in order (``require_injective`` / ``require_ordered``: a transpose or a
broadcast stays a stage, since inlining it makes the consumer read memory out of order or
recompute), no ``if_then_else`` (a padding stays a stage: its branch would run per use) and no
``exp`` (an expensive op recomputed per use, e.g. softmax's exponentials read twice). These
conditions do not apply in a function of spatial blocks only, where nothing is reused anyway.
Whether the inlining is legal is what ``compute_inline`` / ``reverse_compute_inline`` check: the
rule tries the primitive, which leaves the schedule unchanged when it refuses.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ...schedule import BlockRV, Schedule, ScheduleError
from ...schedule.common import const_value
from .analysis import INLINE_RULE, consumers_of, has_block, is_root_block, is_spatial_prim_func, producers_of
from .base import ScheduleRule

__all__ = ["AutoInline"]


class AutoInline(ScheduleRule):
    """TVM's AutoInline rule; the arguments are TVM's (``disallow_op`` names as ``"tir.exp"``)."""

    def __init__(self, into_producer: bool, into_consumer: bool, inline_const_tensor: bool = True,
                 disallow_if_then_else: bool = True, require_injective: bool = True, require_ordered: bool = True,
                 disallow_op: Optional[Sequence[str]] = None) -> None:
        self.into_producer, self.into_consumer = into_producer, into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective, self.require_ordered = require_injective, require_ordered
        self.disallow_op = tuple(disallow_op or ())

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if not has_block(sch, block) or is_root_block(sch, block) or not self._eligible(sch, block):
            return [sch]
        if self.into_consumer and consumers_of(sch, block) and _try(sch.compute_inline, block):
            return [sch]
        if self.into_producer and len(producers_of(sch, block)) == 1:
            _try(sch.reverse_compute_inline, block)
        return [sch]

    def _eligible(self, sch: Schedule, block: BlockRV) -> bool:
        blk = sch.get(block)
        if len(blk.writes) != 1 or blk.annotations.get(INLINE_RULE) == "disable":
            return False
        if (self.inline_const_tensor and not blk.reads) or is_spatial_prim_func(sch, block.func_name):
            return True
        _, realize = sch.resolve_block(block)
        if self.disallow_op and _calls(realize, self.disallow_op):
            return False
        if self.disallow_if_then_else and _has_branch(realize):
            return False
        return not (self.require_injective or self.require_ordered) or self._pattern_ok(blk)

    def _pattern_ok(self, blk: tir.Block) -> bool:
        for read in blk.reads:
            injective, ordered = _read_write_pattern(read, blk.writes[0])
            if (self.require_injective and not injective) or (self.require_ordered and not ordered):
                return False
        return True


def _try(primitive, block: BlockRV) -> bool:
    """Call ``primitive(block)``; whether it did. Where it refuses, the schedule is unchanged (a
    primitive that raises commits nothing), which is what the rule wants: the block stays."""
    try:
        primitive(block)
    except ScheduleError:
        return False
    return True


def _var_with_shift(e) -> Optional[tir.Var]:
    """``v`` of an index ``v``, ``v + c`` or ``v - c`` (c a constant), else None."""
    if isinstance(e, tir.Var):
        return e
    if isinstance(e, (tir.Add, tir.Sub)) and isinstance(e.a, tir.Var) and const_value(e.b) is not None:
        return e.a
    if isinstance(e, tir.Add) and isinstance(e.b, tir.Var) and const_value(e.a) is not None:
        return e.b
    return None


def _read_write_pattern(read: tir.BufferRegion, write: tir.BufferRegion) -> tuple:
    """``(injective, ordered)`` of the map from the written indices to one read's indices (TVM's
    AnalyzeReadWritePattern): each read index must be a written index's variable, maybe
    shifted, or a constant; injective when no written index is read twice, ordered when they
    are read in the order they are written."""
    position = {}
    for n, r in enumerate(write.region):
        if const_value(r.extent) is None or not isinstance(r.min, tir.Var):
            return False, False
        position[r.min] = n
    mapped = []
    for r in read.region:
        if const_value(r.extent) is None:
            return False, False
        if const_value(r.min) is not None:
            continue
        var = _var_with_shift(r.min)
        if var is None or var not in position:
            return False, False
        mapped.append(position[var])
    injective = len(mapped) == len(set(mapped))
    ordered = all(a <= b for a, b in zip(mapped, mapped[1:]))
    return injective, ordered


class _Finder(TIRVisitor):
    """Finds calls of some ops, or any branch (a predicate, an if, a select, if_then_else)."""

    def __init__(self, ops=(), branches: bool = False) -> None:
        self.ops, self.branches, self.found = ops, branches, False

    def visit_Call(self, node) -> None:
        if node.op in self.ops or (self.branches and node.op == "tir.if_then_else"):
            self.found = True
        self.generic_visit(node)

    def visit_IfThenElse(self, node) -> None:
        self.found = self.found or self.branches
        self.generic_visit(node)

    def visit_Select(self, node) -> None:
        self.found = self.found or self.branches
        self.generic_visit(node)


def _calls(realize: tir.BlockRealize, ops) -> bool:
    finder = _Finder(ops=tuple(ops))
    finder.visit(realize.block)
    return finder.found


def _has_branch(realize: tir.BlockRealize) -> bool:
    if not tir.is_const_int(realize.predicate, 1):
        return True
    finder = _Finder(branches=True)
    finder.visit(realize.block)
    return finder.found
