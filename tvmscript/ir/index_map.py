"""`IndexMap`, TVM's ``tir.IndexMap``: a function from index variables to index expressions.

It is an IR value of its own because the layers above hold one without computing with it: the
parser reads ``T.index_map(lambda i: (i // 4, i % 4))`` (the attribute of
``R.layout_transform``), the op declarations keep it as that attribute, and the schedules take
it (``transform_layout``, ``transform_block_layout``). What is computed from a map, its output
shape and its inverse, is index arithmetic: `tvmscript.ir.arith.index_map`.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional, Sequence

from . import tir

__all__ = ["IndexMap"]


class IndexMap:
    """``initial_indices`` (Vars) -> ``final_indices`` (expressions of them)."""

    def __init__(self, initial_indices: Sequence[tir.Var], final_indices: Sequence[tir.PrimExpr]) -> None:
        self.initial_indices = list(initial_indices)
        self.final_indices = list(final_indices)

    @staticmethod
    def from_func(fn: Callable, ndim: Optional[int] = None, index_dtype: str = "int64",
                  names: Optional[Sequence[str]] = None) -> "IndexMap":
        """The map ``fn`` computes; its parameters name the input Vars (``i0, i1...`` for
        ``*args``, which needs ``ndim``)."""
        if names is None:
            params = list(inspect.signature(fn).parameters.values())
            if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
                if ndim is None:
                    raise ValueError("IndexMap.from_func: a function taking *args needs ndim")
                names = [f"i{n}" for n in range(ndim)]
            else:
                names = [p.name for p in params]
        args = [tir.Var(index_dtype, n) for n in names]
        out = fn(*args)
        if isinstance(out, (tir.PrimExpr, int)):
            out = [out]
        final = [tir.as_expr(x, index_dtype) if not isinstance(x, tir.PrimExpr) else x for x in out]
        return IndexMap(args, final)

    def __repr__(self) -> str:
        return f"IndexMap({[v.name for v in self.initial_indices]} -> {len(self.final_indices)} indices)"
