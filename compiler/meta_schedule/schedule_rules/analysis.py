"""What the schedule rules and postprocessors ask about a block or a loop (TVM's
``meta_schedule/utils.h`` and ``tir/schedule/analysis``), answered from the IR the `Schedule`
holds now.

Why a module of its own: several rules ask the same questions (is this block tiled already,
which kind is this loop, is the binding trivial), and the answers must agree, or one rule
would undo what another decided.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from ...schedule import BlockRV, Schedule
from ...schedule.common import const_value
from ...schedule.tree import stmt_children

__all__ = [
    "TILING_STRUCTURE", "PARALLEL", "VECTORIZE", "UNROLL_EXPLICIT", "UNROLL_IMPLICIT", "COOPERATIVE_FETCH",
    "THREAD_EXTENT_LOW", "THREAD_EXTENT_HIGH", "RANDOM_COMPUTE_PRODUCER", "INLINE_RULE", "SCHEDULE_RULE",
    "prim_func_names", "root_block_name", "is_root_block", "has_block", "post_order_blocks", "loop_iter_type",
    "is_trivial_binding", "is_spatial", "is_spatial_prim_func", "has_been_multi_level_tiled",
    "needs_multi_level_tiling", "is_reduction_block", "loop_extent", "thread_tag", "is_single_stmt",
    "consumers_of", "producers_of",
]

# Annotation keys, TVM's (``tir::attr::meta_schedule_*``): the rules leave them on blocks for
# the postprocessors, which turn them into loops and remove them.
TILING_STRUCTURE = "meta_schedule.tiling_structure"
PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL_EXPLICIT = "meta_schedule.unroll_explicit"
UNROLL_IMPLICIT = "meta_schedule.unroll_implicit"
COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
THREAD_EXTENT_LOW = "meta_schedule.thread_extent_low_inclusive"
THREAD_EXTENT_HIGH = "meta_schedule.thread_extent_high_inclusive"
RANDOM_COMPUTE_PRODUCER = "meta_schedule.random_compute_producer"
INLINE_RULE = "meta_schedule.inline_rule"
SCHEDULE_RULE = "schedule_rule"


def prim_func_names(sch: Schedule) -> list:
    """The names of the module's PrimFuncs, in the module's order."""
    mod = sch.mod
    names = [getattr(gv, "name_hint", gv) for gv in mod.functions]
    return [name for name in names if isinstance(mod[name], tir.PrimFunc)]


def root_block_name(sch: Schedule, func_name: str) -> Optional[str]:
    """The name of the function's root block (its body), or None when the body is no block."""
    body = sch.func(func_name).body
    return body.block.name if isinstance(body, tir.BlockRealize) else None


def is_root_block(sch: Schedule, block: BlockRV) -> bool:
    idx, realize = sch.resolve_block(block)
    return idx.parent_of(realize) is None


def has_block(sch: Schedule, block: BlockRV) -> bool:
    """Whether the block still exists (an inlined block does not)."""
    return block.name in sch.index(block.func_name).blocks


def post_order_blocks(sch: Schedule, func_name: str) -> list:
    """Block names of the function, children before their parent (the root last), siblings in
    program order: TVM's ``BlockCollector`` order, which PostOrderApply walks backwards."""
    out: list = []

    def walk(s) -> None:
        for c in stmt_children(s):
            walk(c)
        if isinstance(s, tir.Block):
            out.append(s.name)

    walk(sch.func(func_name).body)
    return out


def _outer_realizes(stmt) -> list:
    """The BlockRealizes under ``stmt`` not nested in another block below it."""
    out: list = []

    def walk(s) -> None:
        for c in stmt_children(s):
            if isinstance(c, tir.BlockRealize):
                out.append(c)
            else:
                walk(c)

    walk(stmt)
    return out


def loop_iter_type(loop: tir.For) -> str:
    """TVM's GetLoopIterType: "S" when the loop feeds only spatial iterators of the blocks
    under it (or none), "R" when only reduce iterators, "O" otherwise (both, or another kind)."""
    spatial = reduce = other = 0
    for realize in _outer_realizes(loop):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            n = sum(1 for v in vars_in([value]) if v is loop.loop_var)
            if iv.kind == "S":
                spatial += n
            elif iv.kind == "R":
                reduce += n
            else:
                other += n
    if other or (spatial and reduce):
        return "O"
    return "R" if reduce else "S"


def is_trivial_binding(sch: Schedule, block: BlockRV) -> bool:
    """Whether each iterator is bound to exactly the loop at its position (no split, fuse or
    reorder has touched the block's loops): what tiling a block needs to pair loops with
    iterators."""
    idx, realize = sch.resolve_block(block)
    loops = idx.loops_above(realize)
    if len(loops) != len(realize.iter_values):
        return False
    return all(v is lp.loop_var for lp, v in zip(loops, realize.iter_values))


def is_spatial(block: tir.Block) -> bool:
    return all(iv.kind == "S" for iv in block.iter_vars)


def is_spatial_prim_func(sch: Schedule, func_name: str) -> bool:
    """Whether every block of the function (the root aside) is spatial: nothing to unroll."""
    idx = sch.index(func_name)
    root = sch.func(func_name).body
    return all(is_spatial(r.block) for r in idx.blocks.values() if r is not root)


def has_been_multi_level_tiled(sch: Schedule, block: BlockRV) -> bool:
    return TILING_STRUCTURE in sch.get(block).annotations


def needs_multi_level_tiling(sch: Schedule, block: BlockRV) -> bool:
    """TVM's NeedsMultiLevelTiling: one written buffer, something read, a reduce iterator, a
    trivial binding, no buffer read twice, constant read extents, and some read that does not
    use every spatial iterator (the data reuse a tile exploits: ``A[i, k]`` is reused along
    ``j``). An elementwise or row-reduction block has no such reuse and is left alone."""
    if has_been_multi_level_tiled(sch, block):
        return False
    blk = sch.get(block)
    if len(blk.writes) != 1 or not blk.reads or is_spatial(blk) or not is_trivial_binding(sch, block):
        return False
    write_buffer = blk.writes[0].buffer
    spatial = {iv.var for iv in blk.iter_vars
               if iv.kind == "S" and not (const_value(iv.dom.min) == 0 and const_value(iv.dom.extent) == 1)}
    seen, unused = set(), 0
    for region in blk.reads:
        if region.buffer in seen:
            return False
        seen.add(region.buffer)
        if region.buffer is write_buffer:
            continue
        if any(const_value(r.extent) is None for r in region.region):
            return False
        used = set(vars_in([r.min for r in region.region]))
        unused += len(spatial - used)
    return unused >= 1


def is_reduction_block(sch: Schedule, block: BlockRV) -> bool:
    """A block with an init, spatial and reduce iterators only, whose reduce iterators do not
    index what it writes (TVM's IsReductionBlock, minus the scope check the primitives make)."""
    blk = sch.get(block)
    if blk.init is None or any(iv.kind not in ("S", "R") for iv in blk.iter_vars):
        return False
    reduce_vars = {iv.var for iv in blk.iter_vars if iv.kind == "R"}
    return not any(v in reduce_vars for w in blk.writes for r in w.region for v in vars_in([r.min, r.extent]))


def loop_extent(loop: tir.For) -> Optional[int]:
    """The loop's constant extent, or None."""
    return const_value(loop.extent)


def thread_tag(loop: tir.For) -> Optional[str]:
    return loop.thread_tag if loop.kind == "thread_binding" else None


def is_single_stmt(stmt) -> bool:
    """Whether ``stmt`` is one statement (not a sequence of several): a loop whose body is one
    can be fused with the loop inside it."""
    return not (isinstance(stmt, tir.SeqStmt) and len(stmt.seq) > 1)


def consumers_of(sch: Schedule, block: BlockRV) -> list:
    """The block's consumers, not traced: an analysis, not a step of the schedule."""
    return _neighbours(sch, block, after=True)


def producers_of(sch: Schedule, block: BlockRV) -> list:
    return _neighbours(sch, block, after=False)


def _neighbours(sch: Schedule, block: BlockRV, after: bool) -> list:
    idx, realize = sch.resolve_block(block)
    siblings = idx.siblings(realize)
    at = next(n for n, r in enumerate(siblings) if r is realize)
    if after:
        mine = {w.buffer for w in realize.block.writes}
        return [r.block.name for r in siblings[at + 1:] if any(x.buffer in mine for x in r.block.reads)]
    mine = {r.buffer for r in realize.block.reads}
    return [r.block.name for r in siblings[:at] if any(w.buffer in mine for w in r.block.writes)]
