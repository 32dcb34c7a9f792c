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
tiles): a block of `WARPS` warps takes `TILE_I` x `TILE_J` of C, each warp `TILE_I` x
(`TILE_J` / `WARPS`) of it; lane ``l`` of a warp accumulates, in registers, the products of the
K indices ``l, l + 32, l + 64, ...`` for each of the warp's 32 outputs (consecutive lanes read
consecutive elements of a K-contiguous operand: coalesced, without shared memory), then each
output's 32 partial sums are combined across the warp (`rfactor`, the reduce loop bound to
``threadIdx.x``: a cross-thread reduction of shuffles only), written to shared memory, and
read back one output per lane for the epilogue (bias, residual, activation), which stays in
the kernel.

When: no other rule's tiles fill the GPU — fewer than `FILL_BLOCKS` of `Matmul`'s 32x64 tiles
(the rules before it, `MatmulTensorCore` and `MatmulSIMT`, take larger products) — and K is at
least `MIN_K`, so that each lane has a run of its own to sum; B must be contiguous along K
(a convolution's weights, ``x @ W.T``), or the lanes' reads would not coalesce. A
matrix-vector product (one row or one column of C) is left to the rules after it.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from .base import FILL_BLOCKS, GPUScheduleRule
from .matmul import (
    IterKind, auto_inline_consumer_chain, auto_inline_producers, find_matmul_block, product_extents,
    to_canonical_form,
)

__all__ = ["MatmulSplitK"]

LANES = 32            # the lanes of a warp, each summing every 32nd index of K
WARPS = 4             # warps per thread block
TILE_I = 8            # rows of C per block
TILE_J = 16           # columns of C per block: TILE_J / WARPS per warp, TILE_I x that = 32 outputs
DEFAULT_TILE = (32, 64)   # `Matmul`'s tile of C on CUDA, whose count decides where this rule applies
MIN_K = 256           # K enough for a run of 8 per lane


def _qualifies(block: tir.Block) -> bool:
    """Constant extents, floating-point operands and result, fewer than `FILL_BLOCKS` of
    `Matmul`'s tiles, K of at least `MIN_K`, more than one row and column of C, and B (the
    weights, usually: the larger operand of a product with few rows) contiguous along K."""
    if any(not tir.is_float(r.buffer.dtype) for r in list(block.reads) + list(block.writes)):
        return False
    extent = product_extents(block)
    if extent is None or None in extent.values():
        return False
    if not _contiguous_along_k(block, block.reads[1]):      # B: the read `detect_iter_traits` indexes by J
        return False
    s, i, j, k = (extent[kind] for kind in (IterKind.kIter_S, IterKind.kIter_I, IterKind.kIter_J, IterKind.kIter_K))
    tiles = s * -(-i // DEFAULT_TILE[0]) * -(-j // DEFAULT_TILE[1])
    return tiles < FILL_BLOCKS and k >= MIN_K and i > 1 and j > 1


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
    """Few tiles, long K: K split over a warp's lanes (see the module docstring)."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None or target.kind.name != "cuda":
            return None
        main = find_matmul_block(sch)
        if main is None or not _qualifies(sch.get(main)):
            return None
        to_canonical_form(sch, main)
        sch.pad_einsum(main, [1, TILE_I, TILE_J, LANES])
        s, i, j, k = sch.get_loops(main)
        bi, ii = sch.split(i, [None, TILE_I])
        bj, warp, jj = sch.split(j, [None, WARPS, TILE_J // WARPS])
        ko, lane = sch.split(k, [None, LANES])
        sch.reorder(s, bi, bj, warp, lane, ko, ii, jj)

        # Each lane's partial sums of the warp's 32 outputs, in registers.
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

        # The lanes' sums of each output combined with shuffles, into shared memory.
        sch.reverse_compute_at(main, warp, preserve_unit_loops=True)
        lane, *spatial = sch.get_loops(main)[3:]
        sch.reorder(*spatial, lane)
        sch.bind(lane, "threadIdx.x")
        # From there to C, with the epilogue (bias, residual, activation, the reshapes of a
        # convolution's output) inlined: one output per lane.
        out = sch.cache_write(main, 0, "shared")
        sch.reverse_compute_at(out, warp, preserve_unit_loops=True)
        auto_inline_consumer_chain(sch, out)
        _, lanes = sch.split(sch.fuse(*sch.get_loops(out)[3:]), [None, LANES])
        sch.bind(lanes, "threadIdx.x")
        return sch
