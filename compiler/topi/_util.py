"""Helpers the TOPI definitions share."""

from __future__ import annotations

from tvmscript.ir import tir

from .. import te


def axis_names(n: int, prefix: str = "ax") -> list:
    """Loop names of a C++-style TOPI compute: ``ax0, ax1, ...``."""
    return [f"{prefix}{i}" for i in range(n)]


def compute(shape, fcompute, name: str, prefix: str = "ax", attrs=None):
    """``te.compute`` whose ``fcompute`` takes the indices as one list, loops named ``ax0...``
    (as TVM's C++ operators name theirs) or ``i0...`` (``prefix="i"``, its Python operators');
    ``attrs`` become the block's annotations (``T.block_attr``)."""
    shape = list(shape)
    return te.compute(shape, lambda *idx: fcompute(list(idx)), name=name, attrs=attrs,
                      varargs_names=axis_names(len(shape), prefix))


def float_const(value: float, dtype: str) -> tir.FloatImm:
    return tir.FloatImm(dtype, float(value))


def const_like(value, dtype: str) -> tir.PrimExpr:
    return tir.const(value, dtype) if dtype != "bool" else tir.IntImm("bool", int(bool(value)))


def same_dim(a, b) -> bool:
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    return a is b
