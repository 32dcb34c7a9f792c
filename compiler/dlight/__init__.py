"""DLight: default GPU schedules without tuning (TVM's ``s_tir.dlight``).

    with Target("cuda"):
        mod = ApplyDefaultSchedule(gpu.Matmul(), gpu.GEMV(), gpu.Reduction(),
                                   gpu.GeneralReduction(), gpu.Fallback())(mod)

`base` holds the framework (`ScheduleRule`, `ApplyDefaultSchedule`) and the helpers rules
share, `analysis` what rules know about blocks, `gpu` the rules. Every rule is built only from
the public `Schedule` primitives.
"""

from . import analysis, gpu
from .base import ApplyDefaultSchedule, ScheduleRule, try_inline, try_inline_contiguous_spatial
from .analysis import BlockInfo, IterInfo, SBlockInfo, normalize_prim_func

__all__ = ["ApplyDefaultSchedule", "ScheduleRule", "gpu", "analysis", "BlockInfo", "SBlockInfo", "IterInfo",
           "normalize_prim_func", "try_inline", "try_inline_contiguous_spatial"]
