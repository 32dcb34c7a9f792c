"""CPU back end speed: the seed MLP through the Relax VM, a plain matmul kernel, compile time.

    python benchmarks/cpu.py [--calls 1000] [--repeat 5] [--matmul 1024]

Three measures, each side by side with NumPy in the same run (the machine may be shared and
noisy, so ratios taken together mean more than absolute figures):

* the seed MLP in its zero-pipeline form (samples/mlp_zero.tvms: transpose, fused
  matmul+add+relu, transpose, fused matmul+add) run by the Relax VM, at batch 1 and batch 64,
  against the NumPy expression ``maximum(x @ w0.T + b0, 0) @ w1.T + b1``: the median of many
  calls after a warm-up, in alternating rounds, the best round's (`interleaved`), so that
  load from other processes hits both alike; the inputs are tvms tensors already (as a TVM
  user passes ``tvm.nd.array``s); the transposes of the weights run in every call, as the
  module says;
* a plain, unscheduled 1024x1024x1024 float32 matmul prim_func (the form of
  samples/te_matmul.tvms) called destination-passing, in GFLOP/s, against ``np.matmul(a, b,
  out=c)`` (both write a pre-allocated output); the best of several calls;
* ``tvms.compile`` of the batch-1 MLP module: cold (the in-memory kernel cache of
  `runtime.cpu` cleared, so everything from scheduling to machine code runs) and warm (a cache
  hit: structural hash plus the Relax-to-Python translation), the best of several runs.

The batch-64 module is generated from one template with the batch as a parameter
(`mlp_module`); at batch 1 the template is checked to be structurally equal to
samples/mlp_zero.tvms, and every module's result is checked against NumPy before timing.
The goals from the issue are printed beside the figures, with Apache TVM 0.27's figures (the
same unscheduled modules, from the issue) for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tvmscript as tvms  # noqa: E402
from _timing import best_of  # noqa: E402
from tvmscript.compiler.codegen_llvm import host_target  # noqa: E402
from tvmscript.ir import structural_equal  # noqa: E402
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

# samples/te_matmul.tvms at n x n x n.
MATMUL_TEMPLATE = '''# from tvm.script import tir as T
@T.prim_func
def func(A: T.Buffer[({n}, {n}), "float32"], B: T.Buffer[({n}, {n}), "float32"], matmul: T.Buffer[({n}, {n}), "float32"]) -> None:
    T.func_attr({{"global_symbol": "main", "tir.noalias": True}})
    for i0, i1, i2 in T.grid({n}, {n}, {n}):
        with T.block("matmul"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            T.reads(A[i, k], B[k, j])
            T.writes(matmul[i, j])
            with T.init():
                matmul[i, j] = T.float32(0)
            matmul[i, j] = matmul[i, j] + A[i, k] * B[k, j]
'''

# Apache TVM 0.27 on the same unscheduled modules, as the issue reports them.
TVM_MATMUL_PCT = 0.4  # % of NumPy's GFLOP/s
TVM_MLP_B1_RATIO = 18.0  # x NumPy's time


def mlp_module(batch: int):
    return tvms.parse(MLP_TEMPLATE.format(b=batch))


def mlp_inputs(batch: int, rng) -> list:
    shapes = [(batch, 784), (256, 784), (256,), (10, 256), (10,)]
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


def mlp_numpy(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


def interleaved(fns: list, calls: int, warmup: int, rounds: int = 5) -> list:
    """Time of one call of each function: ``calls`` calls of each are timed in ``rounds``
    alternating rounds (f, g, f, g, ...), and the best of the rounds' medians is reported: a
    burst of load from other processes (on a shared machine, another guest can take a core
    for milliseconds, which stalls every parallel region) spoils a round, not the figure."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    per = max(1, calls // rounds)
    best = [float("inf")] * len(fns)
    clock = time.perf_counter
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            times = []
            for _ in range(per):
                t0 = clock()
                fn()
                times.append(clock() - t0)
            best[i] = min(best[i], statistics.median(times))
    return best


def fmt_time(s: float) -> str:
    return f"{s * 1e6:,.1f} us" if s < 1e-3 else f"{s * 1e3:,.2f} ms"


def bench_mlp(batch: int, calls: int, rounds: int, rng):
    mod = mlp_module(batch)
    if batch == 1:
        sample = tvms.load(os.path.join(ROOT, "samples", "mlp_zero.tvms"))
        assert structural_equal(mod, sample), "the MLP template at batch 1 differs from samples/mlp_zero.tvms"
    ex = tvms.compile(mod, target="llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    main = vm["main"]
    args = mlp_inputs(batch, rng)
    ref = mlp_numpy(*args)
    tensors = [tvms.nd.array(a) for a in args]
    out = main(*tensors).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3 * max(1.0, float(np.abs(ref).max())))
    t_tvms, t_np = interleaved([lambda: main(*tensors), lambda: mlp_numpy(*args)], calls,
                               warmup=max(20, calls // 10), rounds=rounds)
    return t_tvms, t_np, float(np.abs(out - ref).max())


def bench_matmul(n: int, repeat: int, rng):
    ex = tvms.compile(tvms.parse(MATMUL_TEMPLATE.format(n=n)), target="llvm")
    kernel = ex["main"]
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    c_np = np.empty((n, n), np.float32)
    kernel(a, b, c)
    np.matmul(a, b, out=c_np)
    np.testing.assert_allclose(c, c_np, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    err = float(np.abs(c - c_np).max())
    t_tvms, t_np = interleaved([lambda: kernel(a, b, c), lambda: np.matmul(a, b, out=c_np)], repeat, warmup=1,
                               rounds=repeat)
    flops = 2.0 * n ** 3
    return flops / t_tvms / 1e9, flops / t_np / 1e9, err


def bench_compile(repeat: int):
    mod = tvms.load(os.path.join(ROOT, "samples", "mlp_zero.tvms"))
    tvms.compile(mod, target="llvm")  # LLVM initialized, libgomp loaded: one-time process costs

    def cold():
        tvms_cpu.clear_cache()
        tvms.compile(mod, target="llvm")

    t_cold = best_of(cold, repeat)
    tvms.compile(mod, target="llvm")
    t_warm = best_of(lambda: tvms.compile(mod, target="llvm"), repeat)
    return t_cold, t_warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="timed VM calls of the batch-1 MLP (and as many "
                    "NumPy evaluations); batch 64 gets a fifth of them")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of each MLP, calls of the matmul, runs of "
                    "each compile")
    ap.add_argument("--matmul", type=int, default=1024, help="matmul size n (n x n x n)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    calls64 = max(20, args.calls // 5)

    t_cold, t_warm = bench_compile(args.repeat)
    b1 = bench_mlp(1, args.calls, args.repeat, rng)
    b64 = bench_mlp(64, calls64, args.repeat, rng)
    gf_tvms, gf_np, mm_err = bench_matmul(args.matmul, args.repeat, rng)

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    r1, r64, pct = b1[0] / b1[1], b64[0] / b64[1], gf_tvms / gf_np * 100
    rows = [
        ("MLP batch 1, VM call", fmt_time(b1[0]), fmt_time(b1[1]), f"{r1:.2f}x NumPy's time",
         f"<= 3x: {verdict(r1 <= 3)}", f"~{TVM_MLP_B1_RATIO:.0f}x NumPy's time"),
        ("MLP batch 64, VM call", fmt_time(b64[0]), fmt_time(b64[1]), f"{r64:.2f}x NumPy's time",
         f"<= 3x: {verdict(r64 <= 3)}", ""),
        (f"matmul {args.matmul}^3, GFLOP/s", f"{gf_tvms:,.1f}", f"{gf_np:,.1f}", f"{pct:.1f}% of NumPy's",
         f">= 10%: {verdict(pct >= 10)}", f"~{TVM_MATMUL_PCT}% of NumPy's"),
        ("compile MLP, cold cache", fmt_time(t_cold), "", "", f"< 100 ms: {verdict(t_cold < 0.1)}", ""),
        ("compile MLP, warm cache", fmt_time(t_warm), "", "", "", ""),
    ]
    header = ("measure", "tvms", "NumPy", "ratio", "goal", "Apache TVM 0.27, for scale")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = os.environ.get("OMP_NUM_THREADS") or str(cpus)
    print(f"{host_target().cpu}, {threads} threads ({tvms_cpu.parallel_runtime()}), NumPy {np.__version__}; "
          f"MLP: best median of {args.repeat} rounds of {args.calls // args.repeat} (batch 1) / "
          f"{calls64 // args.repeat} (batch 64) calls; matmul: best of {args.repeat}; "
          f"compile: best of {args.repeat}")
    print(f"checked before timing: the batch-1 template equals samples/mlp_zero.tvms; max |tvms - NumPy|: "
          f"{b1[2]:.1e} (MLP batch 1), {b64[2]:.1e} (batch 64), {mm_err:.1e} (matmul)\n")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


if __name__ == "__main__":
    main()
