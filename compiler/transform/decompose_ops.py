"""DecomposeOpsForInference: composite ops rewritten into the elementwise ops they are made of
at inference, as TVM's pass does (``relax.transform.DecomposeOpsForInference(func_name=None)``).

Why: ``R.nn.batch_norm`` legalizes to one multi-output kernel, which FuseOps cannot fuse into
the convolution before it, and whose statistics are recomputed on every run. At inference the
op is plain arithmetic on its moving statistics,

    out = (x - moving_mean) / sqrt(moving_var + epsilon) * gamma + beta

with the 1-D parameters broadcast along ``axis`` (``R.expand_dims`` on every other axis). Written
as those ops, the part that depends only on the weights is constant once they are bound
(BindParams), so FoldConstant computes it at compile time, and the rest is elementwise, so FuseOps
fuses it into the producing convolution or matmul (an out-elementwise-fusable kernel).

What it rewrites, as TVM: every ``R.nn.batch_norm`` call, whatever its ``training`` attribute
(the pass states that the module runs for inference), becomes the tuple
``(out, moving_mean, moving_var)``, so uses of its other fields still see the statistics.
``epsilon`` becomes a scalar constant of the data's dtype; ``scale=False`` drops the multiply
by ``gamma``, ``center=False`` the add of ``beta``. A call whose data has unknown rank is left
alone (the broadcast axes are not known). Layer norm is not decomposed: TVM decomposes it only
for training (one kernel is faster at inference), and TVM's lowering of ``R.tensor_to_shape``
here is a detail of its VM that tvms's VM does not need (it runs the op itself).

With ``func_name``, only that function is rewritten (a name the module lacks changes nothing,
as in TVM). ``eval_mode_only=True`` (not TVM's) rewrites only the batch norms marked
``training=False``, whose meaning the decomposition keeps exactly: ``tvms.compile``'s default
pipeline cannot assume the module is for inference, so it passes it.

The emitted bindings are named ``lv``, ``lv1``... fresh in their function, in the order TVM's
builder emits them, so the result prints as TVM's; they keep the batch norm's span and
symbolic dims flow through the ops' struct info inference.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.op import api as op
from tvmscript.ir.op.common import normalize_axis

from ._rewrite_calls import CallRewriter, rewrite_functions


class DecomposeOpsForInference:
    """``IRModule -> IRModule``: the batch norms of ``func_name`` (or of every Relax function)
    decomposed into elementwise ops."""

    def __init__(self, func_name: str | None = None, eval_mode_only: bool = False) -> None:
        self.func_name = func_name
        self.eval_mode_only = eval_mode_only

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        names = None if self.func_name is None else {self.func_name}
        return rewrite_functions(mod, lambda bb: _Decomposer(bb, self.eval_mode_only), names)

    def __repr__(self) -> str:
        return f"DecomposeOpsForInference({self.func_name!r})" if self.func_name else "DecomposeOpsForInference()"


def decompose_batch_norm(bb, call: relax.Call):
    """``(out, moving_mean, moving_var)`` for an inference batch norm, or None when the data's
    rank is unknown."""
    data, gamma, beta, mean, var = call.args
    sinfo = relax.struct_info_of(data)
    if not isinstance(sinfo, relax.TensorStructInfo) or sinfo.ndim < 0:
        return None
    axis = normalize_axis(call.attrs["axis"], sinfo.ndim)
    epsilon = op.const(call.attrs["epsilon"], sinfo.dtype)
    out = op.divide(op.subtract(data, _along(mean, axis, sinfo.ndim)),
                    op.sqrt(op.add(_along(var, axis, sinfo.ndim), epsilon)))
    if call.attrs["scale"]:
        out = op.multiply(out, _along(gamma, axis, sinfo.ndim))
    if call.attrs["center"]:
        out = op.add(out, _along(beta, axis, sinfo.ndim))
    return relax.Tuple([out, mean, var])


def _along(param, axis: int, ndim: int):
    """A 1-D parameter shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
    return op.expand_dims(param, axis=[i for i in range(ndim) if i != axis])


_DECOMPOSITIONS = {"relax.nn.batch_norm": decompose_batch_norm}


class _Decomposer(CallRewriter):
    def __init__(self, bb, eval_mode_only: bool) -> None:
        super().__init__(bb)
        self.eval_mode_only = eval_mode_only

    def rule(self, call):
        if isinstance(call, relax.Call) and isinstance(call.op, relax.Op):
            if self.eval_mode_only and is_training(call):
                return None
            return _DECOMPOSITIONS.get(call.op.name)
        return None


def is_training(call: relax.Call) -> bool:
    """Whether a call is marked as computing in training mode (a batch norm's ``training``
    attribute; an op without one is not)."""
    return bool(call.attrs.get("training", False)) if call.attrs else False
