"""`RandomComputeLocation`: move a stage under a sampled loop of its consumer (TVM's rule).

Why: a producer that is neither inlined nor tiled (softmax's row maximum, a padding stage on
the CPU) is a loop nest of its own, whose output round-trips through memory before its
consumer reads it. Computed under one of the consumer's loops it produces only the slice that
iteration needs, while that slice is still in cache, at the price of loop overhead and, under
a loop the producer does not depend on, recomputation. Which loop is best is a tuning
question, so it is sampled (`sample_compute_location`: a loop of the consumer that
``compute_at`` accepts, or the root, i.e. leave the block where it is).

Which blocks: direct children of the root with loops, whose outermost loop holds only them, not
tiled by `MultiLevelTiling`, with a consumer (TVM's conditions).
"""

from __future__ import annotations

from tvmscript.ir import tir

from ...schedule import BlockRV, Schedule
from ...schedule.tree import child_block_realizes
from .analysis import (RANDOM_COMPUTE_PRODUCER, consumers_of, has_been_multi_level_tiled, has_block,
                       is_root_block)
from .base import ScheduleRule

__all__ = ["RandomComputeLocation"]


class RandomComputeLocation(ScheduleRule):
    """TVM's RandomComputeLocation (see the module docstring)."""

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if not self._applies(sch, block):
            return [sch]
        producer = None
        if sch.get(block).annotations.get(RANDOM_COMPUTE_PRODUCER):
            # The producer is looked up first: once the block has moved, it is still the same
            # producer, but TVM's order of trace instructions is this one.
            producers = sch.get_producers(block)
            sch.unannotate(block, RANDOM_COMPUTE_PRODUCER)
            producer = producers[0] if len(producers) == 1 else None
        _randomly_compute_at(sch, block)
        if producer is not None:
            _randomly_compute_at(sch, producer)
        return [sch]

    @staticmethod
    def _applies(sch: Schedule, block: BlockRV) -> bool:
        if not has_block(sch, block) or is_root_block(sch, block):
            return False
        idx, realize = sch.resolve_block(block)
        scope = idx.scope_realize(realize)
        if scope is None or idx.parent_of(scope) is not None:
            return False                      # not a direct child of the root
        loops = idx.loops_above(realize)
        if not loops or _child_blocks(loops[0]) > 1:
            return False
        return not has_been_multi_level_tiled(sch, block) and bool(consumers_of(sch, block))


def _randomly_compute_at(sch: Schedule, block: BlockRV) -> None:
    location = sch.sample_compute_location(block)
    sch.compute_at(block, location, preserve_unit_loops=True)


def _child_blocks(loop: tir.For) -> int:
    return len(child_block_realizes(loop))
