"""A default CPU schedule: makes naive TensorIR loop nests fast without changing results.

`default_schedule(func)` looks for loop nests of the simplest, most common form: serial loops,
perfectly nested, around one block that stores one buffer element per spatial point (an
elementwise op, or a reduction ``C[s] = C[s] <op> f(...)`` with ``T.init``, where ``<op>`` is
``+``, ``*``, ``max`` or ``min``). For such a nest it

1. picks the innermost loop: if the current innermost loop accesses memory with a stride
   other than 0 or 1, or is a reduce loop (vectorizing a reduction would reassociate it), the
   spatial loop that writes the output with unit stride and has the fewest badly strided
   reads (not counting one that step 2 packs) becomes innermost, and reduce loops move inside
   the other spatial loops (``i, j, k`` -> ``i, k, j`` for a matmul), so LLVM vectorizes it;
2. splits that innermost spatial loop into tiles of `tile_bytes()` (eight vector registers)
   when there are reduce loops outside it, and moves the tile loop outermost: the reduction
   then runs over one tile of the output, which LLVM keeps in vector registers for the whole
   reduction, while the tile's panel of the other operand is reused for every row;
   that operand's panel (``reduce extent x tile``) is packed into a contiguous buffer once
   per tile when it is reused across other spatial loops (rows of a wide matrix lie 4 KiB or
   more apart and compete for a few cache sets); a single reduce loop is split when the
   panel would exceed `PACKED_PANEL_BYTES` (`PANEL_BYTES` unpacked); the tile loop is
   annotated to be vectorized as one iteration of ``tile / lanes`` vectors (see
   `lower_tir.VECTORIZE_ANN`), which LLVM then holds in registers across the reduction;
   without reduce loops, when the innermost loop still reads an operand with a large stride
   (a transposing copy), that loop and the loop along which the operand is contiguous are
   both split into blocks of `BLOCK_TILE_BYTES`, block loops outside (`_plan_block_tiles`);
3. moves a reduction's ``T.init`` into a loop nest of its own over the spatial loops, run
   before the reduction (TVM's ``decompose_reduction``), so the inner loop has no branch;
4. marks the outermost spatial loop ``T.parallel`` when the nest does at least
   `PARALLEL_MIN_WORK` iterations (and the init nest too, when it alone does that many).

How: the analysis (`_schedule_nest`) plans each nest; the plan is then carried out with the
schedule primitives of `compiler.schedule`, as a DLight rule would be on a GPU (`_apply`):
``split`` (tiles, the reduce split, block tiles), ``reorder``, ``decompose_reduction`` at the
nest's outermost loop (the init nest follows the new loop order, without the reduce loops;
blocks become ``<name>_init`` and ``<name>_update``), ``annotate`` (the ``tvms.*`` codegen
hints) and ``parallel``. Two steps have no primitive with the same effect and are done
directly on the result (`_fixup`): the packing (``cache_read`` + ``compute_at`` would copy
into a buffer of the operand's full shape and layout, allocated once outside the parallel
loop; the panel is a compact ``reduce extent x tile`` buffer, transposed when the operand is,
allocated per tile), and the guard that keeps the init nest from running when a symbolic
reduce loop is empty. A nest the primitives refuse is left as it was.

Why this is legal: in the nests accepted, every spatial point writes its own element (the
store's indices are exactly the spatial iterators), reads the stored buffer only at that
element and only as the reduction's accumulator, and the reduce loops keep their relative
order; so every element sees the same sequence of updates, in the same order, whatever the
order of the loops around them. Results are bit-for-bit the same. (Requiring an associative
and commutative combiner is stricter than this needs; it keeps the door open to reordering
reduce loops later.) Nests that do not match are left alone, as are loops a user already
annotated (``T.parallel``, ``T.vectorized``, ...).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript import tir

from .lower_tir import INTERLEAVE_ANN, UNROLL_ANN, VECTORIZE_ANN, IRMutator, dtype_bytes, substitute

__all__ = ["default_schedule", "tile_bytes", "vector_bytes", "PANEL_BYTES", "PACKED_PANEL_BYTES",
           "PARALLEL_MIN_WORK", "BLOCK_TILE_BYTES"]

VECTOR_REGISTERS_PER_TILE = 8  # accumulators: enough to keep two FMA pipes busy
PACKED_PANEL_BYTES = 256 * 1024  # reduce extent x tile of a packed operand, kept in L2
PANEL_BYTES = 64 * 1024  # the same, unpacked: strided rows use few cache sets, so far less fits
PARALLEL_MIN_WORK = 1 << 17  # iterations below which starting threads costs more than it saves
BLOCK_TILE_BYTES = 64  # each side of a block of a transposing copy: one cache line
SCHEDULED_ATTR = "tvms.default_scheduled"
_BIG = 1 << 30  # the stride of an access through a symbolic dimension: assume it is large


def default_schedule(func: tir.PrimFunc) -> tir.PrimFunc:
    """``func`` with every matching loop nest rescheduled (see the module docstring)."""
    if func.attrs.get("tvms.lowered") or func.attrs.get(SCHEDULED_ATTR) or func.attrs.get("tvms.no_default_schedule"):
        return func

    plans = []

    class Plan(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For):
                plan = _schedule_nest(s)
                if plan is not None:
                    plans.append(plan)
                    return s
            return super().visit_stmt(s)

    body = func.body
    if _duplicate_block_names(body):
        body = _unique_block_names(body)  # schedules find blocks by name
    Plan().visit_stmt(body)
    if plans:
        body = _schedule(func, body, plans)
    attrs = dict(func.attrs)
    attrs[SCHEDULED_ATTR] = True
    return tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, attrs, func.private, func.span)


def _schedule(func: tir.PrimFunc, body, plans: list):
    """``body`` with each nest's plan carried out by schedule primitives (see `_apply`)."""
    from .schedule import Schedule, ScheduleError

    sch = Schedule(tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs),
                                func.private, func.span))
    fixups: list = []
    for plan in plans:
        before, n_fixups = sch.func("main"), len(fixups)
        try:
            _apply(sch, plan, fixups)
        except ScheduleError:  # a nest the primitives refuse: leave it as it was
            sch.replace_func("main", before)
            del fixups[n_fixups:]
    return _fixup(sch.func("main").body, sch, fixups)


def _duplicate_block_names(body) -> bool:
    """Whether two blocks in ``body`` (``body`` itself included) share a name."""
    from .schedule.common import blocks_under

    realizes = ([body] if isinstance(body, tir.BlockRealize) else []) + blocks_under(body)
    names = [r.block.name for r in realizes]
    return len(set(names)) != len(names)


def _unique_block_names(body):
    """``body`` with repeated block names made unique (``base_1``, ``base_2``, ... by
    `schedule.tree.fresh_name`, inner blocks first)."""
    from .schedule.tree import fresh_name

    used: set = set()

    class R(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.BlockRealize):
                name = fresh_name(s.block.name, used)
                if name != s.block.name:
                    s = dataclasses.replace(s, block=dataclasses.replace(s.block, name=name))
            return s

    return R().visit_stmt(body)


# ----------------------------------------------------------------------------- analysis


def _affine(e) -> Optional[dict]:
    """``e`` as {Var: coefficient, None: constant} if it is affine in its Vars, else None."""
    if isinstance(e, tir.IntImm):
        return {None: e.value}
    if isinstance(e, tir.Var):
        return {e: 1, None: 0}
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype) and tir.is_int(e.value.dtype):
        return _affine(e.value)
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, tir.Add) else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, tir.Mul):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        if len(a) == 1:
            a, b = b, a
        if len(b) != 1:
            return None
        c = b[None]
        return {k: v * c for k, v in a.items()}
    return None


def _strides(buf: tir.Buffer) -> list:
    if buf.strides:
        return [s.value if isinstance(s, tir.IntImm) else _BIG for s in buf.strides]
    out, acc = [], 1
    for dim in reversed(buf.shape):
        out.append(acc)
        acc = acc * dim.value if isinstance(dim, tir.IntImm) else _BIG
    return list(reversed(out))


def _access_strides(buf: tir.Buffer, indices: list) -> Optional[dict]:
    """Element stride of a buffer access along each Var, or None if not affine."""
    total: dict = {}
    for idx, stride in zip(indices, _strides(buf)):
        aff = _affine(idx)
        if aff is None:
            return None
        for k, v in aff.items():
            if k is not None:
                total[k] = total.get(k, 0) + v * stride
    return total


def _loads(e, out: list) -> list:
    if isinstance(e, tir.BufferLoad):
        out.append(e)
        for i in e.indices:
            _loads(i, out)
    elif isinstance(e, tir.BinaryOp):
        _loads(e.a, out)
        _loads(e.b, out)
    elif isinstance(e, tir.Cast):
        _loads(e.value, out)
    elif isinstance(e, tir.Not):
        _loads(e.a, out)
    elif isinstance(e, tir.Select):
        _loads(e.condition, out)
        _loads(e.true_value, out)
        _loads(e.false_value, out)
    elif isinstance(e, tir.Call):
        for a in e.args:
            if isinstance(a, tir.PrimExpr):
                _loads(a, out)
    elif isinstance(e, tir.Let):
        _loads(e.value, out)
        _loads(e.body, out)
    return out


def _impure(e) -> bool:
    if isinstance(e, tir.Call):
        if e.op in ("tir.call_extern", "tir.call_packed", "tir.call_llvm_intrin"):
            return True
        return any(_impure(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.BinaryOp):
        return _impure(e.a) or _impure(e.b)
    if isinstance(e, tir.Cast):
        return _impure(e.value)
    if isinstance(e, tir.Not):
        return _impure(e.a)
    if isinstance(e, tir.Select):
        return _impure(e.condition) or _impure(e.true_value) or _impure(e.false_value)
    if isinstance(e, tir.Let):
        return _impure(e.value) or _impure(e.body)
    if isinstance(e, tir.BufferLoad):
        return any(_impure(i) for i in e.indices)
    return False


def _same_indices(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, tir.IntImm) and isinstance(y, tir.IntImm) and x.value == y.value and x.dtype == y.dtype:
            continue
        return False
    return True


_COMBINERS = (tir.Add, tir.Mul, tir.Max, tir.Min)


def _reduction_rhs(store: tir.BufferStore):
    """For ``C[idx] = C[idx] <op> rhs`` (either operand order) return rhs, else None."""
    v = store.value
    if not isinstance(v, _COMBINERS):
        return None
    for acc, rhs in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, tir.BufferLoad) and acc.buffer is store.buffer and _same_indices(acc.indices, store.indices):
            return rhs
    return None


# ----------------------------------------------------------------------------- the transformation


class _Loop:
    def __init__(self, var, lo, extent, dtype, iv=None, kind="S") -> None:
        self.var = var
        self.min = lo
        self.extent = extent
        self.dtype = dtype
        self.iv = iv  # the block IterVar it binds (None for an unbound extent-1 loop)
        self.kind = kind  # "S" or "R"

    @property
    def const_extent(self) -> Optional[int]:
        return self.extent.value if isinstance(self.extent, tir.IntImm) else None


def _schedule_nest(top: tir.For):
    loops = []
    cur = top
    while isinstance(cur, tir.For):
        loops.append(cur)
        cur = cur.body
    if not isinstance(cur, tir.BlockRealize):
        return None
    realize = cur
    block = realize.block
    # ---- the loops: serial, unannotated, each bound to exactly one iterator
    for lp in loops:
        if lp.kind != "serial" or lp.annotations or lp.thread_tag is not None:
            return None
        if not isinstance(lp.min, tir.IntImm):
            return None
    if not (isinstance(realize.predicate, tir.IntImm) and realize.predicate.value == 1):
        return None
    if block.alloc_buffers or block.match_buffers or block.annotations:
        return None
    store = block.body
    if not isinstance(store, tir.BufferStore):
        return None
    loop_of: dict = {}
    for iv, val in zip(block.iter_vars, realize.iter_values):
        if iv.kind not in ("S", "R") or not isinstance(val, tir.Var) or val.dtype != iv.var.dtype:
            return None
        if val in loop_of.values():
            return None
        loop_of[iv.var] = val
    info = []
    by_var = {lp.loop_var: lp for lp in loops}
    bound = {v: iv for iv in block.iter_vars for v in [loop_of[iv.var]]}
    for lp in loops:
        iv = bound.get(lp.loop_var)
        if iv is None and not tir.is_const_int(lp.extent, 1):
            return None  # a loop that repeats the block: leave it
        info.append(_Loop(lp.loop_var, lp.min, lp.extent, lp.loop_var.dtype, iv, iv.kind if iv else "S"))
    if any(v not in by_var for v in loop_of.values()):
        return None
    for lp in info:
        if lp.kind == "R" and not (isinstance(lp.iv.dom.min, tir.IntImm) and lp.iv.dom.min.value == lp.min.value):
            return None  # the init would not run where the original runs it
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "S"]
    reduce_ = [iv.var for iv in block.iter_vars if iv.kind == "R"]
    # ---- the store: one element per spatial point
    seen = []
    for idx in store.indices:
        if isinstance(idx, tir.IntImm):
            continue
        if not isinstance(idx, tir.Var) or idx not in spatial or idx in seen:
            return None
        seen.append(idx)
    if len(seen) != len(spatial):
        return None
    if _impure(store.value) or any(_impure(i) for i in store.indices):
        return None
    out_buf = store.buffer
    if reduce_:
        rhs = _reduction_rhs(store)
        if rhs is None:
            return None
        if any(ld.buffer is out_buf for ld in _loads(rhs, [])):
            return None
    else:
        for ld in _loads(store.value, []):
            if ld.buffer is out_buf and not _same_indices(ld.indices, store.indices):
                return None
    init = block.init
    if init is not None:
        if not reduce_:
            return None
        if not (isinstance(init, tir.BufferStore) and init.buffer is out_buf and _same_indices(init.indices, store.indices)):
            return None
        if _impure(init.value) or any(ld.buffer is out_buf for ld in _loads(init.value, [])):
            return None

    # ---- strides of every access along every iterator
    rhs_loads = [ld for ld in _loads(store.value, []) if ld.buffer is not out_buf]
    accesses = [_access_strides(out_buf, store.indices)] + [_access_strides(ld.buffer, ld.indices) for ld in rhs_loads]
    if any(a is None for a in accesses):
        return None

    def cost(v) -> int:
        return sum(1 for st in accesses if abs(st.get(v, 0)) > 1)

    nontrivial = [lp for lp in info if not tir.is_const_int(lp.extent, 1)]
    if not nontrivial:
        return None
    reduce_loops = [lp for lp in nontrivial if lp.kind == "R"]
    ebytes = dtype_bytes(out_buf.dtype)

    def tileable(lp) -> bool:
        return (bool(reduce_loops) and lp.const_extent is not None
                and _pick_tile(lp.const_extent, max(1, tile_bytes() // ebytes)) is not None)

    def effective_cost(lp) -> int:
        """Badly strided accesses if ``lp`` were innermost, not counting one read that
        packing would make contiguous."""
        c, packed = 0, False
        for ld, st in zip(rhs_loads, accesses[1:]):
            if abs(st.get(lp.iv.var, 0)) <= 1:
                continue
            if not packed and tileable(lp) and _pack_reuse(ld, st, lp, nontrivial, rhs_loads) >= 4:
                packed = True
                continue
            c += 1
        return c

    current = nontrivial[-1]
    inner = current
    cur_cost = cost(current.iv.var)
    if cur_cost > 0 or current.kind == "R":
        # A reduce loop innermost only vectorizes by reassociating the reduction, which
        # would change results: a spatial loop of unit output stride is better even at equal
        # cost, when it can be tiled.
        best = None
        for lp in nontrivial:
            if lp.kind != "S" or accesses[0].get(lp.iv.var, 0) != 1:
                continue
            c = effective_cost(lp)
            if (c < cur_cost or (current.kind == "R" and c == 0 and tileable(lp))) and (best is None or c <= best[0]):
                best = (c, lp)
        if best is not None:
            inner = best[1]

    unit = [lp for lp in info if tir.is_const_int(lp.extent, 1)]
    others_s = [lp for lp in nontrivial if lp is not inner and lp.kind == "S"]
    others_r = [lp for lp in nontrivial if lp is not inner and lp.kind == "R"]
    plan = _Plan()
    plan.inner_s = list(others_s)
    if inner.kind == "R":
        # The best innermost loop is a reduction (a dot product along unit strides): keep the
        # order; only parallelize.
        plan.order = list(info)
    elif not others_r and _plan_block_tiles(plan, rhs_loads, accesses, inner, others_s, ebytes):
        plan.order = unit + plan.outer_s + plan.order
    else:
        e = inner.const_extent
        if others_r and e is not None:
            plan.tile = _pick_tile(e, max(1, tile_bytes() // ebytes))
        if plan.tile is not None:
            _plan_packing(plan, rhs_loads, accesses, inner, others_s, others_r, ebytes)
            # The tile is one iteration of `tile / lanes` vectors: LLVM keeps them in registers
            # across the reduce loops around it (the accumulators of a matmul microkernel).
            lanes = max(1, vector_bytes() // ebytes)
            if plan.tile % lanes == 0:
                plan.annotations[(id(inner), "inner")] = {VECTORIZE_ANN: lanes,
                                                          INTERLEAVE_ANN: plan.tile // lanes}
        plan.order = (unit + ([inner] if plan.tile else []) + plan.outer_s
                      + ([others_r[0]] if plan.ksplit else [])
                      + plan.inner_s + others_r + [inner])
    return _finish(plan, info, block, init, inner, unit, others_s, others_r)


class _Plan:
    """Decisions for one nest: loop order (a loop split in two appears twice: outer part
    first), the inner loop's tile, the reduce split, and the load packed into a panel."""

    def __init__(self) -> None:
        self.order: list = []
        self.tile: Optional[int] = None  # the innermost spatial loop split by this factor
        self.ksplit: Optional[int] = None  # the single reduce loop split by this factor
        self.pack = None  # the BufferLoad copied into a contiguous panel
        self.pack_strides: dict = {}  # its element stride along each iterator
        self.outer_s: list = []  # spatial loops above the packing point
        self.inner_s: list = []  # spatial loops below it (the panel is reused across them)
        self.splits: dict = {}  # id(loop) -> factor: other loops split in two (block tiles)
        self.annotations: dict = {}  # (id(loop), part) -> annotations of that new loop
        # Filled in by `_finish`:
        self.info: list = []  # the nest's loops (`_Loop`), outermost first, as they were
        self.inner: Optional[_Loop] = None  # the loop made innermost (tiled when `tile` is set)
        self.others_r: list = []  # the non-trivial reduce loops other than `inner`
        self.unit: list = []  # the extent-1 loops
        self.block_name: str = ""  # the nest's block, as schedules find it
        self.entries: list = []  # (loop, part, factor): the loops after splitting, in order
        self.reordered = False  # whether `entries` differ from `info` (split or reordered)
        self.par_index: Optional[int] = None  # the entry made T.parallel
        self.decompose = False  # whether the init moves into a nest of its own
        self.init_parallel = False  # whether that nest's outer loop is T.parallel too
        self.guard = None  # a condition the init nest runs under (symbolic reduce extents)


def _pack_reuse(ld, st, inner, nontrivial, rhs_loads) -> int:
    """How often a panel of ``ld`` would be reused with ``inner`` tiled: the iterations of the
    spatial loops it does not depend on; 0 when it cannot be packed (it must depend on the
    reduce loops and vary along ``inner``, and be the only read of its buffer)."""
    if not st.get(inner.iv.var, 0) or not any(st.get(lp.iv.var, 0) for lp in nontrivial if lp.kind == "R"):
        return 0
    if sum(1 for other in rhs_loads if other.buffer is ld.buffer) != 1:
        return 0
    reuse = 1
    for lp in nontrivial:
        if lp.kind == "S" and lp is not inner and not st.get(lp.iv.var, 0):
            reuse *= lp.const_extent if lp.const_extent is not None else 1 << 20
    return reuse


def _plan_packing(plan: _Plan, rhs_loads, accesses, inner, others_s, others_r, ebytes) -> None:
    """Choose a read to pack: one that depends on the reduce loops and on the inner loop and
    is invariant along other spatial loops (the panel is reused across them), preferring one
    the inner loop strides badly. Packing copies the ``reduce extent x tile`` panel it reads
    into a contiguous buffer: afterwards it is read with unit stride, and strided rows of a
    wide matrix no longer compete for a few cache sets."""
    plan.inner_s = list(others_s)
    candidates = []
    nontrivial = others_s + others_r + [inner]
    for ld, st in zip(rhs_loads, accesses[1:]):
        reuse = _pack_reuse(ld, st, inner, nontrivial, rhs_loads)
        if reuse >= 4:
            outer = [lp for lp in others_s if st.get(lp.iv.var, 0)]
            inner_s = [lp for lp in others_s if not st.get(lp.iv.var, 0)]
            candidates.append((abs(st[inner.iv.var]) > 1, reuse, ld, outer, inner_s, st))
    k = others_r[0].const_extent if len(others_r) == 1 else None
    limit = PACKED_PANEL_BYTES if candidates else PANEL_BYTES
    panel = plan.tile * ebytes
    for lp in others_r:
        panel *= lp.const_extent if lp.const_extent is not None else 1 << 20
    if panel > limit:
        if k is None:
            candidates = []  # several (or symbolic) reduce loops: no split, panel too big to pack
        else:
            plan.ksplit = _pick_tile(k, max(1, limit // (plan.tile * ebytes)), allow_small=True)
            if plan.ksplit is None:
                candidates = []
    if candidates:
        candidates.sort(key=lambda c: (not c[0], -c[1]))
        _, _, plan.pack, plan.outer_s, plan.inner_s, plan.pack_strides = candidates[0]


def _plan_block_tiles(plan: _Plan, rhs_loads, accesses, inner, others_s, ebytes) -> bool:
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
            t_inner = _pick_tile(inner.const_extent, tile)
            t_other = _pick_tile(lp.const_extent, tile)
            if t_inner is None or t_other is None:
                continue
            plan.tile = t_inner
            plan.splits[id(lp)] = t_other
            plan.outer_s = [o for o in others_s if o is not lp]
            plan.inner_s = []
            plan.order = [lp, inner, lp, inner]
            # In a block, code generation keeps the loops as they are: the inner one vectorized
            # at the host's vector width (its strided loads gathered into vectors), the other
            # one rolled. Unrolled (as LLVM's O3 heuristics would), LLVM searches interleaved
            # access groups through the result, which costs several times the compile time of
            # the whole kernel and runs no faster.
            lanes = max(1, vector_bytes() // ebytes)
            plan.annotations[(id(inner), "inner")] = {VECTORIZE_ANN: lanes, UNROLL_ANN: 0}
            plan.annotations[(id(lp), "inner")] = {UNROLL_ANN: 0}
            return True
    return False


def _finish(plan: _Plan, info, block, init, inner, unit, others_s, others_r) -> Optional[_Plan]:
    """Complete the plan with what the schedule steps need (the loops after splitting, in the
    new order; the parallel loop; the init's nest), or None when it would change nothing."""
    entries = []  # (origin loop, part, split factor): the new loops in the new order
    seen_split: set = set()
    for lp in plan.order:
        factor = plan.tile if lp is inner and plan.tile else (plan.ksplit if plan.ksplit and lp is others_r[0] else None)
        if factor is None:
            factor = plan.splits.get(id(lp))
        if factor is None:
            entries.append((lp, "full", None))
        elif id(lp) not in seen_split:
            seen_split.add(id(lp))
            entries.append((lp, "outer", factor))
        else:
            entries.append((lp, "inner", factor))
    plan.reordered = reordered = [(e[0], e[1]) for e in entries] != [(lp, "full") for lp in info]
    # Parallelize the outermost non-trivial loop if it is spatial and the nest is big enough.
    work, symbolic = 1, False
    for lp in info:
        if lp.const_extent is None:
            symbolic = True
        else:
            work *= lp.const_extent
    par_index = None
    if symbolic or work >= PARALLEL_MIN_WORK:
        for i, (lp, part, factor) in enumerate(entries):
            ext = factor if part == "inner" else (lp.const_extent // factor if part == "outer" else lp.extent)
            if isinstance(ext, int) and ext == 1 or not isinstance(ext, int) and tir.is_const_int(ext, 1):
                continue
            if lp.kind == "S" and part != "inner":
                par_index = i
            break
    if not reordered and par_index is None:
        return None
    if any(part != "full" and not tir.is_const_int(lp.min, 0) for lp, part, _ in entries):
        return None  # `split` needs loops that start at 0
    plan.info, plan.entries, plan.par_index, plan.block_name = info, entries, par_index, block.name
    plan.inner, plan.others_r, plan.unit = inner, others_r, unit
    plan.decompose = init is not None and reordered
    if plan.decompose:
        # The init stores one element per spatial point: worth threads only when there are many.
        init_loops = [lp for lp in unit if lp.kind == "S"] + others_s + ([inner] if inner.kind == "S" else [])
        init_work, init_symbolic = 1, False
        for lp in init_loops:
            if lp.const_extent is None:
                init_symbolic = True
            else:
                init_work *= lp.const_extent
        plan.init_parallel = par_index is not None and (init_symbolic or init_work >= PARALLEL_MIN_WORK)
        guard = None
        for lp in others_r:
            if lp.const_extent is None:
                cond = tir.GT("bool", lp.extent, tir.IntImm(lp.extent.dtype, 0))
                guard = cond if guard is None else tir.And("bool", guard, cond)
        plan.guard = guard
    return plan


def _apply(sch, plan: _Plan, fixups: list) -> None:
    """Carry out one nest's plan with schedule primitives: split, reorder,
    decompose_reduction, annotate, parallel. The packing is recorded in ``fixups`` (see
    `_fixup`): no primitive makes its layout (a compact ``reduce extent x tile`` panel allocated
    per tile, inside the parallel loop), nor the guard of an init whose reduce loop may be
    empty."""
    brv = sch.get_block(plan.block_name)
    loops = sch.get_loops(brv)[-len(plan.info):]
    parts: dict = {}
    for lp, rv in zip(plan.info, loops):
        factor = next((f for l, part, f in plan.entries if l is lp and f is not None), None)
        if factor is None:
            parts[(id(lp), "full")] = rv
        else:
            parts[(id(lp), "outer")], parts[(id(lp), "inner")] = sch.split(rv, [None, factor])
    new = [parts[(id(lp), part)] for lp, part, _ in plan.entries]
    if len(new) > 1 and plan.reordered:
        sch.reorder(*new)
    init_rv = None
    if plan.decompose:
        init_rv = sch.decompose_reduction(brv, new[0])
    for (lp, part, _), rv in zip(plan.entries, new):
        for key, value in plan.annotations.get((id(lp), part), {}).items():
            sch.annotate(rv, key, value)
    if plan.par_index is not None:
        sch.parallel(new[plan.par_index])
    init_top = None
    if init_rv is not None:
        n_init = sum(1 for lp, _, _ in plan.entries if lp.iv is not None and lp.kind == "S")
        init_loops = sch.get_loops(init_rv)[-n_init:] if n_init else []
        if plan.init_parallel:
            for rv in init_loops:
                if not tir.is_const_int(sch.get(rv).extent, 1):
                    sch.parallel(rv)
                    break
        init_top = sch.get(init_loops[0]).loop_var if init_loops else sch.get(init_rv).name
    if plan.pack is not None or plan.guard is not None:
        fixups.append((plan, brv, parts, new, init_top))


def _fixup(body, sch, fixups: list):
    """The steps no primitive does: pack the planned read into a panel, guard the init."""
    wrap_loop: dict = {}  # loop var -> function wrapping the loop's body
    guard_at: dict = {}  # loop var or init block name -> guard
    load_swap: dict = {}  # update block name -> (buffer, new load)
    for plan, brv, parts, new, init_top in fixups:
        if plan.guard is not None and init_top is not None:
            guard_at[init_top] = plan.guard
        if plan.pack is None:
            continue
        realize = sch.resolve_block(brv)[1]
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
        base = {}
        for lp, part, factor in plan.entries:
            if part == "outer":
                base[lp.iv.var] = tir.Mul(lp.dtype, sch.get(parts[(id(lp), "outer")]).loop_var,
                                          tir.IntImm(lp.dtype, factor))
        wrap, swap = _pack(plan, binding, base)
        load_swap[realize.block.name] = swap
        # The packing point: just below the last loop of the panel's origin (outer spatial
        # loops, the tile loop, the reduce split's outer loop).
        pack_at = 0
        for i, (lp, part, _) in enumerate(plan.entries):
            if part == "outer" or lp in plan.outer_s or lp in plan.unit:
                pack_at = i + 1
        assert pack_at > 0  # the tile loop's outer part comes first
        wrap_loop[sch.get(new[pack_at - 1]).loop_var] = wrap

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.BlockRealize) and s.block.name in load_swap:
                buf, new_load = load_swap[s.block.name]

                class Swap(IRMutator):
                    def visit_expr(self, e):
                        if isinstance(e, tir.BufferLoad) and e.buffer is buf:
                            return new_load
                        return super().visit_expr(e)

                blk = dataclasses.replace(s.block, body=Swap().visit_stmt(s.block.body))
                out = dataclasses.replace(s, block=blk)
            else:
                out = super().visit_stmt(s)
            if isinstance(out, tir.For) and out.loop_var in wrap_loop:
                out = dataclasses.replace(out, body=wrap_loop[out.loop_var](out.body))
            key = out.loop_var if isinstance(out, tir.For) else (
                out.block.name if isinstance(out, tir.BlockRealize) else None)
            if key is not None and key in guard_at:
                # The original init never runs when a reduce loop is empty: keep it that way.
                out = tir.IfThenElse(guard_at[key], out)
            return out

    return M().visit_stmt(body)


def _pack(plan: _Plan, binding, base):
    """The read of a contiguous panel buffer that replaces the planned load, and a function
    wrapping a statement into a block that allocates and fills that panel first."""
    ld, inner, others_r = plan.pack, plan.inner, plan.others_r
    dims = []  # (iterator var, extent, origin expression or None) per panel axis
    for lp in others_r:
        if plan.ksplit and lp is others_r[0]:
            dims.append((lp.iv.var, tir.IntImm(lp.dtype, plan.ksplit), base[lp.iv.var]))
        else:
            dims.append((lp.iv.var, lp.extent, lp.min if not tir.is_const_int(lp.min, 0) else None))
    dims.append((inner.iv.var, tir.IntImm(inner.dtype, plan.tile), base[inner.iv.var]))
    panel = tir.Buffer(ld.buffer.name + "_panel", [d[1] for d in dims], ld.buffer.dtype)
    panel.data = tir.Var("handle", panel.name)
    # In the update block: panel[iterator - origin, ...].
    idx = [v if origin is None else tir.Sub(v.dtype, v, origin) for v, _, origin in dims]
    new_load = tir.BufferLoad(ld.dtype, panel, idx)
    # The filling nest: panel[p0, ..., pj] = load with each iterator = origin + p.
    pvars = [tir.Var(v.dtype, f"p{i}") for i, (v, _, _) in enumerate(dims)]
    mapping = dict(binding)
    for (v, _, origin), pv in zip(dims, pvars):
        mapping[v] = pv if origin is None else tir.Add(v.dtype, origin, pv)
    src = substitute(ld, mapping)
    fill = tir.BufferStore(panel, src, list(pvars))
    # Copy loops: the one along which the source is most contiguous innermost (a transposing
    # copy then reads rows and writes columns of the panel).
    loops = sorted(zip(pvars, dims), key=lambda x: -abs(plan.pack_strides.get(x[1][0], 0)))
    for pv, (_, ext, _) in reversed(loops):
        fill = tir.For(pv, tir.IntImm(pv.dtype, 0), ext, "serial", fill)

    def wrap(stmt):
        pack_block = tir.Block(plan.block_name + "_pack", [], [], [], tir.seq([fill, stmt]), alloc_buffers=[panel])
        return tir.BlockRealize([], tir.IntImm("bool", 1), pack_block)

    return wrap, (ld.buffer, new_load)


def vector_bytes() -> int:
    """Bytes of the host's widest vector registers (64 with AVX-512, 32 with AVX, else 16)."""
    try:
        from .codegen_llvm import host_target

        features = host_target().features
    except Exception:  # noqa: BLE001 - no LLVM: assume AVX
        features = "+avx"
    if "+avx512f" in features:
        return 64
    if "+avx" in features:
        return 32
    return 16


def tile_bytes() -> int:
    """Bytes of one output row tile: `VECTOR_REGISTERS_PER_TILE` vectors of the host's widest
    vector registers (`vector_bytes`)."""
    return VECTOR_REGISTERS_PER_TILE * vector_bytes()


def _pick_tile(extent: int, target: int, allow_small: bool = False) -> Optional[int]:
    """The largest power of two <= target dividing extent (and smaller than it)."""
    t = 1
    while t * 2 <= target:
        t *= 2
    while t >= (1 if allow_small else 4):
        if extent % t == 0 and extent > t:
            return t
        t //= 2
    return None
