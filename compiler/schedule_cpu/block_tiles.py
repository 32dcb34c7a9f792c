"""The rule for a transposing copy (``B[j, i] = A[i, j]``, no reduction): the nest tiled in
two dimensions, blocks of about one cache line each way (`plan_block_tiles`).

A variant of the loop tile's plan, tried by `loop_tile` when its innermost loop still reads
an operand with a large stride; its own module because it is its own rule, with its own
reasons (how LLVM compiles the blocks)."""

from __future__ import annotations

from ..lower_tir import UNROLL_ANN, VECTORIZE_ANN
from .analysis import pick_tile
from .host import BLOCK_TILE_BYTES
from .plan import Plan


def plan_block_tiles(plan: Plan, rhs_loads, accesses, inner, others_s, ebytes) -> bool:
    """For a nest without reduction whose innermost loop still reads some operand with a large
    stride (a transposing copy: ``B[j, i] = A[i, j]``), tile it in two dimensions: the
    innermost loop and the spatial loop along which that operand is contiguous are split into
    blocks of `BLOCK_TILE_BYTES`, with both block loops outside both in-block loops. A block
    then reads and writes a few whole cache lines (and pages) at a time, instead of one
    element of a different line (and often page) per iteration. Returns whether it did."""
    if inner.const_extent is None:
        return False
    tile = max(1, BLOCK_TILE_BYTES // ebytes)
    for ld, st in zip(rhs_loads, accesses[1:]):
        if abs(st.get(inner.iv.var, 0)) <= 1:
            continue
        for lp in others_s:
            if abs(st.get(lp.iv.var, 0)) != 1 or lp.const_extent is None:
                continue
            t_inner = pick_tile(inner.const_extent, tile)
            t_other = pick_tile(lp.const_extent, tile)
            if t_inner is None or t_other is None:
                continue
            plan.tile = t_inner
            plan.splits[id(lp)] = t_other
            plan.outer_s = [o for o in others_s if o is not lp]
            plan.inner_s = []
            plan.order = [lp, inner, lp, inner]
            # In a block, code generation keeps the loops as they are, rolled and scalar.
            # Vectorized, the strided loads become gathers, which run slower than scalar loads
            # (784x256 floats: 97 us against 71 us on Zen 4); unrolled (as LLVM's O3
            # heuristics would), LLVM searches interleaved access groups through the result,
            # which costs several times the compile time of the whole kernel and runs slower.
            plan.annotations[(id(inner), "inner")] = {VECTORIZE_ANN: 1, UNROLL_ANN: 0}
            plan.annotations[(id(lp), "inner")] = {UNROLL_ANN: 0}
            return True
    return False
