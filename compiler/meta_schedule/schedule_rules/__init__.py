"""Schedule rules: what a design space is made of, one small class per rule, with TVM's names
and TVM's default lists (`default_rules`).

Each rule's ``apply(sch, block)`` returns the design spaces it makes of one block
(`base.ScheduleRule`); `space.generate_design_space` applies the rules in order, each to every
block in post-order, the spaces multiplying where a rule offers alternatives.
"""

from __future__ import annotations

from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .base import ScheduleRule, as_target, is_gpu
from .cross_thread_reduction import CrossThreadReduction
from .default_schedule_choices import DefaultScheduleChoices
from .multi_level_tiling import MultiLevelTiling, ReuseConfig
from .parallel_vectorize_unroll import ParallelVectorizeUnroll
from .random_compute_location import RandomComputeLocation

__all__ = ["ScheduleRule", "AutoInline", "MultiLevelTiling", "ReuseConfig", "ParallelVectorizeUnroll",
           "RandomComputeLocation", "CrossThreadReduction", "AutoBind", "DefaultScheduleChoices", "default_rules"]


def default_rules(target) -> list:
    """TVM's default rules for ``target`` ("llvm" or a CPU target, "cuda" or a GPU target), in
    TVM's order (``ScheduleRule.DefaultLLVM`` / ``DefaultCUDA``, without the rules tvms has no
    counterpart for: custom rules, constant-scalar inlining, rfactor on the CPU).

    The order matters: on the CPU elementwise stages are inlined before tiling (so the tiled
    block is the whole computation); on a GPU tiling comes first, so that its caches exist when
    the elementwise stages are inlined into them (a padding into the shared-memory copy)."""
    if is_gpu(target):
        return [
            DefaultScheduleChoices(),   # tvms's own: DLight's matmul schedules (tensor cores), their picks sampled
            MultiLevelTiling(structure="SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                             max_innermost_factor=64, vector_load_lens=[1, 2, 3, 4, 8, 16],
                             reuse_read={"req": "must", "levels": [4], "scope": "shared"},
                             reuse_write={"req": "must", "levels": [3], "scope": "local"}),
            AutoInline(into_producer=True, into_consumer=True, inline_const_tensor=True,
                       disallow_if_then_else=False, require_injective=False, require_ordered=False),
            CrossThreadReduction(thread_extents=[4, 8, 16, 32, 64, 128, 256, 512]),
            ParallelVectorizeUnroll(max_jobs_per_core=-1, max_vectorize_extent=-1,
                                    unroll_max_steps=[0, 16, 64, 512, 1024], unroll_explicit=True),
            AutoBind(max_threadblocks=256, thread_extents=[32, 64, 128, 256, 512, 1024]),
        ]
    as_target(target)  # an unknown target is an error here, not at the first apply
    return [
        DefaultScheduleChoices(),   # tvms's own: the default schedule, its picks sampled (first: on the whole function)
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True, disallow_if_then_else=True,
                   require_injective=True, require_ordered=True, disallow_op=["tir.exp"]),
        MultiLevelTiling(structure="SSRSRS", tile_binds=None, max_innermost_factor=64, vector_load_lens=None,
                         reuse_read=None, reuse_write={"req": "may", "levels": [1, 2], "scope": "global"}),
        ParallelVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64, unroll_max_steps=[0, 16, 64, 512],
                                unroll_explicit=True),
        RandomComputeLocation(),
    ]
