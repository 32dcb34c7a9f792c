"""Integer arithmetic on TIR index expressions: bounds, canonical simplification, and the
ranges an expression covers when its variables sweep theirs (what schedules need to name loop
bindings the way TVM does and to infer the regions blocks touch).

It belongs to the IR layer (TVM's ``tvm.arith``): it reasons about TIR expressions only, and
the IR's own checks need it too (whether a ``call_tir``'s shapes contradict the PrimFunc it
calls), below the parser and the compiler, which use it as well."""

from .analyzer import Analyzer
from .bound import BITWISE_OPS, NEG_INF, POS_INF, const_int_bound
from .canonical import expr_key, simplify
from .int_set import eval_range, relax_region

__all__ = ["Analyzer", "const_int_bound", "simplify", "expr_key", "eval_range", "relax_region", "NEG_INF", "POS_INF",
           "BITWISE_OPS"]
