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

from tvmscript import tir

from ...arith import simplify
from ..analysis import (get_max_shared_memory_per_block, is_broadcast_epilogue, is_gemv, normalize_gemv,
                        normalize_prim_func)
from ..base import get_bytes, get_extent, try_inline_contiguous_spatial
from .base import GPUScheduleRule


def _max_factor(n, factors) -> int:
    for f in sorted(factors, reverse=True):
        if n % f == 0:
            return f
    return 1


class GEMV(GPUScheduleRule):
    """Matrix-vector products reduced across threads (see the module docstring)."""

    def apply(self, func, target, tunable: bool = False):
        if not isinstance(func, tir.PrimFunc) or not self.is_target_available(target):
            return None
        from ...schedule import Schedule

        sch = Schedule(func)
        infos = normalize_prim_func(sch)
        infos = try_inline_contiguous_spatial(sch, infos)
        if infos is None:
            return None
        if len(infos) == 1:
            epilogue = None
        elif len(infos) == 2:
            epilogue = infos[1]
            if not epilogue.is_injective():
                return None
        else:
            return None
        info = infos[0]
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
        TAG_S, TAG_R = "threadIdx.y", "threadIdx.x"
        warp_shuffle = False
        VEC_LOAD = 1
        kind = target.kind.name
        if kind == "cuda":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, VEC_LOAD, UNROLL = 4, True, 8, 4, 256
            warp_shuffle = True
            TS, TR = (16, 32) if len_S is not None else (1, 64)
        elif kind == "metal":
            TAG_S, TAG_R = "threadIdx.x", "threadIdx.y"
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 1, False, -1, 256
            warp_shuffle = True
            if len_S is not None:
                TS, TR = (4, 16) if len_S > len_r * len_c else (2, 64)
            else:
                TS, TR = 1, 64
        elif kind == "rocm":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, False, 8, 256
            if len_S is not None:
                TS, TR = (1, 128) if len_S > len_r * len_c else (8, 64)
            else:
                TS, TR = 1, 64
        elif kind == "vulkan":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, True, 4, 256
            if len_S is not None:
                TS, TR = (4, 32) if len_S > len_r * len_c else (16, 32)
            else:
                TS, TR = 1, 64
        else:
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 1, False, -1, 64
            TS, TR = 1, 64
        max_threads = int(target.attrs.get("max_num_threads", target.attrs.get("max_threads_per_block", 1024)))
        while TS * TR > max_threads:
            if TS > 1:
                TS //= 2
            else:
                TR //= 2
        if not isinstance(len_r, int) or not isinstance(len_c, int):
            return None
        TILE_S = 1
        TILE_R = len_c if len_c > 1 else max(_max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)
        VEC_C = min(_max_factor(TILE_R, [1, 2, 4, 8]), VEC_C)
        return self._apply_inner(sch, target, block, vector_inputs, epilogue_info, TAG_S, TAG_R, TS, TR, TILE_S,
                                 TILE_R, VEC_LOAD, VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, warp_shuffle)

    @staticmethod
    def _apply_inner(sch, target, gemv, vector_inputs, epilogue_info, TAG_S, TAG_R, TS, TR, TILE_S, TILE_R,
                     VEC_LOAD, VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, warp_shuffle):
        # rfactor: reduce to TR * VEC_C partials per row
        b, s, r, c = sch.get_loops(gemv)
        s = sch.fuse(b, s)
        r = sch.fuse(r, c)
        bx, ts, tile_s = sch.split(s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        r, tr, tile_r_vec_n, vec_c = sch.split(r, factors=[None, TR, TILE_R // VEC_C, VEC_C],
                                               preserve_unit_iters=True)
        sch.reorder(r, tile_r_vec_n, tr, vec_c)
        tr_vec_c = sch.fuse(tr, vec_c)
        rf = sch.rfactor(tr_vec_c, 0)
        # rfactor: reduce to TR partials
        bx, ts, tile_s, tr_vec_c = sch.get_loops(gemv)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
        rf2 = sch.rfactor(tr, 0)
        # bind and vectorize the main computation
        bx, ts, tile_s, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
        sch.reorder(bx, ts, tr, r, tile_s, tile_r_vec_n, vec_c)
        sch.bind(bx, "blockIdx.x")
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.vectorize(vec_c)
        # the vector in shared memory, if it fits
        smem = None
        for buf in vector_inputs:
            nbytes = get_bytes(buf.dtype)
            size = reduce(lambda x, y: tir.Mul(x.dtype, x, y), buf.shape, tir.IntImm(buf.shape[0].dtype if buf.shape else "int64", 1))
            size = simplify(tir.Mul(size.dtype, size, tir.IntImm(size.dtype, nbytes)))
            smem = size if smem is None else simplify(tir.Add(size.dtype, smem, size))
            if not warp_shuffle:
                smem = simplify(tir.Add(smem.dtype, smem, tir.IntImm(smem.dtype, TS * TR * nbytes)))
        LOAD_V_SHARED = bool(LOAD_V_SHARED and isinstance(smem, tir.IntImm)
                             and smem.value <= get_max_shared_memory_per_block(target))
        # The shared stage caches the block's first read, assumed to be the vector. When it is
        # the matrix (``y = W @ x`` written with W first), TVM stages a block's whole rows of
        # the matrix, beyond the shared memory limit; tvms skips the stage then.
        if LOAD_V_SHARED and not any(sch.get(rf).reads[0].buffer is b for b in vector_inputs):
            LOAD_V_SHARED = False
        # the matrix through registers, in vectors
        aq_local = sch.cache_read(rf, read_buffer_index=1, storage_scope="local")
        n_cache = len(sch.get_loops(aq_local))
        sch.compute_at(aq_local, r, preserve_unit_loops=True)
        cache_loops = sch.get_loops(aq_local)[-n_cache:]
        fused_load = cache_loops[0] if len(cache_loops) == 1 else sch.fuse(*cache_loops[-2:])
        aq_vec = max(1, VEC_LOAD // get_bytes(sch.get(aq_local).reads[0].buffer.dtype))
        fused_load, vec_load = sch.split(fused_load, factors=[None, aq_vec], preserve_unit_iters=True)
        sch.vectorize(vec_load)
        v_shared = None
        if LOAD_V_SHARED:
            if len(vector_inputs) != 1:
                return None
            v_shared = sch.cache_read(rf, read_buffer_index=0, storage_scope="shared")
            sch.compute_at(v_shared, tr, preserve_unit_loops=True)
            lp = sch.get_loops(v_shared)[-1]
            loop = sch.get(lp)
            if isinstance(loop.extent, tir.IntImm):
                vec_length = max(min(_max_factor(loop.extent.value, [TS * TR, TS * TR * 2, TS * TR * 4, TS * TR * 8])
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
        # TR * VEC_C partials -> TR partials
        sch.reverse_compute_at(rf2, loop=bx, preserve_unit_loops=True)
        tr, vec_c, *ts_tile_s = sch.get_loops(rf2)[1:]
        ts_tile_s = sch.fuse(*ts_tile_s)
        ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        tile_s, vec_s = sch.split(tile_s, factors=[None, _max_factor(TILE_S, [1, 2, 4, 8])], preserve_unit_iters=True)
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(ts, tr, tile_s, vec_s, vec_c)
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.vectorize(vec_s)
        # TR partials -> the result, across threads
        sch.reverse_compute_at(gemv, loop=bx, preserve_unit_loops=True)
        tr, *ts_tile_s = sch.get_loops(gemv)[1:]
        ts_tile_s = sch.fuse(*ts_tile_s)
        ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(tile_s, ts, tr)
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.decompose_reduction(rf, loop=sch.get_loops(rf)[3])
        sch.decompose_reduction(rf2, loop=sch.get_loops(rf2)[-1])
        sch.set_scope(rf, buffer_index=0, storage_scope="local")
        sch.set_scope(rf2, buffer_index=0, storage_scope="local")
        for blk in (rf, rf2):
            lp = sch.get_loops(blk)[3]
            sch.annotate(lp, ann_key="pragma_auto_unroll_max_step", ann_val=UNROLL)
            sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=1)
        if v_shared is not None:
            lp = sch.get_loops(v_shared)[-4]
            sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=UNROLL)
            sch.annotate(lp, ann_key="pragma_vectorize", ann_val=1)
        if epilogue_info is not None:
            epilogue = epilogue_info.block_rv
            if is_broadcast_epilogue(sch, gemv, epilogue):
                sch.reverse_compute_at(epilogue, bx)
                sch.set_scope(gemv, 0, "shared")
                _, _, *s = sch.get_loops(epilogue)
                _, tx = sch.split(sch.fuse(*s), factors=[None, TR])
                sch.bind(tx, "threadIdx.x")
            else:
                sch.reverse_compute_at(epilogue, bx, preserve_unit_loops=True)
                sch.fuse(*sch.get_loops(epilogue)[1:])
                ts_tile_s = sch.get_loops(epilogue)[-1]
                ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
                ts = sch.fuse(ts_o, ts_i)
                sch.bind(ts, TAG_S)
                sch.set_scope(gemv, 0, "local")
        return sch
