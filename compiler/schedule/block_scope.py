"""What the primitives that move or merge blocks share: the block scope and the checks on it.

`BlockScope` is TVM's: the blocks directly inside one scope block, in program order, with the
read-after-write / write-after-write / write-after-read dependencies between them; `scope_of`
finds it and checks it is a stage pipeline. Then the tests the primitives apply to a block
(complete, reduction, output block, each with the error TVM gives), the plan that removes a
leaf block with the loops that hold only it (`leaf_removal_plan`), and the primitives' way of
taking a block by name (`as_block_rv`, `takes_block_name`). `compute_location` and `inline`
use them.
"""

from __future__ import annotations

import functools

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import vars_in

from .common import quoted_name
from .state import BlockRV, Schedule
from .tree import FuncIndex

__all__ = ["BlockScope", "scope_of", "check_complete", "check_complete_or_reduction", "check_not_output",
           "is_output_block", "complete_code", "reduction_code", "leaf_removal_plan", "as_block_rv",
           "takes_block_name"]

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
    """Append ``x`` unless ``lst`` holds it already (by identity)."""
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
