"""The search space of a function: its design spaces, and candidates sampled from them.

`generate_design_space` is TVM's PostOrderApply: the schedule rules are applied in order, each
to every block of the function, the blocks taken from the last to the first in post-order
(the root first, then consumers before their producers), so that a rule has seen what uses a
block before it decides about the block. A rule that offers alternatives returns several
schedules, and each is carried on through the remaining blocks and rules: the design spaces
multiply. Each design space is a `Schedule` whose trace holds the steps, the tile sizes,
unroll limits and compute locations among them as sampling instructions.

`sample_candidate` draws a candidate from a design space: the space's trace replayed on a
fresh schedule of the function with every decision drawn again
(`Trace.apply_to_schedule(resample=True)`) from the candidate's seed. Some combinations of
decisions make a later step illegal (a compute location a resampled tiling no longer offers);
such a draw is retried with another seed derived from the first, and the failures are counted
(`SampleStats`), since a space that mostly fails is a space worth fixing.

A design space or candidate carries the module it was made from as ``sch.workload`` (the
module a trace replays on).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from tvmscript.ir import IRModule, tir

from ..schedule import Schedule, ScheduleError
from ..schedule.trace import TraceError
from ..schedule_choices import CHOICES_ATTR
from .schedule_rules import default_rules
from .schedule_rules.analysis import SCHEDULE_RULE, has_block, post_order_blocks, prim_func_names
from .schedule_rules.base import as_target

__all__ = ["generate_design_space", "sample_candidate", "SampleStats", "SamplingError", "as_module"]


def as_module(func_or_mod) -> IRModule:
    """A PrimFunc as ``IRModule({"main": func})``; a module as it is."""
    if isinstance(func_or_mod, tir.PrimFunc):
        return IRModule({"main": func_or_mod})
    if isinstance(func_or_mod, IRModule):
        return func_or_mod
    raise TypeError(f"expected a PrimFunc or an IRModule, not {type(func_or_mod).__name__}")


def generate_design_space(func_or_mod, target, rules=None, seed: int = 0) -> list:
    """The design spaces of ``func_or_mod`` for ``target`` under ``rules`` (default: TVM's
    for the target, `schedule_rules.default_rules`), each a `Schedule` with its trace. Blocks
    annotated ``schedule_rule`` (a hand-written schedule's) are left alone."""
    mod = as_module(func_or_mod)
    target = as_target(target)
    rules = default_rules(target) if rules is None else list(rules)
    for rule in rules:
        rule.initialize(target)
    # (A function carrying the default schedule's picks, `DefaultScheduleChoices`, is the
    # default schedule's to schedule: no other rule touches it.)
    sch = Schedule(mod, seed=seed)
    blocks = [sch.get_block(name, func_name) for func_name in prim_func_names(sch)
              for name in post_order_blocks(sch, func_name)]
    result = [sch]
    for rule in rules:
        stack = [(s, list(blocks)) for s in result]
        result = []
        while stack:
            current, todo = stack.pop()
            if not todo:
                result.append(current)
                continue
            block = todo.pop()
            if not has_block(current, block) or SCHEDULE_RULE in current.get(block).annotations \
                    or CHOICES_ATTR in (current.func(block.func_name).attrs or {}):
                stack.append((current, todo))
                continue
            for out in rule.apply(current, block):
                stack.append((out, list(todo)))
    for space in result:
        space.workload = mod
    return result


@dataclass
class SampleStats:
    """What `sample_candidate` drew: ``tries`` replays, ``failures`` of them illegal, and the
    last few errors (the primitive's message), for a report."""

    tries: int = 0
    failures: int = 0
    errors: list = field(default_factory=list)

    def record_failure(self, err: Exception) -> None:
        self.failures += 1
        self.errors = (self.errors + [str(err)])[-8:]


class SamplingError(ValueError):
    """Every draw from a design space was illegal."""


def sample_candidate(space: Schedule, seed: int, *, mod: Optional[IRModule] = None, retries: int = 8,
                     stats: Optional[SampleStats] = None) -> Schedule:
    """A candidate of ``space``: its trace replayed with every decision drawn again on
    ``Schedule(mod, seed=seed)`` (``mod``: the space's ``workload``). An illegal draw is
    retried up to ``retries`` times with seeds derived from ``seed`` (deterministic: the same
    seed gives the same candidate), each failure counted in ``stats``; `SamplingError` when
    every try failed."""
    mod = getattr(space, "workload", None) if mod is None else as_module(mod)
    if mod is None:
        raise ValueError("sample_candidate: the space has no workload (made by generate_design_space?): pass mod=")
    stats = SampleStats() if stats is None else stats
    derive = random.Random(seed)
    current = seed
    for _ in range(max(1, retries)):
        stats.tries += 1
        candidate = Schedule(mod, seed=current)
        try:
            space.trace.apply_to_schedule(candidate, resample=True)
        except (ScheduleError, TraceError) as err:
            stats.record_failure(err)
            current = derive.randrange(1 << 31)
            continue
        candidate.workload = mod
        return candidate
    raise SamplingError(f"{stats.failures} draws from the design space were illegal; the last: "
                        f"{stats.errors[-1] if stats.errors else '?'}")
