"""Pass 7: int64 index arithmetic computed in int32 wherever it provably fits (`narrow_indices`)."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator

from ...ir.arith import BITWISE_OPS, const_int_bound
from .common import THREAD_VARS

# The integer arithmetic of indices (`simplify_indices` simplifies the same operations).
INDEX_OPS = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max, tir.Div, tir.Mod)
_INT32_MAX = 2**31 - 1


def narrow_indices(body: tir.Stmt, extents: dict) -> tir.Stmt:
    """Compute int64 index arithmetic in int32 wherever every value it takes provably fits:
    loop variables with constant bounds become int32, and buffer indices, loop bounds and
    conditions over them are rewritten in int32.

    Why: Relax writes shapes as ``T.int64``, so legalized kernels index in 64 bits, and 64-bit
    integer multiplies and divides cost GPUs several instructions each; TVM narrows the same
    way. Other int64 index arithmetic that fits (an intrinsic's offsets) is computed in int32
    and widened once. Indices that involve a symbolic dimension (unbounded here) or data stay
    int64."""
    ranges = {THREAD_VARS[t]: (0, e.value) for t, e in extents.items() if isinstance(e, tir.IntImm)}
    retyped: dict = {}   # int64 loop var -> int32 var

    def fits(e) -> bool:
        lo, hi = const_int_bound(e, ranges)
        return isinstance(lo, int) and isinstance(hi, int) and -_INT32_MAX - 1 <= lo and hi <= _INT32_MAX

    def narrow(e):
        """``e`` (an int64 index expression) in int32, or None if it cannot be."""
        if isinstance(e, tir.IntImm):
            return tir.IntImm("int32", e.value) if -_INT32_MAX - 1 <= e.value <= _INT32_MAX else None
        if isinstance(e, tir.Var):
            return e if e.dtype == "int32" else retyped.get(e)
        if isinstance(e, tir.Cast) and tir.is_int(e.value.dtype) and e.value.dtype != "int64":
            # An int32 value widened (``T.Cast("int64", idx[k])``): the value itself, its own
            # indices rewritten too (their loop variables may be retyped).
            return mutator.visit_expr(e.value) if e.value.dtype == "int32" else None
        if isinstance(e, INDEX_OPS):
            a, b = narrow(e.a), narrow(e.b)
            if a is None or b is None:
                return None
            out = type(e)("int32", a, b)
            return out if fits(out) else None
        if isinstance(e, tir.Call) and e.op in BITWISE_OPS and len(e.args) == 2:
            a, b = narrow(e.args[0]), narrow(e.args[1])
            if a is None or b is None:
                return None
            out = tir.Call("int32", e.op, [a, b])
            return out if fits(out) else None
        return None

    class M(IRMutator):
        def index(self, e):
            """An index: narrowed when it can be, else with retyped variables cast back."""
            if e.dtype == "int64":
                n = narrow(e)
                if n is not None:
                    return n
            return self.visit_expr(e)

        def visit_expr(self, e):
            if isinstance(e, tir.Var) and e in retyped:
                return tir.Cast("int64", retyped[e])
            if isinstance(e, tir.BufferLoad):
                return tir.BufferLoad(e.dtype, e.buffer, [self.index(i) for i in e.indices], e.span)
            if isinstance(e, tir.COMPARISONS) and e.a.dtype == "int64":
                a, b = narrow(e.a), narrow(e.b)
                if a is not None and b is not None:
                    return type(e)("bool", a, b)
            if (isinstance(e, INDEX_OPS) or isinstance(e, tir.Call) and e.op in BITWISE_OPS) and e.dtype == "int64":
                # Index arithmetic outside a buffer's indices (the offsets cp.async, ldmatrix
                # and tvm_access_ptr take): computed in int32, widened once at the end.
                n = narrow(e)
                if n is not None:
                    return tir.Cast("int64", n)
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                return tir.BufferStore(s.buffer, self.visit_expr(s.value), [self.index(i) for i in s.indices], s.span)
            if isinstance(s, tir.For) and s.loop_var.dtype == "int64":
                lo, ext = narrow(s.min), narrow(s.extent)
                if isinstance(lo, tir.IntImm) and isinstance(ext, tir.IntImm) and lo.value + ext.value <= _INT32_MAX:
                    var = tir.Var("int32", s.loop_var.name)
                    retyped[s.loop_var] = var
                    ranges[var] = (lo.value, ext.value)
                    return dataclasses.replace(s, loop_var=var, min=lo, extent=ext, body=self.visit_stmt(s.body))
            if isinstance(s, tir.For) and isinstance(s.min, tir.IntImm) and isinstance(s.extent, tir.IntImm):
                ranges[s.loop_var] = (s.min.value, s.extent.value)
            return super().visit_stmt(s)

    mutator = M()
    return mutator.visit_stmt(body)

