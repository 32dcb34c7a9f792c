"""What the tuner, its builders and its runners hand each other: plain data, picklable, so that
the same objects travel to a process pool or a Dask worker.

A candidate is built from a `BuildInput` (the scheduled function and the target) into a
`BuildResult` (an artifact a runner can load in another process, or the error), and timed from a
`RunnerInput` (the artifact, the arguments to call it with and the outputs it must produce)
into a `RunnerResult` (run times, or why there are none)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = ["ArgInfo", "BuildInput", "BuildResult", "RunnerInput", "RunnerResult", "ERROR_KINDS"]

# Why a candidate has no time: it did not build, raised when run, ran past its timeout, killed
# the process measuring it, or computed something else than the default schedule.
ERROR_KINDS = ("build", "run", "timeout", "crash", "wrong")


@dataclass(frozen=True)
class ArgInfo:
    """One parameter of a PrimFunc: its shape (constant) and dtype."""

    shape: tuple
    dtype: str


@dataclass
class BuildInput:
    """A scheduled function to compile: ``mod`` holds one PrimFunc, named ``name``; ``target``
    is the target's text ("llvm", "cuda -arch=sm_90")."""

    mod: object
    target: str
    name: str = "main"


@dataclass
class BuildResult:
    """``artifact``: what a runner loads (opaque to the tuner), or None and ``error``."""

    artifact: object = None
    error: Optional[str] = None
    build_secs: float = 0.0


@dataclass
class RunnerInput:
    """Time ``artifact`` (a `BuildResult`'s) on ``target``: call it with ``args`` (NumPy
    arrays, outputs included), check that every parameter index in ``expected`` then holds
    that array (within ``rtol``/``atol``), then time ``repeat`` rounds of ``number`` calls
    (``number`` grown until a round lasts ``min_repeat_ms``), only the first when it is
    slower than ``stop_above_s`` a call (`runner.time_rounds`)."""

    artifact: object
    target: str
    args: list
    expected: dict = field(default_factory=dict)
    rtol: float = 1e-3
    atol: float = 1e-3
    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 20.0
    timeout_s: float = 10.0
    name: str = "main"
    stop_above_s: Optional[float] = None


@dataclass
class RunnerResult:
    """The mean time of a call in each round (seconds), or None, ``error`` and its
    ``error_kind`` (one of `ERROR_KINDS`)."""

    run_secs: Optional[list] = None
    error: Optional[str] = None
    error_kind: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.run_secs is not None
