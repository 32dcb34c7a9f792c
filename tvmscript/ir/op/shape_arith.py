"""Folding arithmetic on tensor dimensions and indices, Python ints accepted: ``add``, ``sub``,
``mul``, ``floordiv``, ``floormod``, ``ceildiv``, ``product``, row-major ``ravel``/``unravel``,
and the pieces of a split (`split_bounds`) or a slice (`slice_bounds`) of a dimension.

Why it is shared: op inference computes symbolic output shapes with these, and the TE
definitions (``compiler/topi``) build their loop extents and index expressions with the same
functions, so the shape an op's struct info predicts is the one its legalized PrimFunc has.
Constant parts are folded and unit factors dropped (there is no general simplifier here), which
keeps the printed TIR close to TVM's. Unlike `tvmscript.ir.tir_arith`'s constructors, these
take Python ints beside PrimExprs (an int takes the other operand's dtype, int64 by default) and
widen int32 to int64 when the operands' dtypes differ.
"""

from __future__ import annotations

from .. import tir

__all__ = ["as_int", "int_imm", "dim_expr", "unify_dtypes", "add", "sub", "mul", "floordiv", "floormod", "ceildiv",
           "product", "ravel", "unravel", "split_bounds", "slice_bounds"]


def as_int(e):
    """The value of a constant integer expression (or Python int), else None."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return e
    if isinstance(e, tir.IntImm):
        return e.value
    return None


def int_imm(value: int, like) -> tir.IntImm:
    """``value`` as an IntImm of ``like``'s dtype (int64 when ``like`` is no PrimExpr)."""
    return tir.IntImm(like.dtype if isinstance(like, tir.PrimExpr) else "int64", value)


def dim_expr(v, like=None):
    """``v`` as a PrimExpr: itself, or an int made an IntImm of ``like``'s dtype."""
    return v if isinstance(v, tir.PrimExpr) else int_imm(v, like)


def _widen(e):
    return e if e.dtype == "int64" else tir.Cast("int64", e)


def unify_dtypes(a, b):
    """Give a Python int the dtype of the other operand; widen int32 to int64 when they differ."""
    if not isinstance(a, tir.PrimExpr):
        a = int_imm(a, b)
    if not isinstance(b, tir.PrimExpr):
        b = int_imm(b, a)
    if a.dtype != b.dtype:
        a, b = (_widen(a), _widen(b))
    return a, b


def add(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(ia + ib, a if isinstance(a, tir.PrimExpr) else b)
    if ib == 0:
        return dim_expr(a, b)
    if ia == 0:
        return dim_expr(b, a)
    if ib is not None and ib < 0:
        return sub(a, -ib)
    a, b = unify_dtypes(a, b)
    return tir.Add(a.dtype, a, b)


def sub(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(ia - ib, a if isinstance(a, tir.PrimExpr) else b)
    if ib == 0:
        return dim_expr(a, b)
    a, b = unify_dtypes(a, b)
    return tir.Sub(a.dtype, a, b)


def mul(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(ia * ib, a if isinstance(a, tir.PrimExpr) else b)
    if ib == 1:
        return dim_expr(a, b)
    if ia == 1:
        return dim_expr(b, a)
    a, b = unify_dtypes(a, b)
    return tir.Mul(a.dtype, a, b)


def floordiv(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(ia // ib, a if isinstance(a, tir.PrimExpr) else b)
    if ib == 1:
        return dim_expr(a, b)
    a, b = unify_dtypes(a, b)
    return tir.FloorDiv(a.dtype, a, b)


def floormod(a, b):
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(ia % ib, a if isinstance(a, tir.PrimExpr) else b)
    if ib == 1:
        return int_imm(0, a)
    a, b = unify_dtypes(a, b)
    return tir.FloorMod(a.dtype, a, b)


def ceildiv(a, b):
    """``ceil(a / b)`` for positive ``b``."""
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return int_imm(-(-ia // ib), a if isinstance(a, tir.PrimExpr) else b)
    return floordiv(add(a, sub(b, 1)), b)


def product(dims, like=None):
    out = int_imm(1, like if like is not None else (dims[0] if dims else None))
    for d in dims:
        out = mul(out, d)
    return out


def ravel(idx: list, shape: list):
    """The row-major flat index of ``idx`` in ``shape``."""
    flat = None
    for i, d in zip(idx, shape):
        flat = i if flat is None else add(mul(flat, d), i)
    return flat if flat is not None else int_imm(0, None)


def unravel(flat, shape: list) -> list:
    """The row-major indices of the flat position ``flat`` in ``shape``: ``(flat // inner) % d``
    per dimension (the outermost without the ``%``, the innermost without the ``//``)."""
    out = []
    inner = int_imm(1, flat)
    for k in range(len(shape) - 1, -1, -1):
        q = floordiv(flat, inner)
        out.append(q if k == 0 else floormod(q, shape[k]))
        inner = mul(inner, shape[k])
    return out[::-1]


# ----------------------------------------------------------------------------- split, slice


def split_bounds(dim, indices_or_sections) -> list:
    """``[(begin, extent)]`` of each piece of a dimension of extent ``dim``: ``sections`` equal
    pieces of ``ceil(dim / sections)`` (the last one what is left), or cuts at the indices,
    clamped to ``[0, dim]`` as NumPy does."""
    if isinstance(indices_or_sections, int):
        size = ceildiv(dim, indices_or_sections)
        return [(mul(size, j), size if j < indices_or_sections - 1 else sub(dim, mul(size, j)))
                for j in range(indices_or_sections)]
    static = as_int(dim)
    cuts = [_clamp(i, static) for i in indices_or_sections]
    starts = [0] + cuts
    out = []
    for j, begin in enumerate(starts):
        if j + 1 < len(starts):
            end = starts[j + 1]
            out.append((int_imm(begin, dim), int_imm(max(end - begin, 0), dim)))
        else:
            rest = sub(dim, begin) if static is None else int_imm(max(static - begin, 0), dim)
            out.append((int_imm(begin, dim), rest))
    return out


def _clamp(i: int, static) -> int:
    if static is None:
        return max(i, 0)
    return min(max(i, 0), static)


def slice_bounds(dim, begin: int, end: int, stride: int, assume_inbound: bool = False):
    """``(start, extent)`` of ``x[begin:end:stride]`` along a dimension of extent ``dim``, as
    Python's ``slice.indices`` (negative values from the end, clamped). A symbolic extent is
    only used for negative values and the ``end`` sentinel; the slice is then assumed in bounds."""
    static = as_int(dim)
    if static is not None and not assume_inbound:
        start, stop, step = slice(begin, end, stride).indices(static)
        return int_imm(start, dim), int_imm(len(range(start, stop, step)), dim)
    start = add(dim, begin) if begin < 0 else int_imm(begin, dim)
    big = end >= 2**31 - 1 or (static is not None and end > static)
    stop = dim if big else (add(dim, end) if end < 0 else int_imm(end, dim))
    if stride > 0:
        return start, ceildiv(sub(stop, start), stride)
    return start, ceildiv(sub(start, stop), -stride)
