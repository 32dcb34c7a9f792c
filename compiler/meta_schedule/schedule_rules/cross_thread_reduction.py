"""`CrossThreadReduction`: a GPU reduction over a long axis summed by the threads of a block
together (TVM's rule).

Why: one thread per output walking a long reduced axis alone (a softmax row of 4096) leaves
the GPU mostly idle when outputs are few. Split the reduced loop and bind its inner part to
``threadIdx.x``: each thread sums a strided slice, and the lowering combines the partial sums
across the threads (`compiler.lower_gpu.cross_thread_reduction`). The thread count is a tuning
knob, sampled among ``thread_extents``. When the reduction feeds an elementwise consumer (the
normalization of a softmax), the reduction is also computed inside the consumer's thread
block, its result kept in shared memory, so the two run as one kernel. The rule returns both
the cross-thread schedule and the block untouched (two design spaces), as TVM's does.

Which blocks: reductions with a trivial binding, not tiled, whose loops are perfectly nested
spatial or reduce loops, where the reduced length is longer than a warp (TVM's
NeedsRFactorOrCrossThreadReduction; for a matmul-like block only where its spatial part is too
small to fill a thread block).
"""

from __future__ import annotations

from typing import Optional, Sequence

from tvmscript.ir import tir

from ...schedule import BlockRV, LoopRV, Schedule, ScheduleError
from .analysis import (has_been_multi_level_tiled, has_block, is_reduction_block, is_trivial_binding, loop_extent,
                       loop_iter_type, needs_multi_level_tiling, thread_tag)
from .base import ScheduleRule, as_target, fork, is_gpu

__all__ = ["CrossThreadReduction"]


class CrossThreadReduction(ScheduleRule):
    """TVM's CrossThreadReduction (see the module docstring)."""

    def __init__(self, thread_extents: Sequence[int] = (4, 8, 16, 32, 64, 128, 256, 512)) -> None:
        if not thread_extents or min(thread_extents) <= 0:
            raise ValueError("CrossThreadReduction: the thread extents must be positive")
        self.thread_extents = [int(n) for n in thread_extents]
        self.max_threads_per_block: Optional[int] = None
        self.warp_size: Optional[int] = None

    def initialize(self, target) -> None:
        target = as_target(target)
        if is_gpu(target):
            self.max_threads_per_block = target.max_threads_per_block or 1024
            self.warp_size = target.thread_warp_size or 32

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if self.max_threads_per_block is None or not has_block(sch, block) or not self._needed(sch, block):
            return [sch]
        new = fork(sch)
        try:
            self._schedule(new, block)
        except ScheduleError:
            # A fusion our primitives refuse (TVM assumes it legal): the block stays as it was.
            return [sch]
        return [new, sch]

    def _schedule(self, sch: Schedule, block: BlockRV) -> None:
        target = _compute_target(sch, block)
        n = len(self.thread_extents)
        extent = sch.sample_categorical(self.thread_extents, [1.0 / n] * n)
        if target is not None:
            target_loop, target_block, innermost = target
            in_thread = _thread_idx_extent(sch, target_block)
            if in_thread is None:
                outer, inner = sch.split(innermost, factors=[None, extent])
                sch.bind(inner, "threadIdx.x")
                if innermost.var is target_loop.var:
                    target_loop = outer
            else:
                extent = in_thread
            sch.compute_at(block, target_loop, preserve_unit_loops=True)
            sch.set_scope(block, 0, "shared")
        fused = _reorder_and_fuse_reduction_loops(sch, block)
        _, inner = sch.split(fused, factors=[None, extent])
        sch.bind(inner, "threadIdx.x")

    def _needed(self, sch: Schedule, block: BlockRV) -> bool:
        """TVM's NeedsRFactorOrCrossThreadReduction."""
        blk = sch.get(block)
        if not blk.writes or not is_reduction_block(sch, block) or not is_trivial_binding(sch, block) \
                or has_been_multi_level_tiled(sch, block):
            return False
        idx, realize = sch.resolve_block(block)
        loops = idx.loops_above(realize)
        space = reduce = 1
        has_reduce = False
        for n, lp in enumerate(loops):
            kind = loop_iter_type(lp)
            if kind not in ("S", "R") or (lp.body is not (loops[n + 1] if n + 1 < len(loops) else realize)):
                return False
            extent = loop_extent(lp)
            if extent is None:
                return False
            if kind == "R":
                has_reduce, reduce = True, reduce * extent
            else:
                space *= extent
        if not has_reduce:
            return False
        if needs_multi_level_tiling(sch, block):
            return not (space >= reduce or space > self.max_threads_per_block)
        return reduce > 1 and reduce > self.warp_size


def _compute_target(sch: Schedule, block: BlockRV):
    """``(target loop, target block, its innermost loop)`` where the reduction can be fused
    into its first consumer (TVM's GetComputeTargetLoopAndBlock), or None."""
    if len(sch.get(block).writes) != 1:
        return None
    consumers = sch.get_consumers(block)
    if not consumers or needs_multi_level_tiling(sch, consumers[0]):
        return None
    idx, _ = sch.resolve_block(block)
    realizes = [sch.resolve_block(c)[1] for c in consumers]
    lca = _lowest_common_ancestor(idx, realizes)
    if len(consumers) > 1 and isinstance(lca, (tir.Block, tir.BlockRealize)):
        return None
    target_loops = sch.get_loops(consumers[0])
    own = [sch.get(lp) for lp in sch.get_loops(block)]
    pos = min(len(own), len(target_loops)) - 1
    for n in range(min(len(own), len(target_loops))):
        if loop_iter_type(own[n]) != "S":
            pos = n - 1
            break
        if sch.get(target_loops[n]) is lca:
            pos = n
            break
    if pos < 0:
        return None
    return target_loops[pos], consumers[0], target_loops[-1]


def _lowest_common_ancestor(idx, realizes: list):
    """The deepest loop or block above (or equal to, for one block) every realize in
    ``realizes`` (TVM's LCA of srefs: sequences and other statements do not count)."""
    chains = [[s for s in [r] + idx.ancestors(r) if isinstance(s, (tir.For, tir.Block, tir.BlockRealize))]
              for r in realizes]
    common = chains[0]
    for chain in chains[1:]:
        ids = {id(s) for s in chain}
        common = [s for s in common if id(s) in ids]
    return common[0] if common else None


def _thread_idx_extent(sch: Schedule, block: BlockRV):
    """The ``threadIdx.x`` extent the block already runs under, or None: the sampled factor
    that made that loop where the trace has it (so that a resampled candidate keeps the two
    extents equal), else its constant extent."""
    loop = next((lp for lp in (sch.get(rv) for rv in sch.get_loops(block)) if thread_tag(lp) == "threadIdx.x"), None)
    if loop is None:
        return None
    for inst in sch.trace.insts:
        if inst.kind == "split" and isinstance(inst.outputs, list):
            for n, out in enumerate(inst.outputs):
                if isinstance(out, LoopRV) and out.var is loop.loop_var:
                    factors = dict(inst.args).get("factors") or []
                    if n < len(factors) and factors[n] is not None:
                        return factors[n]
    return loop_extent(loop)


def _reorder_and_fuse_reduction_loops(sch: Schedule, block: BlockRV) -> LoopRV:
    """The block's spatial loops first, then its reduce loops fused into one; that loop."""
    loops = sch.get_loops(block)
    kinds = [loop_iter_type(sch.get(lp)) for lp in loops]
    spatial = [lp for lp, k in zip(loops, kinds) if k == "S"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "R"]
    if spatial + reduce != loops:
        sch.reorder(*(spatial + reduce))
    return sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
