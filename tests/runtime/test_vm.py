"""The Relax VM end to end: tvms.compile -> tvms.relax.VirtualMachine -> vm["main"](...),
checked against NumPy. Covers every sample in samples/, dynamic shapes, extern functions,
tuples, R.alloc_tensor, if/else, match_cast, calls between Relax functions, and each error a
bad call can make (naming the parameter)."""

from __future__ import annotations

import glob
import os
import pathlib

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.build import BuildError
from tvmscript.diagnostics import TVMScriptError

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples")

RTOL = 1e-4
ATOL = 1e-3


def sample(name):
    return tvms.load(os.path.join(SAMPLES, name))


def make_vm(mod):
    return tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())


def rand(*shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def mlp_params():
    """x, w0 (128, 784), b0, w1 (10, 128), b1 for the MLC course's MLP."""
    return rand(1, 784, seed=1), rand(128, 784, seed=2), rand(128, seed=3), rand(10, 128, seed=4), rand(10, seed=5)


def mlp_ref(x, w0, b0, w1, b1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


@pytest.fixture()
def numpy_env_funcs():
    """env.linear / env.relu in NumPy, writing into their output tensor (destination-passing)."""
    calls = []

    def linear(x, w, b, out):
        calls.append("linear")
        np.matmul(x.numpy(), w.numpy().T, out=out.numpy())
        out.numpy()[...] += b.numpy()

    def relu(x, out):
        calls.append("relu")
        np.maximum(x.numpy(), 0, out=out.numpy())

    tvms.register_func("env.linear", linear, override=True)
    tvms.register_func("env.relu", relu, override=True)
    return calls


# ----------------------------------------------------------------------------- the samples


def test_e2e_mlp(mlp_params):
    ex = tvms.compile(sample("e2e_mlp.tvms"), target="llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    x, *params = mlp_params
    out = vm["main"](tvms.nd.array(x), *[tvms.nd.array(p) for p in params])
    assert isinstance(out, tvms.runtime.Tensor) and out.shape == (1, 10) and out.dtype == "float32"
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    # NumPy arrays are accepted as they are; a second call reuses the arena and gives a new output.
    out2 = vm["main"](*mlp_params)
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-6)
    assert not np.shares_memory(out.numpy(), out2.numpy())


def test_e2e_mlp_prim_func_alone(mlp_params):
    """ex["linear0"] is the kernel itself, destination-passing, as TVM allows."""
    x, w0, b0, _, _ = mlp_params
    ex = tvms.compile(sample("e2e_mlp.tvms"))
    z = tvms.nd.empty((1, 128), "float32")
    ex["linear0"](tvms.nd.array(x), tvms.nd.array(w0), tvms.nd.array(b0), z)
    np.testing.assert_allclose(z.numpy(), x @ w0.T + b0, rtol=RTOL, atol=ATOL)
    zn = np.empty((1, 128), "float32")
    ex["linear0"](x, w0, b0, zn)
    np.testing.assert_allclose(zn, x @ w0.T + b0, rtol=RTOL, atol=ATOL)
    with pytest.raises(KeyError, match="Relax function"):
        ex["main"]
    with pytest.raises(KeyError, match="no function named 'nope'"):
        ex["nope"]


def test_extern_call(mlp_params, numpy_env_funcs):
    vm = make_vm(sample("extern_call.tvms"))
    out = vm["main"](*mlp_params)
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    assert numpy_env_funcs == ["linear", "relu", "linear"]


def test_mixture(mlp_params, numpy_env_funcs):
    vm = make_vm(sample("mixture.tvms"))
    out = vm["main"](*mlp_params)
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    assert numpy_env_funcs == ["relu", "linear"]


def test_extern_registered_after_the_vm_is_made(mlp_params):
    """Extern functions are looked up at every call: a VM made before registration (or before an
    override) uses the current function."""
    tvms.register_func("env.linear", lambda x, w, b, out: out.numpy().fill(1.0), override=True)
    tvms.register_func("env.relu", lambda x, out: out.numpy().fill(2.0), override=True)
    vm = make_vm(sample("extern_call.tvms"))
    np.testing.assert_array_equal(vm["main"](*mlp_params).numpy(), np.ones((1, 10), "float32"))

    def linear(x, w, b, out):
        out.numpy()[...] = x.numpy() @ w.numpy().T + b.numpy()

    tvms.register_func("env.linear", linear, override=True)
    x, w0, b0, w1, b1 = mlp_params
    np.testing.assert_allclose(vm["main"](*mlp_params).numpy(), np.full((1, 128), 2.0, "float32") @ w1.T + b1,
                               rtol=RTOL)


def test_missing_extern_function(mlp_params):
    mod = tvms.parse(open(os.path.join(SAMPLES, "extern_call.tvms")).read().replace("env.linear", "env.nowhere"))
    vm = make_vm(mod)
    with pytest.raises(ValueError, match=r"extern function 'env.nowhere' is not registered.*register_func"):
        vm["main"](*mlp_params)


@pytest.mark.parametrize("name", ["mlp_legalized.tvms", "mlp_zero.tvms", "mlp_torch_fx_legalized.tvms",
                                  "mlp_torch_fx_zero.tvms"])
def test_legalized_mlp(name):
    """After LegalizeOps / the zero pipeline: the weights come in PyTorch's (out, in) layout and
    the module transposes them itself."""
    mod = sample(name)
    x = rand(1, 784, seed=10)
    by_role = {
        "fc1_weight": rand(256, 784, seed=11), "fc1_bias": rand(256, seed=12),
        "fc2_weight": rand(10, 256, seed=13), "fc2_bias": rand(10, seed=14),
    }
    args = []
    for p in mod["main"].params:
        role = next((r for r in by_role if p.name_hint.endswith(r)), None)
        args.append(by_role[role] if role else x)
    out = make_vm(mod)["main"](*args)
    ref = (np.maximum(x @ by_role["fc1_weight"].T + by_role["fc1_bias"], 0) @ by_role["fc2_weight"].T
           + by_role["fc2_bias"])
    assert out.shape == (1, 10)
    np.testing.assert_allclose(out.numpy(), ref, rtol=RTOL, atol=ATOL)


def test_bb_module():
    vm = make_vm(sample("bb_module.tvms"))
    a, b = rand(128, 128, seed=20), rand(128, 128, seed=21)
    out = vm["main"](a, b)
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b, 0), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name, arg_shapes, ref", [
    ("te_matmul.tvms", [(128, 128), (128, 128)], lambda a, b: a @ b),
    ("te_relu_1d.tvms", [(10,)], lambda x: np.maximum(x, 0)),
    ("te_relu_2d.tvms", None, lambda x: np.maximum(x, 0)),
    ("te_matmul_relu.tvms", [(128, 128), (128, 128)], lambda a, b: np.maximum(a @ b, 0)),
])
def test_prim_func_samples(name, arg_shapes, ref):
    """A lone prim_func compiles to an executable whose only entry is its kernel."""
    func = sample(name)
    ex = tvms.compile(func)
    (kname,) = ex.kernels
    kernel = ex[kname]
    buffers = [p for p in kernel.params if p.kind == "buffer"]
    shapes = [tuple(p.shape) for p in buffers]
    if arg_shapes is not None:
        assert shapes[:-1] == arg_shapes
    ins = [rand(*s, seed=30 + i) for i, s in enumerate(shapes[:-1])]
    out = tvms.nd.empty(shapes[-1], "float32")
    kernel(*ins, out)
    np.testing.assert_allclose(out.numpy(), ref(*ins), rtol=RTOL, atol=ATOL)


def test_prim_func_sample_with_intermediate_as_parameter():
    ex = tvms.compile(sample("te_matmul_relu_4args.tvms"))
    (kname,) = ex.kernels
    a, b = rand(128, 128, seed=40), rand(128, 128, seed=41)
    c, d = np.empty((128, 128), "float32"), np.empty((128, 128), "float32")
    ex[kname](a, b, c, d)
    np.testing.assert_allclose(c, a @ b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=RTOL, atol=ATOL)


def test_two_dataflow_blocks_is_a_clear_build_error():
    """The seed's second call_tir passes (gv0, gv1, b0) to linear1, which expects W (10, 128),
    B (10,) and Z (1, 10): the build rejects it, naming the call and the parameter."""
    with pytest.raises(BuildError) as info:
        tvms.compile(sample("two_dataflow_blocks.tvms"))
    msg = str(info.value)
    assert "linear1" in msg and "'gv1'" in msg and "parameter 'W'" in msg and "(10, 128)" in msg
    assert "binding 'out'" in msg
    assert info.value.span is not None and info.value.span.line == 66
    assert isinstance(info.value, ValueError)


def test_two_dataflow_blocks_fixed(mlp_params):
    """The same function with linear1's arguments fixed: two dataflow blocks with an
    R.alloc_tensor between them."""
    text = open(os.path.join(SAMPLES, "two_dataflow_blocks.tvms")).read()
    text = text.replace("(gv0, gv1, b0), (1, 128)", "(gv0, w1, b1), (1, 10)")
    vm = make_vm(tvms.parse(text))
    out = vm["main"](*mlp_params)
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)


HIGH_LEVEL = ["mlp.tvms", "mlp_printed.tvms", "mlp_script_printed.tvms", "mlp_main_fn.tvms",
              "mlp_torch_fx.tvms", "mlp_torch_fx_main_fn.tvms", "mlp_forward_relax_nn.tvms",
              "mlp_export_tvm.tvms"]


@pytest.mark.parametrize("name", HIGH_LEVEL)
def test_high_level_ops_are_not_lowered_without_a_pipeline(name):
    with pytest.raises(BuildError, match=r"R\.\w+(\.\w+)? is not lowered yet: run LegalizeOps"):
        tvms.compile(sample(name), relax_pipeline=None)


@pytest.mark.parametrize("name", ["mlp.tvms", "mlp_forward_relax_nn.tvms"])
def test_compile_legalizes_high_level_ops_as_tvm_compile_does(name):
    mod = sample(name)
    mlp_params = (rand(1, 784, seed=1), rand(256, 784, seed=2), rand(256, seed=3), rand(10, 256, seed=4),
                  rand(10, seed=5))  # the tutorial's 784-256-10 MLP
    ex = tvms.compile(mod)  # relax_pipeline="default": LegalizeOps + fusion first
    assert tvms.ir.structural_equal(mod, sample(name))  # the module given is left alone
    fname = "forward" if "forward" in mod else "main"
    out = tvms.relax.VirtualMachine(ex, tvms.cpu())[fname](*mlp_params)
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)


def test_mm_relu_sample_runs_destination_passing():
    """The MLC course's mm_relu (a module holding one prim_func) runs through its kernel."""
    ex = tvms.compile(sample("mm_relu.tvms"))
    a, b = rand(128, 128, seed=40), rand(128, 128, seed=41)
    c = np.full((128, 128), np.nan, dtype="float32")
    ex["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=RTOL, atol=ATOL)


def test_every_sample_is_covered():
    """Each file in samples/ is exercised above, or cannot be parsed for a documented reason."""
    covered = {"e2e_mlp.tvms", "extern_call.tvms", "mixture.tvms", "mlp_legalized.tvms", "mlp_zero.tvms",
               "mlp_torch_fx_legalized.tvms", "mlp_torch_fx_zero.tvms", "bb_module.tvms", "te_matmul.tvms",
               "te_relu_1d.tvms", "te_relu_2d.tvms", "te_matmul_relu.tvms", "te_matmul_relu_4args.tvms",
               "two_dataflow_blocks.tvms", "mm_relu.tvms", *HIGH_LEVEL}
    # Their weights are meta[relay.Constant][i], not in the text; the fragment calls functions
    # it does not define.
    unparsable = {"fx_module.tvms", "fx_mlp_module.tvms", "fx_mlp_highlevel.tvms", "two_dataflow_blocks_fn.tvms"}
    names = {os.path.basename(p) for p in glob.glob(os.path.join(SAMPLES, "*.tvms"))}
    assert names == covered | unparsable
    for name in unparsable:
        with pytest.raises(tvms.TVMScriptError):
            sample(name)


# ----------------------------------------------------------------------------- features

DYN = '''
@I.ir_module
class Module:
    @T.prim_func
    def add1(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.add1, (x,), out_sinfo=R.Tensor((n, 4), "float32"))
            R.output(lv)
        return lv
'''


@pytest.fixture(scope="module")
def dyn_vm():
    return make_vm(tvms.parse(DYN))


def test_dynamic_shape_two_sizes(dyn_vm):
    for n in (3, 17):
        x = np.arange(n * 4, dtype="float32").reshape(n, 4)
        out = dyn_vm["main"](x, np.zeros((n, 4), "float32"))
        assert out.shape == (n, 4)
        np.testing.assert_array_equal(out.numpy(), x + 1)


@pytest.mark.parametrize("args, exc, pattern", [
    # argument count
    ([(3, 4)], TypeError, r"main\(\) takes 2 arguments \(x, y\) but 1 was given: missing 'y'"),
    ([(3, 4), (3, 4), (3, 4)], TypeError, r"main\(\) takes 2 arguments \(x, y\) but 3 were given"),
    # rank
    ([(3, 4), (3, 4, 1)], ValueError, r"main\(\) argument 'y': expected a 2-d tensor, got a 3-d tensor"),
    ([(12,), (3, 4)], ValueError, r"main\(\) argument 'x': expected a 2-d tensor"),
    # dtype
    ([(3, 4), ((3, 4), "float64")], TypeError, r"main\(\) argument 'y': expected dtype float32, got float64"),
    ([((3, 4), "int32"), (3, 4)], TypeError, r"main\(\) argument 'x': expected dtype float32, got int32"),
    # static dimension
    ([(3, 5), (3, 5)], ValueError, r"main\(\) argument 'x': dimension 1 is 5, expected 4"),
    # symbolic dimension disagreeing between two arguments
    ([(3, 4), (2, 4)], ValueError,
     r"main\(\) argument 'y': dimension 0 is 2, but n = 3 \(from argument 'x', dimension 0\)"),
])
def test_validation_errors_name_the_parameter(dyn_vm, args, exc, pattern):
    arrays = []
    for a in args:
        shape, dtype = (a, "float32") if isinstance(a[0], int) else a
        arrays.append(np.zeros(shape, dtype))
    with pytest.raises(exc, match=pattern):
        dyn_vm["main"](*arrays)


BOUNDED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("batch", "seq"), dtype="float32"), y: R.Tensor(("seq",), dtype="float32")):
        batch = T.int64()
        seq = T.int64()
        R.func_attr({"tir_var_lower_bound": {"seq": 2}, "tir_var_upper_bound": {"batch": 4, "seq": 15}})
        with R.dataflow():
            lv = R.add(x, y)
            R.output(lv)
        return lv
'''


def test_symbolic_dims_are_checked_against_the_functions_bounds():
    """tir_var_lower_bound / tir_var_upper_bound (a torch.export.Dim's min and max) are checked
    when the function is called: a size outside its range is an error naming the symbol, the
    size given, where it came from and the range, before any kernel runs."""
    mod = tvms.parse(BOUNDED)
    assert tvms.parse(mod.script())["main"].attrs["tir_var_upper_bound"] == {"batch": 4, "seq": 15}
    vm = make_vm(mod)
    for batch, seq in ((1, 2), (4, 15)):
        x, y = rand(batch, seq), rand(seq)
        np.testing.assert_allclose(vm["main"](x, y).numpy(), x + y)
    from tvmscript.runtime.vm_helpers import SizeOutOfRangeError

    with pytest.raises(SizeOutOfRangeError, match=r"main\(\): size 'seq' is 16 \(from argument 'x', dimension 1\), "
                       r"but seq must be between 2 and 15"):
        vm["main"](rand(1, 16), rand(16))
    with pytest.raises(ValueError, match=r"size 'seq' is 1 .*between 2 and 15"):
        vm["main"](rand(1, 1), rand(1))
    with pytest.raises(ValueError, match=r"size 'batch' is 5 \(from argument 'x', dimension 0\), "
                       r"but batch must be at most 4"):
        vm["main"](rand(5, 3), rand(3))


def test_validation_rejects_non_tensors(dyn_vm):
    with pytest.raises(TypeError, match=r"main\(\) argument 'x': expected a tensor .*got list"):
        dyn_vm["main"]([[1.0] * 4], np.zeros((1, 4), "float32"))
    with pytest.raises(TypeError, match=r"argument 'y': expected a tensor .*got int"):
        dyn_vm["main"](np.zeros((1, 4), "float32"), 3)


def test_validation_happens_before_any_kernel(mlp_params):
    calls = []
    tvms.register_func("env.linear", lambda *a: calls.append(1), override=True)
    tvms.register_func("env.relu", lambda *a: calls.append(1), override=True)
    vm = make_vm(sample("extern_call.tvms"))
    x, w0, b0, w1, b1 = mlp_params
    with pytest.raises(ValueError, match=r"argument 'w1': dimension 0 is 11, expected 10"):
        vm["main"](x, w0, b0, np.zeros((11, 128), "float32"), b1)
    with pytest.raises(TypeError, match=r"argument 'b1': expected dtype float32, got float64"):
        vm["main"](x, w0, b0, w1, b1.astype("float64"))
    assert calls == []


def test_static_shape_errors_name_the_parameter(mlp_params):
    vm = make_vm(sample("e2e_mlp.tvms"))
    x, w0, b0, w1, b1 = mlp_params
    with pytest.raises(ValueError, match=r"main\(\) argument 'x': dimension 1 is 783, expected 784"):
        vm["main"](np.zeros((1, 783), "float32"), w0, b0, w1, b1)
    with pytest.raises(ValueError, match=r"main\(\) argument 'b0': expected a 1-d tensor, got a 2-d"):
        vm["main"](x, w0, b0.reshape(1, 128), w1, b1)
    with pytest.raises(TypeError, match=r"takes 5 arguments \(x, w0, b0, w1, b1\) but 4 were given: missing 'b1'"):
        vm["main"](x, w0, b0, w1)


FEATURES = '''
@I.ir_module
class Module:
    @T.prim_func
    def add_k(a: T.handle, b: T.handle, k: T.int64):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.Cast("float32", k)

    @T.prim_func
    def split2(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n,), "float32")
        for i in range(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float32(2)
                C[vi] = A[vi] * T.float32(3)

    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("c"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] + B[vi]

    @R.function
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = R.call_tir(cls.add, (x, R.const([1.0, 2.0, 3.0, 4.0], "float32")), out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function
    def calls_helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = cls.helper(x)
        z = R.call_tir(cls.add, (y, y), out_sinfo=R.Tensor((4,), "float32"))
        return z

    @R.function
    def branch(x: R.Tensor((4,), "float32"), c: R.Prim("bool")):
        cls = Module
        if c:
            y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
            z = (y, x)
        else:
            z = (x, x)
        return z

    @R.function
    def tensor_cond(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        cls = Module
        if c:
            y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
            r = y
        else:
            lv = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
            r = R.call_tir(cls.add, (lv, x), out_sinfo=R.Tensor((4,), "float32"))
        return r

    @R.function
    def tuples(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        cls = Module
        with R.dataflow():
            t = R.call_tir(cls.split2, (x,), out_sinfo=[R.Tensor((n,), "float32"), R.Tensor((n,), "float32")])
            a = t[0]
            b = t[1]
            c = R.call_tir(cls.add_k, (a,), out_sinfo=R.Tensor((n,), "float32"), tir_vars=R.shape([n]))
            out = (c, (b, a))
            R.output(out)
        return out

    @R.function
    def cast(x: R.Tensor(dtype="float32", ndim=1)):
        m = T.int64()
        y = R.match_cast(x, R.Tensor((m,), "float32"))
        cls = Module
        z = R.call_tir(cls.add_k, (y,), out_sinfo=R.Tensor((m,), "float32"), tir_vars=R.shape([5]))
        return z

    @R.function
    def unknown(x: R.Tensor(dtype="float32", ndim=1)):
        cls = Module
        z = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        return z

    @R.function
    def take_tuple(t: R.Tuple(R.Tensor(("n",), "float32"), R.Tensor(("n",), "float32")), s: R.Shape(["n"])):
        return t[1]

    @R.function(pure=False)
    def packed(x: R.Tensor((4,), "float32")):
        buf = R.alloc_tensor((4,), dtype="float32")
        _ = R.call_packed("test_vm.fill", buf, R.prim_value(7), sinfo_args=R.Object)
        y: R.Tensor((4,), "float32") = R.call_packed("test_vm.double", buf, sinfo_args=R.Tensor((4,), "float32"))
        s = R.shape([2, 3])
        return (y, s, buf)
'''


@pytest.fixture(scope="module")
def feat_vm():
    return make_vm(tvms.parse(FEATURES))


X4 = np.array([0.0, 1.0, 2.0, 3.0], "float32")


def test_constants_and_calls_between_relax_functions(feat_vm):
    np.testing.assert_array_equal(feat_vm["helper"](X4).numpy(), X4 + [1, 2, 3, 4])
    np.testing.assert_array_equal(feat_vm["calls_helper"](X4).numpy(), 2 * (X4 + [1, 2, 3, 4]))


def test_if_else_on_a_prim_value(feat_vm):
    a, b = feat_vm["branch"](X4, True)
    np.testing.assert_array_equal(a.numpy(), 2 * X4)
    np.testing.assert_array_equal(b.numpy(), X4)
    a, b = feat_vm["branch"](X4, False)
    np.testing.assert_array_equal(a.numpy(), X4)
    with pytest.raises(TypeError, match=r"branch\(\) argument 'c': expected a bool value"):
        feat_vm["branch"](X4, 1.5)


def test_if_else_on_a_tensor(feat_vm):
    np.testing.assert_array_equal(feat_vm["tensor_cond"](X4, np.array(True)).numpy(), 2 * X4)
    np.testing.assert_array_equal(feat_vm["tensor_cond"](X4, tvms.nd.array(np.array(False))).numpy(), 3 * X4)


def test_tuples_multi_output_call_tir_and_tir_vars(feat_vm):
    x = np.arange(5, dtype="float32")
    c, (b, a) = feat_vm["tuples"](x)
    np.testing.assert_array_equal(a.numpy(), 2 * x)
    np.testing.assert_array_equal(b.numpy(), 3 * x)
    np.testing.assert_array_equal(c.numpy(), 2 * x + 5)  # tir_vars=R.shape([n]) passes k = n = 5


def test_tuple_and_shape_parameters(feat_vm):
    t = (np.zeros(3, "float32"), np.ones(3, "float32"))
    np.testing.assert_array_equal(feat_vm["take_tuple"](t, (3,)).numpy(), np.ones(3))
    with pytest.raises(ValueError, match=r"take_tuple\(\) argument 's': shape value 0 is 4, but n = 3"):
        feat_vm["take_tuple"](t, (4,))
    with pytest.raises(ValueError, match=r"argument 't'\[1\]: dimension 0 is 2, but n = 3"):
        feat_vm["take_tuple"]((np.zeros(3, "float32"), np.ones(2, "float32")), (3,))
    with pytest.raises(TypeError, match=r"argument 't': expected a tuple of 2"):
        feat_vm["take_tuple"](np.zeros(3, "float32"), (3,))


def test_match_cast_binds_a_new_symbol(feat_vm):
    np.testing.assert_array_equal(feat_vm["cast"](np.arange(3, dtype="float32")).numpy(), np.arange(3) + 5)


def test_runtime_check_when_the_build_cannot_prove_the_shape(feat_vm):
    np.testing.assert_array_equal(feat_vm["unknown"](X4).numpy(), 2 * X4)
    with pytest.raises(ValueError, match=r"R.call_tir to 'add': parameter 'A' expects dimension 0 to be 4, got 3 "
                                         r".*\(in function 'unknown', binding 'z'\)") as info:
        feat_vm["unknown"](np.arange(3, dtype="float32"))
    assert isinstance(info.value, TVMScriptError)  # placed at the call: a diagnostic in tvms run
    line = FEATURES.splitlines()[info.value.span.line - 1]
    assert line[info.value.span.col - 1:].startswith("R.call_tir(cls.add, (x, x)")


def test_alloc_tensor_and_call_packed(feat_vm):
    seen = []

    @tvms.register_func("test_vm.fill", override=True)
    def fill(t, v):
        seen.append(t)
        t.numpy()[:] = v

    @tvms.register_func("test_vm.double", override=True)
    def double(t):
        return t.numpy() * 2  # a NumPy result is wrapped and checked against sinfo_args

    y, s, buf = feat_vm["packed"](X4)
    np.testing.assert_array_equal(buf.numpy(), np.full(4, 7.0))
    np.testing.assert_array_equal(y.numpy(), np.full(4, 14.0))
    assert s == (2, 3)
    assert seen[0] is buf  # the tensor R.alloc_tensor made is the one the VM returns

    tvms.register_func("test_vm.double", lambda t: np.zeros(5, "float32"), override=True)
    with pytest.raises(ValueError, match=r"the result of R.call_packed\('test_vm.double'\).*dimension 0 is 5"):
        feat_vm["packed"](X4)


def test_extern_receives_tensors_sharing_memory_with_the_vm(mlp_params):
    """Extern functions get tvms tensors; .numpy() and DLPack views alias the VM's buffers."""
    captured = {}

    def linear(x, w, b, out):
        assert all(isinstance(t, tvms.runtime.Tensor) for t in (x, w, b, out))
        captured.setdefault("outs", []).append(out)
        view = out.numpy()
        np.matmul(x.numpy(), w.numpy().T, out=view)
        np.from_dlpack(out)[...] += b.numpy()  # a DLPack view writes the same memory

    def relu(x, out):
        captured["relu_in"] = x
        np.maximum(x.numpy(), 0, out=out.numpy())

    tvms.register_func("env.linear", linear, override=True)
    tvms.register_func("env.relu", relu, override=True)
    vm = make_vm(sample("extern_call.tvms"))
    x = tvms.nd.array(mlp_params[0])
    out = vm["main"](x, *mlp_params[1:])
    np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    assert captured["outs"][-1] is out
    assert np.shares_memory(captured["outs"][-1].numpy(), out.numpy())
    assert captured["relu_in"] is captured["outs"][0]  # lv0 is passed on as the same tensor


def test_numpy_inputs_are_not_copied():
    """A C-contiguous NumPy input is wrapped, not copied: an extern sees the caller's memory."""
    seen = []
    tvms.register_func("env.linear", lambda x, w, b, out: seen.append(x.numpy()), override=True)
    tvms.register_func("env.relu", lambda x, out: None, override=True)
    vm = make_vm(sample("extern_call.tvms"))
    x = np.zeros((1, 784), "float32")
    vm["main"](x, np.zeros((128, 784), "float32"), np.zeros(128, "float32"), np.zeros((10, 128), "float32"),
               np.zeros(10, "float32"))
    assert np.shares_memory(seen[0], x)


def test_tvm_vm_interface(mlp_params):
    vm = make_vm(sample("e2e_mlp.tvms"))
    ref = mlp_ref(*mlp_params)
    vm.set_input("main", *mlp_params)
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_outputs("main").numpy(), ref, rtol=RTOL, atol=ATOL)
    vm.save_function("main", "main_saved", *mlp_params)
    np.testing.assert_allclose(vm["main_saved"]().numpy(), ref, rtol=RTOL, atol=ATOL)
    result = vm.time_evaluator("main", tvms.cpu(), number=3, repeat=2)(*mlp_params)
    assert len(result.results) == 2 and result.mean > 0 and "mean (ms)" in repr(result)
    assert "main" in vm and "linear0" in vm
    with pytest.raises(KeyError, match="no function named 'nope'"):
        vm["nope"]


def test_relax_build_and_vm_namespaces(mlp_params):
    mod = sample("e2e_mlp.tvms")
    for build in (tvms.relax.build, tvms.relax.vm.build, tvms.compile):
        ex = build(mod, target="llvm")
        out = tvms.relax.vm.VirtualMachine(ex, tvms.cpu())["main"](*mlp_params)
        np.testing.assert_allclose(out.numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    assert "def " in ex.as_python() and "linear0" in ex.stats()


def test_build_errors():
    with pytest.raises(NotImplementedError, match="target 'vulkan' is not supported yet"):
        tvms.compile(sample("e2e_mlp.tvms"), target="vulkan")
    with pytest.raises(ValueError, match="unknown target"):
        tvms.compile(sample("e2e_mlp.tvms"), target="tpu")
    with pytest.raises(TypeError, match="expects an IRModule"):
        tvms.compile("not a module")


def test_call_tir_argument_count_mismatch_is_a_build_error():
    text = DYN.replace("(cls.add1, (x,)", "(cls.add1, (x, y)")
    with pytest.raises(BuildError, match=r"passes 2 argument\(s\) and 1 output\(s\), but the prim_func has 2 buffer"):
        tvms.compile(tvms.parse(text))


def test_call_tir_dtype_mismatch_is_a_build_error():
    text = DYN.replace('out_sinfo=R.Tensor((n, 4), "float32")', 'out_sinfo=R.Tensor((n, 4), "float16")')
    text = text.replace(' -> R.Tensor(("n", 4), "float32"):', ":")
    with pytest.raises(BuildError, match=r"output 0 is R.Tensor\(\(n, 4\), dtype=\"float16\"\), but parameter 'b'"):
        tvms.compile(tvms.parse(text))


def test_recursion_gets_its_own_arena():
    """A function calling itself (through an if) must not share its arena frame with the outer
    call: each active call takes its own frame from the pool."""
    text = '''
@I.ir_module
class Module:
    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("c"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] + B[vi]

    @R.function
    def f(x: R.Tensor((4,), "float32"), k: R.Prim("int64")) -> R.Tensor((4,), "float32"):
        cls = Module
        u = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        if k:
            x2 = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((4,), "float32"))
            r = cls.f(x2, R.prim_value(0))
            out = R.call_tir(cls.add, (u, r), out_sinfo=R.Tensor((4,), "float32"))
        else:
            out = R.call_tir(cls.add, (u, x), out_sinfo=R.Tensor((4,), "float32"))
        return out
'''
    ex = tvms.compile(tvms.parse(text))
    assert len(ex.functions["f"].arena) == 1  # u lives in the arena
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    x = np.ones(4, "float32")
    # inner call f(2x, 0): u' = 4x, out' = 4x + 2x = 6x; outer: u = 2x, out = u + 6x = 8x
    # (10x if the inner call had written its u' over the outer u)
    np.testing.assert_array_equal(vm["f"](x, 1).numpy(), 8 * x)
    np.testing.assert_array_equal(vm["f"](x, 0).numpy(), 3 * x)


def test_threads_each_get_their_own_arena():
    """Kernels release the GIL, so calls from several threads overlap; each active call takes
    its own arena frame, so results never mix."""
    from concurrent.futures import ThreadPoolExecutor

    mod = sample("mlp_legalized.tvms")
    vm = make_vm(mod)
    assert tvms.compile(mod).functions["main"].arena  # the intermediates live in the arena
    inputs = []
    for k in range(8):
        x = rand(1, 784, seed=100 + k)
        params = (rand(256, 784, seed=1), rand(256, seed=2), rand(10, 256, seed=3), rand(10, seed=4))
        inputs.append((x, *params))
    refs = [np.maximum(x @ w0.T + b0, 0) @ w1.T + b1 for x, w0, b0, w1, b1 in inputs]

    def work(k):
        return [vm["main"](*inputs[k % 8]).numpy() for _ in range(20)]

    with ThreadPoolExecutor(4) as pool:
        for k, outs in enumerate(pool.map(work, range(8))):
            for out in outs:
                np.testing.assert_allclose(out, refs[k % 8], rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- overhead


def _chain_module(n: int, extern: bool) -> str:
    """The benchmark's chain of n 1-element kernels (benchmarks/vm_overhead.py times it), with
    the test's extern name."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "vm_overhead.py"
    spec = importlib.util.spec_from_file_location("vm_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.chain_module(n, extern).replace('"bench.noop"', '"test_vm.noop"')


def test_chain_of_100_kernels():
    """100 call_tir of 1-element kernels run in order (benchmarks/vm_overhead.py times them)."""
    vm = make_vm(tvms.parse(_chain_module(100, extern=False)))
    x = tvms.nd.array(np.zeros(1, "float32"))
    np.testing.assert_array_equal(vm["main"](x).numpy(), [100.0])
    np.testing.assert_array_equal(vm["main"](x).numpy(), [100.0])  # the arena is reused


def test_chain_of_100_extern_calls():
    calls = []
    tvms.register_func("test_vm.noop", lambda a, out: calls.append(1), override=True)
    vm = make_vm(tvms.parse(_chain_module(100, extern=True)))
    x = tvms.nd.array(np.zeros(1, "float32"))
    vm["main"](x)
    assert len(calls) == 100


def test_rank0_constant_result_keeps_its_rank():
    """A scalar constant returned by main is a 0-d tensor (NumPy's ascontiguousarray would make
    it 1-d)."""
    mod = tvms.parse('''
@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((), dtype="int64"):
        return R.const(6, "int64")
''')
    out = tvms.relax.VirtualMachine(tvms.compile(mod), tvms.cpu())["main"]()
    assert out.numpy().shape == () and int(out.numpy()) == 6


def test_profile_times_each_kernel_of_a_call(mlp_params):
    """vm.profile (TVM's name): each kernel's calls and time per call of the function, the
    heaviest first, the VM's own share, and the outputs of the profiled calls are unaffected."""
    ex = tvms.compile(sample("e2e_mlp.tvms"), target="llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    report = vm.profile("main", *mlp_params, repeat=3)
    names = [r[0] for r in report.rows]
    assert sorted(names) == sorted(ex.kernels)
    assert all(calls == 1 and seconds > 0 for _, calls, seconds in report.rows)
    assert [r[2] for r in report.rows] == sorted((r[2] for r in report.rows), reverse=True)
    assert report.total >= sum(r[2] for r in report.rows) and report.vm_time >= 0
    text = str(report)
    assert "profile of 'main' on cpu:0" in text and "Calls" in text and names[0] in text
    np.testing.assert_allclose(vm["main"](*mlp_params).numpy(), mlp_ref(*mlp_params), rtol=RTOL, atol=ATOL)
    with pytest.raises(KeyError, match="no function named 'nope'"):
        vm.profile("nope")
