"""The shapes convolution and pooling compute with, shared by their inference
(`tvmscript.ir.op.nn`) and their TE definitions (``compiler/topi/nn``): sliding-window output
extents (`conv_out_dim`, `pool_out_dim`, `conv_transpose_out_dim`) and data layouts
(``NHWC``, ``HWIO``, packed ``NCHW16c``) read as the canonical order and back
(`parse_layout`, `layout_to_primal_shape`, `primal_to_layout_shape`).

Why shared: the struct info inference predicts is then the shape the legalized PrimFunc has,
written the same way. The small folding helpers (`add_int`, `mul_dim`, `floordiv_dim`) fold
what TVM's arithmetic simplifier would (a unit stride, a zero pad), so the extents print as
TVM's (``(h - 1) // 2 + 1``, ``h - 4``); the TE definitions build their window indices with them.
"""

from __future__ import annotations

import numbers

from .. import tir
from .shape_arith import floordiv, mul

__all__ = ["static_int", "plain_dim", "add_int", "mul_dim", "floordiv_dim", "conv_out_dim", "pool_out_dim",
           "conv_transpose_out_dim", "parse_layout", "packed_factors", "layout_to_primal_shape",
           "primal_to_layout_shape"]


# ----------------------------------------------------------------------------- index arithmetic


def static_int(e):
    """The value of a constant dim (int or IntImm), else None."""
    if isinstance(e, numbers.Integral) and not isinstance(e, bool):
        return int(e)
    if isinstance(e, tir.IntImm):
        return e.value
    return None


def plain_dim(e):
    """A shape entry as a plain PrimExpr (te's ShapeDims become IntImms)."""
    v = static_int(e)
    if v is not None and not isinstance(e, numbers.Integral):
        return tir.IntImm(e.dtype, v)
    return e


def add_int(e, c: int):
    """``e + c`` with ``c == 0`` folded and a negative ``c`` written as a subtraction."""
    v = static_int(e)
    if v is not None:
        return tir.IntImm(getattr(e, "dtype", "int64"), v + c) if not isinstance(e, int) else v + c
    if c == 0:
        return e
    return e + c if c > 0 else e - (-c)


def mul_dim(e, c):
    """``e * c`` with ``c == 1`` folded."""
    return e if static_int(c) == 1 else e * c


def floordiv_dim(e, c):
    """``e // c`` with ``c == 1`` and constant operands folded."""
    a, b = static_int(e), static_int(c)
    if b == 1:
        return e
    if a is not None and b is not None:
        return tir.IntImm(getattr(e, "dtype", "int64"), a // b)
    return tir._binary(tir.FloorDiv, e, c)


def conv_out_dim(size, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int,
                 ceil_mode: bool = False):
    """The output extent of a sliding window: ``(size + pads - dilated_kernel [+ stride - 1]) //
    stride + 1`` (the ``+ stride - 1`` in ceil mode), folded like TVM's arithmetic simplifier
    (``(h - 1) // 2 + 1``, ``h - 4``, ``h // 2 + 1``). ``size`` is an int or a PrimExpr."""
    size = plain_dim(size)
    c = pad_before + pad_after - ((kernel - 1) * dilation + 1)
    if ceil_mode:
        c += stride - 1
    if stride == 1:
        return add_int(size, c + 1)
    return add_int(floordiv_dim(add_int(size, c), stride), 1)


def pool_out_dim(size, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int,
                 ceil_mode: bool = False):
    """A pooling output extent. Ceil mode follows TVM (and PyTorch): a last window that would
    start beyond the input and its leading padding is dropped. None when that depends on a
    symbolic ``size``."""
    out = conv_out_dim(size, kernel, stride, dilation, pad_before, pad_after, ceil_mode)
    if not ceil_mode:
        return out
    n = static_int(size)
    if n is None:
        # The last window starts at most (size + pads - dilated kernel + stride - 1), so past
        # size + pad_before only when stride + pad_after exceeds the dilated kernel.
        return out if stride + pad_after <= (kernel - 1) * dilation + 1 else None
    o = static_int(out)
    o = o - 1 if (o - 1) * stride >= n + pad_before else o
    return tir.IntImm(getattr(out, "dtype", "int64"), o) if isinstance(out, tir.IntImm) else o


def conv_transpose_out_dim(size, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int,
                           output_padding: int):
    """The output extent of a transposed convolution: ``(size - 1) * stride - pads +
    dilation * (kernel - 1) + output_padding + 1`` (an int, or a PrimExpr for a symbolic
    ``size``)."""
    size = plain_dim(size)
    c = dilation * (kernel - 1) + output_padding + 1 - pad_before - pad_after
    n = static_int(size)
    if n is not None:
        return tir.IntImm(getattr(size, "dtype", "int64"), (n - 1) * stride + c)
    return add_int(mul_dim(add_int(size, -1), stride), c)


# ----------------------------------------------------------------------------- layouts


def parse_layout(layout: str, primal: str) -> list:
    """``layout`` (``"NHWC"``, ``"NCHW16c"``, ``"HWIO"``) as ``[(axis, factor)]``: each primal
    axis (an uppercase letter of ``primal``) once, in any order, with factor None; a packed
    sub-axis (``16c``) as its lowercase letter and its factor, after its primal axis is named.
    ValueError saying what is wrong otherwise."""
    out, i = [], 0
    while i < len(layout):
        j = i
        while j < len(layout) and layout[j].isdigit():
            j += 1
        if j == len(layout):
            raise ValueError(f"layout {layout!r} ends with a number")
        axis, factor = layout[j], int(layout[i:j]) if j > i else None
        if axis.isupper():
            if factor is not None:
                raise ValueError(f"layout {layout!r}: a primal axis ({axis}) takes no factor")
        elif not axis.islower() or factor is None or factor < 1:
            raise ValueError(f"layout {layout!r}: a sub-axis ({axis}) needs a positive factor before it")
        out.append((axis, factor))
        i = j + 1
    names = [a for a, _ in out]
    if sorted(a for a in names if a.isupper()) != sorted(primal) or len(set(names)) != len(names):
        raise ValueError(f"layout {layout!r} must name each of the axes {primal} once")
    if any(a.upper() not in primal for a in names if a.islower()):
        raise ValueError(f"layout {layout!r} splits an axis that is not one of {primal}")
    return out


def packed_factors(axes: list) -> dict:
    return {a.upper(): f for a, f in axes if f is not None}


def layout_to_primal_shape(shape, layout: str, primal: str) -> list:
    """A ``layout`` shape as the ``primal`` one: each primal axis's extent, times its
    sub-axis's factor when the layout packs it (``NCHW16c`` (1, 4, 8, 8, 16) -> (1, 64, 8, 8))."""
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)
    at = {a: i for i, (a, _) in enumerate(axes)}
    out = []
    for p in primal:
        d = plain_dim(shape[at[p]])
        out.append(mul(d, factors[p]) if p in factors else d)
    return out


def primal_to_layout_shape(shape, layout: str, primal: str) -> list:
    """A ``primal`` shape in ``layout``: a packed axis's extent divided by its factor (which
    must divide a constant extent: ValueError), the sub-axis's extent the factor."""
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)
    out = []
    for a, f in axes:
        if f is not None:
            out.append(tir.IntImm("int64", f))
            continue
        d = plain_dim(shape[primal.index(a)])
        if a in factors:
            n = static_int(d)
            if n is not None and n % factors[a]:
                raise ValueError(f"layout {layout!r}: the {a} extent {n} is not a multiple of {factors[a]}")
            d = floordiv(d, factors[a])
        out.append(d)
    return out
