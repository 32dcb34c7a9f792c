"""Inlining blocks: ``compute_inline`` (a producer into its consumers) and
``reverse_compute_inline`` (a consumer into its single producer).

Inlining trades an intermediate buffer for recomputation, so it is only allowed where the
buffer's contents are a pure function of an index:

* ``compute_inline(B)``: ``B`` stores ``X[vi, vj] = f(vi, vj)`` once per element (a complete
  block, not an output); every load ``X[e0, e1]`` in the scope becomes ``f(e0, e1)``, after
  which ``B``, its now empty loops and ``X``'s allocation go.
* ``reverse_compute_inline(C)``: ``C`` stores ``Y[g(vi, vj)] = h(X[vi, vj], ...)`` reading the
  one buffer its single producer ``P`` writes (``X[pi, pj] = f(pi, pj)``); ``P``'s store
  becomes ``Y[g(pi, pj)] = h(f(pi, pj), ...)`` and ``C`` goes. Where ``P`` covers more than
  ``C`` consumed, a predicate keeps ``P`` to ``C``'s domain.

Blocks whose loads changed get their ``T.reads``/``T.writes`` inferred again (as TVM does), so
the printed result matches TVM's. Every check runs before the function is rebuilt.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith import const_int_bound, simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.structural import StructuralEqual
from tvmscript.ir.tir_analysis import infer_access_regions
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in

from .block_scope import (as_block_rv, check_complete, check_not_output, complete_code, leaf_removal_plan, scope_of,
                          takes_block_name)
from .common import const_value, quoted_name
from .iter_map import detect_iter_map
from .state import BlockRV, Schedule, primitive
from .tree import replace_many, stmt_children

__all__ = ["compute_inline", "reverse_compute_inline"]


BODY_INLINE = ("the body of the inlined block should be in the form of 'A[f(i, j, k, ...)] = g(i, j, k, ...)', "
               "where the store indices f on the left are a bijective affine mapping of the block iterators")
BODY_REVERSE_INLINE = ("the body of the inlined block should be in the form of 'B[...] = g(i, j, k, A[f(i, j, k, ...)] "
                       "...)', where A is the only buffer the block consumes, whose indices are distinct block "
                       "iterators, with no predicate on the inlined block, and the iterator domains of the inlined "
                       "block covered by the producer block")


def _check_no_init(sch, prim, realize) -> None:
    if realize.block.init is not None:
        raise sch.error(prim, f"block {quoted_name(realize)}",
                        "the block has an init statement (it is a reduction); only a block that computes each "
                        "element once can be inlined", realize)


class _Loads(IRMutator):
    """Finds (or, with ``replace``, rewrites) the loads of one buffer in an expression."""

    def __init__(self, buffer, replace=None) -> None:
        self.buffer, self.replace, self.found = buffer, replace, []

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if isinstance(e, tir.BufferLoad) and e.buffer is self.buffer:
            self.found.append(e)
            if self.replace is not None:
                return self.replace(e)
        return e


def _loads_of(buffer, store: tir.BufferStore) -> list:
    finder = _Loads(buffer)
    for i in store.indices:
        finder.visit_expr(i)
    finder.visit_expr(store.value)
    return finder.found


class _ScopeRewriter(IRMutator):
    """Applies an inlining to the scope: ``stmt_hook`` rewrites stores (reverse inline),
    ``load_hook`` rewrites loads of the inlined buffer (inline); every block (other than the
    scope block) whose signature names the inlined buffer gets its reads/writes inferred again,
    and the scope block drops the buffer's allocation."""

    def __init__(self, buffer, scope_block, load_hook=None, store_hook=None, realize_hook=None) -> None:
        self.buffer, self.scope_block = buffer, scope_block
        self.load_hook, self.store_hook, self.realize_hook = load_hook, store_hook, realize_hook

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if self.load_hook is not None and isinstance(e, tir.BufferLoad) and e.buffer is self.buffer:
            return self.load_hook(e)
        return e

    def visit_stmt(self, s):
        if isinstance(s, tir.BlockRealize):
            out = super().visit_stmt(s)
            if self.realize_hook is not None:
                out = self.realize_hook(s, out)
            return out
        if isinstance(s, tir.Block):
            new = super().visit_stmt(s)
            if s.name == self.scope_block.name:  # the scope block was copied when the leaf was cut out
                allocs = [b for b in new.alloc_buffers if b is not self.buffer]
                if len(allocs) != len(new.alloc_buffers):
                    new = dataclasses.replace(new, alloc_buffers=allocs)
                return new
            if any(r.buffer is self.buffer for r in list(s.reads) + list(s.writes)):
                reads, writes = infer_access_regions(new.body, new.init, new.alloc_buffers)
                new = dataclasses.replace(new, reads=reads, writes=writes)
            return new
        s2 = super().visit_stmt(s)
        if self.store_hook is not None and isinstance(s2, tir.BufferStore) and s2.buffer is self.buffer:
            return self.store_hook(s2)
        return s2


def _check_opaque(sch, prim, scope, buffer, realize) -> None:
    """The inlined buffer may only be used through loads and stores: its data pointer named
    directly, or a region of it matched into another block, would still need the buffer."""
    data = buffer.data

    class Finder(TIRVisitor):
        hit = False

        def visit_Var(self, v) -> None:
            if data is not None and v is data:
                self.hit = True

        def visit_Block(self, b) -> None:
            if any(mb.source.buffer is buffer for mb in b.match_buffers):
                self.hit = True
            self.generic_visit(b)

    finder = Finder()
    finder.visit(scope.realize.block)
    if finder.hit:
        raise _opaque(sch, prim, scope, realize)


def _opaque(sch, prim, scope, realize):
    return sch.error(prim, f"block {quoted_name(realize)}",
                     "the buffer to be inlined has an opaque access (e.g. 'B.data'), or a subregion of it is matched "
                     f"into another block, in scope '{scope.block.name}'", realize)


# ============================================================================ compute_inline


def _store_index_vars(block: tir.Block, store: tir.BufferStore):
    """For each store index, the block iterator it stands for, when the indices are the block
    iterators in some order (a bijection of iterators to elements): ``(index_vars, fixed)``,
    ``fixed`` giving the value of unit iterators that index nothing. An index that fuses
    several iterators (``b * 50 + i``, a bijective affine map as TVM accepts) stands for
    their `_fused_iterators` list. None otherwise."""
    iters = block.iter_vars
    # The trivial form: the iterators in order (unit iterators may be indexed by 0).
    if len(iters) == len(store.indices):
        ok = True
        for iv, e in zip(iters, store.indices):
            if e is iv.var:
                continue
            if const_value(e) == 0 and const_value(iv.dom.min) == 0 and const_value(iv.dom.extent) == 1:
                continue
            ok = False
            break
        if ok:
            return [iv.var for iv in iters], {}
    # A permutation of the iterators: every non-unit iterator indexes exactly one dimension.
    by_var = {iv.var: iv for iv in iters}
    index_vars, seen = [], set()
    for e in store.indices:
        if const_value(e) is not None:  # a constant index (a unit axis added by a layout): None
            index_vars.append(None)
            continue
        if isinstance(e, tir.Var) and e in by_var and e not in seen:
            seen.add(e)
            index_vars.append(e)
            continue
        fused = _fused_iterators(e, by_var)
        if fused is None or any(v in seen for v, _ in fused):
            return None
        seen.update(v for v, _ in fused)
        index_vars.append(fused)
    fixed = {}
    for iv in iters:
        if iv.var in seen:
            continue
        if const_value(iv.dom.extent) == 1 and const_value(iv.dom.min) is not None:
            fixed[iv.var] = iv.dom.min
        else:
            return None
    return index_vars, fixed


@primitive
def compute_inline(sch: Schedule, block: BlockRV) -> None:
    """Inline a producer block into its consumers: each load of the buffer it writes becomes
    its store value at the loaded indices; the block, the loops that only held it and the
    buffer's allocation are removed.

    Requires a complete block (spatial iterators only, the only writer of its buffer, not
    reading what it writes) that writes one buffer allocated in its scope (not an output), is
    not the only leaf of its scope, and whose body is a single ``BufferStore`` indexed by its
    iterators (in any order)."""
    prim = "compute_inline"
    block = as_block_rv(sch, block, prim)
    idx, realize = sch.resolve_block(block, prim)
    b = realize.block
    _check_no_init(sch, prim, realize)
    if len(b.writes) != 1:
        raise sch.error(prim, f"block {quoted_name(realize)}", "the block is only allowed to write a single buffer region, "
                        f"but it writes {len(b.writes)} region(s)", realize)
    buffer = b.writes[0].buffer
    scope = scope_of(sch, prim, idx, realize)
    check_not_output(sch, prim, scope, realize)
    check_complete(sch, prim, scope, realize)
    store = b.body
    found = _store_index_vars(b, store) if isinstance(store, tir.BufferStore) and store.buffer is buffer else None
    if found is None:
        raise sch.error(prim, f"block {quoted_name(realize)}", BODY_INLINE, realize)
    index_vars, fixed = found
    value = substitute(store.value, fixed) if fixed else store.value
    removed = leaf_removal_plan(sch, prim, idx, realize)
    _check_opaque(sch, prim, scope, buffer, realize)

    iters = {iv.var: iv for iv in b.iter_vars}

    def load_hook(load):
        sub = {}
        for v, i in zip(index_vars, load.indices):
            if isinstance(v, list):
                sub.update(_unfuse(v, i, iters))
            elif v is not None:
                sub[v] = i
        return substitute(value, sub)

    rewriter = _ScopeRewriter(buffer, scope.block, load_hook=load_hook)
    without = replace_many(idx, {id(removed): (removed, None)})
    sch.commit(block.func_name, rewriter.visit_stmt(without))


# ============================================================================ reverse_compute_inline


def _single_read(sch, prim, scope, realize):
    """The one buffer the block reads that some block of the scope writes."""
    found = None
    for r in realize.block.reads:
        if r.buffer is found:
            continue
        if r.buffer in scope.writers:
            if found is not None:
                found = "many"
                break
            found = r.buffer
    if found is None or found == "many":
        raise sch.error(prim, f"block {quoted_name(realize)}", "the block is only allowed to read a single buffer region "
                        f"produced in its scope, but it reads {len(realize.block.reads)} region(s)", realize)
    return found


def _producer_of(sch, prim, idx, scope, consumer, buffer):
    """The single complete block of the scope that writes ``buffer``, read by no other block."""
    def fail():
        return sch.error(prim, f"block {quoted_name(consumer)}",
                         "the consumer block to be inlined is required to have only a single producer block, and the "
                         "producer block should be a complete block who has only a single consumer", consumer)

    writers = []

    def walk(s):
        for c in stmt_children(s):
            if isinstance(c, tir.BlockRealize):
                inner = len(writers)
                walk(c.block)
                if len(writers) > inner:  # not a leaf: its nested writers stand for it
                    continue
                if any(w.buffer is buffer for w in c.block.writes):
                    if complete_code(scope, c) if c in scope.children else _nested_incomplete(c):
                        raise fail()
                    writers.append(c)
            else:
                walk(c)

    walk(scope.realize.block)
    if len(writers) != 1:
        raise fail()
    producer = writers[0]
    # TVM 0.27 skips this check and leaves other readers loading a buffer no block writes.
    readers = [c for c in scope.children if c is not consumer and any(r.buffer is buffer for r in c.block.reads)]
    if any(r is not producer for r in readers):
        raise fail()
    return producer


def _nested_incomplete(realize) -> bool:
    b = realize.block
    written = {w.buffer for w in b.writes}
    return any(iv.kind != "S" for iv in b.iter_vars) or any(r.buffer in written for r in b.reads)


def _producer_store(block: tir.Block):
    body = block.body
    if isinstance(body, tir.IfThenElse):
        if body.else_case is not None:
            return None
        body = body.then_case
    return body if isinstance(body, tir.BufferStore) else None


@primitive
def reverse_compute_inline(sch: Schedule, block: BlockRV) -> None:
    """Inline a consumer block into its single producer: the producer's store of the
    intermediate buffer becomes the consumer's store, with the consumer's load of that buffer
    replaced by the producer's value; the consumer, its now empty loops and the buffer's
    allocation are removed.

    Requires a complete consumer that reads exactly one buffer produced in its scope, has no
    predicate and whose body is a single ``BufferStore`` loading that buffer at the same
    indices everywhere, each a distinct block iterator; the buffer's single producer must be a
    complete block (not an output) whose body stores it, read by no other block, and must
    cover the consumer's iteration domain (a larger producer gets a predicate)."""
    prim = "reverse_compute_inline"
    block = as_block_rv(sch, block, prim)
    idx, realize = sch.resolve_block(block, prim)
    consumer = realize.block
    _check_no_init(sch, prim, realize)
    scope = scope_of(sch, prim, idx, realize)
    buffer = _single_read(sch, prim, scope, realize)
    check_complete(sch, prim, scope, realize)
    producer = _producer_of(sch, prim, idx, scope, realize, buffer)
    check_not_output(sch, prim, scope, producer)
    _check_no_init(sch, prim, producer)  # a reduction's value is only final after its last step

    # The body pattern.
    def bad():
        return sch.error(prim, f"block {quoted_name(realize)}", BODY_REVERSE_INLINE, realize)

    pred = realize.predicate
    if not (isinstance(pred, tir.IntImm) and pred.value):
        raise bad()
    store = consumer.body
    if not isinstance(store, tir.BufferStore):
        raise bad()
    loads = _loads_of(buffer, store)
    if not loads:
        raise bad()
    first = loads[0].indices
    for ld in loads[1:]:
        if len(ld.indices) != len(first) or not all(StructuralEqual().equal(a, b) for a, b in zip(ld.indices, first)):
            raise bad()
    iters = {iv.var: iv for iv in consumer.iter_vars}
    sub = {}
    for iv in consumer.iter_vars:  # unit iterators default to their only value
        if const_value(iv.dom.extent) == 1 and const_value(iv.dom.min) is not None:
            sub[iv.var] = iv.dom.min
    p_store = _producer_store(producer.block)
    if p_store is None or p_store.buffer is not buffer or len(p_store.indices) != len(first):
        raise bad()
    used = set()
    p_ranges = {iv.var: (iv.dom.min, iv.dom.extent) for iv in producer.block.iter_vars}
    for e, p_index in zip(first, p_store.indices):
        c = const_value(e)
        if c is not None:  # a constant index (a reindexed unit axis): the producer's must be that value
            if const_int_bound(simplify(p_index, p_ranges), p_ranges) != (c, c):
                raise bad()
            continue
        if isinstance(e, tir.Var) and e in iters and e not in used:
            used.add(e)
            sub[e] = p_index
            continue
        # Several iterators fused into one index (``b * 64 + i``): each is recovered from the
        # producer's index by the inverse map, as TVM inverts a bijective affine map.
        fused = _fused_iterators(e, iters)
        if fused is None or any(v in used for v, _ in fused):
            raise bad()
        for v, value in _unfuse(fused, p_index, iters).items():
            used.add(v)
            sub[v] = simplify(value, p_ranges)
    # Every consumer iterator is determined, and the producer covers its domain.
    for iv in consumer.iter_vars:
        if iv.var not in sub:
            raise bad()
        lo, hi = const_int_bound(simplify(sub[iv.var], p_ranges), p_ranges)
        d_lo, d_ext = const_value(iv.dom.min), const_value(iv.dom.extent)
        if d_lo is not None and d_ext is not None and (lo > d_lo or hi < d_lo + d_ext - 1):
            raise bad()
    removed = leaf_removal_plan(sch, prim, idx, realize)
    _check_opaque(sch, prim, scope, buffer, realize)

    # The predicate keeping the producer to the consumer's domain, in the producer's loop vars.
    in_bound = None
    for iv in consumer.iter_vars:
        e = sub[iv.var]
        lo = iv.dom.min
        conds = [tir.GE("bool", e, lo), tir.LT("bool", e, tir.Add(lo.dtype, lo, iv.dom.extent))]
        for c in conds:
            in_bound = c if in_bound is None else tir.And("bool", in_bound, c)
    in_bound = simplify(in_bound, p_ranges) if in_bound is not None else tir.IntImm("bool", 1)

    def store_hook(p_store_new):
        value = p_store_new.value

        def swap(ld):
            return value

        new_store = _Loads(buffer, replace=swap)
        new_value = new_store.visit_expr(substitute(store.value, sub))
        new_indices = [substitute(i, sub) for i in store.indices]
        return tir.BufferStore(store.buffer, new_value, new_indices, store.span)

    def realize_hook(old, new):
        if old is not producer:
            return new
        if isinstance(in_bound, tir.IntImm) and in_bound.value:
            return new
        blk = new.block
        cond = in_bound
        if isinstance(blk.body, tir.IfThenElse) and blk.body.else_case is None:
            if_cond = simplify(blk.body.condition, p_ranges)
            if not StructuralEqual().equal(cond, if_cond):
                cond = simplify(tir.And("bool", cond, blk.body.condition), p_ranges)
                blk = dataclasses.replace(blk, body=blk.body.then_case)
        binding = {iv.var: v for iv, v in zip(blk.iter_vars, new.iter_values)}
        outer = substitute(cond, binding)
        if not (isinstance(new.predicate, tir.IntImm) and new.predicate.value):
            outer = tir.And("bool", new.predicate, outer)  # TVM drops the old predicate; keeping it is safe
        outer = simplify(outer)  # as TVM: the loop ranges are not in scope of this simplification
        return tir.BlockRealize(new.iter_values, outer, blk)

    rewriter = _ScopeRewriter(buffer, scope.block, store_hook=store_hook, realize_hook=realize_hook)
    without = replace_many(idx, {id(removed): (removed, None)})
    sch.commit(block.func_name, rewriter.visit_stmt(without))


def _fused_iterators(e, iters: dict):
    """``[(iterator, stride)]``, innermost first, when ``e`` is a mixed-radix fusion of
    distinct whole block iterators starting at 0 (``v0 * e1 * e2 + v1 * e2 + v2``: each stride
    the product of the extents inside it), as `iter_map.detect_iter_map` finds it; None
    otherwise."""
    doms = {v: const_value(iv.dom.extent) for v, iv in iters.items()
            if const_value(iv.dom.min) == 0 and const_value(iv.dom.extent) is not None}
    if not set(vars_in([e])) <= set(doms):
        return None
    imap = detect_iter_map([e], doms)
    if imap is None:
        return None
    s = imap.sums[0]
    if len(s.pieces) < 2 or (s.base is not None and const_value(s.base) != 0):
        return None
    terms = []
    for p in reversed(s.pieces):  # innermost first
        whole = isinstance(p.mark.source, tir.Var) and p.lower == 1 and p.extent == p.mark.extent
        if not whole:
            return None
        terms.append((p.mark.source, p.scale))
    return terms if terms[0][1] == 1 else None


def _unfuse(fused: list, index, iters: dict) -> dict:
    """The inverse of a `_fused_iterators` map: each iterator's value given the fused
    ``index`` (``index // stride % extent``; the outermost without the modulus, so that an
    index past the end shows as an iterator out of its domain)."""
    out = {}
    dt = index.dtype
    for n, (v, stride) in enumerate(fused):
        value = index if stride == 1 else tir.FloorDiv(dt, index, tir.IntImm(dt, stride))
        if n < len(fused) - 1:
            value = tir.FloorMod(dt, value, make_cast(iters[v].dom.extent, dt))
        out[v] = value
    return out


takes_block_name("compute_inline")
takes_block_name("reverse_compute_inline")
