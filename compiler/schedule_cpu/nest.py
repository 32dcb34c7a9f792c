"""The loop nests the default CPU schedule reschedules, recognized (`match_nest`) and described
(`Nest`, `NestLoop`) once for every rule.

A nest is taken when it has the simplest, most common form: serial loops, unannotated and
perfectly nested, each bound to one block iterator (or of extent 1), around one block that
stores one buffer element per spatial point: an elementwise op, or a reduction
``C[s] = C[s] <op> f(...)`` (``<op>`` one of ``+``, ``*``, ``max``, ``min``), usually with a
``T.init`` storing the same element. That form is what makes every rule legal (see the
package docstring); the rules then only decide how to tile, order and run the loops."""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import contains

from ..lower_tir import dtype_bytes
from .analysis import access_strides, buffer_loads, impure, reduction_rhs, same_indices


class NestLoop:
    """One loop of a nest, as it was: its variable, range and type, and the block iterator
    it binds. Compared by identity: the rules key their decisions by ``id(loop)``."""

    def __init__(self, var, lo, extent, dtype, iv=None, kind="S") -> None:
        self.var = var
        self.min = lo
        self.extent = extent
        self.dtype = dtype
        self.iv = iv  # the block IterVar it binds (None for an unbound extent-1 loop)
        self.kind = kind  # "S" or "R"

    @property
    def const_extent(self) -> Optional[int]:
        return self.extent.value if isinstance(self.extent, tir.IntImm) else None

    @property
    def shifts_back(self) -> bool:
        """Whether the last of this loop's tiles can be shifted back to end at its extent
        (`shifted_start`): it starts at 0 and is a block iterator."""
        return tir.is_const_int(self.min, 0) and self.iv is not None

    @property
    def shiftable(self) -> bool:
        """Whether a register tile may cover this loop with tiles of a static size although its
        extent is symbolic (`shifts_back`)."""
        return self.const_extent is None and self.shifts_back


def extent_product(loops, symbolic: int) -> int:
    """The product of the loops' constant extents, ``symbolic`` standing for each symbolic one
    (a size or an amount of work, estimated before the extents are known)."""
    out = 1
    for lp in loops:
        out *= lp.const_extent if lp.const_extent is not None else symbolic
    return out


class Nest:
    """A nest `match_nest` took: its loops and block, and the element stride of every access
    along every iterator, which is what the rules choose loops by."""

    def __init__(self, top: tir.For, info: list, realize: tir.BlockRealize, rhs_loads: list, accesses: list) -> None:
        self.top = top  # the outermost loop, as it was
        self.info = info  # the loops (`NestLoop`), outermost first
        self.realize = realize
        self.block = realize.block
        self.store = self.block.body  # the one store, of one element per spatial point
        self.init = self.block.init
        self.rhs_loads = rhs_loads  # the loads of other buffers than the output, in order
        self.accesses = accesses  # stride per iterator: the store's, then each of `rhs_loads`'
        self.nontrivial = [lp for lp in info if not tir.is_const_int(lp.extent, 1)]
        self.reduce_loops = [lp for lp in self.nontrivial if lp.kind == "R"]
        self.ebytes = dtype_bytes(self.store.buffer.dtype)  # bytes of an output element

    @property
    def out_buf(self) -> tir.Buffer:
        return self.store.buffer


def match_nest(top: tir.For) -> Optional[Nest]:
    """The nest under ``top`` if it has the form every rule takes (see the module docstring)
    and at least one loop of more than one iteration; else None."""
    loops, realize = perfect_nest(top)
    if realize is None or not _plain_loops(loops) or not _plain_block(realize):
        return None
    info = _nest_loops(loops, realize)
    if info is None or not _stores_own_element(realize.block) or not _combines_in_place(realize.block):
        return None
    store = realize.block.body
    rhs_loads = [ld for ld in buffer_loads(store.value, []) if ld.buffer is not store.buffer]
    accesses = [access_strides(store.buffer, store.indices)] + [access_strides(ld.buffer, ld.indices)
                                                                  for ld in rhs_loads]
    if any(a is None for a in accesses):
        return None
    nest = Nest(top, info, realize, rhs_loads, accesses)
    return nest if nest.nontrivial else None


def perfect_nest(top: tir.For) -> tuple:
    """The loops from ``top`` down, each the body of the one before, and the BlockRealize
    below the last (None if something else is)."""
    loops = []
    cur = top
    while isinstance(cur, tir.For):
        loops.append(cur)
        cur = cur.body
    return loops, cur if isinstance(cur, tir.BlockRealize) else None


def _plain_loops(loops: list) -> bool:
    """Whether the loops are serial, unannotated, unbound to threads, and start at constants."""
    for lp in loops:
        if lp.kind != "serial" or lp.annotations or lp.thread_tag is not None:
            return False
        if not isinstance(lp.min, tir.IntImm):
            return False
    return True


# Block annotations that describe what a block computes and ask nothing of this schedule:
# TOPI's softmax and log-softmax blocks carry the axis they normalize ({"axis": 3}); its
# pooling blocks name the MetaSchedule rule that would tune them ({"schedule_rule":
# "meta_schedule.pool_max"}), which tvms does not have ("None" asks for no schedule: kept).
DESCRIPTIVE_BLOCK_ATTRS = frozenset(("axis",))


def _descriptive(key: str, value) -> bool:
    if key == "schedule_rule":
        return isinstance(value, str) and value.startswith("meta_schedule.")
    return key in DESCRIPTIVE_BLOCK_ATTRS


def _plain_block(realize: tir.BlockRealize) -> bool:
    """Whether the block always runs, allocates and matches nothing, carries no annotation
    but descriptive ones (`DESCRIPTIVE_BLOCK_ATTRS`), and its body is one store."""
    if not (isinstance(realize.predicate, tir.IntImm) and realize.predicate.value == 1):
        return False
    block = realize.block
    if block.alloc_buffers or block.match_buffers or not all(_descriptive(k, v) for k, v in block.annotations.items()):
        return False
    return isinstance(block.body, tir.BufferStore)


def _nest_loops(loops: list, realize: tir.BlockRealize) -> Optional[list]:
    """The loops as `NestLoop`s, when each block iterator (spatial or reduce) is bound to a
    loop variable of its own, each loop binds an iterator or has one iteration, and each
    reduce loop starts where its iterator's domain does (the init runs at its first
    iteration); else None."""
    block = realize.block
    loop_of: dict = {}
    for iv, val in zip(block.iter_vars, realize.iter_values):
        if iv.kind not in ("S", "R") or not isinstance(val, tir.Var) or val.dtype != iv.var.dtype:
            return None
        if val in loop_of.values():
            return None
        loop_of[iv.var] = val
    info = []
    by_var = {lp.loop_var: lp for lp in loops}
    bound = {v: iv for iv in block.iter_vars for v in [loop_of[iv.var]]}
    for lp in loops:
        iv = bound.get(lp.loop_var)
        if iv is None and not tir.is_const_int(lp.extent, 1):
            return None  # a loop that repeats the block: leave it
        info.append(NestLoop(lp.loop_var, lp.min, lp.extent, lp.loop_var.dtype, iv, iv.kind if iv else "S"))
    if any(v not in by_var for v in loop_of.values()):
        return None
    for lp in info:
        if lp.kind == "R" and not (isinstance(lp.iv.dom.min, tir.IntImm) and lp.iv.dom.min.value == lp.min.value):
            return None  # the init would not run where the original runs it
    return info


def _stores_own_element(block: tir.Block) -> bool:
    """Whether the block's store writes one element per spatial point (its indices are the
    spatial iterators, each once, or values fixed outside the nest: constants, or a fused
    block's row, `row_fusion`) and nothing in it has side effects."""
    store = block.body
    spatial = [iv.var for iv in block.iter_vars if iv.kind == "S"]
    own = {iv.var for iv in block.iter_vars}
    seen = []
    for idx in store.indices:
        if isinstance(idx, tir.IntImm) or not contains(idx, lambda n: n in own):
            continue
        if not isinstance(idx, tir.Var) or idx not in spatial or idx in seen:
            return False
        seen.append(idx)
    if len(seen) != len(spatial):
        return False
    return not (impure(store.value) or any(impure(i) for i in store.indices))


def _combines_in_place(block: tir.Block) -> bool:
    """Whether the store reads its own buffer only at the element it writes: with reduce
    iterators, only as the reduction's accumulator (``C[s] = C[s] <op> rhs``, ``rhs`` not
    reading ``C``; an init, if any, stores that element from other buffers); without, at that
    element only, and there is no init."""
    store = block.body
    out_buf = store.buffer
    has_reduce = any(iv.kind == "R" for iv in block.iter_vars)
    if has_reduce:
        rhs = reduction_rhs(store)
        if rhs is None:
            return False
        if any(ld.buffer is out_buf for ld in buffer_loads(rhs, [])):
            return False
    else:
        for ld in buffer_loads(store.value, []):
            if ld.buffer is out_buf and not same_indices(ld.indices, store.indices):
                return False
    init = block.init
    if init is not None:
        if not has_reduce:
            return False
        if not (isinstance(init, tir.BufferStore) and init.buffer is out_buf
                and same_indices(init.indices, store.indices)):
            return False
        if impure(init.value) or any(ld.buffer is out_buf for ld in buffer_loads(init.value, [])):
            return False
    return True
