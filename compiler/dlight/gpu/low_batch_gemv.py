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

from tvmscript.ir import tir

from ..analysis import (dominant_access, gemv_access, gemv_vector_operands, is_broadcast_epilogue, is_gemv_reduction,
                        normalize_prim_func)
from ..base import get_extent, max_factor, split_epilogue, try_inline_contiguous_spatial
from .base import GPUScheduleRule
from .gemv import (DEFAULT_CONFIG, elementwise_epilogue, fit_threads, pick_threads, rfactor_twice,
                   stage_vector_shared, vectors_fit_shared, write_back)


def _pad_einsum_compatible(block: tir.Block) -> bool:
    return all(tir.is_const_int(r.extent, 1) and isinstance(r.min, (tir.IntImm, tir.Var))
               for region in (*block.reads, *block.writes) for r in region.region)


def _const_vars(block: tir.Block) -> set:
    return {iv.var for iv in block.iter_vars if isinstance(iv.dom.extent, tir.IntImm)}


def is_gemv(sch, info):
    """The vector operands of a GEMM with exactly one symbolic (spatial) iterator, or None."""
    block = sch.get(info.block_rv)
    if not (is_gemv_reduction(block, info) and _pad_einsum_compatible(block)):
        return None
    const_vars = _const_vars(block)
    if len(block.iter_vars) - len(const_vars) != 1:
        return None
    sym = next(iv for iv in block.iter_vars if not isinstance(iv.dom.extent, tir.IntImm))
    if sym.kind != "S":
        return None
    return gemv_vector_operands(block, const_vars)


def normalize(sch, info):
    """Loops ordered (symbolic batch, spatial, reduce), spatial and reduce each fused; True
    for an inner reduction, None when not applicable."""
    block = sch.get(info.block_rv)
    const_vars = _const_vars(block)
    dyn_vars = [iv.var for iv in block.iter_vars if iv.var not in const_vars]
    found = gemv_access(sch, info, among=const_vars)
    if found is None:
        return None
    access, uses, info_of = found
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


# A target kind's inner-reduction schedule, laid out as GEMV's table (gemv.py); TVM tunes
# the two rules apart, so the values differ.
_INNER_CONFIG = {
    "cuda": (4, True, 8, 256, (4, 64), (16, 32)),
    "metal": (4, False, -1, 8, (8, 32), (8, 32)),
    "rocm": (4, True, 8, 256, (1, 128), (8, 64)),
    "vulkan": (4, True, 4, 256, (4, 32), (16, 32)),
}


class LowBatchGEMV(GPUScheduleRule):
    """A GEMV schedule carrying ``bucket`` rows of a small symbolic batch."""

    def __init__(self, bucket: int = 4) -> None:
        self.bucket = bucket

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
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
        probe = dominant_access(stmt, _const_vars(stmt))
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
        found = split_epilogue(try_inline_contiguous_spatial(sch, infos))
        if found is None:
            return None
        info, epilogue = found
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
        kind = target.kind.name
        VEC_C, LOAD_V_SHARED, LOAD_V_VEC, UNROLL, wide, narrow = _INNER_CONFIG.get(kind, DEFAULT_CONFIG)
        TS, TR = pick_threads(len_s, len_r if isinstance(len_r, int) else None, wide, narrow)
        TAG_S, TAG_R = "threadIdx.y", "threadIdx.x"
        if kind == "metal" and isinstance(len_s, int) and isinstance(len_r, int) and not len_s > len_r:
            TAG_S, TAG_R = "threadIdx.x", "threadIdx.y"
        if not isinstance(len_r, int):
            return None
        TS, TR = fit_threads(target, TS, TR)
        TILE_S, TILE_R = 2, max(max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)
        VEC_C = min(max_factor(TILE_R, [1, 2, 4, 8]), VEC_C)
        VEC_LOAD = 1
        gemv = block
        _, s, r = sch.get_loops(gemv)
        rf, rf2, (batch_loop,), bx, ts, tr, r = rfactor_twice(sch, gemv, s, r, TS, TR, TILE_S, TILE_R, VEC_C,
                                                              TAG_S, TAG_R)
        by, batch = sch.split(batch_loop, factors=[None, batch_pad])
        sch.bind(by, "blockIdx.y")
        sch.reorder(bx, ts, tr, r, batch)
        LOAD_V_SHARED = LOAD_V_SHARED and vectors_fit_shared(target, vector_inputs)
        if LOAD_V_SHARED and len(vector_inputs) != 1:
            return None  # TVM stages exactly one vector
        if dequantize_block is not None:
            sch.compute_at(dequantize_block, r, preserve_unit_loops=True)
            sch.set_scope(dequantize_block, 0, "local")
            s_local, r_local = sch.get_loops(dequantize_block)[-2:]
            s_local, vec_load = sch.split(s_local, factors=[None, VEC_LOAD], preserve_unit_iters=True)
            sch.reorder(s_local, r_local, vec_load)
            sch.vectorize(vec_load)
        v_shared = stage_vector_shared(sch, rf, tr, TS, TR, TAG_R, LOAD_V_VEC) if LOAD_V_SHARED else None
        if pad_input_block is not None:
            sch.compute_inline(pad_input_block)
        write_back(sch, gemv, rf, rf2, v_shared, bx, TS, TR, TILE_S, TAG_S, TAG_R, UNROLL, n_batch=1)
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
                elementwise_epilogue(sch, block, epilogue, bx, TS, TILE_S, TAG_S, n_outer=3)
        return sch
