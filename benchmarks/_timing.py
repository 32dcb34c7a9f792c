"""The timing helpers the benchmarks share (run them as scripts: this folder is on sys.path)."""

from __future__ import annotations

import gc
import statistics
import time

SWITCH_PAUSE = 0.15  # seconds between one function's calls and the next one's (`interleaved`)


def best_of(fn, repeat: int) -> float:
    """The fastest of ``repeat`` calls of ``fn``, in seconds (garbage collected before each)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def interleaved(fns: list, calls: int, warmup: int, rounds: int = 5) -> list:
    """Time of one call of each function: ``calls`` calls of each are timed in ``rounds``
    alternating rounds (f, g, f, g, ...), and the best of the rounds' medians is reported: a
    burst of load from other processes (on a shared machine, another guest can take a core
    for milliseconds, which stalls every parallel region) spoils a round, not the figure.

    Each function's calls start `SWITCH_PAUSE` after the previous one's: OpenBLAS's worker
    threads (NumPy's, PyTorch's) keep spinning for about 0.1 s after a call, so a parallel
    kernel run right after one finds the other cores taken (a 1024^3 matmul measured at 110
    instead of 196 GFLOP/s), which measures the neighbour, not the kernel."""
    return interleaved_rounds(warmed_rounds(fns, warmup), calls, rounds)


def warmed_rounds(fns: list, warmup: int) -> list:
    """Round functions (`interleaved_rounds`) of functions run here, each called ``warmup``
    times first."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    return [lambda calls, fn=fn: median_call(fn, calls) for fn in fns]


def interleaved_rounds(round_fns: list, calls: int, rounds: int = 5) -> list:
    """`interleaved` of rounds: each of ``round_fns`` takes a call count and returns the
    median seconds of that many calls of its function, timed wherever it runs (another
    process: one with other environment variables); the rounds alternate as in `interleaved`,
    so that the load of the moment hits all alike, and the best median of each is returned."""
    per = max(1, calls // rounds)
    best = [float("inf")] * len(round_fns)
    for _ in range(rounds):
        for i, round_fn in enumerate(round_fns):
            time.sleep(SWITCH_PAUSE)
            best[i] = min(best[i], round_fn(per))
    return best


def median_call(fn, calls: int) -> float:
    """The median seconds of ``calls`` calls of ``fn``."""
    clock = time.perf_counter
    times = []
    for _ in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def alternated(fns: list, rounds: int, round_s: float = 0.05) -> list:
    """Median seconds of one call of each function, over ``rounds`` rounds that call each in
    turn (f, g, h, f, g, h, ...): load from other processes hits all alike. In a round each
    function gets `SWITCH_PAUSE` (as in `interleaved`: no runtime's spinning workers slow the
    next one), one untimed call (its threads woken, its caches warm: else a sub-millisecond
    call measures a futex wake-up), then timed calls for about ``round_s`` seconds (at least
    one; the count is set by the untimed call's time), all of whose times enter the median."""
    times: list = [[] for _ in fns]
    clock = time.perf_counter
    for _ in range(rounds):
        for fn, out in zip(fns, times):
            time.sleep(SWITCH_PAUSE)
            t0 = clock()
            fn()
            calls = max(1, min(50, int(round_s / max(clock() - t0, 1e-6))))
            for _ in range(calls):
                t0 = clock()
                fn()
                out.append(clock() - t0)
    return [statistics.median(t) for t in times]
