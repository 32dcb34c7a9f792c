"""A launch that does not fit the device is refused before it is made (runtime/cuda_kernels.py
``CUDAKernel._check_fits``): threads per block, block and grid dimensions, shared memory and
registers, each against the device's own attribute, named in a `LaunchConfigError` placed at
the kernel's PrimFunc, where the driver would say only "too many resources requested for
launch". The limits are an emulated GPU's, made small; under ``-m cuda`` the real device's are
read and a kernel that fits runs."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.runtime.cuda_kernels import LaunchConfigError

from support.gpu_drivers import EmulatedDriver, install_driver

COPY = '''# from tvm.script import tir as T
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] + T.float32(1)
'''

TILED = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(256, tx)
                A_shared = T.alloc_buffer((256,), "float32", scope="shared")
                A_shared[vi] = A[vi]
                B[vi] = A_shared[vi] * T.float32(2)
'''


def run(monkeypatch, src: str, n: int, **limits):
    """``src``'s ``f`` on an emulated GPU with ``limits`` (attribute name -> value), on ``n`` floats."""
    install_driver(monkeypatch, EmulatedDriver(attributes=limits))
    kernel = tvms.compile(tvms.parse(src), target="cuda")["f"]
    a, b = (tvms.nd.array(x, tvms.cuda()) for x in (np.arange(n, dtype="float32"), np.zeros(n, "float32")))
    kernel(a, b)
    return b.numpy()


def test_too_many_threads_per_block_is_refused_naming_the_limit(monkeypatch):
    with pytest.raises(LaunchConfigError, match=r"f: kernel 'f_kernel' needs 256 threads per block; cuda:0 \(Fake GPU\) "
                                                r"allows at most 128 \(MAX_THREADS_PER_BLOCK\)") as info:
        run(monkeypatch, TILED, 256, MAX_THREADS_PER_BLOCK=128)
    assert info.value.span.line == 3     # the prim_func (its def line)


def test_too_much_shared_memory_is_refused_naming_the_limit(monkeypatch):
    with pytest.raises(LaunchConfigError, match=r"needs \(1024 static \+ 0 dynamic =\) 1024 bytes of shared memory per "
                                                r"block; .* allows at most 512 \(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN\)"):
        run(monkeypatch, TILED, 256, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=512)


def test_too_many_registers_is_refused_naming_the_limit(monkeypatch):
    with pytest.raises(LaunchConfigError, match=r"needs \(\d+ per thread x 256 threads =\) \d+ registers per block; .* "
                                                r"allows at most 256 \(MAX_REGISTERS_PER_BLOCK\)"):
        run(monkeypatch, TILED, 256, MAX_REGISTERS_PER_BLOCK=256)


def test_a_grid_too_large_for_these_sizes_is_refused_and_smaller_ones_run(monkeypatch):
    np.testing.assert_array_equal(run(monkeypatch, COPY, 1000, MAX_GRID_DIM_X=8), np.arange(1000, dtype="float32") + 1)
    with pytest.raises(LaunchConfigError, match=r"has a grid dimension x of \d+ blocks; .* allows at most 8 "
                                                r"\(MAX_GRID_DIM_X\)"):
        run(monkeypatch, COPY, 1 << 20, MAX_GRID_DIM_X=8)


def test_the_limits_are_the_devices_own(gpu):
    from tvmscript.runtime.cuda import LAUNCH_LIMITS, runtime

    limits = runtime(tvms.cuda()).limits
    assert set(limits) == set(LAUNCH_LIMITS)
    assert limits["MAX_THREADS_PER_BLOCK"] >= 1024 and limits["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"] >= 48 * 1024
    kernel = tvms.compile(tvms.parse(TILED), target="cuda")["f"]
    a, b = (tvms.nd.array(x, tvms.cuda()) for x in (np.arange(256, dtype="float32"), np.zeros(256, "float32")))
    kernel(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(256, dtype="float32") * 2)
