"""Matrix products, as Relax's legalization of ``R.matmul`` writes them (block ``matmul``, loops
``i0, i1, ..., k``): 1-D operands are promoted and their unit dimension dropped, batch
dimensions broadcast. ``linear`` is the same product against a transposed weight (read as
``w[j, k]``, no transpose stage), plus a broadcast ``T_add`` of the bias. ``einsum`` is
NumPy's Einstein summation (block ``T_einsum``)."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.einsum import einsum_dims, parse_einsum
from tvmscript.ir.tir_arith import is_one

from .. import te
from .broadcast import broadcast_shape

__all__ = ["matmul", "einsum"]


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


# ----------------------------------------------------------------------------- einsum


def einsum(subscripts: str, *operands: te.Tensor) -> te.Tensor:
    """NumPy's ``einsum(subscripts, *operands)``: block ``T_einsum``, loops ``ax0..`` over the
    output and one reduce loop per summed subscript, named by its letter (``T_einsum[ax0, ax1]
    += x0[ax0, j] * x1[j, ax1]``, as TVM's ``topi.einsum``). A letter repeated in one operand
    reads its diagonal; an ellipsis dimension of extent 1 broadcasts."""
    inputs, output = parse_einsum(subscripts, [len(t.shape) for t in operands])
    dims = einsum_dims(inputs, [list(t.shape) for t in operands])
    summed = [x for x in dict.fromkeys(x for labels in inputs for x in labels) if x not in output]
    red = {x: te.reduce_axis((0, dims[x]), name=x if isinstance(x, str) else f"e{x}") for x in summed}
    dtype = operands[0].dtype

    def f(*idx):
        var = dict(zip(output, idx))
        var.update({x: r for x, r in red.items()})
        value = None
        for t, labels in zip(operands, inputs):
            index = []
            for label, d in zip(labels, t.shape):
                v = var[label]
                if is_one(d) and not is_one(dims[label]):
                    v = tir.IntImm(d.dtype, 0)
                index.append(v)
            load = t[tuple(index)]
            load = load if t.dtype == dtype else tir.Cast(dtype, load)
            value = load if value is None else value * load
        return te.sum(value, axis=list(red.values())) if red else value

    return te.compute([dims[x] for x in output], f, name="T_einsum",
                      varargs_names=[f"ax{i}" for i in range(len(output))])
