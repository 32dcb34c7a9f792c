"""Operands in other layouts (``NHWC``, ``HWIO`` kernels, packed ``NCHW16c``) for the
convolutions and pooling, which compute in the canonical order: `to_primal` brings an operand
there (``T_layout_trans``), `from_primal` writes the result back in the output layout, and
`in_layouts` wraps a kernel between the two. The shapes' side is `tvmscript.ir.op.nn_shapes`.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.op.nn_shapes import (floordiv_dim, layout_to_primal_shape, mul_dim, packed_factors, parse_layout,
                                       primal_to_layout_shape)

from ... import te
from .._util import compute


# ----------------------------------------------------------------------------- layouts


def to_primal(t: te.Tensor, layout: str, primal: str) -> te.Tensor:
    """``t`` (in ``layout``) transposed and unpacked into ``primal`` order (``T_layout_trans``);
    ``t`` itself when the layouts are the same."""
    if layout == primal:
        return t
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)

    def f(idx):
        src = []
        for a, fac in axes:
            i = idx[primal.index(a.upper())]
            if fac is not None:
                src.append(tir._binary(tir.FloorMod, i, tir.IntImm(i.dtype, fac)))
            else:
                src.append(floordiv_dim(i, factors[a]) if a in factors else i)
        return t[tuple(src)]

    return compute(layout_to_primal_shape(t.shape, layout, primal), f, name="T_layout_trans")


def from_primal(t: te.Tensor, layout: str, primal: str) -> te.Tensor:
    """``t`` (in ``primal`` order) written in ``layout`` (``T_layout_trans``); ``t`` itself when
    the layouts are the same."""
    if layout == primal:
        return t
    axes = parse_layout(layout, primal)
    factors = packed_factors(axes)
    at = {a: i for i, (a, _) in enumerate(axes)}

    def f(idx):
        src = []
        for p in primal:
            i = idx[at[p]]
            if p in factors:
                inner = idx[at[p.lower()]]
                i = mul_dim(i, factors[p]) + inner
            src.append(i)
        return t[tuple(src)]

    return compute(primal_to_layout_shape(t.shape, layout, primal), f, name="T_layout_trans")


def in_layouts(fn, data, weight, layouts: tuple, primals: tuple):
    """``fn(data, weight)`` on operands given in ``layouts`` = (data's, kernel's, output's):
    each operand brought to its ``primals`` order (data's, kernel's) first, the result written
    in the output layout after (`to_primal`, `from_primal`)."""
    data_layout, kernel_layout, out_layout = layouts
    out = fn(to_primal(data, data_layout, primals[0]), to_primal(weight, kernel_layout, primals[1]))
    return from_primal(out, out_layout, primals[0])
