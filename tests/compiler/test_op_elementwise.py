"""Elementwise ops (unary math, binary arithmetic with broadcasting, comparisons, logical ops,
``where``, ``astype``): struct-info inference, TVM-style legalized TIR, and numerics against
NumPy on several shapes (through ``op_check.check_op``: print/parse round trip, declared pattern
= analyzed pattern, CPU compile and run). Also located diagnostics for bad calls in text."""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.op_check import build_op_module, check_op, legalize_checked, run

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform import LegalizeOps
from tvmscript.diagnostics import TVMScriptError

RNG = np.random.default_rng(0)
op = relax.op
_erf = np.vectorize(math.erf, otypes=[np.float64])


def rand(shape, dtype="float32", low=-2.0, high=2.0):
    if np.issubdtype(np.dtype(dtype), np.integer):
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    if dtype == "bool":
        return RNG.random(size=shape) < 0.5
    return RNG.uniform(low, high, size=shape).astype(dtype)


def f32(fn):
    """A float64 NumPy reference cast back to float32 (the op's dtype)."""
    return lambda x: np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


# ----------------------------------------------------------------------------- unary

# name -> (op, NumPy reference, input range)
UNARY = {
    "exp": (op.exp, np.exp, (-2, 2)),
    "log": (op.log, np.log, (0.1, 4)),
    "sqrt": (op.sqrt, np.sqrt, (0.1, 4)),
    "rsqrt": (op.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 4)),
    "tanh": (op.tanh, np.tanh, (-3, 3)),
    "sigmoid": (op.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-4, 4)),
    "negative": (op.negative, np.negative, (-2, 2)),
    "abs": (op.abs, np.abs, (-2, 2)),
    "floor": (op.floor, np.floor, (-3, 3)),
    "ceil": (op.ceil, np.ceil, (-3, 3)),
    "round": (op.round, np.round, (-3, 3)),
    "sin": (op.sin, np.sin, (-3, 3)),
    "cos": (op.cos, np.cos, (-3, 3)),
    "erf": (op.erf, _erf, (-2, 2)),
    "square": (op.square, np.square, (-2, 2)),
    "relu": (op.nn.relu, lambda x: np.maximum(x, 0), (-2, 2)),
    "gelu": (op.nn.gelu, lambda x: x * 0.5 * (1 + _erf(x / math.sqrt(2))), (-3, 3)),
    "silu": (op.nn.silu, lambda x: x / (1 + np.exp(-x)), (-4, 4)),
}
UNARY_SHAPES = [(4,), (2, 3, 4), ()]


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, shape):
    fn, ref, (lo, hi) = UNARY[name]
    x = rand(shape, "float32", lo, hi)
    if name == "round" and x.ndim:
        x.flat[0], x.flat[-1] = 2.5, -0.5  # ties: round to even, as NumPy
    check_op(fn, [x], f32(ref)(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["negative", "abs", "floor", "ceil", "round", "square", "relu"])
def test_unary_int(name):
    fn, ref, _ = UNARY[name]
    x = rand((2, 5), "int32", -9, 9)
    check_op(fn, [x], ref(x).astype("int32"))


def test_unary_float64():
    x = rand((3, 2), "float64", 0.5, 2)
    check_op(op.log, [x], np.log(x), rtol=1e-12)
    check_op(op.nn.gelu, [x], x * 0.5 * (1 + _erf(x / math.sqrt(2))), rtol=1e-12)


def test_logical_not():
    x = rand((2, 3), "bool")
    check_op(op.logical_not, [x], np.logical_not(x))


@pytest.mark.parametrize("fn", [op.exp, op.log, op.sqrt, op.sigmoid, op.erf, op.nn.gelu, op.nn.silu])
def test_float_only_ops_reject_ints(fn):
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "int32"))
    with pytest.raises(ValueError, match="floating-point x"):
        fn(x)


def test_logical_not_needs_bool():
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    with pytest.raises(ValueError, match="bool x"):
        op.logical_not(x)


def test_unary_inference_keeps_symbolic_shape_and_rank():
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 4], "float32"))
    sinfo = op.exp(x).struct_info
    assert sinfo.shape[0] is n and sinfo.dtype == "float32"
    y = relax.Var("y", relax.TensorStructInfo(None, "float32", 3))
    assert op.nn.relu(y).struct_info.ndim == 3


def test_unary_legalized_like_tvm():
    """TVM 0.25's names: prim_func ``tir_exp``, block ``compute``, loops ``i0, i1``."""
    mod, _ = build_op_module(op.exp, [rand((2, 3))])
    text = LegalizeOps()(mod).script()
    assert "def tir_exp(x0: T.Buffer((T.int64(2), T.int64(3)), \"float32\"), compute:" in text
    assert 'with T.block("compute")' in text and "for i0, i1 in T.grid" in text
    assert "compute[v_i0, v_i1] = T.exp(x0[v_i0, v_i1])" in text
    mod, _ = build_op_module(op.round, [rand((2,))])
    assert "T.nearbyint(x0[v_i0])" in LegalizeOps()(mod).script()


def test_gelu_stages_like_tvm():
    mod, _ = build_op_module(op.nn.gelu, [rand((2, 3))])
    text = LegalizeOps()(mod).script()
    blocks = [line.split('"')[1] for line in text.split("\n") if "T.block(" in line and "root" not in line]
    assert blocks == ["T_multiply", "compute", "T_multiply_1", "T_add", "T_multiply_2"]
    assert "x0[v_ax0, v_ax1] * T.float32(0.70710678118654757)" in text
    assert "T_add[v_ax0, v_ax1] = T.float32(0.5) + T_multiply_2[v_ax0, v_ax1]" in text


# ----------------------------------------------------------------------------- binary

BINARY = {
    "add": (op.add, np.add),
    "subtract": (op.subtract, np.subtract),
    "multiply": (op.multiply, np.multiply),
    "divide": (op.divide, np.divide),
    "floor_divide": (op.floor_divide, np.floor_divide),
    "power": (op.power, np.power),
    "maximum": (op.maximum, np.maximum),
    "minimum": (op.minimum, np.minimum),
}
BINARY_SHAPES = [((4,), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((2, 3), ())]


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float(name, shapes):
    fn, ref = BINARY[name]
    a = rand(shapes[0], "float32", 0.5, 3) if name == "power" else rand(shapes[0])
    b = rand(shapes[1], "float32", 0.5, 2)
    if name not in ("power", "divide", "floor_divide"):
        b = rand(shapes[1])
    check_op(fn, [a, b], ref(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "floor_divide", "power", "maximum", "minimum"])
def test_binary_int(name):
    """Integer arithmetic; floor_divide rounds toward -inf (NumPy), negative operands included."""
    fn, ref = BINARY[name]
    a = rand((2, 1, 4), "int32", -20, 20)
    b = rand((3, 1), "int32", 1, 3) if name == "power" else rand((3, 1), "int32", -5, 5)
    if name == "power":
        a = rand((2, 1, 4), "int32", -4, 4)
    if name == "floor_divide":
        b[b == 0] = 3
        b[0, 0] = -4
    check_op(fn, [a, b], ref(a, b).astype("int32"))


def test_floor_divide_int_exact_values():
    a = np.array([7, -7, 7, -7, 0, -1], "int64")
    b = np.array([2, 2, -2, -2, 3, 5], "int64")
    check_op(op.floor_divide, [a, b], np.array([3, -4, -4, 3, 0, -1], "int64"))


COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
}


@pytest.mark.parametrize("shapes", [((2, 1, 4), (3, 1)), ((5,), ())], ids=str)
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare(name, shapes):
    a = rand(shapes[0], "int32", -2, 2).astype("float32")  # small integers: plenty of ties
    b = rand(shapes[1], "int32", -2, 2).astype("float32")
    check_op(getattr(op, name), [a, b], COMPARE[name](a, b))


def test_compare_int():
    a, b = rand((3, 4), "int64", -3, 3), rand((4,), "int64", -3, 3)
    check_op(op.less_equal, [a, b], a <= b)


@pytest.mark.parametrize("name", ["logical_and", "logical_or"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 1, 3), (4, 1))], ids=str)
def test_logical(name, shapes):
    a, b = rand(shapes[0], "bool"), rand(shapes[1], "bool")
    check_op(getattr(op, name), [a, b], getattr(np, name)(a, b))


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((2, 1), (3,), (2, 3)), ((4, 1, 1), (1, 3, 1), (2,)),
                                    ((), (2, 2), ())], ids=str)
def test_where(shapes):
    c = rand(shapes[0], "bool")
    x, y = rand(shapes[1]), rand(shapes[2])
    check_op(op.where, [c, x, y], np.where(c, x, y))


def test_where_int_values():
    c, x, y = rand((3, 4), "bool"), rand((3, 4), "int32", -9, 9), rand((1, 4), "int32", -9, 9)
    check_op(op.where, [c, x, y], np.where(c, x, y))


def test_binary_legalized_like_tvm():
    mod, _ = build_op_module(op.add, [rand((2, 1, 4)), rand((3, 1))])
    text = LegalizeOps()(mod).script()
    assert 'with T.block("T_add")' in text and "for ax0, ax1, ax2 in T.grid" in text
    assert "T_add[v_ax0, v_ax1, v_ax2] = x0[v_ax0, T.int64(0), v_ax2] + x1[v_ax1, T.int64(0)]" in text
    mod, _ = build_op_module(op.floor_divide, [rand((4,)), rand((4,))])
    assert "T.floor(x0[v_ax0] / x1[v_ax0])" in LegalizeOps()(mod).script()
    mod, _ = build_op_module(op.floor_divide, [rand((4,), "int32"), rand((4,), "int32")])
    assert "T_floor_divide[v_ax0] = x0[v_ax0] // x1[v_ax0]" in LegalizeOps()(mod).script()


# ----------------------------------------------------------------------------- binary inference


def tensor(shape, dtype="float32", ndim=-1):
    return relax.Var("t", relax.TensorStructInfo(shape, dtype, ndim) if shape is None else
                     relax.TensorStructInfo(shape, dtype))


def test_broadcast_symbolic_dims():
    n, m = tir.Var("int64", "n"), tir.Var("int64", "m")
    s = op.add(tensor([n, 1]), tensor([1, m])).struct_info
    assert s.shape[0] is n and s.shape[1] is m
    s = op.multiply(tensor([n, 4]), tensor([4])).struct_info
    assert s.shape[0] is n and s.shape[1].value == 4
    s = op.add(tensor([n]), tensor([m])).struct_info  # unknowable statically: rank only
    assert s.shape is None and s.ndim == 1
    s = op.add(tensor(None, ndim=2), tensor([3, 1, 4])).struct_info
    assert s.shape is None and s.ndim == 3
    s = op.where(tensor([n, 1], "bool"), tensor([1, m]), tensor([m])).struct_info
    assert s.shape[0] is n and s.shape[1] is m


def test_binary_symbolic_legalize_runs():
    """A symbolic batch dim survives legalization; the compiled kernel takes any n."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 4], "float32"))
    y = relax.Var("y", relax.TensorStructInfo([4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        out = bb.emit(op.maximum(x, y))
        bb.emit_func_output(out)
    legal = legalize_checked(bb.get())
    for rows in (1, 3):
        a, b = rand((rows, 4)), rand((4,))
        np.testing.assert_array_equal(run(legal, [a, b]), np.maximum(a, b))


def test_binary_errors():
    with pytest.raises(ValueError, match="do not broadcast: dimension 3 vs 4"):
        op.add(tensor([2, 3]), tensor([4]))
    with pytest.raises(ValueError, match="dtypes differ: float32 and int32"):
        op.subtract(tensor([2]), tensor([2], "int32"))
    with pytest.raises(ValueError, match="bool x1"):
        op.logical_and(tensor([2]), tensor([2], "bool"))
    with pytest.raises(ValueError, match="bool condition"):
        op.where(tensor([2]), tensor([2]), tensor([2]))
    with pytest.raises(ValueError, match="do not broadcast"):
        op.where(tensor([2], "bool"), tensor([3]), tensor([3]))
    assert op.equal(tensor([2]), tensor([2])).struct_info.dtype == "bool"


# ----------------------------------------------------------------------------- astype


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("float32", "float64"),
                                     ("float32", "bool"), ("bool", "float32"), ("int64", "int8"),
                                     ("float64", "float16")])
def test_astype(src, dst):
    x = rand((2, 3), src, -5, 5)
    if src == "float32" and dst == "bool":
        x[0, 0] = 0.0
    check_op(op.astype, [x], x.astype(dst), dtype=dst)


def test_astype_prints_and_legalizes_like_tvm():
    mod, _ = build_op_module(op.astype, [rand((2, 3))], dtype="int32")
    assert 'R.astype(x0, dtype="int32")' in mod.script()
    text = LegalizeOps()(mod).script()
    assert "def cast(" in text and 'compute[v_i0, v_i1] = T.Cast("int32", x0[v_i0, v_i1])' in text


def test_astype_bad_dtype():
    with pytest.raises(ValueError, match="astype needs a dtype"):
        op.astype(tensor([2]), "float33")


# ----------------------------------------------------------------------------- clip


@pytest.mark.parametrize("shape,dtype,lo,hi", [((2, 3, 4), "float32", 0, 6), ((7,), "float32", -1.5, 0.25),
                                               ((3, 5), "int32", -2, 3), ((), "float64", -0.5, 0.5)], ids=str)
def test_clip(shape, dtype, lo, hi):
    x = rand(shape, dtype, -8, 8)
    check_op(op.clip, [x, lo, hi], np.clip(x, lo, hi).astype(dtype))


def test_clip_prints_and_legalizes_like_tvm():
    """The bounds are PrimValue arguments (``R.clip(x, R.prim_value(0), R.prim_value(6))``),
    legalized into ``tir_clip``'s ``max(min(x, 6), 0)`` with the bounds in the tensor's dtype."""
    mod, _ = build_op_module(op.clip, [rand((2, 3)), 0, 6])
    assert "R.clip(x0, R.prim_value(0), R.prim_value(6))" in mod.script()
    text = LegalizeOps()(mod).script()
    assert "def tir_clip(" in text
    assert "compute[v_i0, v_i1] = T.max(T.min(x0[v_i0, v_i1], T.float32(6.0)), T.float32(0.0))" in text


def test_clip_symbolic_runs():
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(op.clip(x, -1, 1)))
    legal = legalize_checked(bb.get())
    for rows in (1, 4):
        a = rand((rows, 3))
        np.testing.assert_array_equal(run(legal, [a]), np.clip(a, -1, 1))


def test_clip_errors():
    with pytest.raises(ValueError, match="min must be a prim value"):
        op.clip(tensor([2]), tensor([2]), 1)
    with pytest.raises(ValueError, match="numeric x"):
        op.clip(tensor([2], "bool"), 0, 1)


# ----------------------------------------------------------------------------- diagnostics from text


def relax_fn(body: str, params: str) -> str:
    lines = "\n".join("    " + line for line in body.split("\n"))
    return f"@R.function\ndef main({params}):\n{lines}\n"


def diagnose(source: str, message: str, line: int, at: str):
    """``source`` fails to parse with ``message``, located on ``line`` at the text ``at``."""
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(source)
    err = info.value
    assert message in err.message, err.message
    assert err.span is not None
    text_line = source.split("\n")[line - 1]
    assert (err.span.line, err.span.col) == (line, text_line.index(at) + 1), f"{err.message} at {err.span}"
    return err


def test_text_shapes_do_not_broadcast():
    src = relax_fn("lv = R.add(x, y)\nreturn lv", 'x: R.Tensor((2, 3), "float32"), y: R.Tensor((4,), "float32")')
    diagnose(src, "R.add: shapes of the operands do not broadcast: dimension 3 vs 4", 3, "R.add")


def test_text_where_shapes_do_not_broadcast():
    src = relax_fn("lv = R.where(c, x, y)\nreturn lv",
                   'c: R.Tensor((2, 1), "bool"), x: R.Tensor((3,), "float32"), y: R.Tensor((4,), "float32")')
    diagnose(src, "do not broadcast: dimension 3 vs 4", 3, "R.where")


def test_text_dtype_mismatch():
    src = relax_fn("lv = R.multiply(x, y)\nreturn lv", 'x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "int32")')
    diagnose(src, "R.multiply: operand dtypes differ: float32 and int32", 3, "R.multiply")


def test_text_float_op_on_ints_points_at_argument():
    src = relax_fn("lv = R.exp(x)\nreturn lv", 'x: R.Tensor((2,), "int32")')
    diagnose(src, "R.exp: R.exp needs a floating-point x, got int32", 3, "x)")


def test_text_astype_bad_dtype():
    src = relax_fn('lv = R.astype(x, dtype="flt")\nreturn lv', 'x: R.Tensor((2,), "float32")')
    diagnose(src, "astype needs a dtype", 3, '"flt"')


# ----------------------------------------------------------------------------- activations, predicates


def np_gelu_tanh(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_softplus(x, beta=1.0, threshold=20.0):
    x = x.astype(np.float64)
    return np.where(beta * x > threshold, x, np.log1p(np.exp(np.minimum(beta * x, threshold))) / beta)


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()], ids=str)
@pytest.mark.parametrize("alpha", [0.01, 0.2])
def test_leakyrelu(shape, alpha):
    x = rand(shape, "float32", -3, 3)
    check_op(op.nn.leakyrelu, [x], np.where(x > 0, x, x * np.float32(alpha)), alpha=alpha)


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)], ids=str)
def test_gelu_tanh(shape):
    x = rand(shape, "float32", -4, 4)
    check_op(op.nn.gelu_tanh, [x], np_gelu_tanh(x).astype("float32"), rtol=1e-5, atol=1e-6)


def test_gelu_tanh_stages_like_tvm():
    """TVM 0.27's nine stages: 0.5 x, sqrt(2/pi) x, 0.044715 x * x, 1 + _, product, tanh, ..."""
    mod, _ = build_op_module(op.nn.gelu_tanh, [rand((2, 3))])
    text = LegalizeOps()(mod).script()
    blocks = [line.split('"')[1] for line in text.split("\n") if "T.block(" in line and "root" not in line]
    assert blocks == ["T_multiply", "T_multiply_1", "T_multiply_2", "T_multiply_3", "T_add", "T_multiply_4",
                      "compute", "T_add_1", "T_multiply_5"]
    assert "T.float32(0.79788456080286541) * x0[v_ax0, v_ax1]" in text
    assert "def gelu_tanh(" in text


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 10.0), (0.5, 3.0)])
def test_softplus(beta, threshold):
    x = rand((3, 8), "float32", -12, 12)
    check_op(op.nn.softplus, [x], np_softplus(x, beta, threshold).astype("float32"), rtol=1e-5, atol=1e-5,
             beta=beta, threshold=threshold)


def test_softplus_and_leakyrelu_print_like_tvm():
    mod, _ = build_op_module(op.nn.softplus, [rand((2,))], beta=2.0, threshold=10.0)
    assert "R.nn.softplus(x0, beta=2.0, threshold=10.0)" in mod.script()
    text = LegalizeOps()(mod).script()
    assert "def softplus(" in text
    assert ("T.Select(T.float32(10.0) < T.float32(2.0) * x0[v_i0], x0[v_i0], "
            "T.float32(0.5) * T.log(T.float32(1.0) + T.exp(T.float32(2.0) * x0[v_i0])))") in text
    mod, _ = build_op_module(op.nn.leakyrelu, [rand((2,))], alpha=0.25)
    assert "R.nn.leakyrelu(x0, alpha=0.25)" in mod.script()
    text = LegalizeOps()(mod).script()
    assert "def leaky_relu(" in text
    assert "T.Select(T.float32(0.0) < x0[v_i0], x0[v_i0], x0[v_i0] * T.float32(0.25))" in text


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_sign(dtype):
    x = rand((3, 5), dtype, -4, 4)
    x.flat[0] = 0
    legal = check_op(op.sign, [x], np.sign(x))
    assert 'def tir_sign(' in legal.script() and 'T.block("T_sign")' in legal.script()


def test_trunc():
    x = rand((4, 3), "float32", -5, 5)
    legal = check_op(op.trunc, [x], np.trunc(x))
    assert "T.trunc(x0[v_i0, v_i1])" in legal.script()
    xi = rand((4,), "int32", -5, 5)
    check_op(op.trunc, [xi], xi)


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_predicates(name, dtype):
    x = rand((3, 4), dtype)
    x[0, 1], x[1, 2], x[2, 3], x[2, 0] = np.nan, np.inf, -np.inf, 0
    legal = check_op(getattr(op, name), [x], getattr(np, name)(x))
    assert f"def tir_{name}(" in legal.script()


def test_float_predicates_on_integers():
    xi = rand((5,), "int32", -3, 3)
    for name in ("isnan", "isinf", "isfinite"):
        check_op(getattr(op, name), [xi], getattr(np, name)(xi))


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((2, 4), -1), ((3, 2, 2, 5), 3), ((6,), 0)], ids=str)
def test_prelu(shape, axis):
    x = rand(shape, "float32", -3, 3)
    alpha = rand((shape[axis],), "float32", 0, 0.5)
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    legal = check_op(op.nn.prelu, [x, alpha], np.where(x > 0, x, x * alpha.reshape(bshape)), axis=axis)
    assert "def prelu(" in legal.script()


def test_relu6_is_tvms_clip():
    """TVM has no relu6 op: ``relax.op.nn.relu6`` builds ``R.clip(x, 0, 6)`` and the parser reads
    ``R.nn.relu6(x)`` the same way."""
    x = rand((2, 5), "float32", -9, 9)
    legal = check_op(op.nn.relu6, [x], np.clip(x, 0, 6))
    assert "def tir_clip(" in legal.script()
    src = relax_fn("lv = R.nn.relu6(x)\nreturn lv", 'x: R.Tensor((2, 5), "float32")')
    assert "R.clip(x, R.prim_value(0), R.prim_value(6))" in tvms.parse(src).script()


def test_new_activations_on_symbolic_shapes():
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 3], "float32"))
    a = relax.Var("a", relax.TensorStructInfo([3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, a]):
        outs = [bb.emit(op.nn.leakyrelu(x, 0.1)), bb.emit(op.nn.gelu_tanh(x)), bb.emit(op.nn.softplus(x)),
                bb.emit(op.sign(x)), bb.emit(op.isfinite(x)), bb.emit(op.nn.prelu(x, a, axis=-1))]
        bb.emit_func_output(relax.Tuple(outs))
    text = bb.get().script()
    assert 'R.Tensor((n, 3), dtype="bool") = R.isfinite(x)' in text
    legal = LegalizeOps()(bb.get())
    xs, al = rand((4, 3), "float32", -3, 3), rand((3,), "float32", 0, 1)
    got = run(legal, [xs, al])
    expected = [np.where(xs > 0, xs, xs * np.float32(0.1)), np_gelu_tanh(xs), np_softplus(xs), np.sign(xs),
                np.isfinite(xs), np.where(xs > 0, xs, xs * al)]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_new_activation_errors():
    with pytest.raises(ValueError, match="floating-point data"):
        op.nn.leakyrelu(tensor([2], "int32"))
    with pytest.raises(ValueError, match="alpha must be a number"):
        op.nn.leakyrelu(tensor([2]), alpha="0.1")
    with pytest.raises(ValueError, match="beta must not be 0"):
        op.nn.softplus(tensor([2]), beta=0)
    with pytest.raises(ValueError, match="alpha has 4 slopes but data has 3 elements along axis 1"):
        op.nn.prelu(tensor([2, 3]), tensor([4]))
    with pytest.raises(ValueError, match="alpha must be 1-D"):
        op.nn.prelu(tensor([2, 3]), tensor([1, 3]))
    with pytest.raises(ValueError, match="numeric x"):
        op.sign(tensor([2], "bool"))


def test_text_prelu_alpha_mismatch_points_at_alpha():
    src = relax_fn("lv = R.nn.prelu(x, a)\nreturn lv", 'x: R.Tensor((2, 3), "float32"), a: R.Tensor((2,), "float32")')
    diagnose(src, "alpha has 2 slopes but data has 3 elements along axis 1", 3, "a)")
