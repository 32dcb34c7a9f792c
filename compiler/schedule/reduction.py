"""Reduction primitives: `decompose_reduction` and `rfactor`.

A reduction block (``with T.init(): C[vi, vj] = 0`` then ``C[vi, vj] += ...``) says *what* is
initialised, not *where*: the init runs before the first update of each output point. Both
primitives make that explicit in a different way:

* `decompose_reduction(block, loop)` moves the init out into its own block ``<name>_init``
  placed just before ``loop``, under copies (``<var>_init``) of the loops inside ``loop`` that
  the spatial iterators need; the block becomes ``<name>_update`` with no init. Code generators
  that cannot express "first iteration" (GPUs, vectorised CPU loops) need this.
* `rfactor(loop, factor_axis)` turns a reduction over ``loop`` into a partial reduction
  ``<name>_rf`` that keeps ``loop`` as a new spatial axis of a buffer ``<buffer>_rf``, followed
  by a write-back block (keeping the original name) that reduces over that axis. Partial sums
  can then run in parallel (threads, vector lanes). Only combiners that are associative and
  commutative can be split this way; they are recognised from the init value (the identity)
  and the update pattern: sum (0, ``x + y``), product (1, ``x * y``), min (the dtype's largest
  value, ``min(x, y)``), max (the dtype's smallest value, ``max(x, y)``).

Both check, as TVM does, that the block is a *reduction block* (`check_reduction_block`).
"""

from __future__ import annotations

import dataclasses
import operator
import weakref

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import conjuncts
from tvmscript.ir.tir_visitor import vars_in

from .blockize import substitute_block
from .common import const_value
from .iter_map import is_affine_binding
from .state import BlockRV, LoopRV, Schedule, primitive
from .tree import FuncIndex, child_block_realizes, collect_names, fresh_name, replace, stmt_children

__all__ = ["decompose_reduction", "rfactor", "check_reduction_block", "match_reducer", "forget_affine_flag"]


# ----------------------------------------------------------------------------- reduction blocks


def _uses(e, var_set) -> bool:
    return any(v in var_set for v in vars_in([e]))


def _stores(s) -> list:
    out = []

    def walk(x):
        if isinstance(x, tir.BufferStore):
            out.append(x)
        if isinstance(x, tir.BlockRealize):
            return  # a nested block's stores are its own
        for c in stmt_children(x):
            walk(c)

    walk(s)
    return out


# TVM caches, per block, whether its bindings are affine, and rfactor sets that flag on the two
# blocks it makes without checking: the rfactor block keeps the original predicate, which after
# a split that overshoots the reduction (K = 784 in tiles of 32) bounds a sum of loops no single
# binding equals (``k0 * 32 + k1 + k2 < 784`` over the bindings ``k0``, ``k1``, ``k2``), and
# which TVM's affine analysis would not accept. The flag holds until a primitive that moves
# the block (compute_at, reverse_compute_at) computes it again. tvms checks bindings when asked,
# so it remembers here which blocks rfactor vouched for: per schedule, (function, block name)
# -> the block's iterator Vars (a block rebuilt with new iterators is no longer vouched for).
_AFFINE_FLAG: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _set_affine_flag(sch: Schedule, func_name: str, block: tir.Block) -> None:
    _AFFINE_FLAG.setdefault(sch, {})[(func_name, block.name)] = tuple(iv.var for iv in block.iter_vars)


def forget_affine_flag(sch: Schedule, func_name: str, block_name: str) -> None:
    """A primitive moved the block: its bindings are judged again from now on (TVM recomputes
    the cached flag)."""
    _AFFINE_FLAG.get(sch, {}).pop((func_name, block_name), None)


def _affine_flag_set(sch: Schedule, func_name: str, block: tir.Block) -> bool:
    ivs = _AFFINE_FLAG.get(sch, {}).get((func_name, block.name))
    return ivs is not None and len(ivs) == len(block.iter_vars) and \
        all(v is iv.var for v, iv in zip(ivs, block.iter_vars))


def check_reduction_block(sch: Schedule, prim: str, idx: FuncIndex, realize: tir.BlockRealize,
                          func_name: str = "main") -> None:
    """Raise unless ``realize`` is a reduction block in TVM's sense:

    1. it has an init; 2. its bindings are affine (one loop point -> one block point), or it
    was made by `rfactor` and not moved since (TVM's cached flag, see `_AFFINE_FLAG`);
    3. its iterators are all spatial or reduce; 4. it is the only block of its scope writing
    its output buffers (so the init really runs first); 5. no reduce iterator indexes an
    output (each output point reduces over all of them)."""
    block = realize.block
    subject = f"block '{block.name}'"

    def fail(n: int, why: str):
        raise sch.error(prim, subject, f"it is not a reduction block (condition {n}: {why})", realize)

    if block.init is None:
        fail(1, "a reduction block has a T.init()")
    if not _affine_flag_set(sch, func_name, block) and not is_affine_binding(realize, idx.loops_above(realize)):
        fail(2, "its bindings must be quasi-affine expressions of the loops")
    if any(iv.kind not in ("S", "R") for iv in block.iter_vars):
        fail(3, "its iterators must all be spatial or reduce")
    siblings = idx.siblings(realize)
    written = {w.buffer for w in block.writes}
    for other in siblings:
        if other is realize:
            continue
        if any(w.buffer in written for w in other.block.writes):
            fail(4, f"block '{other.block.name}' of the same scope also writes its output")
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    for st in _stores(block.body):
        if any(_uses(i, reduce_vars) for i in st.indices):
            fail(5, "a reduce iterator is used to index the buffer it writes")


# ----------------------------------------------------------------------------- decompose_reduction


@primitive
def decompose_reduction(sch: Schedule, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split ``block``'s init out into ``<name>_init``, placed right before ``loop`` (an
    ancestor of the block no lower than any loop its reduce iterators use); the block becomes
    ``<name>_update``. Returns the init block."""
    idx, realize = sch.resolve_block(block, "decompose_reduction")
    _, lp = sch.resolve_loop(loop, "decompose_reduction")
    blk = realize.block
    loops = idx.loops_above(realize)
    pos = next((n for n, x in enumerate(loops) if x is lp), None)
    if pos is None:
        raise sch.error("decompose_reduction", f"loop '{lp.loop_var.name}'",
                        f"the loop is not an ancestor of block '{blk.name}'", realize)
    check_reduction_block(sch, "decompose_reduction", idx, realize, block.func_name)
    above = {x.loop_var for x in loops[:pos]}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "R" and _uses(value, above):
            raise sch.error("decompose_reduction", f"loop '{lp.loop_var.name}'",
                            f"the loop must be higher than every loop the reduce iterators of block "
                            f"'{blk.name}' use (iterator '{iv.var.name}' uses a loop above it)", realize)

    # The init block: copies of the spatial iterators, bound as before.
    var_map, iters, values = {}, [], []
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.kind != "S":
            continue
        nv = tir.Var(iv.var.dtype, iv.var.name)
        var_map[iv.var] = nv
        iters.append(tir.IterVar(nv, iv.dom, iv.kind))
        values.append(value)
    blocks, _ = collect_names(idx.root)
    init_name = fresh_name(blk.name + "_init", blocks)
    update_name = fresh_name(blk.name + "_update", blocks)
    init_body = substitute_block(blk.init, var_map)
    writes = [tir.BufferRegion(w.buffer, [tir.Range(substitute(r.min, var_map), substitute(r.extent, var_map))
                                          for r in w.region]) for w in blk.writes]
    # Loops from the block up to ``loop``: keep those the init's bindings use.
    chosen, discarded = [], set()
    bound = set(vars_in(values))
    for x in reversed(loops[pos:]):
        if x.loop_var in bound:
            chosen.append(x)
        else:
            discarded.add(x.loop_var)
    # The predicate keeps the conditions that do not mention the loops left out.
    predicate = None
    for c in conjuncts(realize.predicate):
        if not _uses(c, discarded):
            predicate = c if predicate is None else tir.And("bool", predicate, c)
    if predicate is None:
        predicate = tir.IntImm("bool", 1)
    init_block = tir.Block(name=init_name, iter_vars=iters, reads=[], writes=writes, body=init_body, init=None,
                           annotations=dict(blk.annotations))
    body = tir.BlockRealize(values, predicate, init_block)
    loop_map = {}
    for x in chosen:  # innermost first
        nv = tir.Var(x.loop_var.dtype, x.loop_var.name + "_init")
        loop_map[x.loop_var] = nv
        body = dataclasses.replace(x, loop_var=nv, body=body)
    body = substitute_block(body, loop_map)

    # The update block: no init; it now reads what it writes.
    read_bufs = {r.buffer for r in blk.reads}
    reads = [w for w in blk.writes if w.buffer not in read_bufs] + list(blk.reads)
    update = dataclasses.replace(blk, name=update_name, init=None, reads=reads)
    sub = FuncIndex(lp)
    new_lp = replace(sub, realize, tir.BlockRealize(realize.iter_values, realize.predicate, update))
    new_body = replace(idx, lp, tir.SeqStmt([body, new_lp]))
    sch.commit(block.func_name, new_body, renames={blk.name: update_name})
    return sch.block_rv(block.func_name, init_name)


# ----------------------------------------------------------------------------- reducers


def _max_value(dtype: str):
    if dtype == "bfloat16":
        return tir.FloatImm(dtype, 3.3895313892515355e38)
    if dtype.startswith("float"):
        bits = int(dtype[5:] or 32)
        return tir.FloatImm(dtype, {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[bits])
    if dtype == "bool":
        return tir.IntImm(dtype, 1)
    if dtype.startswith("uint"):
        return tir.IntImm(dtype, (1 << int(dtype[4:] or 32)) - 1)
    bits = int(dtype[3:] or 32)
    return tir.IntImm(dtype, (1 << (bits - 1)) - 1)


def _min_value(dtype: str):
    if "float" in dtype:
        v = _max_value(dtype)
        return tir.FloatImm(dtype, -v.value)
    if dtype == "bool" or dtype.startswith("uint"):
        return tir.IntImm(dtype, 0)
    bits = int(dtype[3:] or 32)
    return tir.IntImm(dtype, -(1 << (bits - 1)))


# (name, node class of the combiner, identity of a dtype), in the order TVM tries them.
REDUCERS = (
    ("sum", tir.Add, lambda dt: tir.const(0, dt)),
    ("product", tir.Mul, lambda dt: tir.const(1, dt)),
    ("min", tir.Min, _max_value),
    ("max", tir.Max, _min_value),
)


def _same_const(a, b) -> bool:
    return (type(a) is type(b) and isinstance(a, (tir.IntImm, tir.FloatImm)) and a.dtype == b.dtype
            and a.value == b.value)


def _same(a, b) -> bool:
    from tvmscript.ir.structural import StructuralEqual
    return StructuralEqual().equal(a, b)


def match_reducer(init: tir.BufferStore, update: tir.BufferStore):
    """``(combiner class, identity, lhs, rhs)`` of a reduction ``update`` whose init stores
    ``init.value``, or None. As in TVM, the update must be ``combine(buf[idx], rhs)`` with the
    accumulator on the left, and the init value must be the combiner's identity."""
    dtype = update.value.dtype
    lhs = tir.BufferLoad(dtype, update.buffer, list(update.indices))
    for _, cls, identity in REDUCERS:
        ident = identity(dtype)
        if not _same_const(ident, init.value):
            continue
        v = update.value
        if type(v) is cls and _same(v.a, lhs):
            return cls, ident, lhs, v.b
    return None


# ----------------------------------------------------------------------------- rfactor


def _check_partials_initialised(sch, lname, realize, loops, lp, red_vars, iters, values) -> None:
    """Each partial result must get its init. The rfactor block initialises partial ``r`` at
    the first point of its reduce iterators; if a split's ``T.where`` removes that point (the
    partial has no element, e.g. the last piece of a loop that overshoots), the partial stays
    uninitialised while the write-back block still adds it in. TVM accepts such an rfactor;
    tvms refuses it."""
    conds = [c for c in conjuncts(realize.predicate) if _uses(c, red_vars)]
    if not conds:
        return
    reduce_loops = {v for iv, v in zip(iters, values) if iv.kind == "R" for v in vars_in([v])}
    first = {x.loop_var: x.min for x in loops if x.loop_var in reduce_loops}
    ranges = {x.loop_var: (x.min, x.extent) for x in loops}
    from tvmscript.ir.arith import simplify
    for c in conds:
        at_first = simplify(substitute(c, first), ranges)
        if not (isinstance(at_first, tir.IntImm) and at_first.value):
            raise sch.error("rfactor", lname,
                            "some partial results would never be initialised: the block's predicate "
                            f"'{c}' can exclude the first reduction point of a partial (a split that "
                            "overshoots the reduction extent puts empty partials on the factored loop)", realize)



def _loop_copy_nest(body, loops: list, var_map: dict):
    """``body`` under copies of ``loops`` (outermost first) with the new loop variables of
    ``var_map``."""
    for x in reversed(loops):
        body = dataclasses.replace(x, loop_var=var_map[x.loop_var], body=body)
    return body


@primitive
def rfactor(sch: Schedule, loop: LoopRV, factor_axis: int) -> BlockRV:
    """Factor the reduction under ``loop`` (a serial loop bound only to reduce iterators of the
    one block inside it): ``<name>_rf`` computes one partial result per iteration of ``loop``
    into ``<buffer>_rf`` (the new axis at position ``factor_axis`` of the buffer), and the
    original block reduces those partial results. Returns the rfactor block."""
    idx, lp = sch.resolve_loop(loop, "rfactor")
    lname = f"loop '{lp.loop_var.name}'"
    children = child_block_realizes(lp)
    if len(children) != 1:
        raise sch.error("rfactor", lname, f"the loop must contain exactly one block, but it contains {len(children)}")
    realize = children[0]
    blk = realize.block
    check_reduction_block(sch, "rfactor", idx, realize, loop.func_name)
    if lp.kind != "serial":
        raise sch.error("rfactor", lname, f"the loop must be serial, but it is {lp.kind}", realize)
    dp_vars, red_vars = set(), set()
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        (dp_vars if iv.kind == "S" else red_vars).update(vars_in([value]))
    loops = idx.loops_above(realize)
    first = child_block_realizes(loops[0])
    if not first or first[0] is not realize:
        raise sch.error("rfactor", f"loop '{loops[0].loop_var.name}'",
                        f"block '{blk.name}' must be the first block under the outermost loop around it", realize)
    met_reduction = False
    for x in loops:
        dp, rd = x.loop_var in dp_vars, x.loop_var in red_vars
        if dp and rd:
            raise sch.error("rfactor", f"loop '{x.loop_var.name}'",
                            "the loop is used by both spatial and reduce iterators of the block", realize)
        if dp:
            if x is lp:
                raise sch.error("rfactor", lname, "the loop is used by a spatial iterator of the block; "
                                "rfactor needs a loop bound to reduce iterators only", realize)
        elif rd:
            if not met_reduction:
                if len(child_block_realizes(x)) != 1:
                    raise sch.error("rfactor", f"loop '{x.loop_var.name}'",
                                    "the outermost reduction loop must contain only the reduction block", realize)
                met_reduction = True
        elif met_reduction and const_value(x.extent) != 1:
            raise sch.error("rfactor", f"loop '{x.loop_var.name}'",
                            "a loop bound to no iterator, of extent other than 1, must not be under a reduction loop",
                            realize)
    if lp.loop_var not in red_vars:
        raise sch.error("rfactor", lname, "the loop is not bound to a reduce iterator of the block", realize)
    init, update = blk.init, blk.body
    if not isinstance(init, tir.BufferStore) or not isinstance(update, tir.BufferStore) \
            or init.buffer is not update.buffer or len(init.indices) != len(update.indices) \
            or not all(_same(a, b) for a, b in zip(init.indices, update.indices)):
        raise sch.error("rfactor", f"block '{blk.name}'",
                        "the init and the body must each be one store to the same buffer element", realize)
    matched = match_reducer(init, update)
    if matched is None:
        raise sch.error("rfactor", f"block '{blk.name}'",
                        "no known reducer matches its init value and update (sum, product, min and max are "
                        "recognised, with the init being the reducer's identity and the update combine(acc, value))",
                        realize)
    combiner, identity, lhs, rhs = matched
    buf = update.buffer
    ndim = len(buf.shape)
    try:
        factor_axis = operator.index(factor_axis)
    except TypeError:
        raise TypeError(f"rfactor: factor_axis must be an int, not {type(factor_axis).__name__}") from None
    if factor_axis < -(ndim + 1) or factor_axis > ndim:
        raise sch.error("rfactor", f"buffer '{buf.name}'",
                        f"the written buffer has {ndim} dimension(s), so factor_axis must be in "
                        f"[{-(ndim + 1)}, {ndim}], not {factor_axis}", realize)
    axis = factor_axis + ndim + 1 if factor_axis < 0 else factor_axis

    # The rfactor buffer: the written buffer with the loop's extent inserted at ``axis``. Named
    # as TVM names it even when that name is taken (a second rfactor of the same reduction):
    # the printer tells buffers of one name apart (``matmul_rf_1``), as TVM's does.
    shape = list(buf.shape)
    shape.insert(axis, lp.extent)
    rf_buf = tir.Buffer(buf.name + "_rf", shape, buf.dtype, scope=buf.scope,
                        data=tir.Var("handle", buf.name + "_rf"))  # as T.alloc_buffer reads back

    # The rfactor block: the loop becomes a spatial iterator; reduce iterators that used it are
    # replaced by one reduce iterator per other loop they use.
    loop_of = {x.loop_var: x for x in loops}
    rf_var = tir.Var(lp.loop_var.dtype, "v" + lp.loop_var.name)
    rf_iter = tir.IterVar(rf_var, tir.Range(lp.min, lp.extent), "S")
    loop2iter = {lp.loop_var: rf_var}
    iters, values, var_map = [rf_iter], [lp.loop_var], {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "S" or lp.loop_var not in vars_in([value]):
            iters.append(iv)
            values.append(value)
            continue
        for v in vars_in([value]):
            x = loop_of.get(v)
            if x is None or v in loop2iter:
                continue
            nv = tir.Var(v.dtype, "v" + v.name)
            loop2iter[v] = nv
            iters.append(tir.IterVar(nv, tir.Range(x.min, x.extent), "R"))
            values.append(v)
        var_map[iv.var] = substitute(value, loop2iter)
    has_reduce = any(iv.kind == "R" for iv in iters)
    _check_partials_initialised(sch, lname, realize, loops, lp, red_vars, iters, values)
    rf_indices = list(update.indices)
    rf_indices.insert(axis, rf_var)
    rf_load = tir.BufferLoad(buf.dtype, rf_buf, rf_indices)
    rf_value = combiner(buf.dtype, rf_load, rhs) if has_reduce else rhs
    rf_body = substitute(tir.BufferStore(rf_buf, rf_value, rf_indices), var_map)
    rf_init = substitute(tir.BufferStore(rf_buf, identity, rf_indices), var_map) if has_reduce else None

    def sub_region(r, new_buf=None, insert=None):
        rng = [tir.Range(substitute(x.min, var_map), substitute(x.extent, var_map)) for x in r.region]
        if insert is not None:
            rng.insert(axis, insert)
        return tir.BufferRegion(new_buf if new_buf is not None else r.buffer, rng)

    rf_reads = [sub_region(r) for r in blk.reads]
    one = tir.IntImm(rf_var.dtype, 1)
    rf_writes = [sub_region(w, rf_buf if w.buffer is buf else None, tir.Range(rf_var, one) if w.buffer is buf else None)
                 for w in blk.writes]
    blocks, _ = collect_names(idx.root)
    rf_name = fresh_name(blk.name + "_rf", blocks)
    rf_block = tir.Block(name=rf_name, iter_vars=iters, reads=rf_reads, writes=rf_writes, body=rf_body,
                         init=rf_init, annotations=dict(blk.annotations))
    new_loop_vars = {x.loop_var: tir.Var(x.loop_var.dtype, x.loop_var.name) for x in loops}
    rf_realize = tir.BlockRealize([substitute(v, new_loop_vars) for v in values],
                                  substitute(realize.predicate, new_loop_vars), rf_block)
    rf_nest = _loop_copy_nest(rf_realize, loops, new_loop_vars)

    # The write-back block: reduces the partial results over the factored axis.
    wb_var = tir.Var(lp.loop_var.dtype, "v" + lp.loop_var.name)
    wb_iters = [tir.IterVar(wb_var, tir.Range(lp.min, lp.extent), "R")]
    wb_values = [lp.loop_var]
    wb_map = {rf_var: wb_var}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "S":
            nv = tir.Var(iv.var.dtype, iv.var.name)
            wb_iters.append(tir.IterVar(nv, iv.dom, "S"))
            wb_values.append(value)
            wb_map[iv.var] = nv
    wb_lhs = substitute(lhs, wb_map)
    wb_rhs = substitute(tir.BufferLoad(buf.dtype, rf_buf, rf_indices), wb_map)
    wb_indices = [substitute(i, wb_map) for i in update.indices]
    wb_body = tir.BufferStore(buf, combiner(buf.dtype, wb_lhs, wb_rhs), wb_indices)
    wb_init = tir.BufferStore(buf, identity, wb_indices)

    def point(load):
        return tir.BufferRegion(load.buffer, [tir.Range(i, tir.IntImm(i.dtype, 1)) for i in load.indices])

    wb_block = tir.Block(name=blk.name, iter_vars=wb_iters, reads=[point(wb_rhs)], writes=[point(wb_lhs)],
                         body=wb_body, init=wb_init, annotations=dict(blk.annotations))
    # TVM gives the write-back block no predicate, so after a split that overshoots a spatial
    # extent it writes out of bounds; keep the conditions on the loops that stay around it.
    removed = {x.loop_var for x in loops if x is not lp and x.loop_var in red_vars}
    wb_pred = None
    for cond in conjuncts(realize.predicate):
        if not _uses(cond, removed | {lp.loop_var}):
            wb_pred = cond if wb_pred is None else tir.And("bool", wb_pred, cond)
    wb_realize = tir.BlockRealize(wb_values, wb_pred if wb_pred is not None else tir.IntImm("bool", 1), wb_block)

    # The loops around the write-back block: the original ones, without the loops the reduce
    # iterators used (except ``loop`` itself, which the new reduce iterator runs over).
    loop_ids = {id(x) for x in loops}

    def rebuild(s):
        if isinstance(s, tir.For):
            if id(s) not in loop_ids:
                return s
            body = rebuild(s.body)
            if s is lp or s.loop_var not in red_vars:
                body = dataclasses.replace(s, body=body)
            return body
        if isinstance(s, tir.SeqStmt):
            return tir.seq([rebuild(x) for x in s.seq])
        if s is realize:
            return wb_realize
        return s

    new_top = tir.SeqStmt([rf_nest, rebuild(loops[0])])
    new_body = replace(idx, loops[0], new_top)
    # Allocate the rfactor buffer in the scope block.
    scope = idx.scope_realize(realize)
    new_idx = FuncIndex(new_body)
    if scope is not None:
        scope_realize = new_idx.blocks[scope.block.name]
        sb = scope_realize.block
        new_body = replace(new_idx, sb, dataclasses.replace(sb, alloc_buffers=list(sb.alloc_buffers) + [rf_buf]))
    else:
        raise sch.error("rfactor", f"block '{blk.name}'", "the block has no enclosing (root) block to allocate "
                        f"'{rf_buf.name}' in", realize)
    sch.commit(loop.func_name, new_body)
    _set_affine_flag(sch, loop.func_name, rf_block)
    _set_affine_flag(sch, loop.func_name, wb_block)
    return sch.block_rv(loop.func_name, rf_name)
