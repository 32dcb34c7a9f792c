"""`MatmulTensorCore`: float16 matrix products on tensor cores (wmma 16x16x16 fragments).

Why: a GPU's tensor cores multiply 16x16 tiles of half-precision numbers many times faster
than its CUDA cores can; an fp16 matmul that does not use them leaves most of the chip idle.

The structure: each thread block computes a 64x64 tile of C (blockIdx.x over J, blockIdx.y
over batch x I) with 4 warps (threadIdx.y), each warp a 32x32 part of it as 2x2 accumulator
fragments ("wmma.accumulator"). The reduction runs in steps of 32: per step the block copies
its 64x32 tiles of A and B into shared memory (all 128 threads, threadIdx.x being the lane),
then for each 16 of the step every warp loads its fragments of A and B ("wmma.matrix_a",
"wmma.matrix_b") from there and multiplies them into its accumulators. At the end each
warp stores its accumulators into a shared tile of C, from which the block's threads write C
with the epilogue (bias, activation, cast) inlined.

The 16x16(x16) pieces a fragment operation covers are made blocks of their own (`blockize`)
and annotated ``tvms.wmma`` (``"fill"``, ``"load_a"``, ``"load_b"``, ``"mma"``, ``"store"``);
`compiler.tensor_cores.tensorize_wmma` replaces each with its intrinsic once the buffers
have their on-chip shapes. The rule applies to the canonical form the `Matmul` rule uses,
``C[S, I, J] += A[S, I, K] * B[S, J, K]``, with A and B float16, C float16 or float32, and
static extents, I and J multiples of 64 and K of 32; anything else is left to `Matmul`.
"""

from __future__ import annotations

from tvmscript import tir

from ...tensor_cores import WMMA_ANN
from .base import GPUScheduleRule
from .matmul import (
    IterKind, auto_inline_consumer_chain, auto_inline_producers, detect_iter_traits, find_matmul_block,
    to_canonical_form,
)

__all__ = ["MatmulTensorCore"]

FRAGMENT = 16                 # m = n = k of the wmma shape used
WARPS_I, WARPS_J = 2, 2       # warps of a block along I and J
FRAGS_I, FRAGS_J = 2, 2       # accumulator fragments of a warp along I and J
CHUNK_K = 2                   # fragments along K per shared-memory step
WARP_SIZE = 32


def _dtypes(sch, block) -> tuple:
    b = sch.get(block)
    return tuple(r.buffer.dtype for r in b.reads) + tuple(w.buffer.dtype for w in b.writes)


def _static(sch, block) -> bool:
    return all(isinstance(iv.dom.extent, tir.IntImm) for iv in sch.get(block).iter_vars)


class MatmulTensorCore(GPUScheduleRule):
    """fp16 matmuls on tensor cores (see the module docstring)."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None or not _has_tensor_cores(target):
            return None
        main = find_matmul_block(sch)
        if main is None or not _static(sch, main):
            return None
        a_dtype, b_dtype, c_dtype = _dtypes(sch, main)
        if (a_dtype, b_dtype) != ("float16", "float16") or c_dtype not in ("float16", "float32"):
            return None
        if not _multiplies_operands(sch.get(main)) or not _fits_tiles(sch.get(main)):
            return None

        to_canonical_form(sch, main)   # C[S, I, J] += A[S, I, K] * B[S, J, K], as in `Matmul`

        batch, i, j, k = sch.get_loops(main)
        i0, i1, i2, i3 = sch.split(i, [None, WARPS_I, FRAGS_I, FRAGMENT])
        j0, j1, j2, j3 = sch.split(j, [None, WARPS_J, FRAGS_J, FRAGMENT])
        k0, k1, k2 = sch.split(k, [None, CHUNK_K, FRAGMENT])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2, i3, j3, k2)
        by = sch.fuse(batch, i0)
        sch.bind(by, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        warp = sch.fuse(i1, j1)
        sch.bind(warp, "threadIdx.y")

        # The accumulators, stored by each warp into a shared tile of C, written from there
        # by all threads with the epilogue.
        c_shared = sch.cache_write(main, 0, "shared")
        c_frag = sch.cache_write(main, 0, "wmma.accumulator")
        sch.reverse_compute_at(c_frag, warp, preserve_unit_loops=True)
        sch.reverse_compute_at(c_shared, j0, preserve_unit_loops=True)

        # A and B: global -> shared (cooperative, every thread) -> fragments (per warp).
        def to_shared(index: int):
            block = sch.cache_read(main, index, "shared")
            sch.compute_at(block, k0, preserve_unit_loops=True)
            return block

        a_shared, b_shared = to_shared(0), to_shared(1)
        a_frag = sch.cache_read(main, 0, "wmma.matrix_a")
        b_frag = sch.cache_read(main, 1, "wmma.matrix_b")
        sch.compute_at(a_frag, k1, preserve_unit_loops=True)
        sch.compute_at(b_frag, k1, preserve_unit_loops=True)

        auto_inline_producers(sch, a_shared)
        auto_inline_producers(sch, b_shared)
        auto_inline_consumer_chain(sch, c_shared)
        self._cooperative(sch, a_shared, 2)
        self._cooperative(sch, b_shared, 2)
        self._cooperative(sch, c_shared, 1)

        # The 16x16(x16) pieces the intrinsics take, each a block of its own.
        init = sch.decompose_reduction(main, k0)
        self._fragment_op(sch, init, 2, "fill")
        self._fragment_op(sch, main, 3, "mma")
        self._fragment_op(sch, a_frag, 2, "load_a", tiles=True)
        self._fragment_op(sch, b_frag, 2, "load_b", tiles=True)
        self._fragment_op(sch, c_frag, 2, "store", tiles=True)
        return sch

    @staticmethod
    def _cooperative(sch, block, vector: int) -> None:
        """The copy ``block`` spread over the block's threads: lanes on threadIdx.x, warps on
        threadIdx.y, ``vector`` elements per thread and instruction. Neighbouring threads take
        neighbouring elements of the global buffer (coalesced): the loop its last index follows
        goes innermost (B of ``A @ B`` is read across its rows into the [J, K] tile)."""
        loops = sch.get_loops(block)
        n = len(sch.get(block).iter_vars)
        own = loops[-n:]
        fastest = _loop_of_last_index(sch, block, own)
        if fastest is not None and fastest is not own[-1]:
            own = [lp for lp in own if lp is not fastest] + [fastest]
            sch.reorder(*own)
        fused = sch.fuse(*own)
        _, ty, tx, vec = sch.split(fused, [None, WARPS_I * WARPS_J, WARP_SIZE, vector])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        if vector > 1:
            sch.vectorize(vec)

    @staticmethod
    def _fragment_op(sch, block, inner: int, kind: str, tiles: bool = False) -> None:
        """Make the innermost ``inner`` loops of ``block`` (16 each) one block annotated with
        the wmma operation it is. ``tiles``: the block's own loops first split into fragments
        (a copy between a fragment and memory covering several)."""
        loops = sch.get_loops(block)
        if tiles:
            parts = []
            for lp in loops[-inner:]:
                parts.append(sch.split(lp, [None, FRAGMENT]))
            sch.reorder(*[p[0] for p in parts], *[p[1] for p in parts])
            loops = sch.get_loops(block)
        outer = sch.blockize(loops[-inner])
        sch.annotate(outer, WMMA_ANN, kind)


def _loop_of_last_index(sch, block, loops: list):
    """Which of ``loops`` (the copy's own) the last index of the global buffer the copy
    ``block`` reads or writes follows, if one does."""
    from tvmscript.tir_visitor import vars_in

    realize = sch.resolve_block(block)[1]
    b = realize.block
    realize_values = dict(zip((iv.var for iv in b.iter_vars), realize.iter_values))
    accesses = [r for r in list(b.reads) + list(b.writes) if r.buffer.scope in ("global", "")]
    if not accesses:
        return None
    last = accesses[0].region[-1].min
    loop_vars = {sch.get(lp).loop_var: lp for lp in loops}
    for v in vars_in([last]):
        bound = realize_values.get(v)
        if bound is None:
            continue
        used = [loop_vars[x] for x in vars_in([bound]) if x in loop_vars]
        if len(used) == 1:
            return used[0]
    return None


def _fits_tiles(block: tir.Block) -> bool:
    """Whether I and J are whole block tiles and K whole steps: padding them would leave a
    crop between the shared tile of C and the epilogue, which cannot be inlined there (such
    matmuls are `Matmul`'s)."""
    traits = detect_iter_traits(block)
    if traits is None:
        return False
    extent = {IterKind.kIter_I: 1, IterKind.kIter_J: 1, IterKind.kIter_K: 1}
    for t in traits[3]:
        if t.kind in extent:
            extent[t.kind] *= t.extent.value
    return (extent[IterKind.kIter_I] % (WARPS_I * FRAGS_I * FRAGMENT) == 0
            and extent[IterKind.kIter_J] % (WARPS_J * FRAGS_J * FRAGMENT) == 0
            and extent[IterKind.kIter_K] % (CHUNK_K * FRAGMENT) == 0)


def _has_tensor_cores(target) -> bool:
    """sm_70 and later (`Target`'s ``arch``; an unknown one is taken as a recent GPU)."""
    arch = str(target.attrs.get("arch") or "sm_90")
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return target.kind.name == "cuda" and (not digits or int(digits) >= 70)


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
