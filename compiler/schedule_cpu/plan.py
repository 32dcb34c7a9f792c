"""`Plan`: what the rules decide for one loop nest, and what carrying it out needs (the loops
after splitting, in their new order; the parallel loop; the init's nest; what is packed, and
the register tile's shape). One class for every rule but the dot product, because one
carrying-out (`apply.apply_plan`, then `fixup.fixup`) serves them all.

Also what the rules ask of a nest's loops: whether they do enough work to run in parallel,
whether a tile leaves more of a loop, and the guard that keeps an init from running when a
symbolic reduce loop is empty."""

from __future__ import annotations

import contextvars

from typing import Optional

from tvmscript.ir import tir

from .host import PARALLEL_MIN_WORK
from .nest import NestLoop


class Plan:
    """Decisions for one nest: loop order (a loop split in two appears twice: outer part
    first), the inner loop's tile, the reduce split, and the load packed into a panel."""

    def __init__(self) -> None:
        self.order: list = []
        self.tile: Optional[int] = None  # the innermost spatial loop split by this factor
        self.ksplit: Optional[int] = None  # the single reduce loop split by this factor
        self.pack = None  # the BufferLoad copied into a contiguous panel
        self.pack_rows = 0  # symbolic rows from which the (locality) panels run, else 0
        self.prepack = False  # the packed read is a layout-free parameter: the panels are its layout
        self.pack_strides: dict = {}  # its element stride along each iterator
        self.outer_s: list = []  # spatial loops above the packing point
        self.inner_s: list = []  # spatial loops below it (the panel is reused across them)
        self.splits: dict = {}  # id(loop) -> factor: other loops split in two (block tiles)
        self.annotations: dict = {}  # (id(loop), part) -> annotations of that new loop
        # Filled in by `_finish_loop_tile`:
        self.info: list = []  # the nest's loops (`NestLoop`), outermost first, as they were
        self.inner: Optional[NestLoop] = None  # the loop made innermost (tiled when `tile` is set)
        self.others_r: list = []  # the non-trivial reduce loops other than `inner`
        self.unit: list = []  # the extent-1 loops
        self.block_name: str = ""  # the nest's block, as schedules find it
        self.entries: list = []  # (loop, part, factor): the loops after splitting, in order
        self.reordered = False  # whether `entries` differ from `info` (split or reordered)
        self.par_index: Optional[int] = None  # the entry made T.parallel
        self.decompose = False  # whether the init moves into a nest of its own
        self.init_parallel = False  # whether that nest's outer loop is T.parallel too
        self.guard = None  # a condition the init nest runs under (symbolic reduce extents)
        # Register tiles (`plan_register_tile`):
        self.register_tile = False
        self.lanes = 1  # vector width of the tile's vector loop (`inner`)
        self.rows: Optional[NestLoop] = None  # the loop whose iterations are the tile's rows
        self.mr = 1  # rows in the tile
        self.pack_at = 0  # entries before the packing point
        self.tile_at = 0  # entries before the tile (the reduce loops and the tile's own loops)
        self.acc_from_output = False  # accumulators start from the output (else from the init)
        self.pack_upfront = False  # the whole operand is packed before the nest, in parallel
        self.chunks: dict = {}  # id(loop) -> parallel chunks its outer part is split into first
        self.vec_outer = None  # the loop over the vector loop's tiles, once split (a Var)
        self.ebytes = 4  # bytes of an output element
        # Symbolic extents (`NestLoop.shiftable`): id(loop) -> static tile size of each loop tiled
        # with the last tile shifted back; the nest they need (extent >= tile for each) and the
        # nest as it was, run otherwise (`shifted_start`).
        # A loop of constant extent its tile does not divide is tiled the same way (`_pick_tile_shape`):
        # no fallback nest, and the shifted tile's stores skip the outputs of the tile before it.
        self.shifted: dict = {}
        self.big_enough = None
        self.original = None

    def shifted_symbolic(self) -> bool:
        """Whether a loop of symbolic extent is tiled with its last tile shifted back: its
        overlapping tiles store the same outputs twice, so they must start from the init value."""
        return any(lp is not None and id(lp) in self.shifted and lp.const_extent is None
                   for lp in (self.inner, self.rows))  # the loops a register tile shifts


# Set while planning the nests under a loop that already runs in parallel (the blocks of rows
# of `row_fusion`): their own loops stay serial, since nested parallel loops would only add
# the threads' start-up to every block.
under_parallel = contextvars.ContextVar("under_parallel", default=False)


def worth_parallel(info) -> bool:
    """Whether a nest of these loops does enough work to run in parallel (a symbolic extent
    may be large: yes); never under a parallel loop (`under_parallel`)."""
    if under_parallel.get():
        return False
    work = 1
    for lp in info:
        if lp.const_extent is None:
            return True
        work *= lp.const_extent
    return work >= PARALLEL_MIN_WORK


def split_by(lp: NestLoop, factor: int) -> bool:
    """Whether a tile of ``factor`` iterations leaves more of ``lp`` (always, if symbolic)."""
    return lp.const_extent is None or factor < lp.const_extent


def reduce_guard(reduce_loops: list):
    """The condition that every reduce loop of symbolic extent runs at least once (None when
    all are constant): the original init never runs when one is empty, and neither may the
    init's own nest or a tile's accumulators."""
    guard = None
    for lp in reduce_loops:
        if lp.const_extent is None:
            cond = tir.GT("bool", lp.extent, tir.IntImm(lp.extent.dtype, 0))
            guard = cond if guard is None else tir.And("bool", guard, cond)
    return guard
