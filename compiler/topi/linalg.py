"""Matrix products, as Relax's legalization of ``R.matmul`` writes them (block ``matmul``, loops
``i0, i1, ..., k``): 1-D operands are promoted and their unit dimension dropped, batch
dimensions broadcast. ``linear`` is the same product against a transposed weight (read as
``w[j, k]``, no transpose stage), plus a broadcast ``T_add`` of the bias."""

from __future__ import annotations

from tvmscript import tir

from .. import te
from .broadcast import broadcast_shape
from ._util import is_one

__all__ = ["matmul", "linear"]


def matmul(a: te.Tensor, b: te.Tensor, out_dtype: str = "void", transpose_b: bool = False) -> te.Tensor:
    """``a @ b`` (``a @ b.T`` with ``transpose_b``: ``b`` is read as ``b[..., j, k]``)."""
    dtype = a.dtype if out_dtype in ("void", "", None) else out_dtype
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    a_shape = list(a.shape)
    b_shape = list(b.shape)
    if transpose_b and not b_vec:
        b_shape[-2], b_shape[-1] = b_shape[-1], b_shape[-2]
    batch_a = a_shape[:-2] if not a_vec else []
    batch_b = b_shape[:-2] if not b_vec else []
    batch = broadcast_shape(batch_a, batch_b)
    red = a_shape[-1]
    k = te.reduce_axis((0, red), name="k")
    oshape = list(batch)
    if not a_vec:
        oshape.append(a_shape[-2])
    if not b_vec:
        oshape.append(b_shape[-1])
    nb = len(batch)

    def operand_index(t_shape, t_batch, idx, last):
        off = nb - len(t_batch)
        out = []
        for j, d in enumerate(t_batch):
            o = batch[off + j]
            out.append(tir.IntImm(idx[off + j].dtype, 0) if is_one(d) and not is_one(o) else idx[off + j])
        return out + last

    def f(*idx):
        idx = list(idx)
        i = None if a_vec else idx[nb]
        j = None if b_vec else idx[-1]
        ai = operand_index(a_shape, batch_a, idx, ([i] if i is not None else []) + [k])
        b_last = [k] + ([j] if j is not None else [])
        bi = operand_index(b_shape, batch_b, idx, b_last[::-1] if transpose_b else b_last)
        x, y = a[tuple(ai)], b[tuple(bi)]
        if x.dtype != dtype:
            x = tir.Cast(dtype, x)
        if y.dtype != dtype:
            y = tir.Cast(dtype, y)
        return te.sum(x * y, axis=k)

    return te.compute(oshape, f, name="matmul")


def linear(x: te.Tensor, weight: te.Tensor, bias=None, out_dtype: str = "void") -> te.Tensor:
    """``x @ weight.T (+ bias)``: TVM's ``relax.op.linear`` computed in one PrimFunc (block
    ``matmul`` reading ``weight[j, k]``, then ``T_add`` broadcasting the bias)."""
    from .broadcast import add

    out = matmul(x, weight, out_dtype, transpose_b=True)
    return out if bias is None else add(out, bias)
