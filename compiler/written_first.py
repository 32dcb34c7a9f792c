"""Whether every element of a new allocation is written before any is read
(`written_before_read`): then the code generator leaves out the zero fill that otherwise
makes reading an element never written defined (`codegen_llvm.statements.zero_fill`).

Why: LLVM deletes the fill only where straight-line stores overwrite it; a loop that writes
every element does not count, so each call of a kernel cleared its scratch buffers before
filling them: 65 KB per channel for the phase-split windows of mobilenet_v2's stride-2
depthwise convolutions (17% of their time), packed panels on every tile, 3% of the model's
samples in all.

How: the statements the allocation's scope runs first are followed in program order while
none of them reads the buffer. Each store to it whose index is an expression of the enclosing
loops' iterators (loops of constant bounds) marks the elements it writes, evaluated with NumPy
over the loops' whole iteration space. A store under an ``if`` marks the points where its
condition, evaluated the same way, holds: a partitioned loop (`loop_partition`) branches
between its guarded and unguarded copies, which together write every element. Under a
condition that cannot be evaluated it marks nothing (it may not run), nor does a store in a
loop of symbolic extent. The walk stops at the first statement that reads the buffer (or
uses its address in any other way), or where a loop nest's iteration space exceeds
`MAX_POINTS` (a loop that stores nothing into the buffer is not enumerated); the answer is
whether every element has been marked by then. Anything not
understood leaves the fill in place: it can only cost time, never correctness."""

from __future__ import annotations

import numpy as np

from tvmscript.ir import tir
from tvmscript.ir.tir_numpy import evaluate_on_arrays
from tvmscript.ir.tir_visitor import contains

from .lower_tir import dtype_bytes

__all__ = ["needs_zero_fill", "written_before_read", "MAX_POINTS", "MIN_BYTES"]

MAX_POINTS = 1 << 22  # iterations of a loop nest whose stores are enumerated

# Allocations smaller than this keep their fill, written or not. Why: LLVM 22.1's SLP
# vectorizer (llvmlite 0.50) emits a function that fails its own verifier ("Instruction does
# not dominate all uses", then an abort) for small scratch buffers whose stores are all fully
# unrolled and left unfilled: a 3x3 max pooling's 9 phases of 16 elements (the fill hides the
# pattern). What a fill of a few hundred bytes costs is lost in the kernel's time; the
# buffers whose fill took time (a 52 KB phase plane per channel, a 4-8 KB panel per tile) are
# written by loops LLVM does not unroll.
MIN_BYTES = 4096


class _Stop(Exception):
    """The walk reached a statement it cannot follow past."""


def needs_zero_fill(body: tir.Stmt, buf: tir.Buffer) -> bool:
    """Whether the allocation of ``buf`` over ``body`` keeps its zero fill: unless it holds
    `MIN_BYTES` or more, all written before any is read."""
    size = buf.shape[0] if len(buf.shape) == 1 else None
    if not isinstance(size, tir.IntImm) or size.value * dtype_bytes(buf.dtype) < MIN_BYTES:
        return True
    return not written_before_read(body, buf)


def written_before_read(body: tir.Stmt, buf: tir.Buffer) -> bool:
    """Whether ``body``, the scope of the allocation of the 1-D ``buf``, writes every element
    of it before reading any (see the module docstring)."""
    if len(buf.shape) != 1 or not isinstance(buf.shape[0], tir.IntImm):
        return False
    walk = _Coverage(buf.data, buf.shape[0].value)
    try:
        walk.stmt(body, {}, ())
    except _Stop:
        pass
    return bool(walk.covered.all())


class _Coverage:
    """The elements of one allocation written so far (`covered`), statement by statement."""

    def __init__(self, data: tir.Var, size: int) -> None:
        self.data = data
        self.covered = np.zeros(max(size, 1), dtype=bool)
        self.covered[size:] = True  # a zero-size allocation (given one element) has nothing to write

    def uses(self, node) -> bool:
        """Whether ``node`` reads the buffer or mentions its address outside a store's target."""
        return contains(node, lambda n: (isinstance(n, tir.BufferLoad) and n.buffer.data is self.data)
                        or n is self.data)

    def stmt(self, s, env: dict, shape: tuple, runs=True) -> None:
        """Mark what ``s`` writes, run with the loop iterators ``env`` (NumPy arrays over an
        iteration space of ``shape``) at the points where ``runs`` (a boolean array
        broadcasting to ``shape``) holds; raise `_Stop` where the walk must end."""
        if isinstance(s, tir.SeqStmt):
            for child in s.seq:
                self.stmt(child, env, shape, runs)
        elif isinstance(s, tir.For):
            self.loop(s, env, shape, runs)
        elif isinstance(s, tir.IfThenElse):
            self.branches(s, env, shape, runs)
        elif isinstance(s, tir.BufferStore):
            if self.uses(s.value) or any(self.uses(i) for i in s.indices):
                raise _Stop
            if s.buffer.data is self.data and len(s.indices) == 1:
                self.mark(evaluate_on_arrays(s.indices[0], env), shape, runs)
        elif isinstance(s, tir.LetStmt):
            if self.uses(s.value):
                raise _Stop
            value = evaluate_on_arrays(s.value, env)
            inner = dict(env)
            if value is None:
                inner.pop(s.var, None)
            else:
                inner[s.var] = value
            self.stmt(s.body, inner, shape, runs)
        elif isinstance(s, tir.Allocate):
            self.stmt(s.body, env, shape, runs)
        elif self.uses(s):
            raise _Stop
        # Anything else that leaves the buffer alone marks nothing.

    def branches(self, s: tir.IfThenElse, env: dict, shape: tuple, runs) -> None:
        """Each branch of an ``if`` marks where it runs. Either reading the buffer ends the walk
        first: the other branch's stores ran at other points, not before that read."""
        if self.uses(s.condition) or self.uses(s.then_case) or (s.else_case is not None and self.uses(s.else_case)):
            raise _Stop
        cond = evaluate_on_arrays(s.condition, env)
        if cond is None:
            return
        cond = np.asarray(cond, dtype=bool)
        self.stmt(s.then_case, env, shape, np.logical_and(runs, cond))
        if s.else_case is not None:
            self.stmt(s.else_case, env, shape, np.logical_and(runs, np.logical_not(cond)))

    def stores(self, node) -> bool:
        """Whether ``node`` stores into the buffer."""
        return contains(node, lambda n: isinstance(n, tir.BufferStore) and n.buffer.data is self.data)

    def loop(self, s: tir.For, env: dict, shape: tuple, runs) -> None:
        if self.uses(s.body) or self.uses(s.min) or self.uses(s.extent):
            raise _Stop  # a loop that reads what it may have written: not followed
        if not self.stores(s.body):
            return  # nothing to mark, however many iterations (a matmul's inner loops)
        lo, n = evaluate_on_arrays(s.min, env), evaluate_on_arrays(s.extent, env)
        step = 1 if s.step is None else evaluate_on_arrays(s.step, env)
        if not all(isinstance(v, (int, np.integer)) for v in (lo, n, step)) or step <= 0:
            return  # a symbolic or varying range: its stores are not enumerated
        count = max(0, -(-int(n) // int(step)))
        if count == 0:
            return
        if int(np.prod(shape, dtype=np.int64)) * count > MAX_POINTS:
            raise _Stop
        iters = np.arange(int(lo), int(lo) + count * int(step), int(step), dtype=np.int64)
        inner = dict(env)
        inner[s.loop_var] = iters.reshape((count,) + (1,) * len(shape))
        self.stmt(s.body, inner, (count,) + shape, runs)

    def mark(self, index, shape: tuple, runs) -> None:
        if index is None:
            return
        flat = np.broadcast_to(np.asarray(index, dtype=np.int64), shape).ravel()
        ran = np.broadcast_to(np.asarray(runs, dtype=bool), shape).ravel()
        size = self.covered.size
        self.covered[flat[ran & (flat >= 0) & (flat < size)]] = True
