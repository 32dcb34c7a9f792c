"""Block-layout primitives the default GPU schedules (DLight) build on: `transform_block_layout`,
`add_unit_loop`, `reindex` and `pad_einsum`. The index function the layout primitives take is
an `IndexMap` (tvmscript/ir/index_map.py), or a Python function that `as_index_map` makes one of.

Why these exist: DLight first puts every block in a normal form it can reason about — one loop
per non-unit iterator, named ``ax0, ax1, ...`` with iterators ``v0, v1, ...``
(`transform_block_layout`) — and a matmul is rewritten to ``C[S, I, J] += A[S, I, K] *
B[S, J, K]`` by giving each operand a copy indexed by the block's iterators (`reindex`) whose
layout is then fused (``transform_layout``); `pad_einsum` rounds the iteration space up to the
tile sizes. Each primitive checks its preconditions first and commits once, so a failing call
changes nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.arith.index_map import inverse_indices, map_indices, map_shape
from tvmscript.ir.index_map import IndexMap
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in

from ...ir.tir_analysis import collect_accesses
from .common import const_value
from .state import BlockRV, LoopRV, Schedule, primitive
from .tree import child_block_realizes, collect_names, replace


def as_index_map(index_map, dtype: str, ndim: Optional[int] = None) -> IndexMap:
    """``index_map`` as an `IndexMap`: itself, or the map a Python function of the indices computes."""
    if isinstance(index_map, IndexMap):
        return index_map
    if callable(index_map):
        return IndexMap.from_func(index_map, ndim=ndim, index_dtype=dtype)
    raise TypeError(f"expected an IndexMap or a function, not {type(index_map).__name__}")


# ----------------------------------------------------------------------------- block helpers


def substitute_block(block: tir.Block, mapping: dict, ranges: dict) -> tir.Block:
    """``block`` with its iterators replaced by ``mapping`` in the body, the init and the
    read/write regions, buffer indices simplified with ``ranges``, fused iterators kept whole
    (``keep_marks``)."""
    sub = _IndexSubstituter(mapping, ranges)
    body = sub.visit_stmt(block.body)
    init = sub.visit_stmt(block.init) if block.init is not None else None

    def region(r: tir.BufferRegion) -> tir.BufferRegion:
        return tir.BufferRegion(r.buffer, [tir.Range(simplify(substitute(x.min, mapping), ranges, keep_marks=True),
                                                     simplify(substitute(x.extent, mapping), ranges, keep_marks=True))
                                           for x in r.region])

    return dataclasses.replace(block, body=body, init=init, reads=[region(r) for r in block.reads],
                               writes=[region(w) for w in block.writes])


class _IndexSubstituter(IRMutator):
    def __init__(self, mapping: dict, ranges: dict) -> None:
        self.mapping, self.ranges = mapping, ranges

    def visit_expr(self, e):
        if isinstance(e, tir.Var):
            return self.mapping.get(e, e)
        if isinstance(e, tir.BufferLoad):
            idx = [simplify(self.visit_expr(i), self.ranges, keep_marks=True) for i in e.indices]
            return tir.BufferLoad(e.dtype, e.buffer, idx, e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore):
            idx = [simplify(self.visit_expr(i), self.ranges, keep_marks=True) for i in s.indices]
            return tir.BufferStore(s.buffer, self.visit_expr(s.value), idx, s.span)
        return super().visit_stmt(s)


def _is_trivial_binding(loops: list, realize: tir.BlockRealize) -> bool:
    if len(loops) != len(realize.iter_values):
        return False
    return all(v is lp.loop_var for v, lp in zip(realize.iter_values, loops))


# ----------------------------------------------------------------------------- transform_block_layout


@primitive
def transform_block_layout(sch: Schedule, block: BlockRV, index_map) -> None:
    """Re-express a block's iteration space through ``index_map`` (block iterators -> new
    iterators): the block gets one iterator ``v<i>`` per output, bound to a new loop ``ax<i>``,
    and its body reads the old iterators back through the inverse map. The loops above the
    block must hold only it, start at 0 and bind its iterators one to one, in order (TVM's
    preconditions); a new iterator that mixes spatial and reduce iterators is refused."""
    idx, realize = sch.resolve_block(block, "transform_block_layout")
    blk = realize.block
    name = f"block '{blk.name}'"
    loops = idx.loops_above(realize)
    for lp in loops:
        if const_value(lp.min) != 0:
            raise sch.error("transform_block_layout", f"loop '{lp.loop_var.name}'", "the loop does not start at 0",
                            realize)
    if loops:
        top = loops[0]
        if child_block_realizes(top) != [realize] or any(
                isinstance(lp.body, tir.SeqStmt) for lp in loops):
            raise sch.error("transform_block_layout", name,
                            f"the loops above it (from '{top.loop_var.name}') hold other statements; they must hold "
                            "only this block", realize)
        scope = top
    else:
        scope = realize
    if not _is_trivial_binding(loops, realize):
        raise sch.error("transform_block_layout", name,
                        "its iterators are not bound one to one, in order, to the loops above it (a trivial binding)",
                        realize)
    dtype = blk.iter_vars[0].var.dtype if blk.iter_vars else "int64"
    imap = as_index_map(index_map, dtype, ndim=len(blk.iter_vars))
    if len(imap.initial_indices) != len(blk.iter_vars):
        raise sch.error("transform_block_layout", name,
                        f"the index map takes {len(imap.initial_indices)} indices but the block has "
                        f"{len(blk.iter_vars)} iterators", realize)
    old_vars = [iv.var for iv in blk.iter_vars]
    extents = [iv.dom.extent for iv in blk.iter_vars]
    kinds = {iv.var: iv.kind for iv in blk.iter_vars}
    transformed = map_indices(imap, old_vars)
    new_extents = map_shape(imap, extents)
    new_iters, new_vars = [], []
    for n, (e, ext) in enumerate(zip(transformed, new_extents)):
        v = tir.Var(e.dtype, f"v{n}")
        if const_value(ext) == 1:
            kind = "S"
        else:
            used = {kinds[x] for x in vars_in([e]) if x in kinds}
            if used == {"S"}:
                kind = "S"
            elif used == {"R"}:
                kind = "R"
            else:
                raise sch.error("transform_block_layout", name,
                                f"the new iterator {n} ({e}) mixes iterators of different kinds (or none)", realize)
        new_vars.append(v)
        new_iters.append(tir.IterVar(v, tir.Range(tir.IntImm(v.dtype, 0), ext), kind))
    ranges = {v: (tir.IntImm(v.dtype, 0), ext) for v, ext in zip(new_vars, new_extents)}
    inverse = inverse_indices(imap, new_vars, extents)
    if inverse is None:
        raise sch.error("transform_block_layout", name, "the index map is not a bijective affine map (it can only "
                        "fuse iterators and drop or add unit ones)", realize)
    mapping = {old: make_cast(e, old.dtype) for old, e in zip(old_vars, inverse)}
    # TVM simplifies the indices the way it simplifies bindings: a fused ``(v0 * 4 + v1) // 8``
    # stays whole, ``v1 % 8`` with ``v1 < 8`` becomes ``v1``
    new_block = substitute_block(blk, mapping, ranges)
    new_block = dataclasses.replace(new_block, iter_vars=new_iters)
    loop_vars = [tir.Var(v.dtype, f"ax{n}") for n, v in enumerate(new_vars)]
    body = _wrap_loops(tir.BlockRealize(list(loop_vars), realize.predicate, new_block), new_extents)
    sch.commit(block.func_name, replace(idx, scope, body))


# ----------------------------------------------------------------------------- add_unit_loop


@primitive
def add_unit_loop(sch: Schedule, block_or_loop) -> LoopRV:
    """Wrap a block (or a loop) in a new loop ``u`` of extent 1 and return it: the handle
    rules use when a block has no loop of the kind they need (a reduction with no spatial
    loop still gets a loop to bind to ``blockIdx.x``)."""
    if isinstance(block_or_loop, BlockRV):
        idx, node = sch.resolve_block(block_or_loop, "add_unit_loop")
        if idx.parent_of(node) is None:
            raise sch.error("add_unit_loop", f"block '{node.block.name}'", "cannot add a loop above the root block",
                            node)
    else:
        idx, node = sch.resolve_loop(block_or_loop, "add_unit_loop")
    u = tir.Var("int32", "u")
    new = tir.For(u, tir.IntImm("int32", 0), tir.IntImm("int32", 1), "serial", node)
    sch.commit(block_or_loop.func_name, replace(idx, node, new))
    return sch.loop_rv(block_or_loop.func_name, u)


# ----------------------------------------------------------------------------- reindex


def _buffer_of(sch, prim, realize, buffer) -> tuple:
    """``(kind, Buffer)`` for ``("read", i)`` / ``("write", i)`` / a Buffer / a buffer name."""
    blk = realize.block
    if isinstance(buffer, tuple) and len(buffer) == 2 and buffer[0] in ("read", "write"):
        kind, n = buffer
        regions = blk.reads if kind == "read" else blk.writes
        if not isinstance(n, int) or not 0 <= n < len(regions):
            raise sch.error(prim, f"block '{blk.name}'",
                            f"{kind} buffer index {n} is out of range: the block has {len(regions)} {kind} buffer(s)",
                            realize)
        return kind, regions[n].buffer
    if isinstance(buffer, (str, tir.Buffer)):
        for kind, regions in (("read", blk.reads), ("write", blk.writes)):
            for r in regions:
                if r.buffer is buffer or r.buffer.name == buffer:
                    return kind, r.buffer
        raise sch.error(prim, f"block '{blk.name}'", f"does not access buffer '{getattr(buffer, 'name', buffer)}'",
                        realize)
    raise TypeError(f"{prim}: buffer must be ('read', i), ('write', i), a Buffer or a name")


class _AccessFinder(TIRVisitor):
    """Collects the index lists of the loads and stores of one buffer, in the order an
    `IRMutator` meets them (a block's body before its init, a let's value before its body)."""

    def __init__(self, buf) -> None:
        self.buf, self.found = buf, []

    def visit_BufferLoad(self, e) -> None:
        if e.buffer is self.buf:
            self.found.append(e.indices)
        self.generic_visit(e)

    def visit_BufferStore(self, s) -> None:
        if s.buffer is self.buf:
            self.found.append(s.indices)
        self.generic_visit(s)

    def visit_Block(self, s) -> None:
        self.visit(s.body)
        if s.init is not None:
            self.visit(s.init)

    def _visit_let(self, s) -> None:
        self.visit(s.value)
        self.visit(s.body)

    visit_Let = visit_LetStmt = _visit_let


class _BufferReplacer(IRMutator):
    """Every access to ``old`` becomes an access to ``new`` at ``f(indices)``."""

    def __init__(self, old, new, f) -> None:
        self.old, self.new, self.f = old, new, f

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.old:
            return tir.BufferLoad(e.dtype, self.new, self.f([self.visit_expr(i) for i in e.indices]), e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer is self.old:
            return tir.BufferStore(self.new, self.visit_expr(s.value), self.f([self.visit_expr(i) for i in s.indices]), s.span)
        return super().visit_stmt(s)


def replace_buffer_in_block(block: tir.Block, old, new, f) -> tir.Block:
    """``block`` accessing ``new`` at ``f(indices)`` wherever it accessed ``old`` (body, init
    and point regions)."""
    rep = _BufferReplacer(old, new, f)
    body = rep.visit_stmt(block.body)
    init = rep.visit_stmt(block.init) if block.init is not None else None

    def region(r):
        if r.buffer is not old:
            return r
        return tir.BufferRegion(new, [tir.Range(i, tir.IntImm(i.dtype, 1)) for i in f([x.min for x in r.region])])

    return dataclasses.replace(block, body=body, init=init, reads=[region(r) for r in block.reads],
                               writes=[region(w) for w in block.writes])


def _top_stmt(idx, realize):
    """The outermost loop above ``realize`` in its scope (or the realize itself)."""
    loops = idx.loops_above(realize)
    return loops[0] if loops else realize


def _insert_next_to(idx, anchor, new_stmts: list, before: bool):
    parent = idx.parent_of(anchor)
    seq = list(new_stmts) + [anchor] if before else [anchor] + list(new_stmts)
    return replace(idx, anchor, tir.SeqStmt(seq)), parent


def _add_alloc(body, scope_name: Optional[str], buffers: list):
    """``body`` with ``buffers`` appended to the allocations of the block ``scope_name``."""
    class _Add(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.Block) and s.name == scope_name:
                return dataclasses.replace(s, alloc_buffers=list(s.alloc_buffers) + list(buffers))
            if isinstance(s, tir.Block):
                body = self.visit_stmt(s.body)
                return s if body is s.body else dataclasses.replace(s, body=body)
            return super().visit_stmt(s)

    return _Add().visit_stmt(body)


def _copy_block(name: str, dst, dst_idx, src, src_idx, vars_, extents, loop_names):
    """``for ...: with block(name): dst[dst_idx] = src[src_idx]`` over ``vars_``."""
    loops = [tir.Var(v.dtype, n) for v, n in zip(vars_, loop_names)]
    iters = [tir.IterVar(v, tir.Range(tir.IntImm(v.dtype, 0), e), "S") for v, e in zip(vars_, extents)]
    store = tir.BufferStore(dst, tir.BufferLoad(dst.dtype, src, list(src_idx)), list(dst_idx))
    reads, writes = collect_accesses(store)
    blk = tir.Block(name, iters, reads, writes, store)
    return _wrap_loops(tir.BlockRealize(list(loops), tir.IntImm("bool", 1), blk), extents)


@primitive
def reindex(sch: Schedule, block: BlockRV, buffer) -> BlockRV:
    """Give ``block`` a private copy of one of its buffers, indexed directly by the block's
    iterators (``A[vi, vk]`` becomes ``A_reindex[vi, vk]``, ``B[vk, vj]`` becomes
    ``B_reindex[vj, vk]``: dimensions in iterator order), with a block copying the buffer in
    (a read) or out (a write); a composite index (``pad[yy + ry]``) stays in the copy block.
    Returns the copy block. The block must access the buffer at one index tuple."""
    idx, realize = sch.resolve_block(block, "reindex")
    blk = realize.block
    kind, buf = _buffer_of(sch, "reindex", realize, buffer)
    name = f"block '{blk.name}'"
    finder = _AccessFinder(buf)
    finder.visit(blk.body)
    if blk.init is not None:
        finder.visit(blk.init)
    from tvmscript.ir.arith import expr_key
    keys = {tuple(expr_key(i) for i in ix) for ix in finder.found}
    if len(keys) != 1:
        raise sch.error("reindex", name, f"accesses buffer '{buf.name}' at {len(keys)} different indices; reindex "
                        "needs exactly one", realize)
    indices = finder.found[0]
    iter_vars = {iv.var for iv in blk.iter_vars}
    in_indices = set(vars_in(indices))
    if not in_indices <= iter_vars:
        raise sch.error("reindex", name, f"indexes buffer '{buf.name}' with variables that are not its iterators",
                        realize)
    scope = idx.scope_realize(realize)
    used = [iv for iv in blk.iter_vars if iv.var in in_indices]
    shape = [iv.dom.extent for iv in used]
    new_buf = tir.Buffer(f"{buf.name}_reindex", shape, buf.dtype, data=tir.Var("handle", f"{buf.name}_reindex"))
    used_vars = [iv.var for iv in used]
    new_block = replace_buffer_in_block(blk, buf, new_buf, lambda _ix: list(used_vars))
    # the copy block: one iterator per dimension of the copy
    cvars = [tir.Var(iv.var.dtype, f"v{n}") for n, iv in enumerate(used)]
    sub = {iv.var: cv for iv, cv in zip(used, cvars)}
    orig_idx = [substitute(i, sub) for i in indices]
    names = [f"ax{n}" for n in range(len(cvars))]
    if kind == "read":
        copy = _copy_block(f"{buf.name}_reindex_reindex", new_buf, cvars, buf, orig_idx, cvars, shape, names)
        copy_name = f"{buf.name}_reindex_reindex"
    else:
        copy = _copy_block(f"{buf.name}_reindex", buf, orig_idx, new_buf, cvars, cvars, shape, names)
        copy_name = f"{buf.name}_reindex"
    blocks, _ = collect_names(idx.root)
    if copy_name in blocks:
        raise sch.error("reindex", name, f"a block named '{copy_name}' already exists", realize)
    new_realize = tir.BlockRealize(realize.iter_values, realize.predicate, new_block)
    idx2_body = replace(idx, realize, new_realize)
    from .tree import FuncIndex
    idx2 = FuncIndex(idx2_body)
    top = _top_stmt(idx2, idx2.blocks[blk.name])
    body, _ = _insert_next_to(idx2, top, [copy], before=(kind == "read"))
    scope_name = scope.block.name if scope is not None else None
    if scope_name is None:
        raise sch.error("reindex", name, "the function has no root block to allocate the copy in", realize)
    body = _add_alloc(body, scope_name, [new_buf])
    sch.commit(block.func_name, body)
    return sch.block_rv(block.func_name, copy_name)


# ----------------------------------------------------------------------------- pad_einsum


@primitive
def pad_einsum(sch: Schedule, block: BlockRV, padding: list) -> None:
    """Round each iterator's extent of an einsum block up to a multiple of ``padding`` (one
    factor per iterator). Buffers indexed by a padded iterator are replaced by padded copies
    ``<name>_pad``: inputs filled by a block that writes zeros past the original extent,
    outputs copied back by a block after the computation; the extra iterations then compute
    on zeros and are dropped. Needs a trivial binding and indices that are iterators or
    constants (the einsum form)."""
    idx, realize = sch.resolve_block(block, "pad_einsum")
    blk = realize.block
    name = f"block '{blk.name}'"
    padding = [int(const_value(p) if isinstance(p, tir.PrimExpr) else p) for p in padding]
    if len(padding) != len(blk.iter_vars):
        raise sch.error("pad_einsum", name, f"{len(padding)} padding factors for {len(blk.iter_vars)} iterators",
                        realize)
    if any(p <= 0 for p in padding):
        raise sch.error("pad_einsum", name, "padding factors must be positive", realize)
    loops = idx.loops_above(realize)
    if not _is_trivial_binding(loops, realize):
        raise sch.error("pad_einsum", name, "its iterators are not bound one to one to the loops above it", realize)
    if loops and (child_block_realizes(loops[0]) != [realize] or any(isinstance(lp.body, tir.SeqStmt) for lp in loops)):
        raise sch.error("pad_einsum", name, "the loops above it hold other statements", realize)
    new_ext, changed = {}, set()
    for iv, p in zip(blk.iter_vars, padding):
        ext = iv.dom.extent
        dt = ext.dtype
        c = const_value(ext)
        if c is not None:
            n = -(-c // p) * p
            new_ext[iv.var] = tir.IntImm(dt, n)
            if n != c:
                changed.add(iv.var)
        elif p == 1:
            new_ext[iv.var] = ext
        else:
            new_ext[iv.var] = simplify(tir.Mul(dt, tir.FloorDiv(dt, tir.Add(dt, ext, tir.IntImm(dt, p - 1)),
                                                                 tir.IntImm(dt, p)), tir.IntImm(dt, p)))
            changed.add(iv.var)
    if not changed:
        return None
    iter_set = {iv.var for iv in blk.iter_vars}
    accesses = []  # (kind, buffer, indices)
    seen = set()
    for kind, regions in (("write", blk.writes), ("read", blk.reads)):
        for r in regions:
            if id(r.buffer) in seen:
                continue
            seen.add(id(r.buffer))
            finder = _AccessFinder(r.buffer)
            finder.visit(blk.body)
            if blk.init is not None:
                finder.visit(blk.init)
            for ix in finder.found:
                for i in ix:
                    if not isinstance(i, (tir.Var, tir.IntImm)) or (isinstance(i, tir.Var) and i not in iter_set):
                        raise sch.error("pad_einsum", name, f"indexes buffer '{r.buffer.name}' with {i}; the einsum "
                                        "form needs each index to be an iterator or a constant", realize)
            if finder.found:
                accesses.append((kind, r.buffer, finder.found[0]))
    scope = idx.scope_realize(realize)
    if scope is None:
        raise sch.error("pad_einsum", name, "the function has no root block to allocate padded buffers in", realize)
    pads_in, pads_out, allocs = [], [], []
    new_block = blk
    order = [a for a in accesses if a[0] == "read"] + [a for a in accesses if a[0] == "write"]
    for kind, buf, ix in order:
        if not any(isinstance(i, tir.Var) and i in changed for i in ix):
            continue
        shape = [new_ext[i] if isinstance(i, tir.Var) else d for i, d in zip(ix, buf.shape)]
        pad = tir.Buffer(f"{buf.name}_pad", shape, buf.dtype, data=tir.Var("handle", f"{buf.name}_pad"))
        allocs.append(pad)
        new_block = replace_buffer_in_block(new_block, buf, pad, lambda i: list(i))
        vs = [tir.Var(d.dtype if isinstance(d, tir.PrimExpr) else "int32", f"v{n}") for n, d in enumerate(shape)]
        lnames = [f"i{n}" for n in range(len(vs))]
        if kind == "read":
            cond = None
            for v, i, d in zip(vs, ix, buf.shape):
                if isinstance(i, tir.Var) and i in changed:
                    c = tir.LT("bool", v, d)
                    cond = c if cond is None else tir.And("bool", cond, c)
            zero = tir.const(0, buf.dtype)
            value = tir.Call(buf.dtype, "tir.if_then_else", [cond, tir.BufferLoad(buf.dtype, buf, list(vs)), zero])
            store = tir.BufferStore(pad, value, list(vs))
            reads, writes = collect_accesses(store)
            pblk = tir.Block(f"{buf.name}_pad", [tir.IterVar(v, tir.Range(tir.IntImm(v.dtype, 0), d), "S")
                                                 for v, d in zip(vs, shape)], reads, writes, store)
            body = tir.BlockRealize([tir.Var(v.dtype, n) for v, n in zip(vs, lnames)], tir.IntImm("bool", 1), pblk)
            body = _wrap_loops(body, shape)
            pads_in.append(body)
        else:
            pads_out.append(_copy_block(f"{buf.name}_pad", buf, vs, pad, vs, vs, list(buf.shape), lnames))
    new_iters = [dataclasses.replace(iv, dom=tir.Range(iv.dom.min, new_ext[iv.var])) for iv in new_block.iter_vars]
    new_block = dataclasses.replace(new_block, iter_vars=new_iters)
    new_realize = tir.BlockRealize(realize.iter_values, realize.predicate, new_block)
    nest = new_realize
    for lp, iv in reversed(list(zip(loops, blk.iter_vars))):
        nest = dataclasses.replace(lp, extent=new_ext[iv.var], body=nest)
    top = loops[0] if loops else realize
    body = replace(idx, top, tir.SeqStmt(pads_in + [nest] + pads_out))
    body = _add_alloc(body, scope.block.name, allocs)
    sch.commit(block.func_name, body)
    return None


def _wrap_loops(realize: tir.BlockRealize, extents: list):
    body = realize
    for lv, e in reversed(list(zip(realize.iter_values, extents))):
        body = tir.For(lv, tir.IntImm(lv.dtype, 0), e, "serial", body)
    return body
