"""Pass 2: where each local and shared buffer is allocated.

Each on-chip ``T.alloc_buffer`` moves down to the innermost loop that holds all its uses, so
that `compaction.compact_buffers` can size it for one loop iteration (a shared tile, not the
matrix).
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import _with_body


from .common import ON_CHIP_SCOPES, buffer_accesses, buffers_accessed


def plan_buffer_locations(func: tir.PrimFunc) -> tir.PrimFunc:
    """Move each local/shared ``T.alloc_buffer`` into the innermost loop whose body holds every
    block that uses it (never into a loop a reduction into it spans).

    Why: DLight and ``cache_read``/``cache_write`` declare caches at the root, sized like the
    whole tensor; a shared tile refilled at each step of a ``k`` loop only needs the part one
    step touches, and `compact_buffers` can only find that part relative to where the buffer
    lives. A block that reduces into the buffer pins it above its reduce loops, where the
    accumulated value must survive from one iteration to the next."""
    owners: dict = {}        # buffer -> Block declaring it
    uses: dict = {}          # buffer -> list of paths (tuple of For/Block nodes)

    def visit(s, path):
        if isinstance(s, tir.For):
            visit(s.body, path + (s,))
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                visit(x, path)
        elif isinstance(s, tir.BlockRealize):
            block = s.block
            for b in block.alloc_buffers:
                if b.scope in ON_CHIP_SCOPES:
                    owners[b] = block
            reduce_vars = set()
            for iv, value in zip(block.iter_vars, s.iter_values):
                if iv.kind == "R":
                    reduce_vars.update(vars_in([value]))
            here = path + (block,)
            touched = buffers_accessed(block.body, nested=False)
            if block.init is not None:
                touched |= buffers_accessed(block.init, nested=False)
            touched |= buffers_accessed(s.predicate) | _buffers_accessed_values(s.iter_values)
            written = buffer_accesses(block.body, nested=False).stored
            for b in touched:
                p = here
                if reduce_vars and b in written:
                    cut = next((i for i, n in enumerate(path) if isinstance(n, tir.For) and n.loop_var in reduce_vars),
                               None)
                    if cut is not None:
                        p = path[:cut]
                uses.setdefault(b, []).append(p)
            visit(block.body, here)
            if block.init is not None:
                visit(block.init, here)
        elif isinstance(s, (tir.LetStmt, tir.AssertStmt, tir.While, Allocate)):
            visit(s.body, path)
        elif isinstance(s, tir.IfThenElse):
            visit(s.then_case, path)
            if s.else_case is not None:
                visit(s.else_case, path)

    visit(func.body, ())
    target: dict = {}        # For or Block node -> buffers to allocate there
    moved: set = set()
    for buf, owner in owners.items():
        paths = uses.get(buf)
        if not paths:
            continue
        common = paths[0]
        for p in paths[1:]:
            n = 0
            while n < len(common) and n < len(p) and common[n] is p[n]:
                n += 1
            common = common[:n]
        # The deepest loop of the common path below the owner block.
        if owner not in common:
            continue
        below = common[common.index(owner) + 1:]
        loops = [n for n in below if isinstance(n, tir.For)]
        if not loops:
            continue
        node = loops[-1]
        # Never below a node that is itself a block other than a loop: keep it simple, a loop.
        target.setdefault(node, []).append(buf)
        moved.add(buf)
    if not moved:
        return func

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and s in target:
                body = self.visit_stmt(s.body)
                bufs = target[s]
                opaque = tir.Block("", [], [], [], body, None, list(bufs))
                return dataclasses.replace(s, body=tir.BlockRealize([], tir.IntImm("bool", 1), opaque))
            if isinstance(s, tir.Block):
                s2 = super().visit_stmt(s)
                kept = [b for b in s2.alloc_buffers if b not in moved]
                if len(kept) != len(s2.alloc_buffers):
                    s2 = dataclasses.replace(s2, alloc_buffers=kept)
                return s2
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


def _buffers_accessed_values(values) -> set:
    """Buffers loaded in any of ``values`` (a block's iterator bindings)."""
    out: set = set()
    for v in values:
        out |= buffers_accessed(v)
    return out
