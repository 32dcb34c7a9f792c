"""LegalizeOps and BindParams (compiler/transform): seed 000's and 001's LegalizeOps outputs
from their input modules, the zero pipeline from the input module, idempotence, symbolic
shapes, what the transformed modules compute, and BindParams' checks."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import ir, relax, tir
from tvmscript.compiler.transform import BindParams, LegalizeOps, get_pipeline

GOLDEN = pathlib.Path(__file__).parents[1] / "golden"
SAMPLES = pathlib.Path(__file__).parents[2] / "samples"
IR_HEADER = "# from tvm.script import ir as I\n"


def torch_module(seed):
    return tvms.load(GOLDEN / seed / "torch_module.tvms")


def mlp_weights(rng, prefix=""):
    return {
        f"{prefix}fc1_weight": rng.standard_normal((256, 784)).astype("float32"),
        f"{prefix}fc1_bias": rng.standard_normal(256).astype("float32"),
        f"{prefix}fc2_weight": rng.standard_normal((10, 256)).astype("float32"),
        f"{prefix}fc2_bias": rng.standard_normal(10).astype("float32"),
    }


def mlp_reference(x, w, prefix=""):
    h = np.maximum(x @ w[f"{prefix}fc1_weight"].T + w[f"{prefix}fc1_bias"], 0)
    return h @ w[f"{prefix}fc2_weight"].T + w[f"{prefix}fc2_bias"]


def run_main(mod, *args):
    vm = relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    return vm["main"](*args).numpy()


# ----------------------------------------------------------------------------- the seeds


def test_seed000_legalize_ops_byte_for_byte():
    """Seed 000 shows LegalizeOps of its PyTorch-exported MLP. The seed's copy of the output
    lacks the first header line (`ir as I`) that TVM prints (its other outputs have it)."""
    mod = torch_module("seed000")
    before = mod.script()
    out = LegalizeOps()(mod)
    assert out.script() == IR_HEADER + (GOLDEN / "seed000" / "legalized.tvms").read_text()
    assert str(out.get_global_vars()) == (GOLDEN / "seed000" / "global_vars.txt").read_text().splitlines()[1]
    assert mod.script() == before  # the input is not changed


def test_seed001_legalize_ops():
    """Seed 001 was printed by an older TVM, which wrote the noalias attribute as T.bool(True)."""
    out = LegalizeOps()(torch_module("seed001"))
    golden = (GOLDEN / "seed001" / "legalized.tvms").read_text()
    assert out.script() == golden.replace("T.bool(True)", "True")
    ir.assert_structural_equal(out["main"], tvms.parse(golden)["main"])


@pytest.mark.parametrize("seed", ["seed000", "seed001"])
def test_zero_pipeline_from_the_input_module(seed):
    out = get_pipeline("zero")(torch_module(seed))
    golden = (GOLDEN / seed / "zero_pipeline.tvms").read_text()
    assert out.script() == golden.replace("T.bool(True)", "True")


@pytest.mark.parametrize("seed", ["seed000", "seed001"])
def test_legalize_ops_is_idempotent(seed):
    once = LegalizeOps()(torch_module(seed))
    twice = LegalizeOps()(once)
    assert twice.script() == once.script()
    # The zero pipeline runs LegalizeOps again (seed 000 applies it twice): nothing changes.
    assert LegalizeOps()(get_pipeline("zero")(once)).script() == get_pipeline("zero")(once).script()


def test_transformed_modules_compute_the_same():
    rng = np.random.default_rng(0)
    w = mlp_weights(rng, "p_")
    x = rng.standard_normal((1, 784)).astype("float32")
    ref = mlp_reference(x, w, "p_")
    args = [x] + [w[k] for k in ("p_fc1_weight", "p_fc1_bias", "p_fc2_weight", "p_fc2_bias")]
    legal = LegalizeOps()(torch_module("seed000"))
    zero = get_pipeline("zero")(torch_module("seed000"))
    np.testing.assert_allclose(run_main(legal, *args), ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(run_main(zero, *args), run_main(legal, *args), rtol=1e-5, atol=1e-5)


def test_high_level_sample_runs():
    mod = tvms.load(SAMPLES / "mlp.tvms")
    rng = np.random.default_rng(1)
    w = mlp_weights(rng)
    x = rng.standard_normal((1, 784)).astype("float32")
    got = run_main(get_pipeline("zero")(mod), x, *w.values())
    np.testing.assert_allclose(got, mlp_reference(x, w), rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------------------------- LegalizeOps details

DYNAMIC = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((3,), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, b)
            r = R.nn.relu(z)
            R.output(r)
        return r
'''


def test_symbolic_shapes_legalize_to_match_buffers_and_run_at_two_sizes():
    out = LegalizeOps()(tvms.parse(DYNAMIC))
    text = out.script()
    assert "def matmul(x_handle: T.handle, w: T.Buffer((T.int64(4), T.int64(3)), \"float32\"), matmul_handle: T.handle):" in text
    assert "x = T.match_buffer(x_handle, (n, T.int64(4)))" in text
    assert 'y = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((n, 3), dtype="float32"))' in text
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3)).astype("float32")
    b = rng.standard_normal(3).astype("float32")
    vm = relax.VirtualMachine(tvms.compile(get_pipeline("zero")(out)), tvms.cpu())
    for n in (1, 9):
        x = rng.standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(vm["main"](x, w, b).numpy(), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_equal_prim_funcs_are_shared_and_names_deduplicated():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 3), "float32"), c: R.Tensor((3, 2), "float32")):
        with R.dataflow():
            x = R.add(a, b)
            y = R.add(x, a)
            z = R.add(c, c)
            R.output(y, z)
        return (y, z)
'''
    out = LegalizeOps()(tvms.parse(src))
    assert sorted(gv.name_hint for gv in out.get_global_vars()) == ["add", "add1", "main"]
    text = out.script()
    assert "x = R.call_tir(cls.add, (a, b)" in text and "y = R.call_tir(cls.add, (x, a)" in text
    assert "z = R.call_tir(cls.add1, (c, c)" in text


def test_nested_op_calls_are_emitted_as_bindings():
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            call = relax.op.nn.relu(relax.op.add(x, x))  # a call inside a call, not normalized
            gv = bb.emit_output(call)
        bb.emit_func_output(gv)
    out = LegalizeOps()(bb.get())
    (block,) = out["main"].body.blocks
    assert [b.value.args[0].name_hint for b in block.bindings] == ["add", "relu"]
    a = np.arange(6, dtype="float32").reshape(2, 3) - 2
    np.testing.assert_array_equal(run_main(out, a), np.maximum(a + a, 0))


def test_customize_legalize_map():
    def my_relu(bb, call):
        from tvmscript.compiler import te

        return bb.call_te(lambda t: te.compute(t.shape, lambda i, j: te.max(t[i, j], tir.const(1.0, "float32")),
                                               name="clip1"), call.args[0], primfunc_name_hint="my_relu")

    mod = tvms.parse(DYNAMIC.replace('("n", 4)', "(2, 4)").replace("        n = T.int64()\n", ""))
    out = LegalizeOps({"relax.nn.relu": my_relu})(mod)
    assert "my_relu" in out and 'T.block("clip1")' in out.script()


def test_calls_without_known_shapes_are_left_alone():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor(dtype="float32", ndim=2)):
        b = R.nn.relu(a)
        return b
'''
    mod = tvms.parse(src)
    out = LegalizeOps()(mod)
    assert "R.nn.relu(a)" in out.script() and len(out.functions) == 1


# ----------------------------------------------------------------------------- BindParams


def test_bind_params_makes_constants_and_folds_the_transposes():
    mod = tvms.load(SAMPLES / "mlp.tvms")
    rng = np.random.default_rng(3)
    w = mlp_weights(rng)
    bound = BindParams("main", w)(mod)
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    assert BindParams("main", w)(bound).script() == bound.script()  # safe to run twice
    zero = get_pipeline("zero")(bound)
    assert sorted(gv.name_hint for gv in zero.get_global_vars()) == ["fused_matmul1_add1", "fused_matmul_add_relu", "main"]
    assert "transpose" not in zero.script()  # folded at compile time
    x = rng.standard_normal((1, 784)).astype("float32")
    np.testing.assert_allclose(run_main(zero, x), mlp_reference(x, w), rtol=1e-4, atol=1e-3)
    # The bound weights survive printing: large ones in the metadata section.
    again = tvms.parse(zero.script(show_meta=True))
    np.testing.assert_allclose(run_main(again, x), mlp_reference(x, w), rtol=1e-4, atol=1e-3)


def test_bind_params_substitutes_symbolic_dims():
    mod = tvms.parse(DYNAMIC)
    x = np.ones((5, 4), "float32")
    bound = BindParams("main", {"x": x})(mod)
    main = bound["main"]
    assert [p.name_hint for p in main.params] == ["w", "b"]
    assert "R.Tensor((5, 3)" in bound.script()
    w = np.full((4, 3), 0.5, "float32")
    b = np.zeros(3, "float32")
    np.testing.assert_allclose(run_main(get_pipeline("zero")(bound), w, b), np.full((5, 3), 2.0, "float32"))


def test_bind_params_checks_shapes_and_dtypes():
    mod = tvms.load(SAMPLES / "mlp.tvms")
    with pytest.raises(ValueError, match=r"parameter 'fc1_bias' has shape \(256\), the array \(255,\)"):
        BindParams("main", {"fc1_bias": np.zeros(255, "float32")})(mod)
    with pytest.raises(ValueError, match="parameter 'fc1_bias' is float32, the array is float64"):
        BindParams("main", {"fc1_bias": np.zeros(256)})(mod)
    with pytest.raises(ValueError, match="no function named 'nope'"):
        BindParams("nope", {})(mod)
    with pytest.raises(ValueError, match=r"'n' would be both 2 and 3"):
        src = DYNAMIC.replace('w: R.Tensor((4, 3), "float32")', 'w: R.Tensor(("n", 3), "float32")')
        BindParams("main", {"x": np.ones((2, 4), "float32"), "w": np.ones((3, 3), "float32")})(tvms.parse(src))


HIGH_LEVEL_MLPS = ["mlp.tvms", "mlp_export_tvm.tvms", "mlp_forward_relax_nn.tvms", "mlp_main_fn.tvms",
                   "mlp_printed.tvms", "mlp_script_printed.tvms", "mlp_torch_fx.tvms", "mlp_torch_fx_main_fn.tvms"]


@pytest.mark.parametrize("name", HIGH_LEVEL_MLPS)
def test_every_high_level_sample_compiles_and_matches_numpy(name):
    """The seeds' MLPs as written with R.matmul/R.add/R.nn.relu: parameters are matched by
    name (their order and the input's name differ between the seeds)."""
    node = tvms.load(SAMPLES / name)
    mod = node if isinstance(node, ir.IRModule) else ir.IRModule({"main": node})
    (fname,) = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
    mod = get_pipeline("zero")(mod)
    assert "R.matmul" not in mod.script()
    rng = np.random.default_rng(4)
    w = mlp_weights(rng)
    x = rng.standard_normal((1, 784)).astype("float32")
    names = [p.name_hint.removeprefix("p_") for p in mod[fname].params]
    args = [x] + [w[n] for n in names[1:]]
    if "fc2_bias" not in names:  # seed 000's export variant has none
        w["fc2_bias"] = np.zeros(10, "float32")
    vm = relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    np.testing.assert_allclose(vm[fname](*args).numpy(), mlp_reference(x, w), rtol=1e-4, atol=1e-3)


def test_legalize_a_module_that_already_has_prim_funcs():
    """High-level ops beside hand-written PrimFuncs: an equal PrimFunc already in the module is
    reused rather than added again."""
    src = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def relu(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), compute: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"tir.noalias": True})
        for i0, i1 in T.grid(T.int64(2), T.int64(3)):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                compute[v_i0, v_i1] = T.max(x[v_i0, v_i1], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        cls = Module
        with R.dataflow():
            a = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((2, 3), "float32"))
            b = R.nn.relu(a)
            c = R.add(b, x)
            R.output(c)
        return c
'''
    out = LegalizeOps()(tvms.parse(src))
    assert sorted(gv.name_hint for gv in out.get_global_vars()) == ["add", "main", "relu"]
    x = np.arange(6, dtype="float32").reshape(2, 3) - 3
    np.testing.assert_array_equal(run_main(out, x), np.maximum(x, 0) + x)
