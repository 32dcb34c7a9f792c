"""ToMixedPrecision: a float32 module's matmuls and convolutions computed in half precision with
float32 accumulation. The tests check where the casts go (an MLP printed as a whole, then the
dtypes each op computes in), that bound weights become half constants at compile time, that
the CPU runs the results within half-precision tolerances of NumPy, the signature that
``fp16_input_names`` changes, idempotence, the op table, and resnet18 end to end against
PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.compiler.transform import (BindParams, LegalizeOps, ToMixedPrecision, bound_inference_passes,
                                          get_pipeline)
from tvmscript.compiler.transform._common import walk_relax
from tvmscript.ir.op import all_ops
from tvmscript.ir.op.mixed_precision import ALWAYS, FOLLOW, MIXED_PRECISION_POLICY, NEVER, mixed_precision_policy

MLP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w1: R.Tensor((16, 32), "float32"), b1: R.Tensor((32,), "float32"),
             w2: R.Tensor((32, 8), "float32")):
        with R.dataflow():
            h = R.matmul(x, w1)
            hb = R.add(h, b1)
            r = R.nn.relu(hb)
            gv = R.matmul(r, w2)
            R.output(gv)
        return gv
'''

# TVM's rules: x, w1 and w2 only feed matmuls, so they are cast once, at the top; the
# matmul accumulates in float32 and its result is stored in float16; the bias is a float32
# parameter, so the add (FOLLOW) computes in float32 and the ReLU follows it; the ReLU's result
# only feeds a matmul and is stored in float16 at once. The result keeps its float32.
MLP_EXPECTED = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), dtype="float32"), w1: R.Tensor((16, 32), dtype="float32"), b1: R.Tensor((32,), dtype="float32"), w2: R.Tensor((32, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((4, 16), dtype="float16") = R.astype(x, dtype="float16")
            lv1: R.Tensor((16, 32), dtype="float16") = R.astype(w1, dtype="float16")
            lv2: R.Tensor((32, 8), dtype="float16") = R.astype(w2, dtype="float16")
            lv3: R.Tensor((4, 32), dtype="float32") = R.matmul(lv, lv1, out_dtype="float32")
            h: R.Tensor((4, 32), dtype="float16") = R.astype(lv3, dtype="float16")
            lv4: R.Tensor((4, 32), dtype="float32") = R.astype(h, dtype="float32")
            hb: R.Tensor((4, 32), dtype="float32") = R.add(lv4, b1)
            r: R.Tensor((4, 32), dtype="float32") = R.nn.relu(hb)
            lv5: R.Tensor((4, 32), dtype="float16") = R.astype(r, dtype="float16")
            gv: R.Tensor((4, 8), dtype="float32") = R.matmul(lv5, lv2, out_dtype="float32")
            R.output(gv)
        return gv
'''

CONV = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"),
             b: R.Tensor((1, 4, 1, 1), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            cb = R.add(c, b)
            gv = R.nn.relu(cb)
            R.output(gv)
        return gv
'''

SOFTMAX_LAYER_NORM = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 8, 16), "float32"), w: R.Tensor((16, 16), "float32"),
             gamma: R.Tensor((16,), "float32"), beta: R.Tensor((16,), "float32")):
        with R.dataflow():
            q = R.matmul(x, w)
            s = R.nn.softmax(q, axis=-1)
            n = R.nn.layer_norm(s, gamma, beta, axes=[-1])
            m = R.mean(n, axis=[-1], keepdims=True)
            e = R.exp(n)
            o = R.matmul(e, w)
            gv = R.add(o, m)
            R.output(gv)
        return gv
'''

INTS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 4), "int32"), y: R.Tensor((4, 4), "int32")):
        with R.dataflow():
            gv = R.add(R.matmul(x, y), x)
            R.output(gv)
        return gv
'''


def _bindings(mod, func="main") -> dict:
    """name -> (op name or value kind, result dtype, operand dtypes) of each binding."""
    out = {}
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            kind = v.op.name[len("relax."):] if isinstance(v, relax.Call) and isinstance(v.op, relax.Op) \
                else type(v).__name__
            args = v.args if isinstance(v, relax.Call) else []
            out[b.var.name_hint] = (kind, _dtype(b.var), [_dtype(a) for a in args])
    return out


def _dtype(expr):
    sinfo = relax.struct_info_of(expr)
    return sinfo.dtype if isinstance(sinfo, relax.TensorStructInfo) else None


def _calls(mod, name, func="main"):
    return [v for v in _bindings(mod, func).values() if v[0] == name]


def _run(mod, *args):
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm["main"](*[tvms.nd.array(a) for a in args]).numpy()


def _rel_err(out, ref) -> float:
    return float(np.abs(out.astype("float64") - ref).max() / np.abs(ref).max())


# ----------------------------------------------------------------------------- where the casts go


def test_mlp_prints_with_tvms_casts():
    before = tvms.parse(MLP)
    text = before.script()
    after = ToMixedPrecision()(before)
    assert after.script() == MLP_EXPECTED
    assert before.script() == text  # the input is not changed


def test_out_dtype_float16_still_accumulates_in_float32():
    """TVM would accumulate in float16; here the product keeps a float32 accumulator and is
    rounded to float16 after it, also where it is the function's result."""
    after = ToMixedPrecision(out_dtype="float16")(tvms.parse(MLP))
    bindings = after["main"].body.blocks[0].bindings
    matmuls = [b.value for b in bindings if getattr(getattr(b.value, "op", None), "name", "") == "relax.matmul"]
    assert [m.attrs["out_dtype"] for m in matmuls] == ["float32", "float32"]
    *_, product, rounded, gv = bindings
    assert gv.value.op.name == "relax.astype" and gv.value.args[0] is rounded.var
    assert rounded.value.op.name == "relax.astype" and _dtype(rounded.var) == "float16"
    assert rounded.value.args[0] is product.var and product.value.op.name == "relax.matmul"


def test_tuples_and_blocks_outside_dataflow():
    """A split whose parts only feed matmuls is cast part by part where it is defined; a block
    outside dataflow is left as written, reading a half parameter back in float32."""
    mod = tvms.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((8, 8), "float32"), c: R.Tensor((), "bool")):
        with R.dataflow():
            s = R.split(x, 2, axis=1)
            a = s[0]
            b = s[1]
            gv = R.add(R.matmul(a, w), R.matmul(b, w))
            R.output(gv)
        y = R.nn.relu(gv)
        if c:
            r = R.matmul(y, w)
        else:
            r = y
        return r
''')
    after = ToMixedPrecision(fp16_input_names=["w"])(mod)
    b = _bindings(after)
    assert b["s"] == ("split", None, ["float32"])
    assert b["a"] == ("TupleGetItem", "float16", []) and b["b"] == ("TupleGetItem", "float16", [])
    assert [c[2] for c in _calls(after, "matmul")] == [["float16", "float16"]] * 2
    assert _calls(after, "add") == [("add", "float16", ["float16", "float16"])]
    assert b["y"] == ("nn.relu", "float32", ["float32"])
    text = after.script()
    assert 'R.astype(w, dtype="float32")' in text and 'R.matmul(y, gv1, out_dtype="void")' in text
    assert ToMixedPrecision(fp16_input_names=["w"])(after)["main"] is after["main"]
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 16)).astype("float32"), rng.standard_normal((8, 8)).astype("float16")
    wf = w.astype("float64")
    y = np.maximum(x[:, :8] @ wf + x[:, 8:] @ wf, 0)
    vm = relax.VirtualMachine(tvms.compile(after, "llvm"), tvms.cpu())
    for cond, ref in ((True, y @ wf), (False, y)):
        out = vm["main"](tvms.nd.array(x), tvms.nd.array(w), tvms.nd.array(np.array(cond))).numpy()
        assert _rel_err(out, ref) <= 5e-3


def test_conv2d_bias_relu():
    after = ToMixedPrecision()(tvms.parse(CONV))
    b = _bindings(after)
    assert b["lv2"] == ("nn.conv2d", "float32", ["float16", "float16"])  # fp16 operands, fp32 accumulator
    assert b["c"] == ("astype", "float16", ["float32"])
    assert b["cb"] == ("add", "float32", ["float32", "float32"])  # a float32 parameter: float32
    assert b["gv"] == ("nn.relu", "float32", ["float32"])

    bound = BindParams("main", {"b": np.ones((1, 4, 1, 1), "float32")})(tvms.parse(CONV))
    b = _bindings(ToMixedPrecision()(bound))
    # A constant bias that fits float16 is narrowed: add and ReLU compute in float16, and the
    # result is cast back to the signature's float32.
    assert _calls(ToMixedPrecision()(bound), "add") == [("add", "float16", ["float16", "float16"])]
    assert b["gv"] == ("astype", "float32", ["float16"])
    assert _calls(ToMixedPrecision()(bound), "nn.relu") == [("nn.relu", "float16", ["float16"])]


def test_softmax_layer_norm_and_reductions_stay_float32():
    after = ToMixedPrecision()(tvms.parse(SOFTMAX_LAYER_NORM))
    b = _bindings(after)
    assert [c[2] for c in _calls(after, "matmul")] == [["float16", "float16"]] * 2
    assert b["s"] == ("nn.softmax", "float32", ["float32"])  # NEVER: q read back in float32
    assert b["n"] == ("nn.layer_norm", "float32", ["float32"] * 3)
    assert b["m"] == ("mean", "float32", ["float32"])
    assert b["e"] == ("exp", "float32", ["float32"])  # FOLLOW of a float32 operand
    assert b["gv"] == ("add", "float32", ["float32", "float32"])
    # w feeds both matmuls only: cast once, at the top of the block.
    assert list(b.values())[:2] == [("astype", "float16", ["float32"])] * 2


def test_bound_weight_folds_into_a_float16_constant():
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 32)).astype("float32")
    w2 = rng.standard_normal((32, 8)).astype("float32")
    b1 = rng.standard_normal(32).astype("float32")
    bound = BindParams("main", {"w1": w1, "b1": b1, "w2": w2})(tvms.parse(MLP))
    after = ToMixedPrecision()(bound)
    casts = [v for v in _bindings(after).values() if v[0] == "astype"]
    assert casts and all(len(c[2]) == 1 for c in casts)
    folded = get_pipeline("default")(after)
    consts = []
    walk_relax(folded["main"], lambda n: consts.append(n) if isinstance(n, relax.Constant) else None)
    # w1, b1 and w2 narrowed at compile time: no float32 copy is left to cast at run time.
    assert sorted(str(c.data.dtype) for c in consts) == ["float16"] * 3
    np.testing.assert_array_equal([c for c in consts if c.data.shape == (16, 32)][0].data, w1.astype("float16"))


# ----------------------------------------------------------------------------- numerics on the CPU

# Of max |reference|: a few units in the last place of float16 (11 significant bits) and
# bfloat16 (8), accumulated over a few ops.
CASES = [("float32", "float16", 5e-3), ("float16", "float16", 5e-3), ("float32", "bfloat16", 2e-2),
         ("bfloat16", "bfloat16", 2e-2)]


@pytest.mark.parametrize("out_dtype,dtype,tol", CASES)
def test_mlp_and_conv_numerics(out_dtype, dtype, tol):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype("float32")
    w1, b1 = rng.standard_normal((16, 32)).astype("float32"), rng.standard_normal(32).astype("float32")
    w2 = rng.standard_normal((32, 8)).astype("float32")
    bound = BindParams("main", {"b1": b1})(tvms.parse(MLP))  # the add and ReLU in half too
    mod = ToMixedPrecision(out_dtype, dtype=dtype)(bound)
    assert [c[2] for c in _calls(mod, "matmul")] == [[dtype, dtype]] * 2
    assert _calls(mod, "nn.relu") == [("nn.relu", dtype, [dtype])]
    ref = np.maximum(x.astype("float64") @ w1 + b1, 0) @ w2
    assert _rel_err(_run(mod, x, w1, w2), ref) <= tol

    xc = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    wc, bc = rng.standard_normal((4, 3, 3, 3)).astype("float32"), rng.standard_normal((1, 4, 1, 1)).astype("float32")
    mod = ToMixedPrecision(out_dtype, dtype=dtype)(tvms.parse(CONV))
    assert _calls(mod, "nn.conv2d")[0][2] == [dtype, dtype]
    patches = np.lib.stride_tricks.sliding_window_view(np.pad(xc, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    ref = np.maximum(np.einsum("nchwkl,ockl->nohw", patches, wc.astype("float64")) + bc, 0)
    assert _rel_err(_run(mod, xc, wc, bc), ref) <= tol


@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_softmax_layer_norm_numerics(out_dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 8, 16)).astype("float32")
    w = (rng.standard_normal((16, 16)) / 4).astype("float32")
    gamma, beta = rng.standard_normal(16).astype("float32"), rng.standard_normal(16).astype("float32")
    mod = ToMixedPrecision(out_dtype)(tvms.parse(SOFTMAX_LAYER_NORM))
    q = x.astype("float64") @ w
    s = np.exp(q - q.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    n = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5) * gamma + beta
    ref = np.exp(n) @ w + n.mean(-1, keepdims=True)
    assert _rel_err(_run(mod, x, w, gamma, beta), ref) <= 1e-2


def test_matmul_and_conv_multiply_in_float32():
    """Legalized, an out_dtype=float32 product of float16 operands casts each operand to float32
    before multiplying: float32 products summed in a float32 accumulator."""
    for src, name in ((CONV, "conv2d"), (MLP, "matmul")):
        after = LegalizeOps()(ToMixedPrecision()(tvms.parse(src)))
        prim = [after[gv] for gv in after.functions if gv.name_hint == name][0].script()
        assert "T.float32(0.0)" in prim, name  # the accumulator starts in float32
        products = [line for line in prim.splitlines() if " * " in line]
        assert len(products) == 1 and products[0].count('T.Cast("float32",') == 2, prim


# ----------------------------------------------------------------------------- signature, idempotence


def test_fp16_input_names_changes_the_signature():
    after = ToMixedPrecision(fp16_input_names=["w1", "w2"])(tvms.parse(MLP))
    params = {p.name_hint: p.struct_info.dtype for p in after["main"].params}
    assert params == {"x": "float32", "w1": "float16", "b1": "float32", "w2": "float16"}
    assert "R.astype(w1" not in after.script() and "R.astype(w2" not in after.script()
    assert after["main"].ret_struct_info.dtype == "float32"
    rng = np.random.default_rng(3)
    x, w1 = rng.standard_normal((4, 16)).astype("float32"), rng.standard_normal((16, 32)).astype("float16")
    b1, w2 = rng.standard_normal(32).astype("float32"), rng.standard_normal((32, 8)).astype("float16")
    ref = np.maximum(x.astype("float64") @ w1 + b1, 0) @ w2
    assert _rel_err(_run(after, x, w1, b1, w2), ref) <= 1e-2
    bf = ToMixedPrecision(fp16_input_names=["w1"], dtype="bfloat16")(tvms.parse(MLP))
    assert bf["main"].params[1].struct_info.dtype == "bfloat16"
    assert ToMixedPrecision(fp16_input_names=["w1", "w2"])(after)["main"] is after["main"]  # already half
    with pytest.raises(ValueError, match="'x', which is not a float32 or float16 tensor"):
        ToMixedPrecision(fp16_input_names=["x"])(tvms.parse(INTS))


@pytest.mark.parametrize("src", [MLP, CONV, SOFTMAX_LAYER_NORM])
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_second_run_changes_nothing(src, out_dtype):
    once = ToMixedPrecision(out_dtype)(tvms.parse(src))
    twice = ToMixedPrecision(out_dtype)(once)
    assert twice["main"] is once["main"]


def test_modules_without_float32_ops_are_unchanged():
    half = tvms.parse(MLP.replace('"float32"', '"float16"'))
    assert ToMixedPrecision()(half)["main"] is half["main"]
    ints = tvms.parse(INTS)
    assert ToMixedPrecision()(ints)["main"] is ints["main"]
    unknown = tvms.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3))):
        with R.dataflow():
            gv = R.nn.relu(x)
            R.output(gv)
        return gv
''')
    assert ToMixedPrecision()(unknown)["main"] is unknown["main"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype must be one of"):
        ToMixedPrecision(dtype="float8")
    with pytest.raises(ValueError, match="out_dtype must be"):
        ToMixedPrecision(out_dtype="bfloat16")
    assert repr(ToMixedPrecision()) == "ToMixedPrecision(out_dtype='float32')"
    assert relax.transform.ToMixedPrecision is ToMixedPrecision


# ----------------------------------------------------------------------------- the op table


def test_policy_table_names_registered_ops():
    ops = all_ops()
    assert [name for name in MIXED_PRECISION_POLICY if name not in ops] == []
    for name, policy in MIXED_PRECISION_POLICY.items():
        assert policy in (ALWAYS, FOLLOW)
        if policy == ALWAYS:
            assert "out_dtype" in [a.name for a in ops[name].attrs], name
    assert mixed_precision_policy("relax.nn.softmax") == NEVER
    assert mixed_precision_policy("relax.nn.layer_norm") == NEVER
    assert mixed_precision_policy("relax.sum") == NEVER
    assert mixed_precision_policy("relax.nn.conv2d") == ALWAYS
    assert mixed_precision_policy("relax.permute_dims") == FOLLOW


# ----------------------------------------------------------------------------- resnet18


def test_resnet18_runs_its_convolutions_in_float16():
    torch = pytest.importorskip("torch")
    from support.torch_models import import_torchvision
    from tvmscript.relax.frontend.torch import from_exported_program
    try:
        tv = import_torchvision()
    except ImportError as err:
        pytest.skip(str(err))
    torch.manual_seed(0)
    model = tv.models.resnet18(weights=None, num_classes=10).eval()
    x = torch.randn(1, 3, 32, 32)
    mod = from_exported_program(torch.export.export(model, (x,)), unwrap_unit_return_tuple=True)
    after = ToMixedPrecision()(mod)
    convs = _calls(after, "nn.conv2d")
    assert len(convs) == 20 and all(c[2] == ["float16", "float16"] and c[1] == "float32" for c in convs)
    assert [c[2] for c in _calls(after, "matmul")] == [["float16", "float16"]]  # the classifier
    with torch.no_grad():
        ref = model(x).numpy().astype("float64")
    assert _rel_err(_run(after, x.numpy()), ref) <= 1e-2
    # The batch norms are float32 ops (NEVER, as in TVM); folded first, they leave every
    # elementwise op, pooling included, in float16.
    folded = ToMixedPrecision()(bound_inference_passes("main", "cuda")(mod))
    ops = {(kind, dtype) for kind, dtype, _ in _bindings(folded).values() if kind != "astype"}
    assert ops == {("nn.conv2d", "float32"), ("add", "float16"), ("nn.relu", "float16"), ("nn.max_pool2d", "float16"),
                   ("nn.adaptive_avg_pool2d", "float16"), ("reshape", "float16"), ("permute_dims", "float16"),
                   ("matmul", "float32")}
