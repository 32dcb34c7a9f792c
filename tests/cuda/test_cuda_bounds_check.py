"""Bounds checks on the GPU (compiler/codegen_cuda/checks.py): the CPU's checks, in CUDA kernels.

Each test runs on the emulated GPU everywhere and, under ``pytest -m cuda``, on a real one
(the `gpu` fixture, tests/cuda/conftest.py). What is checked:

* the CPU's four out-of-bounds reproducers, their loop bound to threads, stop with the CPU's
  located `BoundsCheckError` (checked on the host, before anything is launched), and the
  next call on the same device gives the right result: the context is alive;
* a gather (an index read from memory) is checked in the kernel: the failure is recorded,
  raised after the kernel with the index found, and cleared for the next call;
* a symbolic loop one too long is caught for the sizes of the call;
* through the VM, a failed check is raised at the Relax binding, on the first call and when
  the function replays as a CUDA graph;
* ``bounds_check=False`` leaves every check out;
* the kernels of benchmarks/cuda.py prove every access: their checks cost nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.build_cuda import build_cuda
from tvmscript.runtime.kernel import BoundsCheckError

from support.out_of_bounds import GPU_COPY, GPU_SYMBOLIC, REPRODUCERS

ROOT = Path(__file__).resolve().parents[2]

GATHER = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        B[i] = A[idx[i]]
'''


def device_arrays(*arrays):
    return [tvms.nd.array(a, tvms.cuda()) for a in arrays]


def assert_alive():
    """A correct kernel right after a failed check runs, and runs right, on the same device."""
    kernel = tvms.compile(tvms.parse(GPU_COPY.format(extent=4, stmt="B[i] = A[i] * T.float32(3)")), target="cuda")["f"]
    a, b = device_arrays(np.arange(4, dtype="float32"), np.zeros(4, "float32"))
    kernel(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(4, dtype="float32") * 3)


@pytest.mark.parametrize("stmt,extent,access,index,static", REPRODUCERS)
def test_the_cpu_reproducers_stop_on_the_gpu_with_a_located_error(gpu, tmp_path, stmt, extent, access, index, static):
    path = tmp_path / "oob.tvms"
    path.write_text(GPU_COPY.format(extent=extent, stmt=stmt))
    kernel = tvms.compile(tvms.load(path), target="cuda")["f"]
    a, b = device_arrays(np.arange(4, dtype="float32"), np.zeros(4, "float32"))
    with pytest.raises(BoundsCheckError) as info:
        kernel(a, b)
    message = str(info.value)
    assert access in message and index in message and "shape (4,)" in message, message
    assert info.value.span.filename == str(path) and info.value.span.line == 5
    assert not b.numpy().any()      # checked on the host: nothing was launched
    assert_alive()


def test_a_gather_is_checked_in_the_kernel_and_the_next_call_is_right(gpu):
    func = tvms.parse(GATHER)
    code = build_cuda({"f": func}, kind="source")
    assert code.functions["f"].checks.device and "tvms_check_index(" in code.source
    kernel = tvms.compile(func, target="cuda")["f"]
    a = np.array([10, 20, 30, 40], "float32")
    da, bad, b = device_arrays(a, np.array([0, 7, 1, 2], "int32"), np.zeros(4, "float32"))
    with pytest.raises(BoundsCheckError, match=r"read of A\[idx\[i\]\]: index 7 is outside axis 0 of A \(size 4, "
                                               r"shape \(4,\)\) \(<string>:5:16\)"):
        kernel(da, bad, b)
    good = tvms.nd.array(np.array([3, 2, 1, 0], "int32"), tvms.cuda())
    kernel(da, good, b)             # the record was cleared: no stale failure
    np.testing.assert_array_equal(b.numpy(), a[::-1])
    with pytest.raises(BoundsCheckError, match="index -1 is outside"):
        kernel(da, tvms.nd.array(np.array([0, 1, 2, -1], "int32"), tvms.cuda()), b)


def test_a_symbolic_loop_one_too_long_is_caught_for_the_sizes_of_the_call(gpu):
    kernel = tvms.compile(tvms.parse(GPU_SYMBOLIC.format(extent="n + 1")), target="cuda")["f"]
    for n in (5, 9):
        a, b = device_arrays(np.arange(n, dtype="float32"), np.zeros(n, "float32"))
        with pytest.raises(BoundsCheckError, match=rf"read of A\[i\]: indices 0 to {n} reach outside axis 0 of A "
                                                   rf"\(size {n}, shape \(n,\)\)"):
            kernel(a, b)
        assert not b.numpy().any()
    right = tvms.compile(tvms.parse(GPU_SYMBOLIC.format(extent="n")), target="cuda")["f"]
    a, b = device_arrays(np.arange(5, dtype="float32"), np.zeros(5, "float32"))
    right(a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(5, dtype="float32") * 2)


VM_GATHER = """
@I.ir_module
class Module:
    @T.prim_func
    def gather(A: T.Buffer((4,), "float32"), idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
        for i in T.thread_binding(4, thread="threadIdx.x"):
            B[i] = A[idx[i]]

    @R.function
    def main(x: R.Tensor((4,), "float32"), i: R.Tensor((4,), "int32")):
        cls = Module
        y = R.call_tir(cls.gather, (x, i), out_sinfo=R.Tensor((4,), "float32"))
        return y
"""


def test_the_vm_raises_a_kernels_failed_check_and_goes_on(gpu):
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(VM_GATHER), target="cuda"), tvms.cuda())
    x = tvms.nd.array(np.array([1, 2, 3, 4], "float32"), tvms.cuda())
    with pytest.raises(BoundsCheckError, match=r"index 4 is outside axis 0 of A"):
        vm["main"](x, tvms.nd.array(np.array([4, 0, 0, 0], "int32"), tvms.cuda()))
    good, bad = (tvms.nd.array(np.array(i, "int32"), tvms.cuda()) for i in ([1, 1, 0, 3], [0, 0, 0, 9]))
    for _ in range(3):   # the function is captured as a CUDA graph, then replayed
        np.testing.assert_array_equal(vm["main"](x, good).numpy(), [2, 2, 1, 4])
    replays = vm.cuda_graph_stats()["main"]["replays"]
    assert replays >= 1
    with pytest.raises(BoundsCheckError, match=r"index 9 is outside axis 0 of A .*binding 'y'"):
        vm["main"](x, bad)              # the replay reads the error record after the graph
    np.testing.assert_array_equal(vm["main"](x, good).numpy(), [2, 2, 1, 4])
    assert vm.cuda_graph_stats()["main"]["replays"] == replays + 1   # and the graph is still used


def test_no_bounds_check_leaves_every_check_out():
    checked = build_cuda({"f": tvms.parse(GATHER)}, kind="source")
    unchecked = build_cuda({"f": tvms.parse(GATHER)}, kind="source", bounds_check=False)
    assert "tvms_check_index" in checked.source and "tvms_check_index" not in unchecked.source
    assert "tvms_err" not in unchecked.source and not unchecked.functions["f"].checks.messages
    oob = build_cuda({"f": tvms.parse(GPU_COPY.format(extent=8, stmt="B[i] = A[i]"))}, kind="source",
                     bounds_check=False)
    assert not oob.functions["f"].checks.host
    ex = tvms.compile(tvms.parse(GATHER), target="cuda", bounds_check=False)
    assert "tvms_check_index" not in ex.cuda_code.source


DOWNSAMPLE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 64, 56, 56), "float32"), w: R.Tensor((128, 64, 1, 1), "float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w, strides=[2, 2])
            R.output(y)
        return y
"""


def test_the_benchmark_kernels_prove_every_access():
    """benchmarks/cuda.py's kernels (DLight's schedules of a matmul in fp32 and fp16, the
    hand-written tensor-core matmul, the add, the softmax, the seed MLP) and resnet18's
    stride-2 1x1 convolution (its pixel rows ``(t * 32 + p) // 28 * 2`` under the tile's guard:
    benchmarks/cuda_models.py counts the checks of whole models): no check is left in any
    kernel or on the host, so bounds checking costs them nothing."""
    # By its path: "cuda" is also NVIDIA's package (cuda-bindings), which the suite may have imported.
    spec = importlib.util.spec_from_file_location("benchmarks_cuda", ROOT / "benchmarks" / "cuda.py")
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))      # its own imports (_gpu)
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from tvmscript.compiler.build import kernels_as_built

    modules = [tvms.parse(bench.matmul_src(256, "float32")), tvms.parse(bench.matmul_src(256, "float16")),
               tvms.parse(bench.tensor_core_matmul_src(256)), tvms.parse(bench.ADD_SRC.format(n=1 << 20)),
               bench.softmax_module(256, 512), bench.load_mlp(), tvms.parse(DOWNSAMPLE)]
    for mod in modules:
        mod = kernels_as_built(mod, "cuda")
        funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}
        code = build_cuda(funcs, kind="source")
        for name, f in code.functions.items():
            assert not f.checks.messages, (name, f.checks.messages)
        assert "tvms_err" not in code.source
