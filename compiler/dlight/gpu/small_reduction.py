"""`SmallReduction`: many outputs, each reducing a few elements — depthwise convolutions,
pooling windows — one thread per output (tvms's rule; TVM's DLight gives them to
`GeneralReduction`).

Why: `GeneralReduction` gives each output a block of 256 threads that reduce its elements
cooperatively. A 3x3 depthwise convolution reduces 9 elements, so 247 of the 256 threads
idle, and each output pays a block's launch, a cross-warp reduction and two barriers:
mobilenet_v2's depthwise convolutions took 0.3 ms each on an H200 (56x56x144 outputs), most of
the model's time. One thread per output walks its 9 elements alone, with neighbouring threads
reading neighbouring pixels: `Fallback`'s schedule.

When: the function's reduction reduces at most `MAX_REDUCED` elements per output (constant
extents) over at least `MIN_OUTPUTS` outputs, enough threads to fill the GPU's SMs; a function
with few outputs (a global pooling at batch 1) stays with the cooperative rules.

What it does: inline what it can (the padding, elementwise producers), leaving one reduction
block and at most one elementwise epilogue; fuse the reduction's spatial loops and split them
over blocks of `THREADS` threads (neighbouring threads get neighbouring outputs: coalesced);
keep the accumulator in a register ("local") and compute the epilogue at each thread (or,
without one, store the register once: `accumulate_in_register`), so the function stays one
kernel that writes each output once.
"""

from __future__ import annotations

from math import prod

from ...schedule import ScheduleError
from ..analysis import normalize_prim_func
from ..base import split_epilogue, try_inline
from .base import GPUScheduleRule, accumulate_in_register

MAX_REDUCED = 64        # elements per output (a 7x7 window is 49); a warp's worth of threads idles below
MIN_OUTPUTS = 16384     # 64 blocks of 256 threads
THREADS = 256


class SmallReduction(GPUScheduleRule):
    """Functions with one small reduction of many outputs: one thread per output."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        infos = normalize_prim_func(sch)
        if not infos or not any(info.is_reduction() for info in infos):
            return None
        found = split_epilogue(try_inline(sch, infos))
        if found is None:
            return None
        info, epilogue = found
        if not info.is_reduction() or not _small_and_many(info):
            return None
        block = info.block_rv
        loops = sch.get_loops(block)
        s_loops = [lp for lp, kind in zip(loops, info.dom_kind()) if kind == "S"]
        r_loops = [lp for lp, kind in zip(loops, info.dom_kind()) if kind == "R"]
        if len(s_loops) + len(r_loops) != len(loops):
            return None
        sch.reorder(*s_loops, *r_loops)
        bx, tx = sch.split(sch.fuse(*s_loops), factors=[None, THREADS])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if epilogue is not None:
            sch.set_scope(block, 0, "local")
            sch.reverse_compute_at(epilogue.block_rv, tx, preserve_unit_loops=True)
        else:
            outputs = prod(it.dom for it in info.iters if it.kind == "S")
            accumulate_in_register(sch, block, tx, outputs % THREADS == 0)
        try:
            sch.decompose_reduction(block, r_loops[0])
        except ScheduleError:
            pass  # the init stays inside the reduce loop: correct, one branch more
        return sch


def _small_and_many(info) -> bool:
    """Whether a reduction block's extents are constants, it reduces at most `MAX_REDUCED`
    elements per output, and has at least `MIN_OUTPUTS` outputs."""
    if not all(isinstance(it.dom, int) for it in info.iters):
        return False
    reduced = prod(it.dom for it in info.iters if it.kind == "R")
    outputs = prod(it.dom for it in info.iters if it.kind == "S")
    return reduced <= MAX_REDUCED and outputs >= MIN_OUTPUTS
