"""What the DLight rules know about a function before scheduling it.

`normalize_prim_func` puts every leaf block in the normal form the rules reason about — one
loop per non-unit iterator, in iterator order, named ``ax0, ax1, ...`` (iterators ``v0, v1``),
unit iterators dropped, a leading unit spatial iterator added to a block that has no spatial
one — and describes each block as a `BlockInfo`: its iterators' kinds (``"S"`` spatial, ``"R"``
reduce, ``"O"`` other) and extents, with the loop handle of each, and whether it is a reduction.
A function whose blocks are not bound one to one to their loops (already scheduled, or written
by hand) is refused (None): the rules only schedule the plain loop nests legalization produces.

The other helpers answer the rules' questions about one block: which read dominates it (the
one using the most iterators, whose flattened index tells the memory order of the iterators,
`detect_dominant_read` + `normalize_to_iter_sum`), whether an epilogue broadcasts the result,
whether a reduction is a GEMV.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.arith.canonical import Canonical
from tvmscript.ir.tir_visitor import vars_in

from ..schedule import Schedule, ScheduleError
from ..schedule.common import blocks_under
from ..schedule.tree import stmt_children

__all__ = ["IterInfo", "BlockInfo", "SBlockInfo", "normalize_prim_func", "get_sblock_info", "get_root_block",
           "collect_block_iter_vars_used_in_access_region", "collect_vars_used_in_prim_expr",
           "detect_dominant_read", "is_broadcast_epilogue", "normalize_to_iter_sum", "IterSumExpr",
           "IterSplitExpr", "get_max_shared_memory_per_block", "is_reduction_block",
           "get_reduction_expr", "is_gemv", "normalize_gemv", "has_thread_binding", "has_thread_env", "offset_of",
           "dominant_access", "gemv_vector_operands", "is_gemv_reduction", "gemv_access"]


# ----------------------------------------------------------------------------- block info


class IterInfo:
    """One block iterator: its kind, Var, extent and the loop it is bound to."""

    __slots__ = ("kind", "var", "_dom", "loop_rv")

    def __init__(self, kind: str, var: tir.Var, dom, loop_rv) -> None:
        self.kind, self.var, self._dom, self.loop_rv = kind, var, dom, loop_rv

    @property
    def dom(self):
        """The extent: an int when it is a constant, else the expression."""
        return self._dom.value if isinstance(self._dom, tir.IntImm) else self._dom

    def __repr__(self) -> str:
        return f'Iter("{self.kind}", {self.dom})'


class BlockInfo:
    """A block with its iterators (`IterInfo`) and whether it is a reduction (TVM's
    ``SBlockInfo``)."""

    def __init__(self, name: str, iters: list, block_rv, reduction_block: bool = False) -> None:
        self.name, self.iters, self.block_rv = name, iters, block_rv
        self._reduction_block = reduction_block

    def dom(self) -> list:
        return [i.dom for i in self.iters]

    def dom_kind(self) -> str:
        """``"SSR"``: the kind of each iterator."""
        return "".join(i.kind for i in self.iters)

    def is_injective(self) -> bool:
        return all(k == "S" for k in self.dom_kind())

    def is_elementwise(self, sch: Schedule) -> bool:
        """Injective, one read and one write, both indexed by the iterators in order."""
        if not self.is_injective():
            return False
        block = sch.get(self.block_rv)
        if len(block.reads) != 1 or len(block.writes) != 1:
            return False
        r, w = block.reads[0].region, block.writes[0].region
        if len(r) != len(w) or len(r) != len(block.iter_vars):
            return False
        for iv, a, b in zip(block.iter_vars, r, w):
            if a.min is not iv.var or b.min is not iv.var or not tir.is_const_int(a.extent, 1) \
                    or not tir.is_const_int(b.extent, 1):
                return False
        return True

    def is_reduction(self) -> bool:
        return self._reduction_block

    def get_loops(self) -> list:
        return [i.loop_rv for i in self.iters]

    def __repr__(self) -> str:
        return f'BlockInfo("{self.name}", "{self.dom_kind()}", {self.dom()})'


SBlockInfo = BlockInfo  # TVM 0.27's name


def _iter_kind(iv: tir.IterVar) -> str:
    return iv.kind if iv.kind in ("S", "R") else "O"


def get_root_block(sch: Schedule, func_name: str = "main"):
    body = sch.func(func_name).body
    if not isinstance(body, tir.BlockRealize):
        raise ValueError(f"the body of '{func_name}' is expected to be the root block")
    return sch.get_block(body.block.name, func_name)


def has_thread_env(stmt) -> bool:
    """Whether ``stmt`` launches threads itself: a loop bound to a thread anywhere inside it."""
    if isinstance(stmt, tir.For) and stmt.kind == "thread_binding":
        return True
    return any(has_thread_env(c) for c in stmt_children(stmt))


def has_thread_binding(func: tir.PrimFunc) -> bool:
    """Whether any loop of ``func`` is bound to a thread axis (the function is scheduled)."""
    return has_thread_env(func.body)


def _leaf_blocks(sch: Schedule, block_rv) -> list:
    out = []
    for child in sch.get_child_blocks(block_rv):
        leaves = _leaf_blocks(sch, child)
        out.extend(leaves if leaves else [child])
    return out


def is_reduction_block(sch: Schedule, block_rv) -> bool:
    """TVM's reduction-block test: an init, only spatial and reduce iterators, the only
    writer of its outputs in its scope, and reduce iterators do not index the outputs."""
    idx, realize = sch.resolve_block(block_rv)
    block = realize.block
    if block.init is None:
        return False
    if any(iv.kind not in ("S", "R") for iv in block.iter_vars):
        return False
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    for w in block.writes:
        for r in w.region:
            if any(v in reduce_vars for v in vars_in([r.min, r.extent])):
                return False
    scope = idx.scope_realize(realize)
    siblings = blocks_under(scope.block if scope is not None else idx.root)
    written = {w.buffer for w in block.writes}
    for other in siblings:
        if other is realize:
            continue
        if any(w.buffer in written for w in other.block.writes):
            return False
    return True


def normalize_prim_func(sch: Schedule, func_name: str = "main") -> Optional[list]:
    """The leaf blocks of the function in the normal form (see the module docstring), as
    `BlockInfo`, or None when some block's iterators are not bound one to one, in order, to
    loops starting at 0. A block whose loops it cannot rewrite (loops shared with another
    block) is described as it is."""
    try:
        root = get_root_block(sch, func_name)
    except (ValueError, ScheduleError):
        return None
    blocks = _leaf_blocks(sch, root)
    for b in blocks:
        idx, realize = sch.resolve_block(b)
        loops = idx.loops_above(realize)
        if not loops:
            continue
        if len(loops) != len(realize.iter_values):
            return None
        for lp, v in zip(loops, realize.iter_values):
            if v is not lp.loop_var or not tir.is_const_int(lp.min, 0):
                return None
    infos = []
    for b in blocks:
        block = sch.get(b)
        if sch.get_loops(b) and block.iter_vars:
            outputs_of = []
            has_spatial = False
            for n, iv in enumerate(block.iter_vars):
                if not tir.is_const_int(iv.dom.extent, 1):
                    outputs_of.append(n)
                    if iv.kind == "S":
                        has_spatial = True
            lead_zero = not outputs_of or not has_spatial

            def index_map(*vs, _outs=tuple(outputs_of), _lead=lead_zero):
                out = [vs[n] for n in _outs]
                return ([tir.IntImm("int64", 0)] if _lead else []) + out

            try:
                sch.transform_block_layout(b, index_map)
            except ScheduleError:
                pass
        block = sch.get(b)
        loops = sch.get_loops(b)
        infos.append(BlockInfo(
            name=block.name,
            iters=[IterInfo(_iter_kind(iv), iv.var, iv.dom.extent, lp) for lp, iv in zip(loops, block.iter_vars)],
            block_rv=b,
            reduction_block=is_reduction_block(sch, b)))
    return infos


def get_sblock_info(sch: Schedule, block_rv) -> BlockInfo:
    """A block as it is (no normalization), its iterators zipped with its loops."""
    block = sch.get(block_rv)
    return BlockInfo(
        name=block.name,
        iters=[IterInfo(_iter_kind(iv), iv.var, iv.dom.extent, lp)
               for lp, iv in zip(sch.get_loops(block_rv), block.iter_vars)],
        block_rv=block_rv,
        reduction_block=any(iv.kind == "R" for iv in block.iter_vars))


# ----------------------------------------------------------------------------- accesses


def collect_vars_used_in_prim_expr(expr) -> set:
    return set(vars_in([expr]))


def collect_block_iter_vars_used_in_access_region(block: tir.Block, region: list) -> set:
    """The block iterators the (point) region's indices use."""
    used: set = set()
    for r in region:
        used |= set(vars_in([r.min]))
    return used & {iv.var for iv in block.iter_vars}


def offset_of(buffer: tir.Buffer, indices: list):
    """The row-major flattened offset of ``indices`` in ``buffer``."""
    if not indices:
        return tir.IntImm("int64", 0)
    dtype = indices[0].dtype
    out = None
    for n, i in enumerate(indices):
        if out is None:
            out = i
        else:
            dim = buffer.shape[n]
            if dim.dtype != dtype:
                dim = tir.IntImm(dtype, dim.value) if isinstance(dim, tir.IntImm) else tir.Cast(dtype, dim)
            i = i if i.dtype == dtype else tir.Cast(dtype, i)
            out = tir.Add(dtype, tir.Mul(dtype, out, dim), i)
    return simplify(out)


def detect_dominant_read(block: tir.Block, among: Optional[set] = None):
    """The flattened index of the read that uses the most block iterators (of ``among``, when
    given; the first such read)."""
    best, best_n = None, -1
    for r in block.reads:
        used = collect_block_iter_vars_used_in_access_region(block, r.region)
        n = len(used if among is None else used & among)
        if n > best_n:
            best, best_n = r, n
    if best is None:
        raise ValueError(f"block '{block.name}' reads nothing")
    return offset_of(best.buffer, [x.min for x in best.region])


def dominant_access(block: tir.Block, among: Optional[set] = None) -> "IterSumExpr":
    """The dominant read's index (`detect_dominant_read`) as a sum of splits of the block's
    iterators (`normalize_to_iter_sum`): its ``args`` give the iterators' memory order."""
    return normalize_to_iter_sum(detect_dominant_read(block, among), {iv.var: iv.dom.extent for iv in block.iter_vars})


def is_broadcast_epilogue(sch: Schedule, block, epilogue) -> bool:
    """Whether ``epilogue`` reads ``block``'s output with fewer (non-unit) iterators than it
    has: each output element is used by several epilogue elements."""
    written = {w.buffer for w in sch.get(block).writes}
    epi = sch.get(epilogue)
    iters = [iv for iv in epi.iter_vars if not tir.is_const_int(iv.dom.extent, 1)]
    for r in epi.reads:
        if r.buffer not in written:
            continue
        if len(collect_block_iter_vars_used_in_access_region(epi, r.region)) < len(iters):
            return True
    return False


# ----------------------------------------------------------------------------- iter sums


@dataclasses.dataclass
class IterSplitExpr:
    """``(source // lower_factor) % extent * scale`` (TVM's IterSplitExpr; ``source`` is the
    block iterator, ``source_extent`` its extent)."""

    source: tir.Var
    source_extent: object
    lower_factor: int
    extent: object
    scale: int


@dataclasses.dataclass
class IterSumExpr:
    """``sum(args) + base``, args by decreasing scale (TVM's normalize_to_iter_sum)."""

    args: list
    base: object


def normalize_to_iter_sum(index, input_iters: dict) -> IterSumExpr:
    """``index`` as a sum of splits of the iterators in ``input_iters`` (Var -> extent),
    ordered by decreasing scale. What it cannot express that way stays in ``base`` (non-zero,
    which the rules take as "not applicable")."""
    ranges = {v: (tir.IntImm(getattr(e, "dtype", v.dtype), 0), e if isinstance(e, tir.PrimExpr) else tir.IntImm(v.dtype, e))
              for v, e in input_iters.items()}
    c = Canonical(ranges)
    s = c.to_sum(index)
    args, rest = [], []
    for t in s.terms:
        if isinstance(t.index, tir.Var) and t.index in input_iters and t.scale > 0:
            ext = input_iters[t.index]
            ext_c = ext.value if isinstance(ext, tir.IntImm) else ext
            if t.upper is not None:
                extent = -(-t.upper // t.lower)
            elif isinstance(ext_c, int):
                extent = -(-ext_c // t.lower)
            elif t.lower == 1:
                extent = ext
            else:
                rest.append(t)
                continue
            args.append(IterSplitExpr(t.index, ext, t.lower, extent, t.scale))
        else:
            rest.append(t)
    args.sort(key=lambda a: -a.scale)
    base = s.base
    if rest:
        base = c.to_expr(type(s)(rest, s.base, s.dtype))
    elif not isinstance(base, tir.PrimExpr):
        base = tir.IntImm(s.dtype, base)
    return IterSumExpr(args, base)


# ----------------------------------------------------------------------------- targets


def _assert_gpu_target(target) -> None:
    if "gpu" not in target.keys:
        raise ValueError(f"expected a GPU target, got {target}")


def get_max_shared_memory_per_block(target) -> int:
    _assert_gpu_target(target)
    return target.max_shared_memory_per_block  # every GPU kind has a default (tvmscript/target.py)


# ----------------------------------------------------------------------------- GEMV


def get_reduction_expr(block: tir.Block):
    """``Y`` of a block whose body is ``X[...] = X[...] + Y``, else None."""
    store = block.body
    if not isinstance(store, tir.BufferStore) or not isinstance(store.value, tir.Add):
        return None
    a = store.value.a
    if not isinstance(a, tir.BufferLoad) or a.buffer is not store.buffer or len(a.indices) != len(store.indices):
        return None
    from tvmscript.ir.arith import expr_key

    if any(expr_key(x) != expr_key(y) for x, y in zip(a.indices, store.indices)):
        return None
    return store.value.b


def is_gemv_reduction(block: tir.Block, block_info: BlockInfo) -> bool:
    """A reduction ``X[...] = X[...] + Y`` writing one buffer, indexed by some iterator, from
    at least two reads: what every GEMV rule starts from."""
    return (block_info.is_reduction() and len(block.reads) >= 2 and len(block.writes) == 1
            and get_reduction_expr(block) is not None
            and bool(collect_block_iter_vars_used_in_access_region(block, block.writes[0].region)))


def gemv_vector_operands(block: tir.Block, iter_vars: set) -> Optional[list]:
    """The buffers of the reads that use some but not all of ``iter_vars`` (the vectors of a
    GEMV; the matrix uses them all), or None unless there are such reads and others."""
    out = []
    for r in block.reads:
        n = len(collect_block_iter_vars_used_in_access_region(block, r.region) & iter_vars)
        if 0 < n < len(iter_vars):
            out.append(r.buffer)
    return out if 0 < len(out) < len(block.reads) else None


def is_gemv(sch: Schedule, block_info: BlockInfo) -> Optional[list]:
    """The vector operands (read with some but not all iterators) of a GEMV-like reduction,
    or None when the block is not one."""
    block = sch.get(block_info.block_rv)
    if not is_gemv_reduction(block, block_info):
        return None
    return gemv_vector_operands(block, {iv.var for iv in block.iter_vars})


def gemv_access(sch: Schedule, block_info: BlockInfo, among: Optional[set] = None) -> Optional[tuple]:
    """``(access, uses, info_of)`` of a GEMV block: its dominant read's iterator sum
    (`dominant_access`), the iterators each of its writes and reads uses, and its `IterInfo`
    by Var; None when the read's index is not a plain sum of the block's iterators."""
    block = sch.get(block_info.block_rv)
    access = dominant_access(block, among)
    uses = [collect_block_iter_vars_used_in_access_region(block, b.region) for b in (*block.writes, *block.reads)]
    if collect_vars_used_in_prim_expr(access.base) & {iv.var for iv in block.iter_vars}:
        return None
    info_of = {i.var: i for i in block_info.iters}
    if not access.args or any(a.source not in info_of for a in access.args):
        return None
    return access, uses, info_of


def normalize_gemv(sch: Schedule, block_info: BlockInfo) -> Optional[bool]:
    """Order the GEMV block's loops as batch, spatial, reduce, inner (each fused to one loop;
    a unit loop where there is none) by the dominant read's memory order; True when the
    innermost axis of that read is a reduction (an inner reduction), None when not a GEMV."""
    found = gemv_access(sch, block_info)
    if found is None:
        return None
    access, uses, info_of = found
    batch, s_loops, r_loops, c_loops = [], [], [], []
    is_inner_reduction = info_of[access.args[-1].source].kind == "R"
    for a in access.args:
        info = info_of[a.source]
        loop = info.loop_rv
        is_red = info.kind == "R"
        if a.lower_factor > 1:
            if c_loops:
                return None
            loop, c_loop = sch.split(loop, factors=[None, a.lower_factor])
            if not is_red:
                return None
            c_loops.append(c_loop)
        if is_red:
            r_loops.append(loop)
        elif all(a.source in u for u in uses):
            batch.append(loop)
        else:
            s_loops.append(loop)
    if not s_loops or not r_loops:
        return None
    if not c_loops:
        c_loops = [sch.add_unit_loop(block_info.block_rv)]
    if not batch:
        batch = [sch.add_unit_loop(block_info.block_rv)]
    sch.reorder(*batch, *s_loops, *r_loops, *c_loops)
    sch.fuse(*batch)
    sch.fuse(*s_loops)
    sch.fuse(*r_loops)
    return is_inner_reduction
