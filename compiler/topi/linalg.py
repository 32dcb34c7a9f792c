"""Matrix products, as Relax's legalization of ``R.matmul`` writes them (block ``matmul``, loops
``i0, i1, ..., k``): 1-D operands are promoted and their unit dimension dropped, batch
dimensions broadcast."""

from __future__ import annotations

from tvmscript import tir

from .. import te
from .broadcast import broadcast_shape
from ._util import is_one

__all__ = ["matmul"]


def matmul(a: te.Tensor, b: te.Tensor, out_dtype: str = "void") -> te.Tensor:
    dtype = a.dtype if out_dtype in ("void", "", None) else out_dtype
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    a_shape = list(a.shape)
    b_shape = list(b.shape)
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
        bi = operand_index(b_shape, batch_b, idx, [k] + ([j] if j is not None else []))
        x, y = a[tuple(ai)], b[tuple(bi)]
        if x.dtype != dtype:
            x = tir.Cast(dtype, x)
        if y.dtype != dtype:
            y = tir.Cast(dtype, y)
        return te.sum(x * y, axis=k)

    return te.compute(oshape, f, name="matmul")
