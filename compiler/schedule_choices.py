"""The default schedules' choices, made by a tuner instead of their heuristics.

Why: the default schedules pick by heuristics that are right on average; for one shape on one
machine another pick is often faster. On the CPU (`compiler.schedule_cpu`) they pick a register
tile's shape and the loop its rows run along (`register_tile._pick_tile_shape`,
`_pick_row_loop`): resnet18's first 3x3 convolution ran 0.80 ms with a tile of 2 vectors x 14
rows against 0.90 ms with the 4 x 4 the heuristic picks. On a GPU DLight's tensor-core matmul
(`dlight.gpu.MatmulTensorCore`) picks a thread block's tiling, the K of a pipeline step and the
pipeline's stages, and its CUDA-core one (`MatmulSIMT`) a block's columns and stages: the
figures of benchmarks/cuda_tilings.py differ by product and GPU. The tuner
(`compiler.meta_schedule`, rule `DefaultScheduleChoices`) samples these picks and measures
them, and its best ones are applied by every later build of the function.

The algorithm of a 3x3 convolution on the CPU is a choice point too (`ALGORITHM`: direct, or
Winograd's, `schedule_cpu.winograd`), whose first option, the direct convolution, the default
schedule always takes: the others round differently, so only a tuner, which checks each
candidate's output, picks them.

How: each place where a rule picks is a *choice point* of a kind (`KINDS`: `CPU_KINDS`,
`GPU_KINDS`), ``choose(kind, options)``, whose ``options[0]`` is the heuristic's pick. A
function whose attribute `CHOICES_ATTR` holds ``{kind: [index, ...]}`` is scheduled with the
n-th point of each kind met (the rules meet them in a fixed order) taking
``options[index[n]]``; an index out of range (another target offers fewer options) keeps the
heuristic's. `choice_points` runs the default schedule (the CPU's, or DLight's for a GPU
target) to list the points and their options. The choices live on the function, not in the
schedule, so that a build applies them in its own context (its target's registers and shared
memory, the weights it packs at compile time), as it applies the heuristics; a tuner's trace
records them with the schedule primitive ``choose_cpu_schedule`` or ``choose_gpu_schedule``
(methods of `Schedule` once this module is imported)."""

from __future__ import annotations

import dataclasses
import itertools
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

from tvmscript.ir import tir

from .schedule import Schedule
from .schedule.state import primitive

__all__ = ["CHOICES_ATTR", "TILE_SHAPE", "ROWS", "ALGORITHM", "BLOCK_TILING", "STEP_K", "PIPELINE_STAGES", "INSTRUCTIONS", "KINDS",
           "CPU_KINDS", "GPU_KINDS", "choose", "choice_points", "choices_of", "with_choices", "applying",
           "choose_cpu_schedule", "choose_gpu_schedule", "check_choices"]

CHOICES_ATTR = "tvms.schedule_choices"
# The CPU's default schedule (`compiler.schedule_cpu`):
TILE_SHAPE = "tile_shape"  # a register tile's (vectors per row, rows)
ROWS = "rows"  # the loop a register tile's rows run along
ALGORITHM = "algorithm"  # a 3x3 convolution's algorithm: direct, or Winograd (`winograd`)
CPU_KINDS = (TILE_SHAPE, ROWS, ALGORITHM)
# DLight's matmul rules on a GPU (`compiler.dlight.gpu`):
BLOCK_TILING = "block_tiling"  # a thread block's share of C (MatmulTensorCore's tiling, MatmulSIMT's columns)
STEP_K = "step_k"  # K per software-pipeline step (MatmulTensorCore)
PIPELINE_STAGES = "pipeline_stages"  # steps whose tiles are in shared memory at once
INSTRUCTIONS = "instructions"  # a tensor-core product's instructions on sm_90: mma.sync or wgmma
GPU_KINDS = (BLOCK_TILING, STEP_K, PIPELINE_STAGES, INSTRUCTIONS)
KINDS = CPU_KINDS + GPU_KINDS
MAX_OPTIONS = 12  # options kept per point, the heuristic's best first


class _Choices:
    """The choices of one scheduling: the decisions by kind (None: the heuristic's), and
    whether to record each point's option count."""

    def __init__(self, decisions: Optional[dict], record: bool = False) -> None:
        self.decisions = decisions
        self.record = record or decisions is None
        self.met = {kind: 0 for kind in KINDS}
        self.options: dict = {kind: [] for kind in KINDS}   # recorded: per point, its option count


_active: ContextVar[Optional[_Choices]] = ContextVar("tvms_schedule_choices", default=None)


def choose(kind: str, options: list):
    """The option taken at this choice point: ``options[0]`` (the heuristic's pick) unless a
    function's choices say otherwise (see the module docstring)."""
    options = options[:MAX_OPTIONS]
    active = _active.get()
    if active is None:
        return options[0]
    n = active.met[kind]
    active.met[kind] = n + 1
    if active.record:
        active.options[kind].append(len(options))
    if active.decisions is None:
        return options[0]
    picks = active.decisions.get(kind, ())
    index = picks[n] if n < len(picks) else 0
    return options[index] if 0 <= index < len(options) else options[0]


@contextmanager
def _choosing(decisions: Optional[dict], record: bool = False) -> Iterator[_Choices]:
    token = _active.set(_Choices(decisions, record))
    try:
        yield _active.get()
    finally:
        _active.reset(token)


def choices_of(func: tir.PrimFunc) -> Optional[dict]:
    """The function's `CHOICES_ATTR` as ``{kind: [index, ...]}``, or None. The attribute is
    kept as ``[[kind, [index, ...]], ...]`` (what a schedule's trace and TVMScript hold)."""
    value = (func.attrs or {}).get(CHOICES_ATTR)
    if value is None:
        return None
    return {str(kind): [int(i) for i in picks] for kind, picks in value}


def with_choices(func: tir.PrimFunc, decisions: dict) -> tir.PrimFunc:
    """``func`` carrying ``decisions`` (``{kind: [index, ...]}``) for its default schedule."""
    picks = [[kind, [int(i) for i in decisions[kind]]] for kind in KINDS if kind in decisions]
    return dataclasses.replace(func, attrs={**(func.attrs or {}), CHOICES_ATTR: picks})


@contextmanager
def applying(func: tir.PrimFunc) -> Iterator[None]:
    """While scheduling ``func``: its choices (if it carries any) are the ones taken."""
    decisions = choices_of(func)
    if decisions is None:
        yield
        return
    with _choosing(decisions):
        yield


def choice_points(func: tir.PrimFunc, target=None) -> dict:
    """``{kind: [options at each point, ...]}``: the choice points the default schedule meets
    scheduling ``func`` for ``target`` (None or a CPU target: the CPU's default schedule, for
    this machine; a GPU target: DLight's), in order; empty lists where it meets none."""
    plain = func
    if CHOICES_ATTR in (func.attrs or {}):
        plain = dataclasses.replace(func, attrs={k: v for k, v in func.attrs.items() if k != CHOICES_ATTR})
    options = _recorded(plain, None, target)
    # Another algorithm (a Winograd convolution) or instruction set (wgmma) meets other points:
    # the n-th point of a kind offers the most options it has under any of them (an index past
    # one's options keeps the heuristic's pick there).
    for kind in (ALGORITHM, INSTRUCTIONS):
        counts = options[kind]
        for pick in range(1, max(counts, default=1)):
            other = _recorded(plain, {kind: [pick] * len(counts)}, target)
            options = {k: [max(a, b) for a, b in itertools.zip_longest(options[k], other[k], fillvalue=0)]
                       for k in KINDS}
    return options


def _recorded(func: tir.PrimFunc, decisions: Optional[dict], target) -> dict:
    """The option counts of the points the default schedule for ``target`` meets with
    ``decisions`` taken (None: the heuristic's picks everywhere)."""
    with _choosing(decisions, record=True) as recorder:
        if target is not None and _as_target(target).kind.name == "cuda":
            from tvmscript.ir import IRModule

            from .build_cuda import default_gpu_schedule

            default_gpu_schedule(IRModule({"main": func}), _as_target(target))
        else:
            from .schedule_cpu.driver import default_schedule

            default_schedule(func)
    return recorder.options


def _as_target(target):
    from tvmscript.target import Target

    return target if isinstance(target, Target) else Target(str(target))


@primitive
def choose_cpu_schedule(sch: Schedule, choices: list, func_name: str = "main") -> None:
    """Record ``choices`` (``[[kind, [option index, ...]], ...]``: a list, so that a trace
    replays the sampled indices in it) as the CPU default schedule's picks for function
    ``func_name``."""
    _record(sch, choices, func_name)


@primitive
def choose_gpu_schedule(sch: Schedule, choices: list, func_name: str = "main") -> None:
    """`choose_cpu_schedule` for DLight's picks on a GPU (the same attribute; the name says
    which schedule a trace's record is for)."""
    _record(sch, choices, func_name)


def _record(sch: Schedule, choices: list, func_name: str) -> None:
    sch.replace_func(func_name, with_choices(sch.func(func_name), {str(k): list(v) for k, v in choices}))


def check_choices(choices) -> None:
    """ValueError unless ``choices`` (a ``choose_*_schedule`` argument read from a file) is
    ``[[kind, [index, ...]], ...]`` of known kinds."""
    if not isinstance(choices, list) or not all(
            isinstance(c, list) and len(c) == 2 and c[0] in KINDS and isinstance(c[1], list) for c in choices):
        raise ValueError(f"not the default schedule's picks: {str(choices)[:80]}")
