"""Bounds safety (issue 12, finding 1): `tvms check` reports accesses out of bounds for certain,
compiled kernels check at run time every access not proven in bounds at compile time, and a
failing check stops the call with an error naming the access, the index and the shape, placed
at the access in the source. Most accesses are proven: the kernels of the MLP have no check
left at all."""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.bounds_check import CHECK_INDEX, CHECK_RANGE, bounds_problems, count_checks
from tvmscript.compiler.lower_tir import lower
from tvmscript.runtime.kernel import BoundsCheckError, KernelAssertionError

from support.out_of_bounds import COPY, REPRODUCERS, SYMBOLIC  # the reproducers

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tvms_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tvmscript.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("stmt,extent,access,index,static", REPRODUCERS)
def test_out_of_bounds_kernels_stop_with_a_located_error(tmp_path, stmt, extent, access, index, static):
    path = tmp_path / "oob.tvms"
    path.write_text(COPY.format(extent=extent, stmt=stmt))
    check = tvms_cli("check", path)
    assert check.returncode == 1 and static in check.stderr and "shape (4,)" in check.stderr, check.stderr
    assert f"--> {path}:5:" in check.stderr and "^" in check.stderr

    # tvms run checks first: it stops with what check finds, reported as check reports it.
    out = tmp_path / "out.npz"
    proc = tvms_cli("run", path, "--out", out)
    assert proc.returncode == 1 and proc.stderr == check.stderr
    assert not out.exists()  # no partial output file

    # The kernel checks the access itself when it runs.
    kernel = tvms.compile(tvms.load(path))["f"]
    with pytest.raises(BoundsCheckError) as info:
        kernel(np.zeros(4, "float32"), np.zeros(4, "float32"))
    message = str(info.value)
    assert access in message and index in message and "shape (4,)" in message
    assert info.value.span.filename == str(path) and info.value.span.line == 5


def test_no_bounds_check_leaves_the_checks_out(tmp_path):
    path = tmp_path / "sym.tvms"
    path.write_text(SYMBOLIC.format(extent="n + 1"))
    with_checks = tvms_cli("compile", path, "--emit", "llvm-unopt").stdout
    without = tvms_cli("compile", path, "--emit", "llvm-unopt", "--no-bounds-check").stdout
    assert "tvms_bounds_fail" in with_checks and "define" in without and "tvms_bounds_fail" not in without


# ----------------------------------------------------------------------------- the Python API

def compile_kernel(text: str, **options):
    return tvms.compile(tvms.parse(text), "llvm", **options)["f"]


def test_a_symbolic_loop_one_too_long_is_caught_at_run_time():
    a = np.arange(5, dtype="float32")
    b = np.zeros(5, "float32")
    compile_kernel(SYMBOLIC.format(extent="n"))(a, b)
    np.testing.assert_array_equal(b, a * 2)
    kernel = compile_kernel(SYMBOLIC.format(extent="n + 1"))
    with pytest.raises(BoundsCheckError, match=r"read of A\[i\]: indices 0 to 5 reach outside axis 0 of A "
                                               r"\(size 5, shape \(n,\)\) \(<string>:8:16\)") as info:
        kernel(a, np.zeros(5, "float32"))
    assert isinstance(info.value, IndexError)
    assert "B[i] = A[i] * T.float32(2)" in info.value.render(SYMBOLIC.format(extent="n + 1"))
    # The check ran before the loop: nothing was written.
    b = np.zeros(5, "float32")
    with pytest.raises(BoundsCheckError):
        kernel(a, b)
    assert not b.any()


GATHER = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), idx: T.Buffer((6,), "int32"), B: T.Buffer((6,), "float32")):
    for i in range(6):
        B[i] = A[idx[i]]
'''


@pytest.mark.parametrize("bad", [4, -1, 2**31 - 1])
def test_a_gather_with_a_bad_index_names_the_index(bad):
    kernel = compile_kernel(GATHER)
    a = np.arange(4, dtype="float32") + 1
    idx = np.array([3, 0, 2, 1, 1, 3], "int32")
    b = np.zeros(6, "float32")
    kernel(a, idx, b)
    np.testing.assert_array_equal(b, a[idx])
    idx[4] = bad
    with pytest.raises(BoundsCheckError, match=rf"read of A\[idx\[i\]\]: index {bad} is outside "
                                               r"axis 0 of A \(size 4, shape \(4,\)\) \(<string>:5:16\)"):
        kernel(a, idx, b)


PARALLEL = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4096,), "float32"), idx: T.Buffer((4096,), "int32"), B: T.Buffer((4096,), "float32")):
    for i in T.parallel(4096):
        B[i] = A[idx[i]]
'''


def test_a_failing_check_in_a_parallel_loop_raises_once_and_the_process_lives():
    kernel = compile_kernel(PARALLEL)
    a = np.arange(4096, dtype="float32")
    idx = np.arange(4096, dtype="int32")[::-1].copy()
    b = np.zeros(4096, "float32")
    kernel(a, idx, b)
    np.testing.assert_array_equal(b, a[idx])
    idx[[5, 4000]] = 10**6
    with pytest.raises(BoundsCheckError, match="index 1000000 is outside"):
        kernel(a, idx, b)
    kernel(a, np.zeros(4096, "int32"), b)  # and the next call works
    assert not b.any()


def test_bounds_check_false_compiles_without_checks():
    from tvmscript.compiler.build_cpu import build_cpu

    mod = tvms.parse(SYMBOLIC.format(extent="n + 1"))
    assert "tvms_bounds_fail" in build_cpu(mod).get_source("llvm")
    assert "tvms_bounds_fail" not in build_cpu(mod, bounds_check=False).get_source("llvm")
    a = np.arange(4, dtype="float32")
    b = np.zeros(4, "float32")
    compile_kernel(SYMBOLIC.format(extent="n"), bounds_check=False)(a, b)
    np.testing.assert_array_equal(b, a * 2)


# ----------------------------------------------------------------------------- what is proven


def check_sites(func: tir.PrimFunc) -> collections.Counter:
    """How many in-place and hoisted checks the lowered ``func`` keeps."""
    kept = count_checks(lower(func, bounds_check=True))
    return collections.Counter({op: kept[kind] for op, kind in ((CHECK_INDEX, "in place"), (CHECK_RANGE, "hoisted"))
                                if kept[kind]})


GUARDED = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((30,), "float32"), B: T.Buffer((32,), "float32"), C: T.Buffer((30,), "float32")):
    for i in range(32):
        B[i] = T.if_then_else(1 <= i and i < 31, A[i - 1], T.float32(0))
    for io, ii in T.grid(8, 4):
        if io * 4 + ii < 30:
            C[io * 4 + ii] = A[io * 4 + ii]
    for i in range(32):
        with T.block("pad"):
            vi = T.axis.spatial(32, i)
            T.where(vi < 30)
            C[vi] = C[vi] + A[vi]
'''


def test_guarded_accesses_are_proven_and_neither_checked_nor_flagged():
    func = tvms.parse(GUARDED)
    assert check_sites(func) == collections.Counter()
    assert bounds_problems(func, "f") == []
    kernel = compile_kernel(GUARDED)
    a = np.arange(30, dtype="float32") + 1
    b, c = np.zeros(32, "float32"), np.zeros(30, "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(b, np.concatenate([[0], a, [0]]))
    np.testing.assert_array_equal(c, 2 * a)


def test_the_mlp_and_a_matmul_keep_no_check():
    """The legalized and scheduled kernels of the seed MLP (the zero pipeline, then the CPU
    default schedule, as `tvms run` compiles them) are proven in bounds entirely."""
    from tvmscript.compiler.schedule_cpu import default_schedule

    mod = tvms.parse((ROOT / "samples" / "mlp_zero.tvms").read_text())
    matmul = tvms.parse((ROOT / "samples" / "te_matmul.tvms").read_text())
    funcs = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)] + [matmul]
    assert len(funcs) >= 4
    for func in funcs:
        assert check_sites(default_schedule(func)) == collections.Counter(), func


def test_an_invariant_index_is_checked_once_outside_the_loop():
    func = tvms.parse(GATHER.replace("B[i] = A[idx[i]]", "for j in range(4):\n            B[i] = A[idx[i]] + A[j]"))
    assert check_sites(func) == collections.Counter({CHECK_RANGE: 1})


# ----------------------------------------------------------------------------- a property

AFFINE = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer(({size},), "int32"), B: T.Buffer(({extent},), "int32")):
    for i in range({extent}):
        B[i] = A[i * {scale} + {offset}]
'''


@settings(max_examples=25, deadline=None)
@given(size=st.integers(1, 12), extent=st.integers(1, 6), scale=st.integers(-3, 3), offset=st.integers(-8, 14))
def test_affine_reads_fail_exactly_when_an_index_is_outside(size, extent, scale, offset):
    """Against NumPy's view of the same indices: the kernel raises iff one is outside, and
    `tvms check` flags it (an affine index over a loop that runs is out of bounds for certain)."""
    text = AFFINE.format(size=size, extent=extent, scale=scale, offset=offset)
    indices = np.arange(extent) * scale + offset
    outside = bool(((indices < 0) | (indices >= size)).any())
    func = tvms.parse(text)
    assert bool(bounds_problems(func, "f")) == outside
    kernel = compile_kernel(text)
    a = np.arange(size, dtype="int32") * 10
    b = np.zeros(extent, "int32")
    if outside:
        with pytest.raises(BoundsCheckError, match=r"read of A\[i"):
            kernel(a, b)
    else:
        kernel(a, b)
        np.testing.assert_array_equal(b, a[indices])



SQUARES = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((3,), "int32"), k: T.int32):
    for i in range(3):
        C[i] = A[i * i + k]
'''


def test_a_non_affine_index_is_checked_in_place():
    """A non-affine index's range over the loop is not exact: checking it before the loop could
    stop a correct kernel, so each access is checked where it runs."""
    func = tvms.parse(SQUARES)
    assert check_sites(func) == collections.Counter({CHECK_INDEX: 1})
    kernel = compile_kernel(SQUARES)
    a = np.arange(8, dtype="int32") * 3
    c = np.zeros(3, "int32")
    kernel(a, c, 3)
    np.testing.assert_array_equal(c, a[np.arange(3) ** 2 + 3])
    with pytest.raises(BoundsCheckError, match=r"read of A\[i \* i \+ k\].*index 8 is outside"):
        kernel(a, c, 4)


# ----------------------------------------------------------------------------- symbolic shapes

SYMBOLIC_GRID = '''# from tvm.script import tir as T
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    for i, j in T.grid(n, 65):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_a_loop_past_a_static_axis_is_reported_whatever_the_symbolic_batch(tmp_path):
    """The issue's case: with ``n`` symbolic the loop over ``i`` may run no iteration at all,
    but whenever it runs, ``j`` reaches 64 on an axis of 64: both accesses are reported at
    their places, as with a static ``n``; the kernel indeed stops at run time for any ``n``."""
    path = tmp_path / "grid.tvms"
    path.write_text(SYMBOLIC_GRID)
    proc = tvms_cli("check", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 2
    assert ("out-of-bounds write to B[i, j]: the index takes the values 0 to 64, outside axis 1 of B (0 to 63), "
            "shape (n, 64)") in proc.stderr
    assert f"--> {path}:10:13" in proc.stderr and f"--> {path}:10:25" in proc.stderr
    static = tmp_path / "static.tvms"
    static.write_text(SYMBOLIC_GRID.replace("n = T.int64()", "n = 4"))
    assert tvms_cli("check", static).stderr.replace(str(static), str(path)) == proc.stderr
    with pytest.raises(BoundsCheckError, match=r"axis 1 of [AB]"):
        compile_kernel(SYMBOLIC_GRID)(np.zeros((3, 64), "float32"), np.zeros((3, 64), "float32"))


SYMBOLIC_1D = '''# from tvm.script import tir as T
@T.prim_func
def f(a: T.handle, b: T.handle, m: T.int64):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, ({size},), "float32")
    for i in range({extent}):
        B[{index}] = A[{read}]
'''


@pytest.mark.parametrize("size,extent,index,read,says", [
    ("n", "n", "i + 1", "i", "write to B[i + 1]: the index takes the values 1 to n"),
    ("n", "n", "i + n", "i", "write to B[i + n]: the index takes the values n to n * 2 - 1"),
    ("n", "n", "i", "i - 1", "read of A[i - 1]: the index takes the values -1 to n - 2"),
    ("n * 2", "n", "i * 2 + 2", "i", "write to B[i * 2 + 2]: the index takes the values 2 to n * 2"),
])
def test_symbolic_accesses_wrong_for_every_size_are_reported(size, extent, index, read, says):
    """Wrong whenever the loop runs at all (``n >= 1``): each is reported, though at ``n = 0``
    nothing would run; the kernel stops at run time, here for n = 5."""
    text = SYMBOLIC_1D.format(size=size, extent=extent, index=index, read=read)
    problems = bounds_problems(tvms.parse(text), "f")
    assert len(problems) == 1 and says in problems[0].message, [p.message for p in problems]
    assert problems[0].span.line == 8
    with pytest.raises(BoundsCheckError):
        compile_kernel(text)(np.zeros(5, "float32"), np.zeros(10 if size == "n * 2" else 5, "float32"), 5)


LEGAL_SYMBOLIC = {
    "the whole buffer": ("n", "n", "i", "i"),
    "every other element": ("n * 2", "n", "i * 2 + 1", "i"),
    "a shifted copy": ("n", "n - 1", "i", "i + 1"),
    "from the end": ("n", "n", "n - 1 - i", "i"),
    # Out of bounds for some sizes only (m > n): a run-time check, not a certain error.
    "another size": ("n", "m", "i", "i"),
}


@pytest.mark.parametrize("name", LEGAL_SYMBOLIC)
def test_legal_symbolic_accesses_are_not_flagged(name):
    size, extent, index, read = LEGAL_SYMBOLIC[name]
    text = SYMBOLIC_1D.format(size=size, extent=extent, index=index, read=read)
    assert bounds_problems(tvms.parse(text), "f") == []


TILED = '''# from tvm.script import tir as T
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    for io, ii, j in T.grid((n + 31) // 32, 32, 64):
        with T.block("B"):
            vi = T.axis.spatial(n, io * 32 + ii)
            vj = T.axis.spatial(64, j)
            T.where(io * 32 + ii < n)
            B[vi, vj] = A[vi, vj]
    for i in range(n):
        for k in range(i):
            B[i, k % 64] = A[k, 0]
'''


def test_tiled_and_triangular_symbolic_loops_are_not_flagged():
    """A tile guarded by T.where, and a loop whose extent is an enclosing loop's variable (it
    runs on some iterations only): neither is out of bounds, neither is reported."""
    assert bounds_problems(tvms.parse(TILED), "f") == []


# ----------------------------------------------------------------------------- allocations

ALLOC = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), m: T.int64):
    X = T.alloc_buffer((m,), "float32")
    S = T.alloc_buffer((4,), "float32")
    for i in range(4):
        A[i] = X[i % m] + S[i]
'''


def test_allocations_start_zeroed_and_a_failed_one_is_an_error():
    """A kernel reading what it never wrote reads zeros (LLVM took such a load as undefined
    and once compiled a kernel into an endless loop); an allocation the system refuses is an
    error naming the buffer, not a write through a null pointer."""
    kernel = compile_kernel(ALLOC)
    a = np.full(4, 7, "float32")
    kernel(a, 8)
    np.testing.assert_array_equal(a, np.zeros(4, "float32"))
    with pytest.raises(KernelAssertionError, match=r"f: cannot allocate 'X' \(float32, m elements\): out of memory"):
        kernel(a, 2**60)


LEAK = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), idx: T.Buffer((1,), "int32"), m: T.int64):
    X = T.alloc_buffer((m,), "float32")
    for i in range(m):
        X[i] = T.float32(1)
    A[0] = X[idx[0]]
'''


def test_a_failed_check_frees_the_kernels_heap_allocations():
    """A check that stops a kernel frees the heap buffers it allocated: 40 failing calls that
    each fill 32 MB would otherwise keep 1.3 GB."""
    import resource

    kernel = compile_kernel(LEAK)
    a, m = np.zeros(4, "float32"), 8 << 20
    kernel(a, np.array([3], "int32"), m)
    assert a[0] == 1
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(40):
        with pytest.raises(BoundsCheckError, match="index -1 is outside"):
            kernel(a, np.array([-1], "int32"), m)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 300, f"peak memory grew {grown_mb:.0f} MB"
