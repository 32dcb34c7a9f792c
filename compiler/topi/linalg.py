"""Matrix products, as Relax's legalization of ``R.matmul`` writes them (block ``matmul``, loops
``i0, i1, ..., k``): 1-D operands are promoted and their unit dimension dropped, batch
dimensions broadcast. ``linear`` is the same product against a transposed weight (read as
``w[j, k]``, no transpose stage), plus a broadcast ``T_add`` of the bias. ``einsum`` is
NumPy's Einstein summation (block ``T_einsum``)."""

from __future__ import annotations

from tvmscript.ir import tir

from .. import te
from .broadcast import broadcast_shape
from ._util import is_one

__all__ = ["matmul", "einsum", "parse_einsum", "einsum_dims", "EinsumError"]


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


class EinsumError(ValueError):
    """A subscripts string that does not fit the operands (the op's inference reports it)."""


def _labels(term: str, rank: int, where: str) -> list:
    """One label per dimension of an operand of ``rank``: its letter, or for the dimensions an
    ellipsis covers an int counting from the innermost of them (0) outwards, so that the
    operands' ellipsis dimensions line up from the right as NumPy broadcasting does."""
    if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
        raise EinsumError(f"{where}: at most one ellipsis '...' per operand, and no other '.'")
    pre, _, post = term.partition("...")
    for c in pre + post:
        if not c.isalpha() or not c.isascii():
            raise EinsumError(f"{where}: {c!r} is not a subscript letter")
    if "..." not in term:
        if len(term) != rank:
            raise EinsumError(f"{where}: {len(term)} subscripts for an operand of rank {rank}")
        return list(term)
    k = rank - len(pre) - len(post)
    if k < 0:
        raise EinsumError(f"{where}: {len(pre + post)} subscripts for an operand of rank {rank}")
    return list(pre) + list(range(k - 1, -1, -1)) + list(post)


def parse_einsum(subscripts: str, ranks: list) -> tuple:
    """``(labels of each operand, labels of the output)`` of ``subscripts`` for operands of
    ``ranks`` (see `_labels`). Without ``->`` the output is NumPy's implicit one: the
    ellipsis dimensions, then the letters used once, in alphabetical order. Raises
    `EinsumError`."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise EinsumError(f"subscripts {subscripts!r} name {len(terms)} operand(s), but {len(ranks)} are given")
    inputs = [_labels(t, r, f"operand {i} ({t!r})") for i, (t, r) in enumerate(zip(terms, ranks))]
    n_ell = max((sum(isinstance(x, int) for x in labels) for labels in inputs), default=0)
    ellipsis = list(range(n_ell - 1, -1, -1))
    letters = [x for labels in inputs for x in labels if isinstance(x, str)]
    if not arrow:
        return inputs, ellipsis + sorted(c for c in set(letters) if letters.count(c) == 1)
    if rhs.count("...") > 1 or rhs.replace("...", "").count(".") > 0:
        raise EinsumError("the output may hold one ellipsis '...' and no other '.'")
    pre, dots, post = rhs.partition("...")
    for c in pre + post:
        if not c.isalpha() or not c.isascii():
            raise EinsumError(f"output: {c!r} is not a subscript letter")
        if c not in letters:
            raise EinsumError(f"output subscript {c!r} appears in no operand")
        if (pre + post).count(c) > 1:
            raise EinsumError(f"output subscript {c!r} appears more than once")
    return inputs, list(pre) + (ellipsis if dots else []) + list(post)


def einsum_dims(inputs: list, shapes: list) -> dict:
    """The extent of each label: a label's extents must agree (checked where constant), except
    that an extent of 1 broadcasts against n, for letters as for ellipsis dimensions (TVM's and
    NumPy's rule: ``einsum("ij,ij->i")`` of shapes (1, 4) and (2, 4) is (2,))."""
    dims: dict = {}
    for i, (labels, shape) in enumerate(zip(inputs, shapes)):
        for label, d in zip(labels, shape):
            prev = dims.get(label)
            if prev is None or is_one(prev):
                dims[label] = d
            elif is_one(d):
                continue
            elif isinstance(prev, tir.IntImm) and isinstance(d, tir.IntImm) and prev.value != d.value:
                what = f"subscript {label!r}" if isinstance(label, str) else "the ellipsis dimensions"
                raise EinsumError(f"{what} has extent {prev.value} and {d.value} in different operands (operand {i})")
    return dims


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
