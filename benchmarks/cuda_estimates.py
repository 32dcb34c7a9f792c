"""Estimated times of benchmarks/cuda.py's kernels on a named GPU, computed without one.

    python benchmarks/cuda_estimates.py [--gpu h200] [--n 4096] [--static]

Each kernel's CUDA C, printed in trace mode, runs on the CPU emulator for a sample of its
blocks (tests/support/cuda_counters.py): the counts of global sectors, shared-memory wavefronts,
FMAs and tensor-core operations, scaled to the whole grid, go into `compiler.roofline.estimate`
(its docstring has the method; docs/cuda.md, "Estimating a kernel's time without a GPU").
Without g++ (or with ``--static``) the estimate comes from the TensorIR alone: FLOPs at the
GPU's peak and the buffers' bytes at its DRAM bandwidth, a lower bound. benchmarks/cuda.py
prints these beside its measurements, and alone on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))          # support.cuda_counters
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tvmscript as tvms  # noqa: E402
from tvmscript.compiler import roofline  # noqa: E402

# The Relax VM's own cost per kernel launch (host side), measured on an H200 (docs/cuda.md,
# 2026-11-28): a model of tiny kernels called through the VM takes at least this per launch.
VM_LAUNCH_S = 6.6e-6


@dataclass
class Row:
    """One benchmark's estimate: seconds, the resource bounding it, and how it was made."""

    label: str
    seconds: float
    bound: str
    how: str
    kernels: list


def benchmark_funcs(n: int) -> list:
    """(label, prim_funcs, function name, blocks to run) for each benchmark of benchmarks/cuda.py."""
    import cuda as bench
    from support.cuda_check import prim_funcs_of

    def funcs_of(src: str) -> dict:
        return prim_funcs_of(tvms.parse(src))

    out = [(f"fp32 matmul {n}^3", funcs_of(bench.matmul_src(n, "float32")), "mm", 2),
           (f"fp16 matmul {n}^3", funcs_of(bench.matmul_src(n, "float16")), "mm", 2)]
    if n % 128 == 0:
        out.append((f"fp16 wmma {n}^3", funcs_of(bench.tensor_core_matmul_src(n)), "mm", 2))
    if n % 256 == 0:   # Hopper's wgmma schedule (benchmarks/cuda.py times it on an H100 or H200)
        from support.cuda_check import scheduled_by
        from tvmscript.compiler import dlight as dl

        wgmma = scheduled_by(dl.gpu.MatmulTensorCore(instructions="wgmma"), bench.matmul_src(n, "float16"))
        out.append((f"fp16 wgmma {n}^3", wgmma, "mm", 2))
    out.append(("add 2^26", funcs_of(bench.ADD_SRC.format(n=1 << 26)), "add", 64))
    softmax = prim_funcs_of(bench.softmax_module(4096, 4096))
    out.append(("softmax 4096^2", softmax, next(iter(softmax)), 32))
    mlp = prim_funcs_of(bench.load_mlp())
    out.append(("MLP batch 1", mlp, None, None))
    return out


def _zeros(params: list) -> list:
    """Zero arrays for a prim_func's parameters (the counts do not depend on the values)."""
    from support.cuda_emulator import _np_dtype

    return [np.zeros(p.shape, _np_dtype(p.dtype)) if p.kind == "buffer" else 1 for p in params]


def emulated_estimate(label: str, funcs: dict, name, blocks, gpu) -> Row:
    """The estimate of one benchmark from the emulator's counters; every function of ``funcs``
    (one launch after another) when ``name`` is None."""
    from support.cuda_counters import CountingModule, traced_code

    code = traced_code(funcs)
    mod = CountingModule(code, blocks=blocks)
    kernels = []
    for fname in ([name] if name else list(funcs)):
        kernels += _launch_estimates(mod, code, fname, gpu)
    return _row(label, kernels, f"emulator, {blocks} blocks a launch" if blocks else "emulator, every block")


def _launch_estimates(mod, code, name: str, gpu) -> list:
    """One `roofline.Estimate` per kernel launch of prim_func ``name``, run once on the
    counting emulator ``mod`` (of the traced ``code``) with zero arguments."""
    mod.run(name, *_zeros(code.functions[name].params))
    return [roofline.estimate(c, gpu, pipelined=roofline.pipelined_kernel(code.source, c.kernel))
            for c in mod.counters]


def static_row(label: str, funcs: dict, name, gpu) -> Row:
    """The estimate of one benchmark from its TensorIR alone (`roofline.static_estimate`)."""
    kernels = [roofline.static_estimate(f, gpu, name=n) for n, f in funcs.items() if name in (None, n)]
    return _row(label, kernels, "static (TensorIR)")


def _row(label: str, kernels: list, how: str) -> Row:
    if len(kernels) == 1:
        return Row(label, kernels[0].seconds, kernels[0].bound, how, kernels)
    # Launch after launch of one VM call, which `tvms.compile` makes a CUDA graph: each kernel
    # costs its own time and the GPU's launch (in its estimate), not the VM's. (On an H200 the
    # MLP's 7 launches took 14.5 us as a graph; charged the VM's 6.6 us each, it was estimated
    # at 46.2 us.)
    total = sum(k.seconds for k in kernels)
    launches = sum(k.launch_seconds for k in kernels)
    bound = "GPU launches" if launches > total / 2 else max(kernels, key=lambda k: k.seconds).bound
    return Row(label, total, bound, f"{how}, {len(kernels)} launches in a CUDA graph", kernels)


def estimate_rows(gpu="h200", n: int = 4096, static: bool = False, log=None) -> list:
    """A `Row` per benchmark on ``gpu``: from the emulator's counters when g++ is there (and
    not ``static``), else from the TensorIR."""
    use_emulator = not static and shutil.which("g++") is not None
    rows = []
    for label, funcs, name, blocks in benchmark_funcs(n):
        t0 = time.perf_counter()
        row = emulated_estimate(label, funcs, name, blocks, gpu) if use_emulator else static_row(label, funcs, name,
                                                                                                gpu)
        if log:
            log(f"  {label}: {time.perf_counter() - t0:.1f} s")
        rows.append(row)
    return rows


def gpu_present(torch):
    """The estimates' GPU: the one present when `compiler.roofline` knows it, else an H200."""
    spec = roofline.gpu_for_device(torch.cuda.get_device_name(0))
    return spec if spec is not None else "h200"


def kernel_calls(mod, func: str = "main") -> dict:
    """prim_func name -> how many times one call of the Relax function ``func`` launches it
    (its ``R.call_tir`` bindings; what a CUDA graph replays)."""
    from tvmscript.ir import relax

    calls: dict = {}
    body = mod[func].body
    for block in body.blocks:
        for binding in block.bindings:
            value = getattr(binding, "value", None)
            if isinstance(value, relax.Call) and getattr(value.op, "name", "") in ("relax.call_tir",
                                                                                    "relax.call_tir_inplace"):
                callee = value.args[0].name_hint
                calls[callee] = calls.get(callee, 0) + 1
    return calls


def model_estimate(ex, target: str = "cuda", gpu="h200", blocks: int = 2, func: str = "main") -> Row:
    """The estimate of one call of ``func`` of an executable compiled for ``target`` (its
    options, ``-allow_tf32=1`` say, decide the schedules): each kernel it launches run on the
    emulator for ``blocks`` blocks a launch, counted and scaled (`emulated_estimate`), times
    the calls of it. Launches replayed by a CUDA graph cost the GPU's launch overhead each, not
    the VM's."""
    from support.cuda_counters import CountingModule, traced_code

    calls = kernel_calls(ex.mod, func)
    funcs = {name: ex.mod[name] for name in calls}
    code = traced_code(funcs, target)
    mod = CountingModule(code, blocks=blocks)
    kernels = []
    for name, times in calls.items():
        kernels += _launch_estimates(mod, code, name, gpu) * times
    graphed = bool(getattr(ex.functions.get(func), "cuda_graph", False))
    total = sum(k.seconds if graphed else max(k.seconds, VM_LAUNCH_S) for k in kernels)
    slowest = max(kernels, key=lambda k: k.seconds)
    return Row(func, total, slowest.bound, f"emulator, {blocks} blocks a launch, {len(kernels)} launches", kernels)


def measured_seconds(rows: list, n: int) -> dict:
    """Seconds per call from benchmarks/cuda.py's measured rows (label, tvms figure, ...), by
    the estimate rows' labels."""
    work = {"fp32 matmul": (f"fp32 matmul {n}^3", 2 * n ** 3 / 1e12),
            "fp16 matmul": (f"fp16 matmul {n}^3", 2 * n ** 3 / 1e12),
            "fp16 matmul (wmma)": (f"fp16 wmma {n}^3", 2 * n ** 3 / 1e12),
            "fp16 matmul (wgmma)": (f"fp16 wgmma {n}^3", 2 * n ** 3 / 1e12),
            "add 2^26": ("add 2^26", 3 * 4 * (1 << 26) / 1e9),
            "softmax 4096^2": ("softmax 4096^2", 2 * 4 * 4096 ** 2 / 1e9)}
    out = {}
    for label, ours, _, _ in rows:
        if label in work and ours:
            key, amount = work[label]
            out[key] = amount / ours
        elif label == "MLP batch 1 (VM)":
            out["MLP batch 1"] = ours * 1e-6
    return out


def print_estimates(rows: list, gpu, measured: dict = None) -> None:
    """The estimates as a table, with the measured times and their ratio when given."""
    spec = roofline.gpu_spec(gpu)
    print(f"estimated on {spec.name} (compiler/roofline.py):")
    head = f"{'kernel':<22} {'estimate':>11}  {'bound':<12}"
    print(head + (f" {'measured':>11} {'est/meas':>9}" if measured else "") + "  how")
    for r in rows:
        line = f"{r.label:<22} {_time(r.seconds):>11}  {r.bound:<12}"
        if measured:
            m = measured.get(r.label)
            line += f" {_time(m):>11} {r.seconds / m:9.2f}" if m else f" {'':>11} {'':>9}"
        print(line + f"  {r.how}")


def _time(seconds) -> str:
    return "" if seconds is None else roofline.format_seconds(seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h200", help=f"one of {', '.join(roofline.GPUS)}")
    ap.add_argument("--n", type=int, default=4096, help="matmul size")
    ap.add_argument("--static", action="store_true", help="from the TensorIR only, without the emulator")
    ap.add_argument("--kernels", action="store_true", help="each launch's estimate too")
    args = ap.parse_args()
    rows = estimate_rows(args.gpu, args.n, args.static, log=lambda m: print(m, file=sys.stderr))
    print_estimates(rows, args.gpu)
    if args.kernels:
        for r in rows:
            for k in r.kernels:
                print(f"  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
