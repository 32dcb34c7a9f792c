"""Auto-tuning (``tvms.meta_schedule.tune_tir``): what tuning buys, beside the references, as
ratios from one run.

    python benchmarks/tune.py [--only matmul,conv,resnet,throughput,dask,gpu] [--trials 200]
                              [--resnet-trials 600] [--work-dir DIR] [--rounds 5]

Rows (the tuning issue's goals):

* ``matmul``: a plain 1024^3 float32 matmul prim_func (no hand schedule) tuned for ``--trials``
  candidates, against NumPy's ``matmul(out=)`` (OpenBLAS) and the untuned build (tvms's
  default CPU schedule): goal >= 1.0x NumPy's GFLOP/s;
* ``conv``: resnet18's first 3x3 convolution (1x64x56x56, 64 out, padding 1) as a Relax
  function, its kernels tuned, against the untuned build: goal >= 1.2x its speed;
* ``resnet``: torchvision's resnet18 at batch 1 (random weights, bound), every kernel tuned
  within ``--resnet-trials``, against PyTorch eager and the untuned build: goal <= 0.8x
  eager's time and faster than untuned (needs PyTorch);
* ``throughput``: candidates measured per second while tuning a small matmul (128x96x64),
  start-up included, in ``tune_tir``'s default batches of 32: goal >= 4 on 2 cores;
* ``dask``: the same small matmul tuned on a Dask LocalCluster of 2 worker processes and with
  the local runner, same seed: the best schedule each found, timed side by side (needs
  ``distributed``);
* ``gpu``: fp16 and fp32 ``--gpu-n``^3 matmuls tuned for ``cuda`` (``--gpu-trials`` each),
  against cuBLAS (``torch.matmul``, TF32 off): goals >= 0.90x and >= 0.85x its TFLOP/s (needs
  a GPU, pycuda and PyTorch; ``benchmarks/gpu_checks.sh`` runs it).

The tuned and untuned builds are timed in alternating rounds (`_timing.interleaved`), the
best of the rounds' medians, so that load from other processes hits both alike. Each tuning
run's database stays in ``--work-dir`` (a temporary folder unless given): run again with the
same folder to continue tuning from it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

import tvmscript as tvms  # noqa: E402
from _timing import interleaved  # noqa: E402
from support.sampled_schedules import matmul_src  # noqa: E402
from tvmscript import meta_schedule as ms  # noqa: E402

CONV = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 56, 56), "float32"), w: R.Tensor((64, 64, 3, 3), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            R.output(y)
        return y
'''


def report_row(name: str, ours: str, reference: str, ratio: float, goal: str, met: bool) -> None:
    print(f"{name:<34} {ours:>16} {reference:>22} {ratio:8.2f}x  {goal:<22} {'yes' if met else 'NO'}", flush=True)


def tuned(mod, work_dir: str, trials: int, target: str = "llvm", **kwargs):
    """``mod`` tuned for ``trials`` candidates into ``work_dir``; the database and seconds."""
    t0 = time.perf_counter()
    db = ms.tune_tir(mod, target, work_dir, trials, **kwargs)
    return db, time.perf_counter() - t0


def bench_matmul(args, work_dir: str) -> None:
    n = 1024
    func = tvms.parse(matmul_src(n, n, n))
    mod = tvms.IRModule({"main": func})
    db, secs = tuned(mod, work_dir, args.trials)
    untuned, best = tvms.compile(mod)["main"], tvms.compile(mod, tuning_db=db)["main"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    c1, c2, c3 = (np.empty((n, n), np.float32) for _ in range(3))
    best(a, b, c1)
    np.testing.assert_allclose(c1, a @ b, rtol=1e-3, atol=1e-2)
    times = interleaved([lambda: best(a, b, c1), lambda: untuned(a, b, c2), lambda: np.matmul(a, b, out=c3)],
                        calls=args.rounds * 4, warmup=2, rounds=args.rounds)
    gf = [2 * n ** 3 / t / 1e9 for t in times]
    print(f"matmul {n}^3: {args.trials} trials in {secs:.0f} s ({db.last_report.rows()[0]['failures'] or 'none'} "
          "discarded)")
    report_row("matmul 1024^3 tuned vs NumPy", f"{gf[0]:.1f} GFLOP/s", f"{gf[2]:.1f} GFLOP/s", gf[0] / gf[2],
               ">= 1.0x NumPy", gf[0] >= gf[2])
    report_row("matmul 1024^3 tuned vs untuned", f"{gf[0]:.1f} GFLOP/s", f"{gf[1]:.1f} GFLOP/s", gf[0] / gf[1],
               "(no goal)", True)


def vm_main(ex):
    return tvms.relax.VirtualMachine(ex, tvms.cpu())["main"]


def bench_conv(args, work_dir: str) -> None:
    mod = tvms.parse(CONV)
    db, secs = tuned(mod, work_dir, args.trials)
    untuned, best = vm_main(tvms.compile(mod)), vm_main(tvms.compile(mod, tuning_db=db))
    rng = np.random.default_rng(0)
    x = tvms.nd.array(rng.standard_normal((1, 64, 56, 56), dtype=np.float32))
    w = tvms.nd.array(rng.standard_normal((64, 64, 3, 3), dtype=np.float32))
    np.testing.assert_allclose(best(x, w).numpy(), untuned(x, w).numpy(), rtol=1e-3, atol=1e-3)
    times = interleaved([lambda: best(x, w), lambda: untuned(x, w)], calls=args.rounds * 20, warmup=5,
                        rounds=args.rounds)
    print(f"conv2d: {args.trials} trials in {secs:.0f} s")
    report_row("conv2d 1x64x56x56 3x3 tuned", f"{times[0] * 1e3:.3f} ms", f"untuned {times[1] * 1e3:.3f} ms",
               times[1] / times[0], ">= 1.2x untuned speed", times[1] / times[0] >= 1.2)


def bench_resnet(args, work_dir: str) -> None:
    try:
        import torch
    except ImportError:
        print("resnet18: needs PyTorch (pip install torch torchvision)")
        return
    from _models import export
    from support.torch_models import import_torchvision
    from tvmscript.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = import_torchvision().models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    mod = from_exported_program(export(model, x), keep_params_as_input=False, unwrap_unit_return_tuple=True)
    mod = tvms.relax.transform.bound_inference_passes("main")(mod)
    db, secs = tuned(mod, work_dir, args.resnet_trials)
    untuned, best = vm_main(tvms.compile(mod)), vm_main(tvms.compile(mod, tuning_db=db))
    xt = tvms.nd.array(x.numpy())
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(best(xt).numpy(), expected, rtol=1e-3, atol=1e-3)

    def eager():
        with torch.no_grad():
            model(x)
    times = interleaved([lambda: best(xt), lambda: untuned(xt), eager], calls=args.rounds * 4, warmup=3,
                        rounds=args.rounds)
    print(f"resnet18: {len(db.last_report.tasks)} kernels, {args.resnet_trials} trials in {secs:.0f} s")
    report_row("resnet18 b1 tuned vs eager", f"{times[0] * 1e3:.2f} ms", f"eager {times[2] * 1e3:.2f} ms",
               times[0] / times[2], "<= 0.8x eager's time", times[0] / times[2] <= 0.8)
    report_row("resnet18 b1 tuned vs untuned", f"{times[0] * 1e3:.2f} ms", f"untuned {times[1] * 1e3:.2f} ms",
               times[0] / times[1], "< 1.0x untuned time", times[0] < times[1])


def bench_throughput(args, work_dir: str) -> None:
    from support.sampled_schedules import func

    trials = 64
    db, secs = tuned(tvms.IRModule({"main": func()}), work_dir, trials)
    rate = trials / secs
    report_row("search throughput, small matmul", f"{rate:.1f} cand/s", f"{trials} in {secs:.1f} s", rate / 4,
               ">= 4 candidates/s", rate >= 4)


def bench_dask(args, work_dir: str) -> None:
    try:
        from tvmscript.compiler.meta_schedule.dask_runner import DaskBuilder, DaskRunner, local_cluster
    except ImportError:
        print("dask: needs distributed (pip install \"tvms[distributed]\")")
        return
    from support.sampled_schedules import func

    mod = tvms.IRModule({"main": func()})
    local_db, local_s = tuned(mod, os.path.join(work_dir, "local"), 32, num_trials_per_iter=16, seed=0)
    cluster = local_cluster(2)
    try:
        dask_db, dask_s = tuned(mod, os.path.join(work_dir, "dask"), 32, num_trials_per_iter=16, seed=0,
                                builder=DaskBuilder(cluster), runner=DaskRunner(cluster))
    finally:
        cluster.close()
    # The two searches see different timings (noise), so their paths part after the first
    # batch; what must agree is how fast the best schedule each found is: both timed here,
    # in alternating rounds.
    a = np.random.default_rng(0).standard_normal((128, 64), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((64, 96), dtype=np.float32)
    kernels = [tvms.compile(mod, tuning_db=db)["main"] for db in (dask_db, local_db)]
    outs = [np.empty((128, 96), np.float32) for _ in kernels]
    times = interleaved([lambda k=k, c=c: k(a, b, c) for k, c in zip(kernels, outs)], calls=args.rounds * 200,
                        warmup=20, rounds=args.rounds)
    report_row("dask (2 workers) vs local: best", f"{times[0] * 1e6:.2f} us", f"local {times[1] * 1e6:.2f} us",
               times[1] / times[0], "same speed (+-15%)", abs(times[1] / times[0] - 1) <= 0.15)
    print(f"dask: 32 trials in {dask_s:.0f} s, local: {local_s:.0f} s")


def bench_gpu(args, work_dir: str) -> None:
    """The GPU goals: fp16 and fp32 n^3 matmuls tuned for ``--gpu-trials`` candidates each
    (DLight's tensor-core and CUDA-core schedules with their picks sampled, and the generic
    rules), against ``torch.matmul`` (cuBLAS, TF32 off), GPU time by CUDA events."""
    from tvmscript.runtime.cuda import unavailable_reason

    reason = unavailable_reason(0)
    if reason:
        print(f"gpu: needs a GPU ({reason})")
        return
    try:
        import torch
    except ImportError:
        print("gpu: compares with PyTorch's cuBLAS: pip install torch")
        return
    from _gpu import gpu_time
    from support.cuda_check import matmul_src

    torch.backends.cuda.matmul.allow_tf32 = False
    n, dev = args.gpu_n, tvms.cuda(0)
    for dt, goal in (("float16", 0.90), ("float32", 0.85)):
        mod = tvms.parse(matmul_src(n, n, n, dt, dtype=dt))   # mm: C = A @ B, all of type dt
        db, secs = tuned(mod, os.path.join(work_dir, dt), args.gpu_trials, target="cuda")
        kernels = [tvms.compile(mod, target="cuda", tuning_db=db)["mm"], tvms.compile(mod, target="cuda")["mm"]]
        rng = np.random.default_rng(0)
        a, b = ((rng.standard_normal((n, n)) / 8).astype(dt) for _ in range(2))
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        ga, gb, gc = (tvms.nd.array(x, dev) for x in (a, b, np.zeros((n, n), dt)))
        ref = (ta @ tb).float().cpu().numpy()
        for k in kernels:
            k(ga, gb, gc)
            np.testing.assert_allclose(gc.numpy().astype("float32"), ref, rtol=5e-2, atol=5e-2)
        flops = 2 * n ** 3
        tflops = [flops / gpu_time(lambda k=k: k(ga, gb, gc), 5, torch) / 1e12 for k in kernels]
        cublas = flops / gpu_time(lambda: ta @ tb, 5, torch) / 1e12
        print(f"gpu {dt} matmul {n}^3: {args.gpu_trials} trials in {secs:.0f} s; untuned {tflops[1]:.1f} TFLOP/s")
        report_row(f"{dt} matmul {n}^3 tuned vs cuBLAS", f"{tflops[0]:.1f} TFLOP/s", f"{cublas:.1f} TFLOP/s",
                   tflops[0] / cublas, f">= {goal:.2f}x cuBLAS", tflops[0] / cublas >= goal)


BENCHES = {"throughput": bench_throughput, "matmul": bench_matmul, "conv": bench_conv, "resnet": bench_resnet,
           "dask": bench_dask, "gpu": bench_gpu}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(BENCHES), help="comma-separated: " + ", ".join(BENCHES))
    p.add_argument("--trials", type=int, default=200, help="candidates for the matmul and the convolution")
    p.add_argument("--resnet-trials", type=int, default=600, help="candidates for resnet18, all kernels")
    p.add_argument("--gpu-trials", type=int, default=48, help="candidates for each GPU matmul")
    p.add_argument("--gpu-n", type=int, default=4096, help="the GPU matmuls' size")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--work-dir", help="where the databases go (default: a temporary folder)")
    args = p.parse_args()
    root = args.work_dir or tempfile.mkdtemp(prefix="tvms-tune-bench-")
    print(f"{'measure':<34} {'tvms':>16} {'reference':>22} {'ratio':>9}  {'goal':<22} met")
    for name in args.only.split(","):
        BENCHES[name.strip()](args, os.path.join(root, name.strip()))
    print(f"databases in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
