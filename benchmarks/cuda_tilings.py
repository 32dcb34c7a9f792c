"""Matmul tilings and convolution rules on the GPU, each beside cuBLAS or cuDNN in the same
run: which the default schedules should pick.

    python benchmarks/cuda_tilings.py [--repeat 20] [--dry] [--only matmuls|convs]

The default CUDA schedules choose one tiling per product: `MatmulSIMT` 128 or 64 columns of C
a block (float32), `MatmulTensorCore` one of its mma.sync tilings and a pipeline's stages
(float16, TF32). Hopper's wgmma tilings (``MatmulTensorCore(instructions="wgmma")``, which the
default does not take until they are timed here) come first; a variant whose result differs
from PyTorch's is reported WRONG and not timed. Which is fastest depends on how evenly the blocks spread over the GPU's
multiprocessors and how many warps each keeps resident, which the roofline estimate does not
model well; this times every candidate (the rules' knobs: ``MatmulSIMT(tile_j=)``,
``MatmulTensorCore(mma_tilings=, stages=, step_k=)``) on the products of the models in
benchmarks/cuda_models.py: a GPT block's projections (4096 tokens by 768, 2304 and 3072
features) and the square 4096³ of benchmarks/cuda.py. Each result is checked against
PyTorch's. Without a GPU (or with ``--dry``) it builds each variant and prints its launch.

TF32 tilings (``cuda -allow_tf32=1``) follow, beside cuBLAS with TF32 allowed, on the
products of resnet18's convolutions at batch 32, and wgmma's TF32 tilings on the same
products with B K-major (``x @ w.T``: TF32 wgmma transposes no operand). Then resnet18's float32 3x3 convolutions
(implicit GEMMs of few rows at batch 1, of many at batch 32) under each CUDA rule that takes
them: `Matmul`, `MatmulSplitK` (K over a warp's lanes, ``warps_k=`` over 2 or 4 warps too)
and `MatmulSIMT`, beside cuDNN (TF32 off): where the default rule list should hand a
convolution from one rule to the next.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__)), os.path.join(ROOT, "tests")]

import tvmscript as tvms  # noqa: E402
from support.cuda_check import matmul_src, relax_prim_funcs, scheduled_by  # noqa: E402
from tvmscript.compiler import dlight as dl  # noqa: E402
from tvmscript.compiler.build_error import BuildError  # noqa: E402
from tvmscript.compiler.dlight.gpu.matmul_tensor_core import Tiling  # noqa: E402
from tvmscript.compiler.dlight.gpu.matmul_wgmma import WgmmaTiling  # noqa: E402
from tvmscript.target import Target  # noqa: E402

# (M, N, K): a GPT block at batch 8 x 512 tokens (QKV, MLP up, MLP down, output projection),
# then the square benchmark.
SHAPES = [(4096, 2304, 768), (4096, 3072, 768), (4096, 768, 3072), (4096, 768, 768), (4096, 4096, 4096)]
SIMT_TILES = (128, 64)
# (tiling, pipeline stages, K per stage): 128x128 of 4 warps (the default: 4 stages of 32) at 3
# to 5 stages and at 3 or 4 of 64 (half the barriers and waits; 3 leave room for two blocks a
# multiprocessor, 4 for one), then of 8 warps (64x32 or 32x64 each), and 256x128 of 8 warps.
MMA_VARIANTS = ((Tiling(2, 2, 4, 4), 3, 32), (Tiling(2, 2, 4, 4), 4, 32), (Tiling(2, 2, 4, 4), 5, 32),
                (Tiling(2, 2, 4, 4), 3, 64), (Tiling(2, 2, 4, 4), 4, 64), (Tiling(2, 4, 4, 2), 4, 32),
                (Tiling(4, 2, 2, 4), 4, 32), (Tiling(4, 2, 4, 4), 4, 32))
# Hopper's wgmma (``MatmulTensorCore(instructions="wgmma")``, sm_90 only), timed first: (tiling,
# stages, batches in flight). 128x256 of 2 warpgroups (cuBLAS's tile on an H100; 48 KiB a stage)
# at 4 stages with a step's wgmmas left running while the next copies are issued (the default)
# and without, and at 3; 128x128 of 2 at 4 and at 3 (two blocks a multiprocessor); 64x256 of 1.
WGMMA_VARIANTS = ((WgmmaTiling(2, 1, 256), 4, 1), (WgmmaTiling(2, 1, 256), 4, 0), (WgmmaTiling(2, 1, 256), 3, 1),
                  (WgmmaTiling(2, 1, 128), 4, 1), (WgmmaTiling(2, 1, 128), 3, 1), (WgmmaTiling(1, 1, 256), 4, 1))
# TF32 (``cuda -allow_tf32=1``, against cuBLAS with TF32 allowed) on the products of resnet18's
# 3x3 convolutions at batch 32 in NHWC (pixels x channels x 9 channels) and the square one:
# 256x128 of 8 warps (the default), 128x128 of 4 warps (254 registers a thread with steps of 32;
# 168 with steps of 16, 4 of which take the shared memory of 2 of 32) and of 8 (64x32 each:
# half the accumulators), 128x64 of 4, 32x64 (what divides 1568 rows) and 64x128 (padded to
# 1600 rows there: what the tiling model picks for it). Then wgmma's TF32 (sm_90, B K-major:
# the products as x @ w.T, an OHWI convolution's layout) at 4 stages.
TF32_SHAPES = [(25088, 128, 1152), (6272, 256, 2304), (1568, 512, 4608), (4096, 4096, 4096)]
TF32_VARIANTS = ((Tiling(4, 2, 4, 4), 3, 32), (Tiling(4, 2, 4, 4), 4, 16), (Tiling(2, 2, 4, 4), 3, 32),
                 (Tiling(2, 2, 4, 4), 4, 16), (Tiling(2, 4, 4, 2), 3, 32), (Tiling(2, 2, 4, 2), 3, 32),
                 (Tiling(2, 2, 1, 2), 3, 32), (Tiling(2, 2, 2, 4), 3, 32))
TF32_WGMMA_TILINGS = (WgmmaTiling(2, 1, 256), WgmmaTiling(2, 1, 128), WgmmaTiling(1, 1, 128))
TF32_TARGET = "cuda -allow_tf32=1"


def mma_label(kind: str, tiling: Tiling, stages: int, step_k: int) -> str:
    warp = f"{tiling.frags_i * 16}x{tiling.frags_j * 16}"
    return f"{kind} {tiling.tile_i}x{tiling.tile_j} ({tiling.warps} x {warp}) {stages} x k{step_k}"


def wgmma_label(tiling: WgmmaTiling, stages: int, in_flight: int, step_k: int = 64) -> str:
    return (f"wgmma {tiling.tile_i}x{tiling.tile_j} ({tiling.warpgroups} wg x {tiling.frags_m * 64}x{tiling.n}) "
            f"{stages} x k{step_k}{'' if in_flight else ' wait 0'}")


def variants():
    """(label, dtype, rule, target) of every variant of the float32 and float16 products."""
    for tiling, stages, in_flight in WGMMA_VARIANTS:
        yield (wgmma_label(tiling, stages, in_flight), "float16",
               dl.gpu.MatmulTensorCore(instructions="wgmma", wgmma_tilings=(tiling,), stages=stages,
                                       wgmma_in_flight=in_flight), "cuda")
    for tile_j in SIMT_TILES:
        yield f"SIMT 128x{tile_j}", "float32", dl.gpu.MatmulSIMT(tile_j=tile_j), "cuda"
    for tiling, stages, step_k in MMA_VARIANTS:
        yield (mma_label("mma", tiling, stages, step_k), "float16",
               dl.gpu.MatmulTensorCore(mma_tilings=(tiling,), stages=stages, step_k=step_k), "cuda")


# resnet18's 3x3 convolutions: (batch, input channels, image side, output channels, stride).
CONVS = [(1, 64, 56, 64, 1), (1, 64, 56, 128, 2), (1, 128, 28, 128, 1), (1, 128, 28, 256, 2), (1, 256, 14, 256, 1),
         (1, 256, 14, 512, 2), (1, 512, 7, 512, 1), (32, 64, 56, 64, 1), (32, 256, 14, 256, 1), (32, 512, 7, 512, 1)]
CONV_RULES = [("Matmul", dl.gpu.Matmul()), ("SplitK", dl.gpu.MatmulSplitK()),
              ("SplitK 2 warps on K", dl.gpu.MatmulSplitK(warps_k=2)),
              ("SplitK 4 warps on K", dl.gpu.MatmulSplitK(warps_k=4)), ("SIMT", dl.gpu.MatmulSIMT())]


def conv_module(batch: int, c_in: int, side: int, c_out: int, stride: int):
    """``conv2d`` (x, w, y): the legalized NCHW 3x3 convolution, padding 1."""
    funcs = relax_prim_funcs(f'x: R.Tensor(({batch}, {c_in}, {side}, {side}), "float32"), '
                             f'w: R.Tensor(({c_out}, {c_in}, 3, 3), "float32")',
                             f"            y = R.nn.conv2d(x, w, strides=[{stride}, {stride}], padding=[1, 1, 1, 1])")
    return tvms.IRModule(funcs)


def scheduled(m: int, n: int, k: int, dtype: str, rule, target: str = "cuda", b_transposed: bool = False):
    """``mm`` (C = A @ B, or A @ B.T, of ``dtype`` operands, float32 C) scheduled by ``rule``
    alone for ``target``, or None when the rule does not take it."""
    mod = tvms.parse(matmul_src(m, n, k, "float32", b_transposed, dtype))
    if rule.apply(mod["mm"], Target(target), False) is None:
        return None
    return tvms.IRModule(scheduled_by(rule, mod, target))


def by_rule(mod, rule):
    """``mod``'s one prim_func scheduled by ``rule`` alone, or None when the rule does not take it."""
    ((name, func),) = [(gv.name_hint, f) for gv, f in mod.functions.items()]
    if rule.apply(func, Target("cuda"), False) is None:
        return None
    return name, tvms.IRModule(scheduled_by(rule, mod))


def cases():
    """(product, variant, dtype, (name, scheduled module) or None, operand shapes, PyTorch's
    function of the operands, target) of every timing."""
    for m, n, k in SHAPES:
        for label, dtype, rule, target in variants():
            mod = scheduled(m, n, k, dtype, rule, target)
            yield (f"{m}x{n}x{k}", label, dtype, mod and ("mm", mod), ((m, k), (k, n), (m, n)),
                   lambda a, b: a @ b, target)
    for m, n, k in TF32_SHAPES:
        for tiling, stages, step_k in TF32_VARIANTS:
            rule = dl.gpu.MatmulTensorCore(mma_tilings=(tiling,), stages=stages, step_k=step_k)
            mod = scheduled(m, n, k, "float32", rule, TF32_TARGET)
            yield (f"{m}x{n}x{k}", mma_label("tf32", tiling, stages, step_k), "float32", mod and ("mm", mod),
                   ((m, k), (k, n), (m, n)), lambda a, b: a @ b, TF32_TARGET)
        for tiling in TF32_WGMMA_TILINGS:
            rule = dl.gpu.MatmulTensorCore(instructions="wgmma", wgmma_tilings=(tiling,), stages=4)
            mod = scheduled(m, n, k, "float32", rule, TF32_TARGET, b_transposed=True)
            yield (f"{m}x{n}x{k}", "tf32 " + wgmma_label(tiling, 4, 1, 32) + " B^T", "float32", mod and ("mm", mod),
                   ((m, k), (n, k), (m, n)), lambda a, b: a @ b.T, TF32_TARGET)
    for batch, c_in, side, c_out, stride in CONVS:
        mod = conv_module(batch, c_in, side, c_out, stride)
        out_side = side // stride
        shapes = ((batch, c_in, side, side), (c_out, c_in, 3, 3), (batch, c_out, out_side, out_side))
        product = f"conv b{batch} {c_in}x{side}->{c_out}/{stride}"

        def conv(x, w, stride=stride):
            import torch
            return torch.nn.functional.conv2d(x, w, stride=stride, padding=1)
        for label, rule in CONV_RULES:
            yield product, label, "float32", by_rule(mod, rule), shapes, conv, "cuda"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--dry", action="store_true", help="build every variant and print its launch; time nothing")
    ap.add_argument("--only", choices=("matmuls", "convs"), help="time only these")
    args = ap.parse_args()
    from tvmscript.runtime.cuda import unavailable_reason

    reason = "--dry" if args.dry else unavailable_reason(0)
    if not reason:
        import torch
        from _gpu import gpu_time

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = tvms.cuda(0)
    print(f"{'product':<26} {'variant':<40} {'launch':<24} {'us':>9} {'TFLOP/s':>8} {'torch us':>9} {'ratio':>6}")
    reference = {}
    for product, label, dtype, built, shapes, torch_fn, target in cases():
        if args.only and product.startswith("conv") != (args.only == "convs"):
            continue
        if built is None:
            print(f"{product:<26} {label:<40} (the rule does not take it)")
            continue
        name, mod = built
        try:
            ex = tvms.compile(mod, target=target)
        except BuildError as err:   # wgmma on a GPU older than sm_90, say
            print(f"{product:<26} {label:<40} (does not build: {str(err).splitlines()[0]})")
            continue
        grid = "; ".join(f"{'x'.join(ln.grid)} of {'x'.join(ln.block)}" for ln in ex.cuda_code.functions[name].launches)
        if reason:
            print(f"{product:<26} {label:<40} {grid:<24}")
            continue
        rng = np.random.default_rng(0)
        a = (rng.standard_normal(shapes[0]) / 8).astype(dtype)
        b = (rng.standard_normal(shapes[1]) / 8).astype(dtype)
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        ga, gb, gc = (tvms.nd.array(x, dev) for x in (a, b, np.zeros(shapes[2], "float32")))
        kernel = ex[name]
        kernel(ga, gb, gc)
        ref = torch_fn(ta, tb).float().cpu().numpy()
        wrong = np.abs(gc.numpy() - ref) > 5e-2 + 5e-2 * np.abs(ref)
        if wrong.any():   # say so and go on: one wrong variant must not hide the others' times
            print(f"{product:<26} {label:<40} {grid:<24} WRONG: {int(wrong.sum())} of {wrong.size} elements "
                  f"differ from PyTorch's", flush=True)
            continue
        ours = gpu_time(lambda: kernel(ga, gb, gc), args.repeat, torch)
        tf32 = target == TF32_TARGET
        key = (product, dtype, tf32)
        if key not in reference:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            reference[key] = gpu_time(lambda: torch_fn(ta, tb), args.repeat, torch)
            torch.backends.cuda.matmul.allow_tf32 = False
        flops = 2 * np.prod(shapes[2]) * np.prod(shapes[1][1:]) if product.startswith("conv") else \
            2 * np.prod(shapes[2]) * shapes[0][1]
        print(f"{product:<26} {label:<40} {grid:<24} {ours * 1e6:9.1f} {flops / ours / 1e12:8.1f} "
              f"{reference[key] * 1e6:9.1f} {reference[key] / ours:6.2f}", flush=True)
    if reason:
        print(f"the times need a GPU: {reason}")
        return 1
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; ratio: cuBLAS's (cuDNN's) time over ours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
