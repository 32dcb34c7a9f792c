"""`Transpose`: a 2-D transpose (``B[i, j] = A[j, i]``), possibly after an elementwise
prologue, staged through shared memory.

Why: a transpose reads one array along rows and writes the other along columns, so one of
the two is uncoalesced whatever the threads do. Loading a tile of the input into shared memory
with the threads running along its rows, then writing the output from the tile with the threads
running along the output's rows, makes both global accesses coalesced; the tile's rows are
padded by one element (`storage_align`) so reading it by columns does not hit one bank.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.arith import expr_key

from ..analysis import detect_dominant_read, normalize_prim_func, normalize_to_iter_sum
from ..base import try_inline_contiguous_spatial
from .base import GPUScheduleRule


class Transpose(GPUScheduleRule):
    """A transpose through a shared-memory tile (see the module docstring)."""

    @staticmethod
    def is_transpose(sch, block_rv) -> bool:
        block = sch.get(block_rv)
        store = block.body
        if isinstance(store, tir.BufferStore) and isinstance(store.value, tir.BufferLoad):
            lhs = [expr_key(i) for i in store.indices]
            rhs = [expr_key(i) for i in store.value.indices]
            return lhs != rhs and set(lhs) == set(rhs)
        return False

    def apply(self, func, target, tunable: bool = False):
        if target.kind.name == "cuda":
            len_tx, len_ty, unroll_depth = 16, 8, 256
        elif target.kind.name == "opencl":
            len_tx, len_ty, unroll_depth = 16, 8, 64
        else:
            len_tx, len_ty, unroll_depth = 8, 4, 64
        len_vec = 4
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        blocks = normalize_prim_func(sch)
        if blocks is None:
            return None
        t_idx = -1
        for n in range(len(blocks) - 1, -1, -1):
            if self.is_transpose(sch, blocks[n].block_rv):
                t_idx = n
                break
            if not blocks[n].is_injective():
                return None
        if t_idx == -1:
            return None
        transpose_block = blocks[t_idx].block_rv
        prologue = None  # an optional decoding block, inlined at the end
        if t_idx > 0:
            rest = try_inline_contiguous_spatial(sch, blocks[: t_idx - 1])
            if rest:
                return None
            prologue = blocks[t_idx - 1].block_rv
        loops = sch.get_loops(transpose_block)
        if len(loops) != 2:
            return None
        c_factor = 1
        if prologue is not None:
            stmt = sch.get(prologue)
            res = normalize_to_iter_sum(detect_dominant_read(stmt), {iv.var: iv.dom.extent for iv in stmt.iter_vars})
            if res.args:
                c_factor = int(res.args[0].lower_factor)
        i, j = loops
        i, vi = sch.split(i, factors=[None, c_factor], preserve_unit_iters=True)
        bi, ti = sch.split(i, factors=[None, len_ty], preserve_unit_iters=True)
        bj, tj = sch.split(j, factors=[None, len_tx], preserve_unit_iters=True)
        sch.reorder(bi, bj, ti, tj, vi)
        sch.bind(bi, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        sch.bind(ti, "threadIdx.y")
        sch.bind(tj, "threadIdx.x")
        len_vec = min(len_vec, c_factor)
        _, vi = sch.split(vi, factors=[None, len_vec])
        if len_vec > 1:
            sch.vectorize(vi)
        cache = sch.cache_read(transpose_block, read_buffer_index=0, storage_scope="shared")
        sch.compute_at(cache, bj)
        fused = sch.fuse(*sch.get_loops(cache)[2:])
        _, ty, tx, v = sch.split(fused, factors=[None, len_ty, len_tx, c_factor])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.unroll(v)
        sch.storage_align(block=cache, buffer_index=0, axis=0, factor=32, offset=1)
        sch.annotate(bi, ann_key="pragma_auto_unroll_max_step", ann_val=unroll_depth)
        sch.annotate(bi, ann_key="pragma_unroll_explicit", ann_val=1)
        if prologue is not None:
            sch.compute_inline(prologue)
        return sch
