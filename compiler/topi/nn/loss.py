"""Losses and batch_flatten: nll_loss, cross_entropy_with_logits, and batch_flatten (a
reshape, as TVM legalizes it).
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import plain_dim, static_int
from tvmscript.ir.op.shape_arith import product

from ... import te
from .._util import compute, float_const
from ..transform import reshape


# ----------------------------------------------------------------------------- nll_loss


def nll_loss(predictions: te.Tensor, targets: te.Tensor, weights, reduction: str, ignore_index: int) -> te.Tensor:
    """Negative log-likelihood: stage ``nll_loss`` holds ``-predictions[n, t, d...] * w[t]``
    per target (0 where ``t == ignore_index``; the load then reads class 0, so it stays in
    bounds); ``sum`` reduces it to ``nll_loss_red``, ``mean`` divides that by the summed
    weights of the targets not ignored (``nll_loss_weight_red``), as PyTorch does. ``weights``
    None weighs every class 1."""
    dtype = predictions.dtype
    zero, ignore = tir.const(0, dtype), tir.const(ignore_index, targets.dtype)
    # Class axis: 0 for 1-D predictions (one sample), 1 otherwise.
    batched = len(predictions.shape) > 1

    def target(idx):
        t = targets[tuple(idx)]
        kept = tir.NE("bool", t, ignore)
        return kept, tir.Select(t.dtype, kept, t, tir.const(0, t.dtype))

    def weight_of(t):
        return weights[(t,)] if weights is not None else tir.const(1, dtype)

    def loss(idx):
        kept, t = target(idx)
        at = (idx[0], t, *idx[1:]) if batched else (t,)
        return tir.Select(dtype, kept, (zero - predictions[at]) * weight_of(t), zero)

    per_target = compute(targets.shape, loss, name="nll_loss")
    if reduction == "none" or (reduction == "sum" and not targets.shape):
        return per_target

    def kept_weight(*idx):
        kept, t = target(list(idx))
        return tir.Select(dtype, kept, weight_of(t), zero)

    if not targets.shape:  # one sample: its loss over its weight
        return te.compute((), lambda: per_target[()] / kept_weight(), name="T_divide")
    axes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(targets.shape)]
    total = te.compute((), lambda: te.sum(per_target[tuple(axes)], axis=axes), name="nll_loss_red")
    if reduction == "sum":
        return total
    waxes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(targets.shape)]
    wsum = te.compute((), lambda: te.sum(kept_weight(*waxes), axis=waxes), name="nll_loss_weight_red")
    return te.compute((), lambda: total[()] / wsum[()], name="T_divide")


# ----------------------------------------------------------------------------- cross_entropy_with_logits


def cross_entropy_with_logits(predictions: te.Tensor, labels: te.Tensor) -> te.Tensor:
    """``-sum(predictions * labels)``, divided by the batch size (the first extent) for a batch
    (rank 2 and more), as TVM's: stages ``T_multiply``, ``T_multiply_red``, ``T_multiply``
    (by -1) and ``T_divide``."""
    dtype = predictions.dtype
    product = compute(predictions.shape, lambda idx: predictions[tuple(idx)] * labels[tuple(idx)], name="T_multiply")
    axes = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(predictions.shape)]
    total = te.compute((), lambda: te.sum(product[tuple(axes)], axis=axes), name="T_multiply_red")
    negated = te.compute((), lambda: total[()] * tir.const(-1.0, dtype), name="T_multiply")
    if len(predictions.shape) < 2:
        return negated
    batch = plain_dim(predictions.shape[0])
    size = static_int(batch)
    divisor = float_const(size, dtype) if size is not None else te.cast(batch, dtype)
    return te.compute((), lambda: negated[()] / divisor, name="T_divide")


# ----------------------------------------------------------------------------- batch_flatten


def batch_flatten(data: te.Tensor) -> te.Tensor:
    """``data`` reshaped to (first extent, product of the others): TVM legalizes it as
    ``reshape`` (stage ``T_reshape``)."""
    return reshape(data, [data.shape[0], product(list(data.shape[1:]))])
