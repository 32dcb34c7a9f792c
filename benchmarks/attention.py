"""Attention kernels on the CPU: the flash-structured nest of `schedule_cpu.attention` against
the generic per-stage schedule of the same PrimFunc, NumPy's ``softmax(Q K^T * scale) V``
(float32, BLAS batched matmuls) and, when PyTorch is importable, its
``scaled_dot_product_attention``, timed in alternating rounds in the same run (ratios: the
machine may be shared).

    python benchmarks/attention.py [--rounds 5]

Shapes in TVM's layout (batch, seq, heads, head_dim): ViT-B/16's 1x197x12x64 and a causal
1x128x8x32. Every kernel's result is checked against NumPy's before timing."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from _timing import interleaved  # noqa: E402
from support import schedule_corpus as sc  # noqa: E402
from tvmscript.compiler.build_cpu import build_cpu  # noqa: E402
from tvmscript.compiler.schedule_cpu import parallel_threads  # noqa: E402
from tvmscript.compiler.schedule_cpu.attention import flash_enabled  # noqa: E402
from tvmscript.relax import op  # noqa: E402

CASES = [("attention 1x197x12x64 (vit_b_16)", (1, 197, 12, 64), None),
         ("causal attention 1x128x8x32", (1, 128, 8, 32), "TopLeft")]


def kernels(shape, causal) -> tuple:
    """The attention PrimFunc built with the flash nest and with the generic schedule."""
    func = sc.zero_kernel(lambda q, k, v: [op.nn.attention(q, k, v, causal_mask=causal)], [(shape, "float32")] * 3)
    flash = build_cpu({"kernel": func}, schedule=True, use_cache=False)["kernel"]
    token = flash_enabled.set(False)
    try:
        generic = build_cpu({"kernel": func}, schedule=True, use_cache=False)["kernel"]
    finally:
        flash_enabled.reset(token)
    return flash, generic


def numpy_attention(causal):
    def run(q, k, v):
        qh, kh, vh = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        s = qh @ kh.transpose(0, 1, 3, 2) * np.float32(1 / np.sqrt(q.shape[3]))
        if causal:
            s = np.where(np.tri(q.shape[1], k.shape[1], dtype=bool), s, np.float32(-np.inf))
        s = np.exp(s - s.max(-1, keepdims=True))
        return ((s / s.sum(-1, keepdims=True)) @ vh).transpose(0, 2, 1, 3)
    return run


def torch_attention(causal):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.set_num_threads(parallel_threads())

    def run(q, k, v):
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return run


def bench(name: str, shape, causal, rounds: int) -> str:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype("float32") for _ in range(3))
    flash, generic = kernels(shape, causal)
    out_f, out_g = np.empty_like(q), np.empty_like(q)
    ref = numpy_attention(causal)(q, k, v)
    fns = [lambda: flash(q, k, v, out_f), lambda: generic(q, k, v, out_g), lambda: numpy_attention(causal)(q, k, v)]
    fns[0]()
    fns[1]()
    err = max(float(np.abs(out_f - ref).max()), float(np.abs(out_g - ref).max()))
    assert err < 1e-4, f"{name}: tvms and NumPy differ by {err:.1e}"
    sdpa = torch_attention(causal)
    if sdpa is not None:
        import torch
        tq, tk, tv = (torch.from_numpy(x.transpose(0, 2, 1, 3).copy()) for x in (q, k, v))
        fns.append(lambda: sdpa(tq, tk, tv))
    times = interleaved(fns, 20 * rounds, warmup=2, rounds=rounds)
    flash_t = times[0]
    cells = [f"{flash_t * 1e3:.3f} ms", f"{times[1] / flash_t:.2f}x", f"{times[2] / flash_t:.2f}x"]
    cells.append(f"{times[3] / flash_t:.2f}x" if sdpa is not None else "-")
    return "  ".join([name.ljust(36)] + [c.ljust(14) for c in cells]).rstrip()


def attention_rows(rounds: int = 5) -> list:
    """The table's header and rows: each reference's time over the flash kernel's (above 1:
    the flash kernel is faster)."""
    header = "  ".join(["attention kernel".ljust(36)] + [h.ljust(14) for h in (
        "tvms flash", "generic/flash", "NumPy/flash", "torch SDPA/flash")]).rstrip()
    return [header] + [bench(name, shape, causal, rounds) for name, shape, causal in CASES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    args = ap.parse_args()
    print(f"threads: {parallel_threads()}")
    for line in attention_rows(args.rounds):
        print(line)


if __name__ == "__main__":
    main()
