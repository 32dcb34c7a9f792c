"""Features of a scheduled PrimFunc, for the cost model (`cost_model`) to rank candidates by.

Why these: two schedules of one workload do the same arithmetic; what differs is how the loops
are cut and ordered (which decides how much data each loop level touches, so what stays in
which cache), which loops run in parallel, in vector lanes or unrolled, and how each memory
access strides through its buffer. TVM's per-store features (MetaSchedule's ``PerStoreFeature``)
describe exactly that for each store; these are a smaller set in the same spirit:

* for each store (a ``BufferStore`` in a block), the loops around it, innermost `LOOP_LEVELS`
  of them: extent and kind (serial, parallel, vectorized, unrolled, bound to a GPU thread);
* the store's arithmetic: operations per iteration and in all;
* for each buffer it reads or writes (the largest `ACCESSES`): the stride of the innermost loop
  through it, its scope, and at each of the innermost loop levels how many bytes the loops
  inside touch (the footprint, from the indices' linear coefficients) and the reuse
  (iterations per element touched);
* for the function: the parallel, vector and thread extents, the unroll limit.

A function's vector is its `TOP_STORES` heaviest stores' (by iterations) followed by the
function's; everything on a log2 scale, so that the model sees ratios. The vector has a fixed
length (`feature_length`), whatever the function.
"""

from __future__ import annotations

import math

import numpy as np

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import const_int

from ..schedule_cpu.analysis import buffer_strides

__all__ = ["extract_features", "estimate_flops", "feature_length", "LOOP_LEVELS", "ACCESSES", "TOP_STORES"]

LOOP_LEVELS = 8        # loops described per store, innermost first
ACCESSES = 4           # buffer accesses described per store
TOP_STORES = 2         # stores described per function
_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread")
_SCOPES = ("global", "shared", "local")
_ARITH = (tir.Add, tir.Sub, tir.Mul, tir.Div, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max, tir.Mod)


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


_LOOP_FEATURES = 1 + len(_KINDS)
_ACCESS_FEATURES = 2 + len(_SCOPES) + 2 * LOOP_LEVELS
_STORE_FEATURES = 4 + LOOP_LEVELS * _LOOP_FEATURES + ACCESSES * _ACCESS_FEATURES
_FUNC_FEATURES = 6


def feature_length() -> int:
    """The length of every vector `extract_features` returns."""
    return TOP_STORES * _STORE_FEATURES + _FUNC_FEATURES


class _Loop:
    __slots__ = ("var", "extent", "kind")

    def __init__(self, var, extent: int, kind: str) -> None:
        self.var, self.extent, self.kind = var, extent, kind


def _loop_kind(loop: tir.For) -> str:
    if loop.thread_tag or loop.kind == "thread_binding":
        return "thread"
    return loop.kind if loop.kind in _KINDS else "serial"


def _linear(e, env: dict) -> dict:
    """Var -> coefficient of ``e`` as a linear function of the loop variables (block iterators
    replaced through ``env``); a nonlinear part counts each variable in it with coefficient 1
    (a footprint estimate, not an exact one)."""
    if isinstance(e, tir.Var):
        return dict(env.get(e, {e: 1.0}))
    if isinstance(e, (tir.IntImm, tir.FloatImm)):
        return {}
    if isinstance(e, tir.Cast):
        return _linear(e.value, env)
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = _linear(e.a, env), _linear(e.b, env)
        sign = -1.0 if isinstance(e, tir.Sub) else 1.0
        for v, c in b.items():
            a[v] = a.get(v, 0.0) + sign * c
        return a
    if isinstance(e, tir.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = const_int(y)
            if c is not None:
                return {v: k * c for v, k in _linear(x, env).items()}
    if isinstance(e, tir.FloorDiv):
        c = const_int(e.b)
        if c:
            return {v: k / c for v, k in _linear(e.a, env).items()}
    out: dict = {}
    for child in (getattr(e, "a", None), getattr(e, "b", None), getattr(e, "value", None)):
        if isinstance(child, tir.PrimExpr):
            for v in _linear(child, env):
                out[v] = 1.0
    for arg in getattr(e, "args", None) or []:
        if isinstance(arg, tir.PrimExpr):
            for v in _linear(arg, env):
                out[v] = 1.0
    return out


def _arith_ops(e) -> int:
    """Arithmetic operations (and intrinsic calls) in an expression."""
    if isinstance(e, _ARITH):
        return 1 + _arith_ops(e.a) + _arith_ops(e.b)
    if isinstance(e, tir.Call):
        return 1 + sum(_arith_ops(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.BinaryOp):
        return _arith_ops(e.a) + _arith_ops(e.b)
    if isinstance(e, tir.Cast):
        return _arith_ops(e.value)
    if isinstance(e, tir.Select):
        return 1 + _arith_ops(e.true_value) + _arith_ops(e.false_value)
    return 0


def _loads(e, out: list) -> list:
    if isinstance(e, tir.BufferLoad):
        out.append(e)
        for i in e.indices:
            _loads(i, out)
        return out
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(e, name, None)
        if isinstance(child, tir.PrimExpr):
            _loads(child, out)
    for arg in getattr(e, "args", None) or []:
        if isinstance(arg, tir.PrimExpr):
            _loads(arg, out)
    return out


def _dtype_bytes(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    bits = int(digits.split("x")[0]) if digits else 32
    return max(1, bits // 8)


class _Store:
    """What one store tells the model (see the module docstring)."""

    def __init__(self, store: tir.BufferStore, loops: list, env: dict) -> None:
        self.iterations = float(np.prod([lp.extent for lp in loops])) if loops else 1.0
        self.ops = ops = _arith_ops(store.value)
        inner = loops[-LOOP_LEVELS:][::-1]
        vec = [_log(self.iterations), _log(ops), _log(ops * self.iterations), _log(len(loops))]
        for level in range(LOOP_LEVELS):
            if level < len(inner):
                lp = inner[level]
                vec += [_log(lp.extent)] + [1.0 if lp.kind == k else 0.0 for k in _KINDS]
            else:
                vec += [0.0] * _LOOP_FEATURES
        accesses = [(store.buffer, store.indices)] + [(ld.buffer, ld.indices) for ld in _loads(store.value, [])]
        described = sorted((self._access(buf, idx, inner, env) for buf, idx in accesses),
                           key=lambda a: -a[1])[:ACCESSES]
        for level in range(ACCESSES):
            vec += described[level][0] if level < len(described) else [0.0] * _ACCESS_FEATURES
        self.vector = vec

    @staticmethod
    def _access(buffer: tir.Buffer, indices: list, inner: list, env: dict) -> tuple:
        """(features, footprint at the outermost level described) of one buffer access."""
        coefs = [_linear(i, env) for i in indices]
        shape = [const_int(s) or 1 for s in buffer.shape]
        strides = buffer_strides(buffer)
        elem = _dtype_bytes(buffer.dtype)
        innermost = inner[0].var if inner else None
        stride = abs(sum(c.get(innermost, 0.0) * s for c, s in zip(coefs, strides))) if innermost is not None else 0.0
        scope = buffer.scope or "global"
        vec = [_log(stride), float(elem)] + [1.0 if scope.startswith(s) else 0.0 for s in _SCOPES]
        footprints, reuses = [], []
        iterations = 1.0
        for level in range(LOOP_LEVELS):
            if level < len(inner):
                iterations *= inner[level].extent
                below = {lp.var: lp.extent for lp in inner[:level + 1]}
                elems = 1.0
                for c, n in zip(coefs, shape):
                    span = sum(abs(k) * (below[v] - 1) for v, k in c.items() if v in below) + 1
                    elems *= min(float(n), span)
                footprints.append(_log(elems * elem))
                reuses.append(_log(iterations / max(1.0, elems)))
            else:
                footprints.append(footprints[-1] if footprints else 0.0)
                reuses.append(reuses[-1] if reuses else 0.0)
        return vec + footprints + reuses, footprints[-1]


class _Collector:
    """Walks a function's statements with the loops (and block bindings) around each."""

    def __init__(self) -> None:
        self.stores: list = []
        self.parallel = self.vector = self.threads = self.blocks = 1.0
        self.unroll = 0.0

    def visit(self, s, loops: list, env: dict) -> None:
        if isinstance(s, tir.For):
            extent = const_int(s.extent)
            extent = extent if extent is not None else 64   # a symbolic extent: a typical size
            kind = _loop_kind(s)
            if kind == "parallel":
                self.parallel *= extent
            elif kind == "vectorized":
                self.vector = max(self.vector, extent)
            elif kind == "thread":
                tag = s.thread_tag or ""
                if tag.startswith("blockIdx"):
                    self.blocks *= extent
                else:
                    self.threads *= extent
            step = s.annotations.get("pragma_auto_unroll_max_step")
            if step is not None:
                self.unroll = max(self.unroll, float(const_int(step) if isinstance(step, tir.PrimExpr) else step))
            self.visit(s.body, loops + [_Loop(s.loop_var, extent, kind)], env)
        elif isinstance(s, tir.BlockRealize):
            inner_env = dict(env)
            for iv, value in zip(s.block.iter_vars, s.iter_values):
                inner_env[iv.var] = _linear(value, env)
            if s.block.init is not None:
                # The init runs once per output element: not in the loops of the reduction.
                reduce_vars = set()
                for iv, value in zip(s.block.iter_vars, s.iter_values):
                    if iv.kind != "spatial":
                        reduce_vars.update(_linear(value, env))
                self.visit(s.block.init, [lp for lp in loops if lp.var not in reduce_vars], inner_env)
            self.visit(s.block.body, loops, inner_env)
        elif isinstance(s, tir.BufferStore):
            self.stores.append(_Store(s, loops, env))
        elif isinstance(s, tir.SeqStmt):
            for child in s.seq:
                self.visit(child, loops, env)
        else:
            for name in ("body", "then_case", "else_case"):
                child = getattr(s, name, None)
                if isinstance(child, tir.Stmt):
                    self.visit(child, loops, env)


def extract_features(func: tir.PrimFunc) -> np.ndarray:
    """The feature vector (float32, `feature_length` long) of a scheduled PrimFunc."""
    c = _Collector()
    c.visit(func.body, [], {})
    heaviest = sorted(c.stores, key=lambda st: -st.iterations)[:TOP_STORES]
    vec: list = []
    for k in range(TOP_STORES):
        vec += heaviest[k].vector if k < len(heaviest) else [0.0] * _STORE_FEATURES
    vec += [_log(c.parallel), _log(c.vector), _log(c.threads), _log(c.blocks), _log(c.unroll), _log(len(c.stores))]
    return np.asarray(vec, dtype=np.float32)


def estimate_flops(func: tir.PrimFunc) -> float:
    """Arithmetic operations one call performs (each store's operations times its iterations;
    a multiply-add is 2): the FLOP count a tuning run's GFLOP/s are of."""
    c = _Collector()
    c.visit(func.body, [], {})
    return float(sum(st.ops * st.iterations for st in c.stores))
