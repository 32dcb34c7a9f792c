"""Parallel loops collapsed with the loop inside them when that shares the work more evenly
among the threads (`collapse_parallel`), as OpenMP's ``collapse(2)`` does.

Why: each thread of a parallel loop runs one contiguous chunk of its iterations
(`codegen_llvm.parallel`), so a loop of few iterations leaves threads idle at its end: 9
register tiles of mobilenet_v2's last 1x1 convolution over 2 threads run as 5 and 4, 7 as 4
and 3 (the threads meet after 5 tiles' time where 4.5 would do). Its 9 x 5 (rows x channel)
tiles as one loop of 45 run as 23 and 22.

How: ``for i in T.parallel(E): for j in range(n): body`` becomes ``for f in T.parallel(E *
n): body`` with ``i = f // n`` and ``j = f % n``, when nothing else is inside the parallel
loop (a panel packed per ``i`` and reused across ``j`` stays: it would be packed ``n`` times)
and the inner loop is a plain loop from 0 of constant extent (not unrolled, vectorized or
bound). Iterations run in the same order, each thread's chunk a contiguous run of ``(i,
j)``, so every element is computed as before."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute

from .host import parallel_threads

# An imbalance (`imbalance`) this small is left as it is: 33 tiles over 2 threads (17 and 16).
# Collapsing again would only split loops that are better left whole.
BALANCED = 1.05


def collapse_parallel(body: tir.Stmt) -> tir.Stmt:
    """``body`` with each parallel loop collapsed with the loop it holds while that evens
    out the threads' shares, until they are within `BALANCED` (see the module docstring)."""
    return _Collapse(parallel_threads()).visit_stmt(body)


def imbalance(iterations: int, threads: int) -> float:
    """How much longer than an even share the busiest thread's chunk of ``iterations``
    takes: 1.0 when they divide evenly, 5 / 4.5 for 9 over 2."""
    return -(-iterations // threads) * threads / iterations


class _Collapse(IRMutator):
    def __init__(self, threads: int) -> None:
        super().__init__()
        self.threads = threads

    def visit_stmt(self, s):
        if isinstance(s, tir.For) and s.kind == "parallel":
            while True:
                fused = self._collapsed(s)
                if fused is None:
                    return s
                s = fused
        return super().visit_stmt(s)

    def _collapsed(self, s: tir.For):
        """``s`` collapsed with its inner loop, or None where that is not possible or gains
        nothing."""
        inner = s.body
        if not (isinstance(inner, tir.For) and inner.kind == "serial" and not inner.annotations
                and inner.step is None and s.step is None and tir.is_const_int(s.min, 0)
                and tir.is_const_int(inner.min, 0) and isinstance(s.extent, tir.IntImm)
                and isinstance(inner.extent, tir.IntImm) and inner.extent.value > 1
                and inner.loop_var.dtype == s.loop_var.dtype):
            return None
        outer_n, inner_n = s.extent.value, inner.extent.value
        before = imbalance(outer_n, self.threads)
        if before <= BALANCED or imbalance(outer_n * inner_n, self.threads) >= before:
            return None
        dtype = s.loop_var.dtype
        fused = tir.Var(dtype, f"{s.loop_var.name}_{inner.loop_var.name}_fused")
        n = tir.IntImm(dtype, inner_n)
        body = substitute(inner.body, {s.loop_var: tir.FloorDiv(dtype, fused, n),
                                       inner.loop_var: tir.FloorMod(dtype, fused, n)})
        return tir.For(fused, tir.IntImm(dtype, 0), tir.IntImm(dtype, outer_n * inner_n), "parallel", body,
                       annotations=dict(s.annotations))
