"""A default CPU schedule: makes naive TensorIR loop nests fast without changing results.

`default_schedule(func)` first inlines a function's intermediate elementwise and injective
stages into the stages that read them (`_inline_elementwise`: a fused GELU's six passes
become one), then looks for loop nests of the simplest, most common form: serial loops,
perfectly nested, around one block that stores one buffer element per spatial point (an
elementwise op, or a reduction ``C[s] = C[s] <op> f(...)``, usually with ``T.init``, where
``<op>`` is ``+``, ``*``, ``max`` or ``min``).

A reduction becomes a *register tile*, the micro-kernel of a matrix multiply
(`_plan_register_tile`), when a spatial loop can be vectorized:

1. the vector loop: one whose extent is a multiple of the vector width (or of half or a
   quarter of it), along which every read is invariant (broadcast), contiguous, or, for one
   read at most, packed: copied into a panel (``reduce extents x tile``) contiguous along it.
   Convolutions (NCHW) vectorize over output channels, the weights packed; matrix products
   over output columns; the output's stride along the loop does not matter;
2. the rows: another spatial loop along which the vector operands are invariant (a
   convolution's output width, a product's rows), unrolled, each row its own accumulators;
   ``rows x vectors`` fill about three quarters of the vector registers (`_pick_tile_shape`);
3. the accumulators live in a small ``<output>_local`` buffer around the reduce loops (which
   keep their order): started from the init value, stored once at the end. LLVM keeps them
   in registers (the rows unrolled, the vector loop vectorized at the width with one
   iteration). An elementwise stage reading the result (bias, ReLU, GELU, a residual add) is
   computed in those final stores instead of a pass of its own (`_foldable_epilogue`);
4. the loop order and the parallel loop (`_order_register_tile`): the vector loop's tiles
   outermost and parallel, each thread packing its panels, when they share evenly among the
   threads (`parallel_threads`); else the first other spatial loop goes outermost in
   parallel and the operand is packed before the nest by all threads. A panel over
   `PACKED_PANEL_BYTES` has its first reduce loop split (the output then holds partial sums
   between the parts, initialized by a nest of its own, TVM's ``decompose_reduction``).

Loops of symbolic extent (a sequence length ``n``, `_Loop.shiftable`) are tiled as loops of
constant extent are: a register tile's vector loop and rows, and a dot product's rows, take
static tiles (`SYMBOLIC_VECTORS` vectors, rows as for `SYMBOLIC_ROWS`, `DOT_ROWS`), and the
last tile, which would cross ``n``, is shifted back to end at it (`_shifted_start`): it
recomputes some outputs of the tile before it by the same operations and stores the same
values again, so no tile needs a predicate or a tail loop, and loads stay in bounds. The nest
runs under ``if n >= tile``; otherwise the nest as it was runs, scheduled as its static twin
with a few rows is (`_small_nest`: a decode step's dense layer becomes a dot product over the
weight's rows, in parallel over them, instead of packing a panel for one row). Register tiles tile a
symbolic loop only when they start from the init value (an overlapping tile starting from the
output would add its terms twice), and a dot product's shifted rows add up each total in a
register and store it once (two threads may compute the same output).

Without a loop to vectorize (a matrix-vector product whose matrix is in rows, a softmax's
row maximum), a float sum along a loop every operand reads contiguously becomes a *dot
product* (`_DotProduct`): each output gets a vector of partial sums along that loop, added
together at the end; it is the one schedule here that changes the order of additions (see
below). Other such reductions (a maximum, integers, other extents) get a tile of a few scalar
accumulators along the innermost spatial loop: the dependent chain of each element is kept,
several run side by side.

Other reductions (a type the register tile does not take, shapes it cannot split) and the
elementwise nests keep the first schedule this module had:

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
``compute_inline`` (the elementwise stages), ``split`` (tiles, rows, the reduce split, block
tiles), ``reorder``, ``decompose_reduction`` at the nest's outermost loop (the init nest
follows the new loop order, without the reduce loops; blocks become ``<name>_init`` and
``<name>_update``), ``unroll`` (a tile's rows), ``annotate`` (the ``tvms.*`` codegen hints)
and ``parallel``. Some steps have no primitive with the same effect and are done directly on
the result (`_fixup`): the packing (``cache_read`` + ``compute_at`` would copy into a buffer
of the operand's full shape and layout, allocated once outside the parallel loop; the panel
is a compact buffer, transposed when the operand is, allocated per tile or per thread's
iteration), a register tile's accumulators and folded epilogue (``cache_write`` +
``reverse_compute_at`` would keep a buffer of the output's full shape: nothing here
compacts it to the tile), and the guard that keeps the init from running when a symbolic
reduce loop is empty. A nest the primitives refuse is left as it was.

Why this is legal: in the nests accepted, every spatial point writes its own element (the
store's indices are exactly the spatial iterators), reads the stored buffer only at that
element and only as the reduction's accumulator, and the reduce loops keep their relative
order; so every element sees the same sequence of updates, in the same order, whatever the
order of the loops around them, and whether the running value sits in the output or in a
register. Inlining and folding an epilogue compute each element by the same expression.
Results are bit-for-bit the same, except in dot-product nests: there the terms of each float
sum are added in another order (lane ``l`` of the partial sums takes terms ``l, l + L, ...``,
then the lanes are added in order), whose rounding error has the same bound as the
sequential sum's, ``gamma_K * sum |terms|`` (tests/test_schedule_dot.py checks it against
float64). The sequential order would leave the vector units idle: a matrix-vector product with
its matrix in rows ran 4.5x slower. (Requiring an associative and commutative combiner is
stricter than bit-exactness needs; the dot product relies on it.) Nests
that do not match are left alone, as are loops a user already annotated (``T.parallel``,
``T.vectorized``, ...).
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Optional

from tvmscript import tir

from tvmscript.tir_visitor import vars_in

from .lower_tir import INTERLEAVE_ANN, UNROLL_ANN, VECTORIZE_ANN, IRMutator, dtype_bytes, substitute
from .schedule.common import with_unique_block_names

__all__ = ["default_schedule", "tile_bytes", "vector_bytes", "vector_registers", "parallel_threads", "PANEL_BYTES",
           "PACKED_PANEL_BYTES", "PARALLEL_MIN_WORK", "BLOCK_TILE_BYTES"]

VECTOR_REGISTERS_PER_TILE = 8  # accumulators: enough to keep two FMA pipes busy
PACKED_PANEL_BYTES = 256 * 1024  # reduce extent x tile of a packed operand, kept in L2
PANEL_BYTES = 64 * 1024  # the same, unpacked: strided rows use few cache sets, so far less fits
PARALLEL_MIN_WORK = 1 << 17  # iterations below which starting threads costs more than it saves
BLOCK_TILE_BYTES = 64  # each side of a block of a transposing copy: one cache line
SCHEDULED_ATTR = "tvms.default_scheduled"
_TILE_DTYPES = ("float32", "float64", "int32", "int64")  # register tiles: types LLVM vectorizes well
_BIG = 1 << 30  # the stride of an access through a symbolic dimension: assume it is large


def default_schedule(func: tir.PrimFunc) -> tir.PrimFunc:
    """``func`` with every matching loop nest rescheduled (see the module docstring)."""
    if func.attrs.get("tvms.lowered") or func.attrs.get(SCHEDULED_ATTR) or func.attrs.get("tvms.no_default_schedule"):
        return func

    body = with_unique_block_names(func.body)  # schedules find blocks by name
    body = _SymbolicDivMod().visit_stmt(body)
    body = _inline_elementwise(func, body)
    body = _schedule_nests(func, body)
    attrs = dict(func.attrs)
    attrs[SCHEDULED_ATTR] = True
    return tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, attrs, func.private, func.span)


def _schedule_nests(func: tir.PrimFunc, body, symbolic: bool = True):
    """``body`` (of ``func``) with each loop nest planned (`_schedule_nest`) and the plans
    carried out. ``symbolic``: register tiles may tile loops of symbolic extent
    (`_plan_register_tile`)."""
    plans = []

    class Plan(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For):
                plan = _schedule_nest(s, symbolic)
                if isinstance(plan, _DotProduct):
                    return plan.build()
                if plan is not None:
                    plans.append(plan)
                    return s
            return super().visit_stmt(s)

    body = Plan().visit_stmt(body)  # dot-product nests are rewritten at once (`_DotProduct`)
    if plans:
        body = _schedule(func, body, plans)
    return body


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


# Intrinsics costing far more than a load: a producer computing one is inlined only where
# that does not compute it more often (see `_inline_elementwise`).
_EXPENSIVE_CALLS = frozenset((
    "tir.exp", "tir.exp2", "tir.exp10", "tir.log", "tir.log2", "tir.log10", "tir.log1p", "tir.erf", "tir.tanh",
    "tir.sigmoid", "tir.sin", "tir.cos", "tir.tan", "tir.asin", "tir.acos", "tir.atan", "tir.atan2", "tir.sinh",
    "tir.cosh", "tir.asinh", "tir.acosh", "tir.atanh", "tir.pow", "tir.fmod", "tir.hypot", "tir.sqrt", "tir.rsqrt",
))


def _inline_elementwise(func: tir.PrimFunc, body):
    """``body`` with each intermediate elementwise or injective stage (no reduction; it
    stores each element of a buffer allocated in the function once) inlined into the stages
    that read it, when none of them is a reduction: a chain such as GELU's six stages (add,
    multiply, erf, multiply, add, multiply) becomes one loop nest that reads its inputs and
    writes its output once, instead of six passes over memory through five full-size
    buffers. Each element is computed by the same expression as before, so results do not
    change. A stage computing an expensive intrinsic (`_EXPENSIVE_CALLS`) is inlined only
    into a single read by a stage of as many elements (it would otherwise be computed several
    times per element); a stage read by a reduction (a convolution's padding, softmax's
    exponentials) stays, since the reduction would recompute it for each of its steps.
    `compute_inline` checks the rest (and refuses what it cannot prove)."""
    from .schedule import Schedule, ScheduleError
    from .schedule.common import blocks_under

    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None or not root.alloc_buffers:
        return body
    intermediates = set(root.alloc_buffers)
    body = _RoundedProducts(intermediates).visit_stmt(body)
    sch = Schedule(tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs),
                                func.private, func.span))
    for realize in blocks_under(body):
        block = realize.block
        store = block.body
        if not isinstance(store, tir.BufferStore) or store.buffer not in intermediates or block.init is not None:
            continue
        if any(iv.kind != "S" for iv in block.iter_vars) or _impure(store.value):
            continue
        current = sch.func("main").body
        readers = [(r, n) for r in blocks_under(current) if r.block.name != block.name
                   for n in [_count_buffer_loads(r.block, store.buffer)] if n]
        if not readers or any(r.block.init is not None or any(iv.kind != "S" for iv in r.block.iter_vars)
                              for r, _ in readers):
            continue
        if _has_expensive_call(store.value):
            if len(readers) != 1 or readers[0][1] != 1 or _domain_size(readers[0][0].block) != _domain_size(block):
                continue
        try:
            sch.compute_inline(sch.get_block(block.name))
        except ScheduleError:
            continue
    return sch.func("main").body


class _SymbolicDivMod(IRMutator):
    """Rewrites, in each block, the indices that divide by a symbolic extent and that the
    block iterators' ranges resolve (`arith.symbolic_divmod`: a reshape over a symbolic
    sequence length indexes ``x[(... ) // (256 * n), (...) // 256 % n, ...]`` where the static
    reshape has ``x[v0, v2, ...]``): the same values, but affine, so the nest can be
    vectorized and run in parallel as its static twin is. Static kernels have no such
    indices and are left as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: dict = {}

    def visit_stmt(self, s):
        if isinstance(s, tir.Block) and s.iter_vars:
            saved = self.ranges
            self.ranges = dict(saved)
            self.ranges.update({iv.var: (iv.dom.min, iv.dom.extent) for iv in s.iter_vars})
            try:
                block = super().visit_stmt(s)
                regions = [[self.region(r) for r in rs] for rs in (block.reads, block.writes)]
                if any(a is not b for new, old in zip(regions, (block.reads, block.writes)) for a, b in zip(new, old)):
                    block = dataclasses.replace(block, reads=regions[0], writes=regions[1])
                return block
            finally:
                self.ranges = saved
        if isinstance(s, tir.BufferStore) and self.ranges:
            s = super().visit_stmt(s)
            indices = [self.index(i) for i in s.indices]
            return s if all(a is b for a, b in zip(indices, s.indices)) else dataclasses.replace(s, indices=indices)
        return super().visit_stmt(s)

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if isinstance(e, tir.BufferLoad) and self.ranges:
            indices = [self.index(i) for i in e.indices]
            if any(a is not b for a, b in zip(indices, e.indices)):
                return tir.BufferLoad(e.dtype, e.buffer, indices, e.span)
        return e

    def index(self, e):
        """``e`` resolved (`simplify_divmod`) and put in canonical form, if it divides and
        mentions a symbolic dimension; else ``e`` itself (static indices are not touched)."""
        from tvmscript.tir_visitor import contains, vars_in

        from .arith.canonical import Canonical
        from .arith.symbolic_divmod import simplify_divmod

        if not contains(e, lambda x: isinstance(x, (tir.FloorDiv, tir.FloorMod))) or \
                all(v in self.ranges for v in vars_in([e])):
            return e
        new = Canonical(self.ranges).simplify(simplify_divmod(e, self.ranges))
        return e if contains(new, lambda x: isinstance(x, (tir.FloorDiv, tir.FloorMod))) else new

    def region(self, r: tir.BufferRegion) -> tir.BufferRegion:
        ranges = [tir.Range(self.index(x.min), x.extent) for x in r.region]
        if all(a.min is b.min for a, b in zip(ranges, r.region)):
            return r
        return dataclasses.replace(r, region=ranges)


class _RoundedProducts(IRMutator):
    """Marks each float product stored into an intermediate buffer as rounded (a cast to its
    own type, which generates no code): inlined into an add (``x + y * z`` from a multiply
    stage and an add stage), it would otherwise become one fused multiply-add
    (`codegen_llvm`'s ``llvm.fmuladd``), rounded once where the unscheduled kernel rounds the
    product when it stores it; results would differ in the last bits."""

    def __init__(self, intermediates: set) -> None:
        super().__init__()
        self.intermediates = intermediates

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer in self.intermediates and isinstance(s.value, tir.Mul) \
                and tir.is_float(s.value.dtype):
            return dataclasses.replace(s, value=tir.Cast(s.value.dtype, s.value))
        return super().visit_stmt(s)


def _count_buffer_loads(block: tir.Block, buf) -> int:
    """Loads of ``buf`` in a block's body (its init included)."""
    count = 0
    for part in (block.body, block.init):
        if isinstance(part, tir.BufferStore):
            count += sum(1 for ld in _loads(part.value, []) if ld.buffer is buf)
            count += sum(1 for i in part.indices for ld in _loads(i, []) if ld.buffer is buf)
        elif part is not None:
            count += 1 << 20  # a body we do not look into: never counts as a single read
    return count


def _vectorizable(node) -> bool:
    """Whether LLVM can vectorize a loop around ``node`` (an expression or a statement of
    stores): every call in it is one `codegen_llvm.vectorizable_call` accepts. A vectorize
    annotation on a loop it cannot vectorize only makes LLVM print a warning."""
    from .codegen_llvm import vectorizable_call

    ok = True

    class V(IRMutator):
        def visit_expr(self, e):
            nonlocal ok
            if isinstance(e, tir.Call) and not vectorizable_call(e.op, e.dtype):
                ok = False
            return super().visit_expr(e)

    if isinstance(node, tir.PrimExpr):
        V().visit_expr(node)
    else:
        V().visit_stmt(node)
    return ok


def _has_expensive_call(e) -> bool:
    if isinstance(e, tir.Call):
        if e.op in _EXPENSIVE_CALLS:
            return True
        return any(_has_expensive_call(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.BinaryOp):
        return _has_expensive_call(e.a) or _has_expensive_call(e.b)
    if isinstance(e, (tir.Cast,)):
        return _has_expensive_call(e.value)
    if isinstance(e, tir.Not):
        return _has_expensive_call(e.a)
    if isinstance(e, tir.Select):
        return any(_has_expensive_call(x) for x in (e.condition, e.true_value, e.false_value))
    if isinstance(e, tir.Let):
        return _has_expensive_call(e.value) or _has_expensive_call(e.body)
    if isinstance(e, tir.BufferLoad):
        return any(_has_expensive_call(i) for i in e.indices)
    return False


def _domain_size(block: tir.Block):
    """Points in a block's iteration domain (None if symbolic)."""
    size = 1
    for iv in block.iter_vars:
        if not isinstance(iv.dom.extent, tir.IntImm):
            return None
        size *= iv.dom.extent.value
    return size


# ----------------------------------------------------------------------------- analysis


def _affine(e, atoms: frozenset = frozenset()) -> Optional[dict]:
    """``e`` as {Var: coefficient, None: constant} if it is affine in its Vars, else None.
    A ``min`` of only the Vars in ``atoms`` (a shifted tile's start, `_shifted_start`) is one
    more term, with itself as key."""
    if isinstance(e, tir.IntImm):
        return {None: e.value}
    if isinstance(e, tir.Var):
        return {e: 1, None: 0}
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype) and tir.is_int(e.value.dtype):
        return _affine(e.value, atoms)
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _affine(e.a, atoms), _affine(e.b, atoms)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, tir.Add) else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, tir.Min) and atoms and set(vars_in([e])) <= atoms:
        return {e: 1, None: 0}
    if isinstance(e, tir.Mul):
        a, b = _affine(e.a, atoms), _affine(e.b, atoms)
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


def _access_strides(buf: tir.Buffer, indices: list, atoms: frozenset = frozenset()) -> Optional[dict]:
    """Element stride of a buffer access along each Var, or None if not affine (`_affine`)."""
    total: dict = {}
    for idx, stride in zip(indices, _strides(buf)):
        aff = _affine(idx, atoms)
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

    @property
    def shiftable(self) -> bool:
        """Whether a register tile may cover this loop with tiles of a static size although its
        extent is symbolic: it starts at 0 and is a block iterator, so the last tile can be
        shifted back to end at the extent (`_shifted_start`)."""
        return self.const_extent is None and tir.is_const_int(self.min, 0) and self.iv is not None


def _schedule_nest(top: tir.For, symbolic: bool = True):
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
    if reduce_loops and out_buf.dtype in _TILE_DTYPES:
        tile = _plan_register_tile(info, nontrivial, rhs_loads, accesses, ebytes, symbolic=symbolic and init is not None)
        if tile is None or tile.lanes == 1:  # no spatial loop to vectorize
            dot = _plan_dot_product(info, nontrivial, block, realize, store, init, rhs_loads, accesses, ebytes,
                                    symbolic)
            if dot is not None:
                return dot
        if tile is not None:
            tile = _finish_register_tile(tile, info, block, init, store)
            if tile is not None and tile.shifted:
                tile.original = top
            return tile

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
        # Register tiles (`_plan_register_tile`):
        self.register_tile = False
        self.lanes = 1  # vector width of the tile's vector loop (`inner`)
        self.rows: Optional[_Loop] = None  # the loop whose iterations are the tile's rows
        self.mr = 1  # rows in the tile
        self.pack_at = 0  # entries before the packing point
        self.tile_at = 0  # entries before the tile (the reduce loops and the tile's own loops)
        self.acc_from_output = False  # accumulators start from the output (else from the init)
        self.pack_upfront = False  # the whole operand is packed before the nest, in parallel
        self.chunks: dict = {}  # id(loop) -> parallel chunks its outer part is split into first
        self.vec_outer = None  # the loop over the vector loop's tiles, once split (a Var)
        self.ebytes = 4  # bytes of an output element
        # Symbolic extents (`_Loop.shiftable`): id(loop) -> static tile size of each loop tiled
        # with the last tile shifted back; the nest they need (extent >= tile for each) and the
        # nest as it was, run otherwise (`_shifted_start`).
        self.shifted: dict = {}
        self.big_enough = None
        self.original = None


def _pack_reuse(ld, st, inner, nontrivial, rhs_loads) -> int:
    """How often a panel of ``ld`` would be reused with ``inner`` tiled: the iterations of the
    spatial loops it does not depend on; 0 when it cannot be packed (it must depend on the
    reduce loops and vary along ``inner``, and be the only read of its buffer)."""
    if not st.get(inner.iv.var, 0) or not any(st.get(lp.iv.var, 0) for lp in nontrivial if lp.kind == "R"):
        return 0
    if sum(1 for other in rhs_loads if other.buffer is ld.buffer) != 1:
        return 0
    reuse = 1
    symbolic_reuse = SMALL_SYMBOLIC_REUSE if _symbolic_extents_small.get() else 1 << 20
    for lp in nontrivial:
        if lp.kind == "S" and lp is not inner and not st.get(lp.iv.var, 0):
            reuse *= lp.const_extent if lp.const_extent is not None else symbolic_reuse
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
            # In a block, code generation keeps the loops as they are, rolled and scalar.
            # Vectorized, the strided loads become gathers, which run slower than scalar loads
            # (784x256 floats: 97 us against 71 us on Zen 4); unrolled (as LLVM's O3
            # heuristics would), LLVM searches interleaved access groups through the result,
            # which costs several times the compile time of the whole kernel and runs slower.
            plan.annotations[(id(inner), "inner")] = {VECTORIZE_ANN: 1, UNROLL_ANN: 0}
            plan.annotations[(id(lp), "inner")] = {UNROLL_ANN: 0}
            return True
    return False


# ----------------------------------------------------------------------------- register tiles


SYMBOLIC_VECTORS = 4  # vectors a register tile's row takes along a loop of symbolic extent
SYMBOLIC_ROWS = 8  # rows picked from for a row loop of symbolic extent (`_pick_tile_shape`)


def _plan_register_tile(info, nontrivial, rhs_loads, accesses, ebytes, symbolic: bool = False) -> Optional[_Plan]:
    """Plan a reduction as a matrix-multiply micro-kernel: a tile of ``rows x nv`` vectors of
    outputs is accumulated in registers over the whole reduction (see `_pick_vector_loop`,
    `_pick_row_loop`, `_pick_tile_shape`), then stored once; the loop order is settled by
    `_order_register_tile`. Returns None when no spatial loop can be vectorized (the caller
    falls back to the one-dimensional tile).

    ``symbolic``: the vector and row loops may have symbolic extents (`_Loop.shiftable`):
    they are tiled like the others, `SYMBOLIC_VECTORS` vectors by rows picked as for
    `SYMBOLIC_ROWS`, and the last tile, which would cross the extent, is shifted back to end
    at it (`_shifted_start`): it recomputes a few outputs of the tile before it, by the same
    sequence of operations, so results do not change. Only for reductions with an init: a
    tile starting from the output's value would add its terms twice where tiles overlap."""
    spatial = [lp for lp in nontrivial if lp.kind == "S"]
    reduce_ = [lp for lp in nontrivial if lp.kind == "R"]
    loads = list(zip(rhs_loads, accesses[1:]))
    choice = _pick_vector_loop(spatial, reduce_, nontrivial, loads, accesses[0], rhs_loads, ebytes, symbolic)
    if choice is None:
        return None
    vec, lanes, packed = choice
    if lanes == 1:
        rows, nv, mr = None, _scalar_tile(vec.const_extent), 1
    else:
        rows = _pick_row_loop(spatial, vec, loads, packed, symbolic)
        if packed is None:
            packed = _locality_pack(vec, rows, reduce_, nontrivial, loads, rhs_loads)
        nvecs = vec.const_extent // lanes if vec.const_extent is not None else SYMBOLIC_VECTORS
        row_extent = (rows.const_extent or SYMBOLIC_ROWS) if rows is not None else 1
        nv, mr = _pick_tile_shape(nvecs, row_extent)
        if rows is not None and rows.const_extent is None and mr == 1:
            rows = None  # one row along a symbolic loop: it stays outside the tile
    plan = _Plan()
    plan.register_tile = True
    plan.lanes, plan.tile, plan.rows, plan.mr = lanes, nv * lanes, rows, mr
    plan.inner, plan.others_r = vec, reduce_
    plan.ebytes = ebytes
    if vec.const_extent is None:
        plan.shifted[id(vec)] = plan.tile
    if rows is not None and rows.const_extent is None:
        plan.shifted[id(rows)] = mr
    if packed is not None:
        plan.pack, plan.pack_strides = packed
    plan.outer_s = [lp for lp in spatial if lp is not vec and lp is not rows and plan.pack is not None
                    and plan.pack_strides.get(lp.iv.var, 0)]
    plan.inner_s = [lp for lp in spatial if lp is not vec and lp not in plan.outer_s]
    plan.unit = [lp for lp in info if tir.is_const_int(lp.extent, 1)]
    if lanes > 1:
        plan.annotations[(id(vec), "inner" if _split_by(vec, plan.tile) else "full")] = {
            VECTORIZE_ANN: lanes, INTERLEAVE_ANN: nv}
    return plan


DOT_ROWS = 8  # outputs a dot-product nest computes at once, each its own vector accumulator


class _DotProduct:
    """A sum along a loop every operand reads contiguously, with no spatial loop to
    vectorize: a matrix-vector product whose matrix is in rows (``x @ W.T`` at batch 1, as
    `ReadTransposedInPlace` leaves it), a row sum. Each of `DOT_ROWS` outputs gets a vector of
    partial sums: lane ``l`` adds the terms ``k = l, l + L, l + 2L, ...``; the lanes are then
    added in order, after the init value::

        for <other spatial loops>, jo:                 # the outermost one parallel
            acc[r, l] = 0                              # r < rows (unrolled), l < L (vector)
            for ko: acc[r, l] += f(j = jo * rows + r, k = ko * L + l)
            out[j] = init; for l: out[j] += acc[r, l]

    The only schedule here that changes the order of additions (the sequential order would
    leave the vector units idle: one scalar multiply-add per load of a matrix row spread
    over 16 rows); the bound of the rounding error is the same as the sequential sum's
    (``K`` additions of the same terms), tested in tests/test_schedule_dot.py. It is built
    directly, not through schedule primitives (an rfactor would allocate the partial sums
    for the whole output, in the layout of the loops)."""

    def __init__(self, info, j, k, rows: int, lanes: int, block, store, init, parallel: bool) -> None:
        self.info, self.j, self.k, self.rows, self.lanes = info, j, k, rows, lanes
        self.block, self.store, self.init, self.parallel = block, store, init, parallel

    def build(self) -> tir.Stmt:
        if self.j.const_extent is not None:
            return self._build(self.rows, False, self.block.name)
        # Rows of symbolic count: tiles of `rows` outputs, the last one shifted back to end at
        # the last row (`_shifted_start`), when there are that many rows; else one at a time.
        return tir.IfThenElse(tir.GE("bool", self.j.extent, tir.IntImm(self.j.dtype, self.rows)),
                              self._build(self.rows, True, self.block.name),
                              self._build(1, False, self.block.name + "_small"))

    def _build(self, rows: int, shifted: bool, name: str) -> tir.Stmt:
        """The nest, ``rows`` outputs at a time; ``shifted``: the last tile of rows ends at the
        symbolic extent, overlapping the one before it. Each output's total is then added up
        in a register and stored once: a thread recomputing an output another thread also
        computes only ever stores the same final value."""
        j, k, lanes = self.j, self.k, self.lanes
        out = self.store.buffer
        dt = out.dtype
        jo = tir.Var(j.dtype, f"{j.var.name}_o")
        r = tir.Var(j.dtype, f"{j.var.name}_r")
        ko = tir.Var(k.dtype, f"{k.var.name}_o")
        lane = tir.Var(k.dtype, f"{k.var.name}_l")
        acc = tir.Buffer(f"{out.name}_dot", [tir.IntImm("int64", rows), tir.IntImm("int64", lanes)], dt, scope="local")
        mapping = {}
        for lp in self.info:
            if lp.iv is None:
                continue
            if lp is j:
                start = tir.Mul(j.dtype, jo, tir.IntImm(j.dtype, rows))
                if shifted:
                    start = _shifted_start(start, j.extent, rows)
                mapping[lp.iv.var] = jo if rows == 1 and j.const_extent is None else tir.Add(j.dtype, start, r)
            elif lp is k:
                mapping[lp.iv.var] = tir.Add(k.dtype, tir.Mul(k.dtype, ko, tir.IntImm(k.dtype, lanes)), lane)
            else:
                mapping[lp.iv.var] = lp.var
        rhs = substitute(_reduction_rhs(self.store), mapping)
        indices = [substitute(i, mapping) for i in self.store.indices]
        cell = [r, lane]
        vector = {VECTORIZE_ANN: lanes}

        def loop(var, extent, body, kind="serial", annotations=None):
            return tir.For(var, tir.IntImm(var.dtype, 0), tir.IntImm(var.dtype, extent), kind, body,
                           annotations=dict(annotations or {}))

        start = loop(r, rows, loop(lane, lanes, tir.BufferStore(acc, tir.const(0, dt), cell), annotations=vector),
                     kind="unroll")
        update = tir.BufferStore(acc, tir.Add(dt, tir.BufferLoad(dt, acc, cell), rhs), cell, self.store.span)
        accumulate = loop(ko, k.const_extent // lanes,
                          loop(r, rows, loop(lane, lanes, update, annotations=vector), kind="unroll"))
        total = tir.BufferStore(out, tir.Add(dt, tir.BufferLoad(dt, out, indices), tir.BufferLoad(dt, acc, cell)),
                                indices, self.store.span)
        allocs = [acc]
        if shifted:
            one = tir.Buffer(f"{out.name}_total", [tir.IntImm("int64", 1)], dt, scope="local")
            allocs.append(one)
            at = [tir.IntImm("int64", 0)]
            total = tir.BufferStore(one, tir.Add(dt, tir.BufferLoad(dt, one, at), tir.BufferLoad(dt, acc, cell)), at)
            finish = loop(r, rows, tir.seq([tir.BufferStore(one, substitute(self.init.value, mapping), at),
                                            loop(lane, lanes, total),
                                            tir.BufferStore(out, tir.BufferLoad(dt, one, at), indices, self.store.span)]))
        else:
            finish = loop(r, rows, tir.seq([tir.BufferStore(out, substitute(self.init.value, mapping), indices,
                                                            self.store.span),
                                            loop(lane, lanes, total)]))
        body = tir.BlockRealize([], tir.IntImm("bool", 1), tir.Block(
            name, [], [], [], tir.seq([start, accumulate, finish]), alloc_buffers=allocs))
        if j.const_extent is not None:
            body = loop(jo, j.const_extent // rows, body)
        else:  # tiles of rows, the last one shifted back; or, with one row each, every row
            count = j.extent if rows == 1 else tir.FloorDiv(
                j.dtype, tir.Add(j.dtype, j.extent, tir.IntImm(j.dtype, rows - 1)), tir.IntImm(j.dtype, rows))
            body = tir.For(jo, tir.IntImm(j.dtype, 0), count, "serial", body)
        outer = [lp for lp in self.info if lp is not j and lp is not k]
        for lp in reversed(outer):
            body = tir.For(lp.var, lp.min, lp.extent, "serial", body)
        if self.parallel:
            body = _parallel_outermost(body)
        return body


def _parallel_outermost(stmt: tir.Stmt) -> tir.Stmt:
    """``stmt`` (a loop nest) with its outermost loop of more than one iteration parallel (in
    a `_small_nest`, a loop of symbolic extent counts as one of a few iterations: the loop
    inside it goes parallel, as in the nest's static twin)."""
    if not isinstance(stmt, tir.For):
        return stmt
    few = tir.is_const_int(stmt.extent, 1) or (
        _symbolic_extents_small.get() and not isinstance(stmt.extent, tir.IntImm) and isinstance(stmt.body, tir.For))
    if few:
        return dataclasses.replace(stmt, body=_parallel_outermost(stmt.body))
    return dataclasses.replace(stmt, kind="parallel")


def _plan_dot_product(info, nontrivial, block, realize, store, init, rhs_loads, accesses, ebytes,
                      symbolic: bool = True):
    """A `_DotProduct` for this nest, or None: a float sum (``+``, with an init) along one
    reduce loop of constant extent, a multiple of the vector width, along which every read is
    contiguous or invariant (and one at least contiguous); the innermost spatial loop of
    constant extent gives the rows; with ``symbolic``, one of symbolic extent may
    (`_DotProduct.build`: tiles of rows, the last one shifted back)."""
    if not isinstance(store.value, tir.Add) or init is None or not isinstance(init, tir.BufferStore):
        return None
    if not tir.is_float(store.buffer.dtype) or any(not tir.is_const_int(lp.min, 0) for lp in info):
        return None
    reduce_ = [lp for lp in nontrivial if lp.kind == "R"]
    spatial = [lp for lp in nontrivial if lp.kind == "S"]
    if len(reduce_) != 1 or not spatial:
        return None
    k, j = reduce_[0], spatial[-1]
    lanes = max(1, vector_bytes() // ebytes)
    if k.const_extent is None or k.const_extent % lanes or k.const_extent < 2 * lanes:
        return None
    if j.const_extent is None:
        if not (symbolic and j.shiftable):
            return None
        return _DotProduct(info, j, k, DOT_ROWS, lanes, block, store, init, _worth_parallel(info))
    strides = [st.get(k.iv.var, 0) for st in accesses[1:]]
    if any(st not in (0, 1) for st in strides) or 1 not in strides:
        return None
    rows = max(d for d in range(1, min(j.const_extent, DOT_ROWS) + 1) if j.const_extent % d == 0)
    return _DotProduct(info, j, k, rows, lanes, block, store, init, _worth_parallel(info))


def _split_by(lp: _Loop, factor: int) -> bool:
    """Whether a tile of ``factor`` iterations leaves more of ``lp`` (always, if symbolic)."""
    return lp.const_extent is None or factor < lp.const_extent


def _order_register_tile(plan: _Plan, parallel: bool) -> None:
    """The loop order of a register tile (``plan.entries``), its parallel loop, and where the
    panel is packed. Innermost: the reduce loops, then the tile, rows (unrolled) x vectors.
    Outside, one of two orders:

    * the spatial loops the panel depends on and the vector loop's tiles first, each thread
      packing the panels of its own iterations there, then the other spatial loops (the panel
      is reused across them): when the first of those outer loops shares evenly among the
      threads (`parallel_threads`: as many iterations or a multiple, or at least four per
      thread), or nothing runs in parallel. A panel larger than `PACKED_PANEL_BYTES` has the
      first reduce loop split, the outer part above the other spatial loops, so the part of
      the panel they reuse stays in L2;
    * otherwise (a few vector tiles: few output channels, a narrow matrix) the first other
      spatial loop goes outermost and runs in parallel, and the whole operand is packed
      before the nest, by all threads (`pack_upfront`): one parallel region to pack, one to
      compute, instead of two per vector tile. When that loop is the tile rows' outer loop,
      it is split into one chunk per thread first, and the vector tiles go between the
      chunk and the rest of it: each panel then serves a whole chunk of rows from L2."""
    vec, rows, mr = plan.inner, plan.rows, plan.mr
    vec_split = _split_by(vec, plan.tile)
    row_split = rows is not None and _split_by(rows, mr)
    above = [(lp, "full", None) for lp in plan.outer_s] + ([(vec, "outer", plan.tile)] if vec_split else [])
    below = []
    for lp in plan.inner_s:
        if lp is rows:
            if row_split:
                below.append((lp, "outer", mr))
        else:
            below.append((lp, "full", None))

    def extent(entry):
        lp, part, factor = entry
        if lp.const_extent is None:
            return None
        return lp.const_extent // factor if part == "outer" else lp.const_extent

    first_above = next((e for e in above if extent(e) != 1), None)
    first_below = next((e for e in below if extent(e) != 1), None)
    threads = parallel_threads()
    ext = extent(first_above) if first_above is not None else 1
    wide = ext is None or ext >= threads and (ext % threads == 0 or ext >= 4 * threads)
    plan.pack_upfront = parallel and not wide and first_below is not None and vec.const_extent is not None
    if plan.pack is not None and not plan.pack_upfront and not plan.shifted:
        panel = plan.tile * plan.ebytes
        for lp in plan.others_r:
            panel *= lp.const_extent
        if panel > PACKED_PANEL_BYTES:
            rest = panel // plan.others_r[0].const_extent
            plan.ksplit = _pick_tile(plan.others_r[0].const_extent, max(1, PACKED_PANEL_BYTES // rest),
                                     allow_small=True)
    entries = [(lp, "full", None) for lp in plan.unit]
    if plan.pack_upfront:
        n = extent(first_below)
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


def _pick_vector_loop(spatial, reduce_, nontrivial, loads, out_st, rhs_loads, ebytes, symbolic: bool = False):
    """The spatial loop to vectorize, its vector width, and the read to pack for it: a loop
    whose constant extent is a multiple of the width, along which every read is invariant
    (broadcast), contiguous, or, for at most one read, packable into a panel contiguous along
    it (it must depend on every reduce loop and be reused across other spatial loops).
    Preferred: the widest vectors, then a contiguous output (vector stores), then no packing,
    then the innermost loop. Narrower vectors (half, quarter width) are tried only when no
    loop fits the widest. With ``symbolic``, a loop of symbolic extent (`_Loop.shiftable`)
    fits any width, after the loops of constant extent."""
    full = max(1, vector_bytes() // ebytes)
    lanes = full
    while lanes >= 4:
        best = None
        for pos, lp in enumerate(spatial):
            extent = lp.const_extent
            if extent is None and not (symbolic and lp.shiftable) or extent is not None and extent % lanes:
                continue
            strided = [(ld, st) for ld, st in loads if st.get(lp.iv.var, 0) not in (0, 1)]
            if len(strided) > 1:
                continue
            if strided and not _panel_packable(strided[0], lp, reduce_, nontrivial, rhs_loads, 2):
                continue
            key = (out_st.get(lp.iv.var, 0) == 1, not strided, extent is not None, pos)
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
    return _pack_reuse(ld, st, vec, nontrivial, rhs_loads) >= min_reuse


def _pick_row_loop(spatial, vec, loads, packed, symbolic: bool = False):
    """The spatial loop whose iterations are the tile's rows (unrolled, each its own
    accumulators): one along which the vector operands (contiguous or packed along the vector
    loop) are invariant, so each vector load serves every row, preferring the innermost. The
    packed panel must not depend on it (it is packed outside the tile). With ``symbolic``, a
    loop of symbolic extent (`_Loop.shiftable`) may be the rows."""
    vector_reads = [st for _, st in loads if st.get(vec.iv.var, 0) == 1]
    if packed is not None:
        vector_reads.append(packed[1])
    best = None
    for pos, lp in enumerate(spatial):
        if lp is vec or (lp.const_extent is None and not (symbolic and lp.shiftable)) \
                or lp.const_extent is not None and lp.const_extent < 2:
            continue
        if packed is not None and packed[1].get(lp.iv.var, 0):
            continue
        key = (all(not st.get(lp.iv.var, 0) for st in vector_reads), pos)
        if best is None or key > best[0]:
            best = (key, lp)
    return best[1] if best else None


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
        reuse = _pack_reuse(ld, st, vec, nontrivial, rhs_loads)
        if best is None or reuse > best[0]:
            best = (reuse, (ld, st))
    return best[1] if best else None


def _pick_tile_shape(nvecs: int, row_extent: int) -> tuple:
    """``(nv, mr)``: vectors per row (a divisor of ``nvecs``, at most 4) and rows (a divisor
    of ``row_extent``) of the register tile. Most accumulators within three quarters of the
    vector registers (the rest hold the operands), then fewest loads per multiply-add
    (``nv`` vector loads and ``mr`` broadcasts feed ``nv * mr`` of them)."""
    budget = vector_registers() * 3 // 4
    if row_extent <= 1:
        nv = max(d for d in range(1, min(nvecs, VECTOR_REGISTERS_PER_TILE) + 1) if nvecs % d == 0)
        return nv, 1
    best = None
    for nv in range(1, min(nvecs, 4) + 1):
        if nvecs % nv:
            continue
        fitting = [d for d in range(1, row_extent + 1) if row_extent % d == 0 and d * nv <= budget]
        if not fitting:
            continue
        mr = max(fitting)
        key = (nv * mr, -(nv + mr) / (nv * mr))
        if best is None or key > best[0]:
            best = (key, nv, mr)
    return best[1], best[2]


def _worth_parallel(info) -> bool:
    """Whether a nest of these loops does enough work to run in parallel (a symbolic extent
    may be large: yes)."""
    work = 1
    for lp in info:
        if lp.const_extent is None:
            return True
        work *= lp.const_extent
    return work >= PARALLEL_MIN_WORK


def _finish_register_tile(plan: _Plan, info, block, init, store) -> Optional[_Plan]:
    """Complete a register-tile plan (the loop order and the parallel loop, how the
    accumulators start) as `_finish` does for the other plans."""
    plan.info, plan.block_name = info, block.name
    plan.reordered = True
    _order_register_tile(plan, _worth_parallel(info))
    if any(part != "full" and not tir.is_const_int(lp.min, 0) for lp, part, _ in plan.entries):
        return None  # `split` needs loops that start at 0
    # With the reduction split, the output holds partial sums between the parts: it is
    # initialized first (its own nest) and each tile starts from it. Otherwise each tile
    # starts from the init value.
    plan.decompose = bool(plan.ksplit) and init is not None
    plan.acc_from_output = bool(plan.ksplit) or init is None
    plan.init_parallel = plan.decompose and plan.par_index is not None
    plan.guard = None
    for lp in plan.others_r:
        if lp.const_extent is None:
            cond = tir.GT("bool", lp.extent, tir.IntImm(lp.extent.dtype, 0))
            plan.guard = cond if plan.guard is None else tir.And("bool", plan.guard, cond)
    if plan.shifted and plan.acc_from_output:
        return None  # overlapping tiles would add their terms to the output twice
    plan.big_enough = None
    for lp in info:
        if id(lp) in plan.shifted:
            cond = tir.GE("bool", lp.extent, tir.IntImm(lp.extent.dtype, plan.shifted[id(lp)]))
            plan.big_enough = cond if plan.big_enough is None else tir.And("bool", plan.big_enough, cond)
    return plan


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
    par_index = None
    if _worth_parallel(info):
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
        chunks = plan.chunks.get(id(lp))
        if factor is None:
            parts[(id(lp), "full")] = rv
        elif chunks is not None:  # chunk x outer x inner
            parts[(id(lp), "chunk")], parts[(id(lp), "outer")], parts[(id(lp), "inner")] = sch.split(
                rv, [chunks, None, factor])
        else:
            parts[(id(lp), "outer")], parts[(id(lp), "inner")] = sch.split(rv, [None, factor])
    new = [parts[(id(lp), part)] for lp, part, _ in plan.entries]
    if len(new) > 1 and plan.reordered:
        sch.reorder(*new)
    init_rv = None
    if plan.decompose:
        init_rv = sch.decompose_reduction(brv, new[0])
    vectorizable = _vectorizable(sch.resolve_block(brv)[1].block.body)
    for (lp, part, _), rv in zip(plan.entries, new):
        for key, value in plan.annotations.get((id(lp), part), {}).items():
            if vectorizable or key not in (VECTORIZE_ANN, INTERLEAVE_ANN):
                sch.annotate(rv, key, value)
    if plan.par_index is not None:
        sch.parallel(new[plan.par_index])
    if plan.register_tile and plan.mr > 1:
        sch.unroll(parts[(id(plan.rows), "inner" if (id(plan.rows), "inner") in parts else "full")])
    if plan.register_tile and plan.lanes == 1:  # scalar accumulators: one statement each
        sch.unroll(parts[(id(plan.inner), "inner" if (id(plan.inner), "inner") in parts else "full")])
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
    if plan.pack is not None or plan.guard is not None or plan.register_tile:
        fixups.append((plan, brv, parts, new, init_top))


def _fixup(body, sch, fixups: list):
    """The steps no primitive does: pack the planned read into a panel, keep a register
    tile's accumulators in a buffer of their own (`_register_tile`), guard the init."""
    wrap_body: dict = {}  # loop var -> functions wrapping the loop's body, innermost first
    wrap_loop: dict = {}  # loop var -> functions wrapping the loop itself, innermost first
    guard_at: dict = {}  # loop var or init block name -> guard
    block_edits: dict = {}  # update block name -> functions rewriting its BlockRealize
    dropped_blocks: set = set()  # epilogues folded into a register tile's stores
    dropped_buffers: set = set()  # the intermediates they read
    fallbacks: dict = {}  # loop var -> (condition, nest run instead when it fails): `_small_nest`

    def wrap_below(entry_count: int, new, fn) -> None:
        """Wrap what runs below the first ``entry_count`` loops of a nest."""
        if entry_count > 0:
            wrap_body.setdefault(sch.get(new[entry_count - 1]).loop_var, []).append(fn)
        else:
            wrap_loop.setdefault(sch.get(new[0]).loop_var, []).append(fn)

    for plan, brv, parts, new, init_top in fixups:
        if plan.guard is not None and init_top is not None:
            guard_at[init_top] = plan.guard
        if plan.pack is None and not plan.register_tile:
            continue
        realize = sch.resolve_block(brv)[1]
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
        base = {}  # iterator of a split loop -> its value at the split's innermost part 0
        for lp, part, factor in plan.entries:
            if part == "outer":
                outer = sch.get(parts[(id(lp), "outer")])
                first = outer.loop_var
                if (id(lp), "chunk") in parts:
                    chunk = sch.get(parts[(id(lp), "chunk")]).loop_var
                    first = tir.Add(lp.dtype, tir.Mul(lp.dtype, chunk, outer.extent), first)
                base[lp.iv.var] = tir.Mul(lp.dtype, first, tir.IntImm(lp.dtype, factor))
                if id(lp) in plan.shifted:
                    base[lp.iv.var] = _shifted_start(base[lp.iv.var], lp.extent, factor)
        if plan.shifted:
            values = {lp.iv.var: tir.Add(lp.dtype, base[lp.iv.var], sch.get(parts[(id(lp), "inner")]).loop_var)
                      for lp in plan.info if id(lp) in plan.shifted}
            binding.update(values)
            block_edits.setdefault(realize.block.name, []).append(_rebinder(values))
        if plan.register_tile:
            current = sch.func("main").body
            epilogue = None if plan.acc_from_output else _foldable_epilogue(current, realize)
            if epilogue is not None and plan.shifted and _reads_own_output(epilogue.block):
                epilogue = None  # overlapping tiles would apply it twice
            wrap, edit = _register_tile(plan, sch, parts, realize, binding, base, epilogue)
            block_edits.setdefault(realize.block.name, []).append(edit)
            wrap_below(plan.tile_at, new, wrap)
            if epilogue is not None:
                dropped_blocks.add(epilogue.block.name)
                dropped_buffers.add(realize.block.body.buffer)
            if plan.shifted:
                fallbacks[sch.get(new[0]).loop_var] = (
                    plan.big_enough, _small_nest(plan, sch.func("main"), epilogue, realize.block.body.buffer))
        if plan.pack is None:
            continue
        if (id(plan.inner), "outer") in parts:
            plan.vec_outer = sch.get(parts[(id(plan.inner), "outer")]).loop_var
        wrap, swap = _pack(plan, binding, base)
        block_edits.setdefault(realize.block.name, []).append(_load_swapper(*swap))
        if plan.register_tile:
            wrap_below(plan.pack_at, new, wrap)
            continue
        # The packing point: just below the last loop of the panel's origin (outer spatial
        # loops, the tile loop, the reduce split's outer loop).
        pack_at = 0
        for i, (lp, part, _) in enumerate(plan.entries):
            if part == "outer" or lp in plan.outer_s or lp in plan.unit:
                pack_at = i + 1
        assert pack_at > 0  # the tile loop's outer part comes first
        wrap_below(pack_at, new, wrap)

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.SeqStmt) and dropped_blocks:
                kept = [x for x in s.seq if not _only_blocks(x, dropped_blocks)]
                s = tir.seq(kept) if len(kept) != len(s.seq) else s
            if isinstance(s, tir.Block) and dropped_buffers and any(b in dropped_buffers for b in s.alloc_buffers):
                s = dataclasses.replace(s, alloc_buffers=[b for b in s.alloc_buffers if b not in dropped_buffers])
            if isinstance(s, tir.BlockRealize) and s.block.name in block_edits:
                out = s
                for edit in block_edits[s.block.name]:
                    out = edit(out)
            else:
                out = super().visit_stmt(s)
            if isinstance(out, tir.For):
                var = out.loop_var
                for fn in wrap_body.get(var, ()):
                    out = dataclasses.replace(out, body=fn(out.body))
                for fn in wrap_loop.get(var, ()):
                    out = fn(out)
                if var in fallbacks:
                    out = tir.IfThenElse(fallbacks[var][0], out, fallbacks[var][1])
            key = out.loop_var if isinstance(out, tir.For) else (
                out.block.name if isinstance(out, tir.BlockRealize) else None)
            if key is not None and key in guard_at:
                # The original init never runs when a reduce loop is empty: keep it that way.
                out = tir.IfThenElse(guard_at[key], out)
            return out

    return M().visit_stmt(body)


def _shifted_start(start, extent, factor: int):
    """Where a tile of ``factor`` iterations of a loop of symbolic ``extent`` starts: at
    ``start``, or, for the last tile, which would cross the extent, ``extent - factor``. The
    shifted tile overlaps the one before it and recomputes some of its outputs, each by the
    same operations in the same order (register tiles start from the init value), so it
    stores the same values again; no tile needs a predicate or a tail loop. The nest runs
    only when ``extent >= factor`` (`_small_nest` otherwise)."""
    dtype = start.dtype
    return tir.Min(dtype, start, tir.Sub(dtype, extent, tir.IntImm(dtype, factor)))


def _rebinder(values: dict):
    """A block edit binding the given iterators to new values (shifted tiles), without the
    predicate `split` added for the tiles that crossed the extent."""
    def edit(realize):
        new = [values.get(iv.var, v) for iv, v in zip(realize.block.iter_vars, realize.iter_values)]
        return dataclasses.replace(realize, iter_values=new, predicate=tir.IntImm("bool", 1))

    return edit


def _reads_own_output(block: tir.Block) -> bool:
    """Whether a block's store reads the buffer it writes (running it twice differs)."""
    store = block.body
    return any(ld.buffer is store.buffer for ld in _loads(store.value, []))


# Scheduling `_small_nest`: the symbolic extents there are below a tile's rows (a few rows,
# a decode step's one), so a panel packed for them would be reused a few times at most: the
# nest is planned as its constant-extent twin with that few rows is (a dense layer at batch 1
# becomes a dot product over the weight's rows, not a packed register tile).
_symbolic_extents_small = contextvars.ContextVar("symbolic_extents_small", default=False)
SMALL_SYMBOLIC_REUSE = 1  # what `_pack_reuse` counts a symbolic extent as, in a small nest


def _small_nest(plan: _Plan, func: tir.PrimFunc, epilogue, intermediate):
    """The nest run when a symbolic extent is smaller than its tile (shifted tiles need one
    whole tile): the nest as it was (and the epilogue folded into the tiles, with the
    intermediate buffer between them allocated here), scheduled without symbolic tiles and
    with symbolic extents taken as small (`_symbolic_extents_small`: a decode step's single
    row gets the matrix-vector schedule its static twin gets), its blocks renamed
    ``<name>_small``."""
    stmts = [plan.original]
    if epilogue is not None:
        stmts.append(next(x for x in func.body.block.body.seq if _only_blocks(x, {epilogue.block.name})))
    scope = tir.Block(plan.block_name + "_scope", [], [], [], tir.seq(stmts),
                      alloc_buffers=[intermediate] if epilogue is not None else [])
    small = tir.PrimFunc(func.params, func.buffer_map, tir.BlockRealize([], tir.IntImm("bool", 1), scope),
                         func.ret_type, dict(func.attrs), func.private, func.span)
    known_small = _symbolic_extents_small.set(True)
    try:
        return _renamed_blocks(_schedule_nests(small, small.body, symbolic=False), "_small")
    finally:
        _symbolic_extents_small.reset(known_small)


def _renamed_blocks(stmt, suffix: str):
    """``stmt`` with every block's name followed by ``suffix``."""
    class R(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.BlockRealize):
                s = dataclasses.replace(s, block=dataclasses.replace(s.block, name=s.block.name + suffix))
            return s

    return R().visit_stmt(stmt)


def _only_blocks(stmt, names: set) -> bool:
    """Whether every block in ``stmt`` (at least one) is named in ``names``."""
    from .schedule.common import blocks_under

    realizes = ([stmt] if isinstance(stmt, tir.BlockRealize) else []) + blocks_under(stmt)
    return bool(realizes) and all(r.block.name in names for r in realizes)


def _foldable_epilogue(body, realize):
    """The elementwise stage that a register tile's stores can compute instead of storing
    its result (the tile's output then needs no buffer of its own), or None. It must be the
    only reader of the tile's output (an intermediate of the function), read it only at the
    element it writes (``Y[f(i, j)] = g(X[i, j], ...)``, one point per element of ``X``,
    iterators in ``X``'s order), and follow the tile's nest with nothing between them that
    writes what it reads or touches what it writes."""
    from .schedule.common import blocks_under

    producer = realize.block
    out_buf = producer.body.buffer
    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None or out_buf not in root.alloc_buffers:
        return None
    blocks = blocks_under(body)
    names = [r.block.name for r in blocks]
    readers = [r for r in blocks if r.block.name != producer.name and _count_buffer_loads(r.block, out_buf)]
    if len(readers) != 1:
        return None
    consumer = readers[0]
    cb = consumer.block
    store = cb.body
    if (not isinstance(store, tir.BufferStore) or cb.init is not None or cb.alloc_buffers or cb.match_buffers
            or any(iv.kind != "S" for iv in cb.iter_vars) or store.buffer is out_buf or _impure(store.value)):
        return None
    if not (isinstance(consumer.predicate, tir.IntImm) and consumer.predicate.value == 1):
        return None
    ivars = [iv.var for iv in cb.iter_vars]
    for ld in _loads(store.value, []) + [x for i in store.indices for x in _loads(i, [])]:
        if ld.buffer is out_buf and list(ld.indices) != ivars:
            return None
    if any(ld.buffer is out_buf for i in store.indices for ld in _loads(i, [])):
        return None
    if any(ld.buffer is store.buffer for ld in _loads(producer.body.value, [])):
        return None  # the tiles still read what the epilogue would write early
    if len(ivars) != len(out_buf.shape) or any(
            not (isinstance(iv.dom.min, tir.IntImm) and iv.dom.min.value == 0 and _same_extent(iv.dom.extent, dim))
            for iv, dim in zip(cb.iter_vars, out_buf.shape)):
        return None
    # The epilogue's nest holds nothing else (it goes), and nothing between the two nests may
    # write what the epilogue reads or touch what it writes.
    if not isinstance(root.body, tir.SeqStmt) or not any(_only_blocks(x, {cb.name}) for x in root.body.seq):
        return None
    start = names.index(producer.name)
    end = names.index(cb.name)
    if end < start:
        return None
    reads = {ld.buffer for ld in _loads(store.value, [])}
    for r in blocks[start + 1:end]:
        writes = {w.buffer for w in r.block.writes}
        touched = writes | {x.buffer for x in r.block.reads}
        if writes & reads or store.buffer in touched:
            return None
    return consumer


def _same_extent(a, b) -> bool:
    """Whether two extents are the same constant or the same symbolic variable."""
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return isinstance(a, tir.Var) and a is b


def _load_swapper(buf, new_load):
    """A block edit replacing every load of ``buf`` in the block's body by ``new_load``."""
    class Swap(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, tir.BufferLoad) and e.buffer is buf:
                return new_load
            return super().visit_expr(e)

    def edit(realize):
        return dataclasses.replace(realize, block=dataclasses.replace(
            realize.block, body=Swap().visit_stmt(realize.block.body)))

    return edit


def _register_tile(plan: _Plan, sch, parts: dict, realize, binding: dict, base: dict, epilogue=None):
    """The accumulators of a register tile: a ``rows x tile`` buffer (``<output>_local``)
    that the update block reads and writes instead of the output, filled before the reduce
    loops (with the init value, or from the output when the reduction is split or has no
    init) and stored to the output after them. Its indices are constants once the rows are
    unrolled and the vector loop vectorized, so LLVM keeps it in registers. Returns the
    function wrapping the tile (the statement below the tile's outer loops) and the edit of
    the update block."""
    block = realize.block
    store = block.body
    out_buf = store.buffer
    vec, rows = plan.inner, plan.rows

    def inner_loop(lp):
        return sch.get(parts[(id(lp), "inner") if (id(lp), "inner") in parts else (id(lp), "full")])

    def origin(lp):
        return base.get(lp.iv.var, lp.min)

    tiled = ([rows] if rows is not None else []) + [vec]
    extents = ([plan.mr] if rows is not None else []) + [plan.tile]
    acc = tir.Buffer(f"{out_buf.name}_local", [tir.IntImm(lp.dtype, n) for lp, n in zip(tiled, extents)],
                     out_buf.dtype, scope="local")
    acc.data = tir.Var("handle", acc.name)
    # In the update block: acc[row iterator - row origin, vector iterator - vector origin].
    block_idx = [tir.Sub(lp.dtype, lp.iv.var, origin(lp)) if not tir.is_const_int(origin(lp), 0) else lp.iv.var
                 for lp in tiled]
    # In the nests around the reduction: loops over the tile; the output's indices follow.
    tile_vars = [tir.Var(lp.dtype, inner_loop(lp).loop_var.name) for lp in tiled]
    to_tile = {inner_loop(lp).loop_var: v for lp, v in zip(tiled, tile_vars)}
    out_idx = [substitute(substitute(i, binding), to_tile) for i in store.indices]
    out_contiguous = _access_strides(out_buf, store.indices).get(vec.iv.var, 0) == 1

    def nest(stmt, vectorize: bool):
        vector = vectorize and plan.lanes > 1
        ann = {VECTORIZE_ANN: plan.lanes, INTERLEAVE_ANN: plan.tile // plan.lanes} if vector else {}
        stmt = tir.For(tile_vars[-1], tir.IntImm(vec.dtype, 0), tir.IntImm(vec.dtype, plan.tile), "serial", stmt,
                       annotations=ann)
        if rows is not None:
            stmt = tir.For(tile_vars[0], tir.IntImm(rows.dtype, 0), tir.IntImm(rows.dtype, plan.mr), "serial", stmt)
        return stmt

    if plan.acc_from_output:
        start = nest(tir.BufferStore(acc, tir.BufferLoad(out_buf.dtype, out_buf, out_idx), list(tile_vars)),
                     out_contiguous)
    else:
        value = substitute(substitute(block.init.value, binding), to_tile)
        start = nest(tir.BufferStore(acc, value, list(tile_vars)), True)
    result = tir.BufferLoad(out_buf.dtype, acc, list(tile_vars))
    if epilogue is None:
        finish = nest(tir.BufferStore(out_buf, result, out_idx, store.span), out_contiguous)
    else:
        # The epilogue's element, computed from the accumulator instead of the output buffer.
        ep = epilogue.block.body
        to_out = {iv.var: i for iv, i in zip(epilogue.block.iter_vars, out_idx)}
        value = _load_swapper(out_buf, result)(epilogue).block.body.value
        ep_idx = [substitute(i, to_out) for i in ep.indices]
        shift_vars = frozenset(vars_in([b for b in base.values() if isinstance(b, tir.Min)]))
        ep_strides = _access_strides(ep.buffer, ep_idx, shift_vars) or {}
        value = substitute(value, to_out)
        finish = nest(tir.BufferStore(ep.buffer, value, ep_idx, ep.span),
                      ep_strides.get(tile_vars[-1], 0) == 1 and _vectorizable(value))
    acc_load = tir.BufferLoad(out_buf.dtype, acc, block_idx)
    acc_region = [tir.BufferRegion(acc, [tir.Range(i, tir.IntImm(i.dtype, 1)) for i in block_idx])]

    class Swap(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, tir.BufferLoad) and e.buffer is out_buf:
                return acc_load
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore) and s.buffer is out_buf:
                return tir.BufferStore(acc, self.visit_expr(s.value), list(block_idx), s.span)
            return super().visit_stmt(s)

    def edit(r):
        blk = r.block
        reads = [x for x in blk.reads if x.buffer is not out_buf] + acc_region
        blk = dataclasses.replace(blk, body=Swap().visit_stmt(blk.body), init=None, reads=reads, writes=acc_region)
        return dataclasses.replace(r, block=blk)

    def wrap(stmt):
        tile_block = tir.Block(plan.block_name + "_tile", [], [], [], tir.seq([start, stmt, finish]),
                               alloc_buffers=[acc])
        out = tir.BlockRealize([], tir.IntImm("bool", 1), tile_block)
        # An empty reduction leaves the output as it was, as the original nest does.
        return out if plan.guard is None else tir.IfThenElse(plan.guard, out)

    return wrap, edit


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
    dims.append((inner.iv.var, tir.IntImm(inner.dtype, plan.tile), base.get(inner.iv.var)))
    strides = [plan.pack_strides.get(d[0], 0) for d in dims]
    # Packed up front, the panel holds every tile: leading axes for the loops above it (the
    # spatial loops it depends on, the vector loop's tiles), indexed by those loops.
    lead = []  # (update-block index, extent, source stride, iterator -> value given the axis)
    if plan.pack_upfront:
        for lp in plan.outer_s:
            lead.append((lp.iv.var if tir.is_const_int(lp.min, 0) else tir.Sub(lp.dtype, lp.iv.var, lp.min),
                         lp.extent, plan.pack_strides.get(lp.iv.var, 0), lp))
        if plan.vec_outer is not None:
            lead.append((plan.vec_outer, tir.IntImm(inner.dtype, inner.const_extent // plan.tile),
                         plan.pack_strides.get(inner.iv.var, 0) * plan.tile, inner))
    panel = tir.Buffer(ld.buffer.name + "_panel", [x[1] for x in lead] + [d[1] for d in dims], ld.buffer.dtype)
    panel.data = tir.Var("handle", panel.name)
    # In the update block: panel[leading loops..., iterator - origin, ...].
    idx = [x[0] for x in lead] + [v if origin is None else tir.Sub(v.dtype, v, origin) for v, _, origin in dims]
    new_load = tir.BufferLoad(ld.dtype, panel, idx)
    # The filling nest: panel[p0, ..., pj] = load with each iterator = origin + p.
    lead_vars = [tir.Var(x[3].dtype, f"p{i}") for i, x in enumerate(lead)]
    pvars = [tir.Var(v.dtype, f"p{i + len(lead)}") for i, (v, _, _) in enumerate(dims)]
    mapping = dict(binding)
    for (v, _, origin), pv in zip(dims, pvars):
        mapping[v] = pv if origin is None else tir.Add(v.dtype, origin, pv)
    for x, pv in zip(lead, lead_vars):
        lp = x[3]
        if lp is inner:  # vector iterator = tile index * tile + position in the tile
            mapping[lp.iv.var] = tir.Add(lp.dtype, tir.Mul(lp.dtype, pv, tir.IntImm(lp.dtype, plan.tile)), pvars[-1])
        else:
            mapping[lp.iv.var] = pv if tir.is_const_int(lp.min, 0) else tir.Add(lp.dtype, lp.min, pv)
    src = substitute(ld, mapping)
    fill = _fill_nest(plan, panel, src, lead_vars + pvars, [x[1] for x in lead] + [d[1] for d in dims],
                      [x[2] for x in lead] + strides)

    def wrap(stmt):
        pack_block = tir.Block(plan.block_name + "_pack", [], [], [], tir.seq([fill, stmt]), alloc_buffers=[panel])
        return tir.BlockRealize([], tir.IntImm("bool", 1), pack_block)

    return wrap, (ld.buffer, new_load)


def _fill_nest(plan: _Plan, panel, src, pvars: list, extents: list, strides: list):
    """The loops filling a panel: ``panel[p0, ..., pj] = src``, the panel's last axis (the
    tile) contiguous. When the source is contiguous along the tile too, the tile's loop is
    innermost (a plain copy of rows). Otherwise the copy transposes: the axes along which the
    source is most contiguous go innermost, as a block of about one cache line
    (`BLOCK_TILE_BYTES`, an axis split to fit), with the tile's loop just outside it; a block
    then reads one line of each of ``tile`` source rows and writes whole lines of the panel,
    and its element copies are scalar: vectorizing either loop would gather or scatter, which
    is several times slower."""
    n = len(pvars)
    tile_axis = n - 1
    order = sorted(range(n), key=lambda i: -abs(strides[i]))  # outermost first
    if abs(strides[tile_axis]) == 1:
        order = [i for i in order if i != tile_axis] + [tile_axis]
        loops = [(i, None) for i in order]
        scalar = False
    else:
        line = max(1, BLOCK_TILE_BYTES // dtype_bytes(panel.dtype))
        inner, split, covered = [], None, 1
        for i in reversed(order):
            ext = extents[i].value if isinstance(extents[i], tir.IntImm) else None
            if i == tile_axis or ext is None:
                break
            if covered * ext <= line:
                inner.insert(0, i)
                covered *= ext
                continue
            factor = max(f for f in range(1, ext + 1) if ext % f == 0 and covered * f <= line)
            if factor > 1:
                split = (i, factor)
            break
        outer = [i for i in order if i != tile_axis and i not in inner and (split is None or i != split[0])]
        loops = [(i, None) for i in outer]
        if split is not None:
            loops.append((split[0], "outer"))
        loops.append((tile_axis, None))
        if split is not None:
            loops.append((split[0], "inner"))
        loops += [(i, None) for i in inner]
        scalar = True
    # Loop variables: one per (axis, part); a split axis's index is outer * factor + inner.
    loop_vars, index = [], list(pvars)
    for i, part in loops:
        if part is None:
            loop_vars.append(pvars[i])
        else:
            loop_vars.append(tir.Var(pvars[i].dtype, f"{pvars[i].name}_{0 if part == 'outer' else 1}"))
    for i, factor in ([split] if scalar and split is not None else []):
        o = next(v for (a, part), v in zip(loops, loop_vars) if a == i and part == "outer")
        in_ = next(v for (a, part), v in zip(loops, loop_vars) if a == i and part == "inner")
        index[i] = tir.Add(o.dtype, tir.Mul(o.dtype, o, tir.IntImm(o.dtype, factor)), in_)
    stmt = tir.BufferStore(panel, substitute(src, dict(zip(pvars, index))) if index != pvars else src, index)
    for k in range(len(loops) - 1, -1, -1):
        i, part = loops[k]
        if part is None:
            ext = extents[i]
        else:
            f = split[1]
            ext = tir.IntImm(pvars[i].dtype, extents[i].value // f if part == "outer" else f)
        kind = "parallel" if k == 0 and plan.pack_upfront else "serial"
        ann = {VECTORIZE_ANN: 1} if scalar and i == tile_axis else {}
        stmt = tir.For(loop_vars[k], tir.IntImm(pvars[i].dtype, 0), ext, kind, stmt, annotations=ann)
    return stmt


def vector_bytes() -> int:
    """Bytes of the host's widest vector registers (64 with AVX-512, 32 with AVX, else 16)."""
    try:
        from tvmscript.runtime.host_cpu import host_target

        features = host_target().features
    except Exception:  # noqa: BLE001 - no LLVM: assume AVX
        features = "+avx"
    if "+avx512f" in features:
        return 64
    if "+avx" in features:
        return 32
    return 16


def parallel_threads() -> int:
    """Threads a parallel loop runs on: ``OMP_NUM_THREADS`` (its first value) when set, as
    libgomp reads it, else the CPUs this process may run on."""
    import os

    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def vector_registers() -> int:
    """Vector registers of the host: 32 with AVX-512, else 16 (AVX, SSE on x86-64, and the
    NEON registers' count halved as a conservative guess elsewhere)."""
    return 32 if vector_bytes() == 64 else 16


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
