"""Matmul tilings on the GPU, each beside cuBLAS in the same run: which the default schedules
should pick.

    python benchmarks/cuda_tilings.py [--repeat 20] [--dry]

The default CUDA schedules choose one tiling per product: `MatmulSIMT` 128 or 64 columns of C
a block (float32), `MatmulTensorCore` one of its mma.sync tilings and a 3-stage pipeline
(float16). Which is fastest depends on how evenly the blocks spread over the GPU's
multiprocessors and how many warps each keeps resident, which the roofline estimate does not
model well; this times every candidate (the rules' knobs: ``MatmulSIMT(tile_j=)``,
``MatmulTensorCore(mma_tilings=, stages=)``) on the products of the models in
benchmarks/cuda_models.py: a GPT block's projections (4096 tokens by 768, 2304 and 3072
features) and the square 4096³ of benchmarks/cuda.py. Each result is checked against
PyTorch's. Without a GPU (or with ``--dry``) it builds each variant and prints its launch.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__)), os.path.join(ROOT, "tests")]

import tvmscript as tvms  # noqa: E402
from support.cuda_check import matmul_src, scheduled_by  # noqa: E402
from tvmscript.compiler import dlight as dl  # noqa: E402
from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling  # noqa: E402
from tvmscript.target import Target  # noqa: E402

# (M, N, K): a GPT block at batch 8 x 512 tokens (QKV, MLP up, MLP down, output projection),
# then the square benchmark.
SHAPES = [(4096, 2304, 768), (4096, 3072, 768), (4096, 768, 3072), (4096, 768, 768), (4096, 4096, 4096)]
SIMT_TILES = (128, 64)
MMA_TILINGS = (Tiling(4, 2, 4, 4), Tiling(2, 4, 4, 4), Tiling(2, 2, 4, 4))
STAGES = (3, 4)


def variants():
    """(label, dtype, rule) of every variant."""
    for tile_j in SIMT_TILES:
        yield f"SIMT 128x{tile_j}", "float32", dl.gpu.MatmulSIMT(tile_j=tile_j)
    for tiling in MMA_TILINGS:
        for stages in STAGES:
            label = f"mma {tiling.tile_i}x{tiling.tile_j} ({tiling.warps} warps) {stages} stages"
            yield label, "float16", dl.gpu.MatmulTensorCore(mma_tilings=(tiling,), stages=stages)


def scheduled(m: int, n: int, k: int, dtype: str, rule):
    """``mm`` (C = A @ B of ``dtype`` operands, float32 C) scheduled by ``rule`` alone, or None
    when the rule does not take it."""
    mod = tvms.parse(matmul_src(m, n, k, "float32", False, dtype))
    if rule.apply(mod["mm"], Target("cuda"), False) is None:
        return None
    return tvms.IRModule(scheduled_by(rule, mod))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--dry", action="store_true", help="build every variant and print its launch; time nothing")
    args = ap.parse_args()
    from tvmscript.runtime.cuda import unavailable_reason

    reason = "--dry" if args.dry else unavailable_reason(0)
    if not reason:
        import torch
        from _gpu import gpu_time

        torch.backends.cuda.matmul.allow_tf32 = False
        dev = tvms.cuda(0)
    print(f"{'product':<18} {'variant':<32} {'launch':<24} {'us':>9} {'TFLOP/s':>8} {'cuBLAS us':>10} {'ratio':>6}")
    for m, n, k in SHAPES:
        reference, product = {}, f"{m}x{n}x{k}"
        for label, dtype, rule in variants():
            mod = scheduled(m, n, k, dtype, rule)
            if mod is None:
                print(f"{product:<18} {label:<32} (the rule does not take it)")
                continue
            ex = tvms.compile(mod, target="cuda")
            (launch,) = ex.cuda_code.functions["mm"].launches
            grid = f"{'x'.join(launch.grid)} of {'x'.join(launch.block)}"
            if reason:
                print(f"{product:<18} {label:<32} {grid:<24}")
                continue
            rng = np.random.default_rng(0)
            a = (rng.standard_normal((m, k)) / 8).astype(dtype)
            b = (rng.standard_normal((k, n)) / 8).astype(dtype)
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            ga, gb, gc = (tvms.nd.array(x, dev) for x in (a, b, np.zeros((m, n), "float32")))
            kernel = ex["mm"]
            kernel(ga, gb, gc)
            ref = (ta @ tb).float().cpu().numpy()
            np.testing.assert_allclose(gc.numpy(), ref, rtol=5e-2, atol=5e-2)
            ours = gpu_time(lambda: kernel(ga, gb, gc), args.repeat, torch)
            if dtype not in reference:
                reference[dtype] = gpu_time(lambda: ta @ tb, args.repeat, torch)
            flops = 2 * m * n * k
            print(f"{product:<18} {label:<32} {grid:<24} {ours * 1e6:9.1f} {flops / ours / 1e12:8.1f} "
                  f"{reference[dtype] * 1e6:10.1f} {reference[dtype] / ours:6.2f}", flush=True)
    if reason:
        print(f"the times need a GPU: {reason}")
        return 1
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; ratio: cuBLAS's time over ours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
