"""Row fusion: the stages of a row-wise op, softmax (maximum, exponentials, sum, quotient)
or layer norm (sum, mean, variance, normalized row), run block of rows by block of rows in
one parallel loop (`fuse_row_stages`), before any nest is planned.

Why: TOPI writes such an op as one loop nest per stage over the whole tensor, so each
stage sweeps all of it and the next one reads it back from L2 or memory; each nest also
runs its own parallel loop. Fused, a block of `ROW_BLOCK` rows goes through every stage
while it is in L1, the row statistics and the stages' intermediate values live in buffers
of that block's size (`_Localize`), and one parallel loop runs the blocks: each stage
reads the rows in one pass ("single passes over their rows").

How: every nest of the function must be a nest `match_nest` takes, and they must share
their leading spatial loops (the *row prefix*: same extents, in the same order); every
buffer one nest writes and another reads is allocated by the function and indexed, in every
access, by those loops' iterators at the same dimensions (each stage reads only the rows it
is computing). The last prefix loop (the rows, of constant extent) is split into blocks;
the loops above it run the blocks (the outermost worth it in parallel); under them, each
nest is the original one for the block's rows, with the rest of its loops as they were, so
the rules (`dot_product`, `loop_tile`) schedule it as before, with fewer rows. Rows no block
divides are a second, serial loop after the first, over the last rows. Each stage computes
each element from the same values as before, in the same order: results do not change.

When: at least one stage is a row reduction that a later stage reads (a statistic), and no
stage is a contraction (a matrix product, whose rows share operands: its own rules tile it).
Anything else is left alone.

Padded windows take the same path, one channel per block (`_padded_window`): a max pooling or
depthwise convolution of stride 2 reads a padded copy of its input that a stage of its own
writes, a whole pass over memory (resnet18's pooling: 3.3 MB written and read back; mobilenet_v2's
first depthwise convolution: 5 MB), since `inline_elementwise` does not inline padding read
with a stride. Fused, each channel's padded plane lives in a buffer that the window reads
while it is in cache, split in the stride's phases so that the window is one vector loop over
the plane with every tap a contiguous read (`phase_window`). Where that does not apply, the
plane is filled as two plain nests that vectorize, the padding value everywhere and then the
interior (`_filled_then_copied`), rather than one load under a condition per element, and
the window gets `strided_window` if its rows of outputs fill a vector.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_analysis import infer_access_regions
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import contains

from .analysis import block_accesses, constant_bounds
from .block_edits import renamed_blocks
from .dot_product import DOT_ROWS
from .host import PARALLEL_MIN_WORK
from .inline import is_padding
from .nest import Nest, extent_product, match_nest, perfect_nest
from .phase_window import phase_split

ROW_BLOCK = DOT_ROWS  # rows a block takes through every stage: a dot product's tile of rows
WINDOW_BLOCK = 1  # channels a block of a padded window takes: one padded plane, in L2 or L1


def fuse_row_stages(body):
    """``body`` (a function's, after inlining) with its nests fused by blocks of rows (see the
    module docstring), or ``body`` itself when they are not a row-wise op's stages."""
    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None or root.init is not None or root.match_buffers:
        return body
    stmts = list(root.body.seq) if isinstance(root.body, tir.SeqStmt) else [root.body]
    if len(stmts) < 2 or not all(isinstance(s, tir.For) for s in stmts):
        return body
    nests = [match_nest(s) for s in stmts]
    if any(n is None for n in nests):
        return body
    allocated = set(root.alloc_buffers)
    shared = _shared_buffers(nests, allocated)
    if shared is None:
        return body
    padding = _padded_window(nests, shared)
    if padding is None and (any(_contraction(n) for n in nests) or not _has_statistic(nests, shared)):
        return body
    depth = _prefix_depth(nests)
    while depth and _placements(nests, shared, depth) is None:
        depth -= 1
    if not depth:
        return body
    rows = nests[0].info[depth - 1]
    if rows.const_extent is None or rows.const_extent < 2 or rows.iv is None:
        return body  # (rows of symbolic count keep the per-stage nests)
    placements = _placements(nests, shared, depth)
    fused = _Fusion(nests, depth, placements, padding).build()
    keep = [b for b in root.alloc_buffers if b not in placements]
    return dataclasses.replace(body, block=dataclasses.replace(root, body=fused, alloc_buffers=keep))


# ----------------------------------------------------------------------------- when


def _contraction(nest: Nest) -> bool:
    """Whether ``nest`` reduces operands that some of its spatial loops do not index (a
    matrix product: ``A[i, k] * B[k, j]``); a row reduction's every operand that varies
    along the reduction varies along every spatial loop too."""
    if not nest.reduce_loops:
        return False
    spatial = [lp.iv.var for lp in nest.nontrivial if lp.kind == "S"]
    reduce_ = [lp.iv.var for lp in nest.reduce_loops]
    for strides in nest.accesses[1:]:
        if any(strides.get(v, 0) for v in reduce_) and not all(strides.get(v, 0) for v in spatial):
            return True
    return False


def _shared_buffers(nests: list, allocated: set) -> Optional[dict]:
    """The function's own buffers that one nest writes and later ones read, each with the
    index of its writer; None when a nest reads what a later one writes, a buffer has two
    writers, or a nest reads a parameter a nest writes."""
    writer: dict = {}
    for i, nest in enumerate(nests):
        buf = nest.out_buf
        if buf in writer:
            return None
        writer[buf] = i
    for i, nest in enumerate(nests):
        for ld in nest.rhs_loads:
            w = writer.get(ld.buffer)
            if w is not None and (w >= i or ld.buffer not in allocated):
                return None
    return {b: w for b, w in writer.items() if b in allocated}


def _has_statistic(nests: list, shared: dict) -> bool:
    """Whether a reduction's result (or a value computed from it) is read by a later stage
    along a loop it does not index, the same value for a whole row: a row maximum, sum, mean
    or reciprocal norm. Stages that read it element for element only (a pooling's divide)
    are an epilogue the register tile folds into the reduction's stores instead."""
    if not any(n.reduce_loops for n in nests):
        return False
    for buf, w in shared.items():
        for reader in nests[w + 1:]:
            for indices in _accesses(reader, buf):
                if any(not any(contains(i, lambda n, v=lp.iv.var: n is v) for i in indices)
                       for lp in reader.nontrivial if lp.iv is not None):
                    return True
    return False


def _padded_window(nests: list, shared: dict) -> Optional[Nest]:
    """The padding stage (`inline.is_padding`) whose buffer a later reduction reads with a
    stride of 2 or more along its output's contiguous loop: a pooling or depthwise
    convolution of stride 2 that `phase_window` (or, its rows a vector or more long,
    `strided_window`) vectorizes (its padding is not inlined: see
    `inline._read_contiguously`); else None."""
    for buf, w in shared.items():
        if not is_padding(nests[w].block):
            continue
        for reader in nests[w + 1:]:
            x = next((lp for lp in reader.nontrivial if lp.kind == "S" and lp.iv is not None
                      and reader.accesses[0].get(lp.iv.var, 0) == 1), None)
            if not reader.reduce_loops or x is None or x.const_extent is None:
                continue
            if any(ld.buffer is buf and strides.get(x.iv.var, 0) >= 2
                   for ld, strides in zip(reader.rhs_loads, reader.accesses[1:])):
                return nests[w]
    return None


def _same_extent(a, b) -> bool:
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return a is b


def _prefix_depth(nests: list) -> int:
    """How many leading loops every nest has alike: spatial, bound to an iterator (or of one
    iteration), starting at 0, of the same extent."""
    depth = 0
    while True:
        loops = [n.info[depth] if depth < len(n.info) else None for n in nests]
        first = loops[0]
        if any(lp is None or lp.kind != "S" or not tir.is_const_int(lp.min, 0) for lp in loops):
            return depth
        if any(not _same_extent(lp.extent, first.extent) for lp in loops):
            return depth
        if any(lp.iv is None for lp in loops) and not tir.is_const_int(first.extent, 1):
            return depth
        depth += 1


def _accesses(nest: Nest, buf) -> list:
    """The index lists of every access of ``buf`` in the nest's block (store, loads, init)."""
    return [indices for b, indices in block_accesses(nest.block) if b is buf]


def _placements(nests: list, shared: dict, depth: int) -> Optional[dict]:
    """For each shared buffer, the dimension each prefix loop indexes (None for a loop of one
    iteration that indexes none), when every access indexes them there by the accessing
    nest's own prefix iterators and nowhere else; else None."""
    out = {}
    for buf, w in shared.items():
        writer = nests[w]
        store = writer.store.indices
        dims = []
        for lp in writer.info[:depth]:
            at = [t for t, idx in enumerate(store) if lp.iv is not None and idx is lp.iv.var]
            if len(at) != 1 and not (not at and tir.is_const_int(lp.extent, 1)):
                return None
            dims.append(at[0] if at else None)
        if dims[-1] is None:
            return None
        for nest in nests:
            prefix = [lp.iv.var if lp.iv is not None else None for lp in nest.info[:depth]]
            for indices in _accesses(nest, buf):
                for t, idx in enumerate(indices):
                    if t in dims:
                        if _without_unit_iterators(nest, idx) is not prefix[dims.index(t)]:
                            return None
                    elif any(v is not None and contains(idx, lambda n, v=v: n is v) for v in prefix):
                        return None
        out[buf] = dims
    return out


def _without_unit_iterators(nest: Nest, index):
    """``index`` without the nest's iterators of one value added to it (a depthwise
    convolution reads its input channel ``ff + rc``, ``rc`` of extent 1)."""
    unit = {iv.var for iv in nest.block.iter_vars
            if tir.is_const_int(iv.dom.min, 0) and tir.is_const_int(iv.dom.extent, 1)}
    while isinstance(index, tir.Add) and (index.a in unit or index.b in unit):
        index = index.a if index.b in unit else index.b
    return index


# ----------------------------------------------------------------------------- how


class _Fusion:
    """Builds the fused loops: blocks of `ROW_BLOCK` rows in a parallel loop, then the rows
    left over, each block taking every nest in turn."""

    def __init__(self, nests: list, depth: int, placements: dict, padding: Optional[Nest] = None) -> None:
        self.nests, self.depth, self.placements, self.padding = nests, depth, placements, padding
        self.name = f"{nests[-1].block.name}_rows"
        self.rows = nests[0].info[depth - 1]

    def build(self) -> tir.Stmt:
        extent = self.rows.const_extent
        block = min(ROW_BLOCK if self.padding is None else WINDOW_BLOCK, extent)
        stmts = [self._loops(block, extent // block, 0, "")]
        if extent % block:
            tail = renamed_blocks(self._loops(extent % block, 1, extent - extent % block, "_tail"), "_tail")
            stmts.append(tail)
        return tir.seq(stmts)

    def _loops(self, block: int, count: int, start: int, suffix: str) -> tir.Stmt:
        """The loops over the outer prefix and ``count`` blocks of ``block`` rows from ``start``."""
        dtype = self.rows.var.dtype
        outer = [tir.Var(lp.var.dtype, f"{lp.var.name}{suffix}") for lp in self.nests[-1].info[:self.depth - 1]]
        rb = tir.Var(dtype, f"{self.rows.var.name}_blk{suffix}")
        first = tir.Mul(dtype, rb, tir.IntImm(dtype, block)) if count > 1 else tir.IntImm(dtype, start)
        local = {buf: self._local(buf, block) for buf in self.placements}
        stages = [self._stage(n, outer, first, block, local) for n in self.nests]
        allocs = list(local.values())
        split = phase_split(stages, self.nests.index(self.padding), allocs) if self.padding is not None else None
        if split is not None:
            stages, allocs = split
        else:
            stages = [_filled_then_copied(st) if n is self.padding else st for n, st in zip(self.nests, stages)]
        inner = tir.Block(self.name, [], [], [], tir.seq(stages), alloc_buffers=allocs)
        stmt = tir.BlockRealize([], tir.IntImm("bool", 1), inner)
        loops = [(rb, tir.IntImm(dtype, count))] if count > 1 else []
        loops = [(v, lp.extent) for v, lp in zip(outer, self.nests[-1].info)] + loops
        par = self._parallel_loop(loops, block) if not suffix else None
        for i in reversed(range(len(loops))):
            var, ext = loops[i]
            stmt = tir.For(var, tir.IntImm(var.dtype, 0), ext, "parallel" if i == par else "serial", stmt)
        return stmt

    def _parallel_loop(self, loops: list, block: int) -> Optional[int]:
        """The outermost loop of more than one iteration, when the rows are work enough."""
        work = block
        for _, ext in loops:
            if not isinstance(ext, tir.IntImm):
                work = None
                break
            work *= ext.value
        if work is not None and work * self._row_work() < PARALLEL_MIN_WORK:
            return None
        return next((i for i, (_, ext) in enumerate(loops) if not tir.is_const_int(ext, 1)), None)

    def _row_work(self) -> int:
        """Iterations a row takes through every stage, reductions included: a padded window's
        plane costs its fill and a multiply-add per tap, not one store per output."""
        return sum(extent_product(nest.info[self.depth:], 1 << 10) for nest in self.nests)

    def _local(self, buf: tir.Buffer, block: int) -> tir.Buffer:
        """The block's own copy of ``buf``: its rows, then the dimensions no prefix loop indexes."""
        dims = self.placements[buf]
        shape = [tir.IntImm(self.rows.dtype, block)] + [s for t, s in enumerate(buf.shape) if t not in dims]
        local = tir.Buffer(f"{buf.name}_rows", shape, buf.dtype)
        local.data = tir.Var("handle", local.name)
        return local

    def _stage(self, nest: Nest, outer: list, first, block: int, local: dict) -> tir.Stmt:
        """``nest`` for the rows ``first .. first + block`` of the outer prefix point ``outer``,
        with variables of its own (the leftover rows' copy is a second one)."""
        rows = nest.info[self.depth - 1]
        loops, _ = perfect_nest(nest.top)
        fresh_loop = {lp.loop_var: tir.Var(lp.loop_var.dtype, lp.loop_var.name) for lp in loops[self.depth - 1:]}
        mapping, iter_vars, values = {}, [], []
        for lp, var in zip(nest.info[:self.depth - 1], outer):
            if lp.iv is not None:
                mapping[lp.iv.var] = var if var.dtype == lp.iv.var.dtype else tir.Cast(lp.iv.var.dtype, var)
        prefix_ivs = {id(lp.iv) for lp in nest.info[:self.depth - 1] if lp.iv is not None}
        row_var = None
        for iv, value in zip(nest.block.iter_vars, nest.realize.iter_values):
            if id(iv) in prefix_ivs:
                continue
            var = tir.Var(iv.var.dtype, iv.var.name)
            if iv is rows.iv and block == 1:
                # One row (a padded window's channel): its index is the block's, no iterator
                # of one value that would keep the nest from the rules (`nest.match_nest`).
                mapping[iv.var] = make_cast(first, var.dtype)
                row_var = tir.IntImm(var.dtype, 0)
                continue
            if iv is rows.iv:
                row_var = var
                dom = tir.Range(tir.IntImm(var.dtype, 0), tir.IntImm(var.dtype, block))
                mapping[iv.var] = tir.Add(var.dtype, tir.Cast(var.dtype, first) if first.dtype != var.dtype else first,
                                          var) if not tir.is_const_int(first, 0) else var
            else:
                dom = iv.dom
                mapping[iv.var] = var
            iter_vars.append(dataclasses.replace(iv, var=var, dom=dom))
            values.append(substitute(value, fresh_loop))
        localize = _Localize(local, self.placements, row_var)
        body = substitute(localize.visit_stmt(nest.block.body), mapping)
        init = substitute(localize.visit_stmt(nest.block.init), mapping) if nest.block.init is not None else None
        reads, writes = infer_access_regions(body, init, nest.block.alloc_buffers)
        new_block = dataclasses.replace(nest.block, iter_vars=iter_vars, body=body, init=init, reads=reads,
                                        writes=writes)
        stmt = dataclasses.replace(nest.realize, block=new_block, iter_values=values)
        for lp in reversed(loops[self.depth:]):
            stmt = dataclasses.replace(lp, loop_var=fresh_loop[lp.loop_var], body=stmt)
        if block == 1:
            return stmt
        row_loop = fresh_loop[loops[self.depth - 1].loop_var]
        return tir.For(row_loop, tir.IntImm(row_loop.dtype, 0), tir.IntImm(row_loop.dtype, block), "serial", stmt)


class _Localize(IRMutator):
    """Accesses of the shared buffers moved to the block's copies: the rows dimension indexed
    by the block's row iterator, the other prefix dimensions dropped."""

    def __init__(self, local: dict, placements: dict, row_var) -> None:
        super().__init__()
        self.local, self.placements, self.row_var = local, placements, row_var

    def _indices(self, buf, indices: list) -> list:
        dims = self.placements[buf]
        return [self.row_var] + [self.visit_expr(i) for t, i in enumerate(indices) if t not in dims]

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer in self.local:
            return tir.BufferLoad(e.dtype, self.local[e.buffer], self._indices(e.buffer, e.indices))
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer in self.local:
            return tir.BufferStore(self.local[s.buffer], self.visit_expr(s.value), self._indices(s.buffer, s.indices),
                                   s.span)
        return super().visit_stmt(s)


def _filled_then_copied(stage: tir.For) -> tir.Stmt:
    """A padding stage's nest for one block as two plain nests: every element set to the
    padding value, then the elements inside the bounds its condition names copied, each loop
    of the copy restricted to them: plain loops LLVM vectorizes (no rule plans them here),
    where the stage as it was loads under a condition per element, which stays scalar. The
    stage is returned as it was when its condition is not a conjunction of constant bounds on
    iterators the loops bind."""
    loops, realize = perfect_nest(stage)
    block = realize.block
    cond, then, other = block.body.value.args
    bounds = constant_bounds(cond)
    loop_of = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        lp = next((lp for lp in loops if value is lp.loop_var), None)
        if lp is not None:
            loop_of[iv.var] = lp
    if bounds is None or any(v not in loop_of for v in bounds):
        return stage

    def nest(name: str, value, ranges: dict) -> tir.Stmt:
        """The stage storing ``value``, its loops (variables of its own) within ``ranges``."""
        fresh = {lp.loop_var: tir.Var(lp.loop_var.dtype, lp.loop_var.name) for lp in loops}
        body = dataclasses.replace(block.body, value=value)
        reads, writes = infer_access_regions(body, None, block.alloc_buffers)
        new_block = dataclasses.replace(block, name=name, body=body, reads=reads, writes=writes)
        stmt = dataclasses.replace(realize, block=new_block,
                                   iter_values=[substitute(v, fresh) for v in realize.iter_values])
        for lp in reversed(loops):
            lo, hi = ranges.get(lp.loop_var, (None, None))
            if lo is None:
                stmt = dataclasses.replace(lp, loop_var=fresh[lp.loop_var], body=stmt)
            else:
                stmt = dataclasses.replace(lp, loop_var=fresh[lp.loop_var], min=tir.IntImm(lp.min.dtype, lo),
                                           extent=tir.IntImm(lp.extent.dtype, hi - lo), body=stmt)
        return stmt

    ranges = {}
    for var, (lo, hi) in bounds.items():
        lp = loop_of[var]
        start, stop = lp.min.value, lp.min.value + lp.extent.value
        lo, hi = max(lo, start), min(hi, stop)
        if hi <= lo:
            return nest(block.name, other, {})  # all padding
        ranges[lp.loop_var] = (lo, hi)
    return tir.seq([nest(block.name + "_fill", other, {}), nest(block.name, then, ranges)])
