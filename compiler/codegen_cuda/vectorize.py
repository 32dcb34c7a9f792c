"""``T.vectorized`` loops as CUDA vector memory accesses (``float4``, ``half2``, ``uint4``...).

A vectorized loop whose body is one store, and whose loads and store are each contiguous in
the loop variable and aligned (or do not depend on it), is printed as one vector load per
buffer read, the arithmetic lane by lane, and one vector store (`VectorGen.vector_loop`). A
guard around the store that has one value for every lane (a partial last block of threads)
is printed once, around the vector accesses. Halves and bfloat16s come 4 or 8 to a vector
(8 or 16 bytes, one memory instruction, as elementwise kernels need for full bandwidth) in a
``uint2`` / ``uint4`` whose lanes are read through a pointer to the scalar type. A store into
a thread's registers (a local array, as a register-tiled matmul loads its operands) keeps
its lanes apart, each at its constant index, after the vector loads; a
plain copy of a vector no arithmetic type holds (8 halfs) moves opaque words of its size
(`VectorGen.vector_copy`). Any other vectorized loop is an unrolled C loop. Contiguity is
proved with `arith.Canonical` over the loop ranges (`_ramp`), as TVM's vectorizer reasons.

`VectorGen` is mixed into `kernel.KernelGen`; it uses ``self.line``, ``self.expr`` and
``self.name`` from there and the trace mode's ``traced_pointer`` and ``count_raw`` (`trace`),
and sets ``lane_override``/``lane_subst``, which `ExprGen.expr` reads while a lane is printed.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in

from ...ir.arith.canonical import Canonical
from ..lower_tir import dtype_bytes
from .literals import ctype, is_zero, is_zero_literal
from .trace import op_counts

_VECTOR_TYPES = {  # (dtype, lanes) -> (vector type, lane members)
    ("float32", 2): ("float2", "xy"), ("float32", 4): ("float4", "xyzw"),
    ("float64", 2): ("double2", "xy"), ("int32", 2): ("int2", "xy"), ("int32", 4): ("int4", "xyzw"),
    ("int64", 2): ("longlong2", "xy"), ("float16", 2): ("half2", "xy"), ("bfloat16", 2): ("nv_bfloat162", "xy"),
    ("int8", 4): ("char4", "xyzw"), ("uint8", 4): ("uchar4", "xyzw"),
    # No arithmetic type holds these: a word of the vector's size, its lanes reached through a
    # pointer to the scalar (`_lane`).
    ("float16", 4): ("uint2", None), ("float16", 8): ("uint4", None),
    ("bfloat16", 4): ("uint2", None), ("bfloat16", 8): ("uint4", None),
}
# A plain copy of a vector no arithmetic type holds (8 halfs, 16 bytes of int8): moved as
# opaque words of its size, one 16-byte instruction for a uint4.
_COPY_TYPES = {4: "unsigned", 8: "uint2", 16: "uint4"}
_COPY_ZEROS = {"unsigned": "0u", "uint2": "make_uint2(0u, 0u)", "uint4": "make_uint4(0u, 0u, 0u, 0u)"}


class VectorGen:
    """The vectorized loops of a kernel being printed (mixed into `kernel.KernelGen`)."""

    def vector_loop(self, s: tir.For) -> bool:
        """Print a vectorized loop as vector memory accesses when its body is one store whose
        loads and store are each contiguous in the loop variable (or do not depend on it) and
        aligned; False (print a loop) otherwise."""
        body = s.body
        if not (isinstance(s.extent, tir.IntImm) and is_zero(s.min)):
            return False
        lanes = s.extent.value
        v = s.loop_var
        c = Canonical({**self.ranges, v: (tir.IntImm(v.dtype, 0), s.extent)})
        if isinstance(body, tir.IfThenElse) and body.else_case is None and isinstance(body.then_case, tir.BufferStore) \
                and _lane_invariant(body.condition, v, lanes, c):
            return self.guarded_vector(s, body, c)
        if not isinstance(body, tir.BufferStore):
            return False
        vt = _VECTOR_TYPES.get((body.buffer.dtype, lanes))
        if vt is None or vt[1] is None:  # a plain copy moves words; only arithmetic needs lanes
            if self.vector_copy(body, v, lanes, c):
                return True
            if vt is None:
                return False
        # Into a thread's registers (a local array): vector loads, then the lanes stored one
        # by one at their constant indices, so that the array stays in registers.
        into_registers = not _vector_memory(body.buffer)
        scan = _VectorLoads(v, lanes, c)
        scan.visit(body.value)
        loads = scan.loads
        if not scan.ok or _contiguity(body.indices[0], v, lanes, c) != "vector" or (into_registers and not loads):
            return False
        self.line("{")
        self.indent += 1
        lane_values: dict = {}
        for ld in loads:
            key = (ld.buffer.data, id(ld))
            vname = self.fresh("v")
            ltype, members = _VECTOR_TYPES[(ld.dtype, lanes)]
            base = self.expr(_at_lane0(ld.indices[0], v, c))
            pointer = self.traced_pointer(f"({ltype}*)({self.name(ld.buffer.data)} + {base})",
                                          self.buffer_space(ld.buffer))
            self.line(f"{ltype} {vname} = *{pointer};")
            lane_values[key] = (vname, members, ld.dtype)
        stype, members = vt
        out = self.fresh("v")
        if not into_registers:
            self.line(f"{stype} {out};")
        self.count_raw(*(n * lanes for n in op_counts(body.value)))
        for lane in range(lanes):
            def lane_expr(e, lane=lane):
                if isinstance(e, tir.BufferLoad) and (e.buffer.data, id(e)) in lane_values:
                    vname, mem, dtype = lane_values[(e.buffer.data, id(e))]
                    return _lane(vname, mem, dtype, lane)
                return None

            self.lane_override = lane_expr
            self.lane_subst = {v: tir.IntImm(v.dtype, lane)}
            try:
                target = self.store_target(body) if into_registers else _lane(out, members, body.buffer.dtype, lane)
                self.line(f"{target} = {self.expr(body.value)};")
            finally:
                self.lane_override = None
                self.lane_subst = None
        if into_registers:
            self.indent -= 1
            self.line("}")
            return True
        base = self.expr(_at_lane0(body.indices[0], v, c))
        pointer = self.traced_pointer(f"({stype}*)({self.name(body.buffer.data)} + {base})",
                                      self.buffer_space(body.buffer), store=True)
        self.line(f"*{pointer} = {out};")
        self.indent -= 1
        self.line("}")
        return True

    def guarded_vector(self, s: tir.For, guard: tir.IfThenElse, c: Canonical) -> bool:
        """A vectorized loop whose store sits under a guard with one value for every lane:
        ``if (guard at lane 0) { vector accesses }``; False (print a loop) when the store alone
        is no vector loop."""
        inner = dataclasses.replace(s, body=guard.then_case)
        self.line(f"if ({self.expr(_at_lane0(guard.condition, s.loop_var, c))}) {{")
        self.indent += 1
        mark = len(self.lines)
        if self.vector_loop(inner):
            self.indent -= 1
            self.line("}")
            return True
        del self.lines[mark - 1:]
        self.indent -= 1
        return False

    def vector_copy(self, store: tir.BufferStore, v: tir.Var, lanes: int, c: Canonical) -> bool:
        """A vectorized plain copy (``dst[base + v] = src[base' + v]``) whose vector has no
        arithmetic CUDA type, printed as one load and one store of `_COPY_TYPES`' word; False
        when it is not such a copy. A copy of ``T.if_then_else(cond, src[...], 0)`` whose
        condition is the same for every lane (padding past the end of a row, say) is one word
        or zeros."""
        src, cond = store.value, None
        if isinstance(src, tir.Call) and src.op == "tir.if_then_else" and is_zero_literal(src.args[2]) \
                and _lane_invariant(src.args[0], v, lanes, c):
            cond, src = _at_lane0(src.args[0], v, c), src.args[1]
        word = _COPY_TYPES.get(lanes * dtype_bytes(store.buffer.dtype))
        if word is None or not isinstance(src, tir.BufferLoad) or src.dtype != store.buffer.dtype:
            return False
        accesses = ((store.buffer, store.indices[0]), (src.buffer, src.indices[0]))
        if not all(_vector_memory(b) and _contiguity(i, v, lanes, c) == "vector" for b, i in accesses):
            return False
        dst_at, src_at = (self.expr(_at_lane0(i, v, c)) for _, i in accesses)
        value = "*" + self.traced_pointer(f"({word}*)({self.name(src.buffer.data)} + {src_at})",
                                          self.buffer_space(src.buffer))
        if cond is not None:
            value = f"({self.expr(cond)} ? {value} : {_COPY_ZEROS[word]})"
        target = self.traced_pointer(f"({word}*)({self.name(store.buffer.data)} + {dst_at})",
                                     self.buffer_space(store.buffer), store=True)
        self.line(f"*{target} = {value};")
        return True

    lane_override = None
    lane_subst = None


class _VectorLoads(TIRVisitor):
    """The loads of a vectorized loop's value that can be vector loads (``loads``), and
    whether every other access is invariant in the loop variable (``ok``)."""

    def __init__(self, v: tir.Var, lanes: int, c: Canonical) -> None:
        self.v, self.lanes, self.c = v, lanes, c
        self.loads: list = []
        self.ok = True

    def visit_BufferLoad(self, node) -> None:
        kind = _contiguity(node.indices[0], self.v, self.lanes, self.c)
        if kind == "vector" and (node.dtype, self.lanes) in _VECTOR_TYPES and _vector_memory(node.buffer):
            self.loads.append(node)
        elif kind == "vector":
            # A thread's registers (read at constant indices), or a type no vector holds (a
            # bool mask): read lane by lane, as the unrolled loop would.
            pass
        elif kind != "scalar":
            self.ok = False

    def visit_Call(self, node) -> None:
        if node.op in ("tir.call_extern", "tir.call_pure_extern"):
            self.ok = False
        elif node.op == "tir.if_then_else" and self.v in _vars(node):
            # A load under a guard may be past the end of its buffer where the guard is false:
            # it cannot be one vector load for every lane.
            self.ok = False
            return
        self.generic_visit(node)

    def visit_Select(self, node) -> None:
        # Both of a Select's values are evaluated whatever its condition (unlike if_then_else's),
        # so its loads are as safe as vectors as any: a condition that differs from lane to
        # lane (attention's causal mask) is printed per lane.
        self.generic_visit(node)


def _lane(vname: str, members, dtype: str, lane: int) -> str:
    """Lane ``lane`` of the vector ``vname``: a member (``v.z``), or, for a word holding
    scalars no vector type does, the scalar through a pointer (``((half*)&v)[2]``)."""
    if members is None:
        return f"(({ctype(dtype)}*)&{vname})[{lane}]"
    return f"{vname}.{members[lane]}"


def _vector_memory(buf: tir.Buffer) -> bool:
    """Global and shared memory is aligned for vector accesses (allocations are 256-byte
    aligned, shared arrays are declared 16-byte aligned); a thread's local array is not, and
    indexing it as a vector would keep it out of registers."""
    return buf.scope not in ("local", "warp")


def _vars(e) -> set:
    return set(vars_in([e]))


def _contiguity(index, v: tir.Var, lanes: int, c: Canonical) -> str:
    """``"vector"`` if ``index`` is ``base + v`` with ``base`` a multiple of ``lanes`` (an
    aligned vector access), ``"scalar"`` if it does not depend on ``v``, else ``"other"``."""
    if v not in _vars(index):
        return "scalar"
    ramp = _ramp(index, v, lanes, c)
    if ramp is None or ramp[1] != 1:
        return "other"
    return "vector" if _multiple_of(ramp[0], lanes, c) else "other"


def _lane_invariant(cond, v: tir.Var, lanes: int, c: Canonical) -> bool:
    """Whether the condition ``cond`` has one value for every ``v`` in ``[0, lanes)``: each
    comparison in it is between `_ramp`s of stride 0 (``(q * 8 + v) // 32 < 77``)."""
    if v not in _vars(cond):
        return True
    if isinstance(cond, (tir.And, tir.Or)):
        return _lane_invariant(cond.a, v, lanes, c) and _lane_invariant(cond.b, v, lanes, c)
    if isinstance(cond, tir.Not):
        return _lane_invariant(cond.a, v, lanes, c)
    if isinstance(cond, (tir.LT, tir.LE, tir.GT, tir.GE, tir.EQ, tir.NE)):
        sides = [_ramp(x, v, lanes, c) for x in (cond.a, cond.b)]
        return all(r is not None and r[1] == 0 for r in sides)
    return False


def _at_lane0(e, v: tir.Var, c: Canonical):
    """``e`` for the first lane of the vectorized loop over ``v`` (the vector's base)."""
    return c.simplify(substitute(e, {v: tir.IntImm(v.dtype, 0)}))


def _multiple_of(e, n: int, c: Canonical) -> bool:
    rem = c.simplify(tir.FloorMod(e.dtype, e, tir.IntImm(e.dtype, n)))
    return isinstance(rem, tir.IntImm) and rem.value == 0


# Integer operations whose result depends on nothing but their operands.
_LANE_PURE_OPS = frozenset({"tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor", "tir.shift_left",
                            "tir.shift_right"})


def _ramp(e, v: tir.Var, lanes: int, c: Canonical):
    """``(base, stride)`` with ``e == base + stride * v`` for every ``v`` in ``[0, lanes)``
    (``base`` free of ``v``), or None. A floor division or modulus by a multiple of ``lanes``
    of an aligned unit ramp keeps its lanes in one period, as TVM's vectorizer reasons:
    ``(b + v) // m == b // m`` and ``(b + v) % m == b % m + v`` when ``b % lanes == 0``."""
    if v not in _vars(e):
        return e, 0
    if e is v:
        return tir.IntImm(v.dtype, 0), 1
    if isinstance(e, tir.Cast) and "int" in e.dtype:
        inner = _ramp(e.value, v, lanes, c)
        return None if inner is None else (tir.Cast(e.dtype, inner[0]), inner[1])
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _ramp(e.a, v, lanes, c), _ramp(e.b, v, lanes, c)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, tir.Add) else -1
        return type(e)(e.dtype, a[0], b[0]), a[1] + sign * b[1]
    if isinstance(e, tir.Mul):
        for x, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, tir.IntImm):
                r = _ramp(x, v, lanes, c)
                return None if r is None else (tir.Mul(e.dtype, r[0], k), r[1] * k.value)
        return None
    if isinstance(e, (tir.FloorDiv, tir.FloorMod)) and isinstance(e.b, tir.IntImm):
        r = _ramp(e.a, v, lanes, c)
        if r is not None and r[1] == 0:         # the same on every lane
            return type(e)(e.dtype, r[0], e.b), 0
        if r is None or r[1] != 1 or e.b.value % lanes or not _multiple_of(r[0], lanes, c):
            return None
        if isinstance(e, tir.FloorDiv):
            return tir.FloorDiv(e.dtype, r[0], e.b), 0
        return tir.FloorMod(e.dtype, r[0], e.b), r[1]
    if isinstance(e, tir.Call) and e.op in _LANE_PURE_OPS:
        # The same on every lane when its operands are (the XOR of a swizzled shared tile,
        # `lower_gpu.permuted_layout`, applied to the 16-byte chunk a vector lies in).
        parts = [_ramp(a, v, lanes, c) for a in e.args]
        if all(p is not None and p[1] == 0 for p in parts):
            return tir.Call(e.dtype, e.op, [p[0] for p in parts]), 0
    # Anything else: exact only when the difference of consecutive lanes simplifies to a constant.
    one = tir.IntImm(v.dtype, 1)
    step = c.simplify(tir.Sub(e.dtype, substitute(e, {v: tir.Add(v.dtype, v, one)}), e))
    if not isinstance(step, tir.IntImm):
        return None
    return _at_lane0(e, v, c), step.value
