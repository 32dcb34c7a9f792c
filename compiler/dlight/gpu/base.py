"""`GPUScheduleRule`: a rule that applies only to GPU targets."""

from __future__ import annotations

from ..base import ScheduleRule


class GPUScheduleRule(ScheduleRule):
    """A schedule rule for GPU targets (those whose keys include ``"gpu"``); on another target
    `apply` returns None."""

    def is_target_available(self, target) -> bool:
        return super().is_target_available(target) and "gpu" in target.keys
