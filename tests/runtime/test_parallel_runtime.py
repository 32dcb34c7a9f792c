"""Parallel loops under load: small ones run on the calling thread (no libgomp team), large
ones on several threads, symbolic extents decided when the kernel runs, and the wait policy
tvms gives libgomp's idle workers (only when the user has not chosen one). Each result is
checked against NumPy."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.codegen_llvm import cost
from tvmscript.runtime import cpu
from tvmscript.runtime.kernel_abi import THREADS_SYMBOL
from tvmscript.compiler.build_cpu import build_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(0)


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def teams_possible() -> bool:
    """Whether a large parallel loop can run on more than one thread here."""
    return cpu.parallel_runtime() == "gomp" and cpus() >= 2 and os.environ.get("OMP_NUM_THREADS", "") != "1"


SMALL = '''
@T.prim_func
def small(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "small", "tir.noalias": True})
    for i in T.parallel(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2) + T.float32(1)
'''

# Rows of 1024 elements, each row also records the OpenMP thread that ran it.
LARGE = '''
@T.prim_func
def large(A: T.Buffer((64, 1024), "float32"), B: T.Buffer((64, 1024), "float32"), T_id: T.Buffer((64,), "int32")):
    T.func_attr({"global_symbol": "large", "tir.noalias": True})
    for i in T.parallel(64):
        for j in range(1024):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
        T_id[i] = T.call_extern("int32", "omp_get_thread_num")
'''

# A symbolic number of rows of 256 elements: whether a team starts is decided at run time.
ROWS = '''
@T.prim_func
def rows(a: T.handle, b: T.handle):
    T.func_attr({"global_symbol": "rows", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n, 256))
    B = T.match_buffer(b, (n, 256))
    for i in T.parallel(n):
        for j in range(256):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
'''


def build(src: str):
    return build_cpu(tvms.parse(src), schedule=False, use_cache=False)


def test_small_parallel_loop_runs_on_calling_thread():
    module = build(SMALL)
    a = RNG.standard_normal(16).astype("float32")
    b = np.zeros(16, "float32")
    module["small"](a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    # 16 iterations are far below a thread's share of work: no team code at all.
    unopt = module.get_source("llvm-unopt")
    assert "GOMP_parallel" not in unopt and THREADS_SYMBOL not in unopt


def test_large_parallel_loop_runs_on_several_threads():
    module = build(LARGE)
    assert "GOMP_parallel" in module.get_source("llvm-unopt") or cpu.parallel_runtime() != "gomp"
    a = RNG.standard_normal((64, 1024)).astype("float32")
    b = np.zeros((64, 1024), "float32")
    ids = np.full(64, -1, "int32")
    module["large"](a, b, ids)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    if not teams_possible():
        pytest.skip("needs libgomp and two CPUs")
    # Static chunks: thread t runs rows [t * chunk, (t + 1) * chunk).
    assert ids[0] == 0 and np.all(np.diff(ids) >= 0)
    assert len(set(ids.tolist())) >= 2


def test_torch_setting_libgomps_thread_count_does_not_make_kernels_serial():
    """PyTorch shares the process's libgomp and sets its thread count (torch.set_num_threads
    calls omp_set_num_threads): the kernels take their team size from tvms's runtime instead,
    so they still run on several threads."""
    if not teams_possible():
        pytest.skip("needs libgomp and two CPUs")
    module = build(LARGE)
    gomp = ctypes.CDLL("libgomp.so.1")  # the copy already loaded into the process
    before = gomp.omp_get_max_threads()
    gomp.omp_set_num_threads(1)
    try:
        ids = np.full(64, -1, "int32")
        module["large"](RNG.standard_normal((64, 1024)).astype("float32"), np.zeros((64, 1024), "float32"), ids)
    finally:
        gomp.omp_set_num_threads(before)
    assert len(set(ids.tolist())) >= 2
    assert cpu.num_threads() == cpu.default_threads()


def test_team_size_follows_the_work():
    """The team's size is computed from the extent at run time (a guarded call), not left to
    libgomp's default, and capped at the runtime's thread count (`THREADS_SYMBOL`)."""
    unopt = build(ROWS).get_source("llvm-unopt")
    assert THREADS_SYMBOL in unopt and "GOMP_parallel" in unopt and "omp_get_max_threads" not in unopt
    call = [line for line in unopt.splitlines() if "call void @\"GOMP_parallel\"" in line]
    assert call and not call[0].rstrip().endswith("i32 0, i32 0)")
    per_row = cost.iterations_per_thread(parallel_loop(ROWS).body)
    assert per_row > 1  # a row alone is far less than a thread's share


@pytest.mark.parametrize("n", [0, 1, 7, 64, 4096, 9000])
def test_symbolic_extent_small_and_large(n):
    module = build(ROWS)
    a = RNG.standard_normal((n, 256)).astype("float32")
    b = np.zeros((n, 256), "float32")
    module["rows"](a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def parallel_loop(src: str):
    """The outermost loop of a prim_func, lowered as codegen sees it."""
    from tvmscript.compiler.lower_tir import lower

    s = lower(tvms.parse(src)).body
    while not isinstance(s, tvms.tir.For):
        s = s.seq[0] if isinstance(s, tvms.tir.SeqStmt) else s.body
    return s


def test_work_estimate():
    """Loads and stores per iteration; symbolic extents and external calls count as large."""
    rows = parallel_loop(ROWS)
    assert cost.estimated_work(rows) == cost.UNKNOWN_WORK  # the loop over n
    assert cost.estimated_work(rows.body) == 2 * 256  # a load and a store per element
    assert cost.estimated_work(parallel_loop(SMALL)) == 2 * 16
    assert cost.estimated_work(parallel_loop(LARGE).body) == cost.UNKNOWN_WORK  # omp_get_thread_num


def run_python(code: str, env_changes: dict) -> dict:
    """Run ``code`` in a fresh interpreter (its own libgomp, loaded with the environment
    given) and return the JSON object it prints last, with its stderr under "stderr"."""
    env = {k: v for k, v in os.environ.items() if k not in cpu.WAIT_POLICY_VARS}
    env.update(env_changes)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["stderr"] = proc.stderr
    return result


THREADS_CODE = f'''
import json, os, numpy as np
import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.runtime.cpu import parallel_runtime

def threads():
    return len(os.listdir("/proc/self/task"))

k = build_cpu(tvms.parse({ROWS!r}), schedule=False, use_cache=False)["rows"]
before = threads()
for n in (1, 7, 64):
    a = np.ones((n, 256), "float32"); b = np.zeros_like(a)
    for _ in range(20):
        k(a, b)
after_small = threads()
a = np.ones((9000, 256), "float32"); b = np.zeros_like(a)
k(a, b)
print(json.dumps(dict(before=before, after_small=after_small, after_large=threads(),
                      runtime=parallel_runtime())))
'''


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc/self/task")
def test_small_runtime_extent_starts_no_threads():
    """libgomp creates its workers on the first team: calls with a small runtime extent leave
    the process's thread count as it was; a large one adds the workers."""
    r = run_python(THREADS_CODE, {})
    assert r["after_small"] == r["before"], r
    if r["runtime"] == "gomp" and cpus() >= 2 and os.environ.get("OMP_NUM_THREADS", "") != "1":
        assert r["after_large"] > r["before"], r


POLICY_CODE = '''
import ctypes, json, os
from tvmscript.runtime import cpu
from tvmscript.runtime.kernel_abi import THREADS_SYMBOL
runtime = cpu.parallel_runtime()
shown = False
if runtime == "gomp":
    gomp = ctypes.CDLL("libgomp.so.1")  # the copy already loaded: the one tvms uses
    if hasattr(gomp, "omp_display_env"):
        gomp.omp_display_env(1)  # libgomp's own settings, on stderr
        shown = True
print(json.dumps(dict(runtime=runtime, shown=shown, policy=cpu.wait_policy(),
                      env={k: os.environ.get(k) for k in cpu.WAIT_POLICY_VARS})))
'''


def displayed(stderr: str, name: str):
    """A setting as ``omp_display_env`` printed it (``NAME = 'value'``)."""
    for line in stderr.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == name:
            return value.strip("'")
    return None


def test_tvms_sets_a_short_spin_when_the_user_has_not():
    r = run_python(POLICY_CODE, {})
    if r["runtime"] != "gomp":
        pytest.skip("no libgomp")
    assert r["env"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}  # the environment as it was
    assert f"GOMP_SPINCOUNT={cpu.TVMS_SPINCOUNT}" in r["policy"]
    if r["shown"]:
        assert displayed(r["stderr"], "GOMP_SPINCOUNT") == str(cpu.TVMS_SPINCOUNT)


@pytest.mark.parametrize("name, value", [("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "7")])
def test_user_wait_policy_is_respected(name, value):
    r = run_python(POLICY_CODE, {name: value})
    if r["runtime"] != "gomp":
        pytest.skip("no libgomp")
    assert r["env"][name] == value
    assert r["policy"].startswith("set by the user") and value in r["policy"]
    if r["shown"]:
        if name == "GOMP_SPINCOUNT":
            assert displayed(r["stderr"], "GOMP_SPINCOUNT") == value
        else:
            assert displayed(r["stderr"], "OMP_WAIT_POLICY") == "ACTIVE"
            assert displayed(r["stderr"], "GOMP_SPINCOUNT") != str(cpu.TVMS_SPINCOUNT)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs PyTorch")
def test_libgomp_loaded_before_tvms_is_reported():
    """PyTorch's wheels bring their own libgomp.so.1: imported first, tvms shares that copy,
    already initialized, and says so instead of claiming its policy."""
    r = run_python("import torch\n" + POLICY_CODE, {})
    if r["runtime"] != "gomp":
        pytest.skip("no libgomp")
    if "loaded before tvms" not in r["policy"]:
        pytest.skip("this PyTorch build does not load libgomp")
    assert r["env"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}


# A small parallel loop (64 x 1024 elements: alone, no team) before a large one in one kernel.
SMALL_BESIDE_LARGE = '''
@T.prim_func
def pair(A: T.Buffer((64, 1024), "float32"), B: T.Buffer((64, 1024), "float32"),
         C: T.Buffer((256, 4096), "float32"), D: T.Buffer((256, 4096), "float32")):
    T.func_attr({"global_symbol": "pair", "tir.noalias": True})
    for i in T.parallel(64):
        for j in range(1024):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
    for i in T.parallel(256):
        for j in range(4096):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = C[vi, vj] * T.float32(2)
'''


def test_small_loops_share_the_team_a_kernel_starts():
    """Beside a loop that surely starts a team, a small one gets a team too (its workers are
    woken once per kernel: `cost.starts_a_team`); alone it would run on the calling thread."""
    small_alone = SMALL_BESIDE_LARGE.split("    for i in T.parallel(256):")[0]
    assert not cost.starts_a_team(parallel_loop(small_alone))
    from tvmscript.compiler.lower_tir import lower

    assert cost.starts_a_team(lower(tvms.parse(SMALL_BESIDE_LARGE)).body)
    assert build(small_alone).get_source("llvm-unopt").count('call void @"GOMP_parallel"') == 0
    module = build(SMALL_BESIDE_LARGE)
    assert module.get_source("llvm-unopt").count('call void @"GOMP_parallel"') == 2
    a, c = RNG.standard_normal((64, 1024)).astype("float32"), RNG.standard_normal((256, 4096)).astype("float32")
    b, d = np.zeros_like(a), np.zeros_like(c)
    module["pair"](a, b, c, d)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(d, c * 2)
