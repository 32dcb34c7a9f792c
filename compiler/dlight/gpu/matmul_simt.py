"""`MatmulSIMT`: large float32 matrix products on the CUDA cores, in big register tiles.

Why: `Matmul` gives each thread 4x4 of C, so per step of K a thread loads 8 values from
shared memory for 16 FMAs, and the load/store pipe, not the FMA pipe, bounds the kernel (about
a third of cuBLAS's SGEMM speed on 4096^3). With 8x8 of C per thread, 16 values serve 64
FMAs, and loaded 4 at a time (16-byte shared loads) they take a quarter of the instructions.

The structure (the classic SGEMM): a thread block of 16x16 threads computes a 128x128 tile of
C; thread (ty, tx) holds the 8x8 of C at rows ``8 ty + [0, 8)`` and columns
``{0, 64} + 4 tx + [0, 4)``. The two runs of 4 columns, 64 apart, are what keeps a warp's
16-byte loads of a row of the B tile on 256 consecutive bytes (16 threads x 16 bytes: no bank
conflicts; 8 consecutive columns per thread would put two threads of each quarter-warp on the
same banks) and its stores of C on runs of 64 floats. The reduction runs in steps of
`STEP_K`: the block copies its 128x8 tiles of A and B into shared memory, both K-major
([K][128], rows padded to 132 floats: 16-byte aligned, and the 8 rows a transposing copy
writes at once start in different banks), and per k each thread loads its 8 values of A
(two 16-byte loads), then per run of columns its 4 values of B (one) and does 32 FMAs. The
copies run in a 3-stage software pipeline: those of step k + 2 are in flight while step k
computes (``cp.async`` where the copy moves 16-byte runs, i.e. the operand whose rows are
contiguous in global memory, B of ``A @ B``; a transposing copy, A of ``A @ B``, moves one
float per thread with the 8 threads of a row along K, coalesced, and waits for its loads).
The epilogue (bias, activation) is inlined into the write-back from registers. Where 128
columns do not divide J, or give too few tiles (a convolution's 64 output channels), the tile
is 128x64 for 16x8 threads, the runs of columns 32 apart. A convolution's input is read
through the im2col index one float per thread along the output pixels, which an image row
holds contiguously (its zero padding differs from one pixel to the next: no 16-byte loads).

The accumulators are one local array that compaction sizes to the thread's box, 8 x 68
floats of which the thread uses 64; every index into it is a constant once the loops around
the FMAs are unrolled, so NVRTC keeps the 64 in registers and drops the rest (ptxas: about
125 registers, no stack, two blocks per multiprocessor). The write-back is placed per thread
block and split over the threads as the product is, so that each thread writes its own 64.

Where: float32 A, B and C, constant extents, I and J multiples of `TILE`, K a multiple of
`STEP_K`, and at least `FILL_BLOCKS` tiles of C (batch included: a GPT block's 4096 x 768
projections, its 96 heads' 512 x 512 attention scores; smaller products are `Matmul`'s, whose
smaller tiles give more blocks). Anything else is left to `Matmul`.
"""

from __future__ import annotations

from tvmscript.ir import tir

from ...schedule_choices import BLOCK_TILING, PIPELINE_STAGES, STEP_K as STEP_K_CHOICE, choose
from .base import FILL_BLOCKS, SMS, GPUScheduleRule
from .matmul import (
    IterKind, auto_inline_consumer_chain, auto_inline_producers, bind_copy_threads, copy_along_contiguous_rows,
    find_matmul_block, product_extents, to_canonical_form,
)

__all__ = ["MatmulSIMT"]

TILE = 128            # rows (and columns) of C per thread block
HALF_TILE_J = 64      # the columns of the narrower tile (128 threads)
THREADS = 16          # threads along I (and J: 256 in all; 8 along J for 64 columns)
MICRO = 8             # each thread computes MICRO x MICRO of C
VECTOR = 4            # floats per 16-byte access
STEP_K = 8            # K per pipeline step
# The longer step a tuner may pick instead (`schedule_choices.STEP_K`) where K divides into it:
# half the barriers and pipeline waits per product, for twice the shared memory a stage (its
# 2 x 16 x 132 floats, 17 KiB, make 3 stages dynamic shared memory).
LONG_STEP_K = 16
STAGES = 3
CHOSEN_STAGES = (2, 3, 4, 5)  # the stage counts a tuner may pick instead (5 of 8 KiB fit 48 KiB)
# Shared rows of the K-major tiles: 128 + 4 floats, so that the 8 rows a transposing copy
# writes at once start in different banks (4 apart) and every row stays 16-byte aligned.
ROW_ALIGN_FACTOR, ROW_ALIGN_OFFSET = 32, 4


# I and K are padded to whole tiles and steps where that adds at most this fraction to them
# (resnet18's last stage at batch 32: 1568 rows -> 1664, 6%; its first convolution's K = 3 x 7
# x 7 = 147 -> 152, 3%).
MAX_PADDING = 1 / 8
# Into how many parts K may be split (over blocks, blockIdx.y) when a product has too few tiles
# to fill the GPU; each part at least `MIN_SPLIT_K` long (32 steps: the second kernel and the
# workspace's traffic stay small beside the products).
SPLITS = (1, 2, 3, 4, 6, 8)
MIN_SPLIT_K = 256
SUM_THREADS = 256     # threads per block of the kernel that adds the parts up


def _plan(block: tir.Block, candidates=(TILE, HALF_TILE_J)):
    """``(tile_j, splits)``: the columns of C a thread block takes, of ``candidates`` (`TILE`,
    `HALF_TILE_J`), and the parts K is split into; None where the rule does not apply: float32
    operands and result, constant extents (batch axes of any), J a multiple of the tile, I of
    `TILE` and K of `STEP_K` or padded to them (`MAX_PADDING`), and tiles enough
    to give every multiprocessor of a large GPU one (`FILL_BLOCKS`), counting the parts of K.

    K is split only where the whole tiles are too few, into the fewest parts that make enough
    blocks (`SPLITS`; K divides into them, each of `MIN_SPLIT_K` or more): each part's block
    sums its share of K into a float32 workspace, and a second kernel adds the parts up with
    the epilogue. Of the choices that qualify, the one whose busiest multiprocessor has the
    least of C to compute (`_busiest_share`), on a tie the one with fewer parts, then 128
    columns (each value loaded from shared memory serves more FMAs): on an H200, 192 tiles of
    128 x 128 (a GPT block's 4096 x 768 projections) ran at 28.7 TFLOP/s, 768 and 1024 tiles at
    37.6 and 40.2, as if the 60 SMs with two tiles set the time while the other 72 idled half of
    it; 384 tiles of 128 x 64 give 3 half tiles to the busiest SMs instead of 2 whole ones."""
    if any(r.buffer.dtype != "float32" for r in list(block.reads) + list(block.writes)):
        return None
    extent = product_extents(block)
    if extent is None or None in extent.values():
        return None
    s, i = extent[IterKind.kIter_S], extent[IterKind.kIter_I]
    j, k = extent[IterKind.kIter_J], extent[IterKind.kIter_K]
    row_tiles = -(-i // TILE)
    padded_k = -(-k // STEP_K) * STEP_K
    if row_tiles * TILE - i > i * MAX_PADDING or padded_k - k > padded_k * MAX_PADDING:
        return None
    options = []
    for t in candidates:
        tiles = s * row_tiles * (j // t)
        splits = next((n for n in SPLITS if tiles * n >= FILL_BLOCKS and padded_k % (n * STEP_K) == 0
                       and (n == 1 or padded_k // n >= MIN_SPLIT_K)), None)
        if j % t == 0 and splits is not None:
            options.append((_busiest_share(tiles * splits, t) / splits, splits, -t))
    if not options:
        return None
    _, splits, t = min(options)
    return -t, splits


def _busiest_share(tiles: int, tile_j: int) -> int:
    """Columns of C (of `TILE` rows) that the busiest of `SMS` multiprocessors computes when
    ``tiles`` tiles of ``tile_j`` columns are dealt out evenly: the product's time, where
    blocks keep a multiprocessor equally busy whatever their size."""
    return -(-tiles // SMS) * tile_j


class MatmulSIMT(GPUScheduleRule):
    """Big-tile fp32 matmuls on CUDA cores (see the module docstring). ``tile_j`` (`TILE` or
    `HALF_TILE_J`) makes every block take that many columns of C where they qualify, instead
    of the rule's choice: a knob for measuring the alternatives (benchmarks/cuda_tilings.py).
    A tuner may pick the other block width, the pipeline's stages and K per step (`STEP_K` or
    `LONG_STEP_K`)."""

    def __init__(self, tile_j=None) -> None:
        if tile_j not in (None, TILE, HALF_TILE_J):
            raise ValueError(f"MatmulSIMT: tile_j must be {TILE} or {HALF_TILE_J}, not {tile_j}")
        self.tile_j = tile_j

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None or target.kind.name != "cuda":
            return None
        main = find_matmul_block(sch)
        candidates = (TILE, HALF_TILE_J) if self.tile_j is None else (self.tile_j,)
        plan = None if main is None else _plan(sch.get(main), candidates)
        if plan is None:
            return None
        # A tuner's picks (`schedule_choices`): the other block width, where it qualifies too.
        others = [p for p in (_plan(sch.get(main), (t,)) for t in candidates) if p is not None and p != plan]
        tile_j, splits = choose(BLOCK_TILING, [plan] + others)
        threads_j = tile_j // MICRO                        # 16 (256 threads) or 8 (128)
        k_extent = product_extents(sch.get(main))[IterKind.kIter_K]
        step_k = choose(STEP_K_CHOICE, [STEP_K] + ([LONG_STEP_K] if k_extent % (LONG_STEP_K * splits) == 0 else []))
        to_canonical_form(sch, main)
        sch.pad_einsum(main, [1, TILE, tile_j, step_k])    # past I and K: zeros (a no-op if none)
        if splits > 1:
            main, s = self._split_k(sch, main, splits)
            _, i, j, k = sch.get_loops(main)
        else:
            s, i, j, k = sch.get_loops(main)
        bi, ty, ii = sch.split(i, [None, THREADS, MICRO])
        bj, jo, tx, ji = sch.split(j, [None, MICRO // VECTOR, threads_j, VECTOR])
        ko, ki = sch.split(k, [None, step_k])
        sch.reorder(bi, bj, ty, tx, ko, ki, jo, ii, ji)
        by = sch.fuse(s, bi)
        sch.bind(by, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")

        c_local = self._accumulators(sch, main, bj, threads_j)
        a_shared, b_shared = (self._to_shared(sch, main, n, ko) for n in (0, 1))
        a_local = self._to_registers(sch, main, 0, ki)     # a thread's 8 rows at k
        b_local = self._to_registers(sch, main, 1, jo)     # 4 of its columns at k
        auto_inline_producers(sch, a_shared)
        auto_inline_producers(sch, b_shared)
        if splits == 1:                 # (else the epilogue follows the sum of the parts)
            auto_inline_consumer_chain(sch, c_local)
        for copy in (a_shared, b_shared):
            sch.storage_align(copy, 0, axis=1, factor=ROW_ALIGN_FACTOR, offset=ROW_ALIGN_OFFSET)
            self._cooperative(sch, copy, threads_j)
        # Shared memory to registers 16 bytes at a time (the unit k loop fused in).
        for copy in (a_local, b_local):
            _, vec = sch.split(sch.fuse(*sch.get_loops(copy)[-2:]), [None, VECTOR])
            sch.vectorize(vec)
        sch.decompose_reduction(main, ko)
        for lp in (ki, jo, ii, ji):
            sch.unroll(lp)
        stages = choose(PIPELINE_STAGES, [STAGES] + [n for n in CHOSEN_STAGES if n != STAGES])
        sch.annotate(ko, "software_pipeline_stage", [0, 0, stages - 1])
        sch.annotate(ko, "software_pipeline_order", [0, 1, 2])
        sch.annotate(ko, "software_pipeline_async_stages", [0])
        return sch

    @staticmethod
    def _split_k(sch, main, splits: int):
        """K in ``splits`` parts: ``<C>_rf[part, S, I, J]`` (global memory) gets each part's sum
        from a block of its own, then a second kernel adds the parts, one output per thread,
        with the epilogue. Returns the partial products' block and its fused (part, S) loop."""
        k = sch.get_loops(main)[3]
        part, _ = sch.split(k, [splits, None])
        partial = sch.rfactor(part, 0)
        # The sum of the parts, then the epilogue, from registers.
        total = sch.cache_write(main, 0, "local")
        loops = sch.get_loops(main)[:3]
        bx, tx = sch.split(sch.fuse(*loops), [None, SUM_THREADS])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.reverse_compute_at(total, tx, preserve_unit_loops=True)
        auto_inline_consumer_chain(sch, total)
        s, i, j, part, k = sch.get_loops(partial)
        sch.reorder(part, s, i, j, k)            # the part outermost
        return partial, sch.fuse(part, s)

    @staticmethod
    def _accumulators(sch, main, bj, threads_j: int):
        """The thread's 8x8 of C in registers, laid out [row][half][4 columns] (its columns
        are two runs of 4, half the tile apart), and written back by the thread that computed
        them: the write-back is placed per thread block and split over the threads as the
        product is."""
        c_local = sch.cache_write(main, 0, "local")
        sch.reverse_compute_at(c_local, bj, preserve_unit_loops=True)
        i, j = sch.get_loops(c_local)[-2:]
        ty, ii = sch.split(i, [THREADS, MICRO])
        jo, tx, ji = sch.split(j, [MICRO // VECTOR, threads_j, VECTOR])
        sch.reorder(ty, tx, ii, jo, ji)
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(ji)
        return c_local

    @staticmethod
    def _to_shared(sch, main, index: int, ko):
        """The tile of A or B ([S, rows, K]) for one step of K, in shared memory K-major."""
        block = sch.cache_read(main, index, "shared")
        sch.compute_at(block, ko, preserve_unit_loops=True)
        sch.transform_layout(block, ("write", 0), lambda s, r, k: (s, k, r))
        return block

    @staticmethod
    def _to_registers(sch, main, index: int, ki):
        """The values of A or B the thread's FMAs under ``ki`` use, loaded into registers."""
        block = sch.cache_read(main, index, "local")
        sch.compute_at(block, ki, preserve_unit_loops=True)
        return block

    @staticmethod
    def _cooperative(sch, block, threads_j: int) -> None:
        """The copy ``block`` (loops [S, rows, K]) spread over the block's threads, neighbouring
        threads taking neighbouring elements of the global matrix: 16 bytes each where its
        contiguous index is the rows (which the K-major shared tile keeps together), one
        element each along the rows where that index follows K too (a convolution's im2col
        read: an image row's pixels, whose zero padding differs from one to the next), else
        one element each along K (a transposing copy)."""
        loops = sch.get_loops(block)
        n = len(sch.get(block).iter_vars)
        own = loops[-n:]
        own, contiguous = copy_along_contiguous_rows(sch, block, own)
        bind_copy_threads(sch, own, THREADS, threads_j, VECTOR if contiguous == "rows" else 1)
