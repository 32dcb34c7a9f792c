"""Cache primitives: `cache_read`, `cache_write` and `set_scope`.

Why they exist: a GPU kernel is fast when the data a thread block reuses sits in shared memory
and each thread's accumulators sit in registers. `cache_read` copies a buffer into a new buffer
of another storage scope (``A_shared``, ``scope="shared"``) just before its readers and points
those readers at the copy; `cache_write` makes the writer fill a new buffer (``C_local``) and
copies it back to the original right after; `set_scope` changes where an intermediate buffer
lives without a copy. The copy is a block of its own (named like its buffer) over loops
``ax0, ax1, ...``, so `compute_at` / `reverse_compute_at` can move it under the tiles that use
it, which is how the shared-memory matmul of the MLC course is built.

Placement follows TVM: the copy goes into the lowest statement sequence that holds both the
buffer's writer and its first reader, just before that reader (a buffer nobody in the scope
writes is copied at the start of the scope); the region copied is what the writer produces
there, widened over the loops between the two. When that place is the scope block itself the
new buffer is *compact*: its shape is the copied region's extent and every access is shifted
by the region's start (``B[vi, vj + 32]`` becomes ``B_local[vi, vj]``).

Each primitive checks every precondition before building anything and commits once, so a
failed call leaves the schedule unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.arith import const_int_bound, relax_region, simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import make_cast

from .common import blocks_under, const_value, loop_ranges_above, record_call
from .state import BlockRV, Schedule, primitive
from .tree import FuncIndex, child_block_realizes, collect_names, fresh_name, replace, stmt_children

__all__ = ["check_storage_scope", "nth_access_buffer", "normalize_block", "buffer_defining_site"]

# Storage scope prefixes TVM's runtime parses (anything after the prefix is a tag: "shared.dyn").
_SCOPE_PREFIXES = ("global", "shared", "warp", "local", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator",
                   "metal.simdgroup", "texture", "m16n8k8.matrix")


# ----------------------------------------------------------------------------- shared checks


def check_storage_scope(sch: Schedule, prim: str, scope: str, realize=None) -> None:
    """Reject a storage scope TVM cannot parse (``"foo"``); ``""`` means global, as in TVM."""
    if not isinstance(scope, str):
        raise TypeError(f"{prim}: storage_scope must be a str, not {type(scope).__name__}")
    if scope == "" or any(scope.startswith(p) for p in _SCOPE_PREFIXES):
        return
    raise sch.error(prim, f"storage scope \"{scope}\"",
                    f"The input storage scope \"{scope}\" is invalid (expected global, shared, shared.dyn, "
                    "local, warp, ...)", realize)


def normalize_block(sch: Schedule, block, func_name: str = "main") -> BlockRV:
    """A block handle from a handle or a block name (TVM takes either). TVM looks a name up
    with ``get_sblock`` before the primitive runs, so its trace shows that lookup: so does ours."""
    if isinstance(block, str):
        rv = sch.get_block(block, func_name)
        if sch._depth == 1:
            sch.trace.append("get_sblock", [("name", block), ("func_name", func_name)], rv)
        return rv
    return block


def nth_access_buffer(sch: Schedule, prim: str, realize: tir.BlockRealize, index, kind: str) -> tuple:
    """``(buffer, position)`` of the ``index``-th buffer the block reads (``kind="read"``) or
    writes; ``index`` may also be a buffer name or a `tir.Buffer` the block accesses so."""
    blk = realize.block
    regions = blk.reads if kind == "read" else blk.writes
    if isinstance(index, tir.Buffer):
        for n, r in enumerate(regions):
            if r.buffer is index:
                return r.buffer, n
        raise sch.error(prim, f"block '{blk.name}'", f"does not {kind} buffer {index.name}", realize)
    if isinstance(index, str):
        hits = [(r.buffer, n) for n, r in enumerate(regions) if r.buffer.name == index]
        if not hits:
            raise sch.error(prim, f"block '{blk.name}'", f"has no {kind} buffer named '{index}'", realize)
        if len({id(b) for b, _ in hits}) > 1:
            raise sch.error(prim, f"block '{blk.name}'", f"has several {kind} buffers named '{index}'", realize)
        return hits[0]
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"{prim}: a buffer index must be an int, a buffer name or a Buffer, not {type(index).__name__}")
    n = len(regions)
    if not 0 <= index < n:
        raise sch.error(prim, f"block '{blk.name}'",
                        f"The block has {n} {kind} regions, so `buffer_index` is required to be in [0, {n}). "
                        f"However, the input `buffer_index` is {index}, which is out of the expected range.", realize)
    return regions[index].buffer, index


def buffer_defining_site(idx: FuncIndex, realize: tir.BlockRealize, buffer: tir.Buffer):
    """``(BlockRealize, allocated)`` of the block above ``realize`` (itself included) that
    allocates ``buffer`` or matches it (``allocated`` False); ``(None, False)`` when the buffer
    comes from the function's parameters."""
    for s in [realize] + idx.ancestors(realize):
        if isinstance(s, tir.BlockRealize):
            if any(b is buffer for b in s.block.alloc_buffers):
                return s, True
            if any(m.buffer is buffer for m in s.block.match_buffers):
                return s, False
    return None, False


def check_allocated(sch: Schedule, prim: str, idx: FuncIndex, realize, buffer) -> tir.BlockRealize:
    site, allocated = buffer_defining_site(idx, realize, buffer)
    if site is None or not allocated:
        raise sch.error(prim, f"buffer {buffer.name}",
                        f"The input buffer {buffer.name} is not allocated by a block. This means the buffer is either "
                        "a function parameter or defined in `match_buffer` of a block.", realize)
    return site


def _scope_of(sch: Schedule, prim: str, idx: FuncIndex, realize) -> tir.BlockRealize:
    scope = idx.scope_realize(realize)
    if scope is None:
        raise sch.error(prim, f"block '{realize.block.name}'", "the root block has no enclosing scope", realize)
    return scope


def _writers(scope: tir.BlockRealize, buffer) -> list:
    return [r for r in child_block_realizes(scope) if any(w.buffer is buffer for w in r.block.writes)]


def _only_writer(sch: Schedule, prim: str, scope, buffer, realize):
    writers = _writers(scope, buffer)
    if len(writers) > 1:
        raise sch.error(prim, f"buffer {buffer.name}",
                        f"The buffer {buffer.name} is expected to be written by single block, but got {len(writers)} "
                        f"blocks who write it ({', '.join(w.block.name for w in writers)}).", realize)
    return writers[0] if writers else None


def _raw_consumers(scope, writer) -> list:
    """Blocks of the scope after ``writer`` that read a buffer it writes (TVM's RAW edges)."""
    out, after = [], False
    written = {id(w.buffer) for w in writer.block.writes}
    for r in child_block_realizes(scope):
        if r is writer:
            after = True
            continue
        if after and any(id(x.buffer) in written for x in r.block.reads):
            out.append(r)
    return out


def _consumer_set(sch: Schedule, prim: str, consumer_rvs: list) -> set:
    """ids of the Blocks the user named as consumers, and of the blocks nested in them."""
    out = set()
    for rv in consumer_rvs:
        _, r = sch.resolve_block(rv, prim)
        out.add(id(r.block))
        for nested in blocks_under(r):
            out.add(id(nested.block))
    return out


# ----------------------------------------------------------------------------- where the copy goes


class _LocDetector:
    """Finds where a cache stage goes (TVM's rule): in the lowest statement sequence holding
    both the buffer's writer and a related block (a reader for cache_read), just before the
    first related block. ``loc`` is the For or Block whose body holds that sequence, ``pos``
    the position in it."""

    def __init__(self, scope_block: tir.Block, writer_block: tir.Block, related: set) -> None:
        self.scope_block, self.writer_block, self.related = scope_block, writer_block, related
        self.visited_block = False
        self.visited_related = False
        self.loc = None
        self.pos = -1

    def visit(self, s) -> None:
        if isinstance(s, tir.SeqStmt):
            prev = self.visited_block
            self.visited_block = False
            for n, x in enumerate(s.seq):
                if self.pos != -1:
                    break
                self.visit(x)
                if self.visited_block and self.visited_related and self.pos == -1:
                    self.pos = n
                    break
                if self.visited_related:
                    break
            self.visited_block = self.visited_block or prev
        elif isinstance(s, tir.Block):
            if s is self.scope_block:
                for c in stmt_children(s):
                    self.visit(c)
                if self.visited_related and self.loc is None:
                    self.loc = s
                    if not self.visited_block and self.pos == -1:
                        self.pos = 0
                return
            if s is self.writer_block:
                self.visited_block = True
            elif id(s) in self.related:
                self.visited_related = True
        elif isinstance(s, tir.For):
            self.visit(s.body)
            if self.visited_block and self.visited_related and self.loc is None and self.pos != -1:
                self.loc = s
        else:
            for c in stmt_children(s):
                self.visit(c)


def _detect_location(scope: tir.BlockRealize, writer: tir.BlockRealize, related: list) -> tuple:
    if related:
        det = _LocDetector(scope.block, writer.block, {id(r.block) for r in related})
        det.visit(scope.block)
        return det.loc, det.pos
    body = scope.block.body
    return scope.block, (len(body.seq) if isinstance(body, tir.SeqStmt) else 1)


def _relaxed_write_region(idx: FuncIndex, writer: tir.BlockRealize, buffer, loc) -> list:
    """The region of ``buffer`` that ``writer`` writes while the loops between it and ``loc``
    (exclusive) sweep, in terms of the loops outside ``loc``; each dimension clipped to the
    buffer (the whole dimension where it cannot be bounded)."""
    region = next(w for w in writer.block.writes if w.buffer is buffer).region
    region, outer, relaxed = _relax_below(idx, writer, region, loc, keep_swept=False)
    out = []
    for d, r in enumerate(region):
        got = relaxed[d] if relaxed is not None else None
        out.append(_cover(got, buffer.shape[d], outer))
    return out


def _cover(r, dim, ranges) -> tir.Range:
    """TVM's CoverRange: the range itself, or the whole dimension when it is unbounded or
    provably wider than the dimension."""
    zero = tir.IntImm(dim.dtype, 0)
    if r is None:
        return tir.Range(zero, dim)
    lo, ext, d = const_value(r.min), const_value(r.extent), const_value(dim)
    if lo is not None and ext is not None and d is not None and (lo < 0 or lo + ext > d):
        lo2, hi2 = max(lo, 0), min(lo + ext, d)
        return tir.Range(tir.IntImm(dim.dtype, lo2), tir.IntImm(dim.dtype, hi2 - lo2))
    return tir.Range(simplify(r.min, ranges), simplify(r.extent, ranges))


def _loops_below(idx: FuncIndex, realize, top) -> list:
    """Loops between ``realize`` and ``top`` (a For or a Block above it), ``top`` excluded."""
    out = []
    for a in idx.ancestors(realize):
        if a is top or isinstance(a, tir.Block):
            break
        if isinstance(a, tir.For):
            out.append(a)
    return out


def _relax_below(idx: FuncIndex, realize, region, top, keep_swept: bool) -> tuple:
    """``region`` (of ``realize``'s block) with its iterators replaced by their bindings, the
    ranges of the loops around ``realize`` (without those between it and ``top`` unless
    ``keep_swept``), and the region relaxed over those loops between (None where unbounded)."""
    bindings = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    subst = [tir.Range(substitute(r.min, bindings), r.extent) for r in region]
    loops = _loops_below(idx, realize, top)
    dom = {lp.loop_var: tir.Range(lp.min, lp.extent) for lp in loops}
    if keep_swept:
        outer = loop_ranges_above(idx, realize)
    else:
        swept = {id(lp) for lp in loops}
        outer = {a.loop_var: (a.min, a.extent) for a in idx.ancestors(realize)
                 if isinstance(a, tir.For) and id(a) not in swept}
    return subst, outer, relax_region(subst, dom, outer)


def _const_hull(idx: FuncIndex, realize, region, shape, top) -> Optional[list]:
    """Per dimension, the constant [lo, hi] a block's region spans while every loop around it
    sweeps (None where unbounded); its iterators are replaced by their bindings."""
    _, outer, relaxed = _relax_below(idx, realize, region, top, keep_swept=True)
    if relaxed is None:
        return None
    out = []
    for r, dim in zip(relaxed, shape):
        lo = const_int_bound(r.min, outer)[0]
        hi = const_int_bound(tir.Add(r.min.dtype, r.min, tir.Sub(r.min.dtype, r.extent, tir.IntImm(r.min.dtype, 1))),
                             outer)[1]
        # An access beyond the buffer cannot happen: what overshoots it is cut off by a predicate.
        d = const_value(dim)
        if d is not None:
            lo, hi = max(lo, 0), min(hi, d - 1)
        out.append((lo, hi))
    return out


def _lca(idx: FuncIndex, a, b, scope_block):
    above_a = [x for x in idx.ancestors(a) if isinstance(x, (tir.For, tir.Block))]
    ids_b = {id(x) for x in idx.ancestors(b)}
    for x in above_a:
        if id(x) in ids_b:
            return x
    return scope_block


def _region_cover_broken(idx: FuncIndex, scope: tir.BlockRealize, buffer) -> Optional[str]:
    """TVM's region-cover precondition of cache_read: every block of the scope that reads
    ``buffer`` reads only what the earlier writers of its inputs produce. Only a provable
    violation (constant bounds) is reported; the name of the offending reader, else None."""
    children = child_block_realizes(scope)
    for n, consumer in enumerate(children):
        if not any(r.buffer is buffer for r in consumer.block.reads):
            continue
        for read in consumer.block.reads:
            writers = [w for w in children[:n] if any(x.buffer is read.buffer for x in w.block.writes)]
            if not writers:
                continue
            hulls = []
            for w in writers:
                top = _lca(idx, w, consumer, scope.block)
                region = next(x for x in w.block.writes if x.buffer is read.buffer).region
                hulls.append((_const_hull(idx, w, region, read.buffer.shape, top),
                              _const_hull(idx, consumer, read.region, read.buffer.shape, top)))
            if any(p is None or c is None for p, c in hulls):
                continue
            for d in range(len(read.region)):
                plo = min(p[d][0] for p, _ in hulls)
                phi = max(p[d][1] for p, _ in hulls)
                clo, chi = hulls[0][1][d]
                if clo < plo or chi > phi:
                    return consumer.block.name
    return None


def _all_consumers_under(scope: tir.BlockRealize, buffer, loc) -> bool:
    """Whether every block of the scope that reads ``buffer`` lies under ``loc``."""
    if loc is scope.block:
        return True
    under = {id(r.block) for r in child_block_realizes(loc)}
    for r in child_block_realizes(scope):
        if any(x.buffer is buffer for x in r.block.reads) and id(r.block) not in under:
            return False
    return True


# ----------------------------------------------------------------------------- the cache stage


def _plus(a, b):
    """``a + b`` folding a zero ``a`` (TVM's operator+, which does only that)."""
    if const_value(a) == 0:
        return b
    return tir.Add(b.dtype, make_cast(a, b.dtype), b)


def _scoped_buffer(buffer: tir.Buffer, scope: str, used: set, shape=None) -> tir.Buffer:
    """TVM's WithScope: a new buffer ``<name>_<scope>`` (dots printed as underscores, as TVM's
    printer shows them), made unique in the function, with its own data pointer."""
    base = f"{buffer.name}_{scope}".replace(".", "_")
    name = fresh_name(base, used)
    return dataclasses.replace(buffer, name=name, scope=scope or "global", data=tir.Var("handle", name),
                               shape=list(shape) if shape is not None else list(buffer.shape), span=None)


def _make_cache_stage(region: list, read_buf: tir.Buffer, write_buf: tir.Buffer, block_name: str,
                      full: bool, original: tir.Buffer) -> tuple:
    """Loops ``ax<i>`` over the region's extents around a block ``v<i>`` that copies
    ``read_buf`` into ``write_buf``. ``full``: the cache has the original's shape and the block
    iterators are buffer coordinates; otherwise (compact) they are offsets in the region, and
    the original buffer's side adds the region's start."""
    loop_vars, values, iters = [], [], []
    read_idx, write_idx = [], []
    for n, r in enumerate(region):
        lv = tir.Var(r.extent.dtype, f"ax{n}")
        loop_vars.append(lv)
        values.append(_plus(r.min, lv) if full else lv)
    for n, r in enumerate(region):
        v = tir.Var(r.extent.dtype, f"v{n}")
        if full:
            dim = original.shape[n]
            iters.append(tir.IterVar(v, tir.Range(tir.IntImm(dim.dtype, 0), dim), "S"))
            read_idx.append(v)
            write_idx.append(v)
        else:
            iters.append(tir.IterVar(v, tir.Range(tir.IntImm(r.extent.dtype, 0), r.extent), "S"))
            shifted = _plus(r.min, v)
            if read_buf is original:
                read_idx.append(shifted)
                write_idx.append(v)
            else:
                read_idx.append(v)
                write_idx.append(shifted)
    one = lambda e: tir.IntImm(e.dtype, 1)  # noqa: E731
    block = tir.Block(
        block_name, iters,
        [tir.BufferRegion(read_buf, [tir.Range(i, one(i)) for i in read_idx])],
        [tir.BufferRegion(write_buf, [tir.Range(i, one(i)) for i in write_idx])],
        tir.BufferStore(write_buf, tir.BufferLoad(read_buf.dtype, read_buf, list(read_idx)), list(write_idx)))
    body = tir.BlockRealize(values, tir.IntImm("bool", 1), block)
    for lv, r in reversed(list(zip(loop_vars, region))):
        body = tir.For(lv, tir.IntImm(lv.dtype, 0), r.extent, "serial", body)
    return body, block


def _insert(body, pos: int, stage):
    if isinstance(body, tir.SeqStmt):
        seq = list(body.seq)
        seq.insert(pos, stage)
        return tir.SeqStmt(seq)
    return tir.SeqStmt([stage, body] if pos == 0 else [body, stage])


class _Retarget:
    """Moves accesses of ``old`` to ``new``; for a compact cache the indices are shifted by
    the cached region's start (and simplified, as TVM does)."""

    def __init__(self, old, new, offsets: Optional[list]) -> None:
        self.old, self.new, self.offsets = old, new, offsets

    def indices(self, indices: list) -> list:
        if self.offsets is None:
            return list(indices)
        return [simplify(tir.Sub(i.dtype, i, make_cast(o, i.dtype))) for i, o in zip(indices, self.offsets)]

    def regions(self, regions: list) -> list:
        out = []
        for r in regions:
            if r.buffer is not self.old:
                out.append(r)
            elif self.offsets is None:
                out.append(tir.BufferRegion(self.new, r.region))
            else:
                out.append(tir.BufferRegion(self.new, [
                    tir.Range(simplify(tir.Sub(x.min.dtype, x.min, make_cast(o, x.min.dtype))), x.extent)
                    for x, o in zip(r.region, self.offsets)]))
        return out

    def match_buffers(self, matches: list) -> list:
        out = []
        for m in matches:
            if m.source.buffer is self.old:
                out.append(tir.MatchBufferRegion(m.buffer, self.regions([m.source])[0]))
            else:
                out.append(m)
        return out


class _StageRewriter(IRMutator):
    """What both cache rewrites of the scope share: the stage goes in at ``loc``/``pos`` (a For
    or a Block), its buffer is allocated in the scope block, and accesses of the original
    buffer move to the cache through ``retarget``; ``consumers`` are the ids of the blocks the
    user named (all readers when empty)."""

    def __init__(self, scope_block, loc, pos, stage, alloc, retarget: _Retarget, consumers: set) -> None:
        self.scope_block, self.loc, self.pos, self.stage = scope_block, loc, pos, stage
        self.alloc, self.rt, self.consumers = alloc, retarget, consumers

    def _with_stage(self, s, new):
        if s is self.loc:
            new = dataclasses.replace(new, body=_insert(new.body, self.pos, self.stage))
        return new

    def _with_alloc(self, new):
        return dataclasses.replace(new, alloc_buffers=list(new.alloc_buffers) + [self.alloc])

    def _load(self, e):
        idx = [self.visit_expr(i) for i in e.indices]
        return tir.BufferLoad(e.dtype, self.rt.new, self.rt.indices(idx), e.span)

    def visit_stmt(self, s):
        if isinstance(s, tir.For):
            return self._with_stage(s, super().visit_stmt(s))
        return super().visit_stmt(s)


class _CacheReadRewriter(_StageRewriter):
    """TVM's cache-read rewrite of the scope: readers (all blocks, or only the given consumers)
    read the cache; blocks that write the original buffer are left alone."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.consumes = False

    def visit_stmt(self, s):
        if isinstance(s, tir.Block):
            is_consumer = not self.consumers or id(s) in self.consumers
            if s is not self.scope_block and any(w.buffer is self.rt.old for w in s.writes):
                return s
            saved, self.consumes = self.consumes, is_consumer
            new = super().visit_stmt(s)
            self.consumes = saved
            new = self._with_stage(s, new)
            if s is self.scope_block:
                new = self._with_alloc(new)
            elif is_consumer:
                new = dataclasses.replace(new, reads=self.rt.regions(new.reads),
                                          match_buffers=self.rt.match_buffers(new.match_buffers))
            return new
        return super().visit_stmt(s)

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.rt.old and self.consumes:
            return self._load(e)
        return super().visit_expr(e)


class _CacheWriteRewriter(_StageRewriter):
    """TVM's cache-write rewrite: the writer (and blocks inside it) and the given consumers
    access the cache instead of the original buffer."""

    def __init__(self, writer_block, *args) -> None:
        super().__init__(*args)
        self.writer_block = writer_block
        self.under_writer = False

    def _retarget_block(self, old: tir.Block, new: tir.Block) -> tir.Block:
        return dataclasses.replace(new, writes=self.rt.regions(old.writes), reads=self.rt.regions(old.reads),
                                   match_buffers=self.rt.match_buffers(old.match_buffers))

    def visit_stmt(self, s):
        if isinstance(s, tir.Block):
            if id(s) in self.consumers:
                return self._retarget_block(s, super().visit_stmt(s))
            if s is not self.writer_block and s is not self.scope_block and not self.under_writer:
                return s
            saved = self.under_writer
            self.under_writer = saved or s is self.writer_block
            new = super().visit_stmt(s)
            self.under_writer = saved
            new = self._with_stage(s, new)
            if s is self.scope_block:
                return self._with_alloc(new)
            return self._retarget_block(s, new)
        if isinstance(s, tir.BufferStore) and s.buffer is self.rt.old:
            idx = [self.visit_expr(i) for i in s.indices]
            return tir.BufferStore(self.rt.new, self.visit_expr(s.value), self.rt.indices(idx), s.span)
        return super().visit_stmt(s)

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.rt.old:
            return self._load(e)
        return super().visit_expr(e)


def _all_buffer_names(func: tir.PrimFunc, body) -> set:
    names = {b.name for b in func.buffer_map.values()}

    def walk(x):
        if isinstance(x, tir.Block):
            names.update(b.name for b in x.alloc_buffers)
            names.update(m.buffer.name for m in x.match_buffers)
        for c in stmt_children(x):
            walk(c)

    walk(body)
    _, other = collect_names(body)
    return names | other


def _block_name(base: str, idx: FuncIndex) -> str:
    used = set(idx.blocks)
    return fresh_name(base, used)


# ----------------------------------------------------------------------------- what both cache primitives do


@dataclasses.dataclass
class _CacheCall:
    """A cache_read / cache_write call, its arguments checked: the block (a handle), the
    consumers named (handles, in TVM's order), the block's index and realize, the buffer and
    its position among the block's reads or writes, and the scope block."""

    block: BlockRV
    consumer_rvs: list
    idx: FuncIndex
    realize: tir.BlockRealize
    buffer: tir.Buffer
    index: int
    scope: tir.BlockRealize


def _cache_call(sch: Schedule, prim: str, block, buffer_index, storage_scope: str, consumer_blocks,
                kind: str) -> _CacheCall:
    func_name = block.func_name if isinstance(block, BlockRV) else "main"
    consumer_rvs = [normalize_block(sch, c, func_name) for c in consumer_blocks or []]  # TVM's order
    block = normalize_block(sch, block)
    idx, realize = sch.resolve_block(block, prim)
    check_storage_scope(sch, prim, storage_scope, realize)
    buffer, index = nth_access_buffer(sch, prim, realize, buffer_index, kind)
    return _CacheCall(block, consumer_rvs, idx, realize, buffer, index, _scope_of(sch, prim, idx, realize))


def _add_cache_stage(sch: Schedule, prim: str, call: _CacheCall, storage_scope: str, consumer_blocks, loc, pos,
                     region: list, rewriter) -> BlockRV:
    """Make the cache buffer and the copy block over ``region`` (from the buffer into the cache
    for cache_read, back for cache_write), rewrite the scope with ``rewriter(stage, cache,
    retarget)``, commit and trace the call; the copy block's handle."""
    idx, scope, buffer, func_name = call.idx, call.scope, call.buffer, call.block.func_name
    full = not isinstance(loc, tir.Block) or not _all_consumers_under(scope, buffer, loc)
    used = _all_buffer_names(sch.func(func_name), idx.root)
    cache = _scoped_buffer(buffer, storage_scope, used, None if full else [r.extent for r in region])
    name = _block_name(f"{buffer.name}_{storage_scope}", idx)
    src, dst = (buffer, cache) if prim == "cache_read" else (cache, buffer)
    stage, _ = _make_cache_stage(region, src, dst, name, full, buffer)
    rt = _Retarget(buffer, cache, None if full else [r.min for r in region])
    new_scope_block = rewriter(stage, cache, rt).visit_stmt(scope.block)
    sch.commit(func_name, _replace_block(idx, scope, new_scope_block))
    out = sch.block_rv(func_name, name)
    index_name = "read_buffer_index" if prim == "cache_read" else "write_buffer_index"
    items = [("block", call.block), (index_name, call.index), ("storage_scope", storage_scope)]
    if consumer_blocks:
        items.append(("consumer_blocks", call.consumer_rvs))
    record_call(sch, prim, items, out)
    return out


# ----------------------------------------------------------------------------- cache_read


@primitive(record=False)
def cache_read(sch: Schedule, block, read_buffer_index, storage_scope: str, consumer_blocks=None) -> BlockRV:
    """Copy the ``read_buffer_index``-th buffer ``block`` reads into a new buffer of
    ``storage_scope`` and make its readers (all of them, or only ``consumer_blocks``) read the
    copy. Returns the copy block (``<buffer>_<scope>``), placed right after the buffer's
    writer in the scope (or first in the scope for a buffer nobody there writes), over loops
    ``ax0, ax1, ...`` that `compute_at` can then move under the reader's tiles."""
    prim = "cache_read"
    call = _cache_call(sch, prim, block, read_buffer_index, storage_scope, consumer_blocks, "read")
    idx, realize, buffer, scope = call.idx, call.realize, call.buffer, call.scope
    broken = _region_cover_broken(idx, scope, buffer)
    if broken is not None:
        raise sch.error(prim, f"block '{scope.block.name}'",
                        f"The scope's region cover is not complete: block '{broken}' reads more of a buffer than "
                        "the blocks before it write (the region cover property must hold for every reader of "
                        f"{buffer.name}).", realize)
    consumers = _consumer_set(sch, prim, call.consumer_rvs)
    writer = _only_writer(sch, prim, scope, buffer, realize)
    if writer is not None:
        if consumers:
            related = [r for r in child_block_realizes(scope) if id(r.block) in consumers]
            if not related:  # named consumers nested deeper: the detector sees their scope-level parents
                related = [r for r in child_block_realizes(scope)
                           if any(id(x.block) in consumers for x in [r] + blocks_under(r))]
        else:
            related = _raw_consumers(scope, writer)
        loc, pos = _detect_location(scope, writer, related)
        if loc is None:
            raise sch.error(prim, f"block '{realize.block.name}'",
                            f"cannot place the cache of {buffer.name}: no reader of it follows its writer "
                            f"'{writer.block.name}' in the scope", realize)
        region = _relaxed_write_region(idx, writer, buffer, loc)
    else:
        loc, pos = scope.block, 0
        given = next((r for r in scope.block.reads if r.buffer is buffer), None)
        region = list(given.region) if given is not None else [
            tir.Range(tir.IntImm(d.dtype, 0), d) for d in buffer.shape]
    return _add_cache_stage(sch, prim, call, storage_scope, consumer_blocks, loc, pos, region,
                            lambda stage, cache, rt: _CacheReadRewriter(scope.block, loc, pos, stage, cache, rt,
                                                                        consumers))


def _replace_block(idx: FuncIndex, realize: tir.BlockRealize, new_block: tir.Block):
    return replace(idx, realize, tir.BlockRealize(realize.iter_values, realize.predicate, new_block))


# ----------------------------------------------------------------------------- cache_write


@primitive(record=False)
def cache_write(sch: Schedule, block, write_buffer_index, storage_scope: str, consumer_blocks=None) -> BlockRV:
    """Make ``block`` write its ``write_buffer_index``-th buffer into a new buffer of
    ``storage_scope`` and copy that back to the original right after it (before the first
    reader that is not in ``consumer_blocks``; the named consumers read the new buffer
    directly). Returns the copy-back block (``<buffer>_<scope>``): `reverse_compute_at` moves
    it under the writer's tiles so that each tile's accumulators stay in registers."""
    prim = "cache_write"
    call = _cache_call(sch, prim, block, write_buffer_index, storage_scope, consumer_blocks, "write")
    idx, realize, buffer, scope = call.idx, call.realize, call.buffer, call.scope
    consumers = _consumer_set(sch, prim, call.consumer_rvs)
    writers = _writers(scope, buffer)
    if len(writers) != 1 or writers[0] is not realize:
        raise sch.error(prim, f"buffer {buffer.name}",
                        f"The buffer {buffer.name} is expected to be written by single block, but got {len(writers)} "
                        f"blocks who write it ({', '.join(w.block.name for w in writers)}).", realize)
    related = [r for r in _raw_consumers(scope, realize) if id(r.block) not in consumers]
    loc, pos = _detect_location(scope, realize, related)
    if loc is None:
        raise sch.error(prim, f"block '{realize.block.name}'", f"cannot place the copy-back of {buffer.name}", realize)
    region = _relaxed_write_region(idx, realize, buffer, loc)
    return _add_cache_stage(sch, prim, call, storage_scope, consumer_blocks, loc, pos, region,
                            lambda stage, cache, rt: _CacheWriteRewriter(realize.block, scope.block, loc, pos, stage,
                                                                         cache, rt, consumers))


# ----------------------------------------------------------------------------- set_scope


class _BufferSwap(IRMutator):
    """Every use of ``old`` (allocation, regions, loads, stores, match sources) becomes ``new``."""

    def __init__(self, old, new) -> None:
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_stmt(self, s):
        if isinstance(s, tir.Block):
            new = super().visit_stmt(s)
            rt = _Retarget(self.old, self.new, None)
            return dataclasses.replace(
                new, reads=rt.regions(new.reads), writes=rt.regions(new.writes),
                match_buffers=rt.match_buffers(new.match_buffers),
                alloc_buffers=[self.new if b is self.old else b for b in new.alloc_buffers])
        return super().visit_stmt(s)


@primitive(record=False)
def set_scope(sch: Schedule, block, buffer_index, storage_scope: str) -> None:
    """Move the ``buffer_index``-th buffer ``block`` writes to ``storage_scope`` (renamed
    ``<buffer>_<scope>``, as TVM does), without a copy. Only a buffer a block allocates can
    move: a function parameter's memory belongs to the caller."""
    prim = "set_scope"
    block = normalize_block(sch, block)
    idx, realize = sch.resolve_block(block, prim)
    buffer, index = nth_access_buffer(sch, prim, realize, buffer_index, "write")
    items = [("block", block), ("buffer_index", index), ("storage_scope", storage_scope)]
    if buffer.scope == storage_scope or (storage_scope == "" and buffer.scope == "global"):
        record_call(sch, "set_scope", items, None)
        return None
    check_storage_scope(sch, prim, storage_scope, realize)
    site = check_allocated(sch, prim, idx, realize, buffer)
    used = _all_buffer_names(sch.func(block.func_name), idx.root)
    used.discard(buffer.name)
    new = _scoped_buffer(buffer, storage_scope, used)
    new_block = _BufferSwap(buffer, new).visit_stmt(site.block)
    sch.commit(block.func_name, _replace_block(idx, site, new_block))
    record_call(sch, "set_scope", items, None)
    return None
