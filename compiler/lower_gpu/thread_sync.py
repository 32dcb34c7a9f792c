"""Pass 8: barriers between the threads of a block (TVM's InjectThreadSync).

``__syncthreads()`` goes where a thread may read a shared buffer another thread wrote, or
overwrite one another thread has yet to read (`inject_thread_sync`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_visitor import TIRVisitor

from ..lower_tir import THREAD_SYNC_OPS
from .async_copy import CP_ASYNC_OP
from .common import SYNC_OP, buffer_accesses, is_shared
from .software_pipeline import WAIT_OP


@dataclass
class _Summary:
    """Shared buffers a statement touches: before its first barrier (``head_*``), after its
    last one (``tail_*``), and whether it contains a barrier at all."""

    head_r: set
    head_w: set
    tail_r: set
    tail_w: set
    synced: bool


def _sync():
    """A barrier: ``T.tvm_storage_sync("shared")``, CUDA's ``__syncthreads()``."""
    return tir.Evaluate(tir.Call("int32", SYNC_OP, [tir.StringImm("handle", "shared")]))


def _is_sync(s) -> bool:
    return isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op in THREAD_SYNC_OPS


def _shared_rw(node, shared: frozenset, async_targets: frozenset = frozenset()) -> tuple:
    """The data variables of the shared buffers ``node`` reads and writes: by loads and
    stores, through pointers (``tvm_access_ptr``, as the tensor-core loads and stores take
    them) to one of ``shared``, and by asynchronous copies (`_AsyncCopies`)."""
    v = buffer_accesses(node)
    copies = _AsyncCopies(async_targets)
    copies.visit(node)
    return ({b.data for b in v.loaded if is_shared(b)} | (v.pointer_reads & shared),
            {b.data for b in v.stored if is_shared(b)} | (v.pointer_writes & shared) | copies.written)


class _AsyncCopies(TIRVisitor):
    """What asynchronous copies write, as far as barriers go: a ``cp.async`` writes its
    destination from when it is issued (a later read of the old contents races with it), and
    a ``ptx_wait_group`` completes every pending one, so it counts as writing all their
    destinations (``async_targets``): a thread may read another's copied data only after that
    thread's wait and a barrier."""

    def __init__(self, async_targets: frozenset) -> None:
        self.targets = async_targets
        self.written: set = set()

    def visit_Call(self, node) -> None:
        if node.op == CP_ASYNC_OP and isinstance(node.args[0], tir.Var):
            self.written.add(node.args[0])
        elif node.op == WAIT_OP:
            self.written |= self.targets
        self.generic_visit(node)


def _async_targets(body) -> frozenset:
    copies = _AsyncCopies(frozenset())
    copies.visit(body)
    return frozenset(copies.written)


class _SharedAllocations(TIRVisitor):
    def __init__(self) -> None:
        self.found: set = set()

    def visit_Allocate(self, node) -> None:
        if is_shared(node.buffer):
            self.found.add(node.buffer.data)
        self.generic_visit(node)


def inject_thread_sync(body: tir.Stmt) -> tir.Stmt:
    """Insert ``__syncthreads()`` (``T.tvm_storage_sync("shared")``) between a write of a
    shared buffer and a later read of it (RAW), a read and a later write (WAR), including
    across iterations of a loop (the next iteration's writes against this one's reads).
    Two writes need none: a schedule never has two threads write one element.

    Why: the threads of a block share shared memory but run at their own pace; a cooperative
    fetch must finish before any thread computes with the tile, and the compute must finish
    before the next fetch overwrites it. Accesses by the same statement are one thread's own
    (a thread reading what it wrote itself needs no barrier)."""
    allocations = _SharedAllocations()
    allocations.visit(body)
    out, _ = _sync_stmt(body, frozenset(allocations.found), _async_targets(body))
    return out


def _sync_stmt(s, shared: frozenset, targets: frozenset = frozenset()) -> tuple:
    if isinstance(s, tir.SeqStmt):
        return _sync_seq(list(s.seq), shared, targets)
    if isinstance(s, tir.For):
        body, summ = _sync_stmt(s.body, shared, targets)
        if summ.synced or _loop_carried(summ):
            if _loop_carried(summ):
                body = tir.seq([body, _sync()])
                summ = _Summary(summ.head_r, summ.head_w, set(), set(), True)
            return dataclasses.replace(s, body=body), summ
        return s, summ
    if isinstance(s, (tir.LetStmt, Allocate)):
        body, summ = _sync_stmt(s.body, shared, targets)
        if body is s.body:
            return s, summ
        if isinstance(s, tir.LetStmt):
            return tir.LetStmt(s.var, s.value, body), summ
        return Allocate(s.buffer, body, s.storage), summ
    if isinstance(s, tir.IfThenElse) and s.else_case is None:
        body, summ = _sync_stmt(s.then_case, shared, targets)
        if summ.synced:
            return tir.IfThenElse(s.condition, body), summ
        return s, summ
    if _is_sync(s):
        return s, _Summary(set(), set(), set(), set(), True)
    r, w = _shared_rw(s, shared, targets)
    return s, _Summary(r, w, set(r), set(w), False)


def _loop_carried(summ: _Summary) -> bool:
    """Whether the next iteration's first accesses conflict with this iteration's last."""
    return bool((summ.tail_w & summ.head_r) or (summ.tail_r & summ.head_w))


def _sync_seq(items: list, shared: frozenset, targets: frozenset = frozenset()) -> tuple:
    out = []
    pend_r: set = set()
    pend_w: set = set()
    head_r: Optional[set] = None
    head_w: Optional[set] = None
    synced = False
    acc_r: set = set()
    acc_w: set = set()
    for item in items:
        new, summ = _sync_stmt(item, shared, targets)
        if (summ.head_r & pend_w) or (summ.head_w & pend_r):
            out.append(_sync())
            if not synced:
                head_r, head_w = set(acc_r), set(acc_w)
            synced = True
            pend_r, pend_w = set(), set()
        out.append(new)
        if summ.synced:
            if not synced:
                head_r, head_w = acc_r | summ.head_r, acc_w | summ.head_w
            synced = True
            pend_r, pend_w = set(summ.tail_r), set(summ.tail_w)
        else:
            pend_r |= summ.head_r
            pend_w |= summ.head_w
        acc_r |= summ.head_r
        acc_w |= summ.head_w
    if not synced:
        return tir.seq(out) if len(out) != 1 else out[0], _Summary(acc_r, acc_w, set(acc_r), set(acc_w), False)
    return tir.seq(out), _Summary(head_r, head_w, pend_r, pend_w, True)
