"""The CUDA runtime (runtime/cuda.py) and the VM on a GPU.

Three kinds of tests:

* Without pycuda or a GPU: the one-line reasons (pycuda missing, the driver library missing,
  cuInit failing, a device index past the last), the VM and the executables refusing devices
  that do not fit, the memory pool's accounting, the argument and dimension assembly of
  `CUDAKernel` (with fake pycuda functions that record their calls), DLPack capsules.
* On a fake GPU: a stand-in for ``pycuda.driver`` whose "device memory" is host memory and
  whose kernels are the CPU backend's, so tensors, copies, the pool, the VM on a GPU (its
  constants, arenas and argument checks), event timing and DLPack all run here.
* ``@pytest.mark.cuda``: the same on a real GPU through pycuda (skipped with the reason where
  there is none; ``pytest -m cuda`` runs them on a GPU machine).
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
import threading
import types

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.cuda_spec import CUDACode, CUDAFunction, KernelArg, LaunchSpec
from tvmscript.compiler.vm_specs import value_spec
from tvmscript.runtime import cuda, cuda_dlpack, cuda_kernels
from tvmscript.runtime.executable import Executable
from tvmscript.runtime.kernel_abi import ParamSpec
from tvmscript.runtime.value_checks import match_value

from support.gpu_drivers import FakeDriver, install_driver


# ----------------------------------------------------------------------------- fakes


@pytest.fixture
def driver_state(monkeypatch):
    """Lets a test install a driver; the real one is back afterwards."""
    return lambda driver: install_driver(monkeypatch, driver)


@pytest.fixture
def fake_gpu(driver_state):
    driver = FakeDriver(count=2)
    driver_state(driver)
    return driver


def fake_tensor(shape, dtype="float32", index=0, ptr=0x1000):
    """A tensor object on cuda:``index`` over no memory: enough for checks that never touch it."""
    t = object.__new__(cuda.tensor_class(index))
    t._mem, t._ptr, t._shape, t._dtype, t._device = None, ptr, tuple(shape), dtype, tvms.cuda(index)
    return t


MODULE = '''
@I.ir_module
class Module:
    @T.prim_func
    def scale_add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (4,), "float32")
        C = T.match_buffer(c, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            with T.block("c"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] * T.float32(2) + B[vj]

    @T.prim_func
    def add(A: T.Buffer((2, 4), "float32"), B: T.Buffer((2, 4), "float32"), C: T.Buffer((2, 4), "float32")):
        for i, j in T.grid(2, 4):
            with T.block("c"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.scale_add, (x, R.const([1.0, 2.0, 3.0, 4.0], "float32")),
                            out_sinfo=R.Tensor((n, 4), "float32"))
            out = R.call_tir(cls.scale_add, (lv, R.const([0.5, 0.5, 0.5, 0.5], "float32")),
                             out_sinfo=R.Tensor((n, 4), "float32"))
            R.output(out)
        return out

    @R.function
    def arena(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")) -> R.Tensor((2, 4), "float32"):
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((2, 4), "float32"))
            out = R.call_tir(cls.add, (lv, lv), out_sinfo=R.Tensor((2, 4), "float32"))
            R.output(out)
        return out
'''


def main_ref(x):
    return (x * 2 + [1, 2, 3, 4]) * 2 + 0.5


_LETTERS = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "bool": "b"}


def fake_cuda_executable(driver, source=MODULE, arch="sm_90"):
    """A CUDA executable for the fake GPU: the module's Relax code as built for the CPU, each
    prim_func a one-launch CUDAFunction whose "kernel" is the CPU kernel itself (same
    argument order: buffers, scalars, symbolic dims)."""
    cpu = tvms.compile(tvms.parse(source), target="llvm")
    functions = {}
    for name, k in cpu.kernels.items():
        buffers = [p for p in k.params if p.kind == "buffer"]
        scalars = [p for p in k.params if p.kind != "buffer"]
        args = [KernelArg("buffer", "P", index=i) for i in range(len(buffers))]
        args += [KernelArg("scalar", _LETTERS[p.dtype], index=i) for i, p in enumerate(scalars)]
        args += [KernelArg("sym", "q", name=s) for s in k.sym_vars]
        functions[name] = CUDAFunction(name, k.params, k.sym_vars, [],
                                       [LaunchSpec(name, ("1", "1", "1"), ("1", "1", "1"), "0", args)])
        driver.kernels[name] = k.cfunc
    code = CUDACode("", functions, arch, cubin=b"\x7fELF fake cubin")
    return Executable(cpu.mod, "cuda", functions, cpu.functions, cuda_code=code)


# ----------------------------------------------------------------------------- without a GPU


def test_without_pycuda_everything_says_so_in_one_line(driver_state):
    driver_state(None)
    reason = cuda.unavailable_reason()
    assert reason == 'pycuda is not installed (pip install -e ".[cuda]"; it builds from source against a CUDA toolkit)'
    assert not tvms.cuda().exist and tvms.cpu().exist
    for attempt in (lambda: tvms.nd.array(np.zeros(3), tvms.cuda()),
                    lambda: tvms.runtime.tensor(np.zeros(3), tvms.cuda()),
                    lambda: tvms.nd.empty((3,), "float32", tvms.cuda()),
                    lambda: tvms.relax.VirtualMachine(Executable(tvms.ir.IRModule(), "cuda", {}, {}), tvms.cuda()),
                    lambda: tvms.cuda().sync(),
                    lambda: cuda.memory_stats()):
        with pytest.raises(RuntimeError) as info:
            attempt()
        assert str(info.value) == reason
    assert isinstance(info.value, cuda.CUDAUnavailableError)


def test_the_cuda_benchmark_without_a_gpu_measures_nvrtc_and_says_what_is_missing():
    """benchmarks/cuda.py where there is no GPU: NVRTC runs on the CPU, so its two rows are
    measured and judged; each kernel's time is estimated (compiler/roofline.py); the measured
    rows give way to one line naming what is missing."""
    reason = cuda.unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is here: benchmarks/cuda.py runs in full")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "cuda.py"), "--n", "512"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"NVRTC per kernel +\d+\.\d+ +ms; < 300.0 ms: (met|NOT met)$", lines[1]), proc.stdout
    assert re.match(r"NVRTC cached +\d+\.\d+ +ms; < 20.0 ms: (met|NOT met)$", lines[2]), proc.stdout
    assert lines[3] == "estimated on NVIDIA H200 SXM 141 GB (compiler/roofline.py):"
    kernels = [line.split("  ")[0] for line in lines[5:-1]]
    assert kernels == ["fp32 matmul 512^3", "fp16 matmul 512^3", "fp16 wmma 512^3", "fp16 wgmma 512^3", "add 2^26",
                       "softmax 4096^2", "MLP batch 1"], proc.stdout
    assert all(re.search(r" \d+\.\d+ (ms|us)  ", line) for line in lines[5:-1]), proc.stdout
    assert lines[-1] == f"the measured rows of benchmarks/cuda.py need a GPU: {reason}"
    assert "Traceback" not in proc.stderr


def test_the_driver_library_missing(driver_state, tmp_path, monkeypatch):
    pkg = tmp_path / "pycuda"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text('raise ImportError("libcuda.so.1: cannot open shared object file: '
                                   'No such file or directory")\n')
    driver_state(None)
    monkeypatch.delitem(sys.modules, "pycuda")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert cuda.unavailable_reason() == \
            "no CUDA GPU: libcuda.so.1: cannot open shared object file: No such file or directory"
    finally:
        sys.modules.pop("pycuda", None)


def test_cuinit_failing(driver_state):
    driver_state(FakeDriver(init_error="cuInit failed: no CUDA-capable device is detected"))
    assert cuda.unavailable_reason() == "no CUDA GPU: cuInit failed: no CUDA-capable device is detected"
    assert not tvms.device("cuda", 0).exist
    with pytest.raises(RuntimeError, match="^no CUDA GPU: cuInit failed"):
        tvms.nd.array(np.zeros(3), tvms.cuda())


def test_a_device_index_past_the_last(driver_state):
    driver_state(FakeDriver(count=1))
    assert cuda.unavailable_reason(0) is None and tvms.cuda(0).exist
    assert cuda.unavailable_reason(1) == "no CUDA device 1 (this machine has 1)"
    assert not tvms.cuda(1).exist
    with pytest.raises(RuntimeError, match=r"^no CUDA device 1 \(this machine has 1\)$"):
        tvms.nd.array(np.zeros(3), tvms.cuda(1))
    assert cuda.device_arch(0) == "sm_90"


def test_the_vm_refuses_devices_its_code_is_not_for():
    cpu_ex = tvms.compile(tvms.parse(MODULE), target="llvm")
    with pytest.raises(ValueError, match=r'compiled for the CPU \(target \'llvm\'\), not for cuda:0: compile it with '
                                         r'tvms.compile\(mod, target="cuda"\)'):
        tvms.relax.VirtualMachine(cpu_ex, tvms.cuda())
    gpu_ex = Executable(cpu_ex.mod, "cuda", {}, cpu_ex.functions)
    with pytest.raises(ValueError, match=r"compiled for CUDA \(target 'cuda'\): run it on a GPU"):
        tvms.relax.VirtualMachine(gpu_ex, tvms.cpu())
    with pytest.raises(NotImplementedError, match="not on opencl:0"):
        tvms.relax.VirtualMachine(cpu_ex, tvms.device("opencl"))
    with pytest.raises(KeyError, match=r"VirtualMachine\(ex, tvms.cuda\(\)\)\['main'\]"):
        gpu_ex["main"]
    assert gpu_ex.device_type == 2 and cpu_ex.device_type == 1


def test_a_cpu_vm_refuses_gpu_tensors():
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(MODULE), target="llvm"), tvms.cpu())
    with pytest.raises(TypeError, match=r"^main\(\) argument 'x': expected a tensor on the CPU, got a tensor on "
                                        r"cuda:0 \(copy it with x.copyto\(tvms.cpu\(\)\)\)"):
        vm["main"](fake_tensor((3, 4)))
    with pytest.raises(TypeError, match=r"main\(\) argument 'x'\[0\]: expected a tensor on the CPU"):
        match_value((fake_tensor((3,)),), value_spec(tvms.relax.TupleStructInfo(
            [tvms.relax.TensorStructInfo([3], "float32")])), {}, "main() argument 'x'")


def test_tensor_classes_are_per_device():
    t0, t1 = fake_tensor((2,), index=0), fake_tensor((2,), index=1)
    assert type(t0) is cuda.tensor_class(0) is not cuda.tensor_class(1) is type(t1)
    assert isinstance(t0, cuda.CUDATensor) and isinstance(t0, tvms.runtime.Tensor)
    assert t0.strides == (1,) and t0.numel() == 2 and t0.nbytes == 8 and t0.device == tvms.cuda(0)
    with pytest.raises(TypeError, match=r"tvms.nd.array\(x, tvms.cuda\(0\)\)"):
        cuda.CUDATensor(np.zeros(3))
    with pytest.raises(TypeError, match=r"copy the array to the GPU with tvms.nd.array"):
        tvms.runtime.Tensor(np.zeros(3), tvms.cuda())


class Exporter:
    """A stand-in for a PyTorch tensor: a DLPack exporter on some device."""

    def __init__(self, device, tensor=None):
        self.device, self.tensor, self.streams = device, tensor, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.tensor.__dlpack__(stream=-1)


@pytest.mark.parametrize("value, got, hint", [
    (np.zeros(3, "float32"), "a NumPy array on the CPU", "tvms.nd.array(x, tvms.cuda(0))"),
    (tvms.nd.array(np.zeros(3, "float32")), "a tensor on cpu:0", "x.copyto(tvms.cuda(0))"),
    ("gpu1", "a tensor on cuda:1", "x.copyto(tvms.cuda(0))"),
    (Exporter((2, 1)), "a test_cuda_runtime.Exporter on cuda:1", "tvms.nd.array(x, tvms.cuda(0))"),
    (Exporter((1, 0)), "a test_cuda_runtime.Exporter on the CPU", "tvms.nd.array(x, tvms.cuda(0))"),
])
def test_tensors_elsewhere_are_named_with_the_copy_that_fixes_them(value, got, hint):
    value = fake_tensor((3,), index=1) if isinstance(value, str) else value
    with pytest.raises(TypeError) as info:
        cuda.as_tensor_on(value, tvms.cuda(0), "main() argument 'x'")
    assert str(info.value) == f"main() argument 'x': expected a tensor on cuda:0, got {got} (copy it with {hint})"
    assert cuda.as_tensor_on([1, 2], tvms.cuda(0), "x") is None


def test_check_arch():
    cuda.check_arch("sm_90", (9, 0), tvms.cuda())
    cuda.check_arch("sm_80", (8, 6), tvms.cuda())   # CUBIN runs on later minor versions
    cuda.check_arch("sm_90a", (9, 0), tvms.cuda())
    cuda.check_arch("sm_100", (10, 0), tvms.cuda())
    for arch, cc in (("sm_90", (8, 0)), ("sm_86", (8, 0)), ("sm_80", (9, 0)), ("sm_90a", (10, 0))):
        with pytest.raises(RuntimeError) as info:
            cuda.check_arch(arch, cc, tvms.cuda())
        have = f"sm_{cc[0]}{cc[1]}"
        assert f"code is for {arch}, but cuda:0 is {have}" in str(info.value)
        assert f'target="cuda -arch={have}"' in str(info.value)
    with pytest.raises(ValueError, match="unknown CUDA architecture"):
        cuda.check_arch("compute_90", (9, 0), tvms.cuda())


# ----------------------------------------------------------------------------- the memory pool


class FakeAllocation:
    def __init__(self, log, nbytes):
        self.log, self.nbytes, self.ptr = log, nbytes, 0x10000 * (len(log) + 1)
        log.append(("alloc", nbytes))

    def __int__(self):
        return self.ptr

    def free(self):
        self.log.append(("free", self.nbytes))


def test_size_classes():
    assert [cuda.round_size(n) for n in (0, 1, 512, 513, 1000, (1 << 20) - 1)] == \
        [512, 512, 512, 1024, 1024, 1 << 20]
    assert cuda.round_size(1 << 20) == 1 << 20
    assert cuda.round_size((1 << 20) + 1) == (1 << 20) + (1 << 17)   # 8 classes per power of two
    for n in (3_000_000, 123_456_789, 1 << 33):
        assert n <= cuda.round_size(n) <= n * 1.125


def test_the_pool_reuses_blocks_and_counts_them():
    log = []
    pool = cuda.MemoryPool(lambda n: FakeAllocation(log, n))
    a = pool.malloc(1000)
    b = pool.malloc(100)
    assert (a.size, b.size) == (1024, 512) and a.ptr != b.ptr
    assert pool.stats() == {"in_use_bytes": 1536, "pooled_bytes": 0, "reserved_bytes": 1536,
                            "peak_in_use_bytes": 1536, "device_allocations": 2}
    ptr = a.ptr
    del a                                  # back to the pool, not to the driver
    assert pool.stats()["in_use_bytes"] == 512 and pool.stats()["pooled_bytes"] == 1024
    c = pool.malloc(1024)                  # the same size class: the same block
    assert c.ptr == ptr and pool.device_allocations == 2
    del b, c
    assert pool.stats()["in_use_bytes"] == 0 and pool.stats()["pooled_bytes"] == 1536
    pool.release_cached()
    assert sorted(log) == [("alloc", 512), ("alloc", 1024), ("free", 512), ("free", 1024)]
    assert pool.stats() == {"in_use_bytes": 0, "pooled_bytes": 0, "reserved_bytes": 0,
                            "peak_in_use_bytes": 1536, "device_allocations": 2}


# ----------------------------------------------------------------------------- kernel launches


class RecordingFunction:
    """A pycuda Function that records its preparation, attributes and launches."""

    def __init__(self, symbol, calls):
        self.symbol, self.calls, self.attributes = symbol, calls, {}

    def prepare(self, arg_format):
        self.arg_format = arg_format

    def set_attribute(self, attribute, value):
        self.attributes[attribute] = value

    def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
        self.calls.append((self.symbol, grid, block, stream, args, shared_size))


class FakeStream:
    raw = "the stream"


def fake_runtime(log=None):
    log = [] if log is None else log
    stream = FakeStream()
    return types.SimpleNamespace(
        device=tvms.cuda(0), name="Fake GPU", activate=lambda: None, limits={}, launched=[],
        current_stream=lambda: stream, order_after=lambda values, stream: None, generation=0, lost=None,
        pool=cuda.MemoryPool(lambda n: FakeAllocation(log, n)),
        drv=types.SimpleNamespace(function_attribute=types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=8)))


# A prim_func softmax(A: (n, 4) float32, B: (n, 4) float32, eps: float32) in two launches: a
# row reduction writing a workspace of n floats, then the normalization; symbolic n.
SOFTMAX_PARAMS = [ParamSpec("buffer", "A", "float32", ["n", 4]), ParamSpec("scalar", "eps", "float32"),
                  ParamSpec("buffer", "B", "float32", ["n", 4], written=True)]
SOFTMAX = CUDAFunction(
    "softmax", SOFTMAX_PARAMS, ["n"], workspaces=["(n * 4)"],
    launches=[
        LaunchSpec("softmax_kernel0", ("((n + 127) // 128)", "1", "1"), ("128", "1", "1"), "0",
                   [KernelArg("buffer", "P", index=0), KernelArg("workspace", "P", index=0),
                    KernelArg("sym", "q", name="n")]),
        LaunchSpec("softmax_kernel1", ("n", "1", "1"), ("4", "1", "1"), "(n * 1024)",
                   [KernelArg("workspace", "P", index=0), KernelArg("buffer", "P", index=1),
                    KernelArg("scalar", "f", index=0), KernelArg("sym", "q", name="n"),
                    KernelArg("buffer", "P", index=0)]),
    ])


def softmax_kernel(calls, log=None):
    rt = fake_runtime(log)
    return cuda_kernels.CUDAKernel(SOFTMAX, lambda symbol: RecordingFunction(symbol, calls), rt), rt


def test_launch_arguments_and_dimensions_come_from_the_specs():
    calls = []
    k, rt = softmax_kernel(calls)
    assert [ln.func.arg_format for ln in k._launches] == ["PPq", "PPfqP"]
    k.launch(0xA000, 0xB000, 1e-5, 300)                 # the VM's order: buffers, scalars, symbolic dims
    (s0, grid0, block0, stream0, args0, shared0), (s1, grid1, block1, stream1, args1, shared1) = calls
    ws = args0[1]
    assert (s0, grid0, block0, stream0, shared0) == ("softmax_kernel0", (3, 1, 1), (128, 1, 1), "the stream", 0)
    assert args0 == (0xA000, ws, 300)
    assert (s1, grid1, block1, shared1) == ("softmax_kernel1", (300, 1, 1), (4, 1, 1), 300 * 1024)
    assert args1 == (ws, 0xB000, 1e-5, 300, 0xA000)
    assert rt.pool.stats()["in_use_bytes"] == 0 and rt.pool.stats()["pooled_bytes"] == 1536  # the workspace: back
    # More than 48 KiB of dynamic shared memory: opted in once, for the largest size seen.
    assert k._launches[1].func.attributes == {8: 300 * 1024}
    calls.clear()
    k.call_raw([0xA000, 0xB000], [300], [1e-5])         # call_raw(pointers, syms, scalars)
    assert [c[4][1:] for c in calls] == [(args0[1], 300), (0xB000, 1e-5, 300, 0xA000)]
    assert len(k._plans) == 1                            # dimensions evaluated once per symbol values
    calls.clear()
    k.launch(0xA000, 0xB000, 1e-5, 0)                    # n = 0: empty grids launch nothing
    assert calls == []


def test_static_dimensions_are_ints_from_the_start():
    calls = []
    k, _ = softmax_kernel(calls)
    assert k._launches[0].block == (128, 1, 1) and k._launches[0].grid[1:] == (1, 1)
    assert k._launches[0].shared == 0 and isinstance(k._launches[0].grid[0], str)


def test_a_dimension_over_an_unknown_symbol_is_an_error():
    launch = LaunchSpec("f_kernel", ("m", "1", "1"), ("4", "1", "1"), "0", [KernelArg("buffer", "P", index=0)])
    bad = CUDAFunction("f", [ParamSpec("buffer", "A", "float32", [4])], [], [], [launch])
    k = cuda_kernels.CUDAKernel(bad, lambda s: RecordingFunction(s, []), fake_runtime())
    with pytest.raises(ValueError, match=r"f: the grid size of kernel 'f_kernel', 'm', uses a symbol that is not one"):
        k.launch(0xA000)


def test_a_dimension_over_an_integer_scalar_parameter():
    """A fused kernel may take a size as an argument (``s: int64``) instead of from a buffer's
    shape; its launch dimensions use it, evaluated per value."""
    launch = LaunchSpec("f_kernel", ("((s * s + 127) // 128)", "1", "1"), ("128", "1", "1"), "0",
                        [KernelArg("buffer", "P", index=0), KernelArg("scalar", "q", index=0)])
    func = CUDAFunction("f", [ParamSpec("buffer", "A", "float32", [1, 16, 16]), ParamSpec("scalar", "s", "int64")],
                        [], [], [launch])
    calls = []
    k = cuda_kernels.CUDAKernel(func, lambda sym: RecordingFunction(sym, calls), fake_runtime())
    k.launch(0xA000, 12)
    k.launch(0xA000, 16)
    k.launch(0xA000, 12)
    assert [(c[1], c[4]) for c in calls] == [((2, 1, 1), (0xA000, 12)), ((2, 1, 1), (0xA000, 16)),
                                             ((2, 1, 1), (0xA000, 12))]
    k.launch(0xA000, 40)
    assert calls[-1][1] == (13, 1, 1) and len(k._plans) == 3


def test_a_failing_launch_names_the_kernel():
    def failing(error: str):
        class Failing(RecordingFunction):
            def prepared_async_call(self, *args, **kwargs):
                raise RuntimeError(error)

        return cuda_kernels.CUDAKernel(SOFTMAX, lambda s: Failing(s, []), fake_runtime())

    with pytest.raises(cuda.DeviceError, match="softmax: launching a kernel on cuda:0 failed: cuLaunchKernel failed: "
                                               "too many resources requested for launch$") as info:
        failing("cuLaunchKernel failed: too many resources requested for launch").launch(1, 2, 0.5, 4)
    assert not info.value.sticky
    with pytest.raises(cuda.DeviceError, match="illegal memory access was encountered; this error leaves the CUDA "
                                               "context unusable") as info:
        failing("cuLaunchKernel failed: an illegal memory access was encountered").launch(1, 2, 0.5, 4)
    assert info.value.sticky


def test_a_fault_found_at_a_synchronization_names_the_kernels_launched_since(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    out = vm["main"](tvms.nd.array(np.ones((3, 4), "float32"), tvms.cuda()))
    fake_gpu.fault = "cuStreamSynchronize failed: an illegal memory access was encountered"
    with pytest.raises(cuda.DeviceError, match=r"a kernel failed on cuda:0: cuStreamSynchronize failed: an illegal "
                                               r"memory access was encountered \(launched since the last "
                                               r"synchronization: 'scale_add'.*\); this error leaves the CUDA "
                                               r"context unusable") as info:
        out.numpy()
    assert info.value.sticky
    with pytest.raises(cuda.DeviceError, match="illegal memory access"):   # the context is lost: every call fails
        out.numpy()
    x = tvms.nd.array(np.ones((3, 4), "float32"), tvms.cuda())              # until the next use recreates it
    np.testing.assert_allclose(vm["main"](x).numpy(), main_ref(np.ones((3, 4), "float32")))
    assert fake_gpu.resets == 1


def test_calling_a_kernel_checks_its_arguments():
    calls = []
    k, _ = softmax_kernel(calls)
    a, b = fake_tensor((5, 4), ptr=0xA000), fake_tensor((5, 4), ptr=0xB000)
    k(a, 0.5, b)
    assert [c[4] for c in calls][1][1:4] == (0xB000, 0.5, 5)
    bad = [
        ((a, 0.5), TypeError, r"softmax\(\) takes 3 arguments \(A, eps, B\) but 2 were given"),
        ((np.zeros((5, 4), "float32"), 0.5, b), TypeError,
         r"softmax: parameter 'A': expected a tensor on cuda:0, got a NumPy array on the CPU \(copy it with "
         r"tvms.nd.array\(A, tvms.cuda\(0\)\)\)"),
        ((fake_tensor((5, 4), index=1), 0.5, b), TypeError, r"got a tensor on cuda:1 \(copy it with A.copyto"),
        ((fake_tensor((5, 4), "float16"), 0.5, b), TypeError, r"parameter 'A' expects dtype float32, got float16"),
        ((fake_tensor((5, 4, 1)), 0.5, b), ValueError, r"parameter 'A' expects a 2-d tensor"),
        ((fake_tensor((5, 3)), 0.5, b), ValueError, r"parameter 'A' expects dimension 1 to be 4, got 3"),
        ((a, 0.5, fake_tensor((6, 4))), ValueError,
         r"dimension 0 is 6, but symbol 'n' is 5 \(from dimension 0 of 'A'\)"),
        ((a, "x", b), TypeError, r"parameter 'eps' \(float32\) expects a number"),
        (([1.0], 0.5, b), TypeError, r"parameter 'A' is a buffer \(A: Buffer\(\(n, 4\), float32\)\); got list"),
    ]
    for args, exc, pattern in bad:
        with pytest.raises(exc, match=pattern):
            k(*args)


# ----------------------------------------------------------------------------- DLPack


def test_dlpack_capsules_round_trip_and_release():
    t = fake_tensor((2, 3), "bfloat16", ptr=0xC000)
    capsule = cuda_dlpack.export(t)
    assert len(cuda_dlpack._exports) == 1
    owner, ptr, shape, dtype, index = cuda_dlpack._consume(capsule)
    assert (ptr, shape, dtype, index) == (0xC000, (2, 3), "bfloat16", 0)
    with pytest.raises(TypeError, match="unused \"dltensor\" capsule"):
        cuda_dlpack._consume(capsule)             # renamed "used_dltensor": consumed once only
    del capsule
    assert len(cuda_dlpack._exports) == 1         # the consumer owns it now ...
    del owner
    gc.collect()
    assert cuda_dlpack._exports == {}             # ... and its deleter released the tensor
    capsule = cuda_dlpack.export(fake_tensor((), "bool"))
    assert len(cuda_dlpack._exports) == 1
    del capsule                            # never consumed: the capsule's destructor releases it
    gc.collect()
    assert cuda_dlpack._exports == {}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint64", "bool"])
def test_dlpack_dtypes(dtype):
    code, bits = cuda_dlpack._dl_dtype(dtype)
    assert cuda_dlpack._dtype_of_dl(cuda_dlpack._DLDataType(code, bits, 1)) == dtype


# ----------------------------------------------------------------------------- on a fake GPU


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool", "bfloat16"])
def test_fake_gpu_round_trip(fake_gpu, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        np_dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        np_dtype = np.dtype(dtype)
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(np_dtype)
    t = tvms.nd.array(x, tvms.cuda(0))
    assert type(t) is cuda.tensor_class(0) and t.device == tvms.cuda(0)
    assert t.shape == (2, 3, 4) and t.dtype == dtype
    back = t.numpy()
    assert back.dtype == np_dtype and np.array_equal(back, x)
    assert np.array_equal(tvms.runtime.tensor(x, tvms.cuda()).numpy(), x)


def test_fake_gpu_copies(fake_gpu):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    g = tvms.nd.array(x, tvms.cuda())
    h = g.copyto(tvms.cpu())
    assert type(h) is tvms.runtime.Tensor and np.array_equal(h.numpy(), x)
    g2 = g.copyto(tvms.cuda())                        # same GPU: a device-to-device copy
    assert g2._ptr != g._ptr and np.array_equal(g2.numpy(), x)
    g1 = g.copyto(tvms.cuda(1))                       # another GPU
    assert g1.device == tvms.cuda(1) and np.array_equal(g1.numpy(), x)
    back = tvms.nd.array(g1, tvms.cuda(0))
    assert back.device == tvms.cuda(0) and np.array_equal(back.numpy(), x)
    assert np.array_equal(tvms.nd.array(g).numpy(), x) and tvms.nd.array(g).device == tvms.cpu()
    assert tvms.nd.array(g, tvms.cuda(), dtype="int32").numpy().dtype == np.int32
    g.copyfrom(x + 1)
    assert np.array_equal(g.numpy(), x + 1)
    h.copyfrom(g)
    assert np.array_equal(h.numpy(), x + 1)
    g2.copyfrom(g)
    assert np.array_equal(g2.numpy(), x + 1)
    with pytest.raises(ValueError, match="does not match"):
        g.copyfrom(np.zeros(3))
    e = tvms.nd.empty((4, 5), "float16", tvms.cuda())
    assert e.shape == (4, 5) and e.dtype == "float16" and e.nbytes == 40
    assert np.array_equal(np.asarray(g), x + 1)
    assert repr(g).startswith("<tvms.runtime.Tensor shape=(2, 3), cuda:0>")
    import pickle

    assert np.array_equal(pickle.loads(pickle.dumps(g)).numpy(), x + 1)


def test_fake_gpu_memory_goes_back_to_the_pool(fake_gpu):
    t = tvms.nd.array(np.zeros(1000, "float32"), tvms.cuda())
    stats = cuda.memory_stats()
    assert stats["in_use_bytes"] == 4096 and stats["device_allocations"] == 1
    del t
    assert cuda.memory_stats(tvms.cuda(0))["in_use_bytes"] == 0
    assert cuda.memory_stats("cuda:0")["pooled_bytes"] == 4096
    t = tvms.nd.array(np.ones(1000, "float32"), tvms.cuda())
    assert cuda.memory_stats()["device_allocations"] == 1   # the cached block, again
    del t
    cuda.empty_cache()
    assert cuda.memory_stats()["pooled_bytes"] == 0 and fake_gpu.freed == 1
    with pytest.raises(ValueError, match="expected a CUDA device, got cpu:0"):
        cuda.memory_stats(tvms.cpu())


def test_fake_gpu_out_of_memory(driver_state):
    driver_state(FakeDriver(memory_limit=1 << 20))
    keep = tvms.nd.empty((1 << 18,), "float32", tvms.cuda())  # 1 MiB
    with pytest.raises(cuda.DeviceMemoryError, match=r"out of memory on cuda:0: cannot allocate a float32 tensor of "
                                                     r"shape \(524288,\) \(2.0 MiB\); tvms's tensors hold 1.0 MiB, 0 "
                                                     r"bytes of 1.0 MiB free on the device"):
        tvms.nd.empty((1 << 19,), "float32", tvms.cuda())
    del keep


def test_out_of_memory_the_pool_releases_its_cache_and_retries_once(driver_state):
    fake = FakeDriver(memory_limit=1 << 20)
    driver_state(fake)
    dev = tvms.cuda()
    cached = tvms.nd.empty((1 << 17,), "float32", dev)    # 512 KiB, then cached by the pool
    del cached
    assert cuda.memory_stats()["pooled_bytes"] == 1 << 19 and fake.freed == 0
    big = tvms.nd.empty((3 << 16,), "float32", dev)        # 768 KiB: fits once the cached block is freed
    assert fake.freed == 1 and cuda.memory_stats()["pooled_bytes"] == 0
    del big


def test_an_out_of_memory_error_in_the_vm_names_the_binding(driver_state):
    driver_state(FakeDriver(memory_limit=64 << 10))
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(cuda._driver()), tvms.cuda())
    x = tvms.nd.array(np.ones((1024, 4), "float32"), tvms.cuda())   # 16 KiB; each intermediate 16 KiB more
    with pytest.raises(cuda.DeviceMemoryError, match=r"cannot allocate a float32 tensor of shape \(1024, 4\) "
                                                     r"\(16.0 KiB\).*in function 'main', binding") as info:
        [vm["main"](x) for _ in range(8)]   # each result kept until the memory runs out
    assert info.value.span is not None


def test_varying_shapes_keep_device_memory_under_the_high_water_mark(fake_gpu):
    """1,000 calls of ever new sizes leave blocks of ever new size classes in the pool: above
    its high-water mark (`MemoryPool.cache_limit`) it releases them, so the memory held stays
    bounded (without the mark: the sum of every size class used, 250 MB here)."""
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    pool = cuda.runtime(tvms.cuda()).pool
    pool.cache_limit = 4 << 20
    for n in range(1, 1001):
        x = np.full((n * 64, 4), n, "float32")                   # n KiB: a new size class each call
        out = vm["main"](tvms.nd.array(x, tvms.cuda()))
        assert out.shape == (n * 64, 4)
        assert pool.pooled <= pool.cache_limit + 4 * (n << 10)    # the mark, and at most this call's blocks
        assert fake_gpu.live_bytes <= pool.in_use + pool.pooled
    np.testing.assert_allclose(out.numpy(), main_ref(x))
    assert fake_gpu.live_bytes < 16 << 20


def test_fake_gpu_vm(fake_gpu):
    ex = fake_cuda_executable(fake_gpu)
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(ex, dev)
    assert fake_gpu.loaded == [b"\x7fELF fake cubin"]
    x = np.arange(12, dtype="float32").reshape(3, 4)
    out = vm["main"](tvms.nd.array(x, dev))
    assert type(out) is cuda.tensor_class(0)
    np.testing.assert_allclose(out.numpy(), main_ref(x))
    for n in (1, 7):                                    # dynamic shapes
        y = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(vm["main"](tvms.nd.array(y, dev)).numpy(), main_ref(y), rtol=1e-6)
    a, b = np.ones((2, 4), "float32"), np.full((2, 4), 2, "float32")
    np.testing.assert_array_equal(vm["arena"](tvms.nd.array(a, dev), tvms.nd.array(b, dev)).numpy(), 2 * (a + b))
    # The constants live on the GPU, copied once per VM.
    constants = [v for v in vm._globals.values() if isinstance(v, cuda.CUDATensor)]
    assert len(constants) == 2 and all(c.device == dev for c in constants)
    # Kernels: vm[...] and ex[...] are loaded kernels; a checked call works too.
    assert isinstance(vm["scale_add"], cuda_kernels.CUDAKernel) and isinstance(ex["scale_add"], cuda_kernels.CUDAKernel)
    c = tvms.nd.empty((3, 4), "float32", dev)
    ex["scale_add"](tvms.nd.array(x, dev), tvms.nd.array(np.zeros(4, "float32"), dev), c)
    np.testing.assert_array_equal(c.numpy(), 2 * x)
    assert "cuda: sm_90, CUBIN, 15 bytes" in ex.stats()


def test_fake_gpu_vm_memory_returns_after_a_call(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    x = tvms.nd.array(np.ones((64, 4), "float32"), tvms.cuda())
    xs = tvms.nd.array(np.ones((2, 4), "float32"), tvms.cuda())
    vm["main"](x), vm["arena"](xs, xs)                      # warm: the arena frame, the pool's blocks
    before = cuda.memory_stats()
    out = vm["main"](x)
    out2 = vm["arena"](xs, xs)
    after = cuda.memory_stats()
    assert after["in_use_bytes"] - before["in_use_bytes"] == 1024 + 512    # the two results only
    assert after["device_allocations"] == before["device_allocations"]     # all from the pool
    del out, out2
    assert cuda.memory_stats()["in_use_bytes"] == before["in_use_bytes"]


def test_fake_gpu_vm_argument_errors_name_the_parameter(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    x = np.zeros((3, 4), "float32")
    with pytest.raises(TypeError) as info:
        vm["main"](x)
    assert str(info.value) == ("main() argument 'x': expected a tensor on cuda:0, got a NumPy array on the CPU "
                               "(copy it with tvms.nd.array(x, tvms.cuda(0)))")
    with pytest.raises(TypeError, match=r"argument 'x': expected a tensor on cuda:0, got a tensor on cpu:0 \(copy it "
                                        r"with x.copyto\(tvms.cuda\(0\)\)\)"):
        vm["main"](tvms.nd.array(x))
    with pytest.raises(TypeError, match=r"argument 'x': expected a tensor on cuda:0, got a tensor on cuda:1"):
        vm["main"](tvms.nd.array(x, tvms.cuda(1)))
    with pytest.raises(TypeError, match=r"argument 'x': expected a tensor on cuda:0 \(R.Tensor\(\(n, 4\), "
                                        r"dtype=\"float32\"\)\), got str"):
        vm["main"]("x")
    with pytest.raises(TypeError, match=r"argument 'x': expected dtype float32, got float16"):
        vm["main"](tvms.nd.array(x.astype("float16"), tvms.cuda()))
    with pytest.raises(ValueError, match=r"argument 'y': dimension 0 is 3, expected 2"):
        vm["arena"](tvms.nd.array(np.zeros((2, 4), "float32"), tvms.cuda()), tvms.nd.array(x, tvms.cuda()))


def test_fake_gpu_vm_takes_dlpack_tensors_on_its_gpu_without_a_copy(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    x = np.arange(8, dtype="float32").reshape(2, 4)
    owner = tvms.nd.array(x, tvms.cuda())
    exporter = Exporter((2, 0), owner)
    np.testing.assert_allclose(vm["main"](exporter).numpy(), main_ref(x))
    assert exporter.streams == [fake_gpu.Stream.handle]    # the exporter was given tvms's stream
    wrapped = tvms.runtime.from_dlpack(Exporter((2, 0), owner))
    assert wrapped._ptr == owner._ptr and np.array_equal(wrapped.numpy(), x)
    assert tvms.runtime.from_dlpack(owner) is owner
    del wrapped, owner
    gc.collect()
    assert cuda_dlpack._exports == {}


def test_fake_gpu_arch_mismatch(driver_state):
    driver = FakeDriver(capability=(8, 0))
    driver_state(driver)
    ex = fake_cuda_executable(driver, arch="sm_90")
    with pytest.raises(RuntimeError, match=r'code is for sm_90, but cuda:0 is sm_80 \(compute capability 8.0\): '
                                           r'compile it for this GPU with '
                                           r'tvms.compile\(mod, target="cuda -arch=sm_80"\)'):
        tvms.relax.VirtualMachine(ex, tvms.cuda())


def test_fake_gpu_time_evaluator_uses_events(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    x = tvms.nd.array(np.ones((8, 4), "float32"), tvms.cuda())
    result = vm.time_evaluator("main", tvms.cuda(), number=4, repeat=3)(x)
    assert isinstance(result, tvms.runtime.vm.BenchmarkResult) and len(result.results) == 3
    assert all(r > 0 for r in result.results)
    timers = [s for s in fake_gpu.events if s is vm.stream.raw]
    assert timers == [vm.stream.raw] * 6                     # start and end, on the VM's stream, per repeat
    assert cuda.runtime(tvms.cuda()).default_stream.raw not in timers


def test_fake_gpu_sync_and_threads(fake_gpu):
    vm = tvms.relax.VirtualMachine(fake_cuda_executable(fake_gpu), tvms.cuda())
    syncs = fake_gpu.syncs
    tvms.cuda().sync()
    assert fake_gpu.syncs == syncs + 2                      # the device's streams: the default one, the VM's
    assert len(fake_gpu.context_stack) == 1                 # pushed once, on this thread
    results = []

    def work():
        x = tvms.nd.array(np.ones((2, 4), "float32"), tvms.cuda())
        results.append(vm["main"](x).numpy())
        results.append(len(fake_gpu.context_stack))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    gc.collect()
    np.testing.assert_allclose(results[0], main_ref(np.ones((2, 4), "float32")))
    assert results[1] == 2 and len(fake_gpu.context_stack) == 1   # the thread's context: popped as it ended
    x = tvms.nd.array(np.ones(3, "float32"), tvms.cuda(1))            # another GPU: its context instead
    assert len(fake_gpu.context_stack) == 1 and x.device == tvms.cuda(1)


# ----------------------------------------------------------------------------- on a GPU


def small_gpu_module():
    return tvms.parse(MODULE)


@pytest.mark.cuda
def test_gpu_device():
    dev = tvms.cuda(0)
    assert dev.exist and cuda.unavailable_reason() is None
    assert re.fullmatch(r"sm_\d+", cuda.device_arch(0))
    count = cuda._driver().Device.count()
    assert not tvms.cuda(count).exist
    assert cuda.unavailable_reason(count) == f"no CUDA device {count} (this machine has {count})"
    dev.sync()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool", "bfloat16", "float64", "int64"])
def test_gpu_round_trip(dtype):
    if dtype == "bfloat16":
        np_dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        np_dtype = np.dtype(dtype)
    x = (np.arange(3 * 5 * 7).reshape(3, 5, 7) % 7).astype(np_dtype)
    t = tvms.nd.array(x, tvms.cuda(0))
    assert t.device == tvms.cuda(0) and t.dtype == dtype and t.shape == x.shape
    back = t.numpy()
    assert back.dtype == np_dtype and np.array_equal(back, x)
    assert np.array_equal(tvms.nd.array(np.zeros((0, 3), np_dtype), tvms.cuda()).numpy(), np.zeros((0, 3), np_dtype))
    assert tvms.nd.array(np.array(5, np_dtype), tvms.cuda()).numpy() == np.array(5, np_dtype)


@pytest.mark.cuda
def test_gpu_copies():
    x = np.random.default_rng(0).standard_normal((64, 33)).astype("float32")
    g = tvms.nd.array(x, tvms.cuda())
    assert np.array_equal(g.copyto(tvms.cpu()).numpy(), x)
    g2 = g.copyto(tvms.cuda())
    assert g2._ptr != g._ptr and np.array_equal(g2.numpy(), x)
    g2.copyfrom(x * 2)
    g.copyfrom(g2)
    assert np.array_equal(g.numpy(), x * 2)
    if tvms.cuda(1).exist:
        g1 = g.copyto(tvms.cuda(1))
        assert g1.device == tvms.cuda(1) and np.array_equal(g1.numpy(), x * 2)


@pytest.mark.cuda
def test_gpu_dlpack_with_torch_both_ways():
    torch = pytest.importorskip("torch")
    x = np.arange(12, dtype="float32").reshape(3, 4)
    t = tvms.nd.array(x, tvms.cuda())
    tt = torch.from_dlpack(t)
    assert tt.is_cuda and tt.data_ptr() == t._ptr and tuple(tt.shape) == (3, 4)
    tt.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.numpy(), x * 2)
    src = torch.arange(10, dtype=torch.float16, device="cuda")
    w = tvms.runtime.from_dlpack(src)
    assert w.device == tvms.cuda(0) and w.dtype == "float16" and w._ptr == src.data_ptr()
    np.testing.assert_array_equal(w.numpy(), np.arange(10, dtype="float16"))
    del src                                  # the tvms tensor keeps torch's memory alive
    torch.cuda.empty_cache()
    np.testing.assert_array_equal(w.numpy(), np.arange(10, dtype="float16"))
    b = tvms.runtime.from_dlpack(torch.tensor([True, False], device="cuda"))
    assert b.dtype == "bool" and b.numpy().tolist() == [True, False]
    with pytest.raises(ValueError, match="not contiguous"):
        tvms.runtime.from_dlpack(torch.zeros(4, 4, device="cuda").t())


@pytest.mark.cuda
def test_gpu_dlpack_with_cupy():
    cp = pytest.importorskip("cupy")
    x = np.arange(6, dtype="int32")
    t = tvms.nd.array(x, tvms.cuda())
    c = cp.from_dlpack(t)
    assert c.data.ptr == t._ptr and cp.asnumpy(c).tolist() == x.tolist()
    back = tvms.runtime.from_dlpack(cp.arange(4, dtype=cp.float32))
    assert back.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.cuda
def test_gpu_vm_memory_returns_to_the_pool():
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(small_gpu_module(), target="cuda"), dev)
    x = np.random.default_rng(1).standard_normal((1000, 4)).astype("float32")
    xg = tvms.nd.array(x, dev)
    xs = tvms.nd.array(x[:2], dev)
    np.testing.assert_allclose(vm["main"](xg).numpy(), main_ref(x), rtol=1e-5)
    vm["arena"](xs, xs)
    before = cuda.memory_stats(dev)
    out = vm["main"](xg)
    out2 = vm["arena"](xs, xs)
    dev.sync()
    after = cuda.memory_stats(dev)
    assert after["in_use_bytes"] - before["in_use_bytes"] == cuda.round_size(out.nbytes) + cuda.round_size(out2.nbytes)
    assert after["device_allocations"] == before["device_allocations"]
    np.testing.assert_allclose(out.numpy(), main_ref(x), rtol=1e-5)
    np.testing.assert_allclose(out2.numpy(), 2 * (x[:2] + x[:2]), rtol=1e-6)
    del out, out2
    assert cuda.memory_stats(dev)["in_use_bytes"] == before["in_use_bytes"]


@pytest.mark.cuda
def test_gpu_time_evaluator_with_events():
    dev = tvms.cuda(0)
    vm = tvms.relax.VirtualMachine(tvms.compile(small_gpu_module(), target="cuda"), dev)
    x = tvms.nd.array(np.ones((1 << 16, 4), "float32"), dev)
    result = vm.time_evaluator("main", dev, number=10, repeat=3)(x)
    assert len(result.results) == 3 and all(0 < r < 1 for r in result.results)


@pytest.mark.cuda
def test_gpu_kernel_called_directly():
    dev = tvms.cuda(0)
    ex = tvms.compile(small_gpu_module(), target="cuda")
    x = np.arange(20, dtype="float32").reshape(5, 4)
    c = tvms.nd.empty((5, 4), "float32", dev)
    ex["scale_add"](tvms.nd.array(x, dev), tvms.nd.array(np.ones(4, "float32"), dev), c)
    np.testing.assert_array_equal(c.numpy(), 2 * x + 1)
    with pytest.raises(TypeError, match="expected a tensor on cuda:0, got a NumPy array"):
        ex["scale_add"](x, np.ones(4, "float32"), c)


@pytest.mark.cuda
def test_gpu_threads_and_exit_leave_no_context_pushed():
    """A worker thread using the GPU, then the process exiting: pycuda aborts the process when
    a context is still pushed on an exiting thread, so this runs in a subprocess."""
    script = textwrap.dedent('''
        import threading, numpy as np, tvmscript as tvms
        def work():
            t = tvms.nd.array(np.arange(4, dtype="float32"), tvms.cuda())
            assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
        work()
        th = threading.Thread(target=work); th.start(); th.join()
        work()
        kept = tvms.nd.array(np.ones(3, "float32"), tvms.cuda())  # alive at exit
        print("ok")
    ''')
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    assert "PyCUDA" not in proc.stderr, proc.stderr


def test_tvms_run_opens_the_gpu_on_the_main_thread(monkeypatch, capsys):
    """``tvms run --target cuda`` calls the function in a worker thread (so Ctrl-C can stop a
    long kernel), but opens the GPU's context first, on the main thread: pycuda frees a
    context's modules, streams and memory at exit only from the thread that opened it, and
    printed "... in out-of-thread context could not be cleaned up" at the end of every run
    before. (On a GPU, tests/cuda/test_cuda_gpu.py checks the warnings are gone.)"""
    import threading

    from support.gpu_drivers import EmulatedDriver
    from tvmscript.cli import main as tvms_main

    driver = EmulatedDriver()
    install_driver(monkeypatch, driver)
    driver.record_sources(monkeypatch)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert tvms_main(["run", os.path.join(root, "samples", "mlp.tvms"), "--target", "cuda"]) == 0
    assert "output" in capsys.readouterr().out
    assert driver.context_threads == [threading.main_thread().ident]
