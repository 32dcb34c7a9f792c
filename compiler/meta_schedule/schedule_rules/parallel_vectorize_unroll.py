"""`ParallelVectorizeUnroll`: how much to parallelize, vectorize and unroll, as annotations of
the root block (TVM's ParallelizeVectorizeUnroll).

Why annotations and not loops: which loops can be parallel or vector loops is only known once
every other rule has tiled, inlined and moved the blocks, so the rule records the limits (a
parallel extent of ``max_jobs_per_core`` jobs per core, vector loops of at most
``max_vectorize_extent`` elements) and a sampled unroll limit, and
`postproc.RewriteParallelVectorizeUnroll` turns them into loops on the finished nest. The
unroll limit is the tuned part: TVM's choices 0, 16, 64, 512 steps (a ``sample_categorical``).
A function of spatial blocks only gets no unroll limit (there is no reduction to unroll).
"""

from __future__ import annotations

from typing import Sequence

from ...schedule import BlockRV, Schedule
from .analysis import PARALLEL, UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE, is_root_block, is_spatial_prim_func
from .base import ScheduleRule, num_cores

__all__ = ["ParallelVectorizeUnroll"]


class ParallelVectorizeUnroll(ScheduleRule):
    """TVM's rule; -1 (or None) for ``max_jobs_per_core`` / ``max_vectorize_extent`` turns that
    part off (a GPU has neither), an empty ``unroll_max_steps`` the unrolling."""

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 64,
                 unroll_max_steps: Sequence[int] = (0, 16, 64, 512), unroll_explicit: bool = True) -> None:
        self.max_jobs_per_core = -1 if max_jobs_per_core is None else max_jobs_per_core
        self.max_vectorize_extent = -1 if max_vectorize_extent is None else max_vectorize_extent
        self.unroll_max_steps = [int(n) for n in unroll_max_steps or ()]
        self.unroll_explicit = unroll_explicit
        self.max_parallel_extent = -1

    def initialize(self, target) -> None:
        if self.max_jobs_per_core != -1:
            self.max_parallel_extent = num_cores(target) * self.max_jobs_per_core

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if not is_root_block(sch, block):
            return [sch]
        if self.max_jobs_per_core != -1:
            if self.max_parallel_extent == -1:
                raise ValueError("ParallelVectorizeUnroll: initialize(target) first (the parallel extent "
                                 "depends on the target's cores)")
            sch.annotate(block, PARALLEL, self.max_parallel_extent)
        if self.max_vectorize_extent != -1:
            sch.annotate(block, VECTORIZE, self.max_vectorize_extent)
        if self.unroll_max_steps and not is_spatial_prim_func(sch, block.func_name):
            n = len(self.unroll_max_steps)
            step = sch.sample_categorical(self.unroll_max_steps, [1.0 / n] * n)
            sch.annotate(block, UNROLL_EXPLICIT if self.unroll_explicit else UNROLL_IMPLICIT, step)
        return [sch]
