"""What `tvms run` does alike for a Relax function (`relax_call`) and a prim_func (`prim_call`):
the options of the call, the result it hands back, the device the inputs go to, the timed calls,
and the note naming the inputs made up."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .inputs import GivenFiles
from .program import Program
from .reporting import debugging, fail


@dataclass(frozen=True)
class CallOptions:
    """How to call the function: where its inputs come from (``given``, ``--shape`` values in
    ``shapes``, the rest made up from ``seed``), the target, ``--repeat`` timed calls, whether
    the kernels check bounds and whether to profile them."""

    given: GivenFiles
    shapes: dict
    target: str
    seed: int = 0
    repeat: int = 1
    bounds_check: bool = True
    profile: bool = False


@dataclass
class CallResult:
    """What calling the function gave: its named outputs (``[(name, NumPy array)]``), the
    seconds spent compiling it, in the first call and in each timed call, and the kernel
    profile (``--profile`` of a Relax function) as a table to print."""

    outputs: list
    compile_s: float
    first_s: float
    times: list = field(default_factory=list)
    profile: str | None = None


def on_device(values: list, target: str):
    """(device, values): with a CUDA target, NumPy inputs are copied to GPU 0."""
    if target.split()[0] != "cuda":
        return None, values
    import numpy as np

    from ..runtime import devices, ndarray

    dev = devices.cuda(0)
    return dev, [ndarray.array(v, dev) if isinstance(v, np.ndarray) else v for v in values]


def synced(result, dev):
    """``result`` once the GPU has finished computing it (so timings are the GPU's)."""
    dev.sync()
    return result


def timed(program: Program, call, repeat: int, sources: dict):
    """Call once (the outputs; it also warms up), then ``repeat`` timed times; returns (the
    first result, seconds of the first call, seconds of each timed call). Errors the call
    raises for bad arguments (the VM's and the kernels' checks) are the user's: one placed in
    the program (`runtime.sites`) is a diagnostic there."""
    import re
    import time

    from ..diagnostics import TVMScriptError
    from ..runtime.kernel import KernelAssertionError
    from ..runtime.vm import CallDepthError

    times = []
    try:
        t0 = time.perf_counter()
        result = call()
        first = time.perf_counter() - t0
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    except (TypeError, ValueError, TVMScriptError, KernelAssertionError, CallDepthError) as err:
        if debugging():
            raise
        placed = isinstance(err, TVMScriptError) and err.span is not None
        message = err.message if placed else str(err)
        m = re.search(r"argument '([^']+)'|parameter '([^']+)'", message)
        param = m and (m.group(1) or m.group(2))
        if param in sources:
            message += f" ({param} was read from {sources[param]})"
        if placed:
            err.message = message
            raise program.report(err) from None
        raise fail(message) from None
    return result, first, times


def announce_random(random_names: list, zeroed: list, seed: int) -> None:
    """Say on stderr which inputs were made up (and which outputs zero-filled)."""
    if random_names:
        print(f"note: random inputs for {', '.join(random_names)} (seed {seed}); give them with --inputs, "
              "--input or --params", file=sys.stderr)
    if zeroed:
        print(f"note: zero-filled outputs {', '.join(zeroed)}", file=sys.stderr)
