"""Integer arithmetic on TIR index expressions: bounds, canonical simplification, and the
ranges an expression covers when its variables sweep theirs (what schedules need to name loop
bindings the way TVM does and to infer the regions blocks touch)."""

from .analyzer import Analyzer
from .bound import NEG_INF, POS_INF, const_int_bound
from .canonical import expr_key, simplify
from .int_set import eval_range, relax_region

__all__ = ["Analyzer", "const_int_bound", "simplify", "expr_key", "eval_range", "relax_region", "NEG_INF", "POS_INF"]
