"""The register tile: a reduction scheduled as the micro-kernel of a matrix multiply, when a
spatial loop can be vectorized (`plan_register_tile`).

1. the vector loop (`_pick_vector_loop`): one whose extent is a multiple of the vector width
   (or of half or a quarter of it), along which every read is invariant (broadcast),
   contiguous, or, for one read at most, packed: copied into a panel (``reduce extents x
   tile``) contiguous along it. Convolutions (NCHW) vectorize over output channels, the
   weights packed; matrix products over output columns; the output's stride along the loop
   does not matter;
2. the rows (`_pick_row_loop`): another spatial loop along which the vector operands are
   invariant (a convolution's output width, a product's rows), unrolled, each row its own
   accumulators; ``rows x vectors`` fill about three quarters of the vector registers
   (`_pick_tile_shape`);
3. the accumulators live in a small ``<output>_local`` buffer around the reduce loops (which
   keep their order): started from the init value, stored once at the end. LLVM keeps them
   in registers (the rows unrolled, the vector loop vectorized at the width with one
   iteration). An elementwise stage reading the result (bias, ReLU, GELU, a residual add) is
   computed in those final stores instead of a pass of its own (`accumulators`, built after
   the schedule primitives have run);
4. the loop order and the parallel loop (`_order_register_tile`): the vector loop's tiles
   outermost and parallel, each thread packing its panels, when they share evenly among the
   threads (`parallel_threads`); else the first other spatial loop goes outermost in
   parallel and the operand is packed before the nest by all threads. A panel over
   `packed_panel_bytes` has its first reduce loop split (the output then holds partial sums
   between the parts, initialized by a nest of its own, TVM's ``decompose_reduction``).

Without a loop to vectorize, a tile of scalar accumulators along the innermost spatial loop
(`_scalar_tile`) still runs several dependent chains side by side, when the dot product does
not take the nest.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir

from ..lower_tir import INTERLEAVE_ANN, VECTORIZE_ANN
from .analysis import pick_tile
from ..schedule_choices import ROWS, TILE_SHAPE, choose
from .host import VECTOR_REGISTERS_PER_TILE, packed_panel_bytes, parallel_threads, vector_bytes, vector_registers
from .nest import Nest, extent_product
from .packing import pack_reuse
from .plan import Plan, reduce_guard, split_by, worth_parallel
from .prepack import prepackable, prepacked_tile
from .symbolic import LOCALITY_PACK_ROWS, no_locality_pack


SYMBOLIC_VECTORS = 4  # vectors a register tile's row takes along a loop of symbolic extent
SYMBOLIC_ROWS = 8  # rows picked from for a row loop of symbolic extent (`_pick_tile_shape`)


def plan_register_tile(nest: Nest, symbolic: bool = False) -> Optional[Plan]:
    """Plan a reduction as a matrix-multiply micro-kernel: a tile of ``rows x nv`` vectors of
    outputs is accumulated in registers over the whole reduction (see `_pick_vector_loop`,
    `_pick_row_loop`, `_pick_tile_shape`), then stored once; the loop order is settled by
    `_order_register_tile`. Returns None when no spatial loop can be vectorized (the caller
    falls back to the one-dimensional tile).

    ``symbolic``: the vector and row loops may have symbolic extents (`NestLoop.shiftable`):
    they are tiled like the others, `SYMBOLIC_VECTORS` vectors by rows picked as for
    `SYMBOLIC_ROWS`, and the last tile, which would cross the extent, is shifted back to end
    at it (`shifted_start`): it recomputes a few outputs of the tile before it, by the same
    sequence of operations, so results do not change. Only for reductions with an init: a
    tile starting from the output's value would add its terms twice where tiles overlap."""
    info, nontrivial, ebytes = nest.info, nest.nontrivial, nest.ebytes
    rhs_loads, accesses = nest.rhs_loads, nest.accesses
    spatial = [lp for lp in nontrivial if lp.kind == "S"]
    reduce_ = [lp for lp in nontrivial if lp.kind == "R"]
    loads = list(zip(rhs_loads, accesses[1:]))
    choice = _pick_vector_loop(spatial, reduce_, nontrivial, loads, accesses[0], rhs_loads, ebytes, symbolic)
    if choice is None:
        return None
    vec, lanes, packed = choice
    locality = False  # the pack is only for locality (`_locality_pack`), not to vectorize
    if lanes == 1:
        rows, nv, mr = None, _scalar_tile(vec.const_extent), 1
    else:
        rows = _pick_row_loop(spatial, vec, loads, packed, symbolic)
        if packed is None and not no_locality_pack.get():
            packed = _locality_pack(vec, rows, reduce_, nontrivial, loads, rhs_loads)
            locality = packed is not None
        nvecs = vec.const_extent // lanes if vec.const_extent is not None else SYMBOLIC_VECTORS
        row_extent = (rows.const_extent or SYMBOLIC_ROWS) if rows is not None else 1
        shift_rows = rows is not None and rows.const_extent is not None and rows.shifts_back
        # Whole vectors in the loop: tiles of a divisor of them, as many per thread; else the
        # last tile is shifted back anyway, and any count of vectors will do.
        shift_vecs = vec.const_extent / lanes if vec.const_extent is not None and vec.const_extent % lanes else None
        nv, mr = _pick_tile_shape(nvecs, row_extent, shift_rows, shift_vecs)
        given = prepacked_tile(packed[0]) if packed is not None else None
        if given is not None and given % lanes == 0:  # a fallback nest reads the panels given
            nv = given // lanes
            mr = min(mr, max(1, (vector_registers() * 3 // 4) // nv))
        if rows is not None and rows.const_extent is None and mr == 1:
            rows = None  # one row along a symbolic loop: it stays outside the tile
    plan = Plan()
    plan.register_tile = True
    plan.lanes, plan.tile, plan.rows, plan.mr = lanes, nv * lanes, rows, mr
    plan.inner, plan.others_r = vec, reduce_
    plan.ebytes = ebytes
    if vec.const_extent is None or vec.const_extent % plan.tile:
        plan.shifted[id(vec)] = plan.tile
    if rows is not None and (rows.const_extent is None or rows.const_extent % mr):
        plan.shifted[id(rows)] = mr
    if packed is not None:
        plan.pack, plan.pack_strides = packed
        # A weight bound as a constant is packed once, when the build binds it (`prepack`).
        plan.prepack = prepackable(plan.pack, nontrivial)
        # Along rows of symbolic count, panels packed on each call need that many rows to pay
        # off: below them the nest runs without (`driver.small_nest`).
        plan.pack_rows = LOCALITY_PACK_ROWS if locality and not plan.prepack and rows is not None \
            and rows.const_extent is None else 0
    plan.outer_s = [lp for lp in spatial if lp is not vec and lp is not rows and plan.pack is not None
                    and plan.pack_strides.get(lp.iv.var, 0)]
    plan.inner_s = [lp for lp in spatial if lp is not vec and lp not in plan.outer_s]
    plan.unit = [lp for lp in info if tir.is_const_int(lp.extent, 1)]
    if lanes > 1:
        plan.annotations[(id(vec), "inner" if split_by(vec, plan.tile) else "full")] = {
            VECTORIZE_ANN: lanes, INTERLEAVE_ANN: nv}
    return plan


def _pick_vector_loop(spatial, reduce_, nontrivial, loads, out_st, rhs_loads, ebytes, symbolic: bool = False):
    """The spatial loop to vectorize, its vector width, and the read to pack for it: a loop
    whose constant extent is a multiple of the width, along which every read is invariant
    (broadcast), contiguous, or, for at most one read, packable into a panel contiguous along
    it (it must depend on every reduce loop and be reused across other spatial loops).
    Preferred: the widest vectors, then a multiple of the width (or nearly, `WELL_COVERED`),
    then a weight packed at compile time over a long reduction (`LONG_REDUCTION`), then a
    contiguous output (vector stores), then no packing, then the innermost loop.
    Narrower vectors (half, quarter width) are tried only when no loop fits the widest. A
    loop of constant extent that is not a multiple fits when it holds a vector and its last
    tile can be shifted back (`NestLoop.shifts_back`: a 1000-class layer's columns), after
    the multiples. With ``symbolic``,
    a loop of symbolic extent (`NestLoop.shiftable`) fits any width, as a multiple does,
    after the loops of constant extent."""
    full = max(1, vector_bytes() // ebytes)
    lanes = full
    while lanes >= 4:
        best = None
        for pos, lp in enumerate(spatial):
            extent = lp.const_extent
            if extent is None and not (symbolic and lp.shiftable):
                continue
            if extent is not None and extent % lanes and (extent < lanes or not lp.shifts_back):
                continue
            strided = [(ld, st) for ld, st in loads if st.get(lp.iv.var, 0) not in (0, 1)]
            if len(strided) > 1:
                continue
            if strided and not _panel_packable(strided[0], lp, reduce_, nontrivial, rhs_loads, 2):
                continue
            fits = extent is None or _covered(extent, lanes) >= WELL_COVERED
            key = (fits, _long_prepacked(strided, reduce_, nontrivial), out_st.get(lp.iv.var, 0) == 1,
                   not strided, extent is not None, pos)
            if best is None or key > best[0]:
                best = (key, lp, strided[0] if strided else None)
        if best is not None:
            return best[1], lanes, best[2]
        lanes //= 2
    # No loop to vectorize (a reduction along rows: a matrix-vector product with the matrix
    # in rows, a softmax's row maximum): a tile of scalar accumulators along the innermost
    # spatial loop still turns one long chain of dependent adds into several independent
    # ones, which the core runs side by side.
    for lp in reversed(spatial):
        if lp.const_extent is not None and _scalar_tile(lp.const_extent) is not None:
            return lp, 1, None
    return None


# Multiply-adds into each accumulator above which a loop reading a weight the build packs
# (`prepackable`) is vectorized rather than one along which the output is contiguous: its
# stores go to strided addresses, a lane at a time (16 stores for a vector of 16), which a
# reduction this long amortizes (1/8 of its multiply-adds' time at most); the contiguous
# loop's tiles instead pack the activations on every call (`_locality_pack`) or cover a small
# map's pixels with partial vectors. mobilenet_v2's projection convolutions (1x1, 144 to 960
# input channels, 14x14 and 28x28 maps) took 0.70-0.94x the time vectorized over output
# channels; its expansions (16 to 96 input channels) 1.09-2.8x, their stores unamortized.
LONG_REDUCTION = 128


def _long_prepacked(strided: list, reduce_: list, nontrivial: list) -> bool:
    """Whether the one strided read of a candidate vector loop (``strided``: none or one
    ``(load, strides)``) is a weight packed at compile time, summed over at least
    `LONG_REDUCTION` terms."""
    if not strided or not prepackable(strided[0][0], nontrivial):
        return False
    terms = 1
    for lp in reduce_:
        terms *= lp.const_extent or LONG_REDUCTION
    return terms >= LONG_REDUCTION


def _scalar_tile(extent: int) -> Optional[int]:
    """Scalar accumulators in a tile without vectors: the largest divisor of ``extent`` up to
    16 (FMA latency x throughput of two pipes is 8 to 10 in flight), at least 4."""
    best = max(d for d in range(1, min(extent, 16) + 1) if extent % d == 0)
    return best if best >= 4 else None


def _panel_packable(load, vec, reduce_, nontrivial, rhs_loads, min_reuse: int) -> bool:
    """Whether ``load`` can be copied into a ``reduce extents x tile`` panel: it depends on
    every reduce loop (each is a panel axis), all of constant extent, and the panel is reused
    at least ``min_reuse`` times."""
    ld, st = load
    if any(lp.const_extent is None or not st.get(lp.iv.var, 0) for lp in reduce_):
        return False
    if prepackable(ld, nontrivial):  # packed once by the build: any reuse pays
        return pack_reuse(ld, st, vec, nontrivial, rhs_loads) >= 1
    return pack_reuse(ld, st, vec, nontrivial, rhs_loads) >= min_reuse


def _pick_row_loop(spatial, vec, loads, packed, symbolic: bool = False):
    """The spatial loop whose iterations are the tile's rows (unrolled, each its own
    accumulators): one along which the vector operands (contiguous or packed along the vector
    loop) are invariant, so each vector load serves every row, preferring the innermost. The
    packed panel must not depend on it (it is packed outside the tile). With ``symbolic``, a
    loop of symbolic extent (`NestLoop.shiftable`) may be the rows."""
    vector_reads = [st for _, st in loads if st.get(vec.iv.var, 0) == 1]
    if packed is not None:
        vector_reads.append(packed[1])
    ranked = []
    for pos, lp in enumerate(spatial):
        if lp is vec or (lp.const_extent is None and not (symbolic and lp.shiftable)) \
                or lp.const_extent is not None and lp.const_extent < 2:
            continue
        if packed is not None and packed[1].get(lp.iv.var, 0):
            continue
        ranked.append(((all(not st.get(lp.iv.var, 0) for st in vector_reads), pos), lp))
    ranked.sort(key=lambda kl: kl[0], reverse=True)
    return choose(ROWS, [lp for _, lp in ranked]) if ranked else None   # the others: a tuner's (`schedule_choices`)


def _locality_pack(vec, rows, reduce_, nontrivial, loads, rhs_loads):
    """A contiguous vector operand worth packing anyway: reused across other spatial loops
    (at least 4 times) and not depending on the row loop; its rows lie a whole row of the
    matrix apart (often 4 KiB or more), so they compete for a few cache sets. None if none."""
    best = None
    for ld, st in loads:
        if st.get(vec.iv.var, 0) != 1 or (rows is not None and st.get(rows.iv.var, 0)):
            continue
        if not _panel_packable((ld, st), vec, reduce_, nontrivial, rhs_loads, 4):
            continue
        reuse = pack_reuse(ld, st, vec, nontrivial, rhs_loads)
        if best is None or reuse > best[0]:
            best = (reuse, (ld, st))
    return best[1] if best else None


def _pick_tile_shape(nvecs: int, row_extent: int, shift_rows: bool = False, shift_vecs=None) -> tuple:
    """``(nv, mr)``: vectors per row (a divisor of ``nvecs``, at most 4) and rows of the
    register tile. Most accumulators within three quarters of the vector registers (the rest
    hold the operands), then fewest loads per multiply-add (``nv`` vector loads and ``mr``
    broadcasts feed ``nv * mr`` of them).

    Rows divide ``row_extent``, unless ``shift_rows`` and no divisor gives a tile of even
    two thirds the work (`SHIFTED_ROWS_GAIN`): then any count up to it will do, the last tile
    shifted back to end at the extent (`shifted_start`). A prime extent (ViT's 197 tokens)
    would otherwise get one row, a tile of ``nv`` accumulators that each load feeds once;
    the shifted tile recomputes at most ``mr - 1`` rows (its stores skip them,
    `accumulators`), which counts against it here. Likewise ``shift_vecs``, the vector
    loop's extent in vectors when its last tile is shifted anyway (not a whole number of
    vectors): then ``nv`` need not divide ``nvecs`` (the whole vectors in it)."""
    exact = _best_tile_shape(nvecs, row_extent, False, shift_vecs)
    best = exact
    if shift_rows:
        shifted = _best_tile_shape(nvecs, row_extent, True, shift_vecs)
        best = shifted if shifted[0][0] >= SHIFTED_ROWS_GAIN * exact[0][0] else exact
    # The other shapes a tuner may pick instead (`schedule_choices`): any that fit the registers.
    others = sorted(_tile_shapes(nvecs, row_extent, shift_rows, shift_vecs, vector_registers()), reverse=True)
    return choose(TILE_SHAPE, [(best[1], best[2])] + [(nv, mr) for _, nv, mr in others if (nv, mr) != best[1:]])


# A loop of constant extent whose vectors, the last shifted back, repeat less than this much
# of the work counts as a multiple of the width (`_pick_vector_loop`): a 14 x 14 map's 196
# pixels (94%) but not a row of 56 (88%), which measured slower than the channels' vectors.
WELL_COVERED = 0.9

# How much more work per tile shifted rows must do than the best tile whose rows divide the
# extent: a shifted tile repeats rows, and its larger tile measured slower on 3x3
# convolutions whose widths (14, 28, 56) divisors cover well (x1.34 to x1.4 the work). A
# 1024-row matmul on AVX2 (16 registers) takes 6 shifted rows x 2 vectors (x1.497) over 4 x 2:
# 244 instead of 216 GFLOP/s; on AVX-512, 6 x 4 over 4 x 4 measured the same.
SHIFTED_ROWS_GAIN = 1.45


def _best_tile_shape(nvecs: int, row_extent: int, shift_rows: bool, shift_vecs) -> tuple:
    """``(key, nv, mr)`` of the best tile (see `_pick_tile_shape`); ``key[0]``: the
    multiply-adds per step that are not repeated work."""
    shapes = _tile_shapes(nvecs, row_extent, shift_rows, shift_vecs, vector_registers() * 3 // 4)
    return max(shapes, key=lambda shape: shape[0], default=None)   # the first of equal keys


def _tile_shapes(nvecs: int, row_extent: int, shift_rows: bool, shift_vecs, budget: int) -> list:
    """``(key, nv, mr)`` of each tile of at most ``budget`` accumulators (see `_best_tile_shape`)."""
    registers = vector_registers()
    nv_limit = VECTOR_REGISTERS_PER_TILE if row_extent <= 1 else 4
    out = []
    for nv in range(1, min(nvecs, nv_limit) + 1):
        if nvecs % nv and shift_vecs is None:
            continue
        # The accumulators, a row's nv operand vectors and a broadcast in registers at once:
        # with AVX2's 16, 3 x 4 vectors would spill, 6 x 2 does not.
        rows_fit = min(budget // nv, (registers - nv - 1) // nv)
        for mr in range(1, min(row_extent, rows_fit) + 1):
            if row_extent % mr and not shift_rows:
                continue
            covered = _covered(row_extent, mr) * _covered(shift_vecs or nvecs, nv)
            key = (round(nv * mr * covered, 6), round(covered, 6), -(nv + mr) / (nv * mr))  # then less repeated
            out.append((key, nv, mr))
    return out


def _covered(extent, tile: int) -> float:
    """The fraction of the work of tiles of ``tile`` over ``extent`` that is not repeated
    (1 when the tile divides it; the last tile, shifted back, repeats part of the one
    before)."""
    tiles = -(-extent // tile)
    return extent / (tiles * tile)



def _order_register_tile(plan: Plan, parallel: bool) -> None:
    """The loop order of a register tile (``plan.entries``), its parallel loop, and where the
    panel is packed. Innermost: the reduce loops, then the tile, rows (unrolled) x vectors.
    Outside, one of two orders:

    * the spatial loops the panel depends on and the vector loop's tiles first, each thread
      packing the panels of its own iterations there, then the other spatial loops (the panel
      is reused across them): when the first of those outer loops shares evenly among the
      threads (`parallel_threads`: as many iterations or a multiple, or at least four per
      thread), or nothing runs in parallel. A panel larger than `packed_panel_bytes` has the
      first reduce loop split, the outer part above the other spatial loops, so the part of
      the panel they reuse stays in L2;
    * otherwise (a few vector tiles: few output channels, a narrow matrix) the first other
      spatial loop goes outermost and runs in parallel, and the whole operand is packed
      before the nest, by all threads (`pack_upfront`): one parallel region to pack, one to
      compute, instead of two per vector tile. When that loop is the tile rows' outer loop,
      it is split into one chunk per thread first, and the vector tiles go between the
      chunk and the rest of it: each panel then serves a whole chunk of rows from L2. Not
      for a weight packed at compile time that is larger than the output (`_weight_bound`):
      its few tiles stay outermost, so that each thread reads only its share of it.

    Without a panel (a depthwise convolution reads its input in place), fewer than four
    vector tiles per thread give way to an inner spatial loop with more: it goes outermost,
    in parallel. Two vector tiles over a row of 28 outputs (the second shifted back) split
    every row between the threads, which wrote the same cache lines; by channels instead,
    mobilenet_v2's stride-1 depthwise convolutions took 0.49-0.94x their time (the narrower
    the rows, the more they gained), the model 0.95x."""
    vec, rows, mr = plan.inner, plan.rows, plan.mr
    vec_split = split_by(vec, plan.tile)
    row_split = rows is not None and split_by(rows, mr)
    above = [(lp, "full", None) for lp in plan.outer_s] + ([(vec, "outer", plan.tile)] if vec_split else [])
    below = []
    for lp in plan.inner_s:
        if lp is rows:
            if row_split:
                below.append((lp, "outer", mr))
        else:
            below.append((lp, "full", None))

    first_above = next((e for e in above if _entry_extent(e) != 1), None)
    first_below = next((e for e in below if _entry_extent(e) != 1), None)
    threads = parallel_threads()
    if parallel and plan.pack is None and _few(first_above, threads) and not _few(first_below, threads):
        # No panel for the threads to pack their own share of (see the docstring).
        below.remove(first_below)
        above.insert(0, first_below)
        first_above = first_below
    ext = _entry_extent(first_above) if first_above is not None else 1
    wide = ext is None or ext >= threads and (ext % threads == 0 or ext >= 4 * threads) \
        or parallel and _weight_bound(plan, first_above)
    plan.pack_upfront = parallel and not wide and first_below is not None and vec.const_extent is not None
    if plan.pack is not None and not plan.pack_upfront and not plan.shifted_symbolic():
        plan.ksplit = _panel_split(plan)
    entries = [(lp, "full", None) for lp in plan.unit]
    if plan.pack_upfront:
        n = _entry_extent(first_below)
        if first_below[1] == "outer" and n is not None and n > threads and n % threads == 0:
            # The tile rows' loop: each thread takes one contiguous chunk of them, and goes
            # through the vector tiles inside it, so a tile's panel serves the whole chunk.
            lp = first_below[0]
            plan.chunks[id(lp)] = threads
            entries += [(lp, "chunk", None)] + above
        else:
            below.remove(first_below)
            entries += [first_below] + above
        plan.par_index = len(plan.unit)
    else:
        entries += above
        if plan.ksplit:
            entries.append((plan.others_r[0], "outer", plan.ksplit))
        plan.par_index = None
        if parallel:
            first = first_above if first_above is not None else first_below
            if first is not None and first[0].kind == "S":
                plan.par_index = entries.index(first) if first in entries else len(entries) + below.index(first)
    plan.pack_at = len(plan.unit) if plan.pack_upfront else len(entries)
    entries += below
    plan.tile_at = len(entries)
    for lp in plan.others_r:
        split = plan.ksplit and lp is plan.others_r[0]
        entries.append((lp, "inner", plan.ksplit) if split else (lp, "full", None))
    if rows is not None:
        entries.append((rows, "inner", mr) if row_split else (rows, "full", None))
    entries.append((vec, "inner", plan.tile) if vec_split else (vec, "full", None))
    plan.entries = entries


def _weight_bound(plan: Plan, first_above) -> bool:
    """Whether a few vector tiles still go outermost and in parallel: their operand is a
    weight packed at compile time (no panels to pack on each call) larger than the output, so
    that each thread reads only its own tiles' share of it rather than all of it (split by
    rows, mobilenet_v2's 960 x 320 1x1 convolution over 7 x 7 pixels read 1.2 MB per thread
    for 63 KB of output). `balance.collapse_parallel` then evens out the few tiles with the
    rows inside them."""
    if not plan.prepack or first_above is None or first_above[0] is not plan.inner:
        return False
    weight = plan.ebytes * extent_product([plan.inner] + plan.others_r, 0)
    output = plan.ebytes * extent_product(plan.outer_s + plan.inner_s + [plan.inner], 0)
    return weight > output > 0


def _few(entry, threads: int) -> bool:
    """Whether an entry's loop has fewer than four iterations per thread (a symbolic one may
    have many: no)."""
    if entry is None:
        return True
    ext = _entry_extent(entry)
    return ext is not None and ext < 4 * threads


def _entry_extent(entry) -> Optional[int]:
    """Iterations of an entry's loop (None if symbolic)."""
    lp, part, factor = entry
    if lp.const_extent is None:
        return None
    return -(-lp.const_extent // factor) if part == "outer" else lp.const_extent


def _panel_split(plan: Plan) -> Optional[int]:
    """The factor the first reduce loop is split by when the panel would exceed
    `packed_panel_bytes` (None when it fits, or no factor does)."""
    panel = plan.tile * plan.ebytes
    for lp in plan.others_r:
        panel *= lp.const_extent
    if panel <= packed_panel_bytes():
        return None
    rest = panel // plan.others_r[0].const_extent
    return pick_tile(plan.others_r[0].const_extent, max(1, packed_panel_bytes() // rest), allow_small=True)


def finish_register_tile(plan: Plan, nest: Nest) -> Optional[Plan]:
    """Complete a register-tile plan (the loop order and the parallel loop, how the
    accumulators start) as `loop_tile` does its plans; None when the tile cannot be built."""
    info, init = nest.info, nest.init
    plan.info, plan.block_name = info, nest.block.name
    plan.reordered = True
    _order_register_tile(plan, worth_parallel(info))
    if any(part != "full" and not tir.is_const_int(lp.min, 0) for lp, part, _ in plan.entries):
        return None  # `split` needs loops that start at 0
    # With the reduction split, the output holds partial sums between the parts: it is
    # initialized first (its own nest) and each tile starts from it. Otherwise each tile
    # starts from the init value.
    plan.decompose = bool(plan.ksplit) and init is not None
    plan.acc_from_output = bool(plan.ksplit) or init is None
    plan.init_parallel = plan.decompose and plan.par_index is not None
    plan.guard = reduce_guard(plan.others_r)
    if plan.shifted_symbolic() and plan.acc_from_output:
        return None  # overlapping tiles would add their terms to the output twice
    plan.big_enough = None
    for lp in info:
        if id(lp) in plan.shifted and lp.const_extent is None:
            least = max(plan.shifted[id(lp)], plan.pack_rows if lp is plan.rows else 0)
            cond = tir.GE("bool", lp.extent, tir.IntImm(lp.extent.dtype, least))
            plan.big_enough = cond if plan.big_enough is None else tir.And("bool", plan.big_enough, cond)
    if plan.big_enough is not None:
        plan.original = nest.top  # run instead when an extent is below its tile (`driver.small_nest`)
    return plan
