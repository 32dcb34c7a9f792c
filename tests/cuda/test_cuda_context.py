"""A CUDA context lost to a sticky error, and recreated (runtime/cuda.py: `DeviceRuntime.recreate`).

After an illegal address or another of CUDA's sticky errors, every later call on the context
fails. tvms raises a `DeviceError` saying so, and the next use of the device recreates the
context: the primary context is reset and retained again, the pool starts empty, and each VM
loads its kernels and constants again on its next call. Tensors made before are lost, and
using one says so. On the emulated GPU the fault is injected (the stand-in driver then refuses
every call until the reset); under ``-m cuda`` a kernel built without bounds checks writes a
terabyte past its buffer.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.runtime import cuda

from support.gpu_drivers import EmulatedDriver, install_driver

PROGRAM = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((8, 8), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            o = R.add(y, R.const(1, "float32"))
            R.output(o)
        return o
"""

# A store a terabyte past B, with the bounds checks left out: an illegal address on a real GPU.
WILD_STORE = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), off: T.int64):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        B[T.int64(i) + off] = A[i]
'''

ILLEGAL = "an illegal memory access was encountered"


@pytest.fixture
def emulated(monkeypatch):
    driver = EmulatedDriver()
    install_driver(monkeypatch, driver)
    return driver


def inputs(seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((8, 8)).astype("float32"), rng.standard_normal((8, 8)).astype("float32")
    return (x, w), x @ w + 1


def upload(*arrays):
    return [tvms.nd.array(a, tvms.cuda()) for a in arrays]


@pytest.mark.parametrize("graphs", [False, True], ids=["kernel by kernel", "CUDA graph"])
def test_the_next_vm_call_after_a_sticky_error_recreates_the_context(emulated, graphs):
    with tvms.transform.PassContext(config={"relax.backend.use_cuda_graph": graphs}):
        ex = tvms.compile(tvms.parse(PROGRAM), target="cuda")
    vm = tvms.relax.VirtualMachine(ex, tvms.cuda())
    main = vm["main"]                                    # a function handed out before the fault
    (x, w), expected = inputs(0)
    old = upload(x, w)
    for _ in range(2):                                   # with graphs on: captured, then replayed
        np.testing.assert_allclose(main(*old).numpy(), expected, rtol=1e-5, atol=1e-5)
    emulated.fault = ILLEGAL
    with pytest.raises(cuda.DeviceError, match="illegal memory access.*unusable: the next VM call recreates it") as info:
        main(*old).numpy()
    assert info.value.sticky and emulated.lost == ILLEGAL and cuda.runtime(tvms.cuda()).lost
    with pytest.raises(cuda.DeviceError, match="was lost when the CUDA context was recreated"):
        main(*old)                                       # recreated here; the old tensors are gone
    assert emulated.resets == 1 and emulated.lost is None
    (x, w), expected = inputs(1)
    for _ in range(2):
        np.testing.assert_allclose(main(*upload(x, w)).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert emulated.resets == 1
    other = tvms.relax.VirtualMachine(ex, tvms.cuda())  # a VM made after: the new context from the start
    np.testing.assert_allclose(other["main"](*upload(x, w)).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_new_tensor_after_a_sticky_error_recreates_the_context(emulated):
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(PROGRAM), target="cuda"), tvms.cuda())
    (x, w), expected = inputs(2)
    vm["main"](*upload(x, w)).numpy()
    emulated.fault = ILLEGAL
    with pytest.raises(cuda.DeviceError):
        tvms.cuda().sync()
    args = upload(x, w)                                  # the context is recreated for the upload
    assert emulated.resets == 1
    np.testing.assert_allclose(vm["main"](*args).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_kernel_taken_before_the_context_was_recreated_says_so(emulated):
    ex = tvms.compile(tvms.parse(WILD_STORE.replace(" + off", "")), target="cuda")
    kernel = ex["f"]
    emulated.fault = ILLEGAL
    with pytest.raises(cuda.DeviceError):
        tvms.cuda().sync()
    cuda.recreate_context()
    a, b = upload(np.arange(4, dtype="float32"), np.zeros(4, "float32"))
    with pytest.raises(cuda.DeviceError, match="loaded in a CUDA context since lost.*ex\\[name\\]"):
        kernel(a, b, 0)
    ex["f"](a, b, 0)                                     # taken again: loaded in the new context
    np.testing.assert_array_equal(b.numpy(), np.arange(4, dtype="float32"))


@pytest.mark.cuda
def test_a_real_illegal_address_is_recovered_from():
    if cuda.unavailable_reason() is not None:
        pytest.skip(cuda.unavailable_reason())
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.parse(PROGRAM), target="cuda"), tvms.cuda())
    wild = tvms.compile(tvms.parse(WILD_STORE), target="cuda", bounds_check=False)["f"]
    a, b = upload(np.arange(4, dtype="float32"), np.zeros(4, "float32"))
    with pytest.raises(cuda.DeviceError) as info:
        wild(a, b, 1 << 38)
        b.numpy()
    assert info.value.sticky, str(info.value)
    (x, w), expected = inputs(3)
    np.testing.assert_allclose(vm["main"](*upload(x, w)).numpy(), expected, rtol=1e-4, atol=1e-4)
