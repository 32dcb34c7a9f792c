"""`Analyzer`: TVM's name for a simplification context that knows the loop ranges in scope."""

from __future__ import annotations

from tvmscript.ir import tir

from .bound import const_int_bound
from .canonical import Canonical
from .int_set import eval_range


class ConstIntBound:
    __slots__ = ("min_value", "max_value")

    def __init__(self, lo, hi) -> None:
        self.min_value, self.max_value = lo, hi

    def __repr__(self) -> str:
        return f"ConstIntBound[{self.min_value}, {self.max_value}]"


class Analyzer:
    """Binds variables to ranges (``bind(v, tir.Range)`` or ``(min, extent)``), then simplifies
    and proves with them in mind."""

    def __init__(self) -> None:
        self.ranges: dict = {}

    def bind(self, var: tir.Var, dom) -> None:
        if isinstance(dom, tir.Range):
            dom = (dom.min, dom.extent)
        elif isinstance(dom, tir.PrimExpr):  # a value: its own range of one
            dom = (dom, tir.IntImm(var.dtype, 1))
        self.ranges[var] = dom

    def simplify(self, e):
        return Canonical(self.ranges).simplify(e)

    def const_int_bound(self, e) -> ConstIntBound:
        return ConstIntBound(*const_int_bound(e, self.ranges))

    def can_prove(self, cond) -> bool:
        r = self.simplify(cond)
        return isinstance(r, tir.IntImm) and bool(r.value)

    def can_prove_equal(self, a, b) -> bool:
        d = self.simplify(tir.Sub(a.dtype, a, b)) if isinstance(a, tir.PrimExpr) else None
        return isinstance(d, tir.IntImm) and d.value == 0

    def eval_range(self, e, dom: dict):
        return eval_range(e, dom, self.ranges)
