"""Pass 7b: index arithmetic simplified with the ranges of the loops and threads around it
(`simplify_indices`; TVM's Simplify, which knows the thread extents).

Why: the schedules' splits and fusions leave indices such as ``(f * 128 + ty * 8 + tx) % 128``
for a thread ``(ty, tx)`` of a 16 x 8 block. With ``ty < 16`` and ``tx < 8`` known, that is
``ty * 8 + tx``, and ``(f * 128 + ty * 8 + tx) // 128`` is ``f``; nvcc cannot tell, since it
knows only that ``threadIdx.x < 1024``. An implicit GEMM's im2col gathers compute such an index
for every element they load, several divisions and remainders deep, so these integer
operations took issue slots from the FMAs of resnet18's convolutions.

What: every integer expression of the kernel (buffer indices, intrinsic offsets, conditions)
is put in canonical form (`tvmscript.ir.arith.canonical`) with the ranges of the enclosing
loops of constant bounds and of the launch's thread indices in scope.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import Canonical
from tvmscript.ir.mutator import IRMutator

from .common import THREAD_VARS
from .index_widths import INDEX_OPS

_CONDITIONS = (*tir.COMPARISONS, tir.And, tir.Or, tir.Not)


def simplify_indices(body: tir.Stmt, extents: dict) -> tir.Stmt:
    """``body`` (a kernel launched with ``extents``: thread tag -> extent) with its integer
    expressions simplified under the ranges of its loops and threads."""
    ranges = {THREAD_VARS[t]: (0, e.value) for t, e in extents.items() if isinstance(e, tir.IntImm)}

    class M(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, INDEX_OPS) and tir.is_int(e.dtype) or isinstance(e, _CONDITIONS):
                return Canonical(ranges).simplify(e)      # the whole expression at once
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.For) and isinstance(s.min, tir.IntImm) and isinstance(s.extent, tir.IntImm):
                ranges[s.loop_var] = (s.min.value, s.extent.value)
                try:
                    return dataclasses.replace(s, body=self.visit_stmt(s.body))
                finally:
                    del ranges[s.loop_var]
            return super().visit_stmt(s)

    return M().visit_stmt(body)
