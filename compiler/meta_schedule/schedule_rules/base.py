"""`ScheduleRule`: what every schedule rule is, and the target facts rules read.

A rule is TVM's ``ScheduleRule``: ``apply(sch, block)`` returns the design spaces it makes of
one block of ``sch``: the same schedule, changed in place, for most rules; several schedules
(copies) where a rule offers alternatives (multi-level tiling with and without a write cache;
a cross-thread reduction or none); ``[sch]`` untouched where it does not apply. Before the
first ``apply``, `space.generate_design_space` calls ``initialize(target)``, which is where a
rule reads what it needs of the target (TVM's ``InitializeWithTuneContext``).
"""

from __future__ import annotations

import os

from ...schedule import BlockRV, Schedule

__all__ = ["ScheduleRule", "as_target", "is_gpu", "num_cores", "fork", "cpu_scheduling"]


class ScheduleRule:
    """The interface of a schedule rule (see the module docstring)."""

    def initialize(self, target) -> None:
        """Read what the rule needs of ``target`` (a `tvmscript.target.Target`)."""

    def apply(self, sch: Schedule, block: BlockRV) -> list:
        raise NotImplementedError(f"{type(self).__name__}.apply")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def as_target(target):
    """``target`` as a `tvmscript.target.Target` (a string, a dict or a Target)."""
    from tvmscript.target import Target

    return target if isinstance(target, Target) else Target(target)


def is_gpu(target) -> bool:
    return "gpu" in as_target(target).keys


def num_cores(target) -> int:
    """The CPU cores a parallel loop may use: the target's ``-num-cores``, else this machine's
    (what TVM's ``GetTargetNumCores`` falls back to)."""
    n = as_target(target).attrs.get("num-cores")
    return int(n) if n else (os.cpu_count() or 1)


def cpu_scheduling(target):
    """The context the CPU build schedules its kernels for ``target`` in
    (`compiler.schedule_cpu.scheduling_for` the CPU it names): the default schedule's
    register tiles sized for that CPU, here as in the build."""
    from ...build_target import cpu_build_options
    from ...schedule_cpu import scheduling_for

    return scheduling_for(cpu_build_options(str(target))["target"])


def fork(sch: Schedule) -> Schedule:
    """A copy of ``sch`` drawing from a generator seeded from ``sch``'s (TVM's
    ``Copy`` + ``Seed(ForkSeed())``): two alternatives of one block sample independently."""
    new = sch.copy()
    new.seed(sch.fork_seed())
    return new
