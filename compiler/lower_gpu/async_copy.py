"""Pass 6b: global-to-shared copies of an asynchronous pipeline stage become ``cp.async``
(TVM's InjectPTXAsyncCopy).

`software_pipeline.inject_software_pipeline` marks the statements of an asynchronous stage
`ASYNC_COPY`. In them, each vectorized copy of 4, 8 or 16 contiguous bytes from a global
buffer into a shared one, ``S[s + v] = G[g + v]`` (or ``if_then_else(p, G[g + v], 0)``, the
zeros a padded tile reads past the end, with ``p`` the same for every lane ``v``: not
mentioning it, a bound on a run of whole copies, or one on the row the run lies in,
`_lane_uniform`), becomes
``T.ptx_cp_async(dtype, S, s, G, g, bytes[, p])``: the copy goes from global memory to shared
memory without passing through registers, and the thread goes on while it is in flight. So
does a copy of one 4- or 8-byte element, ``S[s] = G[g]``: an implicit GEMM's im2col gathers one
float at a time, each behind the padding's predicate (nested ``if_then_else``s are one
predicate, their conjunction), and a synchronous load there stalls the thread for the whole
memory latency at every step of the pipeline. A copy that is not of these forms (misaligned,
computed, two bytes) stays an ordinary one: it is done when the thread reaches it, which the
pipeline's waits allow for.

Why after `flatten_buffers`: the offsets the instruction takes are flat, and so is the
alignment to prove (the offset at lane 0 a multiple of the lanes).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.arith.canonical import simplify
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import const_int, make_floormod, make_sub
from tvmscript.ir.tir_visitor import vars_in

from ..lower_tir import dtype_bytes
from .common import is_shared
from .software_pipeline import ASYNC_COPY

__all__ = ["inject_async_copy", "CP_ASYNC_OP"]

CP_ASYNC_OP = "tir.ptx_cp_async"
_SIZES = (4, 8, 16)


def inject_async_copy(body: tir.Stmt) -> tir.Stmt:
    """``body`` with the copies under `ASYNC_COPY` made ``cp.async`` where they can be."""

    class Copies(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and s.kind == "vectorized":
                return _vector_cp_async(s) or s
            if isinstance(s, tir.BufferStore):
                return _cp_async(s, 1, lambda index: index) or s
            return super().visit_stmt(s)

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.AttrStmt) and s.attr_key == ASYNC_COPY:
                return Copies().visit_stmt(s.body)
            return super().visit_stmt(s)

    return M().visit_stmt(body)


def _vector_cp_async(loop: tir.For):
    """The ``cp.async`` a vectorized copy loop is, or None."""
    lanes = const_int(loop.extent)
    if lanes is None:
        return None
    v = loop.loop_var
    return _cp_async(loop.body, lanes, lambda index: _lane_zero(index, v, loop.min, lanes),
                     lambda p: _lane_uniform(p, v, loop.min, lanes))


def _cp_async(store, lanes: int, first_lane, uniform=lambda p: p):
    """The ``cp.async`` that ``store`` of ``lanes`` lanes is, or None: ``first_lane(index)``
    is an index at lane 0 (None when the lanes are not one aligned run); ``uniform(p)`` the
    predicate as one value for all lanes (None when it may differ between them)."""
    if not isinstance(store, tir.BufferStore) or not is_shared(store.buffer):
        return None
    value, predicate = _predicated_load(store.value)
    if predicate is not None:
        predicate = uniform(predicate)
        if predicate is None:
            return None
    if value is None:
        return None
    if not isinstance(value, tir.BufferLoad) or is_shared(value.buffer) or value.buffer.scope not in ("global", ""):
        return None
    if value.dtype != store.buffer.dtype or len(store.indices) != 1 or len(value.indices) != 1:
        return None
    size = lanes * dtype_bytes(store.buffer.dtype)
    if size not in _SIZES:
        return None
    dst, src = first_lane(store.indices[0]), first_lane(value.indices[0])
    if dst is None or src is None:
        return None
    args = [store.buffer.data, dst, value.buffer.data, src, tir.IntImm("int32", size)]
    if predicate is not None:
        args.append(predicate)
    return tir.Evaluate(tir.Call(store.buffer.dtype, CP_ASYNC_OP, args))


def _predicated_load(value):
    """``(load, predicate)`` of ``if_then_else(p, load, 0)`` (nested ones: the conjunction of
    their predicates; None when there is none), or ``(None, None)`` where a branch is not zero."""
    predicate = None
    while isinstance(value, tir.Call) and value.op == "tir.if_then_else":
        p, value, zero = value.args
        if const_int(zero) != 0 and not (isinstance(zero, tir.FloatImm) and zero.value == 0):
            return None, None
        predicate = p if predicate is None else tir.And("bool", predicate, p)
    return value, predicate


def _lane_uniform(p, v, start, lanes: int):
    """``p`` as one predicate for the lanes ``v`` of a vectorized copy, or None when it may
    differ between them. One that does not mention ``v`` is; so is ``x < c`` where ``x`` steps
    by one per lane from a multiple of ``lanes`` and ``c`` is a multiple of ``lanes`` (the
    padding's bound on a run of whole elements, a TF32 tile's K of 72 floats, say): it is then
    ``x0 < c`` for every lane, ``x0`` the lane-0 value; so is a comparison whose sides do not
    change from the first lane to the last and never decrease in between (the row a run lies
    in, ``(x + v) // 32 < rows`` with ``x`` a multiple of the lanes: the padding past a
    product's last row); and a conjunction of such."""
    if v not in vars_in([p]):
        return p
    if isinstance(p, tir.And):
        a, b = _lane_uniform(p.a, v, start, lanes), _lane_uniform(p.b, v, start, lanes)
        return None if a is None or b is None else tir.And("bool", a, b)
    if isinstance(p, tir.LT):
        bound = const_int(p.b)
        first = _lane_zero(p.a, v, start, lanes)
        if bound is not None and bound % lanes == 0 and first is not None:
            return tir.LT("bool", first, p.b)
    if isinstance(p, (tir.LT, tir.LE, tir.GT, tir.GE, tir.EQ, tir.NE)) and \
            all(_same_in_every_lane(side, v, start, lanes) for side in (p.a, p.b)):
        return simplify(substitute(p, {v: start}))
    return None


def _same_in_every_lane(e, v, start, lanes: int) -> bool:
    """Whether ``e`` has one value for the lanes ``v`` from ``start``: it never decreases over
    them (`_nondecreasing`) and is the same at the first lane and the last; or it is an
    arithmetic operation on such values (an implicit GEMM's pixel row, ``row // 7 % 7``, of
    a row that is one per run)."""
    if v not in vars_in([e]):
        return True
    if _nondecreasing(e, v, start, lanes):
        last = tir.Add(start.dtype, start, tir.IntImm(start.dtype, lanes - 1))
        return const_int(simplify(make_sub(substitute(e, {v: last}), substitute(e, {v: start})))) == 0
    if isinstance(e, _ARITHMETIC):
        return _same_in_every_lane(e.a, v, start, lanes) and _same_in_every_lane(e.b, v, start, lanes)
    if isinstance(e, tir.Cast):
        return _same_in_every_lane(e.value, v, start, lanes)
    return False


_ARITHMETIC = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max)


def _nondecreasing(e, v, start, lanes: int) -> bool:
    """Whether integer expression ``e`` never decreases over the lanes ``v`` from ``start``:
    sums, products by non-negative constants and floor divisions by positive ones of such,
    ``v`` itself, terms without ``v``, and ``a % c`` of such an ``a`` that does not wrap
    around within the lanes (``a // c`` the same for all: a channel within a run of 8)."""
    if v not in vars_in([e]):
        return True
    if isinstance(e, tir.Var):
        return True
    if isinstance(e, tir.Add):
        return _nondecreasing(e.a, v, start, lanes) and _nondecreasing(e.b, v, start, lanes)
    if isinstance(e, tir.Sub):
        return _nondecreasing(e.a, v, start, lanes) and v not in vars_in([e.b])
    if isinstance(e, tir.Mul):
        for x, c in ((e.a, e.b), (e.b, e.a)):
            n = const_int(c)
            if n is not None and n >= 0:
                return _nondecreasing(x, v, start, lanes)
        return False
    if isinstance(e, (tir.FloorDiv, tir.FloorMod)):
        n = const_int(e.b)
        if n is None or n <= 0 or not _nondecreasing(e.a, v, start, lanes):
            return False
        return isinstance(e, tir.FloorDiv) or _same_in_every_lane(tir.FloorDiv(e.dtype, e.a, e.b), v, start, lanes)
    if isinstance(e, tir.Cast):
        return _nondecreasing(e.value, v, start, lanes)
    return False


def _lane_zero(index, v, start, lanes: int):
    """The index at the first lane, when ``index`` steps by one per lane from an offset that
    is a multiple of ``lanes`` (so the copy is one aligned run); else None."""
    first = simplify(substitute(index, {v: start}))
    second = simplify(substitute(index, {v: simplify(tir.Add(start.dtype, start, tir.IntImm(start.dtype, 1)))}))
    if const_int(simplify(make_sub(second, first))) != 1:
        return None
    last = simplify(substitute(index, {v: simplify(tir.Add(start.dtype, start, tir.IntImm(start.dtype, lanes - 1)))}))
    if const_int(simplify(make_sub(last, first))) != lanes - 1:
        return None
    if const_int(simplify(make_floormod(first, tir.IntImm(first.dtype, lanes)))) != 0:
        return None
    return first
