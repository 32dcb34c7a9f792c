"""CUDA graphs in the VM (runtime/vm_cuda_graph.py, runtime/cuda_graph.py): a function the
compiler marked (RewriteCUDAGraph) runs its first call with each set of arguments kernel by
kernel while capturing them, and later calls with one graph launch.

The GPU is `gpu_drivers.EmulatedDriver` (the generated CUDA C runs in the emulator) or, for the
runtime's own checks, `FakeDriver` (its kernels are the CPU backend's); both capture streams
pycuda-style and count kernels launched one by one (``launches``), graphs captured
(``captures``) and graph launches. ``@pytest.mark.cuda`` tests run the same on a real GPU,
through the driver's graph entry points.
"""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.runtime import cuda, cuda_graph, vm_cuda_graph

from support.cuda_check import SMALL_MLP
from support.gpu_drivers import EmulatedDriver, FakeDriver, install_driver
from test_cuda_runtime import fake_cuda_executable

OFF = {"relax.backend.use_cuda_graph": False}
RNG = np.random.default_rng(0)

needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")

MLP = SMALL_MLP

# A residual block as resnet has them: convolution, bias and ReLU, a second convolution with
# the block's input added, ReLU, global average pooling, the classifier.
RESNET_LIKE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 4, 6, 6), "float32"), w1: R.Tensor((4, 4, 3, 3), "float32"),
             b1: R.Tensor((1, 4, 1, 1), "float32"), w2: R.Tensor((4, 4, 3, 3), "float32"),
             fc: R.Tensor((4, 5), "float32")) -> R.Tensor((1, 5), "float32"):
        with R.dataflow():
            c1 = R.nn.conv2d(x, w1, padding=[1, 1, 1, 1])
            r1 = R.nn.relu(R.add(c1, b1))
            c2 = R.nn.conv2d(r1, w2, padding=[1, 1, 1, 1])
            r2 = R.nn.relu(R.add(c2, x))
            pooled = R.mean(r2, axis=[2, 3])
            out = R.matmul(pooled, fc)
            R.output(out)
        return out
'''

DYNAMIC = MLP.replace('x: R.Tensor((1, 32), "float32")', 'x: R.Tensor(("n", 32), "float32")') \
             .replace('-> R.Tensor((1, 8), "float32")', '-> R.Tensor(("n", 8), "float32")')

HOST_OP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8,), "float32"), y: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        s = R.add(x, y)
        t = R.sort(s, axis=0)
        u = R.multiply(t, y)
        return u
'''


def mlp_ref(x, w1, b1, w2):
    return np.maximum(x @ w1 + b1, 0) @ w2


def conv_ref(x, w):
    """A 3x3 convolution with padding 1, NCHW/OIHW."""
    n, _, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd), np.float64)
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def resnet_ref(x, w1, b1, w2, fc):
    r1 = np.maximum(conv_ref(x, w1) + b1, 0)
    r2 = np.maximum(conv_ref(r1, w2) + x, 0)
    return r2.mean(axis=(2, 3)) @ fc


def arrays(shapes):
    return [RNG.standard_normal(s).astype("float32") for s in shapes]


MLP_SHAPES = [(1, 32), (32, 16), (16,), (16, 8)]
RESNET_SHAPES = [(1, 4, 6, 6), (4, 4, 3, 3), (1, 4, 1, 1), (4, 4, 3, 3), (4, 5)]


@pytest.fixture
def emulated(monkeypatch):
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    driver = EmulatedDriver()
    install_driver(monkeypatch, driver)
    return driver


@pytest.fixture
def fake(monkeypatch):
    driver = FakeDriver()
    install_driver(monkeypatch, driver)
    return driver


def on_gpu(arrs):
    return [tvms.nd.array(a, tvms.cuda()) for a in arrs]


def vm_for(src: str, config=None):
    with tvms.transform.PassContext(config=config or {}):
        ex = tvms.compile(tvms.parse(src), target="cuda")
    return ex, tvms.relax.VirtualMachine(ex, tvms.cuda())


# ----------------------------------------------------------------------------- captured and replayed


@pytest.mark.parametrize("src, shapes, ref", [(MLP, MLP_SHAPES, mlp_ref), (RESNET_LIKE, RESNET_SHAPES, resnet_ref)],
                         ids=["mlp", "resnet_block"])
def test_the_first_call_captures_and_later_calls_launch_one_graph(emulated, src, shapes, ref):
    ex, vm = vm_for(src)
    assert ex.functions["main"].cuda_graph
    host = arrays(shapes)
    args = on_gpu(host)
    want = ref(*host)
    out = vm["main"](*args)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    launches = len(emulated.launches)           # the first run, kernel by kernel
    assert launches >= ex.functions["main"].num_kernel_calls >= 2
    assert emulated.captures == 1               # ... captured once
    assert emulated.graph_launches == 1 and emulated.replayed == launches   # and replayed once, checked
    for call in range(1, 4):
        out = vm["main"](*args)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
        assert len(emulated.launches) == launches   # no kernel launched one by one
        assert emulated.graph_launches == 1 + call  # one graph launch per call
    assert emulated.captures == 1
    assert vm.cuda_graph_stats()["main"] == {"enabled": True, "graphs": 1, "captures": 1, "replays": 3,
                                             "fallback": None}


def test_the_config_off_runs_kernel_by_kernel_with_the_same_results(emulated):
    host = arrays(MLP_SHAPES)
    results = []
    for config in ({}, OFF):
        ex, vm = vm_for(MLP, config)
        args = on_gpu(host)
        results.append([vm["main"](*args).numpy() for _ in range(3)])
    assert emulated.captures == 1                       # only with graphs on
    assert not ex.functions["main"].cuda_graph
    assert vm.cuda_graph_stats()["main"]["fallback"] == "relax.backend.use_cuda_graph is off in the PassContext"
    np.testing.assert_array_equal(np.array(results[0]), np.array(results[1]))
    np.testing.assert_allclose(results[1][0], mlp_ref(*host), rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_are_not_captured_and_still_correct(emulated):
    ex, vm = vm_for(DYNAMIC)
    assert not ex.functions["main"].cuda_graph
    weights = arrays(MLP_SHAPES[1:])
    for n in (1, 3, 3):
        x = RNG.standard_normal((n, 32)).astype("float32")
        out = vm["main"](*on_gpu([x, *weights]))
        np.testing.assert_allclose(out.numpy(), mlp_ref(x, *weights), rtol=1e-4, atol=1e-5)
    assert emulated.captures == 0 and emulated.graph_launches == 0
    assert vm.cuda_graph_stats()["main"]["fallback"].startswith("parameter 'x' has no static shape")


def test_a_host_op_is_not_captured_and_still_correct(emulated):
    ex, vm = vm_for(HOST_OP)
    assert ex.functions["main"].cuda_graph_note == "R.sort runs on the host"
    x, y = arrays([(8,), (8,)])
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](*on_gpu([x, y])).numpy(), np.sort(x + y) * y, rtol=1e-6)
    assert emulated.captures == 0


def test_host_work_the_compiler_missed_is_found_in_the_first_run(emulated):
    """The runtime's defence: a function marked by hand, with a host op, runs as before."""
    ex = tvms.compile(tvms.parse(HOST_OP), target="cuda")
    ex.functions["main"].cuda_graph = True
    vm = tvms.relax.VirtualMachine(ex, tvms.cuda())
    x, y = arrays([(8,), (8,)])
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](*on_gpu([x, y])).numpy(), np.sort(x + y) * y, rtol=1e-6)
    assert emulated.captures == 0
    assert vm.cuda_graph_stats()["main"]["fallback"] == "R.sort runs on the host, found in its first run"


def test_outputs_of_consecutive_calls_do_not_alias(emulated):
    ex, vm = vm_for(MLP)
    host = arrays(MLP_SHAPES)
    args = on_gpu(host)
    first = vm["main"](*args)
    second = vm["main"](*args)                   # a replay
    x2 = RNG.standard_normal((1, 32)).astype("float32")
    args[0].copyfrom(x2)                         # the same tensor (same address) with new values
    third = vm["main"](*args)                    # a replay, reading the new values
    assert emulated.captures == 1 and vm.cuda_graph_stats()["main"]["replays"] == 2
    assert len({first._ptr, second._ptr, third._ptr}) == 3
    np.testing.assert_allclose(first.numpy(), mlp_ref(*host), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second.numpy(), mlp_ref(*host), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(third.numpy(), mlp_ref(x2, *host[1:]), rtol=1e-4, atol=1e-5)


def test_arguments_at_new_addresses_capture_again_then_stop(emulated):
    """Graphs are keyed on the arguments' addresses: each new address is a capture, at most
    MAX_GRAPHS kept; captures that are never replayed stop capturing the function."""
    ex, vm = vm_for(MLP)
    host = arrays(MLP_SHAPES)
    weights = on_gpu(host[1:])
    held = []                                    # kept alive: each input gets a new address
    for i in range(vm_cuda_graph.MAX_UNREPLAYED + 2):
        x = RNG.standard_normal((1, 32)).astype("float32")
        held.append(tvms.nd.array(x, tvms.cuda()))
        np.testing.assert_allclose(vm["main"](held[-1], *weights).numpy(), mlp_ref(x, *host[1:]),
                                   rtol=1e-4, atol=1e-5)
    stats = vm.cuda_graph_stats()["main"]
    assert emulated.captures == stats["captures"] == vm_cuda_graph.MAX_UNREPLAYED
    assert stats["graphs"] == 0 and "never replayed" in stats["fallback"]


def test_a_few_argument_sets_each_keep_their_graph(emulated):
    ex, vm = vm_for(MLP)
    host = arrays(MLP_SHAPES)
    weights = on_gpu(host[1:])
    xs = [RNG.standard_normal((1, 32)).astype("float32") for _ in range(3)]
    inputs = on_gpu(xs)
    for _ in range(2):
        for x, gx in zip(xs, inputs):
            np.testing.assert_allclose(vm["main"](gx, *weights).numpy(), mlp_ref(x, *host[1:]),
                                       rtol=1e-4, atol=1e-5)
    assert vm.cuda_graph_stats()["main"] == {"enabled": True, "graphs": 3, "captures": 3, "replays": 3,
                                             "fallback": None}


# ----------------------------------------------------------------------------- the runtime's checks


TUPLES = '''
@I.ir_module
class Module:
    @T.prim_func
    def add(A: T.Buffer((2, 4), "float32"), B: T.Buffer((2, 4), "float32"), C: T.Buffer((2, 4), "float32")):
        for i, j in T.grid(2, 4):
            with T.block("c"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]

    @R.function
    def twice(x: R.Tensor((2, 4), "float32")):
        cls = Module
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((2, 4), "float32"))
        z = R.call_tir(cls.add, (y, x), out_sinfo=R.Tensor((2, 4), "float32"))
        return (z, (z, y), R.shape([2, 4]))

    @R.function
    def returns_its_argument(x: R.Tensor((2, 4), "float32")):
        cls = Module
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((2, 4), "float32"))
        return (y, x)
'''


def fake_vm(driver, src=TUPLES, names=("twice", "returns_its_argument")):
    """A VM on the fake GPU (kernels: the CPU backend's) with ``names`` marked capturable."""
    ex = fake_cuda_executable(driver, src)
    for name in names:
        ex.functions[name].cuda_graph = True
    return tvms.relax.VirtualMachine(ex, tvms.cuda())


def test_tuple_results_come_back_in_their_shape_with_fresh_tensors(fake):
    vm = fake_vm(fake)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    gx = tvms.nd.array(x, tvms.cuda())
    runs = [vm["twice"](gx) for _ in range(3)]
    assert fake.captures == 1 and fake.graph_launches == 3
    for z, (z2, y), shape in runs:
        assert z2 is z and shape == (2, 4)      # the same tensor twice stays one tensor
        np.testing.assert_array_equal(z.numpy(), 3 * x)
        np.testing.assert_array_equal(y.numpy(), 2 * x)
    assert len({r[0]._ptr for r in runs}) == 3


def test_a_result_that_is_an_argument_is_not_captured(fake):
    vm = fake_vm(fake)
    x = tvms.nd.array(np.ones((2, 4), "float32"), tvms.cuda())
    for _ in range(2):
        y, same = vm["returns_its_argument"](x)
        assert same is x and np.array_equal(y.numpy(), 2 * np.ones((2, 4)))
    assert vm.cuda_graph_stats()["returns_its_argument"]["fallback"] == \
        "the result is not memory the graph owns (an argument or a constant is returned)"


def test_an_error_in_the_first_call_is_the_ordinary_one_and_captures_nothing(fake):
    vm = fake_vm(fake)
    bad = tvms.nd.array(np.ones((2, 4), "float16"), tvms.cuda())
    with pytest.raises(TypeError, match=r"twice\(\) argument 'x': expected dtype float32, got float16"):
        vm["twice"](bad)
    assert fake.captures == 0 and vm.cuda_graph_stats()["twice"]["fallback"] is None
    with pytest.raises(TypeError, match=r"expected a tensor on cuda:0"):
        vm["twice"](np.ones((2, 4), "float32"))      # no key: the ordinary call explains
    x = np.ones((2, 4), "float32")
    np.testing.assert_array_equal(vm["twice"](tvms.nd.array(x, tvms.cuda()))[0].numpy(), 3 * x)
    assert fake.captures == 1


def test_a_capture_the_driver_refuses_runs_as_before(fake, monkeypatch):
    def refuse(self, mode=0):
        raise fake.Error("cuStreamBeginCapture failed: operation not supported")

    monkeypatch.setattr(fake.Stream, "begin_capture", refuse)
    vm = fake_vm(fake)
    x = np.ones((2, 4), "float32")
    for _ in range(2):
        z, _, _ = vm["twice"](tvms.nd.array(x, tvms.cuda()))
        np.testing.assert_array_equal(z.numpy(), 3 * x)
    assert vm.cuda_graph_stats()["twice"]["fallback"] == \
        "Error: cuStreamBeginCapture failed: operation not supported"


def test_a_replay_that_differs_from_the_run_is_not_kept(fake, monkeypatch):
    """The first replay is compared with the first run: a graph that lost a launch is dropped."""
    end = fake.Stream.end_capture

    def lossy(self):
        graph = end(self)
        graph.ops = graph.ops[:-1]
        graph.node_count = lambda: len(graph.ops) + 1   # so that only the values tell
        return graph

    monkeypatch.setattr(fake.Stream, "end_capture", lossy)
    vm = fake_vm(fake)
    x = np.ones((2, 4), "float32")
    z, _, _ = vm["twice"](tvms.nd.array(x, tvms.cuda()))
    np.testing.assert_array_equal(z.numpy(), 3 * x)
    assert vm.cuda_graph_stats()["twice"]["fallback"] == "the graph's first replay gave other values than the run"


def test_the_capture_allocates_nothing_and_the_graph_keeps_its_memory(fake):
    vm = fake_vm(fake)
    gx = tvms.nd.array(np.ones((2, 4), "float32"), tvms.cuda())
    vm["twice"](gx)                              # (the fake refuses an allocation while capturing)
    before = cuda.memory_stats()
    out = vm["twice"](gx)
    assert cuda.memory_stats()["in_use_bytes"] - before["in_use_bytes"] == 2 * 512   # the two fresh results
    assert cuda.memory_stats()["device_allocations"] == before["device_allocations"]
    del out
    assert cuda.memory_stats()["in_use_bytes"] == before["in_use_bytes"]


def test_replays_from_threads(fake):
    vm = fake_vm(fake)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    gx = tvms.nd.array(x, tvms.cuda())
    vm["twice"](gx)
    errors = []

    def work():
        try:
            for _ in range(20):
                assert np.array_equal(vm["twice"](gx)[0].numpy(), 3 * x)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and vm.cuda_graph_stats()["twice"]["replays"] == 80


def test_profile_and_time_evaluator_still_work(fake):
    vm = fake_vm(fake)
    gx = tvms.nd.array(np.ones((2, 4), "float32"), tvms.cuda())
    report = vm.profile("twice", gx)             # kernel by kernel, in a namespace of its own
    assert [(k, n) for k, n, _ in report.rows] == [("add", 2)]
    result = vm.time_evaluator("twice", tvms.cuda(), number=3)(gx)
    assert result.mean > 0 and vm.cuda_graph_stats()["twice"]["replays"] >= 3


def test_the_fake_driver_captures_as_the_driver_does(fake):
    stream = fake.Stream(1)
    api = cuda_graph.graph_api(fake)
    rt = cuda.runtime(tvms.cuda())
    api.begin(stream)
    with pytest.raises(fake.Error, match="operation not permitted when stream is capturing"):
        fake.mem_alloc(16)
    with pytest.raises(fake.Error, match="operation not permitted when stream is capturing"):
        rt.sync()
    graph = api.end(stream)
    assert graph.node_count() == 0 and fake.captures == 1
    graph.instance().launch(rt.default_stream.raw)
    assert fake.graph_launches == 1


def test_without_graph_support_in_pycuda_the_driver_library_is_used(monkeypatch):
    class Stream:   # pycuda's: no begin_capture
        pass

    drv = type("drv", (), {"Stream": Stream})
    monkeypatch.setattr(cuda_graph, "_libcuda", lambda: "libcuda")
    assert cuda_graph.graph_api(drv) == "libcuda"
    assert isinstance(cuda_graph.graph_api(FakeDriver()), cuda_graph._DriverModuleGraphs)


# ----------------------------------------------------------------------------- on a GPU


@pytest.mark.cuda
@pytest.mark.parametrize("src, shapes, ref", [(MLP, MLP_SHAPES, mlp_ref), (RESNET_LIKE, RESNET_SHAPES, resnet_ref)],
                         ids=["mlp", "resnet_block"])
def test_gpu_graphs_give_the_results_of_launches_one_by_one(src, shapes, ref):
    """On a real GPU, through libcuda's graph entry points: graph replays and kernel-by-kernel
    calls agree with each other and with NumPy, and the replays are graph launches."""
    host = arrays(shapes)
    runs = {}
    for label, config in (("graphs", {}), ("no graphs", OFF)):
        ex, vm = vm_for(src, config)
        args = on_gpu(host)
        runs[label] = [vm["main"](*args).numpy() for _ in range(4)]
        vm.time_evaluator("main", tvms.cuda(), number=10)(*args)   # timed, not asserted
        stats = vm.cuda_graph_stats()["main"]
        if label == "graphs":
            assert stats["fallback"] is None and stats["captures"] == 1 and stats["replays"] >= 3, stats
    for got in runs["graphs"] + runs["no graphs"]:
        np.testing.assert_allclose(got, ref(*host), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(runs["graphs"][-1], runs["no graphs"][-1], rtol=1e-5, atol=1e-6)
