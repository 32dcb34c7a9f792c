"""The steps of a plan no schedule primitive does, done directly on the scheduled function
(`fixup`): the packing (``cache_read`` + ``compute_at`` would copy into a buffer of the
operand's full shape and layout, allocated once outside the parallel loop; the panel is a
compact buffer, transposed when the operand is, allocated per tile or per thread's
iteration), a register tile's accumulators and folded epilogue (``cache_write`` +
``reverse_compute_at`` would keep a buffer of the output's full shape), the shifted tiles'
iterator bindings and the nest run instead when a symbolic extent is below its tile, and the
guard that keeps the init from running when a symbolic reduce loop is empty.

Each nest's fixups are first collected as edits keyed by where they apply (`_Edits`: a loop
variable, a block name), then applied in one walk of the function (`_EditApplier`), since
the loops and blocks they apply to exist only in the scheduled function."""

from __future__ import annotations

import dataclasses
from typing import Callable

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator

from .accumulators import accumulator_tile, foldable_epilogue, reads_own_output
from .analysis import only_blocks
from .block_edits import load_swapper, rebinder
from .packing import packed_panel
from .plan import Plan
from .prepack import prepacked_panel
from .symbolic import shifted_start


def fixup(body, sch, fixups: list, small_nest: Callable):
    """The steps no primitive does: pack the planned read into a panel, keep a register
    tile's accumulators in a buffer of their own (`accumulator_tile`), guard the init.
    ``fixups``: what `apply_plan` recorded for each nest. ``small_nest(plan, func, epilogue,
    intermediate)``: the nest to run when a symbolic extent is below its tile
    (`driver.small_nest`, passed in because it schedules that nest with the driver)."""
    edits = _Edits(sch)
    for plan, brv, parts, new, init_top in fixups:
        if plan.guard is not None and init_top is not None:
            edits.guard_at[init_top] = plan.guard
        if plan.pack is not None or plan.register_tile:
            _fix_nest(edits, plan, brv, parts, new, small_nest)
    return _EditApplier(edits).visit_stmt(body)


class _Edits:
    """What the fixups change in the scheduled function, by where it applies."""

    def __init__(self, sch) -> None:
        self.sch = sch
        self.wrap_body: dict = {}  # loop var -> functions wrapping the loop's body, innermost first
        self.wrap_loop: dict = {}  # loop var -> functions wrapping the loop itself, innermost first
        self.guard_at: dict = {}  # loop var or init block name -> guard
        self.block_edits: dict = {}  # update block name -> functions rewriting its BlockRealize
        self.dropped_blocks: set = set()  # epilogues folded into a register tile's stores
        self.dropped_buffers: set = set()  # the intermediates they read
        self.fallbacks: dict = {}  # loop var -> (condition, nest run instead when it fails): `small_nest`

    def wrap_below(self, entry_count: int, new: list, fn) -> None:
        """Wrap what runs below the first ``entry_count`` loops of a nest."""
        if entry_count > 0:
            self.wrap_body.setdefault(self.sch.get(new[entry_count - 1]).loop_var, []).append(fn)
        else:
            self.wrap_loop.setdefault(self.sch.get(new[0]).loop_var, []).append(fn)

    def edit_block(self, name: str, edit) -> None:
        """Rewrite the BlockRealize of the block ``name`` with ``edit`` (after earlier edits)."""
        self.block_edits.setdefault(name, []).append(edit)


def _fix_nest(edits: _Edits, plan: Plan, brv, parts: dict, new: list, small_nest: Callable) -> None:
    """Record the fixups of one nest that packs a read or is a register tile."""
    sch = edits.sch
    realize = sch.resolve_block(brv)[1]
    binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    base, unshifted = _tile_origins(sch, plan, parts)
    if plan.shifted:
        values = {lp.iv.var: tir.Add(lp.dtype, base[lp.iv.var], sch.get(parts[(id(lp), "inner")]).loop_var)
                  for lp in plan.info if id(lp) in plan.shifted}
        binding.update(values)
        edits.edit_block(realize.block.name, rebinder(values))
    if plan.pack is not None and (id(plan.inner), "outer") in parts:
        plan.vec_outer = sch.get(parts[(id(plan.inner), "outer")]).loop_var
    # A weight's layout is settled before the nest for few rows is scheduled, which reads it.
    prepacked = prepacked_panel(plan, base) if plan.pack is not None and plan.prepack else None
    if plan.register_tile:
        _fix_register_tile(edits, plan, parts, new, realize, binding, base, unshifted, small_nest)
    if plan.pack is not None:
        _fix_packing(edits, plan, parts, new, realize, binding, base, prepacked)


def _tile_origins(sch, plan: Plan, parts: dict) -> tuple:
    """Iterator of each split loop -> its value at the split's innermost part 0 (the tile's
    origin; for a shifted tile, shifted back at the last one); and, for each loop of constant
    extent tiled with shifting, the origin before the shift (the tile's stores skip what lies
    before it, the outputs of the tile before)."""
    base, unshifted = {}, {}
    for lp, part, factor in plan.entries:
        if part == "outer":
            outer = sch.get(parts[(id(lp), "outer")])
            first = outer.loop_var
            if (id(lp), "chunk") in parts:
                chunk = sch.get(parts[(id(lp), "chunk")]).loop_var
                first = tir.Add(lp.dtype, tir.Mul(lp.dtype, chunk, outer.extent), first)
            base[lp.iv.var] = tir.Mul(lp.dtype, first, tir.IntImm(lp.dtype, factor))
            if id(lp) in plan.shifted:
                if lp.const_extent is not None:
                    unshifted[lp.iv.var] = base[lp.iv.var]
                base[lp.iv.var] = shifted_start(base[lp.iv.var], lp.extent, factor)
    return base, unshifted


def _fix_register_tile(edits: _Edits, plan: Plan, parts: dict, new: list, realize, binding: dict, base: dict,
                       unshifted: dict, small_nest: Callable) -> None:
    """The tile's accumulators around its reduce loops, the epilogue folded into their final
    stores (its own nest and intermediate buffer dropped), and, for shifted tiles of symbolic
    extent, the nest run when an extent is below its tile."""
    sch = edits.sch
    current = sch.func("main").body
    epilogue = None if plan.acc_from_output else foldable_epilogue(current, realize)
    if epilogue is not None and plan.shifted_symbolic() and reads_own_output(epilogue.block):
        epilogue = None  # overlapping tiles would apply it twice
    wrap, edit = accumulator_tile(plan, sch, parts, realize, binding, base, epilogue, unshifted)
    edits.edit_block(realize.block.name, edit)
    edits.wrap_below(plan.tile_at, new, wrap)
    if epilogue is not None:
        edits.dropped_blocks.add(epilogue.block.name)
        edits.dropped_buffers.add(realize.block.body.buffer)
    if plan.big_enough is not None:
        edits.fallbacks[sch.get(new[0]).loop_var] = (
            plan.big_enough, small_nest(plan, sch.func("main"), epilogue, realize.block.body.buffer))


def _fix_packing(edits: _Edits, plan: Plan, parts: dict, new: list, realize, binding: dict, base: dict,
                 prepacked=None) -> None:
    """The panel, allocated and filled at the packing point, read instead of the planned load
    (or ``prepacked``: the parameter itself, packed by the build, `prepack.prepacked_panel`)."""
    wrap, swap = prepacked if prepacked is not None else packed_panel(plan, binding, base)
    edits.edit_block(realize.block.name, load_swapper(*swap))
    if plan.register_tile:
        edits.wrap_below(plan.pack_at, new, wrap)
        return
    # The packing point: just below the last loop of the panel's origin (outer spatial
    # loops, the tile loop, the reduce split's outer loop).
    pack_at = 0
    for i, (lp, part, _) in enumerate(plan.entries):
        if part == "outer" or lp in plan.outer_s or lp in plan.unit:
            pack_at = i + 1
    assert pack_at > 0  # the tile loop's outer part comes first
    edits.wrap_below(pack_at, new, wrap)


class _EditApplier(IRMutator):
    """Applies the collected `_Edits` in one walk of the scheduled function."""

    def __init__(self, edits: _Edits) -> None:
        super().__init__()
        self.edits = edits

    def visit_stmt(self, s):
        e = self.edits
        if isinstance(s, tir.SeqStmt) and e.dropped_blocks:
            kept = [x for x in s.seq if not only_blocks(x, e.dropped_blocks)]
            s = tir.seq(kept) if len(kept) != len(s.seq) else s
        if isinstance(s, tir.Block) and e.dropped_buffers and any(b in e.dropped_buffers for b in s.alloc_buffers):
            s = dataclasses.replace(s, alloc_buffers=[b for b in s.alloc_buffers if b not in e.dropped_buffers])
        if isinstance(s, tir.BlockRealize) and s.block.name in e.block_edits:
            out = s
            for edit in e.block_edits[s.block.name]:
                out = edit(out)
        else:
            out = super().visit_stmt(s)
        if isinstance(out, tir.For):
            var = out.loop_var
            for fn in e.wrap_body.get(var, ()):
                out = dataclasses.replace(out, body=fn(out.body))
            for fn in e.wrap_loop.get(var, ()):
                out = fn(out)
            if var in e.fallbacks:
                out = tir.IfThenElse(e.fallbacks[var][0], out, e.fallbacks[var][1])
        key = out.loop_var if isinstance(out, tir.For) else (
            out.block.name if isinstance(out, tir.BlockRealize) else None)
        if key is not None and key in e.guard_at:
            # The original init never runs when a reduce loop is empty: keep it that way.
            out = tir.IfThenElse(e.guard_at[key], out)
        return out
