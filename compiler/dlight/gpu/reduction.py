"""`Reduction`: one reduction block (``X[s] = X[s] + f(...)``), with an optional elementwise
epilogue, reduced cooperatively by the threads of a block.

Why: Fallback gives each output element to one thread, which then walks the whole reduced
axis alone; with few outputs (a row sum, a mean, a vector-matrix product with batch 1) most
of the GPU idles. Here each output row gets a thread block whose threads each reduce a strided
slice of the axis into a private partial result (`rfactor`, kept in "local" memory), then
combine the partials across threads (the reduce loop bound to ``threadIdx``: a cross-thread
reduction). Which way the threads go depends on the memory order of the dominant read: when
the reduced axis is innermost (an inner reduction) threads split the reduced axis
(``threadIdx.x``); when a spatial axis is innermost, ``threadIdx.x`` runs along it (coalesced
loads) and ``threadIdx.y`` splits the reduction.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir

from ..analysis import dominant_access, get_reduction_expr, is_broadcast_epilogue, normalize_prim_func
from ..base import max_factor, split_epilogue, suggest_threads_per_block, try_inline_contiguous_spatial
from .base import GPUScheduleRule


def _inner_spatial_tx(s_factor) -> int:
    """The largest divisor of ``s_factor`` no greater than 16 (1 when symbolic)."""
    return max_factor(s_factor, range(1, 17)) if isinstance(s_factor, int) else 1


def _spatial_domains_in_access_order(info, access) -> Optional[list]:
    """Extents of the spatial axes in the dominant read's memory order (a split axis counts
    its outer part), with unit spatial axes the read skips appended; None if ambiguous."""
    by_var = {i.var: i for i in info.iters}
    out, seen = [], set()
    for a in access.args:
        it = by_var.get(a.source)
        if it is None:
            return None
        if it.kind == "S":
            if a.source in seen:
                return None
            seen.add(a.source)
            if a.lower_factor > 1:
                ext = a.extent
                out.append(ext.value if isinstance(ext, tir.IntImm) else ext)
            else:
                out.append(it.dom)
    for it in info.iters:
        if it.kind == "S" and it.var not in seen:
            if not isinstance(it.dom, int) or it.dom != 1:
                return None
            out.append(it.dom)
    if len(out) != sum(i.kind == "S" for i in info.iters):
        return None
    return out


def _fuse_write_back_spatial(sch, s: list, unroll_spatial_factor, loop_order: dict, s_split_index) -> tuple:
    """The write-back block's spatial loops ``s`` fused into one, in the order of the block's
    iterators; with ``unroll_spatial_factor``, the axis the read split (``x // c``) is split
    the same way and its inner part kept out of the fusion. Returns ``(fused, inner or
    None)``."""
    if not unroll_spatial_factor:
        return sch.fuse(*s), None
    order = [s[loop_order[n]] for n in range(len(s))]
    sch.reorder(*order)
    order[s_split_index], c = sch.split(order[s_split_index], factors=[None, unroll_spatial_factor])
    sch.reorder(*order, c)
    return sch.fuse(*order), c


def _epilogue_into_block(sch, block, epilogue, bx) -> bool:
    """Move the epilogue into the thread block of ``bx``; the reduction's result goes to shared
    memory when the epilogue broadcasts it (other threads read it), else to registers. True
    when it broadcasts."""
    sch.reverse_compute_at(epilogue, bx, preserve_unit_loops=True)
    broadcast = is_broadcast_epilogue(sch, block, epilogue)
    sch.set_scope(block, 0, "shared" if broadcast else "local")
    return broadcast


def _inner_spatial_write_back_is_affine(domains: list) -> bool:
    """Whether the write-back bindings stay quasi-affine (at most two div/mod components)."""
    if not domains:
        return False
    parts = sum(1 for d in domains[:-1] if not isinstance(d, int) or d > 1)
    inner = domains[-1]
    if not isinstance(inner, int) or _inner_spatial_tx(inner) < inner:
        parts += 1
    return parts < 3


class Reduction(GPUScheduleRule):
    """A reduction reduced across the threads of a block (see the module docstring)."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        found = split_epilogue(try_inline_contiguous_spatial(sch, normalize_prim_func(sch)))
        if found is None:
            return None
        info, epilogue = found
        block = info.block_rv
        stmt = sch.get(block)
        if not info.is_reduction() or "R" not in info.dom_kind() or len(stmt.writes) != 1 \
                or get_reduction_expr(stmt) is None:
            return None
        access = dominant_access(stmt)
        domains = _spatial_domains_in_access_order(info, access)
        if domains is None:
            return None
        is_inner, c_factor, loop_order, s_split_index = self._normalize(sch, info, access)
        if is_inner is None and c_factor is None:
            return None
        if is_inner:
            self._sch_inner_reduction(sch, target, block, c_factor, epilogue, loop_order, s_split_index)
        else:
            if not _inner_spatial_write_back_is_affine(domains):
                return None
            self._sch_inner_spatial(sch, target, block, domains[-1], c_factor, epilogue, loop_order, s_split_index)
        return sch

    def _normalize(self, sch, info, access):
        """Loops reordered as (spatial, reduce, inner) and each group fused to one loop; an
        axis the read splits (``x // c``) is split the same way, its inner part going last."""
        none = (None, None, None, None)
        if not tir.is_const_int(access.base, 0):
            return none
        by_var = {i.var: i for i in info.iters}
        s_loops, r_loops, c_loops, c_factor = [], [], [], None
        s_split_loop, s_split_index = None, None
        is_inner = None
        for a in access.args:
            it = by_var.pop(a.source, None)
            if it is None:
                return none
            loop = it.loop_rv
            is_inner = it.kind == "R"
            if a.lower_factor > 1:
                if c_loops:
                    return none
                s_split_loop, s_split_index = loop, len(s_loops)
                loop, c_loop = sch.split(loop, factors=[None, a.lower_factor])
                c_loops.append(c_loop)
                if not is_inner:
                    c_factor = a.lower_factor
            (r_loops if is_inner else s_loops).append(loop)
        for it in by_var.values():
            if it.kind == "S" and it.dom == 1:
                s_loops.append(it.loop_rv)
            else:
                return none
        order_loops = [i.loop_rv for i in info.iters if i.loop_rv in s_loops or i.loop_rv is s_split_loop]
        loop_order = {}
        for n, lp in enumerate(order_loops):
            for m, sl in enumerate(s_loops):
                if lp is sl:
                    loop_order[n] = m
                    break
                if lp is s_split_loop:
                    loop_order[n] = s_split_index
                    break
        if not s_loops or not r_loops:
            return none
        if len(s_loops) != sum(1 for i in info.iters if i.kind == "S"):
            return none
        if not c_loops:
            c_loops = [sch.add_unit_loop(info.block_rv)]
        sch.reorder(*s_loops, *r_loops, *c_loops)
        sch.fuse(*s_loops)
        sch.fuse(*r_loops)
        return is_inner, c_factor, loop_order, s_split_index

    def _sch_inner_reduction(self, sch, target, block, unroll_spatial_factor, epilogue_info, loop_order,
                             s_split_index):
        _, r, _ = sch.get_loops(block)
        (len_tx,) = suggest_threads_per_block(target, [sch.get(r)])
        _, tx = sch.split(r, factors=[None, len_tx])
        rf = sch.rfactor(tx, 0)
        bx, r, tx, _ = sch.get_loops(rf)
        sch.reorder(bx, tx, r)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.annotate(tx, ann_key="pragma_auto_unroll_max_step", ann_val=256)
        sch.annotate(tx, ann_key="pragma_unroll_explicit", ann_val=1)
        sch.set_scope(rf, 0, "local")
        sch.decompose_reduction(rf, r)
        # the write-back: the partials of each output combined across threadIdx.x
        sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
        _, tx, *s = sch.get_loops(block)
        s, c = _fuse_write_back_spatial(sch, s, unroll_spatial_factor, loop_order, s_split_index)
        sch.reorder(s, tx, *([c] if c is not None else []))
        sch.bind(tx, "threadIdx.x")
        if epilogue_info is not None:
            epilogue = epilogue_info.block_rv
            if _epilogue_into_block(sch, block, epilogue, bx):
                _, *s = sch.get_loops(epilogue)
                _, tx = sch.split(sch.fuse(*s), factors=[None, len_tx])
                sch.bind(tx, "threadIdx.x")

    def _sch_inner_spatial(self, sch, target, block, s_factor, unroll_spatial_factor, epilogue_info, loop_order,
                           s_split_index):
        s, r, _ = sch.get_loops(block)
        len_ty = 16
        len_tx = _inner_spatial_tx(s_factor)
        sch.split(s, factors=[None, len_tx])
        _, ty = sch.split(r, factors=[None, len_ty])
        rf = sch.rfactor(ty, 0)
        bx, tx, r, ty, _ = sch.get_loops(rf)
        sch.reorder(bx, tx, ty, r)
        sch.bind(tx, "threadIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(bx, "blockIdx.x")
        sch.set_scope(rf, 0, "local")
        sch.decompose_reduction(rf, r)
        sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
        _, r, *s = sch.get_loops(block)
        s, c = _fuse_write_back_spatial(sch, s, unroll_spatial_factor, loop_order, s_split_index)
        sch.reorder(s, *([c] if c is not None else []), r)
        sch.bind(s, "threadIdx.x")
        sch.bind(r, "threadIdx.y")
        if epilogue_info is not None:
            epilogue = epilogue_info.block_rv
            broadcast = _epilogue_into_block(sch, block, epilogue, bx)
            _, *s = sch.get_loops(epilogue)
            if broadcast:
                _, tx, ty = sch.split(sch.fuse(*s), factors=[None, len_tx, len_ty])
                sch.bind(tx, "threadIdx.x")
                sch.bind(ty, "threadIdx.y")
            else:
                tx, _ = sch.split(sch.fuse(*s), factors=[len_tx, None])
                sch.bind(tx, "threadIdx.x")
