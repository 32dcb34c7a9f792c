"""Several VMs and threads on one GPU (runtime/cuda.py: streams, the pool's cross-stream reuse).

Each VM has a stream of its own; memory orders the streams (a stream waits for the others
that worked on a tensor before it uses it, and a block other streams used is reused only once
their work is done). On the emulated GPU the driver is asynchronous here: each stream runs its
work on a thread of its own after random pauses (`gpu_drivers._StreamWorker`), so a missing
order between two streams reads stale or half-written memory. Under ``-m cuda`` the same
threaded tests run on a real GPU.

The ``gated`` tests hold a stream's work back at a gate (an operation of the fake driver that
waits), to make the hazard certain rather than likely, and each has a negative control: with
the ordering it checks switched off, the same test gives a wrong result.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.runtime import cuda
from tvmscript.runtime.kernel import BoundsCheckError

from support.gpu_drivers import EmulatedDriver, install_driver

PROGRAM = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((16, 16), "float32"), w: R.Tensor((16, 16), "float32")) -> R.Tensor((16, 16), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, x)
            o = R.nn.relu(z)
            R.output(o)
        return o
"""

GATHER = '''# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4,), "float32"), idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="threadIdx.x"):
        B[i] = A[idx[i]]
'''


def reference(x, w):
    return np.maximum(x @ w + x, 0)


@pytest.fixture(params=["emulated", pytest.param("real", marks=pytest.mark.cuda)])
def gpu(request, monkeypatch):
    """GPU 0: emulated with asynchronous streams, or real (skipped where there is none)."""
    if request.param == "emulated":
        install_driver(monkeypatch, EmulatedDriver(asynchronous=0.002))
    return cuda._driver()


@pytest.fixture
def emulated(monkeypatch):
    """The emulated GPU, asynchronous; its streams' work is finished before the next test (a
    negative control leaves work held back, which must not run over the next test's memory)."""
    driver = EmulatedDriver(asynchronous=0.002)
    install_driver(monkeypatch, driver)
    yield driver
    driver.drain()


def executable(graphs: bool = True):
    """PROGRAM for the GPU; ``graphs``: whether ``main`` replays as a CUDA graph (off where a
    test holds a stream back: a capture compares its replay with the run, on the host)."""
    with tvms.transform.PassContext(config={"relax.backend.use_cuda_graph": graphs}):
        return tvms.compile(tvms.parse(PROGRAM), target="cuda")


def inputs(seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 16)).astype("float32"), rng.standard_normal((16, 16)).astype("float32")


def run_threads(work, n: int) -> list:
    """``work(k)`` on ``n`` threads at once; the first error of any is raised here."""
    errors, threads = [], []
    start = threading.Barrier(n)

    def body(k):
        try:
            start.wait()
            work(k)
        except BaseException as err:  # noqa: BLE001 - raised in the test's thread
            errors.append(err)

    for k in range(n):
        threads.append(threading.Thread(target=body, args=(k,)))
        threads[-1].start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return errors


def gate(driver, stream) -> threading.Event:
    """Hold ``stream``'s later work back until the returned event is set (a fake-driver
    operation that waits); opened after 10 s whatever happens, so a failing test cannot hang."""
    opened = threading.Event()
    driver.on_stream(stream.raw, lambda: opened.wait(10))
    return opened


# ----------------------------------------------------------------------------- streams


def test_each_vm_has_a_stream_of_its_own_reused_after_it(emulated):
    ex = executable()
    rt = cuda.runtime(tvms.cuda())
    a, b = tvms.relax.VirtualMachine(ex, tvms.cuda()), tvms.relax.VirtualMachine(ex, tvms.cuda())
    assert a.stream is not b.stream and rt.default_stream not in (a.stream, b.stream)
    x, w = inputs(0)
    out = a["main"](tvms.nd.array(x, tvms.cuda()), tvms.nd.array(w, tvms.cuda()))
    assert out._mem.stream is a.stream                    # a VM's outputs are taken on its stream
    np.testing.assert_allclose(out.numpy(), reference(x, w), rtol=1e-5, atol=1e-5)
    kept = a.stream
    del a
    gc.collect()
    assert tvms.relax.VirtualMachine(ex, tvms.cuda()).stream is kept   # a collected VM's stream serves the next


def test_timers_are_per_stream(emulated):
    """A VM's time_evaluator records its events on its own stream: it finishes while another
    VM's stream is held back."""
    ex = executable(graphs=False)
    busy, timed = tvms.relax.VirtualMachine(ex, tvms.cuda()), tvms.relax.VirtualMachine(ex, tvms.cuda())
    x, w = (tvms.nd.array(a, tvms.cuda()) for a in inputs(1))
    opened = gate(emulated, busy.stream)
    busy["main"](x, w)
    result = timed.time_evaluator("main", tvms.cuda(), number=2, repeat=2)(x, w)
    assert not opened.is_set() and len(result.results) == 2 and min(result.results) > 0
    opened.set()


def test_a_profiles_trace_names_the_vms_stream(emulated):
    vm = tvms.relax.VirtualMachine(executable(graphs=False), tvms.cuda())
    x, w = (tvms.nd.array(a, tvms.cuda()) for a in inputs(4))
    trace = vm.profile("main", x, w, repeat=2).chrome_trace()["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in trace if e["ph"] == "M" and "tid" in e}
    assert tracks[2] == f"cuda:0 stream '{vm.stream.name}': kernels"
    kernels = [e for e in trace if e["ph"] == "X" and e["tid"] == 2]
    assert kernels and len(kernels) % 2 == 0


# ----------------------------------------------------------------------------- threads


def test_two_threads_each_with_its_own_vm(gpu):
    ex = executable()

    def work(k):
        vm = tvms.relax.VirtualMachine(ex, tvms.cuda())
        for i in range(4):
            x, w = inputs(10 * k + i)
            out = vm["main"](tvms.nd.array(x, tvms.cuda()), tvms.nd.array(w, tvms.cuda()))
            np.testing.assert_allclose(out.numpy(), reference(x, w), rtol=1e-5, atol=1e-5)

    run_threads(work, 2)


def test_one_vm_called_from_several_threads(gpu):
    vm = tvms.relax.VirtualMachine(executable(), tvms.cuda())

    def work(k):
        for i in range(3):
            x, w = inputs(100 + 10 * k + i)
            out = vm["main"](tvms.nd.array(x, tvms.cuda()), tvms.nd.array(w, tvms.cuda()))
            np.testing.assert_allclose(out.numpy(), reference(x, w), rtol=1e-5, atol=1e-5)

    run_threads(work, 4)


def test_a_bounds_check_fails_in_the_thread_that_made_it(gpu):
    """Kernels note a failed check in their thread's error record: a thread with a bad index
    gets the error, one with good indices its result, calling the same kernel at once."""
    kernel = tvms.compile(tvms.parse(GATHER), target="cuda")["f"]
    a = np.array([10, 20, 30, 40], "float32")

    def work(k):
        for _ in range(4):
            idx = np.array([0, 7, 1, 2] if k % 2 else [3, 2, 1, 0], "int32")
            da, di, db = (tvms.nd.array(v, tvms.cuda()) for v in (a, idx, np.zeros(4, "float32")))
            if k % 2:
                with pytest.raises(BoundsCheckError, match="index 7 is outside axis 0 of A"):
                    kernel(da, di, db)
            else:
                kernel(da, di, db)
                np.testing.assert_array_equal(db.numpy(), a[::-1])

    run_threads(work, 4)


# ----------------------------------------------------------------------------- ordering, held back


@pytest.fixture(params=["ordered", "negative control"])
def ordering(request, monkeypatch):
    """Whether the runtime orders streams ("negative control": the check under test switched
    off, to show the test catches its absence)."""
    return request.param == "ordered"


def test_one_vms_output_feeds_another_vm(emulated, ordering, monkeypatch):
    """B's call on A's output waits for A's kernels, still held back when B is called."""
    ex = executable(graphs=False)
    a, b = tvms.relax.VirtualMachine(ex, tvms.cuda()), tvms.relax.VirtualMachine(ex, tvms.cuda())
    x, w = inputs(2)
    dx, dw = tvms.nd.array(x, tvms.cuda()), tvms.nd.array(w, tvms.cuda())
    if not ordering:
        monkeypatch.setattr(cuda.Stream, "wait_for", lambda self, others: None)
    opened = gate(emulated, a.stream)
    mid = a["main"](dx, dw)
    out = b["main"](mid, dw)
    threading.Timer(0.3, opened.set).start()
    got = out.numpy()
    expected = reference(reference(x, w), w)
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-5) == ordering


def test_memory_another_stream_still_reads_is_not_reused(emulated, ordering, monkeypatch):
    """B reads x (held back); x is dropped and a new tensor of its size made at once: the pool
    must not hand x's block out before B's work is done."""
    b = tvms.relax.VirtualMachine(executable(graphs=False), tvms.cuda())
    x, w = inputs(3)
    dw = tvms.nd.array(w, tvms.cuda())
    if not ordering:
        monkeypatch.setattr(cuda.runtime(tvms.cuda()).pool, "_fence", lambda streams: [])
    opened = gate(emulated, b.stream)
    dx = tvms.nd.array(x, tvms.cuda())
    out = b["main"](dx, dw)
    del dx
    gc.collect()
    other = tvms.nd.array(np.full((16, 16), 1000, "float32"), tvms.cuda())   # x's size class
    threading.Timer(0.3, opened.set).start()
    got = out.numpy()
    assert np.allclose(got, reference(x, w), rtol=1e-5, atol=1e-5) == ordering
    del other
