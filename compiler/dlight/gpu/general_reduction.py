"""`GeneralReduction`: row-wise chains of reductions and their elementwise tail — softmax,
layer_norm, rms_norm.

Why: these functions reduce each row several times (a max, then a sum of exponentials; a
mean, then a variance) and finish with an elementwise pass over the same row. Giving one thread
block per row (the leading spatial axes fused, bound to ``blockIdx.x``) lets every stage run
inside that block: each reduction is computed at the row's loop, its result kept in shared
memory, and reduced by 256 threads cooperatively (the reduce loop split, its inner part bound
to ``threadIdx.x``); the last block runs over the row with the same threads.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.arith import Analyzer
from tvmscript.ir.index_map import IndexMap
from tvmscript.ir.tir_visitor import vars_in

from ..analysis import get_root_block, normalize_prim_func
from ..base import try_inline_contiguous_spatial
from .base import GPUScheduleRule


class GeneralReduction(GPUScheduleRule):
    """Reductions over the trailing axes of rows, one thread block per row."""

    def apply(self, func, target, tunable: bool = False):
        if target.kind.name == "cuda":
            len_tx, unroll_depth = 256, 256
        elif target.kind.name == "opencl":
            len_tx, unroll_depth = 256, 64
        else:
            len_tx, unroll_depth = 64, 64
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        infos = normalize_prim_func(sch)
        infos = try_inline_contiguous_spatial(sch, infos)
        if not infos:
            return None
        dom_kind = infos[0].dom_kind()
        num_leading_s = len(dom_kind) - len(dom_kind.lstrip("S"))
        num_trailing_r = len(dom_kind) - len(dom_kind.rstrip("R"))
        num_last = len(infos[-1].dom_kind())
        if num_last < len(dom_kind):
            if num_last == 0:
                return self._scalar_tail(sch, infos)
            analyzer = Analyzer()
            first_iters, last_iters = infos[0].iters, infos[-1].iters

            def layout(*iters):
                matched, out = 0, []
                for it in first_iters:
                    if matched < len(iters) and analyzer.can_prove_equal(_expr(it.dom, iters[0].dtype),
                                                                         _expr(last_iters[matched].dom, iters[0].dtype)):
                        out.append(iters[matched])
                        matched += 1
                    else:
                        out.append(tir.IntImm(iters[0].dtype, 0))
                if matched == len(iters):
                    return out
                return [tir.IntImm(iters[0].dtype, 0)] * (len(dom_kind) - num_last) + list(iters)

            last_block = sch.get(infos[-1].block_rv)
            dtype = last_block.iter_vars[0].var.dtype
            sch.transform_block_layout(infos[-1].block_rv, IndexMap.from_func(layout, ndim=num_last, index_dtype=dtype))
        if num_trailing_r <= 0 or any(b.dom_kind() != dom_kind for b in infos[1:-1]) \
                or not infos[-1].is_injective() or len(infos[-1].dom_kind()) > len(dom_kind):
            return None
        if "R" not in infos[-1].dom_kind():
            # The last block is spatial; its loops may be ordered differently from the
            # reductions': put first the loops that index what the reductions wrote.
            reduced = {w.buffer for b in infos[:-1] for w in sch.get(b.block_rv).writes}
            last = sch.get(infos[-1].block_rv)
            loops = sch.get_loops(infos[-1].block_rv)
            var_to_loop = {iv.var: sch.get(lp).loop_var for iv, lp in zip(last.iter_vars, loops)}
            spatial = set()
            for r in last.reads:
                if r.buffer in reduced:
                    for rg in r.region:
                        for v in vars_in([rg.min, rg.extent]):
                            if v in var_to_loop:
                                spatial.add(var_to_loop[v])
            s_loops, other = [], []
            for lp in loops:
                loop = sch.get(lp)
                (s_loops if loop.loop_var in spatial or tir.is_const_int(loop.extent, 1) else other).append(lp)
            sch.reorder(*s_loops, *other)
        if not self._takes(sch, infos, num_leading_s, num_trailing_r):
            return None
        loops = sch.get_loops(infos[-1].block_rv)
        row = self._bind_rows(sch, sch.fuse(*loops[:num_leading_s]))
        r_loop, tx = sch.split(loops[-1], [None, self._threads_per_row(len_tx)])
        sch.reorder(tx, r_loop)
        sch.bind(tx, "threadIdx.x")
        sch.annotate(r_loop, ann_key="pragma_auto_unroll_max_step", ann_val=unroll_depth)
        sch.annotate(r_loop, ann_key="pragma_unroll_explicit", ann_val=1)
        for info in reversed(infos[:-1]):
            block = info.block_rv
            for n, _ in enumerate(sch.get(block).writes):
                sch.set_scope(block, buffer_index=n, storage_scope=self._result_scope())
            sch.compute_at(block, row, preserve_unit_loops=True)
            r_loop = sch.fuse(*sch.get_loops(block)[-num_trailing_r:])
            r_loop, tx = sch.split(r_loop, [None, self._threads_per_row(len_tx)])
            sch.reorder(tx, r_loop)
            sch.bind(tx, "threadIdx.x")
            sch.annotate(r_loop, ann_key="pragma_auto_unroll_max_step", ann_val=unroll_depth)
            sch.annotate(r_loop, ann_key="pragma_unroll_explicit", ann_val=1)
        return sch

    # The hooks `WarpRowReduction` overrides: which functions, how rows map to the grid.

    def _takes(self, sch, infos, num_leading_s: int, num_trailing_r: int) -> bool:
        return True

    def _bind_rows(self, sch, rows):
        """Bind the fused loop over rows; the loop each row's stages are computed at."""
        sch.bind(rows, "blockIdx.x")
        return rows

    def _threads_per_row(self, len_tx: int) -> int:
        return len_tx

    def _result_scope(self) -> str:
        """Where a row's reduced values live: shared memory, for the block's threads."""
        return "shared"

    @staticmethod
    def _scalar_tail(sch, infos):
        """The last block writes a scalar: nothing to tile. Give every block one thread (the
        first a ``blockIdx.x`` loop), and keep buffers private to one block local."""
        blocks = [sch.get(i.block_rv) for i in infos]
        root_allocs = list(sch.get(get_root_block(sch)).alloc_buffers)
        analyzer = Analyzer()
        for n, (info, block) in enumerate(zip(infos[:-1], blocks[:-1])):
            loops = sch.get_loops(info.block_rv)
            if not all(analyzer.can_prove_equal(sch.get(lp).extent, tir.IntImm(sch.get(lp).extent.dtype, 1))
                       for lp in loops):
                continue
            others = [r.buffer for m, b in enumerate(blocks) if m != n for r in (*b.reads, *b.writes)]
            for k, w in enumerate(block.writes):
                buf = w.buffer
                if buf.scope == "global" and any(buf is a for a in root_allocs) and not any(buf is o for o in others):
                    sch.set_scope(infos[n].block_rv, k, "local")
        for n, info in enumerate(infos):
            lp = sch.add_unit_loop(info.block_rv)
            sch.bind(lp, "blockIdx.x" if n == 0 else "threadIdx.x")
        return sch


def _expr(d, dtype):
    return tir.IntImm(dtype, d) if isinstance(d, int) else d
