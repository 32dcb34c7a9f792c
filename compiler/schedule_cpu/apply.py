"""A nest's plan carried out with the schedule primitives of `compiler.schedule`, as a DLight
rule would be on a GPU (`apply_plan`): ``split`` (tiles, rows, the reduce split, block
tiles), ``reorder``, ``decompose_reduction`` at the nest's outermost loop (the init nest
follows the new loop order, without the reduce loops; blocks become ``<name>_init`` and
``<name>_update``), ``annotate`` (the ``tvms.*`` codegen hints), ``parallel`` and ``unroll``
(a tile's rows). What no primitive does is left to `fixup`.

One carrying-out for the plans of every rule but the dot product, so it lives apart from
them."""

from __future__ import annotations

from tvmscript.ir import tir

from ..lower_tir import INTERLEAVE_ANN, VECTORIZE_ANN
from .analysis import vectorizable
from .plan import Plan


def apply_plan(sch, plan: Plan, fixups: list) -> None:
    """Carry out one nest's plan with schedule primitives: split, reorder,
    decompose_reduction, annotate, parallel. The packing is recorded in ``fixups`` (see
    `fixup`): no primitive makes its layout (a compact ``reduce extent x tile`` panel allocated
    per tile, inside the parallel loop), nor the guard of an init whose reduce loop may be
    empty."""
    brv = sch.get_block(plan.block_name)
    parts = _split_loops(sch, plan, brv)
    new = [parts[(id(lp), part)] for lp, part, _ in plan.entries]
    if len(new) > 1 and plan.reordered:
        sch.reorder(*new)
    init_rv = None
    if plan.decompose:
        init_rv = sch.decompose_reduction(brv, new[0])
    _annotate(sch, plan, brv, new)
    if plan.par_index is not None:
        sch.parallel(new[plan.par_index])
    if plan.register_tile and plan.mr > 1:
        sch.unroll(parts[(id(plan.rows), "inner" if (id(plan.rows), "inner") in parts else "full")])
    if plan.register_tile and plan.lanes == 1:  # scalar accumulators: one statement each
        sch.unroll(parts[(id(plan.inner), "inner" if (id(plan.inner), "inner") in parts else "full")])
    init_top = _schedule_init(sch, plan, init_rv) if init_rv is not None else None
    if plan.pack is not None or plan.guard is not None or plan.register_tile:
        fixups.append((plan, brv, parts, new, init_top))


def _split_loops(sch, plan: Plan, brv) -> dict:
    """The nest's loops split as the plan's entries say: (id(loop), part) -> LoopRV, part
    ``"full"`` for a loop not split, else ``"outer"`` and ``"inner"`` (and ``"chunk"``
    outside them, for a loop first split into one chunk per thread)."""
    loops = sch.get_loops(brv)[-len(plan.info):]
    parts: dict = {}
    for lp, rv in zip(plan.info, loops):
        factor = next((f for l, part, f in plan.entries if l is lp and f is not None), None)
        chunks = plan.chunks.get(id(lp))
        if factor is None:
            parts[(id(lp), "full")] = rv
        elif chunks is not None:  # chunk x outer x inner
            parts[(id(lp), "chunk")], parts[(id(lp), "outer")], parts[(id(lp), "inner")] = sch.split(
                rv, [chunks, None, factor])
        else:
            parts[(id(lp), "outer")], parts[(id(lp), "inner")] = sch.split(rv, [None, factor])
    return parts


def _annotate(sch, plan: Plan, brv, new: list) -> None:
    """The plan's loop annotations on the new loops; the vectorize hints only where LLVM can
    vectorize the update (`vectorizable`)."""
    can_vectorize = vectorizable(sch.resolve_block(brv)[1].block.body)
    for (lp, part, _), rv in zip(plan.entries, new):
        for key, value in plan.annotations.get((id(lp), part), {}).items():
            if can_vectorize or key not in (VECTORIZE_ANN, INTERLEAVE_ANN):
                sch.annotate(rv, key, value)


def _schedule_init(sch, plan: Plan, init_rv):
    """Parallelize the init's nest when the plan says so (its outermost loop of more than one
    iteration); returns what `fixup` finds it by: its top loop's variable, or, without loops,
    its block's name."""
    n_init = sum(1 for lp, _, _ in plan.entries if lp.iv is not None and lp.kind == "S")
    init_loops = sch.get_loops(init_rv)[-n_init:] if n_init else []
    if plan.init_parallel:
        for rv in init_loops:
            if not tir.is_const_int(sch.get(rv).extent, 1):
                sch.parallel(rv)
                break
    return sch.get(init_loops[0]).loop_var if init_loops else sch.get(init_rv).name
