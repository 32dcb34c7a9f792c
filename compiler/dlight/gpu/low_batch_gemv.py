"""`LowBatchGEMV`: a matrix product whose batch (rows of the activation) is symbolic and small
— a decoding step of a language model, ``y[b, s] += x[b, r] * W[s, r]`` — scheduled like a GEMV
over a batch padded to ``bucket`` rows.

Why: with a handful of rows, a matmul is a few GEMVs sharing the matrix; tiling it as a matmul
wastes most of each tile, while a GEMV schedule that carries ``bucket`` rows at once reads
the matrix once for all of them. The batch axis is padded to a multiple of ``bucket``
(`pad_einsum`) and split: ``blockIdx.y`` over groups of rows, the group inside each thread.

Only the inner-reduction case (the reduced axis innermost in the matrix) is scheduled; TVM's
outer-reduction schedule handles dequantizing GEMVs only and, for a plain one, returns a
half-scheduled function with no thread bindings — here the rule declines instead, so the next
rule schedules the function properly.
"""

from __future__ import annotations

from functools import reduce

from tvmscript import tir

from ...arith import simplify
from ..analysis import (collect_block_iter_vars_used_in_access_region, collect_vars_used_in_prim_expr,
                        get_max_shared_memory_per_block, get_reduction_expr, is_broadcast_epilogue,
                        normalize_prim_func, normalize_to_iter_sum, offset_of)
from ..base import get_bytes, get_extent, try_inline_contiguous_spatial
from .base import GPUScheduleRule


def _pad_einsum_compatible(block: tir.Block) -> bool:
    return all(tir.is_const_int(r.extent, 1) and isinstance(r.min, (tir.IntImm, tir.Var))
               for region in (*block.reads, *block.writes) for r in region.region)


def is_gemv(sch, info):
    """The vector operands of a GEMM with exactly one symbolic (spatial) iterator, or None."""
    block = sch.get(info.block_rv)
    if not (info.is_reduction() and len(block.reads) >= 2 and len(block.writes) == 1
            and get_reduction_expr(block) is not None and _pad_einsum_compatible(block)
            and collect_block_iter_vars_used_in_access_region(block, block.writes[0].region)):
        return None
    const_vars = {iv.var for iv in block.iter_vars if isinstance(iv.dom.extent, tir.IntImm)}
    if len(block.iter_vars) - len(const_vars) != 1:
        return None
    sym = next(iv for iv in block.iter_vars if not isinstance(iv.dom.extent, tir.IntImm))
    if sym.kind != "S":
        return None
    out = []
    for r in block.reads:
        n = len(collect_block_iter_vars_used_in_access_region(block, r.region) & const_vars)
        if 0 < n < len(const_vars):
            out.append(r.buffer)
    return out if 0 < len(out) < len(block.reads) else None


def _dominant_read(block: tir.Block, const_vars: set):
    best, best_n = None, -1
    for r in block.reads:
        n = len(collect_block_iter_vars_used_in_access_region(block, r.region) & const_vars)
        if n > best_n:
            best, best_n = r, n
    return offset_of(best.buffer, [x.min for x in best.region])


def normalize(sch, info):
    """Loops ordered (symbolic batch, spatial, reduce), spatial and reduce each fused; True
    for an inner reduction, None when not applicable."""
    block = sch.get(info.block_rv)
    const_vars = {iv.var for iv in block.iter_vars if isinstance(iv.dom.extent, tir.IntImm)}
    dyn_vars = [iv.var for iv in block.iter_vars if iv.var not in const_vars]
    access = normalize_to_iter_sum(_dominant_read(block, const_vars), {iv.var: iv.dom.extent for iv in block.iter_vars})
    uses = [collect_block_iter_vars_used_in_access_region(block, b.region) for b in (*block.writes, *block.reads)]
    if collect_vars_used_in_prim_expr(access.base) & {iv.var for iv in block.iter_vars}:
        return None
    info_of = {i.var: i for i in info.iters}
    if not access.args or any(a.source not in info_of for a in access.args):
        return None
    batch, s_loops, r_loops = [], [], []
    is_inner = info_of[access.args[-1].source].kind == "R"
    for a in access.args:
        it = info_of[a.source]
        if it.kind == "R":
            r_loops.append(it.loop_rv)
        elif all(a.source in u for u in uses):
            batch.append(it.loop_rv)
        else:
            s_loops.append(it.loop_rv)
    if not s_loops or not r_loops or len(dyn_vars) != 1:
        return None
    dyn_loops = [info_of[v].loop_rv for v in dyn_vars]
    sch.reorder(*dyn_loops, *s_loops, *r_loops)
    sch.fuse(*s_loops)
    sch.fuse(*r_loops)
    return is_inner


def _max_factor(n, factors) -> int:
    for f in sorted(factors, reverse=True):
        if n % f == 0:
            return f
    return 1


class LowBatchGEMV(GPUScheduleRule):
    """A GEMV schedule carrying ``bucket`` rows of a small symbolic batch."""

    def __init__(self, bucket: int = 4) -> None:
        self.bucket = bucket

    def apply(self, func, target, tunable: bool = False):
        if not isinstance(func, tir.PrimFunc) or not self.is_target_available(target):
            return None
        from ...schedule import Schedule

        sch = Schedule(func)
        infos = normalize_prim_func(sch)
        if infos is None:
            return None
        reductions = [i for i in infos if i.is_reduction()]
        if len(reductions) != 1:
            return None
        red = reductions[0]
        if is_gemv(sch, red) is None:
            return None
        # the outer-reduction schedule exists only for dequantizing GEMVs: decide before padding
        stmt = sch.get(red.block_rv)
        const_vars = {iv.var for iv in stmt.iter_vars if isinstance(iv.dom.extent, tir.IntImm)}
        probe = normalize_to_iter_sum(_dominant_read(stmt, const_vars), {iv.var: iv.dom.extent for iv in stmt.iter_vars})
        kinds = {iv.var: iv.kind for iv in stmt.iter_vars}
        if not probe.args or kinds.get(probe.args[-1].source) != "R":
            return None
        pad = [i.dom if isinstance(i.dom, int) else self.bucket for i in red.iters]
        sch.pad_einsum(red.block_rv, pad)
        infos = normalize_prim_func(sch)
        if infos is None:
            return None
        dequantize_block = pad_input_block = None
        for info in infos:
            if "dequantize" in info.name:
                dequantize_block = info.block_rv
            elif "pad" in info.name and not sch.get_producers(info.block_rv):
                pad_input_block = info.block_rv
        infos = [i for i in infos if "pad" not in i.name and "dequantize" not in i.name]
        infos = try_inline_contiguous_spatial(sch, infos)
        if len(infos) == 1:
            epilogue = None
        elif len(infos) == 2:
            epilogue = infos[1]
            if not epilogue.is_injective():
                return None
        else:
            return None
        info = infos[0]
        if len(info.iters) not in (2, 3):
            return None
        vector_inputs = is_gemv(sch, info)
        if vector_inputs is None:
            return None
        is_inner = normalize(sch, info)
        if not is_inner:
            return None
        return self.sch_inner_reduction(sch, target, info.block_rv, dequantize_block, pad_input_block,
                                        vector_inputs, epilogue, self.bucket)

    def sch_inner_reduction(self, sch, target, block, dequantize_block, pad_input_block, vector_inputs,
                            epilogue_info, batch_pad):
        _, s, r = sch.get_loops(block)
        len_s, len_r = get_extent(sch, s), get_extent(sch, r)
        TAG_S, TAG_R = "threadIdx.y", "threadIdx.x"
        kind = target.kind.name
        TS, TR = 1, 64
        if kind == "cuda":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, True, 8, 256
            if isinstance(len_s, int):
                TS, TR = (4, 64) if len_s > len_r else (16, 32)
        elif kind == "metal":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, False, -1, 8
            if isinstance(len_s, int):
                if len_s > len_r:
                    TS, TR = 8, 32
                else:
                    TAG_S, TAG_R = "threadIdx.x", "threadIdx.y"
                    TS, TR = 8, 32
        elif kind == "rocm":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, True, 8, 256
            if isinstance(len_s, int):
                TS, TR = (1, 128) if len_s > len_r else (8, 64)
        elif kind == "vulkan":
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 4, True, 4, 256
            if isinstance(len_s, int):
                TS, TR = (4, 32) if len_s > len_r else (16, 32)
        else:
            VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL = 1, False, -1, 64
        if not isinstance(len_s, int):
            TS, TR = 1, 64
        if not isinstance(len_r, int):
            return None
        max_threads = int(target.attrs.get("max_num_threads", target.attrs.get("max_threads_per_block", 1024)))
        while TS * TR > max_threads:
            if TS > 1:
                TS //= 2
            else:
                TR //= 2
        TILE_S, TILE_R = 2, max(_max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)
        VEC_C = min(_max_factor(TILE_R, [1, 2, 4, 8]), VEC_C)
        VEC_LOAD = 1
        gemv = block
        _, s, r = sch.get_loops(gemv)
        bx, ts, tile_s = sch.split(s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        r, tr, tile_r_vec_n, vec_c = sch.split(r, factors=[None, TR, TILE_R // VEC_C, VEC_C], preserve_unit_iters=True)
        sch.reorder(r, tile_r_vec_n, tr, vec_c)
        tr_vec_c = sch.fuse(tr, vec_c)
        rf = sch.rfactor(tr_vec_c, 0)
        _, bx, ts, tile_s, tr_vec_c = sch.get_loops(gemv)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
        rf2 = sch.rfactor(tr, 0)
        batch_loop, bx, ts, tile_s, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, None], preserve_unit_iters=True)
        sch.reorder(bx, ts, tr, r, tile_s, tile_r_vec_n, vec_c)
        sch.bind(bx, "blockIdx.x")
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.vectorize(vec_c)
        by, batch = sch.split(batch_loop, factors=[None, batch_pad])
        sch.bind(by, "blockIdx.y")
        sch.reorder(bx, ts, tr, r, batch)
        smem = None
        for buf in vector_inputs:
            size = reduce(lambda x, y: tir.Mul(x.dtype, x, y), buf.shape, tir.IntImm(buf.shape[0].dtype, 1))
            size = simplify(tir.Mul(size.dtype, size, tir.IntImm(size.dtype, get_bytes(buf.dtype))))
            smem = size if smem is None else simplify(tir.Add(size.dtype, smem, size))
        LOAD_V_SHARED = bool(LOAD_V_SHARED and isinstance(smem, tir.IntImm)
                             and smem.value <= get_max_shared_memory_per_block(target))
        if dequantize_block is not None:
            sch.compute_at(dequantize_block, r, preserve_unit_loops=True)
            sch.set_scope(dequantize_block, 0, "local")
            s_local, r_local = sch.get_loops(dequantize_block)[-2:]
            s_local, vec_load = sch.split(s_local, factors=[None, VEC_LOAD], preserve_unit_iters=True)
            sch.reorder(s_local, r_local, vec_load)
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
        if pad_input_block is not None:
            sch.compute_inline(pad_input_block)
        sch.reverse_compute_at(rf2, loop=bx, preserve_unit_loops=True)
        tr, vec_c, batch_loop, *ts_tile_s = sch.get_loops(rf2)[2:]
        ts_tile_s = sch.fuse(*ts_tile_s)
        ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        tile_s, vec_s = sch.split(tile_s, factors=[None, _max_factor(TILE_S, [1, 2, 4, 8])], preserve_unit_iters=True)
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(ts, tr, tile_s, batch_loop, vec_s, vec_c)
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.vectorize(vec_s)
        sch.reverse_compute_at(gemv, loop=bx, preserve_unit_loops=True)
        tr, batch_loop, *ts_tile_s = sch.get_loops(gemv)[2:]
        ts_tile_s = sch.fuse(*ts_tile_s)
        ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(tile_s, batch_loop, ts, tr)
        sch.bind(ts, TAG_S)
        sch.bind(tr, TAG_R)
        sch.decompose_reduction(rf, loop=sch.get_loops(rf)[4])
        sch.decompose_reduction(rf2, loop=sch.get_loops(rf2)[-1])
        sch.set_scope(rf, buffer_index=0, storage_scope="local")
        sch.set_scope(rf2, buffer_index=0, storage_scope="local")
        for blk in (rf, rf2):
            lp = sch.get_loops(blk)[4]
            sch.annotate(lp, ann_key="pragma_auto_unroll_max_step", ann_val=UNROLL)
            sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=1)
        if v_shared is not None:
            lp = sch.get_loops(v_shared)[-4]
            sch.annotate(lp, ann_key="pragma_unroll_explicit", ann_val=UNROLL)
            sch.annotate(lp, ann_key="pragma_vectorize", ann_val=1)
        consumers = sch.get_consumers(gemv)
        if consumers:
            epilogue = consumers[0]
            if is_broadcast_epilogue(sch, block, epilogue):
                sch.reverse_compute_at(epilogue, bx)
                sch.set_scope(block, 0, "shared")
                _, _, _, *s = sch.get_loops(epilogue)
                _, tx = sch.split(sch.fuse(*s), factors=[None, TS])
                sch.bind(tx, TAG_S)
            else:
                sch.reverse_compute_at(epilogue, bx, preserve_unit_loops=True)
                sch.fuse(*sch.get_loops(epilogue)[3:])
                ts_tile_s = sch.get_loops(epilogue)[-1]
                ts_o, ts_i, tile_s = sch.split(ts_tile_s, factors=[None, TS, TILE_S], preserve_unit_iters=True)
                ts = sch.fuse(ts_o, ts_i)
                sch.bind(ts, TAG_S)
                sch.set_scope(block, 0, "local")
        return sch
