"""`MatmulTensorCore`: float16 (and bfloat16) matrix products on tensor cores.

Two instruction sets, one schedule: on sm_80 and later ``mma.sync`` m16n8k16
(`compiler.mma_tiles`): blocks of up to 128x128 with warps of 64x64 (`MMA_TILINGS`, the
largest that divides I and J and still gives every multiprocessor a block), each lane's
accumulators written straight to C with the epilogue (where no tiling divides I and J, or a
roofline of the tiling, `_tiling_cost`, puts a padded one well ahead, the accumulators stored
into a shared tile of C whose rows are 8 elements longer, from which all threads write C with
the epilogue, the padding skipped), the operands loaded by ``ldmatrix`` from shared tiles
whose 16-byte chunks are XOR-swizzled by row (TVM's ``permuted_layout``,
`lower_gpu.permuted_layout`: no bank conflicts, no padding) and the K loop a 4-stage software
pipeline (fewer where its tiles would outgrow the GPU's shared memory) whose copies are
``cp.async`` (TVM's ``software_pipeline_stage`` annotations, `lower_gpu.software_pipeline`).
Otherwise (older GPUs, a symbolic row count) wmma 16x16x16 fragments, as follows.

Why: a GPU's tensor cores multiply 16x16 tiles of half-precision numbers many times faster
than its CUDA cores can; an fp16 matmul that does not use them leaves most of the chip idle.

The structure: each thread block computes a tile of C (blockIdx.x over J, blockIdx.y over
batch x I) with 4 warps (threadIdx.y), each warp a part of it as accumulator fragments
("wmma.accumulator"): 128x64 tiles of 64x32 per warp, 64x128 or 64x64, whichever pads I and
J least (`TILINGS`: a warp's larger tile reuses each fragment of A and B it loads for more
products). The reduction runs in steps of 32: per step the block copies its tiles of A and B
into shared memory (all threads, 16 bytes per instruction, threadIdx.x being the lane),
then for each 16 of the step every warp loads its fragments of A and B ("wmma.matrix_a",
"wmma.matrix_b") from there and multiplies them into its accumulators. At the end each
warp stores its accumulators into a shared tile of C, from which the block's threads write C
with the epilogue (bias, activation, cast) inlined.

A shared tile keeps the layout of the matrix it copies (K-major for ``x @ w.T``, row-major
for ``A @ B``: the fragment is then loaded column- or row-major), so that both sides of the
copy are contiguous; its rows are padded by 8 halfs (`storage_align`) so that the 16 rows a
fragment load reads do not fall into the same shared-memory banks. The tiles stay within
the 48 KiB of static shared memory every CUDA GPU gives a block.

The 16x16(x16) pieces a fragment operation covers are made blocks of their own (`blockize`)
and annotated ``tvms.wmma`` (``"fill"``, ``"load_a"``, ``"load_b"``, ``"mma"``, ``"store"``);
`compiler.tensor_cores.tensorize_wmma` replaces each with its intrinsic once the buffers
have their on-chip shapes. The rule applies to the canonical form the `Matmul` rule uses,
``C[S, I, J] += A[S, I, K] * B[S, J, K]``, with A and B float16, C float16 or float32, constant
extents but for I's (the rows may be a symbolic sequence length), and I and J of at least
`MIN_EXTENT`; anything else is left to `Matmul` and the GEMV
rules. Extents that are not whole tiles (I, J) or steps (K) are padded (`pad_einsum`): the
fills read zeros past the end, and the write-back of C skips the padding.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import const_int
from tvmscript.ir.tir_visitor import vars_in

from ...lower_gpu.permuted_layout import PERMUTED_LAYOUT
from ...lower_tir import dtype_bytes
from ...roofline import GPUS, wave_factor
from ...schedule_choices import (BLOCK_TILING, INSTRUCTIONS, PIPELINE_STAGES as STAGES_CHOICE, STEP_K as STEP_K_CHOICE,
                                 choose)
from ...tensor_cores import MMA_ANN, MMA_SCOPES, TF32_K, WMMA_ANN, WMMA_SCOPES
from .base import FILL_BLOCKS, GPUScheduleRule
from .matmul import (
    IterKind, auto_inline_consumer_chain, auto_inline_producers, blockize_tile_op, find_matmul_block, product_extents,
    spread_copy, to_canonical_form,
)
from .matmul_wgmma import WGMMA_TILINGS, is_k_major, schedule_wgmma, wgmma_stage_bytes, wgmma_step_k

__all__ = ["MatmulTensorCore"]

FRAGMENT = 16                 # m = n = k of the wmma shape used (and m, n of a 16x16 mma.sync tile)
STEP_K = 32                   # K per shared-memory step (the wmma schedule's always)
STEP_K_CHOICES = (16, 32, 64)  # what the mma.sync schedule's ``step_k`` knob takes
WARP_SIZE = 32
COPY_BYTES = 16               # what one thread moves per instruction into shared memory
# Shared rows of A and B are padded to a stride of 32k + 8 halfs (TVM's wmma schedules do the
# same): the rows of one fragment then start in different banks.
ROW_ALIGN_FACTOR, ROW_ALIGN_OFFSET = 32, 8
# The shared tile of C a padded mma.sync product goes through: rows of 32n + 8 elements.
C_ROW_ALIGN_OFFSET = 8
# Steps of K whose tiles of A and B are in shared memory at once (sm_80+: copied by cp.async
# three steps ahead of the step the tensor cores work on). On an H200 (2026-11-28,
# benchmarks/cuda_tilings.py) 4 stages made the 128x128 fp16 4096^3 product 15% faster than 3
# (432 against 376 TFLOP/s) and the GPT block's products no slower.
PIPELINE_STAGES = 4
# The most shared memory a pipeline's tiles may take, by compute capability: a little under
# what the GPU gives one block (sm_80 and sm_87 163 KiB, sm_90 227, sm_86 and sm_89 99: the
# last, for any other). Stages beyond it are dropped (`_pipeline_stages`), and a tiling of
# which 2 would not fit is not taken.
PIPELINE_SHARED_BYTES = {80: 160 * 1024, 87: 160 * 1024, 90: 224 * 1024}
PIPELINE_SHARED_BYTES_OTHER = 96 * 1024
# The stage counts a tuner may pick instead of the heuristic's (those that fit the GPU).
CHOSEN_STAGES = (2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Tiling:
    """A thread block's share of C: ``warps_i x warps_j`` warps, each ``frags_i x frags_j``
    accumulator fragments."""

    warps_i: int
    warps_j: int
    frags_i: int
    frags_j: int

    @property
    def tile_i(self) -> int:
        return self.warps_i * self.frags_i * FRAGMENT

    @property
    def tile_j(self) -> int:
        return self.warps_j * self.frags_j * FRAGMENT

    @property
    def warps(self) -> int:
        return self.warps_i * self.warps_j


# Preferred first. 128x64 and 64x128 fit a float32 tile of C (32 KiB) and the padded tiles
# of A and B in 48 KiB of shared memory.
TILINGS = (Tiling(2, 2, 4, 2), Tiling(2, 2, 2, 4), Tiling(2, 2, 2, 2))
# mma.sync's tilings, largest first: a warp's 64x64 tile of C takes 128 accumulator registers
# per lane, and each fragment of A and B it loads serves 4 (or 8) products. 128x128 of 4 warps
# comes first: on an H200 (2026-11-28, benchmarks/cuda_tilings.py) it beat 256x128 and 128x256
# of 8 warps (cuBLAS's choice on Ampere, a quarter fewer shared-memory bytes per product) on
# every product timed, by 1.1-1.4x (4096^3: 432 against 335 TFLOP/s; a GPT block's 4096 x 2304
# x 768: 264 against 197): two of its blocks fit a multiprocessor, one of theirs.
MMA_TILINGS = (Tiling(2, 2, 4, 4), Tiling(2, 2, 4, 2), Tiling(2, 2, 2, 4), Tiling(2, 2, 2, 2), Tiling(2, 2, 1, 2))
# TF32 keeps its earlier tilings (256x128 of 8 warps first) and 3 stages: its float32 tiles
# take twice the shared memory of fp16's (a 128x128 stage 36 KiB), and 4 stages (143 KiB) leave
# room for one block a multiprocessor where 3 leave two. On an H200 resnet18 at batch 32 with
# TF32 took 2.39-2.51 ms so, 2.64 with 4 stages (its 254-register convolutions at 4 warps a
# multiprocessor, not 8).
TF32_TILINGS = (Tiling(4, 2, 4, 4),) + MMA_TILINGS
TF32_STAGES = 3
# Below this many rows or columns of C a product is left to the GEMV and CUDA-core rules: a
# tile of tensor-core work would be mostly padding.
MIN_EXTENT = 32


def _dtypes(sch, block) -> tuple:
    b = sch.get(block)
    return tuple(r.buffer.dtype for r in b.reads) + tuple(w.buffer.dtype for w in b.writes)


class MatmulTensorCore(GPUScheduleRule):
    """fp16 matmuls on tensor cores (see the module docstring). ``mma_tilings`` (`Tiling`s,
    preferred first), ``stages`` (of the ``cp.async`` pipeline) and ``step_k`` (K per stage,
    one of `STEP_K_CHOICES`) replace `MMA_TILINGS`, `PIPELINE_STAGES` (TF32's: `TF32_TILINGS`,
    `TF32_STAGES`) and `STEP_K` in the mma.sync schedule: knobs for measuring the
    alternatives (benchmarks/cuda_tilings.py). A longer step halves the barriers and
    pipeline waits per product, for twice the shared memory a stage. On sm_90,
    ``instructions="wgmma"`` takes Hopper's warpgroup MMA (`matmul_wgmma`) where it applies,
    with ``wgmma_tilings`` (`WgmmaTiling`s) for `WGMMA_TILINGS` and ``wgmma_in_flight`` (0 or
    1) step batches left running while the next step's copies are issued."""

    def __init__(self, mma_tilings=None, stages=None, step_k=None, instructions: str = "mma",
                 wgmma_tilings=None, wgmma_in_flight: int = 1) -> None:
        if stages is not None and stages < 2:
            raise ValueError(f"MatmulTensorCore: a pipeline needs 2 stages or more, not {stages}")
        if step_k is not None and step_k not in STEP_K_CHOICES:
            raise ValueError(f"MatmulTensorCore: step_k must be one of {STEP_K_CHOICES}, not {step_k}")
        if instructions not in ("mma", "wgmma"):
            raise ValueError(f"MatmulTensorCore: instructions must be 'mma' or 'wgmma', not {instructions!r}")
        self.mma_tilings, self.stages = (tuple(mma_tilings) if mma_tilings else None), stages
        self.step_k = step_k or STEP_K
        self.instructions = instructions
        self.wgmma_tilings = tuple(wgmma_tilings) if wgmma_tilings else WGMMA_TILINGS
        self.wgmma_in_flight = wgmma_in_flight

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None or not _has_tensor_cores(target):
            return None
        main = find_matmul_block(sch)
        if main is None:
            return None
        a_dtype, b_dtype, c_dtype = _dtypes(sch, main)
        # float32 products run on tensor cores only where the target allows TF32 (10-bit mantissas).
        tf32 = (a_dtype, b_dtype, c_dtype) == ("float32",) * 3 and _allows_tf32(target)
        if not tf32 and (a_dtype != b_dtype or a_dtype not in ("float16", "bfloat16")
                         or c_dtype not in ("float16", "float32")):
            return None
        if not _multiplies_operands(sch.get(main)):
            return None
        # mma.sync: where the tiles divide the product its accumulators go straight to C; where
        # they do not (or I is symbolic: wmma), through a shared tile of C whose write-back skips
        # the padding.
        tilings = self.mma_tilings or (TF32_TILINGS if tf32 else MMA_TILINGS)
        stages = self.stages or (TF32_STAGES if tf32 else PIPELINE_STAGES)
        elem_bytes = 4 if tf32 else 2
        fitting = _fitting(tilings, elem_bytes, tf32, self.step_k, target) if _uses_mma(target) else []
        # The largest dividing tiling that fills the GPU, unless the tiling model puts another
        # (padded ones hold a shared tile of C too) well ahead (`_tiling_by_model`).
        padded_fitting = [t for t in fitting if _fits_with_c_tile(t, elem_bytes, tf32, self.step_k, c_dtype, target)]
        tiling, padded = _tiling_by_model(sch.get(main), fitting, padded_fitting, _mma_tiling_for(sch.get(main), fitting),
                                          elem_bytes, c_dtype, target)
        mma = tiling is not None
        tiling = tiling or _tiling_for(sch.get(main))
        if tiling is None or (not mma and a_dtype != "float16"):   # bfloat16, TF32: mma.sync only
            return None
        # The k of one instruction (m16n8k16; m16n8k8 for TF32) and of a step of the pipeline.
        frag_k = TF32_K if tf32 else FRAGMENT
        step_k = self.step_k if mma else STEP_K
        if mma and not padded:   # a tuner's picks (`schedule_choices`): option 0 is what the lines above chose
            step_k, tiling = _chosen_step_and_tiling(sch.get(main), tilings, elem_bytes, tf32, step_k, tiling, target)

        to_canonical_form(sch, main)   # C[S, I, J] += A[S, I, K] * B[S, J, K], as in `Matmul`
        if mma and not padded and self._wgmma(sch, main, target, a_dtype, c_dtype, tf32):
            return sch
        direct = mma and not padded    # the accumulators go straight to C
        # Extents that are not whole tiles compute on zeros past the end (a no-op otherwise).
        sch.pad_einsum(main, [1, tiling.tile_i, tiling.tile_j, step_k])

        batch, i, j, k = sch.get_loops(main)
        i0, i1, i2, i3 = sch.split(i, [None, tiling.warps_i, tiling.frags_i, FRAGMENT])
        j0, j1, j2, j3 = sch.split(j, [None, tiling.warps_j, tiling.frags_j, FRAGMENT])
        k0, k1, k2 = sch.split(k, [None, step_k // frag_k, frag_k])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2, i3, j3, k2)
        by = sch.fuse(batch, i0)
        sch.bind(by, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        warp = sch.fuse(i1, j1)
        sch.bind(warp, "threadIdx.y")

        scopes = MMA_SCOPES if mma else WMMA_SCOPES
        if direct:
            # Each lane holds its part of the accumulators, which it writes to C itself (the
            # epilogue inlined): no shared tile of C.
            c_frag = sch.cache_write(main, 0, scopes[2])
            sch.reverse_compute_at(c_frag, warp, preserve_unit_loops=True)
        else:
            # The accumulators, stored by each warp into a shared tile of C, written from
            # there by all threads with the epilogue, the padding's rows and columns skipped.
            c_shared = sch.cache_write(main, 0, "shared")
            c_frag = sch.cache_write(main, 0, scopes[2])
            sch.reverse_compute_at(c_frag, warp, preserve_unit_loops=True)
            sch.reverse_compute_at(c_shared, j0, preserve_unit_loops=True)
            if mma:
                # Rows 8 elements longer: the pairs a half-warp stores (rows lane / 4) fall in
                # different banks.
                sch.storage_align(c_frag, 0, axis=-2, factor=ROW_ALIGN_FACTOR, offset=C_ROW_ALIGN_OFFSET)

        # A and B: global -> shared (cooperative, every thread) -> fragments (per warp).
        def to_shared(index: int):
            block = sch.cache_read(main, index, "shared")
            sch.compute_at(block, k0, preserve_unit_loops=True)
            return block

        a_shared, b_shared = to_shared(0), to_shared(1)
        a_frag = sch.cache_read(main, 0, scopes[0])
        b_frag = sch.cache_read(main, 1, scopes[1])
        sch.compute_at(a_frag, k1, preserve_unit_loops=True)
        sch.compute_at(b_frag, k1, preserve_unit_loops=True)

        auto_inline_producers(sch, a_shared)
        auto_inline_producers(sch, b_shared)
        auto_inline_consumer_chain(sch, c_frag if direct else c_shared)
        for copy in (a_shared, b_shared):
            self._shared_layout(sch, copy, elem_bytes, mma)
            spread_copy(sch, copy, tiling.warps, WARP_SIZE, COPY_BYTES // elem_bytes)
        if not direct:
            spread_copy(sch, c_shared, tiling.warps, WARP_SIZE, 2)

        # The 16x16(x16) pieces the intrinsics take, each a block of its own.
        init = sch.decompose_reduction(main, k0)
        ann = MMA_ANN if mma else WMMA_ANN
        blockize_tile_op(sch, init, 2, ann, "fill")
        blockize_tile_op(sch, main, 3, ann, "mma")
        blockize_tile_op(sch, a_frag, 2, ann, "load_a", tiles=(FRAGMENT, frag_k))
        blockize_tile_op(sch, b_frag, 2, ann, "load_b", tiles=(FRAGMENT, frag_k))
        blockize_tile_op(sch, c_frag, 2, ann, "store", tiles=(FRAGMENT, FRAGMENT))
        if mma:
            # Copies of the next stages - 1 steps are in flight (cp.async) while step k computes.
            steps = const_int(sch.get(k0).extent)
            stage_bytes = _stage_bytes(tiling, elem_bytes, tf32, step_k)
            # The shared tile of C (padded products) takes its share of the shared memory.
            reserved = 0 if direct else _c_tile_bytes(tiling, c_dtype)
            stages = _chosen_stages(stages, stage_bytes, target, steps, reserved)
            sch.annotate(k0, "software_pipeline_stage", [0, 0, stages - 1])
            sch.annotate(k0, "software_pipeline_order", [0, 1, 2])
            sch.annotate(k0, "software_pipeline_async_stages", [0])
        return sch

    def _wgmma(self, sch, main, target, a_dtype: str, c_dtype: str, tf32: bool) -> bool:
        """Schedule the canonical product ``main`` with Hopper's wgmma (`matmul_wgmma`) where
        it can and the choice (`schedule_choices.INSTRUCTIONS`: the rule's ``instructions``
        first, a tuner's pick otherwise) says so; whether it did. wgmma is sm_90's only (not
        its successors'), takes A K-major (TF32: B too), and its tiles must divide I and J."""
        if _arch_number(target) != 90:
            return False
        if (a_dtype, c_dtype) == ("bfloat16", "float16") or not is_k_major(sch, main, "A"):
            return False
        if tf32 and not is_k_major(sch, main, "B"):
            return False
        b = sch.get(main)
        budget = _shared_budget(target)
        fitting = [t for t in self.wgmma_tilings if 2 * wgmma_stage_bytes(t) <= budget]
        first = _mma_tiling_for(b, fitting)
        if first is None:
            return False
        order = ["wgmma", "mma"] if self.instructions == "wgmma" else ["mma", "wgmma"]
        if choose(INSTRUCTIONS, order) != "wgmma":
            return False
        # wgmma's own points come after the choice of it (`choice_points` lists them too).
        tiling = choose(BLOCK_TILING, [first] + _other_dividing(b, fitting, first))
        elem_bytes = 4 if tf32 else 2
        step_k = wgmma_step_k(elem_bytes)
        steps = -(-const_int(b.iter_vars[3].dom.extent) // step_k)
        stages = _chosen_stages(self.stages or PIPELINE_STAGES, wgmma_stage_bytes(tiling), target, steps)
        sch.pad_einsum(main, [1, tiling.tile_i, tiling.tile_j, step_k])
        schedule_wgmma(sch, main, tiling, stages, self.wgmma_in_flight, elem_bytes)
        return True

    @staticmethod
    def _shared_layout(sch, copy, elem_bytes: int = 2, mma: bool = False) -> None:
        """Lay out the shared tile ``copy`` writes ([S, rows, K]) as the global matrix it reads
        is: [S, K, rows] when the matrix's last (contiguous) index follows the rows (B of
        ``A @ B``), so that the copy reads and writes runs of consecutive elements; then keep
        the rows an operand load reads at once out of each other's banks.

        The tiles of mma.sync have their 16-byte chunks XOR-swizzled by row (``permuted_layout``,
        `lower_gpu.permuted_layout`), which costs no shared memory: the fp16 ones, which
        ``ldmatrix`` reads a chunk a row, and the K-major float32 (TF32) ones, which each lane
        reads element by element (row ``lane / 4``, column ``lane % 4`` of an 8x4 patch: the
        8 rows' chunks land in 8 bank groups). A transposed TF32 tile (the 4 columns a row)
        cannot be swizzled so: its rows are padded to a stride of 32n + 8 floats, as are the
        wmma tiles' to 32n + 8 halfs, so that the rows a load reads start in different banks."""
        b = sch.get(copy)
        dst = b.writes[0]
        src = next((r for r in b.reads if r.buffer.scope in ("global", "")), None)
        transposed = False
        if src is not None and len(dst.region) >= 2:
            rows = set(vars_in([dst.region[-2].min]))
            k = set(vars_in([dst.region[-1].min]))
            last = set(vars_in([src.region[-1].min]))
            transposed = bool(last & rows and not last & k)
            if transposed:
                sch.transform_layout(copy, ("write", 0),
                                     lambda *idx: (*idx[:-2], idx[-1], idx[-2]))
        if mma and (elem_bytes == 2 or not transposed):
            sch.annotate(copy, PERMUTED_LAYOUT, 1)
            return
        sch.storage_align(copy, 0, axis=-2, factor=ROW_ALIGN_FACTOR, offset=ROW_ALIGN_OFFSET)


def _extents(block: tir.Block):
    """(S, I, J) of the canonical product, None for a symbolic I (the rows: a sequence length,
    say); None when another extent is symbolic or I or J is under `MIN_EXTENT` (such products
    are matrix-vector-like, for the other rules)."""
    extent = product_extents(block)
    if extent is None or None in (extent[IterKind.kIter_S], extent[IterKind.kIter_J], extent[IterKind.kIter_K]):
        return None
    s, i, j = extent[IterKind.kIter_S], extent[IterKind.kIter_I], extent[IterKind.kIter_J]
    if j < MIN_EXTENT or (i is not None and i < MIN_EXTENT):
        return None
    return s, i, j


def _tiling_for(block: tir.Block, tilings=TILINGS):
    """The one of ``tilings`` (wmma's `TILINGS`) that pads I and J least (the first of equals).
    With a symbolic I, the one that pads J least, of 64 rows where that ties (fewer padded rows
    whatever I turns out to be)."""
    extents = _extents(block)
    if extents is None or not tilings:
        return None
    _, i, j = extents

    def padded(n: int, tile: int) -> int:
        return -(-n // tile) * tile

    if i is None:
        return min(tilings, key=lambda t: (padded(j, t.tile_j), t.tile_i))
    return min(tilings, key=lambda t: padded(i, t.tile_i) * padded(j, t.tile_j))


def _fitting(tilings, elem_bytes: int, padded: bool, step_k: int, target) -> list:
    """The ``tilings`` of which 2 pipeline stages fit the GPU's shared memory (the others are
    no choice)."""
    return [t for t in tilings if 2 * _stage_bytes(t, elem_bytes, padded, step_k) <= _shared_budget(target)]


def _chosen_step_and_tiling(block: tir.Block, tilings, elem_bytes: int, padded: bool, step_k: int, tiling,
                            target) -> tuple:
    """``(step_k, tiling)`` as a tuner picked them (`schedule_choices.STEP_K`, then
    `BLOCK_TILING`): the heuristic's first, then every other step of `STEP_K_CHOICES` some
    tiling still fits with, and every other fitting tiling that divides I and J."""
    steps = [step_k] + [k for k in STEP_K_CHOICES
                        if k != step_k and _mma_tiling_for(block, _fitting(tilings, elem_bytes, padded, k, target))]
    chosen_k = choose(STEP_K_CHOICE, steps)
    fitting = _fitting(tilings, elem_bytes, padded, chosen_k, target)
    first = tiling if chosen_k == step_k else _mma_tiling_for(block, fitting)
    return chosen_k, choose(BLOCK_TILING, [first] + _other_dividing(block, fitting, first))


def _other_dividing(block: tir.Block, tilings, first) -> list:
    """The ``tilings`` other than ``first`` that divide I and J: a tuner's other options."""
    _, i, j = _extents(block)
    return [t for t in tilings if t != first and i % t.tile_i == 0 and j % t.tile_j == 0]


def _chosen_stages(stages: int, stage_bytes: int, target, steps, reserved: int = 0) -> int:
    """The pipeline's stages as a tuner picked them (`schedule_choices.PIPELINE_STAGES`): the
    heuristic's (`_pipeline_stages`) first, then every other count of `CHOSEN_STAGES` that fits."""
    stages = _pipeline_stages(stages, stage_bytes, target, steps, reserved)
    return choose(STAGES_CHOICE, [stages] + [n for n in CHOSEN_STAGES if n != stages and
                                             n <= _pipeline_stages(n, stage_bytes, target, steps, reserved)])


def _mma_tiling_for(block: tir.Block, tilings=MMA_TILINGS):
    """The largest of ``tilings`` (mma.sync's `Tiling`s or wgmma's) that divides I and J and
    still gives a thread block to each multiprocessor (`FILL_BLOCKS`), else the smallest that
    divides them; None when none does (the product is padded) or I is symbolic."""
    extents = _extents(block)
    if extents is None or extents[1] is None:
        return None
    s, i, j = extents
    fits = [t for t in tilings if i % t.tile_i == 0 and j % t.tile_j == 0]
    if not fits:
        return None
    filled = [t for t in fits if s * (i // t.tile_i) * (j // t.tile_j) >= FILL_BLOCKS]
    return filled[0] if filled else fits[-1]


def _tiling_by_model(block: tir.Block, fitting, padded_fitting, first, elem_bytes: int, c_dtype: str, target):
    """``(tiling, padded)``: the mma.sync tiling the product takes and whether it pads the
    product (through a shared tile of C). ``first`` is the heuristic's (`_mma_tiling_for`: the
    largest dividing tiling that fills the GPU); the tiling model (`_tiling_cost`, on the
    target's GPU) replaces it by a dividing tiling of ``fitting`` or a padded one of
    ``padded_fitting`` only where it puts that one `MODEL_MARGIN` times ahead, and picks the
    padded one where none divides I and J (without a model of the GPU: the one that pads
    least, `_tiling_for`). ``(None, False)`` for a symbolic I (wmma's) or no tilings."""
    extents = _extents(block)
    if extents is None or extents[1] is None:
        return first, False
    _, i, j = extents

    def divides(t) -> bool:
        return i % t.tile_i == 0 and j % t.tile_j == 0

    padded = [t for t in padded_fitting if not divides(t)]
    candidates = [(t, False) for t in fitting if divides(t)] + [(t, True) for t in padded]
    gpu = _gpu_model(target)
    if gpu is None or not candidates:
        if first is not None or not padded:
            return first, False
        return _tiling_for(block, padded), True
    k = product_extents(block)[IterKind.kIter_K]

    def cost(candidate) -> float:
        t, padded = candidate
        return _tiling_cost(t, extents, k, elem_bytes, dtype_bytes(c_dtype) if padded else 0, gpu)

    best = min(candidates, key=cost)
    if first is None or cost(best) * MODEL_MARGIN < cost((first, False)):
        return best
    return first, False


# The heuristic's tiling gives way to another (a padded one, through a shared tile of C) only
# where the model (`_tiling_cost`) puts that one this many times faster: the heuristic's were
# measured (2026-11-28, H200) and the model knows no more than traffic.
MODEL_MARGIN = 1.25


def _gpu_model(target):
    """The `roofline.GPUSpec` of the target's architecture (sm_90: an H100, sm_80: an A100), or
    None for another."""
    arch = f"sm_{_arch_number(target)}"
    return next((g for g in GPUS.values() if g.arch == arch), None)


def _tiling_cost(t: Tiling, extents: tuple, k: int, elem_bytes: int, c_bytes: int, gpu) -> float:
    """The estimated seconds of an S x I x J x K product in ``t``'s blocks on ``gpu``, a
    roofline of its three busiest resources (compiler/roofline.py's, from the tiling alone):

    * L2 to the SMs: each block copies its tiles of A and B, (tile_i + tile_j) x K;
    * the SMs' shared memory: each warp reads its fragments of A and B, (warp rows + warp
      columns) x K, and a padded product (``c_bytes``, the accumulator's size) writes and reads
      its tile of C once;
    * the tensor cores: the padded product's FLOPs;

    the last two over the blocks' waves (`roofline.wave_factor`). Small tiles read the
    operands many times; large ones pad the product and leave SMs idle."""
    s, i, j = extents
    blocks = s * -(-i // t.tile_i) * -(-j // t.tile_j)
    waves = wave_factor(blocks, gpu.sms)
    sm_bytes_per_s = gpu.sms * gpu.shared_bytes_per_clk * gpu.clock_ghz * 1e9
    l2 = blocks * (t.tile_i + t.tile_j) * k * elem_bytes / (gpu.l2_gbs * 1e9)
    warp_rows, warp_cols = t.frags_i * FRAGMENT, t.frags_j * FRAGMENT
    shared = blocks * (t.warps * (warp_rows + warp_cols) * k * elem_bytes + 2 * t.tile_i * t.tile_j * c_bytes)
    precision = {2: "fp16", 4: "tf32"}[elem_bytes]
    tensor = 2 * blocks * t.tile_i * t.tile_j * k / (gpu.tensor_tflops(precision) * 1e12)
    return max(l2, shared / sm_bytes_per_s * waves, tensor * waves)


def _fits_with_c_tile(t: Tiling, elem_bytes: int, padded: bool, step_k: int, c_dtype: str, target) -> bool:
    """Whether 2 pipeline stages of ``t`` and its shared tile of C (a padded product's) fit the
    GPU's shared memory."""
    return 2 * _stage_bytes(t, elem_bytes, padded, step_k) + _c_tile_bytes(t, c_dtype) <= _shared_budget(target)


def _c_tile_bytes(t: Tiling, c_dtype: str) -> int:
    """A padded product's shared tile of C: rows `C_ROW_ALIGN_OFFSET` elements longer."""
    return t.tile_i * (t.tile_j + C_ROW_ALIGN_OFFSET) * dtype_bytes(c_dtype)


def _pipeline_stages(stages: int, stage_bytes: int, target, steps=None, reserved: int = 0) -> int:
    """``stages``, or fewer (2 at least): no more than the K loop's ``steps`` + 1 (all of its
    copies in flight at once; more would only hold shared memory, which keeps blocks off a
    multiprocessor: attention's scores have K = 64, 2 steps), and no more of ``stage_bytes``
    (`_stage_bytes`) than fit in the target GPU's `_shared_budget` beside ``reserved`` bytes
    (a shared tile of C)."""
    stages = min(stages, (_shared_budget(target) - reserved) // stage_bytes)
    if steps is not None:
        stages = min(stages, steps + 1)
    return max(2, stages)


def _stage_bytes(tiling: Tiling, elem_bytes: int, padded: bool, step_k: int = STEP_K) -> int:
    """Shared memory for one step's tiles of A and B: ``tile_i + tile_j`` rows of ``step_k``,
    each padded by up to 8 elements where the layout is ``padded`` (TF32's; fp16's swizzled
    tiles are not): a TF32 128x128 pair of `STEP_K` takes 36 KiB, 40 counted."""
    return (tiling.tile_i + tiling.tile_j) * (step_k + (8 if padded else 0)) * elem_bytes


def _shared_budget(target) -> int:
    """`PIPELINE_SHARED_BYTES` for the target's compute capability."""
    return PIPELINE_SHARED_BYTES.get(_arch_number(target), PIPELINE_SHARED_BYTES_OTHER)


def _arch_number(target) -> int:
    """The compute capability in `Target`'s ``arch`` (``sm_86`` -> 86; an unknown one is taken
    as a recent GPU, an H100's 90)."""
    arch = str(target.attrs.get("arch") or "sm_90")
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return int(digits) if digits else 90


def _has_tensor_cores(target) -> bool:
    """sm_70 and later."""
    return target.kind.name == "cuda" and _arch_number(target) >= 70


def _allows_tf32(target) -> bool:
    """``cuda -allow_tf32=1``: float32 products may round their operands to TF32 (the
    counterpart of ``torch.backends.cuda.matmul.allow_tf32``); off unless asked for."""
    return bool(target.attrs.get("allow_tf32", False))


def _uses_mma(target) -> bool:
    """``mma.sync`` m16n8k16 with ``ldmatrix`` and ``cp.async``: sm_80 (Ampere) and later."""
    return _arch_number(target) >= 80


def _multiplies_operands(block: tir.Block) -> bool:
    """The update is ``C = C + A * B``, the operands possibly cast to C's type."""
    store = block.body
    if not isinstance(store, tir.BufferStore) or not isinstance(store.value, tir.Add):
        return False
    prod = store.value.b if isinstance(store.value.a, tir.BufferLoad) else store.value.a
    while isinstance(prod, tir.Cast):
        prod = prod.value
    if not isinstance(prod, tir.Mul):
        return False

    def operand(e) -> bool:
        while isinstance(e, tir.Cast):
            e = e.value
        return isinstance(e, tir.BufferLoad)

    return operand(prod.a) and operand(prod.b)
