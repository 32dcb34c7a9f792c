"""Unary elementwise operators (TVM's ``topi/elemwise.h`` and ``topi.nn.relu``)."""

from __future__ import annotations

from tvmscript import tir

from .. import te

__all__ = ["relu"]


def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)``: TVM's Python ``topi.nn.relu`` (block ``compute``, loops ``i0, i1...``)."""
    return te.compute(x.shape, lambda *i: te.max(x(*i), tir.const(0, x.dtype)))
