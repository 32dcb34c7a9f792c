"""`DefaultScheduleChoices`: tvms's default schedules as a design space of their own, their
heuristic picks sampled: the CPU's default schedule (no TVM counterpart: TVM's CPU default is no
schedule at all), and on a GPU DLight's matmul rules, whose tensor-core schedule (mma.sync,
ldmatrix, a cp.async software pipeline) is the tensor-core variant of multi-level tiling: its
block tiling, pipeline step and pipeline stages become sampled decisions.

Why: the default schedule (`compiler.schedule_cpu`) is the candidate to beat, and it is hand
made: register tiles, packed panels, prefetches, which the rules' generic tilings do not reach.
Its heuristics pick a register tile's shape and the loop its rows run along
(`compiler.schedule_choices`); the best pick differs by shape and machine, so the rule
makes those picks ``sample_categorical`` decisions (option 0: the heuristic's), and the search
mutates them like any tile size. The schedule rules after it leave the function alone
(`space.generate_design_space` skips a function carrying choices).

The decisions reach the function through the traced primitive ``choose_cpu_schedule`` (or
``choose_gpu_schedule``, `compiler.schedule_choices`), which records them as the function's `CHOICES_ATTR`: a build (the tuner's, or ``tvms.compile``'s
with the database) applies the default schedule with them, in its own context.
"""

from __future__ import annotations

from ...schedule import BlockRV, Schedule
from ...dlight.base import IS_SCHEDULED
from ...schedule_choices import CHOICES_ATTR, KINDS, choice_points
from ...schedule_cpu.driver import NO_DEFAULT_SCHEDULE, SCHEDULED_ATTR
from .analysis import is_root_block
from .base import ScheduleRule, as_target, cpu_scheduling, fork, is_gpu

__all__ = ["DefaultScheduleChoices"]

_SCHEDULED_ATTRS = (SCHEDULED_ATTR, NO_DEFAULT_SCHEDULE, IS_SCHEDULED)   # scheduled already, by whoever


class DefaultScheduleChoices(ScheduleRule):
    """At a function's root block: ``[sch, the same with the default schedule's choices
    sampled]`` when the default schedule (the CPU's, or DLight's on a GPU) meets a choice point
    with more than one option."""

    def __init__(self) -> None:
        self.target = None
        self.gpu = False

    def initialize(self, target) -> None:
        self.target, self.gpu = as_target(target), is_gpu(target)

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        if self.target is None or not is_root_block(sch, block):
            return [sch]
        func = sch.func(block.func_name)
        if any((func.attrs or {}).get(k) for k in (CHOICES_ATTR,) + _SCHEDULED_ATTRS):
            return [sch]
        if self.gpu:
            points = choice_points(func, self.target)
        else:
            with cpu_scheduling(self.target):
                points = choice_points(func)
        if not any(n > 1 for counts in points.values() for n in counts):
            return [sch]
        alt = fork(sch)
        picks = [[kind, [alt.sample_categorical(list(range(n)), [1.0 / n] * n) for n in points[kind]]]
                 for kind in KINDS if points[kind]]
        record = alt.choose_gpu_schedule if self.gpu else alt.choose_cpu_schedule
        record(picks, func_name=block.func_name)
        return [sch, alt]
