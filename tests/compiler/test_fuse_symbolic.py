"""FuseOps + FuseTIR with symbolic shapes (a sequence length ``n``).

Why: with ``n`` symbolic the zero pipeline used to fuse nothing, so a transformer block ran as
twice as many kernels as its static-shape version. These tests pin that symbolic groups fuse
exactly as static ones do, that the fused PrimFunc binds ``n`` through ``T.handle`` parameters
and ``T.match_buffer`` (or a trailing ``T.int64`` parameter passed by ``tir_vars`` when no input
defines it), that the result prints, parses back, compiles and computes what NumPy computes for
several values of ``n``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform._common import same_dim
from tvmscript.compiler.transform._common import same_shape as _same_shape
from tvmscript.compiler.transform.fuse_ops import FuseOps
from tvmscript.compiler.transform.fuse_tir import FuseTIR
from tvmscript.ir import structural_equal
from tvmscript.relax import op

MLP_SYMBOLIC = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 256), dtype="float32"), w: R.Tensor((256, 128), dtype="float32"), b: R.Tensor((128,), dtype="float32")) -> R.Tensor(("n", 128), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
'''

# `head` writes an output of length m that no input shape defines: m comes in by tir_vars.
OUTPUT_ONLY_DIM = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def head(var_x: T.handle, var_out: T.handle, m: T.int64):
        n = T.int64()
        x = T.match_buffer(var_x, (n,))
        out = T.match_buffer(var_out, (m,))
        for i in range(m):
            with T.block("head"):
                vi = T.axis.spatial(m, i)
                T.reads(x[vi])
                T.writes(out[vi])
                out[vi] = x[vi] * T.float32(2.0)

    @R.function
    def main(x: R.Tensor(("n",), dtype="float32"), s: R.Shape(["m"])) -> R.Tensor(("m",), dtype="float32"):
        n = T.int64()
        m = T.int64()
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.head, (x,), out_sinfo=R.Tensor((m,), dtype="float32"), tir_vars=R.shape([m]))
            lv1 = R.add(lv, R.const(1.0, "float32"))
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
'''

# The group's input is (n * 2,): n appears as a plain dim only in the output.
RESHAPE_OUTPUT_ONLY_DIM = '''# from tvm.script import ir as I
# from tvm.script import tir as T
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), dtype="float32"), y: R.Tensor(("n * 2",), dtype="float32")) -> R.Tensor(("n", 2), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            lv = R.reshape(y, R.shape([n, 2]))
            lv1 = R.add(lv, R.const(1.0, "float32"))
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
'''

# n comes only from the shape broadcast_to is given: the fused group's output defines it.
BROADCAST_OUTPUT_ONLY_DIM = RESHAPE_OUTPUT_ONLY_DIM.replace(
    'y: R.Tensor(("n * 2",), dtype="float32")', 'y: R.Tensor((1, 2), dtype="float32")').replace(
    "R.reshape(y, R.shape([n, 2]))", "R.broadcast_to(y, R.shape([n, 2]))")


def zero(mod):
    return tvms.relax.get_pipeline("zero")(mod)


def prim_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def call_tir_count(mod) -> int:
    return mod["main"].script().count("R.call_tir(")


def run_main(mod, *args):
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    return vm["main"](*args).numpy()


def assert_round_trip(mod) -> None:
    """The printed module parses back to the same text and, function by function, the same IR."""
    text = mod.script()
    back = tvms.parse(text)
    assert back.script() == text
    for gv, func in mod.functions.items():
        assert structural_equal(back[gv.name_hint], func), gv.name_hint


# ----------------------------------------------------------------------------- matmul + bias + relu


def test_symbolic_matmul_bias_relu_is_one_primfunc_with_matched_buffers():
    out = zero(tvms.parse(MLP_SYMBOLIC))
    prims = prim_funcs(out)
    assert list(prims) == ["fused_matmul_add_relu"]
    assert call_tir_count(out) == 1
    fused = prims["fused_matmul_add_relu"]
    # n reaches the fused function through handles matched to symbolic buffers
    x_param, out_param = fused.params[0], fused.params[-1]
    assert (x_param.name, out_param.name) == ("x", "compute_intermediate")  # printed x_handle...
    n = fused.buffer_map[x_param].shape[0]
    assert isinstance(n, tir.Var) and fused.buffer_map[out_param].shape[0] is n
    text = out.script()
    assert "def fused_matmul_add_relu(x_handle: T.handle, w: T.Buffer((T.int64(256), T.int64(128)), \"float32\")" in text
    assert "x = T.match_buffer(x_handle, (n, T.int64(256)))" in text
    assert "compute_intermediate = T.match_buffer(compute_intermediate_handle, (n, T.int64(128)))" in text
    assert "matmul_intermediate = T.alloc_buffer((n, T.int64(128)))" in text
    assert_round_trip(out)


@pytest.mark.parametrize("n", [3, 17])
def test_symbolic_matmul_bias_relu_runs_like_numpy(n):
    out = zero(tvms.parse(MLP_SYMBOLIC))
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 256)).astype("float32")
    w = rng.standard_normal((256, 128)).astype("float32")
    b = rng.standard_normal(128).astype("float32")
    got = run_main(tvms.parse(out.script()), x, w, b)  # the printed form, parsed back, runs
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)


def test_same_shape_compares_symbolic_dims_structurally():
    n, m = tir.Var("int64", "n"), tir.Var("int64", "m")

    def t(*dims):
        return relax.TensorStructInfo([tir.IntImm("int64", d) if isinstance(d, int) else d for d in dims], "float32")

    two = tir.IntImm("int64", 2)
    assert _same_shape(t(n, 4), t(n, 4))
    assert _same_shape(t(3, 4), t(3, 4))
    assert not _same_shape(t(n, 4), t(m, 4))
    assert not _same_shape(t(n, 4), t(n, 5))
    assert not _same_shape(t(n, 4), t(n, 4, 1))
    assert same_dim(tir.Mul("int64", n, two), tir.Mul("int64", two, n))
    assert not same_dim(tir.Mul("int64", n, two), n)


# ----------------------------------------------------------------------------- GPT block


def gpt_block(n, d=64, heads=4, mlp=256, seed=0):
    """(module, weights): a GPT-style block on x (1, n, d) with a causal mask (1, 1, n, n) —
    layer norm, q/k/v projections, softmax attention, residual, MLP with GELU, residual —
    built with BlockBuilder for an int ``n`` or a symbolic one (a name)."""
    rng = np.random.default_rng(seed)
    seq = tir.Var("int64", n) if isinstance(n, str) else n
    hd = d // heads
    pvars, values = [], []

    def param(name, shape, scale):
        pvars.append(op.make_var(name, relax.TensorStructInfo(list(shape), "float32")))
        values.append((rng.standard_normal(shape) * scale).astype("float32"))
        return pvars[-1]

    bb = relax.BlockBuilder()
    x = op.make_var("x", relax.TensorStructInfo([1, seq, d], "float32"))
    mask = op.make_var("mask", relax.TensorStructInfo([1, 1, seq, seq], "float32"))

    def linear(h, n_in, n_out, name):
        w, b = param(name + "_w", (n_out, n_in), math.sqrt(2.0 / n_in)), param(name + "_b", (n_out,), 0.1)
        return bb.emit(op.add(op.nn.dense(h, w), b))

    def split_heads(t):
        return bb.emit(op.permute_dims(bb.emit(op.reshape(t, [1, seq, heads, hd])), [0, 2, 1, 3]))

    def layer_norm(h, name):
        g, b = param(name + "_g", (d,), 0.1), param(name + "_b", (d,), 0.1)
        return bb.emit(op.nn.layer_norm(h, g, b, axes=[-1]))

    with bb.function("main"):
        with bb.dataflow():
            a = layer_norm(x, "ln1")
            q, k, v = (split_heads(linear(a, d, d, name)) for name in ("q", "k", "v"))
            s = bb.emit(op.matmul(q, bb.emit(op.permute_dims(k, [0, 1, 3, 2]))))
            s = bb.emit(op.add(bb.emit(op.multiply(s, op.const(np.float32(1 / math.sqrt(hd))))), mask))
            p = bb.emit(op.nn.softmax(s, axis=-1))
            a = bb.emit(op.reshape(bb.emit(op.permute_dims(bb.emit(op.matmul(p, v)), [0, 2, 1, 3])), [1, seq, d]))
            h = bb.emit(op.add(x, linear(a, d, d, "o")))
            m = bb.emit(op.nn.gelu(linear(layer_norm(h, "ln2"), d, mlp, "fc1")))
            out = bb.emit_output(bb.emit(op.add(h, linear(m, mlp, d, "fc2"))))
        bb.emit_func_output(out, params=[x, mask] + pvars)
    return bb.get(), values


def gpt_numpy(x, mask, weights, d=64, heads=4):
    """The block in float64 NumPy, weights in the order gpt_block made them."""
    w = [a.astype("float64") for a in weights]
    n, hd = x.shape[1], d // heads

    def take():
        return w.pop(0)

    def layer_norm(h):
        g, b = take(), take()
        mu = h.mean(-1, keepdims=True)
        return (h - mu) / np.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def linear(h):
        weight, bias = take(), take()
        return h @ weight.T + bias

    a = layer_norm(x.astype("float64"))
    q, k, v = (linear(a).reshape(1, n, heads, hd).transpose(0, 2, 1, 3) for _ in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    a = (e / e.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(1, n, d)
    h = x + linear(a)
    f = linear(layer_norm(h))
    gelu = 0.5 * f * (1 + np.vectorize(math.erf)(f / math.sqrt(2)))
    return h + linear(gelu)


def gpt_inputs(n, d=64, seed=1):
    x = np.random.default_rng(seed).standard_normal((1, n, d)).astype("float32")
    return x, np.triu(np.full((1, 1, n, n), -1e9, "float32"), 1)


@pytest.fixture(scope="module")
def gpt_fused():
    """(static module at n=16, symbolic module, weights), after the zero pipeline."""
    static, weights = gpt_block(16)
    symbolic, weights_sym = gpt_block("n")
    assert all(np.array_equal(a, b) for a, b in zip(weights, weights_sym))
    return zero(static), zero(symbolic), weights


def test_symbolic_gpt_block_fuses_like_the_static_one(gpt_fused):
    """The same groups, except the head split and merge: a reshape over ``n`` reads
    ``x[(... + v_ax0) % n, ...]``, and an index using a variable the store does not is neither
    elementwise, broadcast nor injective, so TVM's analysis (and tvms's) makes it kOpaque and
    it runs alone; at n = 16 it fuses with its transposes."""
    static, symbolic, _ = gpt_fused
    assert len(prim_funcs(static)) == 11 and call_tir_count(static) == 15
    assert len(prim_funcs(symbolic)) == 13 and call_tir_count(symbolic) == 19
    fused = {name for name in prim_funcs(symbolic) if name.startswith("fused_")}
    fused_static = {name for name in prim_funcs(static) if name.startswith("fused_")}
    assert {"reshape", "reshape1"} <= set(prim_funcs(symbolic))
    assert {name for name in fused_static if "reshape" not in name} <= fused
    assert "fused_dense1_add3_gelu" in fused and "fused_dense2_add_add2" in fused
    assert "T.match_buffer(T_add_intermediate_handle" in symbolic.script()
    assert_round_trip(symbolic)


def test_symbolic_gpt_block_runs_like_numpy_and_the_static_build(gpt_fused):
    static, symbolic, weights = gpt_fused
    vm = tvms.relax.VirtualMachine(tvms.compile(symbolic, target="llvm"), tvms.cpu())
    for n in (5, 16):
        x, mask = gpt_inputs(n)
        got = vm["main"](x, mask, *weights).numpy()
        np.testing.assert_allclose(got, gpt_numpy(x, mask, weights), rtol=1e-4, atol=1e-4)
        if n == 16:
            np.testing.assert_allclose(got, run_main(static, x, mask, *weights), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- output-only dims


def test_dim_only_in_output_is_passed_as_trailing_int64_param_and_tir_vars():
    mod = tvms.parse(OUTPUT_ONLY_DIM)
    grouped = mod
    for p in tvms.relax.get_pipeline("zero").passes[:4]:  # up to FuseOps
        grouped = p(grouped)
    group = grouped["fused_head_add_relu"]
    assert [p.name_hint for p in group.params] == ["x", "tir_vars"]
    assert isinstance(group.params[1].struct_info, relax.ShapeStructInfo)
    out = zero(mod)
    fused = prim_funcs(out)["fused_head_add_relu"]
    m = fused.params[-1]
    assert m.dtype == "int64" and m not in fused.buffer_map
    assert fused.buffer_map[fused.params[1]].shape[0] is m
    text = out.script()
    assert "def fused_head_add_relu(x_handle: T.handle, compute_intermediate_handle: T.handle, m: T.int64):" in text
    assert "tir_vars=R.shape([m])" in text
    assert_round_trip(out)
    vm = tvms.relax.VirtualMachine(tvms.compile(out, target="llvm"), tvms.cpu())
    x = np.arange(1, 11, dtype="float32") - 3
    for length in (4, 9):
        got = vm["main"](x, (length,)).numpy()
        np.testing.assert_allclose(got, np.maximum(x[:length] * 2 + 1, 0), rtol=1e-6)


@pytest.mark.parametrize("n", [3, 8])
def test_dim_defined_only_by_the_output_of_a_fused_group(n):
    out = zero(tvms.parse(BROADCAST_OUTPUT_ONLY_DIM))
    assert list(prim_funcs(out)) == ["fused_broadcast_to_add_relu"]
    assert "tir_vars=R.shape([n])" in out.script()
    assert_round_trip(out)
    y = np.array([[-2.0, 0.5]], "float32")
    got = run_main(out, np.zeros(n, "float32"), y)
    np.testing.assert_allclose(got, np.maximum(np.broadcast_to(y, (n, 2)) + 1, 0), rtol=1e-6)


@pytest.mark.parametrize("n", [3, 8])
def test_dim_defined_only_by_the_output_of_a_reshape(n):
    """A reshape over ``n`` reads ``y[(...) % (n * 2)]``, which TVM's analysis finds kOpaque:
    it runs alone, given ``n`` by ``tir_vars``, and the add and relu fuse after it."""
    out = zero(tvms.parse(RESHAPE_OUTPUT_ONLY_DIM))
    assert sorted(prim_funcs(out)) == ["fused_add_relu", "reshape"]
    assert "tir_vars=R.shape([n])" in out.script()
    assert_round_trip(out)
    y = (np.arange(2 * n) - 3).astype("float32")
    got = run_main(out, np.zeros(n, "float32"), y)
    np.testing.assert_allclose(got, np.maximum(y + 1, 0).reshape(n, 2), rtol=1e-6)


# ----------------------------------------------------------------------------- idempotence


@pytest.mark.parametrize("source", [MLP_SYMBOLIC, OUTPUT_ONLY_DIM, RESHAPE_OUTPUT_ONLY_DIM, BROADCAST_OUTPUT_ONLY_DIM])
def test_fusing_again_changes_nothing(source):
    out = zero(tvms.parse(source))
    assert FuseTIR()(FuseOps()(out)).script() == out.script()


def test_pipeline_twice_fuses_nothing_more(gpt_fused):
    _, symbolic, _ = gpt_fused
    again = zero(symbolic)
    assert again["main"].script() == symbolic["main"].script()
    assert list(prim_funcs(again)) == list(prim_funcs(symbolic))
    # AnnotateTIROpPattern tags the fused functions the second time; their code is the same.
    def without_pattern(func):
        attrs = {k: v for k, v in func.attrs.items() if k != "op_pattern"}
        return tir.PrimFunc(func.params, func.buffer_map, func.body, attrs=attrs, private=func.private)

    for name, func in prim_funcs(again).items():
        assert structural_equal(without_pattern(func), without_pattern(prim_funcs(symbolic)[name])), name
