"""Hopper's warpgroup MMA (``wgmma``) for `MatmulTensorCore`: fp16, bf16 and TF32 products on sm_90.

Why: on an H100 or H200 ``mma.sync`` reaches about two thirds of the tensor cores' peak (the
operands go through registers, each warp loading its own with ``ldmatrix``); cuBLAS's kernels
use ``wgmma.mma_async``, which reads both operands straight from shared memory for a whole
warpgroup (4 warps, 128 threads) and runs asynchronously, m64nNk16 at a time with N up to 256.
The mma.sync schedule measured 56% of cuBLAS on the 4096^3 fp16 product (H200, 2026-11-28).

The structure (the mma.sync schedule's, with warpgroups for warps):

* a thread block computes a `WgmmaTiling`: ``warpgroups`` warpgroups (threadIdx.y; threadIdx.x
  the 128 threads of one) along I, each ``frags_m`` tiles of 64 rows by the block's ``n``
  columns, one ``m64n{n}k16`` instruction per tile and 16 of K (``m64n{n}k8`` and 8 of K for
  TF32: 32 bytes of each operand row either way);
* K runs in steps of 128 bytes (64 halves or 32 floats: one row of a 128-byte swizzle), each step's tiles
  of A and B copied into shared memory by every thread with ``cp.async``, in a software pipeline
  of `stages` steps (TVM's ``software_pipeline_stage`` annotations, as the mma.sync schedule);
* the shared tiles are laid out as the tensor cores read a 128-byte-swizzled operand: A's
  [rows][128 bytes] (K-major), B's [J][128 bytes] when B is K-major (``x @ w.T``), else, for
  16-bit types, [J / 64][64][64] (B of ``A @ B``: N-major, 64 columns of 128 bytes a row, 8
  rows an atom), their 16-byte chunks
  XOR-swizzled by row (``permuted_layout``, which is that swizzle on 1024-byte-aligned tiles);
* the accumulators live in scope ``warpgroup.wgmma_acc``, a warpgroup's tiles, which
  `compiler.wgmma_tiles` gives to the threads as registers (n / 2 per thread per tile); each
  thread writes its elements of C itself, with the epilogue;
* the blocks annotated ``tvms.wgmma`` (``"fill"``, ``"mma"``, ``"store"``) are what
  `wgmma_tiles.tensorize_wgmma` makes instructions of; the loop over a step's K (annotated
  ``tvms.wgmma_step``) is one batch between a fence and a commit, after which the wait leaves
  one batch running: the tensor cores work on step s while the threads wait for step s + 1's
  tiles, and the copies of a later step go into the tiles of step s - 1, which are free then
  (the step's copies come after its wgmmas in the loop body).

Only K-major A is taken (A of ``A @ B`` and of ``x @ w.T`` is), and for TF32 (float32 products
where the target allows it) only K-major B too: PTX's wgmma transposes 16-bit operands only.
The rest is left to the mma.sync schedule, as is a product whose tiles would need padding.

TF32 operands are read from the float32 tiles as they are: the tensor cores use the top 19
bits of each (truncation), where the mma.sync schedule rounds to nearest (``cvt.rna``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_visitor import vars_in

from ...lower_gpu.common import WGMMA_ACC_SCOPE
from ...lower_gpu.permuted_layout import PERMUTED_LAYOUT
from ...wgmma_tiles import WGMMA_ANN, WGMMA_STEP_ANN
from .matmul import auto_inline_consumer_chain, auto_inline_producers, blockize_tile_op, spread_copy

__all__ = ["WgmmaTiling", "WGMMA_TILINGS", "WGMMA_ANN", "WGMMA_STEP_ANN", "schedule_wgmma", "wgmma_step_k",
           "wgmma_stage_bytes", "is_k_major"]

WGMMA_M = 64                   # m64nNk16 (k8 for TF32)
INSTRUCTION_K_BYTES = 32       # of each operand row per instruction
STEP_BYTES = 128               # K per pipeline step: one row of a 128-byte swizzle
WARPGROUP = 128
COPY_BYTES = 16


@dataclass(frozen=True)
class WgmmaTiling:
    """A thread block's share of C: ``warpgroups`` warpgroups along I, each ``frags_m`` tiles
    of 64 rows by ``n`` columns (the wgmma's N)."""

    warpgroups: int
    frags_m: int
    n: int

    @property
    def tile_i(self) -> int:
        return self.warpgroups * self.frags_m * WGMMA_M

    @property
    def tile_j(self) -> int:
        return self.n


# Largest first, as cuBLAS's Hopper kernels: 128x256 of 2 warpgroups (128 accumulators a
# thread; 48 KiB a stage), 128x128, then 64-row tiles for products of few blocks.
WGMMA_TILINGS = (WgmmaTiling(2, 1, 256), WgmmaTiling(2, 1, 128), WgmmaTiling(1, 1, 256), WgmmaTiling(1, 1, 128),
                 WgmmaTiling(1, 1, 64))


def wgmma_step_k(elem_bytes: int) -> int:
    """K per pipeline step for operands of ``elem_bytes``: 64 halves, 32 floats."""
    return STEP_BYTES // elem_bytes


def wgmma_stage_bytes(tiling: WgmmaTiling) -> int:
    """Shared memory for one step's tiles of A and B: a 128-byte row per row of each."""
    return (tiling.tile_i + tiling.tile_j) * STEP_BYTES


def is_k_major(sch, main, operand: str) -> bool:
    """Whether ``operand`` ("A", indexed by I, or "B", by J) of the canonical block ``main``
    (iteration variables S, I, J, K) is K-major in memory: its contiguous index follows K,
    through the reindexing block that `to_canonical_form` put before ``main`` when there is
    one."""
    b = sch.get(main)
    mn_var, k_var = b.iter_vars[1 if operand == "A" else 2].var, b.iter_vars[3].var
    a = [x for x in _loads(b.body.value) if x.buffer is not b.body.buffer
         and any(mn_var in vars_in([idx]) for idx in x.indices)]
    if len(a) != 1:
        return False
    a = a[0]
    if k_var not in vars_in([a.indices[-1]]):
        return False
    for producer in sch.get_producers(main):
        p = sch.get(producer)
        if p.writes and p.writes[0].buffer is a.buffer:
            sources = _loads(p.body.value)
            k_position = set(vars_in([p.body.indices[-1]]))
            return len(sources) == 1 and set(vars_in([sources[0].indices[-1]])) <= k_position
    return True


def _loads(e) -> list:
    """The buffer loads in ``e``."""
    found = []

    class F(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.BufferLoad):
                found.append(x)
            return super().visit_expr(x)

    F().visit_expr(e)
    return found


def schedule_wgmma(sch, main, tiling: WgmmaTiling, stages: int, in_flight: int = 1, elem_bytes: int = 2) -> None:
    """Schedule the canonical, padded product block ``main`` (``C[S, I, J] += A[S, I, K] *
    B[S, J, K]``, operands of ``elem_bytes``) for wgmma with ``tiling`` and a ``stages``-step
    pipeline (module docstring); ``in_flight``: the steps' wgmma batches left running while
    the next step's copies are issued (0 or 1)."""
    if in_flight not in (0, 1):
        raise ValueError(f"wgmma: 0 or 1 batches may stay in flight, not {in_flight}")
    instruction_k = INSTRUCTION_K_BYTES // elem_bytes
    batch, i, j, k = sch.get_loops(main)
    i0, i1, i2, i3 = sch.split(i, [None, tiling.warpgroups, tiling.frags_m, WGMMA_M])
    j0, j1 = sch.split(j, [None, tiling.n])
    k0, k1, k2 = sch.split(k, [None, STEP_BYTES // INSTRUCTION_K_BYTES, instruction_k])
    sch.reorder(i0, j0, i1, k0, k1, i2, i3, j1, k2)
    by = sch.fuse(batch, i0)
    sch.bind(by, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")

    # Each thread holds its part of its warpgroup's accumulators and writes it to C itself.
    c_acc = sch.cache_write(main, 0, WGMMA_ACC_SCOPE)
    sch.reverse_compute_at(c_acc, i1, preserve_unit_loops=True)

    def to_shared(index: int):
        block = sch.cache_read(main, index, "shared")
        sch.compute_at(block, k0, preserve_unit_loops=True)
        return block

    a_shared, b_shared = to_shared(0), to_shared(1)
    auto_inline_producers(sch, a_shared)
    auto_inline_producers(sch, b_shared)
    auto_inline_consumer_chain(sch, c_acc)
    for copy in (a_shared, b_shared):
        _swizzled_layout(sch, copy)
        spread_copy(sch, copy, tiling.warpgroups, WARPGROUP, COPY_BYTES // elem_bytes)

    init = sch.decompose_reduction(main, k0)
    blockize_tile_op(sch, init, 2, WGMMA_ANN, "fill")
    blockize_tile_op(sch, main, 3, WGMMA_ANN, "mma")
    blockize_tile_op(sch, c_acc, 2, WGMMA_ANN, "store", (WGMMA_M, tiling.n))
    # One step's wgmmas are one batch: a fence before, a commit and a wait after, which leaves
    # ``in_flight`` batches running. With one, the step's copies come after its wgmmas: the
    # copies of step s + stages - 1 overwrite the tiles of step s - 1, whose batch the wait
    # after step s's has finished, while step s's batch still runs.
    sch.annotate(k1, WGMMA_STEP_ANN, in_flight)
    sch.annotate(k0, "software_pipeline_stage", [0, 0, stages - 1])
    sch.annotate(k0, "software_pipeline_order", [1, 2, 0] if in_flight else [0, 1, 2])
    sch.annotate(k0, "software_pipeline_async_stages", [0])


def _swizzled_layout(sch, copy) -> None:
    """The shared tile ``copy`` writes ([S, rows, K]) as wgmma reads it: K-major as it is when
    the global matrix's contiguous index is K's, else [S, rows / 64, K, 64] (N-major, 64
    columns of 128 bytes a row: 16-bit types only, which `MatmulTensorCore` sees to), then its
    16-byte chunks XOR-swizzled by row."""
    b = sch.get(copy)
    dst = b.writes[0]
    src = next((r for r in b.reads if r.buffer.scope in ("global", "")), None)
    if src is not None and len(dst.region) >= 2:
        rows = set(vars_in([dst.region[-2].min]))
        k = set(vars_in([dst.region[-1].min]))
        last = set(vars_in([src.region[-1].min]))
        if last & rows and not last & k:
            sch.transform_layout(copy, ("write", 0),
                                 lambda *idx: (*idx[:-2], idx[-2] // 64, idx[-1], idx[-2] % 64))
    sch.annotate(copy, PERMUTED_LAYOUT, 1)
