"""Loop primitives: queries (get_loops, get_child_blocks, get_producers, get_consumers), split,
fuse, reorder, and the loop kinds (parallel, vectorize, unroll, bind) and annotations.

Splitting, fusing and reordering only re-express which loop iteration runs which block
instance: a block's iterators keep their values, now computed from the new loop variables
(``vi = i_0 * 4 + i_1``). A split whose factors overshoot the extent guards the extra
iterations with a predicate (``T.where(i_0 * 4 + i_1 < 10)``).
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.tir_arith import make_add, make_cast, make_floordiv, make_floormod, make_mul
from tvmscript.ir.tir_visitor import vars_in

from .common import blocks_under, const_value, iter_kinds_of_loop, loop_ranges_above, rewrite_bindings
from .state import BlockRV, LoopRV, Schedule, primitive
from .tree import child_block_realizes, replace

THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "vthread", "vthread.x", "vthread.y", "vthread.z")


# ----------------------------------------------------------------------------- queries


@primitive
def get_loops(sch: Schedule, block: BlockRV) -> list:
    """The loops above ``block`` up to its enclosing block, outermost first."""
    idx, realize = sch.resolve_block(block, "get_loops")
    return [sch.loop_rv(block.func_name, lp.loop_var) for lp in idx.loops_above(realize)]


@primitive(positional=("block_or_loop",))
def get_child_blocks(sch: Schedule, block_or_loop) -> list:
    """The blocks directly inside a block or a loop (not inside a nested block)."""
    if isinstance(block_or_loop, BlockRV):
        _, node = sch.resolve_block(block_or_loop, "get_child_blocks")
    else:
        _, node = sch.resolve_loop(block_or_loop, "get_child_blocks")
    return [sch.block_rv(block_or_loop.func_name, r.block.name) for r in child_block_realizes(node)]


@primitive
def get_producers(sch: Schedule, block: BlockRV) -> list:
    """Blocks of the same scope, before ``block``, that write a buffer ``block`` reads."""
    idx, realize = sch.resolve_block(block, "get_producers")
    reads = {r.buffer for r in realize.block.reads}
    out = []
    for other in idx.siblings(realize):
        if other is realize:
            break
        if any(w.buffer in reads for w in other.block.writes):
            out.append(sch.block_rv(block.func_name, other.block.name))
    return out


@primitive
def get_consumers(sch: Schedule, block: BlockRV) -> list:
    """Blocks of the same scope, after ``block``, that read a buffer ``block`` writes."""
    idx, realize = sch.resolve_block(block, "get_consumers")
    writes = {w.buffer for w in realize.block.writes}
    out, after = [], False
    for other in idx.siblings(realize):
        if other is realize:
            after = True
            continue
        if after and any(r.buffer in writes for r in other.block.reads):
            out.append(sch.block_rv(block.func_name, other.block.name))
    return out


# ----------------------------------------------------------------------------- split


def _check_starts_at_zero(sch, prim, loop) -> None:
    if const_value(loop.min) != 0:
        raise sch.error(prim, f"loop '{loop.loop_var.name}'", "the loop does not start at 0")


@primitive
def split(sch: Schedule, loop: LoopRV, factors: list, preserve_unit_iters: bool = True,
          disable_predication: bool = False) -> list:
    """Split ``loop`` into ``len(factors)`` nested loops, outermost first; one factor may be
    None (inferred). A product larger than the extent adds a ``T.where`` predicate."""
    idx, lp = sch.resolve_loop(loop, "split")
    name = lp.loop_var.name
    _check_starts_at_zero(sch, "split", lp)
    dtype = lp.loop_var.dtype
    factors = list(factors)
    if len(factors) < 2:
        raise sch.error("split", f"loop '{name}'", "needs at least two factors")
    nones = [n for n, f in enumerate(factors) if f is None or (const_value(f) == -1)]
    if len(nones) > 1:
        raise sch.error("split", f"loop '{name}'", "at most one factor can be None (inferred)")
    exprs = []
    for f in factors:
        if f is None or const_value(f) == -1:
            exprs.append(None)
            continue
        if isinstance(f, tir.PrimExpr):
            v = const_value(f)
            if v is not None and v <= 0:
                raise sch.error("split", f"loop '{name}'", f"factor {v} is not positive")
            exprs.append(tir.IntImm(dtype, v) if v is not None else f)
        elif isinstance(f, int) and not isinstance(f, bool):
            if f <= 0:
                raise sch.error("split", f"loop '{name}'", f"factor {f} is not positive")
            exprs.append(tir.IntImm(dtype, f))
        else:
            raise TypeError(f"split: a factor must be an int, a PrimExpr or None, not {type(f).__name__}")
    known = tir.IntImm(dtype, 1)
    for e in exprs:
        if e is not None:
            known = simplify(tir.Mul(dtype, known, e))
    if nones:
        k = const_value(known)
        inferred = simplify(tir.FloorDiv(dtype, tir.Add(dtype, lp.extent, tir.Sub(dtype, known, tir.IntImm(dtype, 1))), known)) \
            if k != 1 else lp.extent
        exprs[nones[0]] = inferred
    total = tir.IntImm(dtype, 1)
    for e in exprs:
        total = simplify(tir.Mul(dtype, total, e))
    ext_c, tot_c = const_value(lp.extent), const_value(total)
    if ext_c is not None and tot_c is not None and tot_c < ext_c:
        raise sch.error("split", f"loop '{name}'",
                        f"the product of the factors ({tot_c}) is smaller than the loop's extent ({ext_c})")
    new_vars = [tir.Var(dtype, f"{name}_{n}") for n in range(len(exprs))]
    # loop_var = ((v0 * f1 + v1) * f2 + v2) ...
    value = None
    for v, f in zip(new_vars, exprs):
        unit = const_value(f) == 1 and not preserve_unit_iters
        term = tir.IntImm(dtype, 0) if unit else v
        value = term if value is None else make_add(make_mul(value, f), term)
    ranges = loop_ranges_above(idx, idx.parent_of(lp)) if idx.parent_of(lp) is not None else {}
    ranges.update({v: (tir.IntImm(dtype, 0), f) for v, f in zip(new_vars, exprs)})
    needs_guard = not disable_predication and const_value(simplify(tir.Sub(dtype, total, lp.extent), ranges)) != 0 and \
        not (ext_c is not None and tot_c == ext_c)
    guard = tir.LT("bool", value, lp.extent) if needs_guard else None
    if guard is not None and isinstance(simplify(guard, ranges), tir.IntImm):
        guard = None
    body = rewrite_bindings(lp.body, {lp.loop_var: value}, ranges, guard)
    for v, f in reversed(list(zip(new_vars, exprs))):
        body = tir.For(v, tir.IntImm(dtype, 0), f, "serial", body)
    sch.commit(loop.func_name, replace(idx, lp, body))
    return [sch.loop_rv(loop.func_name, v) for v in new_vars]


# ----------------------------------------------------------------------------- fuse


@primitive
def fuse(sch: Schedule, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
    """Fuse perfectly nested, adjacent loops (outermost first) into one (a single loop is
    just renamed, as TVM does)."""
    if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
        loops = tuple(loops[0])
    if not loops:  # one loop is fine, as in TVM: it is renamed ``<name>_fused``
        raise sch.error("fuse", "loops", "needs at least one loop")
    idx, first = sch.resolve_loop(loops[0], "fuse")
    fors = [first]
    for rv in loops[1:]:
        _, lp = sch.resolve_loop(rv, "fuse")
        if fors[-1].body is not lp:
            raise sch.error("fuse", f"loops '{fors[-1].loop_var.name}' and '{lp.loop_var.name}'",
                            "are not adjacent: the second must be the only statement in the first's body")
        fors.append(lp)
    for lp in fors:
        _check_starts_at_zero(sch, "fuse", lp)
    dtype = fors[0].loop_var.dtype
    if any(lp.loop_var.dtype != dtype for lp in fors):
        dtype = "int64"
    fused = tir.Var(dtype, "_".join(lp.loop_var.name for lp in fors) + "_fused")
    extent = tir.IntImm(dtype, 1)
    for lp in fors:
        extent = simplify(tir.Mul(dtype, extent, make_cast(lp.extent, dtype)))
    mapping = {}
    stride = None  # product of the extents of the loops inside
    # A loop with only unit loops outside it needs no modulus: the fused value divided by the
    # extents inside is already below its extent (TVM's simplifier proves the same from the
    # fused loop's range, a symbolic extent included).
    outermost = next((n for n, lp in enumerate(fors) if const_value(lp.extent) != 1), 0)
    for n, lp in reversed(list(enumerate(fors))):
        ext = make_cast(lp.extent, dtype)
        e = fused if stride is None else make_floordiv(fused, stride)
        if n > outermost:
            e = make_floormod(e, ext)
        if const_value(lp.extent) == 1:  # TVM substitutes 0 for a unit loop, whatever preserve_unit_iters
            e = tir.IntImm(dtype, 0)
        mapping[lp.loop_var] = e if lp.loop_var.dtype == dtype else tir.Cast(lp.loop_var.dtype, e)
        stride = ext if stride is None else simplify(tir.Mul(dtype, stride, ext))
    parent = idx.parent_of(fors[0])
    ranges = loop_ranges_above(idx, parent) if parent is not None else {}
    ranges[fused] = (tir.IntImm(dtype, 0), extent)
    body = rewrite_bindings(fors[-1].body, mapping, ranges)
    new = tir.For(fused, tir.IntImm(dtype, 0), extent, "serial", body)
    sch.commit(loops[0].func_name, replace(idx, fors[0], new))
    return sch.loop_rv(loops[0].func_name, fused)


# ----------------------------------------------------------------------------- reorder


@primitive
def reorder(sch: Schedule, *ordered_loops: LoopRV) -> None:
    """Put the given loops, which lie on one chain of nested loops, in the given order; the
    other loops of the chain keep their places."""
    if len(ordered_loops) == 1 and isinstance(ordered_loops[0], (list, tuple)):
        ordered_loops = tuple(ordered_loops[0])
    if not ordered_loops:
        return None
    idx = None
    fors = []
    for rv in ordered_loops:
        idx, lp = sch.resolve_loop(rv, "reorder")
        if any(lp is f for f in fors):
            raise sch.error("reorder", f"loop '{lp.loop_var.name}'", "appears more than once")
        fors.append(lp)
    chosen = {id(f) for f in fors}
    # The outermost chosen loop is the one no other chosen loop encloses.
    tops = [f for f in fors if not any(idx.is_ancestor(g, f) for g in fors if g is not f)]
    if len(tops) != 1:
        raise sch.error("reorder", "loops " + ", ".join(f"'{f.loop_var.name}'" for f in fors),
                        "are not on a single chain of nested loops")
    top = tops[0]
    chain = []
    cur = top
    remaining = set(chosen)
    while True:
        chain.append(cur)
        remaining.discard(id(cur))
        if not remaining:
            break
        if not isinstance(cur.body, tir.For):
            raise sch.error("reorder", "loops " + ", ".join(f"'{f.loop_var.name}'" for f in fors),
                            f"are not on a single chain: loop '{cur.loop_var.name}' has more than one statement "
                            f"(or a block) in its body before the next loop")
        cur = cur.body
    slots = [n for n, f in enumerate(chain) if id(f) in chosen]
    order = list(chain)
    for slot, f in zip(slots, fors):
        order[slot] = f
    # Reordered loops must not depend on each other's variables (their extents).
    for n, f in enumerate(order):
        outer_vars = {g.loop_var for g in order[n:]}
        if any(v in outer_vars for v in vars_in([f.min, f.extent])):
            raise sch.error("reorder", f"loop '{f.loop_var.name}'", "its extent depends on a loop being reordered")
    body = chain[-1].body
    for f in reversed(order):
        body = dataclasses.replace(f, body=body)
    sch.commit(ordered_loops[0].func_name, replace(idx, top, body))
    return None


# ----------------------------------------------------------------------------- loop kinds


def _check_data_parallel(sch, prim: str, idx, lp, allow_cross_thread: bool = False) -> None:
    for realize in blocks_under(lp):
        kinds = iter_kinds_of_loop(realize, lp.loop_var)
        bad = kinds - {"S"}
        if not bad:
            continue
        if allow_cross_thread and bad == {"R"}:
            continue
        kind = "reduction" if "R" in bad else "non-spatial"
        raise sch.error(prim, f"loop '{lp.loop_var.name}'",
                        f"it is bound to a {kind} iterator of block '{realize.block.name}'; only loops over "
                        "spatial iterators can be " + {"parallel": "parallelized", "vectorize": "vectorized",
                                                        "bind": "bound to blockIdx"}.get(prim, prim), realize)


def _set_kind(sch, loop, prim: str, kind: str, thread_tag=None) -> None:
    idx, lp = sch.resolve_loop(loop, prim)
    new = dataclasses.replace(lp, kind=kind, thread_tag=thread_tag)
    sch.commit(loop.func_name, replace(idx, lp, new))


@primitive
def parallel(sch: Schedule, loop: LoopRV) -> None:
    """Run ``loop``'s iterations on several CPU threads (spatial iterators only)."""
    idx, lp = sch.resolve_loop(loop, "parallel")
    _check_data_parallel(sch, "parallel", idx, lp)
    _set_kind(sch, loop, "parallel", "parallel")


@primitive
def vectorize(sch: Schedule, loop: LoopRV) -> None:
    """Run ``loop`` as one vector operation (spatial iterators only)."""
    idx, lp = sch.resolve_loop(loop, "vectorize")
    _check_data_parallel(sch, "vectorize", idx, lp)
    _set_kind(sch, loop, "vectorize", "vectorized")


@primitive
def unroll(sch: Schedule, loop: LoopRV) -> None:
    """Unroll ``loop`` completely."""
    sch.resolve_loop(loop, "unroll")
    _set_kind(sch, loop, "unroll", "unroll")


@primitive
def bind(sch: Schedule, loop: LoopRV, thread_axis: str) -> None:
    """Bind ``loop`` to a GPU thread axis (``blockIdx.x``, ``threadIdx.x``, ``vthread.x``, ...).
    A reduce loop may be bound to a threadIdx axis: a cross-thread reduction."""
    idx, lp = sch.resolve_loop(loop, "bind")
    if thread_axis not in THREAD_TAGS:
        raise sch.error("bind", f"loop '{lp.loop_var.name}'",
                        f"unknown thread axis '{thread_axis}' (expected one of {', '.join(THREAD_TAGS)})")
    _check_data_parallel(sch, "bind", idx, lp, allow_cross_thread=thread_axis.startswith("threadIdx"))
    _set_kind(sch, loop, "bind", "thread_binding", thread_axis)


# ----------------------------------------------------------------------------- annotations


@primitive
def annotate(sch: Schedule, block_or_loop, ann_key: str, ann_val) -> None:
    """Attach ``ann_key: ann_val`` to a block's or a loop's annotations. Python values stay
    Python values (TVM keeps them as they are and prints ``0.5``, not ``T.float32(0.5)``)."""
    _annotate(sch, block_or_loop, "annotate", ann_key, ann_val)


@primitive
def unannotate(sch: Schedule, block_or_loop, ann_key: str) -> None:
    """Remove ``ann_key`` from a block's or a loop's annotations."""
    _annotate(sch, block_or_loop, "unannotate", ann_key, None, remove=True)


def _annotate(sch, rv, prim, key, value, remove=False) -> None:
    if isinstance(rv, BlockRV):
        idx, realize = sch.resolve_block(rv, prim)
        node = realize.block
    else:
        idx, node = sch.resolve_loop(rv, prim)
    anns = dict(node.annotations)
    if remove:
        if key not in anns:
            what = f"block '{node.name}'" if isinstance(node, tir.Block) else f"loop '{node.loop_var.name}'"
            raise sch.error(prim, what, f"has no annotation '{key}'")
        del anns[key]
    else:
        anns[key] = value
    new = dataclasses.replace(node, annotations=anns)
    sch.commit(rv.func_name, replace(idx, node, new))
