"""Pass 5b: software pipelines (TVM's InjectSoftwarePipeline), with asynchronous copies.

A loop annotated ``software_pipeline_stage`` (one stage per statement of its body) runs each
statement of iteration ``k`` at pipeline step ``k + stage``: with stages ``[0, 0, 2]``, step
``i`` copies the tiles of iteration ``i`` while computing on those of iteration ``i - 2``.
``software_pipeline_order`` orders the statements within a step (default: as written). The
loop becomes three: a prologue (the first steps, where later stages have nothing yet), the
steady state, and an epilogue (the last steps, where earlier stages are done); the
statements of the prologue and epilogue are guarded by whether their iteration exists, and
those two short loops are unrolled. The prologue is always ``depth`` steps long, even for a
loop of fewer iterations, so that every step commits its group (below).

A buffer allocated in the loop that one stage writes and a later stage reads gets a version
per step in flight (``1 + consumer stage - producer stage``), a new leading dimension indexed
by the iteration modulo the versions: the copy of iteration ``k + 2`` must not overwrite the
tile iteration ``k`` still computes with.

Stages listed in ``software_pipeline_async_stages`` run asynchronously: their statements are
marked `ASYNC_COPY` (`async_copy.inject_async_copy` makes the global-to-shared copies in them
``cp.async``), each step's async statements end with ``T.ptx_commit_group()``, and the first
statement reading what they write waits with ``T.ptx_wait_group(n)``, ``n`` the groups
committed since the one it needs. Every step commits, in the epilogue too (an empty group), so
that ``n`` is the same at every step.

Why here: after `compact_buffers`, the shared tiles have the shape of one step's tile, which
is what gets versioned; the tensor-core and async-copy rewrites that follow see the versioned
buffers.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_arith import const_int, make_add, make_and, make_cast, make_floormod, make_mul, make_sub

from .common import GPULoweringError, buffer_accesses
from .compaction import _rebind

__all__ = ["inject_software_pipeline", "ASYNC_COPY", "COMMIT_OP", "WAIT_OP", "PIPELINE_ANNOTATIONS"]

STAGE, ORDER, ASYNC_STAGES = "software_pipeline_stage", "software_pipeline_order", "software_pipeline_async_stages"
PIPELINE_ANNOTATIONS = (STAGE, ORDER, ASYNC_STAGES)
ASYNC_COPY = "tvms.async_copy"
COMMIT_OP, WAIT_OP = "tir.ptx_commit_group", "tir.ptx_wait_group"


def inject_software_pipeline(body: tir.Stmt) -> tir.Stmt:
    """``body`` with every loop annotated ``software_pipeline_stage`` pipelined."""

    class M(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.For) and STAGE in s.annotations:
                return _pipeline(s)
            return s

    return M().visit_stmt(body)


def _ints(value, what: str) -> list:
    out = []
    for v in value if isinstance(value, (list, tuple)) else [value]:
        n = const_int(v) if isinstance(v, tir.PrimExpr) else v
        if not isinstance(n, int):
            raise GPULoweringError(f"{what} must be a list of integers, not {value!r}")
        out.append(n)
    return out


def _pipeline(loop: tir.For) -> tir.Stmt:
    allocs, inner = _peel_allocations(loop.body)
    stmts = list(inner.seq) if isinstance(inner, tir.SeqStmt) else [inner]
    stages = _ints(loop.annotations[STAGE], STAGE)
    order = _ints(loop.annotations.get(ORDER, list(range(len(stmts)))), ORDER)
    async_stages = set(_ints(loop.annotations.get(ASYNC_STAGES, []), ASYNC_STAGES))
    if len(stages) != len(stmts) or len(order) != len(stmts) or sorted(order) != list(range(len(stmts))):
        raise GPULoweringError(f"loop '{loop.loop_var.name}': {STAGE} and {ORDER} need one entry per statement of "
                               f"the loop body ({len(stmts)}), got {stages} and {order}")
    plain = dataclasses.replace(loop, annotations={k: v for k, v in loop.annotations.items()
                                                   if k not in PIPELINE_ANNOTATIONS})
    if max(stages) == 0:
        return plain
    if len(async_stages) > 1:
        raise GPULoweringError(f"loop '{loop.loop_var.name}': one asynchronous stage at most, "
                               f"got {sorted(async_stages)}")
    accesses = [buffer_accesses(s) for s in stmts]
    reads = [{b.data for b in a.loaded} for a in accesses]
    writes = [{b.data for b in a.stored} for a in accesses]
    versioned = {}
    for alloc in allocs:
        n = _versions(alloc.buffer.data, stages, reads, writes)
        if n > 1:
            versioned[alloc.buffer.data] = (alloc.buffer, _with_versions(alloc.buffer, n), n)
    steps = sorted(range(len(stmts)), key=lambda j: order[j])
    out = _Plan(loop, stmts, stages, steps, async_stages, reads, writes, versioned).loops()
    for alloc in reversed(allocs):
        buf = versioned.get(alloc.buffer.data, (None, alloc.buffer))[1]
        out = Allocate(buf, out, alloc.storage)
    return out


def _peel_allocations(body) -> tuple:
    """The allocations wrapping the loop body (hoisted out of the pipelined loops) and what they wrap."""
    allocs = []
    while isinstance(body, Allocate):
        allocs.append(body)
        body = body.body
    return allocs, body


def _versions(data, stages: list, reads: list, writes: list) -> int:
    """How many copies of the buffer allocated in the loop at ``data`` the pipeline keeps: one
    more than the most stages between a statement writing it and a later-stage one reading it."""
    distances = [stages[c] - stages[p] for p, w in enumerate(writes) if data in w
                 for c, r in enumerate(reads) if data in r and stages[c] > stages[p]]
    return max(distances, default=0) + 1


class _Plan:
    """The pipelined loops of one annotated loop."""

    def __init__(self, loop, stmts, stages, steps, async_stages, reads, writes, versioned) -> None:
        self.loop, self.stmts, self.stages, self.steps = loop, stmts, stages, steps
        self.depth = max(stages)
        self.async_stmts = {j for j, st in enumerate(stages) if st in async_stages}
        self.reads, self.writes = reads, writes
        self.versioned = versioned           # data Var -> (the buffer, it with versions, versions)
        self.waits = self._waits()

    def _waits(self) -> dict:
        """statement index -> the ``ptx_wait_group`` count before it (the first reader, in the
        step's order, of what an async statement of another stage writes)."""
        if not self.async_stmts:
            return {}
        produced = set().union(*(self.writes[j] for j in self.async_stmts))
        producer_stage = self.stages[next(iter(self.async_stmts))]
        last_async = max(self.steps.index(j) for j in self.async_stmts)
        waits = {}
        for pos, j in enumerate(self.steps):
            if j in self.async_stmts or not (self.reads[j] & produced):
                continue
            distance = self.stages[j] - producer_stage
            if distance < 1 and not (distance == 0 and pos > last_async):
                raise GPULoweringError(f"loop '{self.loop.loop_var.name}': statement {j} reads what an asynchronous "
                                       f"stage writes in the same step before it is committed")
            waits[j] = distance - 1 + (1 if pos > last_async else 0)
            break
        return waits

    def loops(self) -> tir.Stmt:
        lo, n, d = self.loop.min, self.loop.extent, self.depth
        dt = self.loop.loop_var.dtype
        c = lambda v: tir.IntImm(dt, v)  # noqa: E731
        n_val = const_int(n)
        # The prologue is all of the first `depth` steps even when there are fewer iterations:
        # the steps past the last iteration copy nothing but still commit their (empty) group,
        # which every wait count assumes.
        if n_val is not None:
            bounds = [(0, d, True), (d, n_val, False), (max(d, n_val), n_val + d, True)]
            regions = [(make_add(lo, c(a)), c(b - a), guarded) for a, b, guarded in bounds if b > a]
        else:
            regions = [(lo, c(d), True),
                       (make_add(lo, c(d)), tir.Max(dt, make_sub(n, c(d)), c(0)), False),
                       (make_add(lo, tir.Max(dt, c(d), n)), tir.Min(dt, c(d), n), True)]
        return tir.seq([self._region(start, extent, guarded) for start, extent, guarded in regions])

    def _region(self, start, extent, guarded: bool) -> tir.For:
        v = tir.Var(self.loop.loop_var.dtype, self.loop.loop_var.name)
        body = []
        last_async = max((self.steps.index(j) for j in self.async_stmts), default=None)
        for pos, j in enumerate(self.steps):
            if j in self.waits:
                body.append(_call(WAIT_OP, [tir.IntImm("int32", self.waits[j])]))
            body.append(self._instance(j, v, guarded))
            if pos == last_async:
                body.append(_call(COMMIT_OP, []))
        kind = "unrolled" if guarded else self.loop.kind
        return dataclasses.replace(self.loop, loop_var=v, min=start, extent=extent, kind=kind, body=tir.seq(body),
                                   annotations={k: a for k, a in self.loop.annotations.items()
                                                if k not in PIPELINE_ANNOTATIONS})

    def _instance(self, j: int, step_var, guarded: bool) -> tir.Stmt:
        """Statement ``j`` at the step ``step_var``: its own iteration ``step - stage``."""
        lo, dt = self.loop.min, self.loop.loop_var.dtype
        k = make_sub(step_var, tir.IntImm(dt, self.stages[j]))
        s = substitute(self.stmts[j], {self.loop.loop_var: k})
        s = _rebind_versions(s, self.versioned, make_sub(k, lo))
        if j in self.async_stmts:
            s = tir.AttrStmt(tir.IntImm("int32", 0), ASYNC_COPY, tir.IntImm("int32", 1), s)
        if guarded:
            cond = make_and(tir.GE("bool", k, lo), tir.LT("bool", k, make_add(lo, self.loop.extent)))
            s = tir.IfThenElse(simplify(cond), s)
        return s


def _with_versions(buf: tir.Buffer, n: int) -> tir.Buffer:
    dt = buf.shape[0].dtype if buf.shape else "int32"
    strides = []
    if buf.strides:
        strides = [make_mul(make_cast(buf.strides[0], dt), make_cast(buf.shape[0], dt))] + list(buf.strides)
    return dataclasses.replace(buf, shape=[tir.IntImm(dt, n)] + list(buf.shape), strides=strides)


def _rebind_versions(stmt, versioned: dict, iteration) -> tir.Stmt:
    """Accesses of a versioned buffer go to version ``iteration % versions``."""
    for old, new, n in versioned.values():
        dt = old.shape[0].dtype if old.shape else "int32"
        version = simplify(make_floormod(make_cast(iteration, dt), tir.IntImm(dt, n)))
        stmt = _rebind(stmt, old, new, lambda indices, v=version: [v] + list(indices))
    return stmt


def _call(op: str, args: list) -> tir.Evaluate:
    return tir.Evaluate(tir.Call("handle", op, args))
