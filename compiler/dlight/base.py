"""DLight's framework: `ScheduleRule`, the `ApplyDefaultSchedule` pass, and the schedule
helpers the rules share.

Why rules: a GPU needs every PrimFunc scheduled (its work spread over blocks and threads)
before it can run there, and most functions a model lowers to fall into a few shapes —
elementwise, row reductions, matrix products, matrix-vector products, normalizations. A rule
recognizes one shape and builds a schedule for it from the public `Schedule` primitives, or
says it does not apply (None). `ApplyDefaultSchedule(*rules)` gives each function to the rules
in order and keeps the first schedule; a function no rule takes stays as it was. `Fallback`
takes anything, so it goes last.

The limits a rule tiles for (threads per block, shared memory) come from the target: the
function's ``"target"`` attribute, else the current one (``with Target("cuda"):``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Optional, Union

from tvmscript.ir import tir
from tvmscript.ir import IRModule

from ..schedule import Schedule, ScheduleError
from ..schedule.common import with_unique_block_names
from ..schedule_choices import applying
from . import analysis
from .analysis import BlockInfo, IterInfo, SBlockInfo, has_thread_binding, normalize_prim_func

__all__ = ["ScheduleRule", "ApplyDefaultSchedule", "try_inline", "try_inline_contiguous_spatial", "split_epilogue",
           "get_extent", "max_factor", "max_threads_per_block",
           "suggest_threads_per_block", "analysis", "BlockInfo", "SBlockInfo", "IterInfo", "normalize_prim_func",
           "IS_SCHEDULED"]

_log = logging.getLogger(__name__)

# The function attribute a scheduled function carries (TVM 0.27 prints it "tirx.is_scheduled").
IS_SCHEDULED = "tir.is_scheduled"


class ScheduleRule:
    """A way to schedule one kind of PrimFunc: ``apply(func, target, tunable)`` returns a
    `Schedule` (or a list of them when ``tunable``), or None when the rule does not apply."""

    def apply(self, func: tir.PrimFunc, target, tunable: bool) -> Union[None, Schedule, list]:
        raise NotImplementedError

    def is_target_available(self, target) -> bool:
        return True

    def new_schedule(self, func, target) -> Optional[Schedule]:
        """A fresh `Schedule` of ``func`` for `apply` to build on, or None when the rule cannot
        apply (not a PrimFunc, or a target the rule does not serve)."""
        if not isinstance(func, tir.PrimFunc) or not self.is_target_available(target):
            return None
        return Schedule(func)

    @staticmethod
    def from_callable(name: str) -> Callable:
        """``@ScheduleRule.from_callable("MyRule")`` on ``f(func, target, tunable)`` makes it a
        rule."""

        def decorator(f) -> "ScheduleRule":
            class _Rule(ScheduleRule):
                def apply(self, func, target, tunable):
                    return f(func, target, tunable)

            _Rule.__name__ = name
            return _Rule()

        return decorator

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _is_scheduled(func) -> bool:
    v = func.attrs.get(IS_SCHEDULED, func.attrs.get("tirx.is_scheduled"))
    return bool(getattr(v, "value", v)) if v is not None else False


def _target_of(func: tir.PrimFunc):
    from tvmscript.target import Target

    t = func.attrs.get("target")
    if t is not None:
        return t if isinstance(t, Target) else Target(t)
    current = Target.current()
    if current is None:
        raise ValueError("ApplyDefaultSchedule needs a target: call it inside `with tvms.target.Target(\"cuda\"):` "
                         "(or give the function a \"target\" attribute)")
    return current


class ApplyDefaultSchedule:
    """``IRModule -> IRModule``: schedule each PrimFunc with the first of ``rules`` that
    applies. Functions already scheduled (the ``tir.is_scheduled`` attribute, or any loop bound
    to a thread) are left alone; a scheduled function gets ``tir.is_scheduled``. The input
    module is not changed."""

    def __init__(self, *rules: ScheduleRule) -> None:
        self.rules = list(rules)

    def __call__(self, mod: IRModule) -> IRModule:
        if isinstance(mod, tir.PrimFunc):
            mod = IRModule({"main": mod})
        out = mod.copy()
        for gv, func in list(mod.functions.items()):
            if not isinstance(func, tir.PrimFunc) or _is_scheduled(func) or has_thread_binding(func):
                continue
            target = _target_of(func)
            body = with_unique_block_names(func.body)   # the rules find blocks by name
            if body is not func.body:
                func = dataclasses.replace(func, body=body)
            with applying(func):   # a tuner's picks for DLight's choice points (`schedule_choices`)
                space = apply_rules(func, target, self.rules, tunable=False)
            if space is None:
                continue
            if len(space) != 1:
                raise ValueError(f"ApplyDefaultSchedule: a rule returned {len(space)} schedules for "
                                 f"'{gv.name_hint}'; expected one")
            new = space[0].mod["main"]
            attrs = dict(new.attrs)
            attrs[IS_SCHEDULED] = True
            out.update_func(gv, dataclasses.replace(new, attrs=attrs, span=func.span))
        return out

    def __repr__(self) -> str:
        return f"ApplyDefaultSchedule({', '.join(map(repr, self.rules))})"


def apply_rules(func: tir.PrimFunc, target, rules: list, tunable: bool) -> Optional[list]:
    """The schedules of the first rule that applies. A rule whose schedule fails half way (a
    primitive refusing a step, a `ScheduleError`) counts as not applying — TVM would stop with
    the error; here the next rule (in the end Fallback) still gets the function."""
    for rule in rules:
        try:
            space = rule.apply(func, target, tunable)
        except ScheduleError as err:
            _log.debug("DLight rule %r failed on a function: %s", rule, err)
            continue
        if space is None:
            continue
        if isinstance(space, Schedule):
            space = [space]
        return space
    return None


# ----------------------------------------------------------------------------- common schedules


def try_inline(sch: Schedule, blocks: list) -> list:
    """Inline as many of ``blocks`` as possible (into their consumers, else their producer);
    the ones left."""

    def trial(fn) -> Optional[int]:
        if fn is None:
            return None
        for n, b in enumerate(blocks):
            try:
                fn(b.block_rv)
            except ScheduleError:
                continue
            return n
        return None

    while True:
        n = trial(getattr(sch, "compute_inline", None))
        if n is None:
            n = trial(getattr(sch, "reverse_compute_inline", None))
        if n is None:
            break
        blocks.pop(n)
    return blocks


def try_inline_contiguous_spatial(sch: Schedule, block_infos: Optional[list]) -> Optional[list]:
    """Inline the runs of consecutive injective blocks (`try_inline` on each run)."""
    if block_infos is None:
        return None
    results, spatial = [], []
    for b in block_infos:
        if b.is_injective():
            spatial.append(b)
        elif spatial:
            results.extend(try_inline(sch, spatial))
            results.append(b)
            spatial = []
        else:
            results.append(b)
    if spatial:
        results.extend(try_inline(sch, spatial))
    return results


def split_epilogue(block_infos: Optional[list]) -> Optional[tuple]:
    """``(main, epilogue)`` of blocks (after inlining) that are one main block, optionally
    followed by one injective epilogue block (None when there is none); None for any other
    list."""
    if block_infos is None:
        return None
    if len(block_infos) == 1:
        return block_infos[0], None
    if len(block_infos) == 2 and block_infos[1].is_injective():
        return block_infos[0], block_infos[1]
    return None


# ----------------------------------------------------------------------------- small utilities


def max_factor(n: int, factors) -> int:
    """The largest of ``factors`` that divides ``n`` (1 when none does)."""
    for f in sorted(factors, reverse=True):
        if n % f == 0:
            return f
    return 1


def get_extent(sch: Schedule, loop_rv):
    loop = sch.get(loop_rv)
    return loop.extent.value if isinstance(loop.extent, tir.IntImm) else loop.extent


def max_threads_per_block(target) -> int:
    return target.max_threads_per_block  # every GPU kind has a default (tvmscript/target.py)


def suggest_threads_per_block(target, loops: list, max_threads_for_dynamic_loop: int = 32) -> list:
    """Threads for each loop: powers of two no larger than the extent, sharing the block's
    budget (1024 on CUDA) outermost first; symbolic extents get up to
    ``max_threads_for_dynamic_loop``, the first of them the rest of the budget."""
    threads = {"cuda": 1024, "rocm": 256, "metal": 256, "opencl": 256}.get(target.kind.name, 64)
    results: list = []
    dynamic = []
    for n, loop in enumerate(loops):
        ext = loop.extent
        if isinstance(ext, tir.IntImm):
            e = 1
            while e <= ext.value and e <= threads:
                e *= 2
            e //= 2
            threads //= e
            results.append(e)
        else:
            results.append(None)
            dynamic.append(n)
    for n in dynamic:
        e = 1
        while e <= max_threads_for_dynamic_loop and e <= threads:
            e *= 2
        e //= 2
        threads //= e
        results[n] = e
    if dynamic:
        results[dynamic[0]] *= threads
    return results
