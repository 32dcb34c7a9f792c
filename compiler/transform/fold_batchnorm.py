"""FoldBatchnormToConv2D: an inference batch norm after a convolution folded into the
convolution's weights, as TVM's ``relax.transform.FoldBatchnormToConv2D()`` does.

Why: once the weights are bound, ``batch_norm(conv2d(x, W))`` is a per-output-channel affine
map of the convolution's result, and a convolution is linear in its weights:

    batch_norm(conv2d(x, W)) == conv2d(x, W * s) + (beta - mean * s),  s = gamma / sqrt(var + eps)

with ``s`` scaling the kernel's output-channel axis (``O`` of its layout) and the bias added
along the output's channel axis (``C`` of its layout). The convolution's kernel then computes
the batch norm for free, leaving one bias add that FuseOps fuses into it, where
DecomposeOpsForInference would leave a subtract, divide, multiply and add per element.

What it rewrites (TVM's pattern): ``R.nn.batch_norm(conv, gamma, beta, mean, var)`` whose data is
a variable bound to an ``R.nn.conv2d`` with a constant weight, whose four parameters are
constants and whose axis is the convolution's output channel axis. The convolution must have
no other use (its result before the batch norm is gone afterwards). Grouped and depthwise
convolutions fold the same way (their kernels still have one ``O`` per output channel).
``scale=False`` folds no ``gamma``, ``center=False`` no ``beta``. The scaled weight and the bias
are computed here, in the weight's dtype, as the new constants FoldConstant would make.

``eval_mode_only=True`` (not TVM's) folds only the batch norms marked ``training=False``, as
``tvms.compile``'s default pipeline needs (DecomposeOpsForInference says why).

The batch norm becomes the tuple ``(conv + bias, mean, var)`` as DecomposeOpsForInference
writes it, so ``bn[1]`` and ``bn[2]`` still read the statistics; CanonicalizeBindings then
removes the ``bn[0]`` between the convolution and what follows.
"""

from __future__ import annotations

import numpy as np

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.op import api as op

from ._common import op_name, var_use_counts
from ._rewrite_calls import CallRewriter, rewrite_functions
from .decompose_ops import is_training


class FoldBatchnormToConv2D:
    """``IRModule -> IRModule``: every conv2d + constant batch norm folded into the conv2d."""

    def __init__(self, eval_mode_only: bool = False) -> None:
        self.eval_mode_only = eval_mode_only

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, lambda bb: _Folder(bb, self.eval_mode_only))

    def __repr__(self) -> str:
        return "FoldBatchnormToConv2D()"


def _channel_axes(conv: relax.Call):
    """``(kernel O axis, output C axis)`` of a conv2d, or None for a packed layout (``NCHW4c``)."""
    kernel, out = conv.attrs["kernel_layout"], conv.attrs["out_layout"] or conv.attrs["data_layout"]
    if not (kernel.isupper() and out.isupper()) or "O" not in kernel or "C" not in out:
        return None
    return kernel.index("O"), out.index("C")


def folded_weight_and_bias(conv: relax.Call, bn: relax.Call):
    """The scaled weight and the bias (constants, the bias shaped to broadcast along the
    output's channel axis), or None when the pair does not fold."""
    axes = _channel_axes(conv)
    weight = conv.args[1]
    params = bn.args[1:]
    if axes is None or not all(isinstance(p, relax.Constant) for p in (weight, *params)):
        return None
    kernel_axis, out_axis = axes
    ndim = len(conv.attrs["out_layout"] or conv.attrs["data_layout"])
    if bn.attrs["axis"] % ndim != out_axis:
        return None
    w = weight.data
    gamma, beta, mean, var = (np.asarray(p.data, dtype=w.dtype) for p in params)
    scale = (gamma if bn.attrs["scale"] else np.ones_like(gamma)) / np.sqrt(var + w.dtype.type(bn.attrs["epsilon"]))
    shift = (beta if bn.attrs["center"] else np.zeros_like(beta)) - mean * scale
    if scale.shape != (w.shape[kernel_axis],):
        return None
    out_dtype = relax.struct_info_of(conv).dtype
    return (op.const(w * _along(scale, kernel_axis, w.ndim), str(w.dtype)),
            op.const(_along(shift, out_axis, ndim).astype(out_dtype), out_dtype))


def _along(vector: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = vector.shape[0]
    return vector.reshape(shape)


class _Folder(CallRewriter):
    """Rewrites the batch norms that fold; the convolution each one consumed, now unused, is
    dropped after the walk (`function`)."""

    def __init__(self, bb, eval_mode_only: bool) -> None:
        super().__init__(bb)
        self.eval_mode_only = eval_mode_only

    def function(self, func: relax.Function) -> relax.Function:
        self.convs = {}
        self.uses = var_use_counts(func.body)
        self.bindings = {b.var: b.value for b in _bindings(func.body)}
        self.folded = set()
        new = super().function(func)
        return _drop_bindings(new, self.folded) if self.folded else new

    def rule(self, call):
        if op_name(call) != "relax.nn.batch_norm" or (self.eval_mode_only and is_training(call)):
            return None
        data = call.args[0]
        conv = self.bindings.get(data)
        if op_name(conv) != "relax.nn.conv2d" or self.uses.get(data) != 1:
            return None
        return lambda bb, bn: self.fold(bb, data, conv, bn)

    def fold(self, bb, conv_var, conv, bn):
        folded = folded_weight_and_bias(conv, bn)
        if folded is None:
            return None
        weight, bias = folded
        new_conv = bb.emit(relax.Call(conv.op, [conv.args[0], weight], dict(conv.attrs), span=conv.span))
        out = bb.emit(op.add(new_conv, bias))
        self.folded.add(conv_var)
        return relax.Tuple([out, bn.args[3], bn.args[4]])


def _bindings(seq: relax.SeqExpr):
    for block in seq.blocks:
        yield from block.bindings


def _drop_bindings(func: relax.Function, dropped: set) -> relax.Function:
    """``func`` without the bindings of the variables in ``dropped`` (top-level blocks)."""
    blocks = []
    for block in func.body.blocks:
        kept = [b for b in block.bindings if b.var not in dropped]
        blocks.append(block if len(kept) == len(block.bindings) else _with_bindings(block, kept))
    body = relax.SeqExpr(blocks, func.body.body, func.body.struct_info)
    return relax.Function(func.params, body, func.ret_struct_info, func.attrs, func.is_pure,
                          func.private, func.struct_info, func.span, func.comments)


def _with_bindings(block, bindings):
    if isinstance(block, relax.DataflowBlock):
        return relax.DataflowBlock(bindings, [v for v in block.outputs if any(b.var is v for b in bindings)])
    return relax.BindingBlock(bindings)
