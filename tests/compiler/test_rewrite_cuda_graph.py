"""RewriteCUDAGraph (compiler/transform/rewrite_cuda_graph.py) and the PassContext that turns it
off: which functions are marked to replay their kernels as a CUDA graph, why the others are not,
where it runs (the default CUDA pipeline, the CUDA build) and ``relax.backend.use_cuda_graph``.
No GPU needed; tests/cuda/test_cuda_graph.py runs what is marked.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform.rewrite_cuda_graph import ATTR, SYMBOLIC_ATTR, capture_blocker
from support.cuda_check import SMALL_MLP

OFF = {"relax.backend.use_cuda_graph": False}

MLP = SMALL_MLP

# One prim_func, and Relax functions each showing one thing a capture allows or refuses.
LOWERED = '''
@I.ir_module
class Module:
    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("c"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] + B[vi]

    @T.prim_func
    def add_dyn(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("c"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + A[vi]

    @R.function
    def static(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
            z = R.call_tir(cls.add, (y, x), out_sinfo=R.Tensor((4,), "float32"))
            R.output(z)
        return z

    @R.function
    def dynamic(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        cls = Module
        y = R.call_tir(cls.add_dyn, (x,), out_sinfo=R.Tensor((n,), "float32"))
        return y

    @R.function
    def calls_static(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = cls.static(x)
        z = R.call_tir(cls.add, (y, y), out_sinfo=R.Tensor((4,), "float32"))
        return z

    @R.function
    def packed(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        z = R.call_pure_packed("my_host_func", y, sinfo_args=R.Tensor((4,), "float32"))
        return z

    @R.function
    def calls_packed(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = cls.packed(x)
        return y

    @R.function
    def sorts(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        z = R.sort(y, axis=0)
        return z

    @R.function
    def tensor_cond(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        cls = Module
        if c:
            r = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        else:
            r = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        return r

    @R.function
    def prim_cond(x: R.Tensor((4,), "float32"), c: R.Prim(value=1)) -> R.Tensor((4,), "float32"):
        cls = Module
        if c:
            r = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        else:
            r = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        return r

    @R.function
    def inplace(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = R.call_tir_inplace(cls.add, (x, x, x), inplace_indices=[2], out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function
    def no_kernel(x: R.Tensor((4,), "float32")) -> R.Tensor((2, 2), "float32"):
        y = R.reshape(x, R.shape([2, 2]))
        return y
'''


@pytest.fixture(scope="module")
def lowered():
    return tvms.parse(LOWERED)


def test_the_default_cuda_pipeline_marks_a_static_mlp():
    mod = tvms.parse(MLP)
    assert relax.get_pipeline("default", "cuda")(mod)["main"].attrs.get(ATTR) is True
    assert ATTR not in relax.get_pipeline("default", "llvm")(mod)["main"].attrs
    assert 'R.func_attr({"relax.rewrite_cuda_graph.capture": True})' in \
        relax.get_pipeline("default", "cuda")(mod).script()


def test_the_cuda_build_turns_the_mark_into_the_vm_function_flag():
    ex = tvms.compile(tvms.parse(MLP), target="cuda")  # NVRTC: no GPU needed
    assert ex.functions["main"].cuda_graph
    assert "  CUDA graph: yes" in ex.stats()
    cpu = tvms.compile(tvms.parse(MLP), target="llvm")
    assert not cpu.functions["main"].cuda_graph and "CUDA graph" not in cpu.stats()


@pytest.mark.parametrize("name, reason", [
    ("static", None),
    ("calls_static", None),
    ("prim_cond", None),
    ("dynamic", "parameter 'x' has no static shape"),
    ("packed", "R.call_pure_packed runs a host function"),
    ("calls_packed", "it calls 'packed', where R.call_pure_packed runs a host function"),
    ("sorts", "R.sort runs on the host"),
    ("tensor_cond", "an R.If on a tensor's value"),
    ("inplace", "R.call_tir_inplace writes a tensor in place"),
    ("no_kernel", "it launches no kernel"),
])
def test_what_a_capture_allows_and_refuses(lowered, name, reason):
    found = capture_blocker(lowered[name], lowered)
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.startswith(reason), found
    marked = relax.transform.RewriteCUDAGraph()(lowered)
    assert bool(marked[name].attrs.get(ATTR)) == (reason is None)


def test_symbolic_shapes_are_captured_when_the_function_asks(lowered):
    import dataclasses

    func = dataclasses.replace(lowered["dynamic"], attrs={**lowered["dynamic"].attrs, SYMBOLIC_ATTR: ["n"]})
    assert capture_blocker(func, lowered) is None


def test_the_pass_is_idempotent_and_leaves_a_module_without_candidates_as_it_is(lowered):
    once = relax.transform.RewriteCUDAGraph()(lowered)
    assert once is not lowered and lowered["static"].attrs.get(ATTR) is None  # the input is not changed
    assert relax.transform.RewriteCUDAGraph()(once) is once
    only_dynamic = tvms.IRModule({"add_dyn": lowered["add_dyn"], "dynamic": lowered["dynamic"]})
    assert relax.transform.RewriteCUDAGraph()(only_dynamic) is only_dynamic


def test_a_lowered_module_compiled_for_cuda_is_marked_by_the_build(lowered):
    ex = tvms.compile(tvms.IRModule({"add": lowered["add"], "add_dyn": lowered["add_dyn"],
                                     "static": lowered["static"], "dynamic": lowered["dynamic"]}), target="cuda")
    assert ex.functions["static"].cuda_graph and not ex.functions["dynamic"].cuda_graph
    assert ex.functions["dynamic"].cuda_graph_note.startswith("parameter 'x' has no static shape")
    assert "  CUDA graph: no, parameter 'x' has no static shape" in ex.stats()


def test_use_cuda_graph_off_in_the_pass_context():
    mod = tvms.parse(MLP)
    with tvms.transform.PassContext(config=OFF):
        assert ATTR not in relax.get_pipeline("default", "cuda")(mod)["main"].attrs
        ex = tvms.compile(mod, target="cuda")
    assert not ex.functions["main"].cuda_graph
    assert ex.functions["main"].cuda_graph_note == "relax.backend.use_cuda_graph is off in the PassContext"
    # A module marked before, compiled with graphs off, is not captured either.
    marked = relax.get_pipeline("default", "cuda")(mod)
    with tvms.transform.PassContext(config=OFF):
        assert not tvms.compile(marked, target="cuda").functions["main"].cuda_graph


def test_pass_context():
    PassContext = tvms.transform.PassContext
    assert PassContext is relax.transform.PassContext
    assert PassContext.current().get("relax.backend.use_cuda_graph") is True   # tvms's default
    with PassContext(opt_level=3, config={"relax.backend.use_cuda_graph": 0}) as outer:
        assert PassContext.current() is outer and outer.opt_level == 3
        assert outer.get("relax.backend.use_cuda_graph") is False
        with PassContext(config={"relax.backend.use_cuda_graph": True}):
            assert PassContext.current().get("relax.backend.use_cuda_graph") is True
        assert PassContext.current() is outer
    assert PassContext.current().config == {}
    with pytest.raises(ValueError, match=r"unknown config key 'tir.disable_vectorize'; tvms knows: "
                                         r"relax.backend.use_cuda_graph"):
        PassContext(config={"tir.disable_vectorize": True})
    with pytest.raises(TypeError, match=r"'relax.backend.use_cuda_graph' must be a bool, got 'yes'"):
        PassContext(config={"relax.backend.use_cuda_graph": "yes"})
    assert PassContext.list_configs()["relax.backend.use_cuda_graph"]["type"] == "bool"
