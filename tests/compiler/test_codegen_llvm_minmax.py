"""Float ``T.max``/``T.min`` on the CPU: ``llvm.maxnum``/``llvm.minnum``, NaN-ignoring as C's
``fmax``/``fmin`` and the CUDA backend's ``max``/``min`` (`ExprGen.e_minmax` says why not
compare-and-select): a long max chain builds in moments, and the results are NumPy's
``fmax``/``fmin``, NaN operands included."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(0)

# A softmax's row maximum as a tuned schedule wrote it: recomputed for each element of the row
# (the max block computed at the row's loop), its 64 steps unrolled (`T.unroll`, which the code
# generator writes out statement by statement), and no ``tir.noalias``: A may be B, so LLVM
# cannot hoist the chain out of the j loop it does not depend on. Compare-and-select made LLVM
# 22's loop vectorizer walk 2^n paths through the chain: 24 steps took 10 s, 28 steps 85 s.
ROW_MAX_CHAIN = '''
from tvm.script import ir as I
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def row_max(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8, 64), "float32")):
        m = T.alloc_buffer((8,))
        for i, j in T.grid(8, 64):
            m[i] = T.float32(-3.4e38)
            for k in T.unroll(64):
                m[i] = T.max(m[i], A[i, k])
            B[i, j] = A[i, j] - m[i]

    @T.prim_func
    def row_min(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8, 64), "float32")):
        m = T.alloc_buffer((8,))
        for i, j in T.grid(8, 64):
            m[i] = T.float32(3.4e38)
            for k in T.unroll(64):
                m[i] = T.min(m[i], A[i, k])
            B[i, j] = A[i, j] - m[i]
'''

# Builds standard input's module (unscheduled, no cache), runs both kernels on argv[1]'s rows,
# prints the results and whether the generated IR compares floats.
BUILD_AND_RUN = """
import json, sys
import numpy as np
import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
mod = build_cpu(tvms.parse(sys.stdin.read()), schedule=False, use_cache=False)
a = np.array(json.loads(sys.argv[1]), "float32")
out = {}
for name in ("row_max", "row_min"):
    b = np.zeros_like(a)
    mod[name](a, b)
    out[name] = b.tolist()
out["fcmp"] = "fcmp" in mod.llvm_ir_unopt
print(json.dumps(out))
"""


def test_long_max_chain_in_a_loop_builds_in_moments():
    """The reproducer builds in seconds and computes NumPy's results. In a child process with a
    time limit: LLVM cannot be interrupted, and compare-and-select would take it centuries at
    64 steps."""
    a = RNG.standard_normal((8, 64)).astype("float32")
    try:
        proc = subprocess.run([sys.executable, "-c", BUILD_AND_RUN, json.dumps(a.tolist())], input=ROW_MAX_CHAIN,
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("building a 64-step float max chain took over 60 s (LLVM's loop vectorizer on compare-and-select?)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert not out["fcmp"], "float min/max should not be compare-and-select"
    np.testing.assert_array_equal(np.array(out["row_max"], "float32"), a - a.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(np.array(out["row_min"], "float32"), a - a.min(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_max_min_ignore_nan_in_either_operand(dtype):
    """A NaN operand is ignored whichever side it is on (compare-and-select returned the right
    operand: a NaN on the right came out, one on the left did not); two NaNs give a NaN."""
    src = f'''
from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((32,), "{dtype}"), B: T.Buffer((32,), "{dtype}"), C: T.Buffer((4, 32), "{dtype}")):
    for i in range(32):
        C[0, i] = T.max(A[i], B[i])
        C[1, i] = T.min(A[i], B[i])
        C[2, i] = T.max(B[i], A[i])
        C[3, i] = T.min(B[i], A[i])
'''
    k = build_cpu({"f": tvms.parse(src)}, schedule=False)["f"]
    a = RNG.standard_normal(32).astype(dtype)
    b = RNG.standard_normal(32).astype(dtype)
    a[[0, 5, 9]] = np.nan
    b[[1, 5, 12]] = np.nan
    a[2], b[3] = np.inf, -np.inf
    c = np.zeros((4, 32), dtype)
    k(a, b, c)
    for row, want in zip(c, (np.fmax(a, b), np.fmin(a, b), np.fmax(b, a), np.fmin(b, a))):
        np.testing.assert_array_equal(row, want)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("schedule", [True, False], ids=["scheduled", "plain"])
def test_max_min_reductions_skip_nan(op, schedule):
    """A row's maximum (minimum) is that of its numbers wherever its NaNs are, vectorized or
    not, with the default schedule's lanes or without; a row of NaNs leaves the initial value."""
    init = 3.0e38
    src = f'''
from tvm.script import tir as T

@T.prim_func
def f(A: T.Buffer((6, 1000), "float32"), B: T.Buffer((6,), "float32")):
    T.func_attr({{"tir.noalias": True}})
    for i, k in T.grid(6, 1000):
        with T.block("r"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32({-init if op == "max" else init})
            B[vi] = T.{op}(B[vi], A[vi, vk])
'''
    k = build_cpu({"f": tvms.parse(src)}, schedule=schedule)["f"]
    a = RNG.standard_normal((6, 1000)).astype("float32")
    a[0, 0] = a[1, 999] = a[2, 17] = a[3, 500:520] = np.nan
    a[5] = np.nan
    b = np.zeros(6, "float32")
    k(a, b)
    reduce = np.fmax.reduce if op == "max" else np.fmin.reduce
    np.testing.assert_array_equal(b[:5], reduce(a[:5], axis=1))
    assert b[5] == np.float32(-init if op == "max" else init)
