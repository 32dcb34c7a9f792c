"""The rule for every nest no register tile or dot product takes (elementwise nests, and
reductions of a type or shape those cannot take): the first schedule this package had.

1. picks the innermost loop (`_innermost`): if the current innermost loop accesses memory
   with a stride other than 0 or 1, or is a reduce loop (vectorizing a reduction would
   reassociate it), the spatial loop that writes the output with unit stride and has the
   fewest badly strided reads (not counting one that step 2 packs) becomes innermost, and
   reduce loops move inside the other spatial loops (``i, j, k`` -> ``i, k, j`` for a
   matmul), so LLVM vectorizes it;
2. splits that innermost spatial loop into tiles of `tile_bytes()` (eight vector registers)
   when there are reduce loops outside it, and moves the tile loop outermost (`_plan_tile`):
   the reduction then runs over one tile of the output, which LLVM keeps in vector registers
   for the whole reduction, while the tile's panel of the other operand is reused for every
   row; that operand's panel (``reduce extent x tile``) is packed into a contiguous buffer
   once per tile when it is reused across other spatial loops (rows of a wide matrix lie
   4 KiB or more apart and compete for a few cache sets, `_plan_packing`); a single reduce
   loop is split when the panel would exceed `packed_panel_bytes` (`PANEL_BYTES` unpacked);
   the tile loop is annotated to be vectorized as one iteration of ``tile / lanes`` vectors
   (see `lower_tir.VECTORIZE_ANN`), which LLVM then holds in registers across the
   reduction; without reduce loops, when the innermost loop still reads an operand with a
   large stride (a transposing copy), `block_tiles` tiles it in two dimensions instead;
3. moves a reduction's ``T.init`` into a loop nest of its own over the spatial loops, run
   before the reduction (TVM's ``decompose_reduction``), so the inner loop has no branch;
4. marks the outermost spatial loop ``T.parallel`` when the nest does at least
   `PARALLEL_MIN_WORK` iterations (and the init nest too, when it alone does that many).
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir

from ..lower_tir import INTERLEAVE_ANN, VECTORIZE_ANN
from .analysis import pick_tile
from .block_tiles import plan_block_tiles
from .host import PANEL_BYTES, PARALLEL_MIN_WORK, packed_panel_bytes, tile_bytes, vector_bytes
from .nest import Nest, NestLoop, extent_product
from .packing import pack_reuse
from .plan import Plan, reduce_guard, worth_parallel


def plan_loop_tile(nest: Nest) -> Optional[Plan]:
    """The plan of steps 1 to 4 (see the module docstring) for ``nest``, or None when it
    would change nothing."""
    inner = _innermost(nest)
    unit = [lp for lp in nest.info if tir.is_const_int(lp.extent, 1)]
    others_s = [lp for lp in nest.nontrivial if lp is not inner and lp.kind == "S"]
    others_r = [lp for lp in nest.nontrivial if lp is not inner and lp.kind == "R"]
    plan = Plan()
    plan.inner_s = list(others_s)
    if inner.kind == "R":
        # The best innermost loop is a reduction (a dot product along unit strides): keep the
        # order; only parallelize.
        plan.order = list(nest.info)
    elif not others_r and plan_block_tiles(plan, nest.rhs_loads, nest.accesses, inner, others_s, nest.ebytes):
        plan.order = unit + plan.outer_s + plan.order
    else:
        _plan_tile(plan, nest, inner, others_s, others_r)
        plan.order = (unit + ([inner] if plan.tile else []) + plan.outer_s
                      + ([others_r[0]] if plan.ksplit else [])
                      + plan.inner_s + others_r + [inner])
    return _finish_loop_tile(plan, nest, inner, unit, others_s, others_r)


def _innermost(nest: Nest) -> NestLoop:
    """The loop to make innermost (step 1): the current innermost one, unless it strides
    badly or is a reduce loop and a spatial loop of unit output stride does better.

    A reduce loop innermost only vectorizes by reassociating the reduction, which would
    change results: a spatial loop of unit output stride is better even at equal cost, when
    it can be tiled."""
    current = nest.nontrivial[-1]
    cur_cost = _strided_accesses(nest, current.iv.var)
    if not (cur_cost > 0 or current.kind == "R"):
        return current
    best = None
    for lp in nest.nontrivial:
        if lp.kind != "S" or nest.accesses[0].get(lp.iv.var, 0) != 1:
            continue
        c = _effective_cost(nest, lp)
        better = c < cur_cost or (current.kind == "R" and c == 0 and _tileable(nest, lp))
        if better and (best is None or c <= best[0]):
            best = (c, lp)
    return best[1] if best is not None else current


def _strided_accesses(nest: Nest, var) -> int:
    """Accesses (the store's and the reads') with a stride other than 0 or 1 along ``var``."""
    return sum(1 for st in nest.accesses if abs(st.get(var, 0)) > 1)


def _tileable(nest: Nest, lp: NestLoop) -> bool:
    """Whether step 2 would tile ``lp`` made innermost."""
    return (bool(nest.reduce_loops) and lp.const_extent is not None
            and pick_tile(lp.const_extent, max(1, tile_bytes() // nest.ebytes)) is not None)


def _effective_cost(nest: Nest, lp: NestLoop) -> int:
    """Badly strided accesses if ``lp`` were innermost, not counting one read that
    packing would make contiguous."""
    c, packed = 0, False
    for ld, st in zip(nest.rhs_loads, nest.accesses[1:]):
        if abs(st.get(lp.iv.var, 0)) <= 1:
            continue
        if not packed and _tileable(nest, lp) and pack_reuse(ld, st, lp, nest.nontrivial, nest.rhs_loads) >= 4:
            packed = True
            continue
        c += 1
    return c


def _plan_tile(plan: Plan, nest: Nest, inner: NestLoop, others_s: list, others_r: list) -> None:
    """Step 2 with reduce loops: the innermost loop's tile, the read packed for it, and the
    tile's vector annotation."""
    e = inner.const_extent
    if others_r and e is not None:
        plan.tile = pick_tile(e, max(1, tile_bytes() // nest.ebytes))
    if plan.tile is None:
        return
    _plan_packing(plan, nest.rhs_loads, nest.accesses, inner, others_s, others_r, nest.ebytes)
    # The tile is one iteration of `tile / lanes` vectors: LLVM keeps them in registers
    # across the reduce loops around it (the accumulators of a matmul microkernel).
    lanes = max(1, vector_bytes() // nest.ebytes)
    if plan.tile % lanes == 0:
        plan.annotations[(id(inner), "inner")] = {VECTORIZE_ANN: lanes, INTERLEAVE_ANN: plan.tile // lanes}


def _plan_packing(plan: Plan, rhs_loads, accesses, inner, others_s, others_r, ebytes) -> None:
    """Choose a read to pack: one that depends on the reduce loops and on the inner loop and
    is invariant along other spatial loops (the panel is reused across them), preferring one
    the inner loop strides badly. Packing copies the ``reduce extent x tile`` panel it reads
    into a contiguous buffer: afterwards it is read with unit stride, and strided rows of a
    wide matrix no longer compete for a few cache sets."""
    plan.inner_s = list(others_s)
    candidates = []
    nontrivial = others_s + others_r + [inner]
    for ld, st in zip(rhs_loads, accesses[1:]):
        reuse = pack_reuse(ld, st, inner, nontrivial, rhs_loads)
        if reuse >= 4:
            outer = [lp for lp in others_s if st.get(lp.iv.var, 0)]
            inner_s = [lp for lp in others_s if not st.get(lp.iv.var, 0)]
            candidates.append((abs(st[inner.iv.var]) > 1, reuse, ld, outer, inner_s, st))
    k = others_r[0].const_extent if len(others_r) == 1 else None
    limit = packed_panel_bytes() if candidates else PANEL_BYTES
    panel = plan.tile * ebytes * extent_product(others_r, 1 << 20)
    if panel > limit:
        if k is None:
            candidates = []  # several (or symbolic) reduce loops: no split, panel too big to pack
        else:
            plan.ksplit = pick_tile(k, max(1, limit // (plan.tile * ebytes)), allow_small=True)
            if plan.ksplit is None:
                candidates = []
    if candidates:
        candidates.sort(key=lambda c: (not c[0], -c[1]))
        _, _, plan.pack, plan.outer_s, plan.inner_s, plan.pack_strides = candidates[0]


def _finish_loop_tile(plan: Plan, nest: Nest, inner: NestLoop, unit: list, others_s: list,
                      others_r: list) -> Optional[Plan]:
    """Complete the plan with what the schedule steps need (the loops after splitting, in the
    new order; the parallel loop; the init's nest), or None when it would change nothing."""
    info = nest.info
    entries = _split_entries(plan, inner, others_r)
    plan.reordered = reordered = [(e[0], e[1]) for e in entries] != [(lp, "full") for lp in info]
    par_index = _parallel_entry(entries) if worth_parallel(info) else None
    if not reordered and par_index is None:
        return None
    if any(part != "full" and not tir.is_const_int(lp.min, 0) for lp, part, _ in entries):
        return None  # `split` needs loops that start at 0
    plan.info, plan.entries, plan.par_index, plan.block_name = info, entries, par_index, nest.block.name
    plan.inner, plan.others_r, plan.unit = inner, others_r, unit
    plan.decompose = nest.init is not None and reordered
    if plan.decompose:
        # The init stores one element per spatial point: worth threads only when there are many.
        init_loops = [lp for lp in unit if lp.kind == "S"] + others_s + ([inner] if inner.kind == "S" else [])
        plan.init_parallel = par_index is not None and _init_worth_parallel(init_loops)
        plan.guard = reduce_guard(others_r)
    return plan


def _split_entries(plan: Plan, inner: NestLoop, others_r: list) -> list:
    """The loops of ``plan.order`` after splitting, as (origin loop, part, split factor): a
    loop split in two appears there twice, its ``"outer"`` part first, then ``"inner"``."""
    entries = []
    seen_split: set = set()
    for lp in plan.order:
        if lp is inner and plan.tile:
            factor = plan.tile
        else:
            factor = plan.ksplit if plan.ksplit and lp is others_r[0] else None
        if factor is None:
            factor = plan.splits.get(id(lp))
        if factor is None:
            entries.append((lp, "full", None))
        elif id(lp) not in seen_split:
            seen_split.add(id(lp))
            entries.append((lp, "outer", factor))
        else:
            entries.append((lp, "inner", factor))
    return entries


def _parallel_entry(entries: list) -> Optional[int]:
    """The entry to run in parallel: the outermost of more than one iteration, if it is
    spatial and not the inner part of a split (else None)."""
    for i, (lp, part, factor) in enumerate(entries):
        ext = factor if part == "inner" else (lp.const_extent // factor if part == "outer" else lp.extent)
        if isinstance(ext, int) and ext == 1 or not isinstance(ext, int) and tir.is_const_int(ext, 1):
            continue
        return i if lp.kind == "S" and part != "inner" else None
    return None


def _init_worth_parallel(init_loops: list) -> bool:
    """Whether the init's nest over these loops alone does enough work for threads (a
    symbolic extent may be large: yes)."""
    init_work, init_symbolic = 1, False
    for lp in init_loops:
        if lp.const_extent is None:
            init_symbolic = True
        else:
            init_work *= lp.const_extent
    return init_symbolic or init_work >= PARALLEL_MIN_WORK
