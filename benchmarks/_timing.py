"""The timing helper the benchmarks share (run them as scripts: this folder is on sys.path)."""

from __future__ import annotations

import gc
import time


def best_of(fn, repeat: int) -> float:
    """The fastest of ``repeat`` calls of ``fn``, in seconds (garbage collected before each)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
