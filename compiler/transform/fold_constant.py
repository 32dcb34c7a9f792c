"""FoldConstant: evaluate at compile time the ``call_tir`` calls whose inputs are all constants.

Why: weights baked into a module as ``R.const`` often pass through layout changes
(transposes, reshapes) that would otherwise run on every inference; running those PrimFuncs
once with the CPU backend (`compiler.build_cpu.build_cpu`) and binding the result as a
`relax.Constant` removes them from the program. An argument that is a variable bound earlier
to a constant counts as constant. Calls with symbolic output shapes, or whose PrimFunc
fails to build, are left alone. The folded bindings stay (``lv = <constant>``) for
DeadCodeElimination to remove when unused; the PrimFuncs are not removed here. Folding a
module again finds nothing new, so the pass is idempotent.

Compiling must never run what a file says beyond arithmetic: only PrimFuncs made of loads,
stores, arithmetic and math intrinsics, with static loops of bounded total work, are evaluated
(`foldable`). A call of an extern or packed function, an opaque intrinsic, a while loop or a
loop of unknown extent keeps the call for run time, where the user asked for it to run.
"""

from __future__ import annotations

import functools

from tvmscript import ir
from tvmscript.ir import relax, tir

from ._common import call_tir_args, copy_module, is_call_tir, replace_fields, static_shape


# At most this many innermost-loop iterations, and output elements, are evaluated per call.
MAX_FOLD_WORK = 1 << 24

# The calls a folded PrimFunc may make: arithmetic and math, nothing that reaches outside it.
_PURE_CALLS = {"tir.if_then_else", "tir.likely", "tir.max_value", "tir.min_value", "tir.reinterpret",
               "tir.ret"}


@functools.lru_cache(maxsize=None)
def _pure_calls() -> frozenset:
    return frozenset(_PURE_CALLS | {op for op, _ in tir.INTRINSICS.values()})


def foldable(prim: tir.PrimFunc) -> bool:
    """Whether evaluating ``prim`` at compile time is pure, bounded arithmetic: its calls are
    all math intrinsics (no extern, packed or LLVM call), it has no while loop, and its loops
    have constant extents whose nests add up to at most `MAX_FOLD_WORK` iterations."""
    from tvmscript.ir.tir_visitor import TIRVisitor

    allowed = _pure_calls()
    impure = []

    class _Calls(TIRVisitor):
        def visit_Call(self, node) -> None:
            if node.op not in allowed:
                impure.append(node.op)
            self.generic_visit(node)

        def visit_While(self, node) -> None:
            impure.append("while")

    _Calls().visit(prim.body)
    return not impure and (_work(prim.body) or 0) <= MAX_FOLD_WORK


def _work(stmt):
    """Iterations of ``stmt``'s innermost statements (None when a loop extent is unknown)."""
    if stmt is None:
        return 0
    if isinstance(stmt, tir.SeqStmt):
        total = 0
        for s in stmt.seq:
            w = _work(s)
            if w is None:
                return None
            total += w
        return total
    if isinstance(stmt, tir.For):
        if not isinstance(stmt.extent, tir.IntImm):
            return None
        inner = _work(stmt.body)
        return None if inner is None else stmt.extent.value * max(inner, 1)
    if isinstance(stmt, tir.BlockRealize):
        return _work(stmt.block)
    if isinstance(stmt, tir.Block):
        init = _work(stmt.init) if stmt.init is not None else 0
        body = _work(stmt.body)
        return None if init is None or body is None else init + body
    if isinstance(stmt, tir.IfThenElse):
        a, b = _work(stmt.then_case), _work(stmt.else_case)
        return None if a is None or b is None else max(a, b)
    body = getattr(stmt, "body", None)
    if body is not None and isinstance(body, tir.Stmt):
        return _work(body)
    return 1


def _np_dtype(dtype: str):
    from tvmscript.runtime.ndarray import _np_dtype as np_dtype  # bfloat16 is ml_dtypes'

    return np_dtype(dtype)


def _elements(sinfo) -> int:
    n = 1
    for d in sinfo.shape:
        n *= d.value
    return n


class FoldConstant:
    """``IRModule -> IRModule``: constant call_tir bindings replaced by their values."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        new = copy_module(mod)
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function):
                new[gv] = self._fold_function(mod, func)
        return new

    def _fold_function(self, mod, func):
        known: dict = {}
        changed = False
        blocks = []
        for blk in func.body.blocks:
            bs = []
            for b in blk.bindings:
                if isinstance(b, relax.VarBinding):
                    if isinstance(b.value, relax.Constant):
                        known[b.var] = b.value
                    elif isinstance(b.value, relax.Var) and b.value in known:
                        known[b.var] = known[b.value]
                    else:
                        c = self._try_fold(mod, b.value, known)
                        if c is not None:
                            known[b.var] = c
                            b = replace_fields(b, value=c)
                            changed = True
                bs.append(b)
            blocks.append(replace_fields(blk, bindings=bs))
        if not changed:
            return func
        return replace_fields(func, body=replace_fields(func.body, blocks=blocks))

    def _try_fold(self, mod, expr, known):
        if not is_call_tir(expr) or len(expr.args) != 2 or len(expr.sinfo_args) != 1:
            return None
        out = expr.sinfo_args[0]
        if not static_shape(out) or not out.dtype:
            return None
        prim = mod.functions.get(expr.args[0])
        if not isinstance(prim, tir.PrimFunc) or not foldable(prim):
            return None
        if _elements(out) > MAX_FOLD_WORK:
            return None
        values = []
        for a in call_tir_args(expr):
            if isinstance(a, relax.Constant):
                values.append(a.data)
            elif isinstance(a, relax.Var) and a in known:
                values.append(known[a].data)
            else:
                return None
        try:
            import numpy as np

            from ..build_cpu import build_cpu

            kernel = build_cpu({expr.args[0].name_hint: prim})[expr.args[0].name_hint]
            result = np.zeros([d.value for d in out.shape], dtype=_np_dtype(out.dtype))
            kernel(*[np.ascontiguousarray(v) for v in values], result)
        except Exception:  # noqa: BLE001 - folding is an optimization; keep the call
            return None
        return relax.Constant(result, relax.TensorStructInfo(list(out.shape), out.dtype))
