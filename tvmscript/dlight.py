"""``tvms.dlight`` (also ``tvms.s_tir.dlight``): TVM's DLight, the default GPU schedules.

    import tvmscript as tvms
    from tvmscript import dlight as dl

    with tvms.target.Target("cuda"):
        mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                      dl.gpu.GeneralReduction(), dl.gpu.Fallback())(mod)

The implementation is in compiler/dlight/ (rules built from the public `Schedule`
primitives); this module only re-exports it, so ``import tvmscript`` does not load it.
"""

from tvmscript.compiler.dlight import (ApplyDefaultSchedule, BlockInfo, IterInfo, SBlockInfo, ScheduleRule,  # noqa: F401
                                       analysis, gpu, normalize_prim_func, try_inline,
                                       try_inline_contiguous_spatial)

__all__ = ["ApplyDefaultSchedule", "ScheduleRule", "gpu", "analysis", "BlockInfo", "SBlockInfo", "IterInfo",
           "normalize_prim_func", "try_inline", "try_inline_contiguous_spatial"]
