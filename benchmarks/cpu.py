"""CPU back end speed: the seed MLP through the Relax VM, matmul kernels, a convolution and
an attention layer, start-up and compile time, and resnet18 and a GPT block (whole and by
layer) against PyTorch.

    python benchmarks/cpu.py [--calls 1000] [--repeat 5] [--matmul 1024] [--big-matmul 4096]
                             [--no-models] [--model-rounds 5] [--avx2]
    python benchmarks/cpu.py --latency-only [--latency-calls 2000] [--latency-pause-ms 0.5] [--busy 2]
    python benchmarks/cpu.py --bounds-only

The first table holds the CPU issue's goals, each figure side by side with NumPy's and
PyTorch eager's (``torch.no_grad()``, on the threads tvms's parallel loops use) in the same
run: the machine may be shared and noisy, so ratios taken together mean more than absolute
figures. Functions compared are timed in alternating rounds (`interleaved`: the best of the
rounds' medians, so that load from other processes hits both alike).

* the seed MLP in its zero-pipeline form (samples/mlp_zero.tvms: transpose, fused
  matmul+add+relu, transpose, fused matmul+add), the weights passed as parameters (no
  ``--bind``), run by the Relax VM at batch 1 and batch 64, against the NumPy expression
  ``maximum(x @ w0.T + b0, 0) @ w1.T + b1`` and PyTorch's ``F.linear`` chain; the inputs
  are tvms tensors already (as a TVM user passes ``tvm.nd.array``s). ``tvms.compile``'s own
  pipeline has the kernels read the weights transposed in place, so no transpose runs;
* a plain, unscheduled n x n x n float32 matmul prim_func (the form of samples/te_matmul.tvms)
  at 1024 and 4096, called destination-passing, in GFLOP/s, against ``np.matmul(a, b,
  out=c)`` (OpenBLAS) and ``torch.matmul(out=)``; and the same at M = 197, K = N = 768 (rows
  no good register tile divides), against the 1024^3 matmul's GFLOP/s;
* the 3x3 convolution of resnet18's first stage (1x64x56x56, 64 out, with its bias and ReLU)
  and ``softmax(Q K^T / 8) V`` over 1x4x128x64 tensors as a Relax function, against
  PyTorch (needs PyTorch);
* the ``R.nn.attention`` kernel (ViT-B/16's 1x197x12x64, a causal 1x128x8x32) as the flash
  nest, against the generic schedule, NumPy and PyTorch's SDPA (benchmarks/attention.py);
* a fresh ``tvms run samples/mlp.tvms`` process, start to exit (`bench_cold_start`): with the
  disk cache a first run left (the goal), with an empty cache folder, and ``tvms run`` of the
  model exported as a shared library;
* ``tvms.compile`` of the batch-1 MLP module with nothing cached (a fresh disk cache folder
  and the in-memory cache cleared, so everything from scheduling to machine code runs), with
  its kernels in the disk cache, and as an in-memory cache hit.

Latency under load (`bench_latency`; ``--latency-only`` runs only this): the batch-1 MLP's
per-call times through the VM, p50 and p99 of ``--latency-calls`` calls, first on an idle
machine, then with ``--busy`` background processes spinning (`BusyProcesses`, started and
always stopped by the benchmark), each in a serving loop (a ``--latency-pause-ms`` sleep
before each call: parallel-loop workers have gone idle by the next call) and back-to-back;
NumPy's figures for the same MLP alongside, and the issue's goal: tvms's p99 under load
within 3x its p50 idle (serving loop).

With ``--models`` (on by default when PyTorch is installed; ``--no-models`` skips it), the
model figures of the CPU issue, each against PyTorch eager (``torch.no_grad()``) with
``torch.set_num_threads`` set to the threads tvms's parallel loops use
(`schedule_cpu.parallel_threads`: ``OMP_NUM_THREADS``, else the CPUs this process may use),
as ratios of times in the same run:

* resnet18 (torchvision's layers: 7x7/2 stem, max pool, four stages of basic blocks with 1x1/2
  downsampling, global average pool, linear 512 -> 1000) at batch 1 and 224x224, written with
  `tvms.relax.BlockBuilder` and `tvms.relax.op` as the PyTorch importer emits it, the batch
  norms folded into the convolutions (a bias add) or not (``R.nn.batch_norm`` in inference
  mode); its distinct convolution layers alone (conv + bias + ReLU), the ops of the whole
  network, as ``tvms run`` compiles them: the zero pipeline, then `tvms.compile`;
* a GPT-style block (token and position embedding, layer norm, causal self-attention with
  8 heads over 128 tokens at d_model 256, output projection, residual, layer norm, GELU MLP
  of width 1024, residual), and its heaviest ops alone.

Every model's result is checked against PyTorch's before timing. The weights are function
parameters (not bound constants), as ``tvms run --params`` passes them, so packing them
into the kernels' layouts is part of each call, as it is of PyTorch's.

NumPy's BLAS is stated first (threadpoolctl, the ``bench`` extra: library, version, the
OpenBLAS kernel, threads), and whether ``OPENBLAS_CORETYPE`` forces a kernel. The issue's
goals are against NumPy on OpenBLAS's best kernel: where ``OPENBLAS_CORETYPE`` is set, NumPy's
1024^3 matmul and batch-64 MLP are also timed in a process without it (`BestKernelNumPy`), in
the same alternating rounds as tvms, and the better of the two is the goals' reference (named
in the goal column). With ``--avx2`` the reference is NumPy on the best kernel an AVX2 CPU
gets, OpenBLAS's Haswell kernel (``OPENBLAS_CORETYPE=Haswell``, in a process of its own unless
this one forces it).

``--avx2`` builds every tvms kernel of the run, the ``tvms run`` processes' too, for this CPU
with AVX-512 off (``llvm -mattr=-avx512f``): the AVX2 code path, 8-lane vectors in 16
registers, on an AVX-512 machine; the first line says what the kernels were built for.

The batch-64 module is generated from one template with the batch as a parameter
(`mlp_module`); at batch 1 the template is checked to be structurally equal to
samples/mlp_zero.tvms, and every module's result is checked against NumPy (or PyTorch)
before timing. The goals from the issue are printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tvmscript as tvms  # noqa: E402
from _timing import best_of, interleaved, interleaved_rounds, median_call, warmed_rounds  # noqa: E402
from tvmscript.runtime.host_cpu import host_target  # noqa: E402
from tvmscript.ir import structural_equal  # noqa: E402
from tvmscript.compiler import build_cpu  # noqa: E402
from tvmscript.runtime import cpu as tvms_cpu  # noqa: E402

# samples/mlp_zero.tvms with the batch dimension as a parameter: {b} is every batch extent
# (T.int64({b}) in the kernels' batch axes, ({b}, ...) in the Relax shapes).
MLP_TEMPLATE = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def fused_matmul1_add1(lv3: T.Buffer((T.int64({b}), T.int64(256)), "float32"), lv4: T.Buffer((T.int64(256), T.int64(10)), "float32"), p_fc2_bias: T.Buffer((T.int64(10),), "float32"), T_add_intermediate: T.Buffer((T.int64({b}), T.int64(10)), "float32")):
        T.func_attr({{"tir.noalias": True}})
        # with T.block("root"):
        matmul_intermediate = T.alloc_buffer((T.int64({b}), T.int64(10)))
        for i0, i1, k in T.grid(T.int64({b}), T.int64(10), T.int64(256)):
            with T.block("matmul"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                T.reads(lv3[v_i0, v_k], lv4[v_k, v_i1])
                T.writes(matmul_intermediate[v_i0, v_i1])
                with T.init():
                    matmul_intermediate[v_i0, v_i1] = T.float32(0.0)
                matmul_intermediate[v_i0, v_i1] = matmul_intermediate[v_i0, v_i1] + lv3[v_i0, v_k] * lv4[v_k, v_i1]
        for ax0, ax1 in T.grid(T.int64({b}), T.int64(10)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(matmul_intermediate[v_ax0, v_ax1], p_fc2_bias[v_ax1])
                T.writes(T_add_intermediate[v_ax0, v_ax1])
                T_add_intermediate[v_ax0, v_ax1] = matmul_intermediate[v_ax0, v_ax1] + p_fc2_bias[v_ax1]

    @T.prim_func(private=True)
    def fused_matmul_add_relu(x: T.Buffer((T.int64({b}), T.int64(784)), "float32"), lv: T.Buffer((T.int64(784), T.int64(256)), "float32"), p_fc1_bias: T.Buffer((T.int64(256),), "float32"), compute_intermediate: T.Buffer((T.int64({b}), T.int64(256)), "float32")):
        T.func_attr({{"tir.noalias": True}})
        # with T.block("root"):
        matmul_intermediate = T.alloc_buffer((T.int64({b}), T.int64(256)))
        T_add_intermediate = T.alloc_buffer((T.int64({b}), T.int64(256)))
        for i0, i1, k in T.grid(T.int64({b}), T.int64(256), T.int64(784)):
            with T.block("matmul"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                T.reads(x[v_i0, v_k], lv[v_k, v_i1])
                T.writes(matmul_intermediate[v_i0, v_i1])
                with T.init():
                    matmul_intermediate[v_i0, v_i1] = T.float32(0.0)
                matmul_intermediate[v_i0, v_i1] = matmul_intermediate[v_i0, v_i1] + x[v_i0, v_k] * lv[v_k, v_i1]
        for ax0, ax1 in T.grid(T.int64({b}), T.int64(256)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(matmul_intermediate[v_ax0, v_ax1], p_fc1_bias[v_ax1])
                T.writes(T_add_intermediate[v_ax0, v_ax1])
                T_add_intermediate[v_ax0, v_ax1] = matmul_intermediate[v_ax0, v_ax1] + p_fc1_bias[v_ax1]
        for i0, i1 in T.grid(T.int64({b}), T.int64(256)):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                T.reads(T_add_intermediate[v_i0, v_i1])
                T.writes(compute_intermediate[v_i0, v_i1])
                compute_intermediate[v_i0, v_i1] = T.max(T_add_intermediate[v_i0, v_i1], T.float32(0.0))

    @T.prim_func(private=True)
    def transpose(p_fc1_weight: T.Buffer((T.int64(256), T.int64(784)), "float32"), T_transpose: T.Buffer((T.int64(784), T.int64(256)), "float32")):
        T.func_attr({{"op_pattern": 2, "tir.noalias": True}})
        # with T.block("root"):
        for ax0, ax1 in T.grid(T.int64(784), T.int64(256)):
            with T.block("T_transpose"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(p_fc1_weight[v_ax1, v_ax0])
                T.writes(T_transpose[v_ax0, v_ax1])
                T_transpose[v_ax0, v_ax1] = p_fc1_weight[v_ax1, v_ax0]

    @T.prim_func(private=True)
    def transpose1(p_fc2_weight: T.Buffer((T.int64(10), T.int64(256)), "float32"), T_transpose: T.Buffer((T.int64(256), T.int64(10)), "float32")):
        T.func_attr({{"op_pattern": 2, "tir.noalias": True}})
        # with T.block("root"):
        for ax0, ax1 in T.grid(T.int64(256), T.int64(10)):
            with T.block("T_transpose"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(p_fc2_weight[v_ax1, v_ax0])
                T.writes(T_transpose[v_ax0, v_ax1])
                T_transpose[v_ax0, v_ax1] = p_fc2_weight[v_ax1, v_ax0]

    @R.function
    def main(x: R.Tensor(({b}, 784), dtype="float32"), p_fc1_weight: R.Tensor((256, 784), dtype="float32"), p_fc1_bias: R.Tensor((256,), dtype="float32"), p_fc2_weight: R.Tensor((10, 256), dtype="float32"), p_fc2_bias: R.Tensor((10,), dtype="float32")) -> R.Tensor(({b}, 10), dtype="float32"):
        R.func_attr({{"num_input": 1}})
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.transpose, (p_fc1_weight,), out_sinfo=R.Tensor((784, 256), dtype="float32"))
            lv_1 = R.call_tir(cls.fused_matmul_add_relu, (x, lv, p_fc1_bias), out_sinfo=R.Tensor(({b}, 256), dtype="float32"))
            lv4 = R.call_tir(cls.transpose1, (p_fc2_weight,), out_sinfo=R.Tensor((256, 10), dtype="float32"))
            gv = R.call_tir(cls.fused_matmul1_add1, (lv_1, lv4, p_fc2_bias), out_sinfo=R.Tensor(({b}, 10), dtype="float32"))
            R.output(gv)
        return gv
'''

# samples/te_matmul.tvms at M x K times K x N.
MATMUL_TEMPLATE = '''# from tvm.script import tir as T
@T.prim_func
def func(A: T.Buffer[({m}, {k}), "float32"], B: T.Buffer[({k}, {n}), "float32"], matmul: T.Buffer[({m}, {n}), "float32"]) -> None:
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    for i0, i1, i2 in T.grid({m}, {n}, {k}):
        with T.block("matmul"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            T.reads(A[i, k], B[k, j])
            T.writes(matmul[i, j])
            with T.init():
                matmul[i, j] = T.float32(0)
            matmul[i, j] = matmul[i, j] + A[i, k] * B[k, j]
'''

# The issue's odd-shaped matmul: a ViT-B/16's 197 tokens (196 patches and the class token)
# through a 768 -> 768 projection, (M, K, N).
ODD_MATMUL = (197, 768, 768)

# This CPU with AVX-512 switched off (--avx2): the AVX2 code path, 8-lane float vectors in 16
# registers, built and run here (a CPU named with -mcpu=haswell would be refused at run time).
AVX2_TARGET = "llvm -mattr=-avx512f"
TARGET = "llvm"  # what every tvms kernel of the run is built for (`build`); main sets it


def build(mod, **options):
    """``tvms.compile`` for the run's target (`TARGET`): the one place this benchmark builds
    kernels, so that ``--avx2`` covers all of them."""
    return tvms.compile(mod, target=TARGET, **options)


def matmul_func(m: int, k: int, n: int):
    """The plain, unscheduled M x K times K x N float32 matmul prim_func."""
    return tvms.parse(MATMUL_TEMPLATE.format(m=m, k=k, n=n))


def mlp_module(batch: int):
    return tvms.parse(MLP_TEMPLATE.format(b=batch))


def mlp_inputs(batch: int, rng) -> list:
    shapes = [(batch, 784), (256, 784), (256,), (10, 256), (10,)]
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


def mlp_numpy(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def fmt_time(s: float) -> str:
    return f"{s * 1e6:,.1f} us" if s < 1e-3 else f"{s * 1e3:,.2f} ms"


def mlp_torch(torch):
    """The MLP in PyTorch eager (``F.linear`` reads the weights transposed, as tvms does)."""
    F = torch.nn.functional

    def run(x, w0, b0, w1, b1):
        with torch.no_grad():
            return F.linear(F.relu(F.linear(x, w0, b0)), w1, b1)

    return run


def bench_mlp(batch: int, calls: int, rounds: int, rng, torch=None, best_numpy=None):
    """(tvms, NumPy, PyTorch or None) seconds per call, tvms's max error, and NumPy's on its
    best kernel (`BestKernelNumPy`, timed in the same rounds) or None without ``best_numpy``."""
    mod = mlp_module(batch)
    if batch == 1:
        sample = tvms.load(os.path.join(ROOT, "samples", "mlp_zero.tvms"))
        assert structural_equal(mod, sample), "the MLP template at batch 1 differs from samples/mlp_zero.tvms"
    ex = build(mod)
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    main = vm["main"]
    args = mlp_inputs(batch, rng)
    ref = mlp_numpy(*args)
    tensors = [tvms.nd.array(a) for a in args]
    out = main(*tensors).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3 * max(1.0, float(np.abs(ref).max())))
    fns = [lambda: main(*tensors), lambda: mlp_numpy(*args)]
    if torch is not None:
        run_torch, torch_args = mlp_torch(torch), [torch.from_numpy(a) for a in args]
        np.testing.assert_allclose(run_torch(*torch_args).numpy(), ref, rtol=1e-4, atol=1e-3)
        fns.append(lambda: run_torch(*torch_args))
    warmup = max(20, calls // 10)
    round_fns = warmed_rounds(fns, warmup)
    if best_numpy is not None:
        round_fns.append(best_numpy.mlp_rounds(batch, warmup))
    times = interleaved_rounds(round_fns, calls, rounds)
    return (times[0], times[1], (times[2] if torch is not None else None), float(np.abs(out - ref).max()),
            times[-1] if best_numpy is not None else None)


def bench_matmul(m: int, k: int, n: int, repeat: int, rng, torch=None, best_numpy=None, batch: int = 1):
    """GFLOP/s of tvms, NumPy and PyTorch (or None) for an M x K times K x N matmul, tvms's
    max error, and NumPy's GFLOP/s on its best kernel (`BestKernelNumPy`, timed in the same
    rounds; a square matmul only) or None without ``best_numpy``. Each of the ``repeat``
    alternating rounds times one sample of ``batch`` calls back-to-back (the best sample
    counts): a small matmul's sample holds as many flops as a large one's single call, so
    that their GFLOP/s compare like with like."""
    kernel = build(matmul_func(m, k, n))["main"]
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    c_np = np.empty((m, n), np.float32)
    kernel(a, b, c)
    np.matmul(a, b, out=c_np)
    np.testing.assert_allclose(c, c_np, rtol=1e-3, atol=1e-3 * np.sqrt(k))
    err = float(np.abs(c - c_np).max())
    fns = [lambda: kernel(a, b, c), lambda: np.matmul(a, b, out=c_np)]
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty((m, n))
        fns.append(lambda: torch.matmul(ta, tb, out=tc))
    samples = [lambda fn=fn: [fn() for _ in range(batch)] for fn in fns]
    round_fns = warmed_rounds(samples, 1)
    if best_numpy is not None:
        assert m == n == k and batch == 1, "the best-kernel NumPy process times one square matmul a sample"
        round_fns.append(best_numpy.matmul_rounds(n))
    times = interleaved_rounds(round_fns, repeat, repeat)
    gflops = [2.0 * m * n * k * batch / t / 1e9 for t in times]
    return (gflops[0], gflops[1], (gflops[2] if torch is not None else None), err,
            gflops[-1] if best_numpy is not None else None)


def bench_compile(repeat: int):
    """``tvms.compile`` of the seed MLP: cold (nothing cached: schedule, codegen, LLVM), from
    the disk cache (a new process's case: the in-memory cache empty), warm (in memory)."""
    import tempfile

    mod = tvms.load(os.path.join(ROOT, "samples", "mlp_zero.tvms"))
    build(mod)  # LLVM initialized, libgomp loaded: one-time process costs
    saved = os.environ.get("TVMS_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tvms-bench-cache-") as folder:
        fresh = iter(range(10 ** 6))

        def cold():
            os.environ["TVMS_CACHE_DIR"] = os.path.join(folder, str(next(fresh)))
            build_cpu.clear_cache()
            build(mod)

        def from_disk():
            build_cpu.clear_cache()
            build(mod)

        try:
            t_cold = best_of(cold, repeat)
            t_disk = best_of(from_disk, repeat)
        finally:
            if saved is None:
                os.environ.pop("TVMS_CACHE_DIR", None)
            else:
                os.environ["TVMS_CACHE_DIR"] = saved
    build_cpu.clear_cache()
    build(mod)
    t_warm = best_of(lambda: build(mod), repeat)
    return t_cold, t_disk, t_warm


def bench_cold_start(repeat: int):
    """Seconds of a fresh ``tvms run samples/mlp.tvms`` process (import, parse, pipeline,
    compile, run, print; for the run's `TARGET`): with an empty cache folder (the first run after installing: the
    parser tables and the kernels are built), with the disk cache the first run left (every
    later run), and ``tvms run`` of the same model exported as a shared library. Python's
    bytecode is written first, as an installed package has it (a checkout run with
    PYTHONDONTWRITEBYTECODE=1 would otherwise compile tvms's sources at every start)."""
    import shutil
    import subprocess
    import tempfile

    tvms_cmd = shutil.which("tvms")
    if tvms_cmd is None:
        return None
    sample = os.path.join(ROOT, "samples", "mlp.tvms")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run(*args, cache: str) -> float:
        t0 = time.perf_counter()
        proc = subprocess.run([tvms_cmd, *args], capture_output=True, env=dict(env, TVMS_CACHE_DIR=cache),
                              timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"tvms {' '.join(args)} failed: {proc.stderr.decode()[-500:]}")
        return time.perf_counter() - t0

    target = ("--target", TARGET)
    with tempfile.TemporaryDirectory(prefix="tvms-bench-start-") as folder:
        run("run", sample, *target, cache=os.path.join(folder, "warmup"))
        empty = min(run("run", sample, *target, cache=os.path.join(folder, f"empty{i}")) for i in range(repeat))
        warm_cache = os.path.join(folder, "warm")
        run("run", sample, *target, cache=warm_cache)
        warm = min(run("run", sample, *target, cache=warm_cache) for _ in range(repeat))
        library = os.path.join(folder, "mlp.so")
        run("compile", sample, *target, "-o", library, cache=warm_cache)
        from_library = min(run("run", library, cache=warm_cache) for _ in range(repeat))
    return empty, warm, from_library


# ----------------------------------------------------------------------------- NumPy's BLAS

CORETYPE = "OPENBLAS_CORETYPE"  # forces OpenBLAS's kernel (e.g. Haswell on an AVX-512 CPU)
AVX2_KERNEL = "Haswell"  # OpenBLAS's best kernel on a CPU with AVX2 and FMA, no AVX-512


def numpy_blas() -> str:
    """NumPy's BLAS as threadpoolctl finds it loaded: library, version, the kernel OpenBLAS
    chose for this CPU (its "architecture") and threads; the goals are only meaningful
    against OpenBLAS's best kernel. threadpoolctl is imported here, not at the top: it is in
    the ``bench`` extra, and the benchmark runs without it."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl, which tells, is not installed: pip install -e \".[bench]\")"
    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    if not blas:
        return "none loaded, says threadpoolctl"
    return "; ".join(
        f"{lib.get('internal_api')} {lib.get('version')}, kernel {lib.get('architecture') or '?'}, "
        f"{lib.get('num_threads')} threads" for lib in blas)


class BestKernelNumPy:
    """NumPy in a process of its own without OPENBLAS_CORETYPE, where OpenBLAS picks its own
    (best) kernel for this CPU: the reference of the matmul and batch-64 goals when this
    process runs a forced one (the kernel is chosen when OpenBLAS loads, hence the process).
    It times rounds on request (`serve_numpy_rounds`), so that they alternate with this
    process's in `interleaved_rounds` and the load of the moment hits both alike.
    `start` gives None when OPENBLAS_CORETYPE is not set: this process's NumPy is the best."""

    def __init__(self, coretype: Optional[str] = None) -> None:
        import subprocess

        here = os.path.dirname(os.path.abspath(__file__))
        code = f"import sys; sys.path.insert(0, {here!r}); import cpu; cpu.serve_numpy_rounds()"
        env = {k: v for k, v in os.environ.items() if k != CORETYPE}
        if coretype:
            env[CORETYPE] = coretype
        self.label = f"NumPy, {CORETYPE}={coretype}" if coretype else f"NumPy, {CORETYPE} unset"
        # OpenBLAS's threads spin ~0.1 s after a call (2^28 cycles) before they sleep: on 2
        # cores they then hold one while tvms's next round runs (its batch-64 MLP read 650 us
        # for 100). 2^4 cycles: they sleep at once once a round is over.
        env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.blas = self._ask(["blas"])

    @classmethod
    def start(cls, avx2: bool = False):
        """The reference process, or None when this process's NumPy is the reference. With
        ``avx2`` (the AVX2 code path on an AVX-512 CPU), the best kernel an AVX2 CPU gets is
        OpenBLAS's Haswell kernel: the reference is NumPy on it, here if this process forces
        it, else in a process that does."""
        if avx2:
            return None if os.environ.get(CORETYPE, "").lower() == AVX2_KERNEL.lower() else cls(AVX2_KERNEL)
        return cls() if CORETYPE in os.environ else None

    def _ask(self, request: list):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"NumPy without {CORETYPE} exited (code {self.proc.wait()}); its stderr is above")
        return json.loads(line)

    def matmul_rounds(self, n: int):
        """A round function (`interleaved_rounds`) of ``np.matmul`` at n x n x n; warms up first."""
        self._ask(["matmul", n, 1])
        return lambda calls: self._ask(["matmul", n, calls])

    def mlp_rounds(self, batch: int, warmup: int):
        """A round function of the MLP's NumPy expression (`mlp_numpy`) at ``batch``."""
        self._ask(["mlp", batch, warmup])
        return lambda calls: self._ask(["mlp", batch, calls])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def serve_numpy_rounds() -> None:
    """`BestKernelNumPy`'s process: one JSON request a line on stdin, ``["blas"]`` (answered
    with `numpy_blas`) or ``[workload, size, calls]``, answered with the median seconds of
    ``calls`` calls (`median_call`) on inputs made once per workload and size."""
    rng = np.random.default_rng(0)
    workloads = {}
    for line in sys.stdin:
        request = json.loads(line)
        if request[0] == "blas":
            print(json.dumps(numpy_blas()), flush=True)
            continue
        kind, size, calls = request
        if (kind, size) not in workloads:
            if kind == "matmul":
                a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
                c = np.empty((size, size), np.float32)
                workloads[kind, size] = lambda a=a, b=b, c=c: np.matmul(a, b, out=c)
            else:
                args = mlp_inputs(size, rng)
                workloads[kind, size] = lambda args=args: mlp_numpy(*args)
        print(json.dumps(median_call(workloads[kind, size], calls)), flush=True)


def target_line(avx2: bool) -> str:
    """What the tvms kernels were built for: the target, the CPU, the vector unit the default
    schedule tiles for; with ``--avx2`` on a CPU without AVX-512, that the option changed
    nothing."""
    from tvmscript.compiler.llvm_target import cpu_target, vector_unit
    from tvmscript.target import Target

    cpu = cpu_target(Target(TARGET))
    unit = vector_unit(cpu)
    line = (f"tvms kernels built for {TARGET!r} ({cpu.cpu}"
            + (", AVX-512 off: the AVX2 code path" if avx2 else "")
            + f"): {unit.bytes // 4}-lane float32 vectors, {unit.registers} vector registers")
    if avx2 and vector_unit(host_target()).bytes != 64:
        line += "; this CPU has no AVX-512, so --avx2 changes nothing"
    return line


# ----------------------------------------------------------------------------- latency under load

BUSY_LOOP = "while True: pass"
LATENCY_GOAL = 3.0  # p99 under load within this many times p50 idle (the goal)


class BusyProcesses:
    """``count`` background Python processes spinning on ``while True: pass`` while the
    ``with`` block runs: other work keeping every core busy, as on a shared server. They are
    started with `subprocess` (no fork of this process and its thread pools) and always
    terminated on leaving the block, on error too."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list = []

    def __enter__(self):
        import subprocess

        try:
            for _ in range(self.count):
                self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY_LOOP]))
        except BaseException:
            self.stop()
            raise
        time.sleep(0.2)  # let them start spinning before anything is timed
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except Exception:  # noqa: BLE001 - still there: kill it
                p.kill()
                p.wait()
        self.procs = []


def per_call_times(fns: list, calls: int, pause: float) -> list:
    """Per-call times (seconds) of each function, the functions called alternately (f, g, f,
    g, ...) so that the load of the moment hits all alike; ``pause`` seconds of sleep before
    each call (0: back-to-back), as a serving loop waits for its next request."""
    for fn in fns:
        for _ in range(20):
            fn()
    times = [[] for _ in fns]
    clock = time.perf_counter
    for _ in range(calls):
        for i, fn in enumerate(fns):
            if pause:
                time.sleep(pause)
            t0 = clock()
            fn()
            times[i].append(clock() - t0)
    return times


def percentiles(times: list) -> tuple:
    """(p50, p99) of a list of times."""
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def bench_latency(calls: int, pause_ms: float, busy: int, rng) -> None:
    """The batch-1 MLP's per-call latency (p50, p99) through the VM, idle and with ``busy``
    spinning background processes, against NumPy's for the same MLP, in a serving loop (a
    ``pause_ms`` sleep before each call) and back-to-back; prints the table and the ratio
    p99 loaded / p50 idle against `LATENCY_GOAL`, for the serving loop. Back-to-back under
    load, the process never sleeps, so the scheduler shares its core with the busy ones: now
    and then a call waits out their time slice (milliseconds), whatever the kernels do; a
    serving loop that sleeps between requests is woken ahead of them."""
    ex = build(mlp_module(1))
    main = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"]
    args = mlp_inputs(1, rng)
    ref = mlp_numpy(*args)
    tensors = [tvms.nd.array(a) for a in args]
    np.testing.assert_allclose(main(*tensors).numpy(), ref, rtol=1e-4, atol=1e-3 * max(1.0, float(np.abs(ref).max())))
    fns = [lambda: main(*tensors), lambda: mlp_numpy(*args)]
    modes = [(f"{pause_ms:g} ms sleep before each call", pause_ms / 1e3), ("back-to-back", 0.0)]
    results = {}
    for mode, pause in modes:
        results[mode, "idle"] = [percentiles(t) for t in per_call_times(fns, calls, pause)]
    with BusyProcesses(busy):
        for mode, pause in modes:
            results[mode, "loaded"] = [percentiles(t) for t in per_call_times(fns, calls, pause)]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"latency under load: MLP batch 1, VM call, {calls} calls each of tvms and NumPy (alternating), "
          f"idle and with {busy} busy background processes ({BUSY_LOOP!r}) on {cpus} CPUs; "
          f"tvms parallel runtime: {tvms_cpu.parallel_runtime()}, wait policy: {tvms_cpu.wait_policy()}")
    header = ("calls", "machine", "tvms p50", "tvms p99", "NumPy p50", "NumPy p99", "tvms p99 / tvms p50 idle")
    rows = []
    for mode, _ in modes:
        p50_idle = results[mode, "idle"][0][0]
        for cond, label in (("idle", "idle"), ("loaded", f"{busy} busy processes")):
            (t50, t99), (n50, n99) = results[mode, cond]
            rows.append((mode, label, fmt_time(t50), fmt_time(t99), fmt_time(n50), fmt_time(n99),
                         f"{t99 / p50_idle:.1f}x"))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    mode = modes[0][0]
    ratio = results[mode, "loaded"][0][1] / results[mode, "idle"][0][0]
    print(f"goal (serving loop, {mode}): tvms p99 loaded / p50 idle = {ratio:.1f}x, <= {LATENCY_GOAL:g}x: "
          f"{'met' if ratio <= LATENCY_GOAL else 'MISSED'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="timed VM calls of the batch-1 MLP (and as many "
                    "NumPy evaluations); batch 64 gets a fifth of them")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of each MLP, calls of the matmul, runs of "
                    "each compile")
    ap.add_argument("--matmul", type=int, default=1024, help="matmul size n (n x n x n)")
    ap.add_argument("--big-matmul", type=int, default=4096, help="the large matmul's size (0: skip it)")
    ap.add_argument("--models", action=argparse.BooleanOptionalAction, default=None,
                    help="the model figures against PyTorch (default: when PyTorch is installed)")
    ap.add_argument("--model-rounds", type=int, default=5, help="alternating rounds of each model's timing")
    ap.add_argument("--latency-only", action="store_true", help="run only the latency-under-load section")
    ap.add_argument("--bounds-only", action="store_true", help="run only the bounds-check cost section")
    ap.add_argument("--latency-calls", type=int, default=2000, help="timed calls of each of tvms and NumPy per "
                    "condition in the latency-under-load section")
    ap.add_argument("--latency-pause-ms", type=float, default=0.5, help="sleep before each call of the serving "
                    "loop in the latency-under-load section")
    ap.add_argument("--busy", type=int, default=2, help="busy background processes of the latency-under-load "
                    "section")
    ap.add_argument("--avx2", action="store_true", help=f"build every tvms kernel for the AVX2 code path: this "
                    f"CPU with AVX-512 off ({AVX2_TARGET!r}; the same as the default on a CPU without AVX-512)")
    args = ap.parse_args()
    if args.matmul <= 0:
        ap.error("--matmul must be positive: its row is the reference of the odd-shaped matmul's goal")
    global TARGET
    TARGET = AVX2_TARGET if args.avx2 else "llvm"
    rng = np.random.default_rng(0)
    print(target_line(args.avx2))
    if args.latency_only:
        bench_latency(args.latency_calls, args.latency_pause_ms, args.busy, rng)
        return
    if args.bounds_only:
        bench_bounds_check(args.calls, args.repeat, args.matmul, _want_models(args.models), rng)
        return
    calls64 = max(20, args.calls // 5)
    models = _want_models(args.models)
    torch = None
    if models:
        import torch

        from tvmscript.compiler.schedule_cpu import parallel_threads

        torch.set_num_threads(parallel_threads())

    t_cold, t_disk, t_warm = bench_compile(args.repeat)
    starts = bench_cold_start(args.repeat)
    b1 = bench_mlp(1, args.calls, args.repeat, rng, torch)
    best_numpy = BestKernelNumPy.start(args.avx2)  # the goals' reference where this process's is not it
    try:
        b64 = bench_mlp(64, calls64, args.repeat, rng, torch, best_numpy)
        matmuls = []
        for i, n in enumerate(n for n in (args.matmul, args.big_matmul) if n):
            rounds = args.repeat if n <= 2048 else min(args.repeat, 3)  # one call a round
            matmuls.append((n, bench_matmul(n, n, n, rounds, rng, torch, best_numpy if i == 0 else None)))
        best_blas = best_numpy.blas if best_numpy else None
        best_label = best_numpy.label if best_numpy else "NumPy"
    finally:
        if best_numpy is not None:
            best_numpy.close()
    # A sample of the odd matmul holds the flops of one n^3 call: about 9 calls at 197x768x768.
    odd_batch = max(1, round(args.matmul ** 3 / np.prod(ODD_MATMUL)))
    odd = bench_matmul(*ODD_MATMUL, args.repeat, rng, torch, batch=odd_batch)
    layers = bench_layers(args.model_rounds, rng) if models else []

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    def torch_cell(t) -> str:
        return "" if t is None else fmt_time(t)

    # The references of the goals: NumPy on OpenBLAS's best kernel. With
    # OPENBLAS_CORETYPE set, the better of this process's NumPy and one without it (with
    # --avx2, one on the Haswell kernel).
    best_gflops, best_mlp64 = matmuls[0][1][4], b64[4]
    matmul_ref = max(matmuls[0][1][1], best_gflops) if best_blas else matmuls[0][1][1]
    mlp64_ref = min(b64[1], best_mlp64) if best_blas else b64[1]

    def reference_name(in_process_is_better: bool) -> str:
        if best_blas is None:
            return "NumPy"
        return "NumPy (this process)" if in_process_is_better else best_label

    rows = []
    r = b1[0] / b1[1]
    rows.append(("seed MLP, batch 1, VM call (weights as parameters)", fmt_time(b1[0]), fmt_time(b1[1]),
                 torch_cell(b1[2]), f"{r:.2f}x NumPy's time" + (f", {b1[0] / b1[2]:.2f}x PyTorch's" if b1[2] else ""),
                 f"<= 1.0x NumPy: {verdict(r <= 1.0)}"))
    r = b64[0] / mlp64_ref
    rows.append(("seed MLP, batch 64, VM call", fmt_time(b64[0]), fmt_time(b64[1]), torch_cell(b64[2]),
                 f"{b64[0] / b64[1]:.2f}x NumPy's time" + (f", {b64[0] / b64[2]:.2f}x PyTorch's" if b64[2] else ""),
                 f"<= 0.8x {reference_name(b64[1] <= mlp64_ref)}: {verdict(r <= 0.8)}"))
    if best_blas:
        rows.append((f"  {best_label} (own process)", "", fmt_time(best_mlp64), "",
                     f"tvms: {b64[0] / best_mlp64:.2f}x its time", ""))
    # What the goal asks of the hardware: the MLP's matmuls at 0.8x the reference's time, as a
    # share of the fastest 1024^3 matmul this run saw with this code path (near its FMA peak).
    needed = 2 * 64 * (784 * 256 + 256 * 10) / (0.8 * mlp64_ref) / 1e9
    fastest = max(matmuls[0][1][0], matmuls[0][1][1], best_gflops if best_blas else 0.0)
    rows.append(("  0.8x of it means, in GFLOP/s", f"{needed:,.1f}", "", "",
                 f"{needed / fastest * 100:.0f}% of the fastest 1024^3 matmul here ({fastest:,.1f})", ""))
    for i, (n, (gf_tvms, gf_np, gf_torch, *_)) in enumerate(matmuls):
        ref = matmul_ref if i == 0 else gf_np
        pct = gf_tvms / ref * 100
        goal = (f">= 90% of {reference_name(gf_np >= matmul_ref)}: {verdict(pct >= 90)}" if i == 0
                else f">= 70% of NumPy: {verdict(pct >= 70)}")
        rows.append((f"matmul {n}^3 fp32, GFLOP/s (default schedule)", f"{gf_tvms:,.1f}", f"{gf_np:,.1f}",
                     "" if gf_torch is None else f"{gf_torch:,.1f}", f"{gf_tvms / gf_np * 100:.0f}% of NumPy's", goal))
        if i == 0 and best_blas:
            rows.append((f"  {best_label} (own process)", "", f"{best_gflops:,.1f}", "",
                         f"tvms: {gf_tvms / best_gflops * 100:.0f}% of it", ""))
    m, k, n = ODD_MATMUL
    pct = odd[0] / matmuls[0][1][0] * 100
    rows.append((f"matmul M={m} K=N={k} fp32, GFLOP/s", f"{odd[0]:,.1f}", f"{odd[1]:,.1f}",
                 "" if odd[2] is None else f"{odd[2]:,.1f}",
                 f"{pct:.0f}% of tvms's {matmuls[0][0]}^3, {odd[0] / odd[1] * 100:.0f}% of NumPy's",
                 f">= 90% of the {matmuls[0][0]}^3 matmul's: {verdict(pct >= 90)}"))
    for name, t_tvms, t_torch in layers:
        r = t_tvms / t_torch
        rows.append((name, fmt_time(t_tvms), "", fmt_time(t_torch), f"{r:.2f}x PyTorch's time",
                     f"<= 1.5x PyTorch: {verdict(r <= 1.5)}"))
    if starts is not None:
        empty, warm, from_library = starts
        rows += [("cold `tvms run samples/mlp.tvms`, disk cache warm", f"{warm:.2f} s", "", "", "",
                  f"<= 0.5 s: {verdict(warm <= 0.5)}"),
                 ("  the same, first run (empty cache folder)", f"{empty:.2f} s", "", "", "", ""),
                 ("  `tvms run mlp.so` (tvms compile -o mlp.so)", f"{from_library:.2f} s", "", "", "", "")]
    rows += [("tvms.compile of the MLP: nothing cached", fmt_time(t_cold), "", "", "", ""),
             ("  kernels from the disk cache", fmt_time(t_disk), "", "", "", ""),
             ("  in-memory cache hit", fmt_time(t_warm), "", "", "", "")]
    no_torch = "PyTorch (--no-models)" if args.models is False else "PyTorch (not installed)"
    header = ("measure", "tvms", "NumPy", "PyTorch eager" if torch is not None else no_torch,
              "ratio", "goal")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    threads = tvms_cpu.num_threads()  # what the kernels' parallel loops run on
    versions = f"NumPy {np.__version__}" + (f", PyTorch {torch.__version__}" if torch is not None else "")
    print(f"{host_target().cpu}, {threads} threads ({tvms_cpu.parallel_runtime()}), {versions}; "
          f"MLP: best median of {args.repeat} alternating rounds of {args.calls // args.repeat} (batch 1) / "
          f"{calls64 // args.repeat} (batch 64) calls; matmul: best of {args.repeat} (of 3 from 4096), {'x'.join(map(str, ODD_MATMUL))}: "
          f"best of {args.repeat} samples of {odd_batch} calls; layers: "
          f"best median of {args.model_rounds} rounds; start-up and compile: best of {args.repeat}")
    coretype = f"{CORETYPE}={os.environ[CORETYPE]}" if CORETYPE in os.environ else f"{CORETYPE} not set"
    if best_blas and args.avx2:
        reference = (f"; the goals' NumPy is the better of this process and one on OpenBLAS's best AVX2 kernel "
                     f"({best_label}), timed in the same rounds: {best_blas}")
    elif best_blas:
        reference = (f" (set: the goals' NumPy is the better of this process and one without it, where OpenBLAS "
                     f"picks its kernel, timed in the same rounds: {best_blas})")
    else:
        reference = "; the goals' NumPy: this process's" + (" (OpenBLAS's best AVX2 kernel)" if args.avx2 else "")
    print(f"NumPy's BLAS: {numpy_blas()}; {coretype}{reference}")
    print(f"checked before timing: the batch-1 template equals samples/mlp_zero.tvms; max |tvms - NumPy|: "
          f"{b1[3]:.1e} (MLP batch 1), {b64[3]:.1e} (batch 64), "
          + ", ".join(f"{m[1][3]:.1e} (matmul {m[0]})" for m in matmuls)
          + f", {odd[3]:.1e} (matmul {'x'.join(map(str, ODD_MATMUL))}); layers against PyTorch\n")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if not models:
        print("(conv2d and attention are measured against PyTorch: "
              + ("drop --no-models" if args.models is False else "install it") + " for those rows)")
    print()
    from attention import attention_rows  # benchmarks/attention.py: the flash kernel, per shape
    print("\n".join(attention_rows(args.repeat)))
    print()
    bench_bounds_check(args.calls, args.repeat, args.matmul, models, rng)
    print()
    bench_latency(args.latency_calls, args.latency_pause_ms, args.busy, rng)
    if models:
        print()
        bench_models(args.model_rounds)
    elif args.models is None:
        print("\nmodel figures skipped: PyTorch is not installed")


def bench_layers(rounds: int, rng) -> list:
    """The issue's two layers against PyTorch eager: (name, tvms seconds, PyTorch seconds)."""
    conv = _model_row("conv2d NCHW 1x64x56x56, 3x3, 64 out (+bias+ReLU)",
                      conv_layer_module((64, 64, 56, 3, 1, 1, 1), rng), rounds)
    attention = _model_row("attention softmax(Q K^T / 8) V, Q/K/V 1x4x128x64", attention_module(rng), rounds)
    return [(row[0], row[2], row[3]) for row in (conv, attention)]


def _want_models(asked) -> bool:
    """Whether to run the PyTorch model figures: ``--models``/``--no-models``, else when
    PyTorch is installed."""
    if asked is False:
        return False
    try:
        import torch  # noqa: F401
    except ImportError:
        if asked:
            raise SystemExit("--models needs PyTorch")
        return False
    return True


# ----------------------------------------------------------------------------- bounds checks


def checks_kept(ex) -> dict:
    """The run-time bounds checks an executable's kernels keep, as `tvms.compile` builds them
    (default CPU schedule, then lowering with checks): ``{"in place": n, "hoisted": m}``."""
    from tvmscript import tir
    from tvmscript.compiler.bounds_check import count_checks
    from tvmscript.compiler.lower_tir import lower
    from tvmscript.compiler.schedule_cpu import default_schedule

    total = {"in place": 0, "hoisted": 0}
    for gv, func in ex.mod.functions.items():
        if isinstance(func, tir.PrimFunc):
            for kind, n in count_checks(lower(default_schedule(func), bounds_check=True)).items():
                total[kind] += n
    return total


def kernel_code(ex) -> list:
    """The LLVM IR of an executable's kernels, as generated (to tell whether checks changed it)."""
    return sorted({k.module.get_source("llvm-unopt") for k in ex.kernels.values()})


def bench_bounds_check(calls: int, rounds: int, matmul_n: int, models: bool, rng) -> None:
    """What bounds checking costs (issue 12: at most 5%): each workload compiled with and
    without checks, both timed in the same alternating rounds (`interleaved`), with the
    checks the analysis could not prove and left in the kernels."""
    workloads = [("MLP batch 1, VM call", mlp_module(1), mlp_inputs(1, rng), calls),
                 ("MLP batch 64, VM call", mlp_module(64), mlp_inputs(64, rng), max(20, calls // 5))]
    if models:
        built = resnet18_module(True, rng)
        workloads.append(("resnet18 (batch norm folded)", tvms.relax.get_pipeline("zero")(built[0]), built[1], 12))
        built = gpt_block_module(rng)
        workloads.append(("GPT block", tvms.relax.get_pipeline("zero")(built[0]), built[1], 12))
    rows = []
    for name, mod, inputs, n in workloads:
        fns, kept, outs, code = [], None, [], []
        for checked in (True, False):
            ex = build(mod, bounds_check=checked)
            kept = checks_kept(ex) if checked else kept
            code.append(kernel_code(ex))
            main = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"]
            tensors = [tvms.nd.array(a) for a in inputs]
            outs.append(main(*tensors).numpy())
            fns.append(lambda main=main, tensors=tensors: main(*tensors))
        np.testing.assert_array_equal(outs[0], outs[1])
        t_on, t_off = interleaved(fns, n, warmup=2, rounds=rounds)
        rows.append((name, f"{kept['hoisted']} hoisted, {kept['in place']} in place", fmt_time(t_on), fmt_time(t_off),
                     t_on / t_off, code[0] == code[1]))
    kernel_on = build(matmul_func(matmul_n, matmul_n, matmul_n))["main"]
    kernel_off = build(matmul_func(matmul_n, matmul_n, matmul_n), bounds_check=False)["main"]
    a, b = (rng.standard_normal((matmul_n, matmul_n), dtype=np.float32) for _ in range(2))
    c = np.empty((matmul_n, matmul_n), np.float32)
    t_on, t_off = interleaved([lambda: kernel_on(a, b, c), lambda: kernel_off(a, b, c)], rounds, warmup=1, rounds=rounds)
    same = kernel_on.module.get_source("llvm-unopt") == kernel_off.module.get_source("llvm-unopt")
    rows.append((f"matmul {matmul_n}^3 kernel", "0 hoisted, 0 in place", fmt_time(t_on), fmt_time(t_off), t_on / t_off,
                 same))
    header = ("workload", "checks left after proof", "checked", "unchecked", "cost", "goal", "code")
    table = [(r[0], r[1], r[2], r[3], f"{(r[4] - 1) * 100:+.1f}%", f"<= 5%: {'met' if r[4] <= 1.05 else 'MISSED'}",
              "identical: the difference is noise" if r[5] else "differs") for r in rows]
    widths = [max(len(r[i]) for r in table + [header]) for i in range(len(header))]
    print("bounds checks: each workload compiled with checks (the default) and with bounds_check=False, timed in "
          f"alternating rounds (best median of {rounds}); results identical")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


# ----------------------------------------------------------------------------- models against PyTorch


def _tensor_info(shape, dtype="float32"):
    return tvms.relax.TensorStructInfo(list(shape), dtype)


class _Params:
    """Parameters of a model under construction: Relax variables and their random values."""

    def __init__(self, rng) -> None:
        self.rng, self.vars, self.values = rng, [], []

    def new(self, name: str, shape, kind: str = "weight", value=None):
        from tvmscript.relax import op

        if value is None:
            if kind == "weight":  # He initialization keeps activations of a deep net in range
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
                value = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            elif kind == "scale":
                value = 1 + 0.1 * self.rng.standard_normal(shape)
            elif kind == "variance":
                value = 1 + 0.1 * np.abs(self.rng.standard_normal(shape))
            else:
                value = 0.1 * self.rng.standard_normal(shape)
        self.vars.append(op.make_var(name, _tensor_info(shape)))
        self.values.append(np.asarray(value, "float32"))
        return self.vars[-1]


RESNET18_STAGES = [(64, 1), (128, 2), (256, 2), (512, 2)]  # (channels, first block's stride)


def resnet18_module(bn_folded: bool, rng):
    """(module, inputs, torch function of the inputs): resnet18 at batch 1."""
    import torch.nn.functional as F

    from tvmscript.relax import op

    params = _Params(rng)
    x = op.make_var("x", _tensor_info((1, 3, 224, 224)))
    bb = tvms.relax.BlockBuilder()
    layers = []  # per conv: (weight index, strides, padding, relu, bias index or batch-norm indices)

    def conv(h, cin, cout, k, stride, pad, relu=True):
        n = len(layers)
        w = params.new(f"conv{n}_weight", (cout, cin, k, k))
        first = len(params.values) - 1
        h = bb.emit(op.nn.conv2d(h, w, strides=[stride, stride], padding=[pad] * 4))
        if bn_folded:
            h = bb.emit(op.add(h, params.new(f"conv{n}_bias", (1, cout, 1, 1), "bias")))
        else:
            stats = [params.new(f"bn{n}_{name}", (cout,), kind) for name, kind in
                     [("weight", "scale"), ("bias", "bias"), ("mean", "bias"), ("var", "variance")]]
            h = bb.emit(tvms.relax.TupleGetItem(bb.emit(op.nn.batch_norm(h, *stats, training=False)), 0))
        layers.append((first, stride, pad, relu))
        return bb.emit(op.nn.relu(h)) if relu else h

    blocks = []
    with bb.function("main"):
        with bb.dataflow():
            h = conv(x, 3, 64, 7, 2, 3)
            h = bb.emit(op.nn.max_pool2d(h, [3, 3], [2, 2], padding=[1, 1, 1, 1]))
            cin = 64
            for cout, stride in RESNET18_STAGES:
                for b in range(2):
                    s = stride if b == 0 else 1
                    start = len(layers)
                    out = conv(conv(h, cin, cout, 3, s, 1), cout, cout, 3, 1, 1, relu=False)
                    down = conv(h, cin, cout, 1, s, 0, relu=False) if s != 1 or cin != cout else h
                    blocks.append(list(range(start, len(layers))))
                    h = bb.emit(op.nn.relu(bb.emit(op.add(out, down))))
                    cin = cout
            h = bb.emit(op.reshape(bb.emit(op.nn.adaptive_avg_pool2d(h, [1, 1])), [1, 512]))
            fc_w, fc_b = params.new("fc_weight", (1000, 512)), params.new("fc_bias", (1000,), "bias")
            out = bb.emit_output(bb.emit(op.add(op.nn.dense(h, fc_w), fc_b)))
        bb.emit_func_output(out, params=[x] + params.vars)
    inputs = [rng.standard_normal((1, 3, 224, 224)).astype("float32")] + params.values

    def torch_fn(x, *w):
        def apply(h, n):
            first, stride, pad, relu = layers[n]
            h = F.conv2d(h, w[first], stride=stride, padding=pad)
            if bn_folded:
                h = h + w[first + 1]
            else:
                g, b, mean, var = w[first + 1:first + 5]
                h = F.batch_norm(h, mean, var, g, b, False, 0.0, 1e-5)
            return F.relu(h) if relu else h

        h = F.max_pool2d(apply(x, 0), 3, 2, 1)
        for block in blocks:
            out = apply(apply(h, block[0]), block[1])
            h = F.relu(out + (apply(h, block[2]) if len(block) == 3 else h))
        return F.linear(F.adaptive_avg_pool2d(h, 1).reshape(1, 512), w[-2], w[-1])

    return bb.get(), inputs, torch_fn


RESNET18_CONVS = [  # (in, out, input size, kernel, stride, padding, times in the network)
    (3, 64, 224, 7, 2, 3, 1), (64, 64, 56, 3, 1, 1, 4), (64, 128, 56, 3, 2, 1, 1), (64, 128, 56, 1, 2, 0, 1),
    (128, 128, 28, 3, 1, 1, 3), (128, 256, 28, 3, 2, 1, 1), (128, 256, 28, 1, 2, 0, 1),
    (256, 256, 14, 3, 1, 1, 3), (256, 512, 14, 3, 2, 1, 1), (256, 512, 14, 1, 2, 0, 1),
    (512, 512, 7, 3, 1, 1, 3),
]


def conv_layer_module(layer, rng):
    """One convolution of resnet18 with its (folded) batch norm's bias and its ReLU."""
    import torch.nn.functional as F

    from tvmscript.relax import op

    cin, cout, size, k, stride, pad, _ = layer
    params = _Params(rng)
    x = op.make_var("x", _tensor_info((1, cin, size, size)))
    bb = tvms.relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            w, b = params.new("w", (cout, cin, k, k)), params.new("b", (1, cout, 1, 1), "bias")
            h = bb.emit(op.add(bb.emit(op.nn.conv2d(x, w, strides=[stride] * 2, padding=[pad] * 4)), b))
            out = bb.emit_output(bb.emit(op.nn.relu(h)))
        bb.emit_func_output(out, params=[x] + params.vars)
    inputs = [rng.standard_normal((1, cin, size, size)).astype("float32")] + params.values
    return bb.get(), inputs, lambda x, w, b: F.relu(F.conv2d(x, w, stride=stride, padding=pad) + b)


def attention_module(rng, heads: int = 4, seq: int = 128, dim: int = 64):
    """``softmax(Q K^T / 8) V`` as a Relax function of Q, K, V (1 x heads x seq x dim), and
    PyTorch's expression of it."""
    import torch

    from tvmscript.relax import op

    shape = (1, heads, seq, dim)
    q, k, v = (op.make_var(name, _tensor_info(shape)) for name in "qkv")
    bb = tvms.relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            scores = bb.emit(op.matmul(q, bb.emit(op.permute_dims(k, [0, 1, 3, 2]))))
            scaled = bb.emit(op.divide(scores, tvms.relax.const(8.0, "float32")))
            out = bb.emit_output(bb.emit(op.matmul(bb.emit(op.nn.softmax(scaled, axis=-1)), v)))
        bb.emit_func_output(out, params=[q, k, v])
    inputs = [rng.standard_normal(shape).astype("float32") for _ in range(3)]
    return bb.get(), inputs, lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) / 8, -1) @ v


GPT = dict(seq=128, d_model=256, heads=8, vocab=1000, mlp=1024)


def gpt_block_module(rng, part: str = "block", symbolic: bool = False):
    """A GPT-style block (``part="block"``), or one of its ops alone: ``"qkv"`` (a projection),
    ``"mlp_up"`` (linear + GELU), ``"mlp_down"`` (linear + residual), ``"scores"`` (the
    heads' Q K^T, scaled and masked), ``"softmax"``, ``"layer_norm"``. ``symbolic``: the
    sequence length is a symbolic ``n`` in every shape (the module compiles once for any
    length; the inputs still have GPT["seq"] tokens)."""
    import torch
    import torch.nn.functional as F

    from tvmscript import tir
    from tvmscript.relax import op

    seq, d, heads, mlp = GPT["seq"], GPT["d_model"], GPT["heads"], GPT["mlp"]
    n = tir.Var("int64", "n") if symbolic else seq
    hd = d // heads
    params = _Params(rng)
    bb = tvms.relax.BlockBuilder()
    mask = np.triu(np.full((1, 1, seq, seq), -1e9, "float32"), 1)

    def linear(h, n_in, n_out, name):
        return bb.emit(op.add(op.nn.dense(h, params.new(name + "_w", (n_out, n_in))), params.new(name + "_b", (n_out,), "bias")))

    def split_heads(t):
        return bb.emit(op.permute_dims(bb.emit(op.reshape(t, [1, n, heads, hd])), [0, 2, 1, 3]))

    def attention_scores(q, k):
        s = bb.emit(op.matmul(q, bb.emit(op.permute_dims(k, [0, 1, 3, 2]))))
        s = bb.emit(op.multiply(s, op.const(np.float32(1 / np.sqrt(hd)))))
        return bb.emit(op.add(s, params.new("mask", (1, 1, n, n), value=mask)))

    def layer_norm(h, name):
        return bb.emit(op.nn.layer_norm(h, params.new(name + "_g", (d,), "scale"), params.new(name + "_b", (d,), "bias"),
                                        axes=[-1]))

    first_shape = {"block": (1, seq), "scores": (1, heads, seq, hd), "softmax": (1, heads, seq, seq),
                   "mlp_down": (1, seq, mlp)}.get(part, (1, seq, d))
    x_shape = [n if dim == seq else dim for dim in first_shape]
    x = op.make_var("x", _tensor_info(x_shape, "int64" if part == "block" else "float32"))
    with bb.function("main"):
        with bb.dataflow():
            if part == "block":
                h = bb.emit(op.add(bb.emit(op.take(params.new("wte", (GPT["vocab"], d), "bias"), x, axis=0)),
                                   params.new("wpe", (n, d), "bias", value=0.1 * rng.standard_normal((seq, d)))))
                res = h
                a = layer_norm(h, "ln1")
                q, k, v = (split_heads(linear(a, d, d, n)) for n in ("q", "k", "v"))
                p = bb.emit(op.nn.softmax(attention_scores(q, k), axis=-1))
                a = bb.emit(op.reshape(bb.emit(op.permute_dims(bb.emit(op.matmul(p, v)), [0, 2, 1, 3])), [1, n, d]))
                h = bb.emit(op.add(res, linear(a, d, d, "o")))
                m = bb.emit(op.nn.gelu(linear(layer_norm(h, "ln2"), d, mlp, "fc1")))
                out = bb.emit(op.add(h, linear(m, mlp, d, "fc2")))
            elif part == "qkv":
                out = linear(x, d, d, "q")
            elif part == "mlp_up":
                out = bb.emit(op.nn.gelu(linear(x, d, mlp, "fc1")))
            elif part == "mlp_down":
                out = bb.emit(op.add(params.new("res", (1, seq, d), "bias"), linear(x, mlp, d, "fc2")))
            elif part == "scores":
                out = attention_scores(x, params.new("k", (1, heads, seq, hd), "bias"))
            elif part == "softmax":
                out = bb.emit(op.nn.softmax(x, axis=-1))
            else:
                out = layer_norm(x, "ln")
            out = bb.emit_output(out)
        bb.emit_func_output(out, params=[x] + params.vars)
    if part == "block":
        first = rng.integers(0, GPT["vocab"], first_shape).astype("int64")
    else:
        first = (rng.standard_normal(first_shape) * (4 if part == "softmax" else 1)).astype("float32")
    inputs = [first] + params.values

    def torch_fn(x, *w):
        w = list(w)

        def take(n):
            return [w.pop(0) for _ in range(n)]

        def heads_of(t):
            return t.reshape(1, seq, heads, hd).permute(0, 2, 1, 3)

        def scores(q, k):
            return q @ k.permute(0, 1, 3, 2) * (1 / np.sqrt(hd)) + take(1)[0]

        if part == "block":
            wte, wpe = take(2)
            h = F.embedding(x, wte) + wpe
            a = F.layer_norm(h, (d,), *take(2))
            q, k, v = (heads_of(F.linear(a, *take(2))) for _ in range(3))
            p = torch.softmax(scores(q, k), -1)
            h = h + F.linear((p @ v).permute(0, 2, 1, 3).reshape(1, seq, d), *take(2))
            m = F.gelu(F.linear(F.layer_norm(h, (d,), *take(2)), *take(2)))
            return h + F.linear(m, *take(2))
        if part == "qkv":
            return F.linear(x, *take(2))
        if part == "mlp_up":
            return F.gelu(F.linear(x, *take(2)))
        if part == "mlp_down":
            res = take(1)[0]
            return res + F.linear(x, *take(2))
        if part == "scores":
            k = take(1)[0]
            return scores(x, k)
        if part == "softmax":
            return torch.softmax(x, -1)
        return F.layer_norm(x, (d,), *take(2))

    return bb.get(), inputs, torch_fn


def _model_row(name, built, rounds, count=1):
    """Compile a model as ``tvms run`` does, check it against PyTorch, time both: (name,
    count, tvms seconds, torch seconds, max error relative to the largest output)."""
    import torch

    mod, inputs, torch_fn = built
    ex = build(tvms.relax.get_pipeline("zero")(mod))
    main = tvms.relax.VirtualMachine(ex, tvms.cpu())["main"]
    tensors = [tvms.nd.array(a) for a in inputs]
    torch_inputs = [torch.from_numpy(a) for a in inputs]
    with torch.no_grad():
        ref = torch_fn(*torch_inputs).numpy()
        out = main(*tensors).numpy()
        err = float(np.abs(out - ref).max() / max(1e-30, float(np.abs(ref).max())))
        if not err < 1e-4:
            raise AssertionError(f"{name}: tvms and PyTorch differ (max relative error {err:.1e})")
        per = max(1, 12 // rounds)
        t_tvms, t_torch = interleaved([lambda: main(*tensors), lambda: torch_fn(*torch_inputs)], per * rounds,
                                      warmup=2, rounds=rounds)
    return name, count, t_tvms, t_torch, err


def bench_models(rounds: int) -> None:
    import torch

    from tvmscript.compiler.schedule_cpu import parallel_threads

    threads = parallel_threads()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    sections = [("resnet18, batch 1, 224x224", [
        ("resnet18 (batch norm folded)", lambda: resnet18_module(True, rng), 1),
        ("resnet18 (batch norm)", lambda: resnet18_module(False, rng), 1),
    ] + [(f"conv {c[0]}->{c[1]} {c[2]}x{c[2]} k{c[3]} s{c[4]} +bias+relu", lambda c=c: conv_layer_module(c, rng), c[6])
         for c in RESNET18_CONVS]),
        (f"GPT block, {GPT['seq']} tokens, d_model {GPT['d_model']}, {GPT['heads']} heads", [
            ("GPT block", lambda: gpt_block_module(rng), 1),
            ("GPT block, sequence length a symbolic n", lambda: gpt_block_module(rng, symbolic=True), 1),
            ("q/k/v projection 128x256 -> 256", lambda: gpt_block_module(rng, "qkv"), 4),
            ("MLP up 256 -> 1024 + GELU", lambda: gpt_block_module(rng, "mlp_up"), 1),
            ("MLP down 1024 -> 256 + residual", lambda: gpt_block_module(rng, "mlp_down"), 1),
            ("attention scores Q K^T, scaled, masked", lambda: gpt_block_module(rng, "scores"), 1),
            ("softmax 8x128x128", lambda: gpt_block_module(rng, "softmax"), 1),
            ("layer norm 128x256", lambda: gpt_block_module(rng, "layer_norm"), 2),
        ])]
    print(f"models against PyTorch {torch.__version__} eager, both on {threads} threads "
          f"(torch.set_num_threads({threads})); best median of {rounds} alternating rounds; results checked "
          "against PyTorch first")
    header = ("model / layer", "x in model", "tvms", "PyTorch", "ratio", "goal")
    for title, entries in sections:
        rows = []
        for name, build, count in entries:
            row = _model_row(name, build(), rounds, count)
            whole = name.startswith(("resnet18", "GPT block"))
            ratio = row[2] / row[3]
            goal = f"<= 3x: {'met' if ratio <= 3 else 'MISSED'}" if whole else ""
            rows.append((name, str(count), fmt_time(row[2]), fmt_time(row[3]), f"{ratio:.2f}x PyTorch's time", goal))
        print(f"\n{title}")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


if __name__ == "__main__":
    main()
