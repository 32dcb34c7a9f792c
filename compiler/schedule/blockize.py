"""`blockize`: wrap the loops under a loop, with the one block inside them, into a new block.

Tensorization and hand-written micro-kernels work on whole tiles: after tiling a matmul, the
4x4x4 tile under ``i_1`` should be one unit of work that reads a 4x4 block of ``A``. Blockize
makes that unit explicit: the new outer block ``<name>_o`` has one iterator per original
iterator covering the *outer* part of its range, and its inner block keeps the *inner* part::

    vi = i_0 * 4 + i_1   ->   outer: vi_o = i_0          inner: vi_i = i_1
                              the body reads A[vi_o * 4 + vi_i, ...]

The split of each binding into ``outer * E + inner`` is the subspace division of
`iter_map.subspace_divide` (TVM's ``SubspaceDivide``), with TVM's fallback for bindings that
use only outer or only inner loops. The outer block declares the regions the whole tile
touches (each inner iterator relaxed over its range). A reduction's ``T.init`` moves to the
outer block as a block ``<name>_init`` over the inner spatial iterators, so the tile is
initialised once before its first update, as TVM prints it.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import structural_equal
from tvmscript.ir import tir
from tvmscript.ir.arith import eval_range, simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import conjuncts, make_add, make_sub
from tvmscript.ir.tir_visitor import vars_in

from .common import const_value
from .iter_map import subspace_divide, trivial_divide
from .state import Schedule, primitive
from .tree import child_block_realizes, collect_names, fresh_name, replace

__all__ = ["blockize", "substitute_block", "relax_regions", "union_regions"]


# ----------------------------------------------------------------------------- helpers


class _BlockSubstituter(IRMutator):
    """Substitutes Vars everywhere below a statement, block signatures included (iterator
    domains, read/write regions, bindings, predicates); integer expressions that changed are
    simplified with ``ranges`` (TVM's ReplaceAndSimplify)."""

    def __init__(self, mapping: dict, ranges) -> None:
        self.mapping = mapping
        self.ranges = ranges

    def visit_expr(self, e):
        if isinstance(e, tir.Var):
            return self.mapping.get(e, e)
        new = super().visit_expr(e)
        if new is not e and self.ranges is not None and tir.is_int(new.dtype) \
                and not isinstance(new, (tir.Var, tir.IntImm)):
            return simplify(new, self.ranges)
        return new

    def region(self, r: tir.BufferRegion) -> tir.BufferRegion:
        rng = [tir.Range(self.visit_expr(x.min), self.visit_expr(x.extent)) for x in r.region]
        if all(a.min is b.min and a.extent is b.extent for a, b in zip(rng, r.region)):
            return r
        return tir.BufferRegion(r.buffer, rng)

    def visit_stmt(self, s):
        if isinstance(s, tir.Block):
            body = self.visit_stmt(s.body)
            init = self.visit_stmt(s.init) if s.init is not None else None
            iters = [tir.IterVar(iv.var, tir.Range(self.visit_expr(iv.dom.min), self.visit_expr(iv.dom.extent)),
                                 iv.kind) for iv in s.iter_vars]
            reads = [self.region(r) for r in s.reads]
            writes = [self.region(r) for r in s.writes]
            matches = [tir.MatchBufferRegion(m.buffer, self.region(m.source)) for m in s.match_buffers]
            return dataclasses.replace(s, body=body, init=init, iter_vars=iters, reads=reads, writes=writes,
                                       match_buffers=matches)
        return super().visit_stmt(s)


def substitute_block(stmt, mapping: dict, ranges=None):
    """``stmt`` with the Vars of ``mapping`` replaced, block signatures included; with
    ``ranges`` (Var -> (min, extent)) the integer expressions that changed are simplified."""
    if not mapping and ranges is None:
        return stmt
    return _BlockSubstituter(mapping, ranges).visit_stmt(stmt)


def relax_regions(regions: list, dom: dict, ranges=None) -> list:
    """Each region widened over ``dom`` (Var -> `tir.Range`), dimension by dimension; a
    dimension that cannot be bounded covers the whole buffer (TVM's EvalSet + CoverRange)."""
    out = []
    for r in regions:
        rng = []
        for d, x in enumerate(r.region):
            lo = eval_range(x.min, dom, ranges)
            hi = eval_range(tir.Add(x.min.dtype, x.min, tir.Sub(x.min.dtype, x.extent, tir.IntImm(x.min.dtype, 1))),
                            dom, ranges) if not tir.is_const_int(x.extent, 1) else lo
            if lo is None or hi is None:
                shape = r.buffer.shape[d]
                rng.append(tir.Range(tir.IntImm(shape.dtype, 0), shape))
                continue
            mn = lo[0]
            last = simplify(tir.Add(mn.dtype, hi[0], tir.Sub(mn.dtype, hi[1], tir.IntImm(mn.dtype, 1))), ranges)
            ext = simplify(tir.Add(mn.dtype, tir.Sub(mn.dtype, last, mn), tir.IntImm(mn.dtype, 1)), ranges)
            rng.append(tir.Range(mn, ext))
        out.append(tir.BufferRegion(r.buffer, rng))
    return out


def _imm(value, dtype: str):
    return tir.IntImm(dtype, value) if isinstance(value, int) else value


def _loop_chain(sch, prim: str, lp, realize) -> list:
    """The loops from ``lp`` down to ``realize``, outermost first; only loops in between (an
    ``if`` or a second statement would be lost when the loops move into the new block)."""
    chain = [lp]
    cur = lp.body
    while cur is not realize:
        if isinstance(cur, tir.For):
            chain.append(cur)
            cur = cur.body
            continue
        raise sch.error(prim, f"loop '{lp.loop_var.name}'",
                        f"the statements between the loop and block '{realize.block.name}' must be loops only "
                        f"(found {type(cur).__name__})", realize)
    return chain


# ----------------------------------------------------------------------------- blockize


class _Derived:
    """One block's division: outer and inner iterators, their bindings, the substitution of
    the block's iterators, and the division's predicates."""

    def __init__(self) -> None:
        self.outer_iters, self.outer_values = [], []
        self.inner_iters, self.inner_values = [], []
        self.subst: dict = {}
        self.division = None


def _derive(sch, realize, all_loops: list, inner_loops: list, preserve_unit_iters: bool, where: str,
            reuse: "_Derived" = None) -> _Derived:
    """Divide ``realize``'s bindings between the loops of ``inner_loops`` and the other loops of
    ``all_loops`` (TVM's SubspaceDivide, then its trivial fallback) and derive the iterators of
    the outer and the inner block (TVM's DeriveBlockBinding). With ``reuse``, the outer
    iterators are those already made for another block, which must divide the same way."""
    block = realize.block
    outer_vars = {x.loop_var for x in all_loops} - {x.loop_var for x in inner_loops}
    inner_vars = {x.loop_var for x in inner_loops}
    division = subspace_divide(realize.iter_values, all_loops, inner_vars, realize.predicate, preserve_unit_iters)
    if division is None:
        division = trivial_divide(block.iter_vars, realize.iter_values, realize.predicate, outer_vars, inner_vars)
    if division is None:
        raise sch.error("blockize", f"block '{block.name}'",
                        f"the bindings of the block can not be blockized by the loops starting at {where}: they "
                        "do not divide into a part over the loops outside and a part over the loops inside", realize)
    if reuse is not None and len(reuse.outer_iters) != len(block.iter_vars):
        raise sch.error("blockize", f"block '{block.name}'",
                        "the blocks must have as many iterators as each other to share one outer block", realize)
    loop_ranges = {x.loop_var: (x.min, x.extent) for x in all_loops}
    d = _Derived() if reuse is None else reuse
    if reuse is not None:
        d.inner_iters, d.inner_values, d.subst = [], [], {}
    d.division = division
    for n, (iv, (o_expr, o_ext, i_expr, i_ext)) in enumerate(zip(block.iter_vars, division.parts)):
        dt = iv.var.dtype
        if o_ext is None:  # a symbolic outer extent: the iterator's, over the inner one's
            o_ext = simplify(tir.FloorDiv(dt, iv.dom.extent, _imm(i_ext, dt)))
        o_value = simplify(o_expr, loop_ranges, keep_marks=True)
        if reuse is None:
            ov = tir.Var(dt, iv.var.name + "_o")
            d.outer_iters.append(tir.IterVar(ov, tir.Range(tir.IntImm(dt, 0), _imm(o_ext, dt)), iv.kind))
            d.outer_values.append(o_value)
        else:
            ov = d.outer_iters[n].var
            same_ext = const_value(d.outer_iters[n].dom.extent) == const_value(o_ext) is not None
            if not same_ext or not structural_equal(d.outer_values[n], o_value):
                raise sch.error("blockize", f"block '{block.name}'",
                                f"its iterator '{iv.var.name}' divides differently from the first block's, so the "
                                "blocks cannot share one outer block", realize)
        if const_value(i_ext) == 1:
            sub = tir.IntImm(dt, 0) if const_value(o_ext) == 1 and not preserve_unit_iters else ov
            if const_value(i_expr) != 0 and not set(vars_in([i_expr])) & set(loop_ranges):
                # a loop-free binding (a constant): keep its value
                sub = tir.Add(dt, sub, i_expr) if const_value(sub) != 0 else i_expr
        else:
            iv_i = tir.Var(dt, iv.var.name + "_i")
            d.inner_iters.append(tir.IterVar(iv_i, tir.Range(tir.IntImm(dt, 0), _imm(i_ext, dt)), iv.kind))
            d.inner_values.append(simplify(i_expr, loop_ranges, keep_marks=True))
            sub = iv_i if const_value(o_ext) == 1 else tir.Add(dt, tir.Mul(dt, ov, _imm(i_ext, dt)), iv_i)
        d.subst[iv.var] = sub
    return d


@primitive
def blockize(sch: Schedule, target, preserve_unit_iters: bool = True):
    """Make the subtree under ``target`` (a loop) one block ``<name>_o``; returns it.

    The loop must contain exactly one block, reached through loops only, whose bindings divide
    into an outer part (loops above ``target``) and an inner part (``target`` and the loops
    below it): ``vi = vi_o * E + vi_i``. With ``preserve_unit_iters`` an outer iterator of
    extent 1 stays in the inner block's indices (as ``vi_o``) instead of becoming 0.

    ``target`` may also be a list of blocks that sit side by side under one loop (or block):
    they are wrapped together into ``outer_<name>_<name>_``, their loops below that common
    parent going inside; they must divide the same way and have no init."""
    if isinstance(target, (list, tuple)):
        return _blockize_blocks(sch, list(target), preserve_unit_iters)
    idx, lp = sch.resolve_loop(target, "blockize")
    children = child_block_realizes(lp)
    if len(children) != 1:
        raise sch.error("blockize", f"loop '{lp.loop_var.name}'",
                        f"the loop must contain exactly one block, but it contains {len(children)}")
    realize = children[0]
    block = realize.block
    inner_loops = _loop_chain(sch, "blockize", lp, realize)
    all_loops = idx.loops_above(realize)
    d = _derive(sch, realize, all_loops, inner_loops, preserve_unit_iters, f"'{lp.loop_var.name}'")
    inner_ranges = {iv.var: (iv.dom.min, iv.dom.extent) for iv in d.inner_iters}
    block_subst = substitute_block(block, d.subst, inner_ranges)
    has_outer_reduction = block_subst.init is not None and any(iv.kind == "R" for iv in d.outer_iters)
    inner_reads = list(block_subst.writes) + list(block_subst.reads) if has_outer_reduction else block_subst.reads
    inner_block = dataclasses.replace(block_subst, iter_vars=d.inner_iters, init=None, reads=inner_reads)
    inner_realize = tir.BlockRealize(d.inner_values, _bool(d.division.inner_pred), inner_block)

    body = inner_realize
    for x in reversed(inner_loops):
        body = dataclasses.replace(x, body=body)
    dom = {iv.var: iv.dom for iv in d.inner_iters}
    blocks, _ = collect_names(idx.root)
    outer_name = fresh_name(block.name + "_o", blocks)
    init = None
    if block_subst.init is not None:
        init = _outer_init(block_subst, inner_realize, inner_loops, fresh_name(block.name + "_init", blocks))
    outer_block = tir.Block(name=outer_name, iter_vars=d.outer_iters,
                            reads=relax_regions(block_subst.reads, dom),
                            writes=relax_regions(block_subst.writes, dom),
                            body=body, init=init)
    outer_realize = tir.BlockRealize(d.outer_values, _bool(d.division.outer_pred), outer_block)
    sch.commit(target.func_name, replace(idx, lp, outer_realize))
    return sch.block_rv(target.func_name, outer_name)


def _bool(pred):
    if isinstance(pred, tir.IntImm):
        return tir.IntImm("bool", 1 if pred.value else 0)
    return simplify(pred)


def _outer_init(block: tir.Block, inner_realize: tir.BlockRealize, inner_loops: list, name: str):
    """The outer block's ``T.init``: a block over the inner spatial iterators the init uses,
    under copies of the inner loops those iterators are bound to."""
    used = set(vars_in([block.init]))
    subst = {}
    iters, values = [], []
    for iv, value in zip(inner_realize.block.iter_vars, inner_realize.iter_values):
        if iv.kind == "S" and iv.var in used:
            nv = tir.Var(iv.var.dtype, iv.var.name + "_init")
            subst[iv.var] = nv
            iters.append(tir.IterVar(nv, iv.dom, iv.kind))
            values.append(value)
    # TVM keeps the whole inner predicate, whose conditions on the reduce loops then refer to
    # loops the init does not have; keep only the conditions on the loops copied below.
    bound = set(vars_in(values))
    dropped = {x.loop_var for x in inner_loops if x.loop_var not in bound}
    pred = None
    for cond in conjuncts(inner_realize.predicate):
        if not set(vars_in([cond])) & dropped:
            pred = cond if pred is None else tir.And("bool", pred, cond)
    stmt = tir.BlockRealize(values, pred if pred is not None else tir.IntImm("bool", 1),
                            tir.Block(name=name, iter_vars=iters, reads=[], writes=list(inner_realize.block.writes),
                                      body=block.init, init=None))
    for x in reversed(inner_loops):
        if x.loop_var in bound:
            nv = tir.Var(x.loop_var.dtype, x.loop_var.name)
            subst[x.loop_var] = nv
            stmt = dataclasses.replace(x, loop_var=nv, body=stmt)
    return substitute_block(stmt, subst)


def _blockize_blocks(sch: Schedule, rvs: list, preserve_unit_iters: bool):
    """``blockize`` of blocks side by side: the common parent's statements holding them become
    one outer block (TVM's BlockizeBlocks)."""
    if len(rvs) < 2:
        raise sch.error("blockize", "blocks", "give a loop, or at least two blocks to wrap together")
    if len({rv.func_name for rv in rvs}) != 1:
        raise sch.error("blockize", "blocks", "the blocks are not in one function")
    func_name = rvs[0].func_name
    resolved = [sch.resolve_block(rv, "blockize") for rv in rvs]
    idx = resolved[0][0]
    realizes = [r for _, r in resolved]
    if len({id(r) for r in realizes}) != len(realizes):
        raise sch.error("blockize", "blocks", "a block is given twice")
    # The lowest loop or block enclosing them all.
    lca = None
    for a in idx.ancestors(realizes[0]):
        if isinstance(a, (tir.For, tir.Block)) and all(idx.is_ancestor(a, r) for r in realizes[1:]):
            lca = a
            break
    names = ", ".join(f"'{r.block.name}'" for r in realizes)
    if lca is None or any(idx.is_ancestor(r, q) for r in realizes for q in realizes if r is not q):
        raise sch.error("blockize", f"blocks {names}", "the blocks must sit side by side under one loop or block")
    seq = lca.body
    if not isinstance(seq, tir.SeqStmt):
        raise sch.error("blockize", f"blocks {names}",
                        "their common parent must hold them in separate statements")
    where = f"'{lca.loop_var.name}'" if isinstance(lca, tir.For) else f"block '{lca.name}'"
    # Each target: the statement of the parent holding it must be a chain of loops down to it.
    slots = []
    for r in realizes:
        pos = next(n for n, c in enumerate(seq.seq) if c is r or idx.is_ancestor(c, r))
        top = seq.seq[pos]
        chain = [] if top is r else _loop_chain(sch, "blockize", top, r)
        slots.append((pos, r, chain))
    slots.sort(key=lambda t: t[0])
    positions = [p for p, _, _ in slots]
    if len(set(positions)) != len(positions) or positions != list(range(positions[0], positions[0] + len(positions))):
        raise sch.error("blockize", f"blocks {names}",
                        "the blocks must be in consecutive statements of their common parent, one block each")
    derived = None
    bodies, reads, writes = [], [], []
    outer_pred = None
    for _, r, chain in slots:
        block = r.block
        all_loops = idx.loops_above(r)
        derived = _derive(sch, r, all_loops, chain, preserve_unit_iters, where, reuse=derived)
        if block.init is not None and any(iv.kind == "R" for iv in derived.outer_iters):
            raise sch.error("blockize", f"block '{block.name}'",
                            "blocks wrapped together must not reduce over the loops outside them", r)
        loop_subst = {v: iv.var for iv, v in zip(derived.outer_iters, derived.outer_values) if isinstance(v, tir.Var)}
        inner_iters = [tir.IterVar(iv.var, tir.Range(substitute(iv.dom.min, loop_subst),
                                                     substitute(iv.dom.extent, loop_subst)), iv.kind)
                       for iv in derived.inner_iters]
        inner_ranges = {iv.var: (iv.dom.min, iv.dom.extent) for iv in inner_iters}
        block_subst = substitute_block(block, derived.subst, inner_ranges)
        dom = {iv.var: iv.dom for iv in inner_iters}
        reads += relax_regions(block_subst.reads, dom)
        writes += relax_regions(block_subst.writes, dom)
        inner = tir.BlockRealize(derived.inner_values, _bool(derived.division.inner_pred),
                                 dataclasses.replace(block_subst, iter_vars=derived.inner_iters))
        body = inner
        for x in reversed(chain):
            body = dataclasses.replace(x, body=body, extent=substitute(x.extent, loop_subst))
        bodies.append(body)
        outer_pred = derived.division.outer_pred
    blocks, _ = collect_names(idx.root)
    outer_name = fresh_name("outer_" + "".join(r.block.name + "_" for _, r, _ in slots), blocks)
    outer_block = tir.Block(name=outer_name, iter_vars=derived.outer_iters, reads=union_regions(reads),
                            writes=union_regions(writes), body=tir.seq(bodies), init=None)
    outer_realize = tir.BlockRealize(derived.outer_values, _bool(outer_pred), outer_block)
    first = positions[0]
    new_seq = list(seq.seq[:first]) + [outer_realize] + list(seq.seq[first + len(positions):])
    new_lca = dataclasses.replace(lca, body=tir.seq(new_seq))
    sch.commit(func_name, replace(idx, lca, new_lca))
    return sch.block_rv(func_name, outer_name)


def union_regions(regions: list) -> list:
    """The union of several regions per buffer, as TVM's blockize of several blocks builds it:
    buffers in reverse order of first appearance, each dimension ``[min, max + 1)`` with the
    bounds written out as TVM's interval arithmetic writes them (only constants folded)."""
    table: dict = {}
    for r in regions:
        table.setdefault(r.buffer, []).append(r)
    out = []
    for buf in reversed(list(table)):
        rng = []
        for d in range(len(buf.shape)):
            ivs = []
            for r in table[buf]:
                x = r.region[d]
                one = tir.IntImm(x.min.dtype, 1)
                hi = x.min if tir.is_const_int(x.extent, 1) else make_sub(make_add(x.extent, x.min), one)
                ivs.append((x.min, hi))
            lo, hi = ivs[0]
            if len(ivs) > 1:  # TVM's union simplifies its bounds
                lo = _simplified_extreme([a for a, _ in ivs], tir.Min)
                hi = _simplified_extreme([b for _, b in ivs], tir.Max)
            end = make_add(hi, tir.IntImm(hi.dtype, 1))
            rng.append(tir.Range(lo, end if const_value(lo) == 0 else make_sub(end, lo)))
        out.append(tir.BufferRegion(buf, rng))
    return out


def _simplified_extreme(exprs: list, cls):
    """``min`` / ``max`` of ``exprs``, simplified; equal operands collapse to one."""
    out = []
    for e in exprs:
        e = simplify(e)
        if not any(structural_equal(e, o) for o in out):
            out.append(e)
    acc = out[0]
    for e in out[1:]:
        acc = simplify(cls(acc.dtype, acc, e))
    return acc
