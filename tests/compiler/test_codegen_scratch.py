"""Scratch blocks kept between calls (compiler/codegen_llvm/scratch.py): a kernel's large
top-level allocation of constant size reuses one block per site, and the module frees them
when it is dropped.

Checked: which allocations are kept (large, constant, outside parallel loops) and which are
not; results stay right over calls with other inputs, and from four threads calling one kernel
at once (a kept block shared between two running calls would mix their data); a failed check
gives the site back; the runtime calls the module's release function when it drops it."""

from __future__ import annotations

import gc
import re
import threading

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.codegen_llvm.scratch import KEEP_MIN_BYTES
from tvmscript.runtime import cpu as runtime_cpu
from tvmscript.runtime.kernel import KernelAssertionError
from tvmscript.runtime.kernel_abi import RELEASE_SCRATCH_SYMBOL

N = 1 << 20  # 4 MiB of float32: a kept block, and calls long enough to overlap in threads

KERNELS = f'''# from tvm.script import tir as T
@I.ir_module
class Module:
    @T.prim_func
    def kept(A: T.Buffer(({N},), "float32"), B: T.Buffer(({N},), "float32")):
        tmp = T.alloc_buffer(({N},))
        for i in range({N}):
            tmp[i] = A[i] * T.float32(2)
        for i in range({N}):
            B[i] = tmp[{N} - 1 - i] + T.float32(1)

    @T.prim_func
    def small(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
        tmp = T.alloc_buffer((1024,))
        for i in range(1024):
            tmp[i] = A[i] * T.float32(2)
        for i in range(1024):
            B[i] = tmp[1023 - i]

    @T.prim_func
    def dynamic(a: T.handle, b: T.handle, n: T.int64):
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        tmp = T.alloc_buffer((n,))
        for i in range(n):
            tmp[i] = A[i] * T.float32(2)
        for i in range(n):
            B[i] = tmp[n - 1 - i]

    @T.prim_func
    def per_thread(A: T.Buffer((4, 65536), "float32"), B: T.Buffer((4, 65536), "float32")):
        for r in T.parallel(4):
            with T.block("row"):
                tmp = T.alloc_buffer((65536,))
                for i in range(65536):
                    tmp[i] = A[r, i] * T.float32(2)
                for i in range(65536):
                    B[r, i] = tmp[65535 - i]
'''

CHECKED = f'''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer(({N},), "float32"), idx: T.Buffer((1,), "int32"), B: T.Buffer((1,), "float32")):
    tmp = T.alloc_buffer(({N},))
    for i in range({N}):
        tmp[i] = A[i] + T.float32(1)
    B[0] = tmp[idx[0]]
'''


def ir_of(module, name: str) -> str:
    """The unoptimized LLVM IR of kernel ``name``'s function."""
    text = module.get_source("llvm-unopt")
    start = text.index(f'define void @"tvms_{name}"')
    return text[start:text.index("\n}", start)]


@pytest.fixture(scope="module")
def module():
    return build_cpu(tvms.parse(KERNELS))


def test_only_large_constant_top_level_allocations_are_kept(module):
    assert N * 4 >= KEEP_MIN_BYTES > 1024 * 4
    text = module.get_source("llvm-unopt")
    sites = re.findall(r'^@"?scratch\.(\w+)\.\d+"? = internal global ptr null', text, re.M)
    assert sites == ["tmp"]   # one site, `kept`'s; `per_thread`'s 256 KiB are per thread
    assert "cmpxchg" in ir_of(module, "kept")
    for name in ("small", "dynamic", "per_thread"):
        assert "cmpxchg" not in ir_of(module, name) and "scratch." not in ir_of(module, name)
    assert f'define void @"{RELEASE_SCRATCH_SYMBOL}"' in text


def test_a_kept_block_gives_right_results_call_after_call(module):
    rng = np.random.default_rng(0)
    for _ in range(3):
        a = rng.standard_normal(N).astype("float32")
        b = np.zeros(N, "float32")
        module["kept"](a, b)
        np.testing.assert_array_equal(b, (a * 2)[::-1] + 1)
    a = rng.standard_normal((4, 65536)).astype("float32")
    b = np.zeros_like(a)
    module["per_thread"](a, b)
    np.testing.assert_array_equal(b, (a * 2)[:, ::-1])


def test_threads_calling_one_kernel_at_once_each_get_their_own_result(module):
    kernel, errors = module["kept"], []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(12):
            a = rng.standard_normal(N).astype("float32")
            b = np.zeros(N, "float32")
            kernel(a, b)
            if not np.array_equal(b, (a * 2)[::-1] + 1):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_failed_check_gives_the_site_back():
    module = build_cpu({"main": tvms.parse(CHECKED)})
    fail_path = ir_of(module, "main").split("check.fail")[-1]
    assert "store atomic i32 0" in fail_path   # the busy flag, released before returning
    a, b = np.arange(N, dtype="float32"), np.zeros(1, "float32")
    with pytest.raises(KernelAssertionError):
        module["main"](a, np.array([N], "int32"), b)
    module["main"](a, np.array([5], "int32"), b)
    assert b[0] == 6


def test_kept_bytes_come_from_the_budget_and_go_back_when_the_module_is_dropped():
    """The budget (`runtime.cpu.scratch_budget`) shows what is kept: the block once called,
    kept through a failed check (whose site is given back: a site left busy would not be
    freed), returned when the module is garbage."""
    runtime_cpu.parallel_runtime()
    gc.collect()   # modules other tests dropped give their blocks back now, not during this test
    before = runtime_cpu._scratch_left.value
    module = build_cpu({"main": tvms.parse(CHECKED)}, use_cache=False)
    a, b = np.ones(N, "float32"), np.zeros(1, "float32")
    module["main"](a, np.array([0], "int32"), b)
    assert b[0] == 2 and runtime_cpu._scratch_left.value == before - N * 4
    with pytest.raises(KernelAssertionError):
        module["main"](a, np.array([-1], "int32"), b)
    module["main"](a, np.array([1], "int32"), b)
    assert runtime_cpu._scratch_left.value == before - N * 4
    del module
    gc.collect()
    assert runtime_cpu._scratch_left.value == before


def test_past_the_budget_a_site_allocates_as_before():
    runtime_cpu.parallel_runtime()
    gc.collect()
    saved = runtime_cpu._scratch_left.value
    runtime_cpu._scratch_left.value = N * 4 - 1   # one byte short
    try:
        module = build_cpu({"main": tvms.parse(CHECKED)}, use_cache=False)
        b = np.zeros(1, "float32")
        for i in range(3):
            module["main"](np.full(N, i, "float32"), np.array([7], "int32"), b)
            assert b[0] == i + 1 and runtime_cpu._scratch_left.value == N * 4 - 1
        del module
        gc.collect()
        assert runtime_cpu._scratch_left.value == N * 4 - 1
    finally:
        runtime_cpu._scratch_left.value = saved


def test_the_runtime_calls_the_release_function_when_it_drops_the_module(monkeypatch):
    released = []
    original = runtime_cpu._call_release
    monkeypatch.setattr(runtime_cpu, "_call_release", lambda fn, code: (released.append(1), original(fn, code)))
    module = build_cpu({"main": tvms.parse(CHECKED)}, use_cache=False)
    assert released == []
    del module
    gc.collect()
    assert released == [1]
