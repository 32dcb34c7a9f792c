"""Moving a block under a loop: ``compute_at`` (a producer under a loop of its consumers) and
``reverse_compute_at`` (a consumer under a loop of its producers).

Moving a block changes *when* its instances run, never *what* they compute, so the work is
all in deciding which instances must run at each iteration of the target loop:

1. The blocks that depend on the moved block and sit under the loop (its consumers for
   ``compute_at``, its producers for ``reverse_compute_at``) touch some region of the buffers
   the moved block writes (reads). Relaxing each such access over the loops between that block
   and the target loop gives the region *required* per iteration of the target loop.
2. The moved block *provides* one point of each buffer per instance (``B[vi, vj]``); solving
   "provided covers required" dimension by dimension gives an interval per block iterator
   (``vj in [j_0 * 4, j_0 * 4 + 3]``).
3. One new loop per iterator whose interval is longer than one (TVM names them ``ax0, ax1,
   ...``) re-creates the instances: ``vj = j_0 * 4 + ax0``; where the interval may run past
   the iterator's domain (a split that does not divide) a ``T.where`` keeps it in bounds.

The moved block is taken out of its old place together with the loops that only held it, and
the new loop nest goes in the target loop's body between the last producer and the first
consumer (``index`` picks the place). As in TVM, the function is rebuilt once, after every
check has passed, so a rejected call leaves the schedule unchanged.

This module also holds what the inlining primitives share with it: the block scope with its
read-after-write / write-after-write / write-after-read dependencies (TVM's ``BlockScope``),
the complete/reduction/output-block tests, and the plan that removes a leaf block.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from tvmscript.ir.arith import const_int_bound, eval_range, simplify
from tvmscript.ir.arith.canonical import Canonical
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.mutator import substitute
from .common import const_value, quoted_name
from .reduction import forget_affine_flag
from .state import BlockRV, LoopRV, Schedule, primitive
from .tree import FuncIndex, child_block_realizes, replace_many

__all__ = ["compute_at", "reverse_compute_at", "BlockScope", "scope_of", "check_complete",
           "check_complete_or_reduction", "check_not_output", "is_output_block", "leaf_removal_plan",
           "as_block_rv", "takes_block_name"]


# ============================================================================ block scope

RAW, WAW, WAR = "RAW", "WAW", "WAR"


class BlockScope:
    """The blocks directly inside one scope block (nested loops included, nested blocks not),
    in program order, and the dependencies between them.

    A dependency ``src -> dst`` exists when ``dst`` comes after ``src`` and reads what ``src``
    wrote (RAW), writes what it wrote (WAW) or writes what it read (WAR), judged by buffer from
    the declared ``T.reads``/``T.writes`` (TVM does the same; regions are not compared)."""

    def __init__(self, idx: FuncIndex, member: tir.BlockRealize) -> None:
        """The scope of ``member``, one of its blocks."""
        scope_realize = idx.scope_realize(member)
        self.realize = scope_realize
        self.block = scope_realize.block if scope_realize is not None else None
        self.children = idx.siblings(member)
        self.writers: dict = {}   # Buffer -> [BlockRealize], program order
        self.readers: dict = {}
        self.deps: list = []      # (src realize, dst realize, kind)
        for child in self.children:
            b = child.block
            for r in b.reads:
                _append_unique(self.readers.setdefault(r.buffer, []), child)
            for w in b.writes:
                _append_unique(self.writers.setdefault(w.buffer, []), child)
            for r in b.reads:
                for src in self.writers.get(r.buffer, []):
                    self._add(src, child, RAW)
            for w in b.writes:
                for src in self.writers.get(w.buffer, []):
                    self._add(src, child, WAW)
            for w in b.writes:
                for src in self.readers.get(w.buffer, []):
                    self._add(src, child, WAR)

    def _add(self, src, dst, kind) -> None:
        if src is not dst:
            self.deps.append((src, dst, kind))

    def _data_neighbours(self, realize, end: int) -> list:
        """The other end of the RAW and WAW dependencies whose end ``end`` (0: source, 1:
        destination) is ``realize``, without repeats."""
        out = []
        for d in self.deps:
            if d[end] is realize and d[2] in (RAW, WAW):
                _append_unique(out, d[1 - end])
        return out

    def producers(self, realize) -> list:
        """Blocks this one depends on by RAW or WAW (TVM's GetProducers), without repeats."""
        return self._data_neighbours(realize, 1)

    def consumers(self, realize) -> list:
        """Blocks that depend on this one by RAW or WAW (TVM's GetConsumers), without repeats."""
        return self._data_neighbours(realize, 0)

    def war_dependency(self):
        """The first write-after-read dependency, or None: a scope with one is not a stage
        pipeline (a block overwrites what an earlier block still had to read)."""
        for d in self.deps:
            if d[2] == WAR:
                return d
        return None

    def allocated(self) -> list:
        return list(self.block.alloc_buffers) if self.block is not None else []


def _append_unique(lst: list, x) -> None:
    if not any(y is x for y in lst):
        lst.append(x)


def as_block_rv(sch: Schedule, block, prim: str) -> BlockRV:
    """TVM's primitives take a block handle or a block name (see `takes_block_name`)."""
    if isinstance(block, str):
        return sch.get_block(block)
    if not isinstance(block, BlockRV):
        raise TypeError(f"{prim}: expected a block (BlockRV or its name), got {type(block).__name__}")
    return block


def takes_block_name(method_name: str) -> None:
    """Let ``Schedule.<method_name>`` take a block's name for its ``block`` argument, looking
    the block up first as TVM does (so the trace shows ``b0 = sch.get_sblock(...)`` and then
    the primitive applied to ``b0``, as TVM's does)."""
    inner = getattr(Schedule, method_name)

    @functools.wraps(inner)
    def method(self, *args, **kwargs):
        if args and isinstance(args[0], str):
            args = (self.get_block(args[0]),) + args[1:]
        elif isinstance(kwargs.get("block"), str):
            kwargs["block"] = self.get_block(kwargs["block"])
        return inner(self, *args, **kwargs)

    setattr(Schedule, method_name, method)


def scope_of(sch: Schedule, prim: str, idx: FuncIndex, realize, require_stage_pipeline: bool = True) -> BlockScope:
    """The scope ``realize`` is in, checked as TVM's GetScopeRoot checks it: the root block is
    no primitive's subject, and the scope must be a stage pipeline (no write-after-read)."""
    scope_realize = idx.scope_realize(realize)
    if scope_realize is None:
        raise sch.error(prim, f"block {quoted_name(realize)}", "the primitive does not operate on the root block", realize)
    scope = BlockScope(idx, realize)
    if require_stage_pipeline:
        war = scope.war_dependency()
        if war is not None:
            raise sch.error(prim, f"block {quoted_name(realize)}",
                            f"its scope block '{scope.block.name}' is not a stage pipeline: block {quoted_name(war[1])} "
                            f"writes a buffer that block {quoted_name(war[0])} reads before it (a write-after-read "
                            "dependency)", realize)
    return scope


# ---------------------------------------------------------------------------- block kinds


COMPLETE_DEFINITION = ("a complete block has 1) only data-parallel (spatial) iterators, 2) is the only "
                       "writer of its outputs in the scope, 3) no buffer it both reads and writes")
REDUCTION_DEFINITION = ("a reduction block has 1) an init statement, 2) quasi-affine bindings, 3) only spatial "
                        "and reduce iterators, 4) is the only writer of its outputs in the scope, 5) no "
                        "reduce iterator indexing its output")


def _dominant(scope: BlockScope, realize) -> bool:
    return all(len(scope.writers.get(w.buffer, [realize])) == 1 for w in realize.block.writes)


def complete_code(scope: BlockScope, realize) -> int:
    """0 for a complete block, else the number of the first condition it violates."""
    block = realize.block
    if any(iv.kind != "S" for iv in block.iter_vars):
        return 1
    if not _dominant(scope, realize):
        return 2
    written = {w.buffer for w in block.writes}
    if any(r.buffer in written for r in block.reads):
        return 3
    return 0


def reduction_code(scope: BlockScope, realize) -> int:
    """0 for a reduction block, else the number of the first condition it violates."""
    block = realize.block
    if block.init is None:
        return 1
    if any(iv.kind not in ("S", "R") for iv in block.iter_vars):
        return 3
    if not _dominant(scope, realize):
        return 4
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    for w in block.writes:
        used = vars_in([x for r in w.region for x in (r.min, r.extent)])
        if any(v in reduce_vars for v in used):
            return 5
    return 0


def check_complete(sch, prim: str, scope: BlockScope, realize) -> None:
    code = complete_code(scope, realize)
    if code:
        raise sch.error(prim, f"block {quoted_name(realize)}",
                        f"is not a complete block - it violates condition #{code} ({COMPLETE_DEFINITION})", realize)


def check_complete_or_reduction(sch, prim: str, scope: BlockScope, realize) -> None:
    c = complete_code(scope, realize)
    if not c:
        return
    r = reduction_code(scope, realize)
    if not r:
        return
    raise sch.error(prim, f"block {quoted_name(realize)}",
                    f"is neither a complete block (it violates condition #{c}: {COMPLETE_DEFINITION}) nor a "
                    f"reduction block (it violates condition #{r}: {REDUCTION_DEFINITION})", realize)


def is_output_block(scope: BlockScope, realize) -> bool:
    """True when the block writes a buffer its scope block does not allocate (a function
    parameter, or a buffer of an outer scope): its results are visible outside the scope."""
    allocated = scope.allocated()
    return any(not any(w.buffer is b for b in allocated) for w in realize.block.writes)


def check_not_output(sch, prim: str, scope: BlockScope, realize) -> None:
    if is_output_block(scope, realize):
        raise sch.error(prim, f"block {quoted_name(realize)}", "is an output block: it writes a buffer that its scope "
                        "does not allocate, so it cannot be moved into or merged with another block", realize)


# ---------------------------------------------------------------------------- leaf removal


def leaf_removal_plan(sch, prim: str, idx: FuncIndex, realize):
    """The statement to delete so that ``realize`` and the loops that hold nothing else go
    away: climb while the parent holds only this statement; the first sequence with siblings
    is where it is cut out. A block that is the only statement of its scope cannot be removed
    (TVM's "only leaf" error): the scope would be left empty."""
    cur = realize
    while True:
        p = idx.parent_of(cur)
        if p is None or isinstance(p, (tir.Block, tir.BlockRealize)):
            scope = idx.scope_realize(realize)
            where = f"'{scope.block.name}'" if scope is not None else "the function"
            raise sch.error(prim, f"block {quoted_name(realize)}",
                            f"is the only leaf in the scope {where}, which cannot be removed; otherwise the scope "
                            "would be empty", realize)
        if isinstance(p, tir.SeqStmt) and len(p.seq) > 1:
            return cur
        cur = p


# ============================================================================ intervals
#
# An interval is (lo, hi), inclusive, with None for an unbounded side; NOTHING is the empty
# set (TVM's IntSet::Nothing), which a union ignores.

NOTHING = None


def _simp(e, ranges):
    """Simplify as TVM's Analyzer does with the loops in scope bound: within their ranges, and
    with a loop of extent 1 replaced by its only value (TVM binds such a variable to it)."""
    unit = {v: r[0] for v, r in ranges.items() if const_value(r[1]) == 1}
    return simplify(substitute(e, unit) if unit else e, ranges)


def _prove_le(a, b, ranges) -> bool:
    """a <= b provably (b - a >= 0)."""
    d = _simp(tir.Sub(b.dtype, b, make_cast(a, b.dtype)), ranges)
    if const_int_bound(d, ranges)[0] >= 0:
        return True
    r = _periodic_range(d, ranges)
    return r is not None and r[0] >= 0


def _can_prove_equal(a, b, ranges) -> bool:
    if a is None or b is None:
        return a is None and b is None
    d = _simp(tir.Sub(a.dtype, a, make_cast(b, a.dtype)), ranges)
    return isinstance(d, tir.IntImm) and d.value == 0


def _absorbs(outer, inner, kind, ranges) -> bool:
    """``outer`` is ``kind(x, y)`` with ``x`` or ``y`` equal to ``inner``: then
    ``min(inner, max(inner, y))`` is ``inner`` (and ``max(inner, min(inner, y))`` too)."""
    return isinstance(outer, kind) and (_can_prove_equal(outer.a, inner, ranges) or
                                        _can_prove_equal(outer.b, inner, ranges))


def _extreme(a, b, ranges, smaller: bool):
    """``min(a, b)`` (``smaller``) or ``max(a, b)``, as TVM's analyzer folds it: an operand
    absorbing the other (``min(a, max(a, y))`` is ``a``), one provably below or above the
    other, else the simplified min/max; None when either is unbounded."""
    if a is None or b is None:
        return None
    dual = tir.Max if smaller else tir.Min
    if _absorbs(b, a, dual, ranges):
        return a
    if _absorbs(a, b, dual, ranges):
        return b
    if _prove_le(a, b, ranges) if smaller else _prove_le(b, a, ranges):
        return a
    if _prove_le(b, a, ranges) if smaller else _prove_le(a, b, ranges):
        return b
    return _simp((tir.Min if smaller else tir.Max)(a.dtype, a, make_cast(b, a.dtype)), ranges)


def _min(a, b, ranges):
    return _extreme(a, b, ranges, smaller=True)


def _max(a, b, ranges):
    return _extreme(a, b, ranges, smaller=False)


def _union(x, y, ranges):
    if x is NOTHING:
        return y
    if y is NOTHING:
        return x
    return (_min(x[0], y[0], ranges), _max(x[1], y[1], ranges))


def _intersect(x, y, ranges):
    if x is NOTHING or y is NOTHING:
        return NOTHING
    lo = x[0] if y[0] is None else y[0] if x[0] is None else _max(x[0], y[0], ranges)
    hi = x[1] if y[1] is None else y[1] if x[1] is None else _min(x[1], y[1], ranges)
    return (lo, hi)


def _simplified(x, ranges):
    if x is NOTHING:
        return NOTHING
    return tuple(_simp(e, ranges) if e is not None else None for e in x)


def _last(lo, ext):
    """``lo + ext - 1``, the last point of a (min, extent) range (not simplified)."""
    dt = lo.dtype
    return tir.Sub(dt, tir.Add(dt, lo, make_cast(ext, dt)), tir.IntImm(dt, 1))


def _region_intervals(region: list) -> list:
    """One (min, max) per dimension of a list of `tir.Range`."""
    return [(r.min, r.min if const_value(r.extent) == 1 else simplify(_last(r.min, r.extent))) for r in region]


def _relax(e, dom: dict, ranges: dict) -> Optional[tuple]:
    """Inclusive (lo, hi) of ``e`` while the Vars of ``dom`` sweep their ranges."""
    got = eval_range(e, dom, ranges)
    if got is None:
        return None
    lo, ext = got
    return lo, _simp(_last(lo, ext), ranges)


def _relax_region(region: list, dom: dict, ranges: dict) -> Optional[list]:
    out = []
    for r in region:
        first = _relax(r.min, dom, ranges)
        last = first if const_value(r.extent) == 1 else _relax(_last(r.min, r.extent), dom, ranges)
        if first is None or last is None:
            return None
        out.append((first[0], last[1]))
    return out


# ============================================================================ compute-at


# Storage ranks and thread ranks, as TVM orders them: a buffer in a scope of rank r is shared
# by the threads of every binding whose rank is at least r, so a consumer's accesses must be
# relaxed over those thread loops too (a "shared" buffer is filled for the whole thread block).
_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}


def _thread_rank(tag: str) -> tuple:
    if tag.startswith("blockIdx"):
        return 0, "xyz".index(tag[-1]) if tag[-1] in "xyz" else 0
    if tag.startswith("threadIdx"):
        return 1, "xyz".index(tag[-1]) if tag[-1] in "xyz" else 0
    if tag.startswith("vthread") or tag == "cthread":
        return 1, -1
    return -1, 0  # not a thread axis: nothing to relax


def _storage_rank(scope: str) -> int:
    base = scope.split(".")[0] if scope not in _STORAGE_RANK else scope
    return _STORAGE_RANK.get(base, 0)


def _can_relax_under_thread(storage_rank: int, tag: str) -> bool:
    rank, dim = _thread_rank(tag)
    if storage_rank == 2:  # warp memory: only threadIdx.x
        return rank == 1 and dim == 0
    return storage_rank <= rank


def _relax_dom(idx: FuncIndex, required_realize, target_loop, storage_rank: int) -> dict:
    """Var -> Range of the loops to relax for a dependent block's access: those between the
    block and the target loop, and, for a buffer shared among threads (``storage_rank`` > 0),
    the thread loops from the target loop up whose threads share it."""
    dom = {}
    chain = idx.ancestors(required_realize)
    n = 0
    while n < len(chain) and chain[n] is not target_loop:
        a = chain[n]
        if isinstance(a, tir.For):
            dom[a.loop_var] = tir.Range(a.min, a.extent)
        elif isinstance(a, tir.Block):
            break
        n += 1
    if storage_rank > 0:
        for a in chain[n:]:
            if isinstance(a, tir.For) and a.kind == "thread_binding" and a.thread_tag and \
                    _can_relax_under_thread(storage_rank, a.thread_tag):
                dom[a.loop_var] = tir.Range(a.min, a.extent)
    return dom


class _DomainError(Exception):
    pass


def _solve(provided: tuple, required: tuple, dim_max, ranges):
    """The block iterator that indexes one provided dimension and the interval of it that
    covers the required interval, with the bound the buffer's shape puts on it:
    ``(var, dom, bound)``. ``var`` may be None when the dimension constrains nothing."""
    p_min = _simp(provided[0], ranges)
    p_max = _simp(provided[1], ranges) if provided[1] is not None else None
    r_min = _simp(required[0], ranges) if required[0] is not None else None
    r_max = _simp(required[1], ranges) if required[1] is not None else None
    dt = p_min.dtype

    def fdiv(a, b):
        return None if a is None else tir.FloorDiv(dt, make_cast(a, dt), make_cast(b, dt))

    if isinstance(p_min, tir.Mul) and (isinstance(p_min.a, tir.Var) or isinstance(p_min.b, tir.Var)):
        var, e = (p_min.a, p_min.b) if isinstance(p_min.a, tir.Var) else (p_min.b, p_min.a)
        return var, (fdiv(r_min, e), fdiv(r_max, e)), (tir.IntImm(dt, 0), fdiv(dim_max, e))
    if p_max is not None and _can_prove_equal(p_min, p_max, ranges):
        if isinstance(p_min, tir.Var):
            return p_min, (r_min, r_max), (tir.IntImm(dt, 0), dim_max)
        if isinstance(p_min, tir.FloorDiv) and const_int_bound(p_min.b, ranges)[0] >= 1:
            x, fac = p_min.a, p_min.b
            # a <= x // f <= b with f > 0  <=>  a * f <= x <= b * f + f - 1
            lo = None if r_min is None else tir.Mul(dt, r_min, fac)
            hi = None if r_max is None else _simp(_last(tir.Mul(dt, r_max, fac), fac), ranges)
            if isinstance(x, tir.Var):
                bound_hi = _simp(_last(tir.Mul(dt, dim_max, fac), fac), ranges)
                return x, (lo, hi), (tir.IntImm(dt, 0), bound_hi)
            return _solve((x, x), (lo, hi), dim_max, ranges)
        if isinstance(p_min, tir.FloorMod):
            x, fac = p_min.a, p_min.b
            if isinstance(x, tir.Var):
                return x, NOTHING, NOTHING  # x % f says nothing about x's range
            if const_int_bound(x, ranges)[0] >= 1 and const_int_bound(fac, ranges)[0] >= 1 and \
                    r_min is not None and const_int_bound(r_min, ranges)[0] >= 0:
                return _solve((x, x), (r_min, None), dim_max, ranges)
    raise _DomainError(f"cannot solve which block iterator values provide the region: the provided index "
                       f"'{_expr_text(p_min)}' is not an iterator, its multiple or its quotient")


def _expr_text(e) -> str:
    from tvmscript.printer import to_script

    return to_script(e)


class _VarDomain:
    """TVM's BlockVarDomainInfo: the interval an iterator must sweep (``dom``) and the bound
    its domain and the buffer's shape put on it (``bound``), kept apart so that a bound that
    cuts into ``dom`` becomes a predicate instead of shrinking the loop."""

    __slots__ = ("dom", "bound")

    def __init__(self, dom=NOTHING, bound=NOTHING) -> None:
        self.dom, self.bound = dom, bound

    def union(self, dom, bound, ranges) -> None:
        self.dom = _union(self.dom, dom, ranges)
        self.bound = _union(self.bound, bound, ranges)

    def finish(self, ranges) -> None:
        if self.dom is NOTHING:
            if self.bound is not NOTHING and None not in self.bound:
                self.dom, self.bound = _simplified(self.bound, ranges), NOTHING
            return
        self.dom = _simplified(self.dom, ranges)
        self.bound = _simplified(self.bound, ranges)
        inter = _simplified(_intersect(self.dom, self.bound, ranges), ranges)
        if _can_prove_equal(self.dom[0], inter[0], ranges) and _can_prove_equal(self.dom[1], inter[1], ranges):
            self.bound = NOTHING
        elif _can_prove_equal(self.bound[0], inter[0], ranges) and _can_prove_equal(self.bound[1], inter[1], ranges):
            self.dom, self.bound = self.bound, NOTHING
        elif isinstance(inter[0], tir.IntImm) and isinstance(inter[1], tir.IntImm):
            self.dom, self.bound = inter, NOTHING


def _affine_inverse(block: tir.Block, points: list, ranges: dict):
    """When the provided indices are one point per dimension and together a bijection of the
    block iterators (each index a mixed-radix fusion ``v0 * 4 + v1`` of iterators used nowhere
    else, maybe plus a constant): the function mapping one index value per dimension back to
    each iterator (TVM's InverseAffineIterMap: ``v0 = o // 4``, ``v1 = o % 4``) and, per
    dimension, its iterators outermost first with their scales and extents. Else None."""
    iters = {}
    for iv in block.iter_vars:
        if const_value(iv.dom.min) != 0 or const_value(iv.dom.extent) is None:
            return None
        iters[iv.var] = const_value(iv.dom.extent)
    canon = Canonical(ranges)
    used, dims = set(), []
    for p in points:
        s = canon.to_sum(p)
        terms = []
        for t in s.terms:
            if not (isinstance(t.index, tir.Var) and t.index in iters and t.lower == 1 and t.upper is None) \
                    or t.index in used or t.scale <= 0:
                return None
            used.add(t.index)
            terms.append((t.index, t.scale, iters[t.index]))
        terms.sort(key=lambda x: -x[1])
        expected = 1
        for _, scale, ext in reversed(terms):  # innermost first: scales 1, e_n, e_n * e_(n-1), ...
            if scale != expected:
                return None
            expected *= ext
        dims.append((terms, s.base, p.dtype))
    if used != set(iters):
        return None
    return _inverse_of(dims), dims


def _inverse_of(dims: list):
    def inverse(outputs: list) -> dict:
        out = {}
        for (terms, base, dt), o in zip(dims, outputs):
            o = make_cast(o, dt)
            if base:
                o = tir.Sub(dt, o, tir.IntImm(dt, base))
            for n, (var, scale, ext) in enumerate(terms):
                value = o if scale == 1 else tir.FloorDiv(dt, o, tir.IntImm(dt, scale))
                if n > 0:  # the outermost part needs no modulo
                    value = tir.FloorMod(dt, value, tir.IntImm(dt, ext))
                out[var] = value
        return out

    return inverse


def _affine_domains(block: tir.Block, buf, prov: list, req: list, ranges: dict):
    """Iterator domains (var -> (dom, bound)) by inverting a bijective provided mapping, as
    TVM tries first: each iterator spans what the inverse gives at the required region's
    first and last points (and the buffer shape bounds it the same way). None when the
    provided indices are no such mapping.

    For a fused index that is only right when the region stays within one row of the outer
    iterator, or when the inner iterator's span is its whole extent anyway. Where neither can
    be proven (TVM 0.27 then yields loops that miss part of the region, and its own checker
    flags the result), the inner iterator sweeps its whole extent: more work, same values."""
    if not all(p[1] is not None and _can_prove_equal(p[0], p[1], ranges) for p in prov):
        return None
    found = _affine_inverse(block, [p[0] for p in prov], ranges)
    if found is None or any(r[0] is None or r[1] is None for r in req):
        return None
    inverse, dims = found
    shape_last = [tir.Max(d.dtype, tir.Sub(d.dtype, d, tir.IntImm(d.dtype, 1)), tir.IntImm(d.dtype, 0))
                  for d in buf.shape]

    def spans(firsts: list, lasts: list) -> dict:
        lo_pt, hi_pt = inverse(firsts), inverse(lasts)
        out = {}
        for (terms, base, dt), first, last in zip(dims, firsts, lasts):
            for k, (var, _, ext) in enumerate(terms):
                a, b = _simp(lo_pt[var], ranges), _simp(hi_pt[var], ranges)
                span = (_min(a, b, ranges), _max(a, b, ranges))
                if k > 0:
                    outer_scale = tir.IntImm(dt, terms[k - 1][1])

                    def row(o):
                        o = make_cast(o, dt)
                        return tir.FloorDiv(dt, tir.Sub(dt, o, tir.IntImm(dt, base)) if base else o, outer_scale)

                    same_row = _simp(tir.Sub(dt, row(last), row(first)), ranges)
                    full = (tir.IntImm(dt, 0), tir.IntImm(dt, ext - 1))
                    if not (_exact_zero(same_row, ranges) or
                            (_can_prove_equal(span[0], full[0], ranges) and _can_prove_equal(span[1], full[1], ranges))):
                        span = full
                out[var] = span
        return out

    doms = spans([r[0] for r in req], [r[1] for r in req])
    bounds = spans([tir.IntImm(d.dtype, 0) for d in buf.shape], shape_last)
    return {var: (doms[var], bounds[var]) for var in doms}


def _exact_zero(e, ranges) -> bool:
    if isinstance(e, tir.IntImm):
        return e.value == 0
    r = _periodic_range(e, ranges)
    return r == (0, 0)


def _iter_domains(block: tir.Block, provided: dict, required: dict, ranges: dict) -> list:
    """One `_VarDomain` per block iterator, covering every required region."""
    doms = {iv.var: _VarDomain() for iv in block.iter_vars}
    for buf, prov_list in provided.items():
        req_list = required.get(buf)
        if not req_list:
            continue
        req = req_list[0]
        for other in req_list[1:]:
            req = [_union(a, b, ranges) for a, b in zip(req, other)]
        prov = prov_list[0]
        for other in prov_list[1:]:
            prov = [_union(a, b, ranges) for a, b in zip(prov, other)]
        affine = _affine_domains(block, buf, prov, req, ranges)
        if affine is not None:
            for var, (dom, bound) in affine.items():
                doms[var].union(dom, bound, ranges)
            continue
        for d, (p, r) in enumerate(zip(prov, req)):
            shape_d = buf.shape[d]
            dim_max = _simp(tir.Max(shape_d.dtype, tir.Sub(shape_d.dtype, shape_d, tir.IntImm(shape_d.dtype, 1)),
                                       tir.IntImm(shape_d.dtype, 0)), ranges)
            if isinstance(p[0], tir.IntImm) and _can_prove_equal(p[0], p[1], ranges):
                if not (_can_prove_equal(r[0], r[1], ranges) and _can_prove_equal(p[0], r[0], ranges)):
                    raise _DomainError(f"the block provides only element {p[0].value} of dimension {d} of buffer "
                                       f"'{buf.name}', but more is required there")
                continue
            var, dom, bound = _solve(p, r, make_cast(dim_max, p[0].dtype), ranges)
            if var in doms:
                doms[var].union(dom, bound, ranges)
    out = []
    for iv in block.iter_vars:
        info = doms[iv.var]
        whole = (iv.dom.min, simplify(_last(iv.dom.min, iv.dom.extent)))
        info.bound = whole if info.bound is NOTHING else _intersect(info.bound, whole, ranges)
        info.finish(ranges)
        if info.dom is NOTHING:
            info.dom = whole
        out.append(info)
    return out


def _cover_range(dom, iter_dom: tir.Range) -> tuple:
    """(min, extent) of an interval, or the iterator's whole domain when it is unbounded."""
    lo, hi = dom
    if lo is None or hi is None:
        return iter_dom.min, iter_dom.extent
    lo = simplify(lo)
    ext = simplify(tir.Sub(lo.dtype, tir.Add(lo.dtype, make_cast(hi, lo.dtype), tir.IntImm(lo.dtype, 1)), lo))
    return lo, ext


def _bits(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return int(digits) if digits else 32


def _make_loop_nest(block_realize, doms: list, ranges: dict, preserve_unit_loops: bool):
    """The new realize of the moved block under its ``ax`` loops, with the predicate that keeps
    each iterator inside its bound where that cannot be proven."""
    block = block_realize.block
    ranges = dict(ranges)
    loop_vars, extents, values = [], [], []
    conds = []
    for iv, info in zip(block.iter_vars, doms):
        lo, ext = _cover_range(info.dom, iv.dom)
        if preserve_unit_loops or const_value(ext) != 1:
            dtype = f"int{max(_bits(lo.dtype), _bits(ext.dtype))}"
            var = tir.Var(dtype, f"ax{len(loop_vars)}")
            ext = _simp(make_cast(ext, dtype), ranges)
            if not isinstance(ext, tir.IntImm):
                ext = _exact_constant(ext, ranges) or ext
            loop_vars.append(var)
            extents.append(ext)
            value = var if const_value(lo) == 0 else tir.Add(dtype, make_cast(lo, dtype), var)
            ranges[var] = (tir.IntImm(dtype, 0), ext)
        else:
            value = lo
        values.append(value)
        if info.bound is not NOTHING:
            b_lo, b_hi = info.bound
            if b_lo is not None:
                c = tir.GE("bool", value, make_cast(b_lo, value.dtype))
                if not _proven(c, ranges):
                    conds.append(c)
            if b_hi is not None:
                c = tir.LT("bool", value, make_cast(tir.Add(b_hi.dtype, b_hi, tir.IntImm(b_hi.dtype, 1)), value.dtype))
                if not _proven(c, ranges):
                    conds.append(c)
    pred = None
    for c in conds:
        pred = c if pred is None else tir.And("bool", pred, c)
    pred = tir.IntImm("bool", 1) if pred is None else _simp(pred, ranges)
    if isinstance(pred, tir.IntImm):
        pred = tir.IntImm("bool", 1 if pred.value else 0)
    stmt = tir.BlockRealize(values, pred, block)
    for var, ext in reversed(list(zip(loop_vars, extents))):
        stmt = tir.For(var, tir.IntImm(var.dtype, 0), ext, "serial", stmt)
    return stmt


def _eval_int(e, env: dict) -> int:
    if isinstance(e, tir.IntImm):
        return e.value
    if isinstance(e, tir.Var):
        return env[e]
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype):
        return _eval_int(e.value, env)
    ops = {tir.Add: lambda x, y: x + y, tir.Sub: lambda x, y: x - y, tir.Mul: lambda x, y: x * y,
           tir.FloorDiv: lambda x, y: x // y, tir.FloorMod: lambda x, y: x % y, tir.Min: min, tir.Max: max}
    op = ops.get(type(e))
    if op is None:
        raise ValueError(type(e).__name__)
    return op(_eval_int(e.a, env), _eval_int(e.b, env))


def _periodic_range(e, ranges: dict, limit: int = 4096) -> Optional[tuple]:
    """Exact (min, max) of ``e`` over the whole ranges of its variables, found by evaluating
    it over one period, or None. Built of +, -, * and floor division/modulo by positive
    constants, ``e(v + P) - e(v)`` is the same for every ``v`` once the shift ``P`` is a
    multiple of every divisor, so checking it is 0 at one point proves ``e`` periodic, and one
    period holds every value. This decides what TVM's simplifier proves from residues, e.g.
    that the extent ``(f * 96 + 95) // 64 - f * 96 // 64 + 1`` (a tile of a fused loop split by
    a size the row length does not divide) is 2 for every ``f``."""
    divisors = []

    def collect(x) -> bool:
        if isinstance(x, (tir.IntImm, tir.Var)):
            return True
        if isinstance(x, tir.Cast):
            return collect(x.value)
        if isinstance(x, (tir.FloorDiv, tir.FloorMod)):
            if not (isinstance(x.b, tir.IntImm) and x.b.value > 0):
                return False
            divisors.append(x.b.value)
        elif not isinstance(x, (tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max)):
            return False
        return collect(x.a) and collect(x.b)

    if not collect(e):
        return None
    period = 1
    for d in divisors:
        period *= d
    windows = []
    for v in vars_in([e]):
        r = ranges.get(v)
        lo, ext = (const_value(r[0]), const_value(r[1])) if r is not None else (None, None)
        if lo is None or ext is None or ext <= 0:
            return None
        windows.append((v, lo, ext))
    total = 1
    for _, _, ext in windows:
        total *= min(ext, period)
    if total > limit:
        return None
    try:
        base = {v: lo for v, lo, _ in windows}
        for v, lo, ext in windows:  # periodic in each variable that spans more than a period
            if ext > period and _eval_int(e, {**base, v: lo + period}) != _eval_int(e, base):
                return None
        points = [dict()]
        for v, lo, ext in windows:
            points = [{**p, v: lo + k} for p in points for k in range(min(ext, period))]
        values = [_eval_int(e, p) for p in points]
    except (ValueError, KeyError, ZeroDivisionError):
        return None
    return (min(values), max(values)) if values else None


def _exact_constant(e, ranges: dict) -> Optional[tir.IntImm]:
    """``e`` as a constant when it takes one value over the ranges of its variables."""
    r = _periodic_range(e, ranges)
    return tir.IntImm(e.dtype, r[0]) if r is not None and r[0] == r[1] else None


def _proven(cond, ranges) -> bool:
    """``cond`` holds for every value of the loops in ``ranges``. Besides what simplification
    decides, a comparison is proven from the symbolic bounds of its two sides' difference
    (TVM's kSymbolicBound): ``i_0 * 32 + ax0 < (m + 31) // 32 * 32`` holds when ``i_0`` runs
    below ``(m + 31) // 32`` and ``ax0`` below 32, whatever ``m`` is."""
    r = _simp(cond, ranges)
    if isinstance(r, tir.IntImm):
        return bool(r.value)
    if not isinstance(cond, (tir.LT, tir.LE, tir.GT, tir.GE)) or not tir.is_int(cond.a.dtype):
        return False
    dt = cond.a.dtype
    diff = _simp(tir.Sub(dt, cond.a, make_cast(cond.b, dt)), ranges)
    dom = {v: tir.Range(r[0], r[1]) for v, r in ranges.items() if v in set(vars_in([diff]))}
    got = eval_range(diff, dom, ranges)
    if got is None:
        return False
    lo, ext = got
    if isinstance(cond, (tir.LT, tir.LE)):
        hi = _simp(_last(lo, ext), {})
        return isinstance(hi, tir.IntImm) and (hi.value < 0 if isinstance(cond, tir.LT) else hi.value <= 0)
    lo = _simp(lo, {})
    return isinstance(lo, tir.IntImm) and (lo.value > 0 if isinstance(cond, tir.GT) else lo.value >= 0)


def _insertion_point(sch, prim, block_realize, subtrees: list, producers: list, consumers: list,
                     need_producers: bool, need_consumers: bool, index: int) -> tuple:
    """Where among the loop body's statements the block may go: after the last statement
    holding a producer, at or before the first holding a consumer. Returns the position and
    the realizes of the scope's blocks found under the loop."""
    found = {}
    n_prod = n_cons = 0
    last_prod, first_cons = -1, len(subtrees)
    prod_ids = {id(p) for p in producers}
    cons_ids = {id(c) for c in consumers}
    for n, s in enumerate(subtrees):
        here = child_block_realizes(s) if not isinstance(s, tir.BlockRealize) else [s]
        p_here = c_here = 0
        for r in here:
            found[id(r)] = r
            p_here += id(r) in prod_ids
            c_here += id(r) in cons_ids
        if p_here:
            last_prod = n
        if c_here and first_cons == len(subtrees):
            first_cons = n
        n_prod += p_here
        n_cons += c_here
    if last_prod >= first_cons:
        raise sch.error(prim, f"block {quoted_name(block_realize)}",
                        "cannot find an insertion point that satisfies the producer-consumer constraint: in 0-based "
                        f"indexing, the last producer appears in subtree {last_prod} of the loop body, and the first "
                        f"consumer in subtree {first_cons}", block_realize)
    for needed, count, group, what in ((need_producers, n_prod, producers, "producer"),
                                       (need_consumers, n_cons, consumers, "consumer")):
        if needed and count < len(group):
            missing = [g for g in group if id(g) not in found]
            raise sch.error(prim, f"block {quoted_name(block_realize)}",
                            f"the primitive requires all the {what}(s) of the given block to be present under the "
                            f"target loop, but {len(group) - count} {what}(s) are not: "
                            + ", ".join(quoted_name(m) for m in missing), block_realize)
    if index == -1:
        pos = first_cons
    elif index == -2:
        pos = last_prod + 1
    elif index >= 0 and last_prod + 1 <= index <= first_cons:
        pos = index
    else:
        raise sch.error(prim, f"block {quoted_name(block_realize)}",
                        f"index {index} is not a valid insertion point: valid are -1, -2 and "
                        f"[{last_prod + 1}, {first_cons}]", block_realize)
    return pos, found


def _compute_at_impl(sch: Schedule, prim: str, block, loop, preserve_unit_loops: bool, index: int,
                     is_compute_at: bool) -> None:
    block = as_block_rv(sch, block, prim)
    idx, realize = sch.resolve_block(block, prim)
    if not isinstance(loop, LoopRV):
        raise TypeError(f"{prim}: expected a loop (LoopRV), got {type(loop).__name__}")
    if loop.func_name != block.func_name:
        raise sch.error(prim, f"block {quoted_name(realize)}", f"the loop is in function '{loop.func_name}', the block in "
                        f"'{block.func_name}'", realize)
    _, target = sch.resolve_loop(loop, prim)
    index = int(index)

    # 1. The scope must be a stage pipeline; the block complete or a reduction.
    scope = scope_of(sch, prim, idx, realize)
    producers = scope.producers(realize)
    consumers = scope.consumers(realize)
    check_complete_or_reduction(sch, prim, scope, realize)

    # 2. The loop is in the same scope (only loops between it and the scope block) and does
    # not enclose the block already.
    ranges = {}
    for a in [target] + idx.ancestors(target):
        if isinstance(a, tir.For):
            ranges[a.loop_var] = (a.min, a.extent)
        elif isinstance(a, tir.Block):
            if a is not scope.block:
                raise _not_same_scope(sch, prim, realize, target)
            break
    if idx.is_ancestor(target, realize):
        raise _not_same_scope(sch, prim, realize, target)

    # 3. compute_at may not move a block whose results leave the scope.
    if is_compute_at:
        check_not_output(sch, prim, scope, realize)

    removed = leaf_removal_plan(sch, prim, idx, realize)

    # 4. Where the block goes among the loop body's statements.
    subtrees = list(target.body.seq) if isinstance(target.body, tir.SeqStmt) else [target.body]
    pos, found = _insertion_point(sch, prim, realize, subtrees, producers, consumers,
                                  need_producers=not is_compute_at, need_consumers=is_compute_at, index=index)

    # 5. Regions: provided by one instance of the block, required by its dependents under the loop.
    provided, required = {}, {}
    for br in (realize.block.writes if is_compute_at else realize.block.reads):
        provided.setdefault(br.buffer, []).append(_region_intervals(br.region))
        required[br.buffer] = []
    for dep in (consumers if is_compute_at else producers):
        dep_realize = found[id(dep)]
        binding = {iv.var: v for iv, v in zip(dep_realize.block.iter_vars, dep_realize.iter_values)}
        for br in (dep_realize.block.reads if is_compute_at else dep_realize.block.writes):
            if br.buffer not in required:
                continue
            rank = _storage_rank(br.buffer.scope) if is_compute_at else 0
            dom = _relax_dom(idx, dep_realize, target, rank)
            region = [tir.Range(substitute(r.min, binding), substitute(r.extent, binding)) for r in br.region]
            relaxed = _relax_region(region, dom, ranges)
            if relaxed is None:
                raise sch.error(prim, f"block {quoted_name(realize)}",
                                f"cannot bound the region of '{br.buffer.name}' that block {quoted_name(dep_realize)} "
                                "accesses under the loop", realize)
            required[br.buffer].append(relaxed)

    # 6. The iterator domains, the loops that sweep them, and the new tree.
    try:
        doms = _iter_domains(realize.block, provided, required, ranges)
    except _DomainError as e:
        raise sch.error(prim, f"block {quoted_name(realize)}", str(e), realize) from None
    nest = _make_loop_nest(realize, doms, ranges, preserve_unit_loops)
    subtrees.insert(pos, nest)
    new_target = dataclasses.replace(target, body=tir.SeqStmt(subtrees))
    body = replace_many(idx, {id(removed): (removed, None), id(target): (target, new_target)})
    sch.commit(block.func_name, body)
    forget_affine_flag(sch, block.func_name, realize.block.name)  # TVM recomputes the moved block's flag


def _not_same_scope(sch, prim, realize, target):
    return sch.error(prim, f"block {quoted_name(realize)} and loop '{target.loop_var.name}'",
                     "expected the block and the loop to be under the same block scope, and the loop not to be an "
                     "ancestor of the block", realize)


@primitive
def compute_at(sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
               index: int = -1) -> None:
    """Move a producer block under ``loop`` (a loop of its consumers), regenerating loops that
    produce exactly the region the consumers under the loop read per iteration.

    Requires: the block and the loop in the same scope, the loop not around the block already,
    a stage-pipeline scope, a complete or reduction block that is not an output block, and
    every consumer of the block under the loop. ``index``: -1 puts the block at the last legal
    position (just before the first consumer), -2 at the first (just after the last producer),
    n >= 0 at that position of the loop body if it is legal."""
    _compute_at_impl(sch, "compute_at", block, loop, preserve_unit_loops, index, True)


@primitive
def reverse_compute_at(sch: Schedule, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                       index: int = -1) -> None:
    """Move a consumer block under ``loop`` (a loop of its producers), regenerating loops that
    consume exactly the region the producers under the loop write per iteration.

    Requires: the block and the loop in the same scope, the loop not around the block already,
    a stage-pipeline scope, a complete or reduction block, and every producer of the block
    under the loop. ``index`` as for `compute_at`."""
    _compute_at_impl(sch, "reverse_compute_at", block, loop, preserve_unit_loops, index, False)


takes_block_name("compute_at")
takes_block_name("reverse_compute_at")
