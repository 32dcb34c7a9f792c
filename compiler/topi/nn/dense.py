"""Dense products and attention: ``T_matmul_NT`` (dense), ``T_batch_matmul_NT``/
``T_batch_matmul_NN`` around attention's softmax (TVM's transposes and reshapes to 3-D batch
matmuls are fewer stages here), and dropout in its inference form.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import floordiv_dim, plain_dim, static_int
from tvmscript.ir.op.shape_arith import add, sub

from ... import te
from .._util import compute, float_const
from ..broadcast import broadcast_index
from .norm import softmax


# ----------------------------------------------------------------------------- dropout, dense


def dropout(data: te.Tensor, rate: float = 0.5) -> list:
    """Inference dropout: the data unchanged (``T_identity``) and an all-ones mask
    (``T_full_like``); ``rate`` only matters in training, which is not compiled here."""
    out = compute(data.shape, lambda idx: data[tuple(idx)], name="T_identity")
    mask = compute(data.shape, lambda idx: tir.const(1, data.dtype), name="T_full_like")
    return [out, mask]


def dense(data: te.Tensor, weight: te.Tensor, out_dtype: str = "void") -> te.Tensor:
    """``data @ weight.T`` (weight as (units, in)): TVM's ``T_matmul_NT``, loops ``i0.., k``."""
    dtype = data.dtype if out_dtype in (None, "", "void") else out_dtype
    k = te.reduce_axis((0, data.shape[-1]), name="k")
    shape = list(data.shape[:-1]) + [weight.shape[0]]

    def f(*i):
        a = te.cast(data[tuple(i[:-1]) + (k,)], dtype)
        b = te.cast(weight[i[-1], k], dtype)
        return te.sum(a * b, axis=k)

    return te.compute(shape, f, name="T_matmul_NT")



# ----------------------------------------------------------------------------- attention


def _causal_visible(seq, seq_kv, causal_mask: str):
    """The condition on a (batch, head, query i, key j) index that key ``j`` is visible to query
    ``i``: ``j <= i`` ("TopLeft"), ``j <= i + seq_kv - seq`` ("BottomRight": the last query sees
    every key, as when decoding after a cache)."""
    offset = sub(plain_dim(seq_kv), plain_dim(seq)) if causal_mask == "BottomRight" else 0
    return lambda idx: idx[3] <= add(idx[2], offset)


def attention(query: te.Tensor, key: te.Tensor, value: te.Tensor, bias=None, scale=None,
              causal_mask=None) -> te.Tensor:
    """Scaled dot-product attention in TVM's layout: ``query`` (batch, seq, heads, head_dim),
    ``key`` (batch, seq_kv, kv_heads, head_dim), ``value`` (batch, seq_kv, kv_heads, head_dim_v),
    output (batch, seq, heads, head_dim_v).

    Stages: ``T_batch_matmul_NT`` (scores per batch and head: ``q . k``), ``T_divide`` by
    ``sqrt(head_dim)`` (``T_multiply`` by ``scale`` when given; ``T_add`` of the broadcast
    (batch, heads, seq, seq_kv) ``bias`` after it), TVM's four softmax stages along ``seq_kv``
    (masked when ``causal_mask`` is "TopLeft": key ``j`` visible to query ``i`` when
    ``j <= i``, or "BottomRight": when ``j <= i + seq_kv - seq``), then ``T_batch_matmul_NN``
    (probabilities times values) written in the output layout. TVM's legalization transposes
    and reshapes to 3-D batch matmuls instead; indexing the 4-D tensors directly computes the
    same values in fewer stages. With fewer kv heads than heads (grouped-query attention), query
    head ``h`` reads kv head ``h // (heads // kv_heads)``."""
    batch, seq, heads, head_dim = query.shape
    seq_kv, kv_heads = key.shape[1], key.shape[2]
    dtype = query.dtype
    ratio = 1
    if static_int(heads) is not None and static_int(kv_heads) is not None:
        ratio = static_int(heads) // static_int(kv_heads)

    def kv(h):
        return floordiv_dim(h, ratio) if ratio != 1 else h

    d = te.reduce_axis((0, head_dim), name="k")
    scores = te.compute((batch, heads, seq, seq_kv),
                        lambda b, h, i, j: te.sum(query[b, i, h, d] * key[b, j, kv(h), d], axis=d),
                        name="T_batch_matmul_NT")
    if scale is None:
        size = static_int(head_dim)
        root = te.sqrt(float_const(size, dtype) if size is not None else te.cast(head_dim, dtype))
        scaled = compute(scores.shape, lambda idx: scores[tuple(idx)] / root, name="T_divide")
    else:
        factor = float_const(scale, dtype)
        scaled = compute(scores.shape, lambda idx: scores[tuple(idx)] * factor, name="T_multiply")
    if bias is not None:
        logits = compute(scaled.shape, lambda idx: scaled[tuple(idx)] + bias[tuple(broadcast_index(
            bias, list(scaled.shape), idx))], name="T_add")
    else:
        logits = scaled
    where = None if causal_mask is None else _causal_visible(seq, seq_kv, causal_mask)
    probs = softmax(logits, 3, where)
    r = te.reduce_axis((0, seq_kv), name="k")
    return te.compute((batch, seq, heads, value.shape[3]),
                      lambda b, i, h, j: te.sum(probs[b, h, i, r] * value[b, r, kv(h), j], axis=r),
                      name="T_batch_matmul_NN")
