"""`GEMV`: matrix-vector products (``y[s] += W[s, r] * x[r]``, with an optional batch axis and
an elementwise epilogue) whose reduced axis is innermost in the matrix.

Why: a GEMV reads every matrix element once, so it is bound by memory bandwidth; what matters
is reading the matrix coalesced and in wide loads, and keeping the vector close. Each thread
block takes ``TS`` rows (``threadIdx.y``) and ``TR`` threads per row (``threadIdx.x``) split the
reduced axis; each thread accumulates ``VEC_C`` interleaved partial sums (`rfactor` twice: to
``TR * VEC_C`` partials, then to ``TR``), loads the matrix through registers in vectors, and
the vector is staged in shared memory once per block. The partials of a row are combined
across the ``TR`` threads (a cross-thread reduction over ``threadIdx.x``).

A GEMV whose reduced axis is outer in the matrix (``W[r, s]``) is left to the next rule on
CUDA, as in TVM (its outer-reduction schedules are tuned for Metal and Adreno only).
"""

from __future__ import annotations

from functools import reduce

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify

from ...lower_tir import dtype_bytes
from ..analysis import (get_max_shared_memory_per_block, is_broadcast_epilogue, is_gemv, normalize_gemv,
                        normalize_prim_func)
from ..base import get_extent, max_factor, split_epilogue, try_inline_contiguous_spatial
from .base import GPUScheduleRule

# ----------------------------------------------------------------------------- steps shared with LowBatchGEMV

# A target kind's inner-reduction schedule: (VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, (TS, TR)
# when the spatial extent is the larger, (TS, TR) otherwise); a symbolic spatial extent gets
# (1, 64). DEFAULT_CONFIG serves kinds a table does not list (LowBatchGEMV has its own table).
_INNER_CONFIG = {
    "cuda": (4, True, 8, 256, (16, 32), (16, 32)),
    "metal": (1, False, -1, 256, (4, 16), (2, 64)),
    "rocm": (4, False, 8, 256, (1, 128), (8, 64)),
    "vulkan": (4, True, 4, 256, (4, 32), (16, 32)),
}
DEFAULT_CONFIG = (1, False, -1, 64, (1, 64), (1, 64))


def pick_threads(len_s, len_r, wide: tuple, narrow: tuple) -> tuple:
    """``(TS, TR)``: ``wide`` when the spatial extent exceeds the reduced one (None when
    symbolic), else ``narrow``; (1, 64) for a symbolic spatial extent."""
    if not isinstance(len_s, int):
        return 1, 64
    if wide == narrow or len_r is None:  # a symbolic reduction is not scheduled: any will do
        return wide
    return wide if len_s > len_r else narrow


def fit_threads(target, TS: int, TR: int) -> tuple:
    """``(TS, TR)`` halved (TS first) until a block of ``TS * TR`` threads fits the target."""
    max_threads = int(target.attrs.get("max_num_threads", target.attrs.get("max_threads_per_block", 1024)))
    while TS * TR > max_threads:
        if TS > 1:
            TS //= 2
        else:
            TR //= 2
    return TS, TR


def rfactor_twice(sch, gemv, s, r, TS, TR, TILE_S, TILE_R, VEC_C, TAG_S, TAG_R) -> tuple:
    """Split the spatial loop ``s`` over (blockIdx.x, ``TS`` threads, ``TILE_S``) and the
    reduction ``r`` over (chunks, ``TR`` threads, ``TILE_R`` per thread in vectors of
    ``VEC_C``); reduce to ``TR * VEC_C`` partials per row (`rfactor`), then to ``TR``. The
    partial-sum block is bound and vectorized. Returns ``(rf, rf2, outer, bx, ts, tr, r)``:
    the two rfactor blocks, then loops of the first: those above ``s`` (a batch), the
    blockIdx.x loop, the threads over rows and over the reduction, the loop over its chunks."""
    bx, ts, tile_s = sch.split(s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
    r, tr, tile_r_vec_n, vec_c = sch.split(r, factors=[None, TR, TILE_R // VEC_C, VEC_C], preserve_unit_iters=True)
    sch.reorder(r, tile_r_vec_n, tr, vec_c)
    tr_vec_c = sch.fuse(tr, vec_c)
    rf = sch.rfactor(tr_vec_c, 0)
    *_, tr_vec_c = sch.get_loops(gemv)
    tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
    rf2 = sch.rfactor(tr, 0)
    *outer, bx, ts, tile_s, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)
    tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
    sch.reorder(bx, ts, tr, r, tile_s, tile_r_vec_n, vec_c)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ts, TAG_S)
    sch.bind(tr, TAG_R)
    sch.vectorize(vec_c)
    return rf, rf2, outer, bx, ts, tr, r


def vectors_fit_shared(target, vector_inputs: list, scratch_per_buffer: int = 0) -> bool:
    """Whether the vector operands, each with ``scratch_per_buffer`` more elements, fit the
    target's shared memory (their sizes known)."""
    smem = None
    for buf in vector_inputs:
        nbytes = dtype_bytes(buf.dtype)
        size = reduce(lambda x, y: tir.Mul(x.dtype, x, y), buf.shape,
                      tir.IntImm(buf.shape[0].dtype if buf.shape else "int64", 1))
        size = simplify(tir.Mul(size.dtype, size, tir.IntImm(size.dtype, nbytes)))
        smem = size if smem is None else simplify(tir.Add(size.dtype, smem, size))
        if scratch_per_buffer:
            smem = simplify(tir.Add(smem.dtype, smem, tir.IntImm(smem.dtype, scratch_per_buffer * nbytes)))
    return isinstance(smem, tir.IntImm) and smem.value <= get_max_shared_memory_per_block(target)


def stage_vector_shared(sch, rf, tr, TS, TR, TAG_R, LOAD_V_VEC):
    """Copy the vector (the partial-sum block's first read) into shared memory once per thread
    block, loaded by all ``TS * TR`` threads in vectors; returns the copy block."""
    v_shared = sch.cache_read(rf, read_buffer_index=0, storage_scope="shared")
    sch.compute_at(v_shared, tr, preserve_unit_loops=True)
    lp = sch.get_loops(v_shared)[-1]
    loop = sch.get(lp)
    if isinstance(loop.extent, tir.IntImm):
        vec_length = max(min(max_factor(loop.extent.value, [TS * TR, TS * TR * 2, TS * TR * 4, TS * TR * 8])
                             // TS // TR, LOAD_V_VEC), 1)
    else:
        vec_length = LOAD_V_VEC
    if TAG_R == "threadIdx.x":
        _, ty, tx, vec = sch.split(lp, factors=[None, TS, TR, vec_length], preserve_unit_iters=True)
    else:
        _, ty, tx, vec = sch.split(lp, factors=[None, TR, TS, vec_length], preserve_unit_iters=True)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return v_shared


def split_ts(sch, loop, TS, TILE_S) -> tuple:
    """``loop`` split into (``TS`` threads, ``TILE_S`` per thread): ``(ts, tile_s)``, the
    thread part fused with what overshoots it."""
    ts_o, ts_i, tile_s = sch.split(loop, factors=[None, TS, TILE_S], preserve_unit_iters=True)
    return sch.fuse(ts_o, ts_i), tile_s


def write_back(sch, gemv, rf, rf2, v_shared, bx, TS, TR, TILE_S, TAG_S, TAG_R, UNROLL, n_batch: int = 0) -> None:
    """The ``TR * VEC_C`` partials reduced to ``TR`` (``rf2``), then across the threads of
    the reduction to the result (``gemv``), both moved into the thread block; inits split out
    (`decompose_reduction`), partials kept in registers, the reduction loops unrolled.
    ``n_batch``: loops of a batch carried inside each thread (LowBatchGEMV), which stay in
    place after the reduction's threads."""
    sch.reverse_compute_at(rf2, loop=bx, preserve_unit_loops=True)
    tr, vec_c, *rest = sch.get_loops(rf2)[1 + n_batch:]
    batch, ts_tile_s = rest[:n_batch], rest[n_batch:]
    ts_o, ts_i, tile_s = sch.split(sch.fuse(*ts_tile_s), factors=[None, TS, TILE_S], preserve_unit_iters=True)
    tile_s, vec_s = sch.split(tile_s, factors=[None, max_factor(TILE_S, [1, 2, 4, 8])], preserve_unit_iters=True)
    ts = sch.fuse(ts_o, ts_i)
    sch.reorder(ts, tr, tile_s, *batch, vec_s, vec_c)
    sch.bind(ts, TAG_S)
    sch.bind(tr, TAG_R)
    sch.vectorize(vec_s)
    sch.reverse_compute_at(gemv, loop=bx, preserve_unit_loops=True)
    tr, *rest = sch.get_loops(gemv)[1 + n_batch:]
    batch, ts_tile_s = rest[:n_batch], rest[n_batch:]
    ts, tile_s = split_ts(sch, sch.fuse(*ts_tile_s), TS, TILE_S)
    sch.reorder(tile_s, *batch, ts, tr)
    sch.bind(ts, TAG_S)
    sch.bind(tr, TAG_R)
    sch.decompose_reduction(rf, loop=sch.get_loops(rf)[3 + n_batch])
    sch.decompose_reduction(rf2, loop=sch.get_loops(rf2)[-1])
    sch.set_scope(rf, buffer_index=0, storage_scope="local")
    sch.set_scope(rf2, buffer_index=0, storage_scope="local")
    for blk in (rf, rf2):
        lp = sch.get_loops(blk)[3 + n_batch]
        sch.annotate(lp, ann_key="pragma_auto_unroll_max_step", ann_val=UNROLL)
        sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=1)
    if v_shared is not None:
        lp = sch.get_loops(v_shared)[-4]
        sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=UNROLL)
        sch.annotate(lp, ann_key="pragma_vectorize", ann_val=1)


def elementwise_epilogue(sch, gemv, epilogue, bx, TS, TILE_S, TAG_S, n_outer: int) -> None:
    """An epilogue that reads one result per element: moved into the thread block, its loops
    below the first ``n_outer`` fused and spread over the ``TS`` threads of rows like the
    result; the result then stays in registers."""
    sch.reverse_compute_at(epilogue, bx, preserve_unit_loops=True)
    sch.fuse(*sch.get_loops(epilogue)[n_outer:])
    ts, _ = split_ts(sch, sch.get_loops(epilogue)[-1], TS, TILE_S)
    sch.bind(ts, TAG_S)
    sch.set_scope(gemv, 0, "local")


# ----------------------------------------------------------------------------- the rule


class GEMV(GPUScheduleRule):
    """Matrix-vector products reduced across threads (see the module docstring)."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        infos = normalize_prim_func(sch)
        found = split_epilogue(try_inline_contiguous_spatial(sch, infos))
        if found is None:
            return None
        info, epilogue = found
        if len(info.iters) not in (2, 3):  # [B, S, R] = [B, S, R] * [B, R] or [S, R] = [S, R] * [R]
            return None
        block = info.block_rv
        vector_inputs = is_gemv(sch, info)
        if vector_inputs is None:
            return None
        is_inner = normalize_gemv(sch, info)
        if is_inner is None:
            return None
        if is_inner:
            return self.sch_inner_reduction(sch, target, block, vector_inputs, epilogue)
        return None  # outer reductions: no CUDA schedule (TVM tunes them for Metal / Adreno)

    def sch_inner_reduction(self, sch, target, block, vector_inputs, epilogue_info):
        batch, s, r, c = sch.get_loops(block)
        len_batch, len_s, len_r, len_c = (get_extent(sch, batch), get_extent(sch, s), get_extent(sch, r),
                                          get_extent(sch, c))
        len_S = len_batch * len_s if isinstance(len_batch, int) and isinstance(len_s, int) else None
        kind = target.kind.name
        VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, wide, narrow = _INNER_CONFIG.get(kind, DEFAULT_CONFIG)
        len_R = len_r * len_c if isinstance(len_r, int) and isinstance(len_c, int) else None
        TS, TR = pick_threads(len_S, len_R, wide, narrow)
        TAG_S, TAG_R = ("threadIdx.x", "threadIdx.y") if kind == "metal" else ("threadIdx.y", "threadIdx.x")
        warp_shuffle = kind in ("cuda", "metal")
        VEC_LOAD = 4 if kind == "cuda" else 1
        TS, TR = fit_threads(target, TS, TR)
        if not isinstance(len_r, int) or not isinstance(len_c, int):
            return None
        TILE_S = 1
        TILE_R = len_c if len_c > 1 else max(max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)
        VEC_C = min(max_factor(TILE_R, [1, 2, 4, 8]), VEC_C)
        return self._apply_inner(sch, target, block, vector_inputs, epilogue_info, TAG_S, TAG_R, TS, TR, TILE_S,
                                 TILE_R, VEC_LOAD, VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, warp_shuffle)

    @staticmethod
    def _apply_inner(sch, target, gemv, vector_inputs, epilogue_info, TAG_S, TAG_R, TS, TR, TILE_S, TILE_R,
                     VEC_LOAD, VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, warp_shuffle):
        b, s, r, c = sch.get_loops(gemv)
        s = sch.fuse(b, s)
        r = sch.fuse(r, c)
        rf, rf2, _, bx, _, tr, r = rfactor_twice(sch, gemv, s, r, TS, TR, TILE_S, TILE_R, VEC_C, TAG_S, TAG_R)
        # the vector in shared memory, if it fits (without warp shuffles the cross-thread
        # reduction needs TS * TR more elements there)
        LOAD_V_SHARED = LOAD_V_SHARED and vectors_fit_shared(target, vector_inputs, 0 if warp_shuffle else TS * TR)
        # The shared stage caches the block's first read, assumed to be the vector. When it is
        # the matrix (``y = W @ x`` written with W first), TVM stages a block's whole rows of
        # the matrix, beyond the shared memory limit; tvms skips the stage then.
        if LOAD_V_SHARED and not any(sch.get(rf).reads[0].buffer is b for b in vector_inputs):
            LOAD_V_SHARED = False
        if LOAD_V_SHARED and len(vector_inputs) != 1:
            return None  # TVM stages exactly one vector
        # the matrix through registers, in vectors
        aq_local = sch.cache_read(rf, read_buffer_index=1, storage_scope="local")
        n_cache = len(sch.get_loops(aq_local))
        sch.compute_at(aq_local, r, preserve_unit_loops=True)
        cache_loops = sch.get_loops(aq_local)[-n_cache:]
        fused_load = cache_loops[0] if len(cache_loops) == 1 else sch.fuse(*cache_loops[-2:])
        aq_vec = max(1, VEC_LOAD // dtype_bytes(sch.get(aq_local).reads[0].buffer.dtype))
        fused_load, vec_load = sch.split(fused_load, factors=[None, aq_vec], preserve_unit_iters=True)
        sch.vectorize(vec_load)
        v_shared = stage_vector_shared(sch, rf, tr, TS, TR, TAG_R, LOAD_V_VEC) if LOAD_V_SHARED else None
        write_back(sch, gemv, rf, rf2, v_shared, bx, TS, TR, TILE_S, TAG_S, TAG_R, UNROLL)
        if epilogue_info is not None:
            epilogue = epilogue_info.block_rv
            if is_broadcast_epilogue(sch, gemv, epilogue):
                sch.reverse_compute_at(epilogue, bx)
                sch.set_scope(gemv, 0, "shared")
                _, _, *s = sch.get_loops(epilogue)
                _, tx = sch.split(sch.fuse(*s), factors=[None, TR])
                sch.bind(tx, "threadIdx.x")
            else:
                elementwise_epilogue(sch, gemv, epilogue, bx, TS, TILE_S, TAG_S, n_outer=1)
        return sch
