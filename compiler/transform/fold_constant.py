"""FoldConstant: evaluate at compile time the ``call_tir`` calls whose inputs are all constants.

Why: weights baked into a module as ``R.const`` often pass through layout changes
(transposes, reshapes) that would otherwise run on every inference; running those PrimFuncs
once with the CPU backend (`runtime.cpu.build_cpu`) and binding the result as a
`relax.Constant` removes them from the program. An argument that is a variable bound earlier
to a constant counts as constant. Calls with symbolic output shapes, or whose PrimFunc
fails to build, are left alone. The folded bindings stay (``lv = <constant>``) for
DeadCodeElimination to remove when unused; the PrimFuncs are not removed here. Folding a
module again finds nothing new, so the pass is idempotent.
"""

from __future__ import annotations

from tvmscript import ir, relax, tir

from ._common import call_tir_args, copy_module, is_call_tir, replace_fields, static_shape


def _np_dtype(dtype: str):
    import numpy as np

    return np.dtype("bool" if dtype == "bool" else dtype)


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
        if not isinstance(prim, tir.PrimFunc):
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

            from tvmscript.runtime.cpu import build_cpu

            kernel = build_cpu({expr.args[0].name_hint: prim})[expr.args[0].name_hint]
            result = np.zeros([d.value for d in out.shape], dtype=_np_dtype(out.dtype))
            kernel(*[np.ascontiguousarray(v) for v in values], result)
        except Exception:  # noqa: BLE001 - folding is an optimization; keep the call
            return None
        return relax.Constant(result, relax.TensorStructInfo(list(out.shape), out.dtype))
