"""Sampling primitives: the random choices a search space is made of (TVM's
``sample_perfect_tile``, ``sample_categorical`` and ``sample_compute_location``).

A tuner does not write one schedule but a program with holes: "split this loop into 4 factors
whose product is its extent", "unroll up to one of 0, 16, 64 or 512 steps". Each sampling
primitive draws from the schedule's random generator (``Schedule(mod, seed=...)``) and records
its *decision* in the trace, beside the instruction. Replaying the trace repeats the decisions
(`Trace.apply_to_schedule`); replaying it with one decision changed (`Trace.with_decision`) is
how the evolutionary search mutates a candidate. A ``decision=`` argument forces the choice,
which is what a replay passes.

A sampled integer is an `ExprRV`: an ``int`` (so ``sch.split(loop, factors=[v1, v2])`` works as
with plain numbers) that the trace names (``v1``), so that a replay with another decision
feeds the new value to the instructions that used it. A sampled compute location is a
`LoopRV`, or `LoopRV.root` for "leave the block where it is" (decision -1).

`enter_postproc` changes nothing: it marks where a tuner's postprocessors begin in a trace, so
that a record (the whole trace) replays to the finished function and its sampled part can be
taken apart from the steps the postprocessors added (TVM's EnterPostproc). It lives here, with
the other tuning instructions, so that every process that replays traces knows it.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .common import const_value, record_call
from .errors import ScheduleError
from .state import BlockRV, LoopRV, Schedule, primitive

__all__ = ["ExprRV", "sample_perfect_tile", "sample_categorical", "sample_compute_location", "enter_postproc",
           "ROOT_DECISION"]

ROOT_DECISION = -1      # sample_compute_location's decision for "at the root: do not move"


class ExprRV(int):
    """A sampled integer: its value, and an identity of its own that the trace names."""

    def __repr__(self) -> str:
        return f"ExprRV({int(self)})"

    def __reduce__(self):
        return (ExprRV, (int(self),))


def _factorizations(extent: int, n: int, max_innermost: int) -> list:
    """Every way of writing ``extent`` as a product of ``n`` ordered factors whose last is at
    most ``max_innermost``, in lexicographic order (few: 1024 into 4 has 286)."""
    out: list = []
    small = [d for d in range(1, int(extent ** 0.5) + 1) if extent % d == 0]
    divisors = sorted(set(small + [extent // d for d in small]))

    def rec(rest: int, k: int, prefix: list) -> None:
        if k == 1:
            if rest <= max_innermost:
                out.append(prefix + [rest])
            return
        for f in divisors:
            if f > rest:
                break
            if rest % f == 0:
                rec(rest // f, k - 1, prefix + [f])

    rec(extent, n, [])
    return out


@primitive(record=False)
def sample_perfect_tile(sch: Schedule, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                        decision: Optional[Sequence[int]] = None) -> list:
    """``n`` factors whose product is ``loop``'s (constant) extent, the innermost at most
    ``max_innermost_factor`` (unless ``n`` is 1: the extent itself): drawn uniformly among all
    such tilings, or ``decision``."""
    prim = "sample_perfect_tile"
    _, lp = sch.resolve_loop(loop, prim)
    extent = const_value(lp.extent)
    if extent is None:
        raise sch.error(prim, f"loop '{lp.loop_var.name}'", "its extent is not a constant")
    if n < 1:
        raise sch.error(prim, f"loop '{lp.loop_var.name}'", f"n must be at least 1, not {n}")
    if decision is None:
        choices = _factorizations(extent, n, max(1, max_innermost_factor) if n > 1 else extent)
        decision = choices[sch.rng.randrange(len(choices))]
    decision = [int(f) for f in decision]
    product = 1
    for f in decision:
        product *= f
    if len(decision) != n or product != extent or min(decision) < 1:
        raise sch.error(prim, f"loop '{lp.loop_var.name}'",
                        f"decision {decision} is not {n} positive factors of the extent {extent}")
    out = [ExprRV(f) for f in decision]
    record_call(sch, prim, [("loop", loop), ("n", n), ("max_innermost_factor", max_innermost_factor),
                            ("decision", decision)], out)
    return out


@primitive(record=False)
def sample_categorical(sch: Schedule, candidates: Sequence[int], probs: Sequence[float],
                       decision: Optional[int] = None) -> ExprRV:
    """One of ``candidates``, drawn with probabilities ``probs``, or ``candidates[decision]``."""
    prim = "sample_categorical"
    candidates, probs = [int(c) for c in candidates], [float(p) for p in probs]
    if not candidates or len(candidates) != len(probs) or min(probs) < 0 or sum(probs) <= 0:
        raise ScheduleError(prim, "candidates", f"{len(candidates)} candidates with probabilities {probs}")
    if decision is None:
        decision = sch.rng.choices(range(len(candidates)), weights=probs)[0]
    decision = int(decision)
    if not 0 <= decision < len(candidates):
        raise ScheduleError(prim, "decision", f"{decision} is not an index of the {len(candidates)} candidates")
    out = ExprRV(candidates[decision])
    record_call(sch, prim, [("candidates", candidates), ("probs", probs), ("decision", decision)], out)
    return out


@primitive(record=False)
def sample_compute_location(sch: Schedule, block: BlockRV, decision: Optional[int] = None) -> LoopRV:
    """A loop ``block`` can be computed at (`compute_location_candidates`), drawn uniformly
    with "where it is" (`LoopRV.root`, decision -1) among them, or the ``decision``-th."""
    prim = "sample_compute_location"
    candidates = compute_location_candidates(sch, block)
    if decision is None:
        decision = sch.rng.randrange(len(candidates) + 1) - 1
    decision = int(decision)
    if not ROOT_DECISION <= decision < len(candidates):
        raise sch.error(prim, f"block '{block.name}'",
                        f"decision {decision} is not -1 or an index of its {len(candidates)} candidate loops")
    out = LoopRV.root(block.func_name) if decision == ROOT_DECISION else candidates[decision]
    record_call(sch, prim, [("block", block), ("decision", decision)], out)
    return out


def compute_location_candidates(sch: Schedule, block: BlockRV) -> list:
    """The loops of ``block``'s consumers that ``compute_at`` accepts for it, outermost first:
    each is tried on a copy of the schedule (what compute_at checks is the definition)."""
    consumers = sch.get_consumers(block)
    if not consumers:
        return []
    out = []
    for loop in sch.get_loops(consumers[0]):
        trial = sch.copy()
        try:
            trial.compute_at(trial.block_rv(block.func_name, block.name), trial.loop_rv(loop.func_name, loop.var),
                             preserve_unit_loops=True)
        except ScheduleError:
            continue
        out.append(loop)
    return out


@primitive
def enter_postproc(sch: Schedule) -> None:
    """Mark, in the trace, where the postprocessors' steps begin (a no-op; see the module
    docstring)."""


def is_sampling(kind: str) -> bool:
    """Whether trace instructions of ``kind`` carry a decision."""
    return kind in ("sample_perfect_tile", "sample_categorical", "sample_compute_location")
