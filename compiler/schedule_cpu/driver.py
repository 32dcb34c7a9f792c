"""The driver of the default CPU schedule (`default_schedule`): it prepares a function
(unique block names, affine symbolic indices, elementwise stages inlined), tries the rules on
each loop nest in order (`plan_nest`), and carries out the plans (`apply_plan`, then
`fixup`), as DLight's `ApplyDefaultSchedule` does with its rules on a GPU."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator

from ..schedule import Schedule, ScheduleError
from ..schedule.common import with_unique_block_names
from .affine_indices import AffineSymbolicIndices
from .analysis import only_blocks
from .apply import apply_plan
from .attention import flash_attention
from ..schedule_choices import applying
from .balance import collapse_parallel
from .block_edits import renamed_blocks
from .dot_product import DotProduct, plan_dot_product
from .fixup import fixup
from .inline import inline_elementwise
from .loop_tile import plan_loop_tile
from .merge_dims import merge_contiguous_loops
from .nest import match_nest
from .plan import Plan, under_parallel
from .prefetch import prefetch_next_blocks
from .prepack import PACKED_LAYOUTS_ATTR, frozen, prepacking, with_packed_params
from .register_tile import finish_register_tile, plan_register_tile
from .row_fusion import fuse_row_stages
from .strided_window import StridedWindow, plan_strided_window
from .symbolic import no_locality_pack, symbolic_extents_small
from .winograd import winograd_convolutions


SCHEDULED_ATTR = "tvms.default_scheduled"
NO_DEFAULT_SCHEDULE = "tvms.no_default_schedule"  # scheduled already (a tuner's candidate): left as it is
_TILE_DTYPES = ("float32", "float64", "int32", "int64")  # register tiles: types LLVM vectorizes well


def default_schedule(func: tir.PrimFunc) -> tir.PrimFunc:
    """``func`` with every matching loop nest rescheduled (see the package docstring)."""
    if func.attrs.get("tvms.lowered") or func.attrs.get(SCHEDULED_ATTR) or func.attrs.get(NO_DEFAULT_SCHEDULE):
        return func

    body = flash_attention(func)  # the whole function, when it is an attention chain
    if body is not None:
        return _scheduled(func, tir.BlockRealize([], tir.IntImm("bool", 1), tir.Block("root", [], [], [], body)))
    body = with_unique_block_names(func.body)  # schedules find blocks by name
    body = AffineSymbolicIndices().visit_stmt(body)
    body = inline_elementwise(func, body)
    body = AffineSymbolicIndices(static=True).visit_stmt(body)  # the inlined stages' indices
    # Weights bound as constants: packed by the build (`prepack`); a tuner's picks (`schedule_choices`).
    with prepacking(func), applying(func):
        body = winograd_convolutions(func, body)  # only where a tuner's choices say so
        body = merge_contiguous_loops(body)
        body = fuse_row_stages(body)
        body = collapse_parallel(schedule_nests(func, body))
        buffer_map, body, attrs = with_packed_params(func, body)
    packed = [buffer_map[func.params[i]] for i in attrs.get(PACKED_LAYOUTS_ATTR, {})]
    body = prefetch_next_blocks(body, packed)
    return _scheduled(func, body, buffer_map, attrs)


def _scheduled(func: tir.PrimFunc, body, buffer_map=None, attrs=None) -> tir.PrimFunc:
    """``func`` with the scheduled ``body`` (and its parameters' packed layouts, `prepack`),
    marked scheduled."""
    attrs = dict(func.attrs if attrs is None else attrs)
    buffer_map = func.buffer_map if buffer_map is None else buffer_map
    attrs[SCHEDULED_ATTR] = True
    return tir.PrimFunc(func.params, buffer_map, body, func.ret_type, attrs, func.private, func.span)


def schedule_nests(func: tir.PrimFunc, body, symbolic: bool = True):
    """``body`` (of ``func``) with each loop nest planned (`plan_nest`) and the plans
    carried out. ``symbolic``: register tiles may tile loops of symbolic extent
    (`plan_register_tile`)."""
    planner = _NestPlanner(symbolic)
    body = planner.visit_stmt(body)  # dot-product nests are rewritten at once (`DotProduct`)
    if planner.plans:
        body = _carry_out(func, body, planner.plans)
    return body


class _NestPlanner(IRMutator):
    """Plans each loop nest, outermost loop first (`plan_nest`), collecting the plans in
    `plans`; a dot product is built in place at once."""

    def __init__(self, symbolic: bool) -> None:
        super().__init__()
        self.symbolic = symbolic
        self.plans: list = []

    def visit_stmt(self, s):
        if isinstance(s, tir.For) and s.kind == "parallel":
            inside = under_parallel.set(True)
            try:
                return super().visit_stmt(s)
            finally:
                under_parallel.reset(inside)
        if isinstance(s, tir.For):
            plan = plan_nest(s, self.symbolic)
            if isinstance(plan, (DotProduct, StridedWindow)):
                return plan.build()
            if plan is not None:
                self.plans.append(plan)
                return s
        return super().visit_stmt(s)


def plan_nest(top: tir.For, symbolic: bool = True):
    """The plan for the nest under ``top``: the first rule that takes it, in order, the
    register tile (a reduction with a loop to vectorize), the dot product (a float sum with
    none), the strided window (a pooling window read with a stride along the outputs), the
    loop tile (the rest); or None when the nest is not of the form the rules take
    (`match_nest`) or no rule would change it. ``symbolic``: as for `schedule_nests`."""
    nest = match_nest(top)
    if nest is None:
        return None
    if nest.reduce_loops and nest.out_buf.dtype in _TILE_DTYPES:
        tile = plan_register_tile(nest, symbolic=symbolic and nest.init is not None)
        if tile is None or tile.lanes == 1:  # no spatial loop to vectorize
            dot = plan_dot_product(nest, symbolic)
            if dot is not None:
                return dot
            window = plan_strided_window(nest)
            if window is not None:
                return window
        if tile is not None:
            return finish_register_tile(tile, nest)
    return plan_loop_tile(nest)


def _carry_out(func: tir.PrimFunc, body, plans: list):
    """``body`` with each nest's plan carried out by schedule primitives (see `apply_plan`)."""
    sch = Schedule(tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs),
                                func.private, func.span))
    fixups: list = []
    for plan in plans:
        before, n_fixups = sch.func("main"), len(fixups)
        try:
            apply_plan(sch, plan, fixups)
        except ScheduleError:  # a nest the primitives refuse: leave it as it was
            sch.replace_func("main", before)
            del fixups[n_fixups:]
    return fixup(sch.func("main").body, sch, fixups, small_nest)


def small_nest(plan: Plan, func: tir.PrimFunc, epilogue, intermediate):
    """The nest run when a symbolic extent is smaller than its tile (shifted tiles need one
    whole tile): the nest as it was (and the epilogue folded into the tiles, with the
    intermediate buffer between them allocated here), scheduled without symbolic tiles and
    with symbolic extents taken as small (`symbolic_extents_small`: a decode step's single
    row gets the matrix-vector schedule its static twin gets), its blocks renamed
    ``<name>_small``."""
    stmts = [plan.original]
    if epilogue is not None:
        stmts.append(next(x for x in func.body.block.body.seq if only_blocks(x, {epilogue.block.name})))
    scope = tir.Block(plan.block_name + "_scope", [], [], [], tir.seq(stmts),
                      alloc_buffers=[intermediate] if epilogue is not None else [])
    small = tir.PrimFunc(func.params, func.buffer_map, tir.BlockRealize([], tir.IntImm("bool", 1), scope),
                         func.ret_type, dict(func.attrs), func.private, func.span)
    if plan.pack_rows:
        # Below the rows the panels need: the same tiles reading the operand in place, and,
        # below a tile, the nest for a few rows (that schedule's own fallback).
        unpacked = no_locality_pack.set(True)
        try:
            with frozen():  # a packed weight keeps the layout this nest's tiles gave it
                return renamed_blocks(schedule_nests(small, small.body, symbolic=True), "_unpacked")
        finally:
            no_locality_pack.reset(unpacked)
    known_small = symbolic_extents_small.set(True)
    try:
        with frozen():
            return renamed_blocks(schedule_nests(small, small.body, symbolic=False), "_small")
    finally:
        symbolic_extents_small.reset(known_small)
