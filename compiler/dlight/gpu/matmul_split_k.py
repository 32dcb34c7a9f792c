"""`MatmulSplitK`: matrix products with few tiles of C and a long K (tvms's rule) — K split
across the 32 lanes of a warp, one launch.

Why: a tile of C is one thread block's work, and a product with few tiles leaves most of the
GPU idle while each block walks K alone. resnet18's last convolutions at batch 1 are 49 pixels
by 512 channels by K = 4608: 16 tiles of `Matmul`'s 32x64 for 132 multiprocessors, each block
288 steps of K with a barrier and a round trip to memory in each; on an H200 one took 0.56 ms,
3.6x its roofline estimate (a GPT block's projections at 128 tokens are alike: 48 tiles). The
usual cure, splitting K over blocks, needs a second launch (or atomics) to add the partial
sums; here K is split over the lanes of a warp instead, and the lanes' sums are added with
warp shuffles, so the product stays one kernel.

What it does, on the canonical form ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` (padded to whole
tiles): a block of `WARPS` warps takes `TILE_I` rows of C; its warps form ``4 / warps_k``
groups, each taking `COLUMNS` columns (32 outputs), and the ``32 warps_k`` threads of a group
(threadIdx.x) share each output's K: thread ``t`` accumulates, in registers, the products of
the K indices ``t, t + 32 warps_k, ...`` for the group's 32 outputs (consecutive threads read
consecutive elements of a K-contiguous operand: coalesced, without shared memory), then each
output's partial sums are combined across the threads (`rfactor`, the reduce loop bound to
``threadIdx.x``: shuffles within a warp, and shared memory between the warps of a group),
written to shared memory, and read back one output per thread for the epilogue (bias,
residual, activation), which stays in the kernel.

``warps_k`` (`_warps_k`): the most of 4, 2, 1 that keeps the grid within `MAX_BLOCKS`. More
threads per output, each with a shorter run of K, keep more loads in flight where a product
has few outputs; past about 8 blocks a multiprocessor, the shuffles and barriers of the
longer sums cost more than they hide. Measured on an H200 (2026-11-28,
benchmarks/cuda_tilings.py, resnet18's 3x3 convolutions at batch 1, microseconds, cuDNN
beside): 49 x 512, K = 4608: 161 with warps_k 1, 83 with 2, 51 with 4 (896 blocks; cuDNN
109); 196 x 256, K = 2304: 93, 68 (800 blocks), 73 (cuDNN 57); 784 x 128, K = 1152: 68 (784
blocks), 97, 97 (`Matmul` 98). A product that needs more than `MAX_BLOCKS` even with
warps_k 1 has rows enough for `Matmul`: 3136 x 64, K = 576 took 98 here, 50 in `Matmul`.

When: no other rule's tiles fill the GPU — fewer than `FILL_BLOCKS` of `Matmul`'s 32x64 tiles
(the rules before it, `MatmulTensorCore` and `MatmulSIMT`, take larger products) — K is at
least `MIN_K`, so that each thread has a run of its own to sum, and the grid fits
`MAX_BLOCKS`; B must be contiguous along K (a convolution's weights, ``x @ W.T``), or the
threads' reads would not coalesce. A matrix-vector product (one row or one column of C) is
left to the rules after it.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from .base import FILL_BLOCKS, SMS, GPUScheduleRule
from .matmul import (
    IterKind, auto_inline_consumer_chain, auto_inline_producers, find_matmul_block, product_extents,
    to_canonical_form,
)

__all__ = ["MatmulSplitK"]

LANES = 32            # the lanes of a warp, each summing every 32nd index of K
WARPS = 4             # warps per thread block
TILE_I = 8            # rows of C per block
COLUMNS = 4           # columns of C per group of warps sharing K: TILE_I x COLUMNS = 32 outputs
DEFAULT_TILE = (32, 64)   # `Matmul`'s tile of C on CUDA, whose count decides where this rule applies
MIN_K = 256           # K enough for a run of 8 per thread, per warp sharing it
MAX_BLOCKS = 8 * SMS  # the most blocks a split-K grid may have (see the module docstring)


def _warps_k(block: tir.Block, choices=(4, 2, 1)):
    """The warps that share each output's K, the most of ``choices`` whose grid fits
    `MAX_BLOCKS` and whose threads each get a run of 8 or more; None where the rule does not
    apply: constant extents, floating-point operands and result, fewer than `FILL_BLOCKS` of
    `Matmul`'s tiles, K of at least `MIN_K`, more than one row and column of C, B (the
    weights, usually: the larger operand of a product with few rows) contiguous along K, and a
    grid within `MAX_BLOCKS`."""
    if any(not tir.is_float(r.buffer.dtype) for r in list(block.reads) + list(block.writes)):
        return None
    extent = product_extents(block)
    if extent is None or None in extent.values():
        return None
    if not _contiguous_along_k(block, block.reads[1]):      # B: the read `detect_iter_traits` indexes by J
        return None
    s, i, j, k = (extent[kind] for kind in (IterKind.kIter_S, IterKind.kIter_I, IterKind.kIter_J, IterKind.kIter_K))
    tiles = s * -(-i // DEFAULT_TILE[0]) * -(-j // DEFAULT_TILE[1])
    if tiles >= FILL_BLOCKS or k < MIN_K or i <= 1 or j <= 1:
        return None

    def blocks(warps_k: int) -> int:
        return s * -(-i // TILE_I) * -(-j // (COLUMNS * (WARPS // warps_k)))
    return next((w for w in choices if blocks(w) <= MAX_BLOCKS and k >= MIN_K * w), None)


def _contiguous_along_k(block: tir.Block, read: tir.BufferRegion) -> bool:
    """Whether the last (contiguous) index of ``read`` moves with the reduced iterators alone:
    then the 32 lanes, at 32 consecutive K, read 32 consecutive elements. (B[K, J], contiguous
    along J, would cost a sector per lane: `Matmul` stages it through shared memory instead.)"""
    if not read.region:
        return False
    reduced = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    last = set(vars_in([read.region[-1].min]))
    return bool(last) and last <= reduced


class MatmulSplitK(GPUScheduleRule):
    """Few tiles, long K: K split over the threads of a warp or more (see the module
    docstring). ``warps_k`` (1, 2 or 4) makes every product the rule takes share K among that
    many warps instead of the rule's choice: a knob for measuring the alternatives
    (benchmarks/cuda_tilings.py)."""

    def __init__(self, warps_k=None) -> None:
        if warps_k not in (None, 1, 2, 4):
            raise ValueError(f"MatmulSplitK: warps_k must be 1, 2 or 4, not {warps_k}")
        self.warps_k = warps_k

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None or target.kind.name != "cuda":
            return None
        main = find_matmul_block(sch)
        choices = (4, 2, 1) if self.warps_k is None else (self.warps_k,)
        warps_k = None if main is None else _warps_k(sch.get(main), choices)
        if warps_k is None:
            return None
        groups = WARPS // warps_k               # groups of warps (threadIdx.y), each on its own columns
        threads_k = LANES * warps_k             # the threads (threadIdx.x) that share an output's K
        to_canonical_form(sch, main)
        sch.pad_einsum(main, [1, TILE_I, groups * COLUMNS, threads_k])
        s, i, j, k = sch.get_loops(main)
        bi, ii = sch.split(i, [None, TILE_I])
        bj, warp, jj = sch.split(j, [None, groups, COLUMNS])
        ko, lane = sch.split(k, [None, threads_k])
        sch.reorder(s, bi, bj, warp, lane, ko, ii, jj)

        # Each thread's partial sums of its group's 32 outputs, in registers.
        partial = sch.rfactor(lane, 0)
        s, bi, bj, warp, lane, ko, ii, jj = sch.get_loops(partial)
        by = sch.fuse(s, bi)
        sch.bind(by, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        sch.bind(warp, "threadIdx.y")
        sch.bind(lane, "threadIdx.x")
        sch.set_scope(partial, 0, "local")
        auto_inline_producers(sch, partial)        # the operands read from global memory directly
        sch.decompose_reduction(partial, ko)
        sch.unroll(ii)
        sch.unroll(jj)

        # The threads' sums of each output combined (shuffles, and shared memory between the
        # warps of a group), into shared memory.
        sch.reverse_compute_at(main, warp, preserve_unit_loops=True)
        lane, *spatial = sch.get_loops(main)[3:]
        sch.reorder(*spatial, lane)
        sch.bind(lane, "threadIdx.x")
        # From there to C, with the epilogue (bias, residual, activation, the reshapes of a
        # convolution's output) inlined: one output per thread.
        out = sch.cache_write(main, 0, "shared")
        sch.reverse_compute_at(out, warp, preserve_unit_loops=True)
        auto_inline_consumer_chain(sch, out)
        _, lanes = sch.split(sch.fuse(*sch.get_loops(out)[3:]), [None, threads_k])
        sch.bind(lanes, "threadIdx.x")
        return sch
