"""CPU code generation and runtime: every sample prim_func, intrinsics, casts, integer
division, reductions, parallel/vectorized/unrolled loops, dynamic shapes, allocations,
argument checking and the compile cache, each against a NumPy reference; IR that aborted
LLVM's optimizer."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.lower_tir import lower
from tvmscript.ir.tir import Allocate
from tvmscript.runtime import cpu
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.ir.structural import structural_hash
from tvmscript.runtime.kernel import Kernel, KernelAssertionError

from support import int_power

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def prim_funcs(mod) -> dict:
    if isinstance(mod, tir.PrimFunc):
        return {"func": mod}
    return {gv.name_hint: f for gv, f in mod.items() if isinstance(f, tir.PrimFunc)}


def relu(x):
    return np.maximum(x, 0)


# NumPy references for the sample prim_funcs: inputs -> outputs (the trailing parameters).
_LINEAR = (lambda x, w, b: [x @ w.T + b], 1)
_RELU = (lambda x: [relu(x)], 1)
_ADD = (lambda a, b: [a + b], 1)
_MATMUL = (lambda a, b: [a @ b], 1)
_TRANSPOSE = (lambda a: [a.T], 1)
_MLP_REFS = {
    "add": _ADD, "add1": _ADD, "matmul": _MATMUL, "matmul1": _MATMUL, "relu": _RELU,
    "transpose": _TRANSPOSE, "transpose1": _TRANSPOSE,
    "fused_matmul1_add1": (lambda a, b, bias: [a @ b + bias], 1),
    "fused_matmul_add_relu": (lambda a, b, bias: [relu(a @ b + bias)], 1),
}
REFERENCES = {
    "bb_module.tvms": {"te_matmul": _MATMUL, "te_relu": _RELU},
    "e2e_mlp.tvms": {"relu0": _RELU, "linear0": _LINEAR, "linear1": _LINEAR},
    "two_dataflow_blocks.tvms": {"relu0": _RELU, "linear0": _LINEAR, "linear1": _LINEAR},
    "mixture.tvms": {"linear0": _LINEAR},
    "mlp_legalized.tvms": _MLP_REFS,
    "mlp_torch_fx_legalized.tvms": _MLP_REFS,
    "mlp_zero.tvms": _MLP_REFS,
    "mlp_torch_fx_zero.tvms": _MLP_REFS,
    "mm_relu.tvms": {"mm_relu": (lambda a, b: [relu(a @ b)], 1)},
    "te_matmul.tvms": {"func": _MATMUL},
    "te_matmul_relu.tvms": {"func": (lambda a, b: [relu(a @ b)], 1)},
    "te_matmul_relu_4args.tvms": {"func": (lambda a, b: [a @ b, relu(a @ b)], 2)},
    "te_relu_1d.tvms": {"func": _RELU},
    "te_relu_2d.tvms": {"func": _RELU},
}


def _sample_funcs():
    out = []
    for fname in sorted(os.listdir(SAMPLES)):
        if not fname.endswith(".tvms"):
            continue
        try:
            mod = tvms.load(os.path.join(SAMPLES, fname))
        except tvms.TVMScriptError:
            continue  # needs constants or functions the file does not hold
        for name in prim_funcs(mod) if isinstance(mod, (tir.PrimFunc, tvms.IRModule)) else []:
            out.append((fname, name))
    return out


SAMPLE_FUNCS = _sample_funcs()


def test_every_parsed_sample_prim_func_has_a_reference():
    assert len(SAMPLE_FUNCS) >= 30
    missing = [(f, n) for f, n in SAMPLE_FUNCS if n not in REFERENCES.get(f, {})]
    assert not missing


@pytest.mark.parametrize("schedule", [True, False], ids=["scheduled", "plain"])
@pytest.mark.parametrize("fname", sorted({f for f, _ in SAMPLE_FUNCS}))
def test_sample_prim_funcs_match_numpy(fname, schedule):
    funcs = prim_funcs(tvms.load(os.path.join(SAMPLES, fname)))
    module = build_cpu(funcs, schedule=schedule)
    for name, func in funcs.items():
        ref, n_out = REFERENCES[fname][name]
        kernel = module[name]
        specs = kernel.params
        inputs = [rand(*p.shape, dtype=p.dtype) for p in specs[: len(specs) - n_out]]
        outputs = [np.full(p.shape, np.nan, dtype=p.dtype) for p in specs[len(specs) - n_out:]]
        kernel(*inputs, *outputs)
        for got, want in zip(outputs, ref(*inputs)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{fname}:{name}")


# ----------------------------------------------------------------------------- intrinsics

UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": np.vectorize(math.erf), "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "sin": np.sin, "cos": np.cos,
    "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "trunc": np.trunc, "round": np.round,
    "tan": np.tan, "atan": np.arctan, "log1p": np.log1p,
}
BINARY = {"pow": np.power, "max": np.maximum, "min": np.minimum, "atan2": np.arctan2,
          "copysign": np.copysign, "hypot": np.hypot}


def _intrinsic_module(dtype: str) -> str:
    fns = []
    for name in UNARY:
        fns.append(f'''
    @T.prim_func
    def u_{name}(A: T.Buffer((64,), "{dtype}"), B: T.Buffer((64,), "{dtype}")):
        for i in range(64):
            with T.block("b"):
                vi = T.axis.spatial(64, i)
                B[vi] = T.{name}(A[vi])
''')
    for name in BINARY:
        fns.append(f'''
    @T.prim_func
    def b_{name}(A: T.Buffer((64,), "{dtype}"), B: T.Buffer((64,), "{dtype}"), C: T.Buffer((64,), "{dtype}")):
        for i in range(64):
            with T.block("b"):
                vi = T.axis.spatial(64, i)
                C[vi] = T.{name}(A[vi], B[vi])
''')
    return "@I.ir_module\nclass Module:" + "".join(fns)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_each_intrinsic_matches_numpy(dtype):
    module = build_cpu(tvms.parse(_intrinsic_module(dtype)))
    tol = {"float32": 2e-6, "float64": 1e-13, "float16": 2e-3}[dtype]
    positive = {"log", "sqrt", "rsqrt", "log2", "log10", "log1p"}
    for name, ref in UNARY.items():
        a = (RNG.uniform(0.1, 4.0, 64) if name in positive else RNG.uniform(-3.0, 3.0, 64)).astype(dtype)
        if name == "round":
            a[:4] = [0.5, 1.5, -2.5, 2.5]  # halves round to even, as NumPy does
        b = np.zeros(64, dtype)
        module[f"u_{name}"](a, b)
        want = ref(a.astype("float64")).astype(dtype)
        np.testing.assert_allclose(b.astype("float64"), want.astype("float64"), rtol=tol, atol=tol, err_msg=name)
    for name, ref in BINARY.items():
        a = RNG.uniform(0.1, 3.0, 64).astype(dtype) if name == "pow" else RNG.uniform(-3, 3, 64).astype(dtype)
        b = RNG.uniform(-2.0, 2.0, 64).astype(dtype)
        c = np.zeros(64, dtype)
        module[f"b_{name}"](a, b, c)
        want = ref(a.astype("float64"), b.astype("float64")).astype(dtype)
        np.testing.assert_allclose(c.astype("float64"), want.astype("float64"), rtol=tol, atol=tol, err_msg=name)


def test_integer_min_max_abs_and_bit_ops():
    src = '''
@T.prim_func
def f(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "int32"), C: T.Buffer((6, 16), "int32")):
    for i in range(16):
        C[0, i] = T.max(A[i], B[i])
        C[1, i] = T.min(A[i], B[i])
        C[2, i] = T.abs(A[i])
        C[3, i] = (A[i] & B[i]) ^ (A[i] | 3)
        C[4, i] = (A[i] << 2) >> 1
        C[5, i] = T.if_then_else(A[i] > B[i], A[i] - B[i], T.Select(A[i] == B[i], 7, B[i] - A[i]))
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = RNG.integers(-100, 100, 16).astype("int32")
    b = RNG.integers(-100, 100, 16).astype("int32")
    b[:3] = a[:3]
    c = np.zeros((6, 16), "int32")
    k(a, b, c)
    np.testing.assert_array_equal(c[0], np.maximum(a, b))
    np.testing.assert_array_equal(c[1], np.minimum(a, b))
    np.testing.assert_array_equal(c[2], np.abs(a))
    np.testing.assert_array_equal(c[3], (a & b) ^ (a | 3))
    np.testing.assert_array_equal(c[4], (a << 2) >> 1)
    np.testing.assert_array_equal(c[5], np.where(a > b, a - b, np.where(a == b, 7, b - a)))


# ----------------------------------------------------------------------------- casts

CAST_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]


def _cast_source():
    fns = []
    for src in CAST_DTYPES:
        for dst in CAST_DTYPES:
            if src != dst:
                fns.append(f'''
    @T.prim_func
    def c_{src}_{dst}(A: T.Buffer((32,), "{src}"), B: T.Buffer((32,), "{dst}")):
        for i in range(32):
            B[i] = T.Cast("{dst}", A[i])
''')
    return "@I.ir_module\nclass Module:" + "".join(fns)


def _cast_input(src: str, dst: str) -> np.ndarray:
    if src == "bool":
        return RNG.integers(0, 2, 32).astype(bool)
    unsigned_dst = dst.startswith("uint")
    lo = 0 if (unsigned_dst or src.startswith("uint")) else -100
    if src.startswith("float"):
        a = RNG.uniform(lo, 100, 32)
        a[:6] = [0.0, 0.75, 1.5, 2.99, 99.9, 0.25] if unsigned_dst or lo == 0 else [0.0, -0.75, -1.5, 2.99, -99.9, 0.25]
        return a.astype(src)
    info = np.iinfo(src)
    a = RNG.integers(max(info.min, -(2**40)), min(info.max, 2**40), 32, dtype=np.int64)
    if dst.startswith("float16"):
        a = RNG.integers(max(info.min, -2000), min(info.max, 2000), 32)
    a[:3] = [0, 1, info.max]
    return a.astype(src)


def test_every_cast_matches_numpy():
    module = build_cpu(tvms.parse(_cast_source()))
    for src in CAST_DTYPES:
        for dst in CAST_DTYPES:
            if src == dst:
                continue
            a = _cast_input(src, dst)
            b = np.zeros(32, dst)
            module[f"c_{src}_{dst}"](a, b)
            with np.errstate(over="ignore"):
                want = a.astype(dst)
            if src.startswith("float") and not dst.startswith("float") and dst != "bool":
                want = np.trunc(a.astype("float64")).astype(dst)  # C-style truncation toward zero
            np.testing.assert_array_equal(b, want, err_msg=f"{src} -> {dst}")


def test_float_to_int_truncates_and_int_to_float_is_exact():
    src = '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int64"), D: T.Buffer((4,), "float64")):
    for i in range(4):
        B[i] = T.int32(A[i])
        D[i] = T.float64(C[i])
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = np.array([2.7, -2.7, 0.5, -0.5], "float32")
    b = np.zeros(4, "int32")
    c = np.array([2**53, -(2**40), 3, -7], "int64")
    d = np.zeros(4, "float64")
    k(a, b, c, d)
    np.testing.assert_array_equal(b, [2, -2, 0, 0])
    np.testing.assert_array_equal(d, c.astype("float64"))


# ----------------------------------------------------------------------------- integer division


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_floordiv_floormod_follow_python_and_truncdiv_follows_c(dtype):
    src = f'''
@T.prim_func
def f(A: T.Buffer((64,), "{dtype}"), B: T.Buffer((64,), "{dtype}"), C: T.Buffer((8, 64), "{dtype}")):
    for i in range(64):
        C[0, i] = T.floordiv(A[i], B[i])
        C[1, i] = T.floormod(A[i], B[i])
        C[2, i] = A[i] // B[i]
        C[3, i] = A[i] % B[i]
        C[4, i] = T.truncdiv(A[i], B[i])
        C[5, i] = T.truncmod(A[i], B[i])
        C[6, i] = A[i] // {dtype_lit(dtype, 4)}
        C[7, i] = A[i] % {dtype_lit(dtype, 4)}
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = np.array([x for x in range(-8, 8) for _ in range(4)], dtype)
    b = np.array([d for _ in range(16) for d in (-3, -2, 2, 3)], dtype)
    c = np.zeros((8, 64), dtype)
    k(a, b, c)
    ai, bi = a.astype(int), b.astype(int)
    np.testing.assert_array_equal(c[0], [x // y for x, y in zip(ai, bi)])
    np.testing.assert_array_equal(c[1], [x % y for x, y in zip(ai, bi)])
    np.testing.assert_array_equal(c[2], c[0])
    np.testing.assert_array_equal(c[3], c[1])
    np.testing.assert_array_equal(c[4], [int(x / y) for x, y in zip(ai, bi)])
    np.testing.assert_array_equal(c[5], [int(math.fmod(x, y)) for x, y in zip(ai, bi)])
    np.testing.assert_array_equal(c[6], ai // 4)
    np.testing.assert_array_equal(c[7], ai % 4)


@pytest.mark.parametrize("dtype", int_power.DTYPES)
def test_integer_power_is_exact_and_wraps(dtype):
    k = build_cpu({"ipow": tvms.parse(int_power.source(dtype, len(int_power.operands(dtype)[0])))})["ipow"]
    a, b = int_power.operands(dtype)
    c = np.zeros_like(a)
    k(a, b, c)
    np.testing.assert_array_equal(c, int_power.reference(a, b))


def dtype_lit(dtype: str, v: int) -> str:
    return f"T.{dtype}({v})"


def test_float_floordiv_floormod():
    src = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((2, 8), "float32")):
    for i in range(8):
        C[0, i] = T.floordiv(A[i], B[i])
        C[1, i] = T.floormod(A[i], B[i])
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = np.array([7, -7, 7, -7, 5.5, -5.5, 0, 3], "float32")
    b = np.array([2, 2, -2, -2, 2, 2, 3, 4], "float32")
    c = np.zeros((2, 8), "float32")
    k(a, b, c)
    np.testing.assert_allclose(c[0], np.floor_divide(a, b))
    np.testing.assert_allclose(c[1], np.mod(a, b))


# ----------------------------------------------------------------------------- reductions

REDUCTIONS = '''
@I.ir_module
class Module:
    @T.prim_func
    def row_max(A: T.Buffer((37, 53), "float32"), M: T.Buffer((37,), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, k in T.grid(37, 53):
            with T.block("M"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    M[vi] = T.float32(-1e30)
                M[vi] = T.max(M[vi], A[vi, vk])

    @T.prim_func
    def bias_sum(A: T.Buffer((16, 8, 12), "float32"), bias: T.Buffer((8,), "float32"), S: T.Buffer((8,), "float32")):
        T.func_attr({"tir.noalias": True})
        for j, i, k in T.grid(8, 16, 12):
            with T.block("S"):
                vj, vi, vk = T.axis.remap("SRR", [j, i, k])
                with T.init():
                    S[vj] = bias[vj]
                S[vj] = S[vj] + A[vi, vj, vk]

    @T.prim_func
    def int_matmul(A: T.Buffer((33, 65), "int32"), B: T.Buffer((65, 129), "int32"), C: T.Buffer((33, 129), "int32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(33, 129, 65):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def matmul(A: T.Buffer((96, 80), "float32"), B: T.Buffer((80, 256), "float32"), C: T.Buffer((96, 256), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j, k in T.grid(96, 256, 80):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


@pytest.mark.parametrize("schedule", [True, False], ids=["scheduled", "plain"])
def test_reductions_with_init(schedule):
    module = build_cpu(tvms.parse(REDUCTIONS), schedule=schedule)
    a = rand(37, 53)
    m = np.zeros(37, "float32")
    module["row_max"](a, m)
    np.testing.assert_array_equal(m, a.max(axis=1))
    a3, bias = rand(16, 8, 12), rand(8)
    s = np.zeros(8, "float32")
    module["bias_sum"](a3, bias, s)
    np.testing.assert_allclose(s, bias + a3.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)
    ia = RNG.integers(-50, 50, (33, 65)).astype("int32")
    ib = RNG.integers(-50, 50, (65, 129)).astype("int32")
    ic = np.zeros((33, 129), "int32")
    module["int_matmul"](ia, ib, ic)
    np.testing.assert_array_equal(ic, ia @ ib)
    fa, fb = rand(96, 80), rand(80, 256)
    fc = np.zeros((96, 256), "float32")
    module["matmul"](fa, fb, fc)
    np.testing.assert_allclose(fc, fa @ fb, rtol=1e-4, atol=1e-4)
    # A second call overwrites (the init runs again), as destination passing requires.
    module["matmul"](fa, fb, fc)
    np.testing.assert_allclose(fc, fa @ fb, rtol=1e-4, atol=1e-4)


def test_default_schedule_does_not_change_results_bitwise():
    mod = tvms.parse(REDUCTIONS)
    fast = build_cpu(mod, schedule=True)
    plain = build_cpu(mod, schedule=False)
    fa, fb = rand(96, 80), rand(80, 256)
    c1, c2 = np.zeros((96, 256), "float32"), np.zeros((96, 256), "float32")
    fast["matmul"](fa, fb, c1)
    plain["matmul"](fa, fb, c2)
    np.testing.assert_array_equal(c1, c2)


# ----------------------------------------------------------------------------- loop kinds

THREAD_IDS = '''
@T.prim_func
def thread_ids(T_id: T.Buffer((64,), "int32")):
    for i in T.parallel(64):
        T_id[i] = T.call_extern("int32", "omp_get_thread_num")
'''

PARALLEL = '''
@I.ir_module
class Module:
    @T.prim_func
    def saxpy(a: T.float32, X: T.Buffer((1000, 3), "float32"), Y: T.Buffer((1000, 3), "float32")):
        T.func_attr({"tir.noalias": True})
        for i in T.parallel(1000):
            for j in range(3):
                with T.block("Y"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Y[vi, vj] = a * X[vi, vj] + Y[vi, vj]

    @T.prim_func
    def nested(x: T.handle, y: T.handle):
        n = T.int64()
        X = T.match_buffer(x, (n, 8))
        Y = T.match_buffer(y, (n,))
        for i in T.parallel(n):
            # A block per iteration, so each iteration (each thread) has its own `tmp`: an
            # alloc_buffer outside any block would belong to the root block, shared by all.
            with T.block("row"):
                vi = T.axis.spatial(n, i)
                tmp = T.alloc_buffer((8,))
                for j in T.parallel(8):
                    with T.block("t"):
                        vj = T.axis.spatial(8, j)
                        tmp[vj] = X[vi, vj] * T.float32(2)
                for j in range(8):
                    with T.block("s"):
                        vj = T.axis.reduce(8, j)
                        with T.init():
                            Y[vi] = T.float32(0)
                        Y[vi] = Y[vi] + tmp[vj]
'''


def test_parallel_loop_runs_on_several_threads():
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cpu.parallel_runtime() != "gomp" or cpus < 2 or os.environ.get("OMP_NUM_THREADS") == "1":
        pytest.skip("needs libgomp and two CPUs")
    module = build_cpu({"thread_ids": tvms.parse(THREAD_IDS)})
    # Each iteration records the OpenMP thread that ran it (omp_get_thread_num, from libgomp).
    ids = np.full(64, -1, "int32")
    module["thread_ids"](ids)
    # Static chunking: thread t runs iterations [t * chunk, (t + 1) * chunk), so the ids are
    # sorted, start at 0 and there are as many distinct ones as threads.
    assert ids[0] == 0 and np.all(np.diff(ids) >= 0)
    assert len(set(ids.tolist())) >= 2
    assert "GOMP_parallel" in module.get_source("llvm")


def test_parallel_loops_compute_correctly():
    module = build_cpu(tvms.parse(PARALLEL))
    x, y = rand(1000, 3), rand(1000, 3)
    want = 2.5 * x + y
    module["saxpy"](2.5, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)  # a * x + y may be one fma
    for n in (1, 3, 17):
        x = rand(n, 8)
        out = np.zeros(n, "float32")
        module["nested"](x, out)
        np.testing.assert_allclose(out, (2 * x).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_parallel_falls_back_to_serial():
    module = build_cpu(tvms.parse(PARALLEL), parallel="serial")
    assert "GOMP_parallel" not in module.get_source("llvm")
    x, y = rand(1000, 3), rand(1000, 3)
    want = 2.0 * x + y
    module["saxpy"](2.0, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_vectorized_and_unrolled_loops():
    src = '''
@T.prim_func
def f(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64, 16), "float32"), C: T.Buffer((64,), "float32")):
    T.func_attr({"tir.noalias": True})
    for i in range(64):
        for j in T.vectorized(16):
            B[i, j] = A[i, j] * T.float32(3) + T.float32(1)
    for i in T.unroll(4):
        for j in T.unroll(100):
            C[i * 16 + j % 16] = T.float32(0)
    for i in range(64):
        C[i] = T.float32(0)
        for j in T.unroll(16):
            C[i] = C[i] + A[i, j]
'''
    module = build_cpu({"f": tvms.parse(src)}, schedule=False)
    unopt = module.get_source("llvm-unopt")
    assert "llvm.loop.vectorize.enable" in unopt and "llvm.loop.unroll.full" in unopt
    a = rand(64, 16)
    b, c = np.zeros((64, 16), "float32"), np.zeros(64, "float32")
    module["f"](a, b, c)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    asm = module.get_source("asm")
    assert "ymm" in asm or "zmm" in asm or "xmm" in asm


# ----------------------------------------------------------------------------- dynamic shapes

DYNAMIC = '''
@T.prim_func
def dyn(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"tir.noalias": True})
    n = T.int64()
    m = T.int64()
    A = T.match_buffer(a, (n, m))
    B = T.match_buffer(b, (m,))
    C = T.match_buffer(c, (n, m))
    for i, j in T.grid(n, m):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vj] * T.float32(2)
'''


def test_dynamic_shapes_called_with_two_sizes():
    k = build_cpu({"dyn": tvms.parse(DYNAMIC)})["dyn"]
    assert k.sym_vars == ["n", "m"]
    for n, m in ((3, 5), (130, 700)):
        a, b = rand(n, m), rand(m)
        c = np.zeros((n, m), "float32")
        k(a, b, c)
        np.testing.assert_allclose(c, a + 2 * b, rtol=1e-6)
    with pytest.raises(ValueError, match="symbol 'm'"):
        k(rand(3, 5), rand(6), np.zeros((3, 5), "float32"))


def test_dynamic_reduction_and_scalar_shape_parameter():
    src = '''
@T.prim_func
def f(a: T.handle, s: T.handle, n: T.int32):
    T.func_attr({"tir.noalias": True})
    A = T.match_buffer(a, (n, 4))
    S = T.match_buffer(s, (4,))
    for j, i in T.grid(4, n):
        with T.block("S"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                S[vj] = T.float32(0)
            S[vj] = S[vj] + A[vi, vj]
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    assert k.sym_vars == []
    for n in (1, 50):
        a = rand(n, 4)
        s = np.zeros(4, "float32")
        k(a, s, n)
        np.testing.assert_allclose(s, a.sum(axis=0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="'n'"):
        k(rand(5, 4), np.zeros(4, "float32"), 6)


def test_explicit_strides():
    src = '''
@T.prim_func
def f(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (4, 3), strides=(8, 2))
    B = T.match_buffer(b, (4, 3))
    for i, j in T.grid(4, 3):
        B[i, j] = A[i, j]
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    base = rand(4, 8)
    view = base[:, ::2][:, :3]  # strides (8, 2) elements
    b = np.zeros((4, 3), "float32")
    k(view, b)
    np.testing.assert_array_equal(b, view)
    with pytest.raises(ValueError, match="strides"):
        k(np.ascontiguousarray(view), b)


# ----------------------------------------------------------------------------- allocations

ALLOC = '''
@I.ir_module
class Module:
    @T.prim_func
    def small(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        tmp = T.alloc_buffer((64,))
        for i in range(64):
            tmp[i] = A[i] * T.float32(2)
        for i in range(64):
            B[i] = tmp[63 - i]

    @T.prim_func
    def large(A: T.Buffer((512, 512), "float32"), B: T.Buffer((512, 512), "float32")):
        tmp = T.alloc_buffer((512, 512))
        for i, j in T.grid(512, 512):
            tmp[i, j] = A[j, i] + T.float32(1)
        for i, j in T.grid(512, 512):
            B[i, j] = tmp[j, i]

    @T.prim_func
    def dynamic(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        tmp = T.alloc_buffer((n,))
        for i in range(n):
            tmp[i] = A[i] + T.float32(1)
        for i in range(n):
            B[i] = tmp[n - 1 - i]
'''


def test_small_allocations_on_stack_large_and_dynamic_on_heap():
    mod = tvms.parse(ALLOC)

    def storage(func):
        found = []

        def walk(s):
            if isinstance(s, Allocate):
                found.append(s.storage)
                walk(s.body)
            elif isinstance(s, tir.SeqStmt):
                for x in s.seq:
                    walk(x)
            elif hasattr(s, "body"):
                walk(s.body)

        walk(lower(func).body)
        return found

    assert storage(mod["small"]) == ["stack"]
    assert storage(mod["large"]) == ["heap"]
    assert storage(mod["dynamic"]) == ["heap"]
    module = build_cpu(mod)
    a = rand(64)
    b = np.zeros(64, "float32")
    module["small"](a, b)
    np.testing.assert_allclose(b, (2 * a)[::-1])
    a2 = rand(512, 512)
    b2 = np.zeros((512, 512), "float32")
    module["large"](a2, b2)
    np.testing.assert_allclose(b2, a2 + 1)
    for n in (1, 1000):
        a3 = rand(n)
        b3 = np.zeros(n, "float32")
        module["dynamic"](a3, b3)
        np.testing.assert_allclose(b3, (a3 + 1)[::-1])
    text = module.get_source("llvm-unopt")
    assert "alloca [64 x float]" in text and "aligned_alloc" in text


# ----------------------------------------------------------------------------- control flow, dtypes


def test_if_else_where_and_guarded_loads():
    src = '''
@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((12,), "float32"), F: T.Buffer((12,), "bool")):
    for i in range(12):
        with T.block("B"):
            vi = T.axis.spatial(12, i)
            # The load A[vi] is out of bounds for vi >= 10: if_then_else must not perform it.
            B[vi] = T.if_then_else(vi < 10, A[T.min(vi, 9)], T.float32(-1))
            if vi % 3 == 0:
                F[vi] = True
            elif vi < 10 and A[vi] > T.float32(0):
                F[vi] = True
            else:
                F[vi] = False
    for i in range(4):
        with T.block("W"):
            vi = T.axis.spatial(12, i * 4)
            T.where(i * 4 < 10)
            B[vi] = B[vi] + T.float32(100)
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = rand(10)
    b = np.zeros(12, "float32")
    fl = np.zeros(12, bool)
    k(a, b, fl)
    want = np.concatenate([a, [-1, -1]]).astype("float32")
    want[[0, 4, 8]] += 100
    np.testing.assert_allclose(b, want)
    idx = np.arange(12)
    want_f = (idx % 3 == 0) | ((idx < 10) & (np.concatenate([a, [0, 0]]) > 0))
    np.testing.assert_array_equal(fl, want_f)


def test_scalar_params_let_and_while():
    src = '''
@T.prim_func
def f(A: T.Buffer((8,), "float64"), scale: T.float64, shift: T.int32, flag: T.bool, out: T.Buffer((8,), "float64")):
    for i in range(8):
        x: T.float64 = A[i] * scale
        if flag:
            out[i] = x + T.float64(shift)
        else:
            out[i] = x
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = rand(8, dtype="float64")
    out = np.zeros(8, "float64")
    k(a, 1.5, 3, True, out)
    np.testing.assert_allclose(out, a * 1.5 + 3)
    k(a, 2, -1, False, out)
    np.testing.assert_allclose(out, a * 2)


def test_float16_and_bool_buffers():
    src = '''
@T.prim_func
def f(A: T.Buffer((16,), "float16"), M: T.Buffer((16,), "bool"), B: T.Buffer((16,), "float16")):
    for i in range(16):
        B[i] = T.Select(M[i], A[i] * T.float16(2), T.exp(A[i]))
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = RNG.uniform(-2, 2, 16).astype("float16")
    m = RNG.integers(0, 2, 16).astype(bool)
    b = np.zeros(16, "float16")
    k(a, m, b)
    np.testing.assert_allclose(b.astype("float32"), np.where(m, a * 2, np.exp(a)).astype("float32"), rtol=2e-3)


def test_assert_failure_raises():
    src = '''
@T.prim_func
def f(A: T.Buffer((4,), "int32"), n: T.int32):
    assert n > 0, "n must be positive"
    for i in range(4):
        A[i] = n
'''
    k = build_cpu({"f": tvms.parse(src)})["f"]
    a = np.zeros(4, "int32")
    k(a, 3)
    np.testing.assert_array_equal(a, 3)
    with pytest.raises(KernelAssertionError, match="n must be positive"):
        k(a, -1)


# ----------------------------------------------------------------------------- argument checks

CHECKED = '''
@T.prim_func
def f(A: T.Buffer((4, 3), "float32"), n: T.int32, B: T.Buffer((4, 3), "float32")):
    for i, j in T.grid(4, 3):
        B[i, j] = A[i, j] + T.Cast("float32", n)
'''


def test_argument_errors_name_the_parameter():
    k = build_cpu({"f": tvms.parse(CHECKED)})["f"]
    a, b = rand(4, 3), np.zeros((4, 3), "float32")
    k(a, 1, b)
    np.testing.assert_allclose(b, a + 1)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, n, B\) but 2"):
        k(a, b)
    with pytest.raises(TypeError, match="'A' expects dtype float32, got float64"):
        k(a.astype("float64"), 1, b)
    with pytest.raises(ValueError, match="'B' expects shape"):
        k(a, 1, np.zeros((3, 4), "float32"))
    with pytest.raises(ValueError, match="'A' expects a 2-d array"):
        k(rand(12), 1, b)
    with pytest.raises(ValueError, match="'A' must be C-contiguous"):
        k(np.asfortranarray(a), 1, b)
    with pytest.raises(TypeError, match="'n' .* expects an integer"):
        k(a, 1.5, b)
    with pytest.raises(ValueError, match="'n' .* out of range"):
        k(a, 2**40, b)
    with pytest.raises(TypeError, match="'A' is a buffer"):
        k(3.0, 1, b)
    ro = np.zeros((4, 3), "float32")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="'B' is written by the kernel but the array is read-only"):
        k(a, 1, ro)


def test_array_like_arguments_and_call_raw():
    k = build_cpu({"f": tvms.parse(CHECKED)})["f"]

    class Wrapped:
        def __init__(self, arr):
            self.arr = arr

        def numpy(self):
            return self.arr

    class Iface:
        def __init__(self, arr):
            self.__array_interface__ = arr.__array_interface__
            self._keep = arr

    a, b = rand(4, 3), np.zeros((4, 3), "float32")
    k(Wrapped(a), 2, Iface(b))
    np.testing.assert_allclose(b, a + 2)
    b2 = np.zeros((4, 3), "float32")
    k.call_raw([a.ctypes.data, b2.ctypes.data], (), (5,))
    np.testing.assert_allclose(b2, a + 5)


# ----------------------------------------------------------------------------- module, cache


def test_cache_by_structural_hash_ignores_names():
    text = tvms.load(os.path.join(SAMPLES, "te_relu_2d.tvms")).script()
    f1 = tvms.parse(text)
    f2 = tvms.parse(text.replace("i0_1", "renamed_a").replace("i1_1", "renamed_b"))
    assert tvms.ir.structural_equal(f1, f2)
    assert structural_hash(f1) == structural_hash(f2)
    m1 = build_cpu({"relu": f1})
    m2 = build_cpu({"relu": f2})
    assert m1 is m2
    f3 = tvms.parse(text.replace("T.float32(0.0)", "T.float32(1.0)"))
    assert structural_hash(f3) != structural_hash(f1)
    assert build_cpu({"relu": f3}) is not m1
    assert build_cpu({"relu": f1}, schedule=False) is not m1


def test_structural_hash_agrees_with_structural_equal_on_samples():
    a = tvms.load(os.path.join(SAMPLES, "mlp_zero.tvms"))
    b = tvms.load(os.path.join(SAMPLES, "mlp_torch_fx_zero.tvms"))
    for name in ("transpose", "fused_matmul_add_relu"):
        assert tvms.ir.structural_equal(a[name], b[name]) == (structural_hash(a[name]) == structural_hash(b[name]))
    assert structural_hash(a["transpose"]) != structural_hash(a["transpose1"])


def test_get_source_and_module_interface():
    module = build_cpu(tvms.load(os.path.join(SAMPLES, "e2e_mlp.tvms")))
    assert set(module) == {"relu0", "linear0", "linear1"}
    assert isinstance(module["linear0"], Kernel)
    ll = module.get_source("llvm")
    assert "define void @tvms_linear0(ptr noalias" in ll
    asm = module.get_source("asm")
    assert "tvms_linear0:" in asm
    with pytest.raises(KeyError, match="no kernel named"):
        module["nope"]
    with pytest.raises(ValueError):
        module.get_source("cuda")
    assert module.target.cpu and module.target.triple
    assert cpu.parallel_runtime() in ("gomp", "serial")


# ----------------------------------------------------------------------------- inline exp and erf

EXP_ERF = '''
@T.prim_func
def f(A: T.Buffer((N,), "float32"), E: T.Buffer((N,), "float32"), R: T.Buffer((N,), "float32")):
    T.func_attr({"tir.noalias": True})
    for i in T.serial(N, annotations=ANN):
        with T.block("c"):
            vi = T.axis.remap("S", [i])
            E[vi] = T.exp(A[vi])
            R[vi] = T.erf(A[vi])
'''


def _exp_erf(a, vectorize: bool):
    ann = '{"tvms.vectorize_width": 16}' if vectorize else '{"tvms.vectorize_width": 1}'
    src = EXP_ERF.replace("N,", f"{a.size},").replace("T.serial(N", f"T.serial({a.size}").replace("ANN", ann)
    e, r = np.empty_like(a), np.empty_like(a)
    build_cpu({"f": tvms.parse(src)}, schedule=False)["f"](a, e, r)
    return e, r


def _ulps(got, want):
    """|got - want| in units of the float32 spacing at ``want`` (a float64 reference)."""
    spacing = np.spacing(np.abs(want).astype("float32")).astype("float64")
    return np.abs(got.astype("float64") - want) / spacing


def test_float32_exp_and_erf_are_accurate_and_vectorize_to_the_same_bits():
    """exp and erf of float32 are generated as arithmetic (LLVM vectorizes them); within
    1.1 and 3 ulp of the exact values on a dense grid, with C's results for the special
    values, and the same bits in vector and scalar loops."""
    grid = np.concatenate([np.linspace(-103, 88.7, 60001), np.linspace(-6, 6, 60001),
                           RNG.standard_normal(20000) * 1e-3]).astype("float32")
    e, r = _exp_erf(grid, True)
    e_scalar, r_scalar = _exp_erf(grid, False)
    np.testing.assert_array_equal(e, e_scalar)
    np.testing.assert_array_equal(r, r_scalar)
    finite = np.exp(grid.astype("float64")) > np.finfo("float32").tiny  # normal results
    assert _ulps(e[finite], np.exp(grid[finite].astype("float64"))).max() < 1.1
    erf = np.array([math.erf(float(x)) for x in grid])
    assert _ulps(r, erf).max() <= 3.0
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 89.0, -104.0, 88.72283935546875, 1e-40, 5.0, -5.0],
                       "float32")
    e, r = _exp_erf(special, True)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(e[:9], np.exp(special[:9]))  # inf, 0, nan, 1, 1, inf, 0, inf, 1
    np.testing.assert_array_equal(r[:5], [1.0, -1.0, np.nan, 0.0, -0.0])
    assert np.signbit(r[4]) and r[-2] == 1.0 and r[-1] == -1.0 and r[-3] > 0


# The smallest IR found that aborted LLVM 22.1's SLP vectorizer (`codegen_llvm.avoid_llvm_aborts`),
# reduced from the kernel of a bilinear 4x6 -> 6x3 align_corners resize2d after LLVM had unrolled
# and folded it: four adjacent stores of fmuladds, whose operands %s, %v and %t are fmuladds
# too, one of them (%s) using %d both as a factor and as the addend.
SLP_ABORT_IR = """
define void @f(ptr %x, ptr %y, float %w) {
entry:
  %p1 = getelementptr inbounds i8, ptr %x, i64 4
  %p2 = getelementptr inbounds i8, ptr %x, i64 8
  %p3 = getelementptr inbounds i8, ptr %x, i64 12
  %a = load float, ptr %x, align 4
  %b = load float, ptr %p1, align 4
  %c = load float, ptr %p2, align 4
  %d = load float, ptr %p3, align 4
  %ch = fmul float %c, 5.000000e-01
  %u = call float @llvm.fmuladd.f32(float %w, float 5.000000e-01, float %a)
  %v = call float @llvm.fmuladd.f32(float %w, float 5.000000e-01, float %b)
  %t = call float @llvm.fmuladd.f32(float %w, float 5.000000e-01, float %ch)
  %s = call float @llvm.fmuladd.f32(float %d, float 5.000000e-01, float %d)
  %r0 = call float @llvm.fmuladd.f32(float %s, float 5.000000e-01, float %u)
  %r1 = call float @llvm.fmuladd.f32(float %v, float 5.000000e-01, float %v)
  %r2 = call float @llvm.fmuladd.f32(float %t, float 5.000000e-01, float %t)
  %r3 = call float @llvm.fmuladd.f32(float %s, float 5.000000e-01, float %s)
  %q1 = getelementptr inbounds i8, ptr %y, i64 4
  %q2 = getelementptr inbounds i8, ptr %y, i64 8
  %q3 = getelementptr inbounds i8, ptr %y, i64 12
  store float %r0, ptr %y, align 4
  store float %r1, ptr %q1, align 4
  store float %r2, ptr %q2, align 4
  store float %r3, ptr %q3, align 4
  ret void
}
declare float @llvm.fmuladd.f32(float, float, float)
"""

# Optimizes standard input's IR as tvms does, JIT-compiles it and prints f(x, y, w)'s y.
OPTIMIZE_AND_RUN = """
import ctypes, json, sys
import numpy as np
import llvmlite.binding as llvm
from tvmscript.compiler.codegen_llvm import optimize
from tvmscript.runtime.host_cpu import host_target
target = host_target()
machine = target.target_machine(3)
module = llvm.parse_assembly(sys.stdin.read())
module.triple, module.data_layout = target.triple, str(machine.target_data)
optimize(module, machine, speed_level=3)
engine = llvm.create_mcjit_compiler(module, machine)
engine.finalize_object()
f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float)(engine.get_function_address("f"))
x, y = np.array(json.loads(sys.argv[1]), "float32"), np.zeros(4, "float32")
f(x.ctypes.data, y.ctypes.data, float(sys.argv[2]))
print(json.dumps(y.tolist()))
"""


def test_optimize_survives_ir_that_aborted_the_slp_vectorizer():
    """`codegen_llvm.optimize` of IR that killed the process inside LLVM 22.1's SLP vectorizer
    ("must be scheduled at this point", on every x86 CPU) returns, and the code computes what
    the IR says. In a child process, so that an abort fails this test instead of pytest."""
    x, w = [1.5, -2.0, 3.25, 0.75], 2.0
    proc = subprocess.run([sys.executable, "-c", OPTIMIZE_AND_RUN, json.dumps(x), str(w)], input=SLP_ABORT_IR,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, f"LLVM's optimizer failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    a, b, c, d = x
    s = 1.5 * d  # every value is exact in float32, fused or not
    assert json.loads(proc.stdout) == [0.5 * s + (w * 0.5 + a), 1.5 * (w * 0.5 + b), 1.5 * (w * 0.5 + 0.5 * c),
                                       1.5 * s]


def test_three_vector_tile_is_unrolled_not_interleaved():
    """LLVM ignores an interleave count that is not a power of two: a register tile of three
    vectors (48 floats) asks for the vectorized loop to be unrolled whole instead, so its
    accumulators stay in registers."""
    src = '''
@T.prim_func
def f(A: T.Buffer((7, 64), "float32"), B: T.Buffer((64, 48), "float32"), C: T.Buffer((7, 48), "float32")):
    T.func_attr({"tir.noalias": True})
    for i in range(7):
        acc = T.alloc_buffer((48,), scope="local")
        for j in T.serial(48, annotations={"tvms.vectorize_width": 16, "tvms.interleave": 3}):
            acc[j] = T.float32(0)
        for k in range(64):
            for j in T.serial(48, annotations={"tvms.vectorize_width": 16, "tvms.interleave": 3}):
                acc[j] = acc[j] + A[i, k] * B[k, j]
        for j in T.serial(48, annotations={"tvms.vectorize_width": 16, "tvms.interleave": 3}):
            C[i, j] = acc[j]
'''
    module = build_cpu({"f": tvms.parse(src)}, schedule=False)
    unopt = module.get_source("llvm-unopt")
    assert "llvm.loop.vectorize.followup_vectorized" in unopt
    assert "llvm.loop.interleave.count" not in unopt
    a, b = rand(7, 64), rand(64, 48)
    c = np.zeros((7, 48), "float32")
    module["f"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
