"""SplitAttention: ``R.nn.attention`` written out as matmul, scale, mask, softmax, matmul, for
targets whose schedules do better with the pieces (RewriteAttention's inverse).

Why: on a GPU, DLight has rules for a batch matmul (tensor cores: ``MatmulTensorCore``) and for
a softmax (the reduction rules), but none for the fused attention kernel, which would run as
its Fallback: one thread per score, a serial dot product from global memory. A model imported
with ``scaled_dot_product_attention`` (or written with ``R.nn.attention``) is therefore
compiled for CUDA as

    s = matmul(permute_dims(Q, [0, 2, 1, 3]), permute_dims(K, [0, 2, 3, 1]))   (b, h, n, m)
    s = multiply(s, scale)                      scale: the op's, else 1 / sqrt(head_dim)
    s = add(s, bias)                            nn.attention_bias
    s = where(keep, s, -inf)                    causal_mask: a constant (n, m) triangle
    o = matmul(softmax(s, axis=-1), permute_dims(V, [0, 2, 1, 3]))
    out = permute_dims(o, [0, 2, 1, 3])         (b, n, h, dv)

which is what RewriteAttention matches: the two passes are each other's inverse. Left as it is:
an attention with a window, a causal mask over symbolic lengths (the triangle is a constant),
and grouped-query attention whose key heads are neither the query's nor 1 (matmul broadcasts
only those).
"""

from __future__ import annotations

import math

import numpy as np

from tvmscript import ir
from tvmscript.ir.op import api as op

from tvmscript.ir.op.common import dim_equal, static_dim

from ._common import op_name
from ._rewrite_calls import CallRewriter, rewrite_functions

__all__ = ["SplitAttention"]

_ATTENTION_OPS = ("relax.nn.attention", "relax.nn.attention_bias")


class SplitAttention:
    """``IRModule -> IRModule``: every ``R.nn.attention`` that can be, as matmuls and a softmax."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, _Splitter)

    def __repr__(self) -> str:
        return "SplitAttention()"


class _Splitter(CallRewriter):
    def rule(self, call):
        if op_name(call) not in _ATTENTION_OPS or not _splittable(call):
            return None
        return _split


def _dims(expr):
    """The static extents of a tensor's shape (None for a symbolic one), or None without a shape."""
    shape = getattr(expr.struct_info, "shape", None)
    if shape is None or not isinstance(shape, (list, tuple)):
        return None
    return [static_dim(d) for d in shape]


def _splittable(call) -> bool:
    q, k = _dims(call.args[0]), _dims(call.args[1])
    if call.attrs.get("window_size") is not None or q is None or k is None or len(q) != 4 or len(k) != 4:
        return False
    if call.attrs.get("scale") is None and q[3] is None:
        return False            # 1 / sqrt(head_dim) needs the head dimension
    if call.attrs.get("causal_mask") is not None and (q[1] is None or k[1] is None):
        return False            # the triangle is a constant: static lengths only
    hq, hk = call.args[0].struct_info.shape[2], call.args[1].struct_info.shape[2]
    return static_dim(hk) == 1 or dim_equal(hq, hk)     # what a batch matmul broadcasts


def _split(bb, call):
    q, k, v = call.args[:3]
    bias = call.args[3] if len(call.args) > 3 else None
    dtype = q.struct_info.dtype
    scale = call.attrs.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(_dims(q)[3])
    scores = bb.emit(op.matmul(bb.emit(op.permute_dims(q, [0, 2, 1, 3])), bb.emit(op.permute_dims(k, [0, 2, 3, 1]))))
    scores = bb.emit(op.multiply(scores, op.const(scale, dtype)))
    if bias is not None:
        scores = bb.emit(op.add(scores, bias))
    causal = call.attrs.get("causal_mask")
    if causal is not None:
        n, m = _dims(q)[1], _dims(k)[1]
        offset = m - n if causal == "BottomRight" else 0
        keep = np.tril(np.ones((n, m), bool), offset)
        scores = bb.emit(op.where(op.const(keep, "bool"), scores, op.const(float("-inf"), dtype)))
    probs = bb.emit(op.nn.softmax(scores, axis=-1))
    out = bb.emit(op.matmul(probs, bb.emit(op.permute_dims(v, [0, 2, 1, 3]))))
    return op.permute_dims(out, [0, 2, 1, 3])
