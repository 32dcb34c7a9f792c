"""What the GPU benchmarks share: timing a PyTorch call on the GPU (`gpu_time`)."""

from __future__ import annotations


def gpu_time(fn, repeat: int, torch) -> float:
    """Seconds per call of ``fn`` on the GPU: CUDA events around ``repeat`` calls, best of 3."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1000 / repeat)
    return best
