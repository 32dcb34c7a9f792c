"""`AutoBind`: put every block a GPU rule left unbound on threads (TVM's AutoBind).

Why: a GPU kernel is only what runs under ``blockIdx``/``threadIdx`` loops. Multi-level tiling
and cross-thread reduction bind the blocks they schedule; an elementwise stage that was not
inlined, or the spatial loops of a cross-thread reduction, would otherwise run on no thread at
all (and `postproc.VerifyGPUCode` rejects that). The block's outer spatial loops are fused and
split into ``blockIdx.x`` x ``threadIdx.x``, the thread count sampled among ``thread_extents``
(those no larger than the loop); a loop longer than ``max_threadblocks`` blocks of the most
threads is split three ways, the blocks looping over the rest. A block already under
``threadIdx`` but no ``blockIdx`` (a cross-thread reduction) gets its outer spatial loops bound
to ``blockIdx.x``. `postproc.RewriteUnboundBlock` does the same, with no sampling, to what is
still unbound after the postprocessors.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ...schedule import BlockRV, Schedule
from .analysis import has_been_multi_level_tiled, has_block, is_root_block, is_single_stmt, loop_extent, loop_iter_type
from .base import ScheduleRule, as_target, is_gpu

__all__ = ["AutoBind", "bind_block_thread_idx"]


class AutoBind(ScheduleRule):
    """TVM's AutoBind (see the module docstring)."""

    def __init__(self, max_threadblocks: int = 256, thread_extents: Sequence[int] = (32, 64, 128, 256, 512, 1024)):
        self.max_threadblocks = max_threadblocks
        self.thread_extents = [int(n) for n in thread_extents]
        self.max_threads_per_block = None

    def initialize(self, target) -> None:
        target = as_target(target)
        if is_gpu(target):
            self.max_threads_per_block = target.max_threads_per_block or 1024

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if self.max_threads_per_block is None or not has_block(sch, block):
            return [sch]

        def factor(max_extent: int):
            extents = [n for n in self.thread_extents if n <= max_extent]
            if len(extents) <= 1:
                return extents[0] if extents else max_extent
            return sch.sample_categorical(extents, [1.0 / len(extents)] * len(extents))

        bind_block_thread_idx(sch, block, self.max_threadblocks, self.max_threads_per_block, factor)
        return [sch]


def bind_block_thread_idx(sch: Schedule, block: BlockRV, max_threadblocks: int, max_threads_per_block: int,
                          get_factor: Callable[[int], int]) -> None:
    """Bind ``block``'s outer spatial loops to ``blockIdx.x`` (and ``threadIdx.x``, of
    ``get_factor(limit)`` threads) unless it is bound already (TVM's BindBlockThreadIdx)."""
    if is_root_block(sch, block) or has_been_multi_level_tiled(sch, block):
        return
    loops = [sch.get(lp) for lp in sch.get_loops(block)]
    first_block = first_thread = multi_child = None
    spatial = -1                       # the last of the leading spatial loops
    for n, lp in enumerate(loops):
        tag = lp.thread_tag if lp.kind == "thread_binding" else ""
        if tag.startswith("blockIdx") and first_block is None:
            first_block = n
        if tag.startswith("threadIdx") and first_thread is None:
            first_thread = n
        if lp.kind != "serial" and multi_child is None:
            multi_child = n
        if not is_single_stmt(lp.body) and multi_child is None:
            multi_child = n + 1
        if loop_iter_type(lp) == "S" and spatial == n - 1:
            spatial = n
    multi_child = len(loops) if multi_child is None else multi_child
    if first_block is not None:
        return                          # on threads already (or under a kernel it is part of)
    handles = sch.get_loops(block)
    if spatial == -1:
        handles = [sch.add_unit_loop(handles[0] if handles else block)] + handles
        spatial = 0
        first_thread = None if first_thread is None else first_thread + 1
        multi_child += 1
    if first_thread is not None:
        n = min(multi_child, first_thread, spatial + 1)
        sch.bind(sch.fuse(*handles[:n]) if n else sch.add_unit_loop(handles[0]), "blockIdx.x")
        return
    fused = sch.fuse(*handles[:min(multi_child, spatial + 1)])
    extent = loop_extent(sch.get(fused))
    extent = (1 << 31) - 1 if extent is None else extent
    if extent <= max_threadblocks * max_threads_per_block:
        outer, inner = sch.split(fused, factors=[None, get_factor(min(extent, max_threads_per_block))])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    else:
        rest, blocks, threads = sch.split(fused, factors=[None, max_threadblocks, max_threads_per_block])
        sch.reorder(blocks, threads, rest)
        sch.bind(blocks, "blockIdx.x")
        sch.bind(threads, "threadIdx.x")
