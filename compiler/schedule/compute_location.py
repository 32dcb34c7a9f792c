"""Moving a block under a loop: ``compute_at`` (a producer under a loop of its consumers) and
``reverse_compute_at`` (a consumer under a loop of its producers).

Moving a block changes *when* its instances run, never *what* they compute, so the work is
all in deciding which instances must run at each iteration of the target loop:

1. The blocks that depend on the moved block and sit under the loop (its consumers for
   ``compute_at``, its producers for ``reverse_compute_at``) touch some region of the buffers
   the moved block writes (reads). Relaxing each such access over the loops between that block
   and the target loop gives the region *required* per iteration of the target loop.
2. The moved block *provides* one point of each buffer per instance (``B[vi, vj]``); solving
   "provided covers required" dimension by dimension gives an interval per block iterator
   (``vj in [j_0 * 4, j_0 * 4 + 3]``).
3. One new loop per iterator whose interval is longer than one (TVM names them ``ax0, ax1,
   ...``) re-creates the instances: ``vj = j_0 * 4 + ax0``; where the interval may run past
   the iterator's domain (a split that does not divide) a ``T.where`` keeps it in bounds.

The moved block is taken out of its old place together with the loops that only held it, and
the new loop nest goes in the target loop's body between the last producer and the first
consumer (``index`` picks the place). As in TVM, the function is rebuilt once, after every
check has passed, so a rejected call leaves the schedule unchanged.

Step 2 is `iter_domains`, over the interval arithmetic of `intervals`; the block scope and
the checks the inlining primitives share with these are in `block_scope`.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import make_cast

from .block_scope import (as_block_rv, check_complete_or_reduction, check_not_output, leaf_removal_plan, scope_of,
                          takes_block_name)
from .common import const_value, quoted_name
from .intervals import NOTHING, exact_constant, proven, region_intervals, relax_region, simplify_in
from .iter_domains import DomainError, iter_domains
from .reduction import forget_affine_flag
from .state import BlockRV, LoopRV, Schedule, primitive
from .tree import FuncIndex, child_block_realizes, replace_many

__all__ = ["compute_at", "reverse_compute_at"]


# Storage ranks and thread ranks, as TVM orders them: a buffer in a scope of rank r is shared
# by the threads of every binding whose rank is at least r, so a consumer's accesses must be
# relaxed over those thread loops too (a "shared" buffer is filled for the whole thread block).
_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}


def _thread_rank(tag: str) -> tuple:
    if tag.startswith("blockIdx"):
        return 0, "xyz".index(tag[-1]) if tag[-1] in "xyz" else 0
    if tag.startswith("threadIdx"):
        return 1, "xyz".index(tag[-1]) if tag[-1] in "xyz" else 0
    if tag.startswith("vthread") or tag == "cthread":
        return 1, -1
    return -1, 0  # not a thread axis: nothing to relax


def _storage_rank(scope: str) -> int:
    base = scope.split(".")[0] if scope not in _STORAGE_RANK else scope
    return _STORAGE_RANK.get(base, 0)


def _can_relax_under_thread(storage_rank: int, tag: str) -> bool:
    rank, dim = _thread_rank(tag)
    if storage_rank == 2:  # warp memory: only threadIdx.x
        return rank == 1 and dim == 0
    return storage_rank <= rank


def _relax_dom(idx: FuncIndex, required_realize, target_loop, storage_rank: int) -> dict:
    """Var -> Range of the loops to relax for a dependent block's access: those between the
    block and the target loop, and, for a buffer shared among threads (``storage_rank`` > 0),
    the thread loops from the target loop up whose threads share it."""
    dom = {}
    chain = idx.ancestors(required_realize)
    n = 0
    while n < len(chain) and chain[n] is not target_loop:
        a = chain[n]
        if isinstance(a, tir.For):
            dom[a.loop_var] = tir.Range(a.min, a.extent)
        elif isinstance(a, tir.Block):
            break
        n += 1
    if storage_rank > 0:
        for a in chain[n:]:
            if isinstance(a, tir.For) and a.kind == "thread_binding" and a.thread_tag and \
                    _can_relax_under_thread(storage_rank, a.thread_tag):
                dom[a.loop_var] = tir.Range(a.min, a.extent)
    return dom



def _cover_range(dom, iter_dom: tir.Range) -> tuple:
    """(min, extent) of an interval, or the iterator's whole domain when it is unbounded."""
    lo, hi = dom
    if lo is None or hi is None:
        return iter_dom.min, iter_dom.extent
    lo = simplify(lo)
    ext = simplify(tir.Sub(lo.dtype, tir.Add(lo.dtype, make_cast(hi, lo.dtype), tir.IntImm(lo.dtype, 1)), lo))
    return lo, ext


def _bits(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return int(digits) if digits else 32


def _make_loop_nest(block_realize, doms: list, ranges: dict, preserve_unit_loops: bool):
    """The new realize of the moved block under its ``ax`` loops, with the predicate that keeps
    each iterator inside its bound where that cannot be proven."""
    block = block_realize.block
    ranges = dict(ranges)
    loop_vars, extents, values = [], [], []
    conds = []
    for iv, info in zip(block.iter_vars, doms):
        lo, ext = _cover_range(info.dom, iv.dom)
        if preserve_unit_loops or const_value(ext) != 1:
            dtype = f"int{max(_bits(lo.dtype), _bits(ext.dtype))}"
            var = tir.Var(dtype, f"ax{len(loop_vars)}")
            ext = simplify_in(make_cast(ext, dtype), ranges)
            if not isinstance(ext, tir.IntImm):
                ext = exact_constant(ext, ranges) or ext
            loop_vars.append(var)
            extents.append(ext)
            value = var if const_value(lo) == 0 else tir.Add(dtype, make_cast(lo, dtype), var)
            ranges[var] = (tir.IntImm(dtype, 0), ext)
        else:
            value = lo
        values.append(value)
        if info.bound is not NOTHING:
            b_lo, b_hi = info.bound
            if b_lo is not None:
                c = tir.GE("bool", value, make_cast(b_lo, value.dtype))
                if not proven(c, ranges):
                    conds.append(c)
            if b_hi is not None:
                c = tir.LT("bool", value, make_cast(tir.Add(b_hi.dtype, b_hi, tir.IntImm(b_hi.dtype, 1)), value.dtype))
                if not proven(c, ranges):
                    conds.append(c)
    pred = None
    for c in conds:
        pred = c if pred is None else tir.And("bool", pred, c)
    pred = tir.IntImm("bool", 1) if pred is None else simplify_in(pred, ranges)
    if isinstance(pred, tir.IntImm):
        pred = tir.IntImm("bool", 1 if pred.value else 0)
    stmt = tir.BlockRealize(values, pred, block)
    for var, ext in reversed(list(zip(loop_vars, extents))):
        stmt = tir.For(var, tir.IntImm(var.dtype, 0), ext, "serial", stmt)
    return stmt



def _insertion_point(sch, prim, block_realize, subtrees: list, producers: list, consumers: list,
                     need_producers: bool, need_consumers: bool, index: int) -> tuple:
    """Where among the loop body's statements the block may go: after the last statement
    holding a producer, at or before the first holding a consumer. Returns the position and
    the realizes of the scope's blocks found under the loop."""
    found = {}
    n_prod = n_cons = 0
    last_prod, first_cons = -1, len(subtrees)
    prod_ids = {id(p) for p in producers}
    cons_ids = {id(c) for c in consumers}
    for n, s in enumerate(subtrees):
        here = child_block_realizes(s) if not isinstance(s, tir.BlockRealize) else [s]
        p_here = c_here = 0
        for r in here:
            found[id(r)] = r
            p_here += id(r) in prod_ids
            c_here += id(r) in cons_ids
        if p_here:
            last_prod = n
        if c_here and first_cons == len(subtrees):
            first_cons = n
        n_prod += p_here
        n_cons += c_here
    if last_prod >= first_cons:
        raise sch.error(prim, f"block {quoted_name(block_realize)}",
                        "cannot find an insertion point that satisfies the producer-consumer constraint: in 0-based "
                        f"indexing, the last producer appears in subtree {last_prod} of the loop body, and the first "
                        f"consumer in subtree {first_cons}", block_realize)
    for needed, count, group, what in ((need_producers, n_prod, producers, "producer"),
                                       (need_consumers, n_cons, consumers, "consumer")):
        if needed and count < len(group):
            missing = [g for g in group if id(g) not in found]
            raise sch.error(prim, f"block {quoted_name(block_realize)}",
                            f"the primitive requires all the {what}(s) of the given block to be present under the "
                            f"target loop, but {len(group) - count} {what}(s) are not: "
                            + ", ".join(quoted_name(m) for m in missing), block_realize)
    if index == -1:
        pos = first_cons
    elif index == -2:
        pos = last_prod + 1
    elif index >= 0 and last_prod + 1 <= index <= first_cons:
        pos = index
    else:
        raise sch.error(prim, f"block {quoted_name(block_realize)}",
                        f"index {index} is not a valid insertion point: valid are -1, -2 and "
                        f"[{last_prod + 1}, {first_cons}]", block_realize)
    return pos, found


def _compute_at_impl(sch: Schedule, prim: str, block, loop, preserve_unit_loops: bool, index: int,
                     is_compute_at: bool) -> None:
    block = as_block_rv(sch, block, prim)
    idx, realize = sch.resolve_block(block, prim)
    if not isinstance(loop, LoopRV):
        raise TypeError(f"{prim}: expected a loop (LoopRV), got {type(loop).__name__}")
    if loop.func_name != block.func_name:
        raise sch.error(prim, f"block {quoted_name(realize)}", f"the loop is in function '{loop.func_name}', the block in "
                        f"'{block.func_name}'", realize)
    if loop.is_root:   # the root, as `sample_compute_location` samples it: the block stays
        return
    _, target = sch.resolve_loop(loop, prim)
    index = int(index)

    # 1. The scope must be a stage pipeline; the block complete or a reduction.
    scope = scope_of(sch, prim, idx, realize)
    producers = scope.producers(realize)
    consumers = scope.consumers(realize)
    check_complete_or_reduction(sch, prim, scope, realize)

    # 2. The loop is in the same scope (only loops between it and the scope block) and does
    # not enclose the block already.
    ranges = {}
    for a in [target] + idx.ancestors(target):
        if isinstance(a, tir.For):
            ranges[a.loop_var] = (a.min, a.extent)
        elif isinstance(a, tir.Block):
            if a is not scope.block:
                raise _not_same_scope(sch, prim, realize, target)
            break
    if idx.is_ancestor(target, realize):
        raise _not_same_scope(sch, prim, realize, target)

    # 3. compute_at may not move a block whose results leave the scope.
    if is_compute_at:
        check_not_output(sch, prim, scope, realize)

    removed = leaf_removal_plan(sch, prim, idx, realize)

    # 4. Where the block goes among the loop body's statements.
    subtrees = list(target.body.seq) if isinstance(target.body, tir.SeqStmt) else [target.body]
    pos, found = _insertion_point(sch, prim, realize, subtrees, producers, consumers,
                                  need_producers=not is_compute_at, need_consumers=is_compute_at, index=index)

    # 5. Regions: provided by one instance of the block, required by its dependents under the loop.
    provided, required = {}, {}
    for br in (realize.block.writes if is_compute_at else realize.block.reads):
        provided.setdefault(br.buffer, []).append(region_intervals(br.region))
        required[br.buffer] = []
    for dep in (consumers if is_compute_at else producers):
        dep_realize = found[id(dep)]
        binding = {iv.var: v for iv, v in zip(dep_realize.block.iter_vars, dep_realize.iter_values)}
        for br in (dep_realize.block.reads if is_compute_at else dep_realize.block.writes):
            if br.buffer not in required:
                continue
            rank = _storage_rank(br.buffer.scope) if is_compute_at else 0
            dom = _relax_dom(idx, dep_realize, target, rank)
            region = [tir.Range(substitute(r.min, binding), substitute(r.extent, binding)) for r in br.region]
            relaxed = relax_region(region, dom, ranges)
            if relaxed is None:
                raise sch.error(prim, f"block {quoted_name(realize)}",
                                f"cannot bound the region of '{br.buffer.name}' that block {quoted_name(dep_realize)} "
                                "accesses under the loop", realize)
            required[br.buffer].append(relaxed)

    # 6. The iterator domains, the loops that sweep them, and the new tree.
    try:
        doms = iter_domains(realize.block, provided, required, ranges)
    except DomainError as e:
        raise sch.error(prim, f"block {quoted_name(realize)}", str(e), realize) from None
    nest = _make_loop_nest(realize, doms, ranges, preserve_unit_loops)
    subtrees.insert(pos, nest)
    new_target = dataclasses.replace(target, body=tir.SeqStmt(subtrees))
    body = replace_many(idx, {id(removed): (removed, None), id(target): (target, new_target)})
    sch.commit(block.func_name, body)
    forget_affine_flag(sch, block.func_name, realize.block.name)  # TVM recomputes the moved block's flag


def _not_same_scope(sch, prim, realize, target):
    return sch.error(prim, f"block {quoted_name(realize)} and loop '{target.loop_var.name}'",
                     "expected the block and the loop to be under the same block scope, and the loop not to be an "
                     "ancestor of the block", realize)


@primitive
def compute_at(sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
               index: int = -1) -> None:
    """Move a producer block under ``loop`` (a loop of its consumers), regenerating loops that
    produce exactly the region the consumers under the loop read per iteration.

    Requires: the block and the loop in the same scope, the loop not around the block already,
    a stage-pipeline scope, a complete or reduction block that is not an output block, and
    every consumer of the block under the loop. ``index``: -1 puts the block at the last legal
    position (just before the first consumer), -2 at the first (just after the last producer),
    n >= 0 at that position of the loop body if it is legal."""
    _compute_at_impl(sch, "compute_at", block, loop, preserve_unit_loops, index, True)


@primitive
def reverse_compute_at(sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                       index: int = -1) -> None:
    """Move a consumer block under ``loop`` (a loop of its producers), regenerating loops that
    consume exactly the region the producers under the loop write per iteration.

    Requires: the block and the loop in the same scope, the loop not around the block already,
    a stage-pipeline scope, a complete or reduction block, and every producer of the block
    under the loop. ``index`` as for `compute_at`."""
    _compute_at_impl(sch, "reverse_compute_at", block, loop, preserve_unit_loops, index, False)


takes_block_name("compute_at")
takes_block_name("reverse_compute_at")
