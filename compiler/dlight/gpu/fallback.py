"""`Fallback`: a valid GPU schedule for any function.

Why it exists: every function must run on threads, even one no specialized rule recognizes.
Fallback inlines what it can (elementwise producers into their consumers, and consumers into
their producer), then for each remaining block fuses its spatial loops into one, splits it by
the target's ``max_threads_per_block`` and binds the two halves to ``blockIdx.x`` and
``threadIdx.x``. A reduction keeps its reduce loops inside each thread (one thread computes
one output element), its init split out of the reduce loop (`decompose_reduction`), and
accumulates in a register written to its buffer once (`accumulate_in_register`), not in
global memory at every step. It is slow for big reductions — that is what the other rules
are for — but always correct.
"""

from __future__ import annotations

from tvmscript.ir import tir

from ...schedule import ScheduleError

from ..analysis import has_thread_env, normalize_prim_func
from ..base import max_threads_per_block, try_inline
from .base import GPUScheduleRule, accumulate_in_register


class Fallback(GPUScheduleRule):
    """Inline, then bind each block's fused spatial loops to ``blockIdx.x`` x ``threadIdx.x``."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        max_threads = max_threads_per_block(target)
        block_infos = normalize_prim_func(sch)
        if block_infos is None:
            return None
        block_infos = try_inline(sch, block_infos)
        reductions = []
        for info in block_infos:
            block = info.block_rv
            loops = sch.get_loops(block)
            if any(sch.get(lp).kind == "thread_binding" for lp in loops):
                continue
            if not loops and has_thread_env(sch.get(block).body):
                continue
            s_loops, r_loops, o_loops = [], [], []
            for lp, kind in zip(loops, info.dom_kind()):
                {"S": s_loops, "R": r_loops, "O": o_loops}[kind].append(lp)
            if not s_loops:
                s_loops.append(sch.add_unit_loop(block))
            sch.reorder(*s_loops, *r_loops, *o_loops)
            fused = sch.fuse(*s_loops)
            extent = sch.get(fused).extent
            bx, tx = sch.split(fused, factors=[None, max_threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            if r_loops:
                exact = isinstance(extent, tir.IntImm) and extent.value % max_threads == 0
                reductions.append((block, tx, r_loops[0], exact))
        for block, tx, r_loop, exact in reductions:
            accumulate_in_register(sch, block, tx, exact)
            try:
                sch.decompose_reduction(block, r_loop)
            except ScheduleError:
                # Keeping the init inside the reduce loop is correct too (it runs at the
                # loop's first iteration); it only costs a branch.
                pass
        return sch
