"""A register tile's accumulators (``<output>_local``), built once the schedule primitives
have split and ordered its loops (`accumulator_tile`), and the elementwise stage after the
tile that its final stores compute instead (`foldable_epilogue`).

Built directly: ``cache_write`` + ``reverse_compute_at`` would keep a buffer of the output's
full shape, and nothing compacts it to the tile. Apart from `register_tile`, which plans the
tile, because this is the carrying-out, run by `fixup` on the scheduled function."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir

from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import INTERLEAVE_ANN, VECTORIZE_ANN
from ..schedule.common import blocks_under
from .analysis import access_strides, buffer_loads, count_buffer_loads, impure, only_blocks, vectorizable
from .block_edits import load_swapper
from .plan import Plan


def accumulator_tile(plan: Plan, sch, parts: dict, realize, binding: dict, base: dict, epilogue=None,
                     unshifted: dict | None = None):
    """The accumulators of a register tile: a ``rows x tile`` buffer (``<output>_local``)
    that the update block reads and writes instead of the output, filled before the reduce
    loops (with the init value, or from the output when the reduction is split or has no
    init) and stored to the output after them. Its indices are constants once the rows are
    unrolled and the vector loop vectorized, so LLVM keeps it in registers. Returns the
    function wrapping the tile (the statement below the tile's outer loops) and the edit of
    the update block.

    ``unshifted``: iterator -> the tile's origin before the shift, for the loops of constant
    extent whose last tile is shifted back (`shifted_start`): its stores skip the outputs that
    lie before that origin, which the tile before stored. So the overlap is never stored
    twice: a tile may start from the output (a split reduction) or fold an epilogue that reads
    its own output, and no two threads store one element."""
    block = realize.block
    store = block.body
    out_buf = store.buffer
    vec, rows = plan.inner, plan.rows
    tiled = ([rows] if rows is not None else []) + [vec]
    extents = ([plan.mr] if rows is not None else []) + [plan.tile]
    acc = tir.Buffer(f"{out_buf.name}_local", [tir.IntImm(lp.dtype, n) for lp, n in zip(tiled, extents)],
                     out_buf.dtype, scope="local")
    acc.data = tir.Var("handle", acc.name)
    # In the update block: acc[row iterator - row origin, vector iterator - vector origin].
    origins = [base.get(lp.iv.var, lp.min) for lp in tiled]
    block_idx = [tir.Sub(lp.dtype, lp.iv.var, o) if not tir.is_const_int(o, 0) else lp.iv.var
                 for lp, o in zip(tiled, origins)]
    # In the nests around the reduction: loops over the tile; the output's indices follow.
    inner_vars = [sch.get(parts[(id(lp), "inner") if (id(lp), "inner") in parts else (id(lp), "full")]).loop_var
                  for lp in tiled]
    tile_vars = [tir.Var(lp.dtype, v.name) for lp, v in zip(tiled, inner_vars)]
    to_tile = dict(zip(inner_vars, tile_vars))
    out_idx = [substitute(substitute(i, binding), to_tile) for i in store.indices]
    out_contiguous = access_strides(out_buf, store.indices).get(vec.iv.var, 0) == 1

    if plan.acc_from_output:
        start = _over_tile(plan, tile_vars, tir.BufferStore(acc, tir.BufferLoad(out_buf.dtype, out_buf, out_idx),
                                                            list(tile_vars)), out_contiguous)
    else:
        value = substitute(substitute(block.init.value, binding), to_tile)
        start = _over_tile(plan, tile_vars, tir.BufferStore(acc, value, list(tile_vars)), True)
    result = tir.BufferLoad(out_buf.dtype, acc, list(tile_vars))
    # Along the vector loop, a tile starting from the init value stores the overlap's values
    # again, the same bits: only a tile that adds to the output, or an epilogue reading it,
    # needs its stores predicated there (masked vector stores).
    again_differs = plan.acc_from_output or (epilogue is not None and reads_own_output(epilogue.block))
    fresh = _fresh_outputs(tiled if again_differs else tiled[:-1], tile_vars, base, unshifted or {})
    if epilogue is None:
        finish = _over_tile(plan, tile_vars, tir.BufferStore(out_buf, result, out_idx, store.span), out_contiguous,
                            fresh)
    else:
        finish = _folded_epilogue(plan, tile_vars, epilogue, out_buf, result, out_idx, base, fresh)

    def wrap(stmt):
        tile_block = tir.Block(plan.block_name + "_tile", [], [], [], tir.seq([start, stmt, finish]),
                               alloc_buffers=[acc])
        out = tir.BlockRealize([], tir.IntImm("bool", 1), tile_block)
        # An empty reduction leaves the output as it was, as the original nest does.
        return out if plan.guard is None else tir.IfThenElse(plan.guard, out)

    return wrap, _accumulating_update(out_buf, acc, block_idx)


def _fresh_outputs(tiled: list, tile_vars: list, base: dict, unshifted: dict) -> dict:
    """Tile variable -> the condition that its output was not stored by the tile before (a
    shifted tile's overlap, see `accumulator_tile`), for the loops in ``unshifted``."""
    fresh = {}
    for lp, var in zip(tiled, tile_vars):
        if lp.iv.var in unshifted:
            origin = unshifted[lp.iv.var]
            fresh[var] = tir.GE("bool", tir.Add(lp.dtype, base[lp.iv.var], var), origin)
    return fresh


def _over_tile(plan: Plan, tile_vars: list, stmt, vectorize: bool, fresh: dict | None = None):
    """``stmt`` in the loops over the tile (rows, then the vector loop, vectorized when asked
    and the tile has vectors); with ``fresh`` (`_fresh_outputs`), only where its conditions
    hold: a row's condition outside the vector loop."""
    vec, rows = plan.inner, plan.rows
    fresh = fresh or {}
    vector = vectorize and plan.lanes > 1
    ann = {VECTORIZE_ANN: plan.lanes, INTERLEAVE_ANN: plan.tile // plan.lanes} if vector else {}
    if tile_vars[-1] in fresh:
        stmt = tir.IfThenElse(fresh[tile_vars[-1]], stmt)
    stmt = tir.For(tile_vars[-1], tir.IntImm(vec.dtype, 0), tir.IntImm(vec.dtype, plan.tile), "serial", stmt,
                   annotations=ann)
    if rows is not None:
        if tile_vars[0] in fresh:
            stmt = tir.IfThenElse(fresh[tile_vars[0]], stmt)
        stmt = tir.For(tile_vars[0], tir.IntImm(rows.dtype, 0), tir.IntImm(rows.dtype, plan.mr), "serial", stmt)
    return stmt


def _folded_epilogue(plan: Plan, tile_vars: list, epilogue, out_buf, result, out_idx: list, base: dict,
                     fresh: dict):
    """The tile's final stores with the epilogue folded in: the epilogue's element, computed
    from the accumulator instead of the output buffer."""
    ep = epilogue.block.body
    to_out = {iv.var: i for iv, i in zip(epilogue.block.iter_vars, out_idx)}
    value = load_swapper(out_buf, result)(epilogue).block.body.value
    ep_idx = [substitute(i, to_out) for i in ep.indices]
    shift_vars = frozenset(vars_in([b for b in base.values() if isinstance(b, tir.Min)]))
    ep_strides = access_strides(ep.buffer, ep_idx, shift_vars) or {}
    value = substitute(value, to_out)
    return _over_tile(plan, tile_vars, tir.BufferStore(ep.buffer, value, ep_idx, ep.span),
                      ep_strides.get(tile_vars[-1], 0) == 1 and vectorizable(value), fresh)


class _AccumulatorAccess(IRMutator):
    """Redirects an update's loads and stores of the output to the accumulators."""

    def __init__(self, out_buf, acc, block_idx: list) -> None:
        super().__init__()
        self.out_buf, self.acc, self.block_idx = out_buf, acc, block_idx
        self.acc_load = tir.BufferLoad(out_buf.dtype, acc, block_idx)

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.out_buf:
            return self.acc_load
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer is self.out_buf:
            return tir.BufferStore(self.acc, self.visit_expr(s.value), list(self.block_idx), s.span)
        return super().visit_stmt(s)


def _accumulating_update(out_buf, acc, block_idx: list):
    """The edit of the update block: it reads and writes ``acc`` instead of the output, and
    has no init (the accumulators start from it)."""
    acc_region = [tir.BufferRegion(acc, [tir.Range(i, tir.IntImm(i.dtype, 1)) for i in block_idx])]

    def edit(r):
        blk = r.block
        reads = [x for x in blk.reads if x.buffer is not out_buf] + acc_region
        blk = dataclasses.replace(blk, body=_AccumulatorAccess(out_buf, acc, block_idx).visit_stmt(blk.body),
                                  init=None, reads=reads, writes=acc_region)
        return dataclasses.replace(r, block=blk)

    return edit


def foldable_epilogue(body, realize):
    """The elementwise stage that a register tile's stores can compute instead of storing
    its result (the tile's output then needs no buffer of its own), or None. It must be the
    only reader of the tile's output (an intermediate of the function), read it only at the
    element it writes (``Y[f(i, j)] = g(X[i, j], ...)``, one point per element of ``X``,
    iterators in ``X``'s order), and follow the tile's nest with nothing between them that
    writes what it reads or touches what it writes."""
    producer = realize.block
    out_buf = producer.body.buffer
    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None or out_buf not in root.alloc_buffers:
        return None
    blocks = blocks_under(body)
    readers = [r for r in blocks if r.block.name != producer.name and count_buffer_loads(r.block, out_buf)]
    if len(readers) != 1:
        return None
    consumer = readers[0]
    if not _elementwise_of(consumer, producer):
        return None
    # The epilogue's nest holds nothing else (it goes), and nothing between the two nests may
    # write what the epilogue reads or touch what it writes.
    cb = consumer.block
    if not isinstance(root.body, tir.SeqStmt) or not any(only_blocks(x, {cb.name}) for x in root.body.seq):
        return None
    return consumer if _nothing_between(blocks, producer, cb) else None


def _elementwise_of(consumer, producer: tir.Block) -> bool:
    """Whether ``consumer`` is an elementwise stage over the producer's whole output, reading
    it at the element of each point (``Y[f(i, j)] = g(X[i, j], ...)``), and the producer does
    not read what it writes."""
    out_buf = producer.body.buffer
    cb = consumer.block
    store = cb.body
    if (not isinstance(store, tir.BufferStore) or cb.init is not None or cb.alloc_buffers or cb.match_buffers
            or any(iv.kind != "S" for iv in cb.iter_vars) or store.buffer is out_buf or impure(store.value)):
        return False
    if not (isinstance(consumer.predicate, tir.IntImm) and consumer.predicate.value == 1):
        return False
    ivars = [iv.var for iv in cb.iter_vars]
    for ld in buffer_loads(store.value, []) + [x for i in store.indices for x in buffer_loads(i, [])]:
        if ld.buffer is out_buf and list(ld.indices) != ivars:
            return False
    if any(ld.buffer is out_buf for i in store.indices for ld in buffer_loads(i, [])):
        return False
    if any(ld.buffer is store.buffer for ld in buffer_loads(producer.body.value, [])):
        return False  # the tiles still read what the epilogue would write early
    return len(ivars) == len(out_buf.shape) and all(
        isinstance(iv.dom.min, tir.IntImm) and iv.dom.min.value == 0 and _same_extent(iv.dom.extent, dim)
        for iv, dim in zip(cb.iter_vars, out_buf.shape))


def _nothing_between(blocks: list, producer: tir.Block, cb: tir.Block) -> bool:
    """Whether the epilogue ``cb`` comes after the producer, and no block between them writes
    what it reads or touches what it writes."""
    names = [r.block.name for r in blocks]
    start = names.index(producer.name)
    end = names.index(cb.name)
    if end < start:
        return False
    store = cb.body
    reads = {ld.buffer for ld in buffer_loads(store.value, [])}
    for r in blocks[start + 1:end]:
        writes = {w.buffer for w in r.block.writes}
        touched = writes | {x.buffer for x in r.block.reads}
        if writes & reads or store.buffer in touched:
            return False
    return True


def _same_extent(a, b) -> bool:
    """Whether two extents are the same constant or the same symbolic variable."""
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return isinstance(a, tir.Var) and a is b


def reads_own_output(block: tir.Block) -> bool:
    """Whether a block's store reads the buffer it writes (running it twice differs)."""
    store = block.body
    return any(ld.buffer is store.buffer for ld in buffer_loads(store.value, []))
