"""`GPUScheduleRule`: a rule that applies only to GPU targets."""

from __future__ import annotations

from ..base import ScheduleRule

# The multiprocessors of an H100 or H200, the GPUs the matmul rules size their grids for.
SMS = 132
# Thread blocks enough to give each of them one: a product with fewer tiles of a rule's size
# leaves SMs idle, and is better served by a rule with smaller tiles (or K split).
FILL_BLOCKS = 128


class GPUScheduleRule(ScheduleRule):
    """A schedule rule for GPU targets (those whose keys include ``"gpu"``); on another target
    `apply` returns None."""

    def is_target_available(self, target) -> bool:
        return super().is_target_available(target) and "gpu" in target.keys
