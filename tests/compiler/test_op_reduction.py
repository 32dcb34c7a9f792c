"""Reductions (sum, mean, max, min, prod, variance, std, argmax, argmin) and the scans cumsum and
cumprod: attribute handling (axis as
None / int / list, negative axes, keepdims), struct-info inference with symbolic dims, TVM-style
legalized TIR, numerics against NumPy on several shapes (``op_check.check_op``), and located
diagnostics for bad axes written in text."""

from __future__ import annotations

import numpy as np
import pytest

from support.op_check import build_op_module, check_op, legalize_checked, run

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform import AnnotateTIROpPattern, LegalizeOps
from tvmscript.diagnostics import TVMScriptError

RNG = np.random.default_rng(1)
op = relax.op


def rand(shape, dtype="float32", low=-2.0, high=2.0):
    if np.issubdtype(np.dtype(dtype), np.integer):
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def np_axis(axis):
    return None if axis is None else tuple(axis)


# ----------------------------------------------------------------------------- numerics

REDUCE = {
    "sum": (op.sum, np.sum),
    "mean": (op.mean, np.mean),
    "max": (op.max, np.max),
    "min": (op.min, np.min),
    "prod": (op.prod, np.prod),
    "variance": (op.variance, np.var),
    "std": (op.std, np.std),
}
# (input shape, axis, keepdims)
CASES = [
    ((2, 3, 4), [1], True),
    ((2, 3, 4), [-1, 0], False),
    ((2, 3, 4), None, True),
    ((5,), None, False),
    ((3, 4), -2, False),
    ((), None, False),
]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce_float(name, case):
    shape, axis, keepdims = case
    fn, ref = REDUCE[name]
    x = rand(shape, "float32", 0.5, 1.5) if name == "prod" else rand(shape)
    ax = [axis] if isinstance(axis, int) else axis
    expected = np.asarray(ref(x.astype(np.float64), axis=np_axis(ax), keepdims=keepdims)).astype("float32")
    check_op(fn, [x], expected, rtol=1e-5, atol=1e-5, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("name", ["sum", "max", "min", "prod"])
def test_reduce_int(name):
    fn, ref = REDUCE[name]
    x = rand((3, 4, 2), "int32", -5, 5)
    check_op(fn, [x], ref(x, axis=(0, 2), keepdims=False).astype("int32"), axis=[0, 2])


def test_reduce_empty_axis_list_reduces_nothing():
    """``axis=[]`` reduces no axis (NumPy's ``axis=()``): the result is the input."""
    x = rand((2, 3))
    check_op(op.sum, [x], x, axis=[])


# (input shape, axis, keepdims)
ARG_CASES = [((2, 3, 4), 1, False), ((2, 3, 4), -1, True), ((3, 5), None, False), ((2, 3), None, True), ((6,), 0, False)]


@pytest.mark.parametrize("case", ARG_CASES, ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduce(name, case):
    """Small integers, so there are ties: the first index wins, as in NumPy."""
    shape, axis, keepdims = case
    x = rand(shape, "int32", -2, 2).astype("float32")
    expected = getattr(np, name)(x, axis=axis, keepdims=keepdims).astype("int64")
    check_op(getattr(op, name), [x], expected, axis=axis, keepdims=keepdims)


def test_arg_reduce_int_input():
    x = rand((4, 5), "int32", -3, 3)
    check_op(op.argmax, [x], np.argmax(x, axis=0).astype("int64"), axis=0)
    check_op(op.argmin, [x], np.argmin(x, axis=1).astype("int64"), axis=1)


def test_symbolic_reduce_runs():
    """A symbolic reduced extent: mean divides by ``T.Cast("float32", n)``; any n runs."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        mean = bb.emit(op.mean(x, axis=[0]))
        arg = bb.emit(op.argmax(x, axis=0, keepdims=True))
        out = bb.emit(relax.Tuple([mean, arg]))
        bb.emit_func_output(out)
    mod = bb.get()
    assert mod["main"].body.blocks[0].bindings[0].value.struct_info.shape[0].value == 4
    legal = LegalizeOps()(mod)
    assert 'T.Cast("float32", n)' in legal.script()
    for rows in (1, 5):
        a = rand((rows, 4))
        got_mean, got_arg = run(legal, [a])
        np.testing.assert_allclose(got_mean, a.mean(axis=0), rtol=1e-5)
        np.testing.assert_array_equal(got_arg, np.argmax(a, axis=0, keepdims=True))


# ----------------------------------------------------------------------------- TVM-style printing


def test_prints_like_tvm():
    mod, _ = build_op_module(op.sum, [rand((2, 3, 4))], axis=[1], keepdims=True)
    assert "R.sum(x0, axis=[1], keepdims=True)" in mod.script()
    mod, _ = build_op_module(op.mean, [rand((2, 3, 4))])
    assert "R.mean(x0, axis=None, keepdims=False)" in mod.script()
    mod, _ = build_op_module(op.max, [rand((2, 3, 4))], axis=-1)
    assert "R.max(x0, axis=[-1], keepdims=False)" in mod.script()
    mod, _ = build_op_module(op.argmax, [rand((2, 3, 4))], axis=1)
    assert "R.argmax(x0, axis=1, keepdims=False)" in mod.script()


def test_sum_legalized_like_tvm():
    mod, _ = build_op_module(op.sum, [rand((2, 3, 4))], axis=[1], keepdims=True)
    text = LegalizeOps()(mod).script()
    assert "def sum(x0: T.Buffer((T.int64(2), T.int64(3), T.int64(4)), \"float32\"), x0_red: " in text
    assert "for ax0, ax1, ax2, k1 in T.grid(T.int64(2), T.int64(1), T.int64(4), T.int64(3)):" in text
    assert 'with T.block("x0_red"):' in text and 'T.axis.remap("SSSR", [ax0, ax1, ax2, k1])' in text
    assert "x0_red[v_ax0, v_ax1, v_ax2] = x0_red[v_ax0, v_ax1, v_ax2] + x0[v_ax0, v_k1, v_ax2]" in text
    mod, _ = build_op_module(op.sum, [rand((2, 3))])
    assert "for k0, k1 in T.grid(T.int64(2), T.int64(3)):" in LegalizeOps()(mod).script()


def test_multi_stage_blocks_like_tvm():
    def blocks(fn, **attrs):
        mod, _ = build_op_module(fn, [rand((2, 3, 4))], **attrs)
        text = LegalizeOps()(mod).script()
        return [line.split('"')[1] for line in text.split("\n") if "T.block(" in line and '"root"' not in line]

    assert blocks(op.mean, axis=[1]) == ["x0_red", "T_divide"]
    assert blocks(op.variance, axis=[1], keepdims=True) == [
        "x0_red", "T_divide", "T_subtract", "T_multiply", "T_multiply_red", "T_divide_1"]
    # TVM has one tuple-reducer block x0_red_temp, then x0_red; here two single reductions.
    assert blocks(op.argmax, axis=1) == ["x0_red_temp", "x0_red"]


# ----------------------------------------------------------------------------- inference


def tensor(shape, dtype="float32", ndim=-1):
    return relax.Var("t", relax.TensorStructInfo(shape, dtype) if shape is not None
                     else relax.TensorStructInfo(None, dtype, ndim))


def dims(sinfo):
    return [d.value if isinstance(d, tir.IntImm) else d for d in sinfo.shape]


def test_inference_shapes():
    n = tir.Var("int64", "n")
    assert dims(op.sum(tensor([n, 3, 4]), axis=[1, -1]).struct_info) == [n]
    assert dims(op.max(tensor([n, 3, 4]), axis=[0], keepdims=True).struct_info) == [1, 3, 4]
    assert dims(op.variance(tensor([n, 3])).struct_info) == []
    s = op.argmin(tensor([n, 3], "float16"), axis=-1, keepdims=True).struct_info
    assert dims(s) == [n, 1] and s.dtype == "int64"
    assert op.mean(tensor(None, ndim=3), axis=[0]).struct_info.ndim == 2
    assert op.mean(tensor(None, ndim=3), axis=[0], keepdims=True).struct_info.ndim == 3
    assert dims(op.sum(tensor(None, ndim=-1)).struct_info) == []
    assert op.sum(tensor(None, ndim=-1), axis=[0]).struct_info.ndim == -1
    assert op.prod(tensor([2, 3], "int8"), axis=1).struct_info.dtype == "int8"


@pytest.mark.parametrize("fn,attrs,message", [
    (op.sum, dict(axis=[3]), "axis 3 is out of range for a tensor of rank 3"),
    (op.mean, dict(axis=[-4]), "axis -4 is out of range"),
    (op.max, dict(axis=[0, -3]), "axis 0 appears more than once"),
    (op.sum, dict(axis="1"), "axis must be an integer, a list of integers or None"),
    (op.sum, dict(keepdims=1), "keepdims must be True or False"),
    (op.argmax, dict(axis=[1]), "axis must be an integer or None"),
    (op.argmin, dict(axis=3), "axis 3 is out of range"),
])
def test_inference_errors(fn, attrs, message):
    with pytest.raises(ValueError, match=message):
        fn(tensor([2, 3, 4]), **attrs)


# ----------------------------------------------------------------------------- diagnostics from text

PARAMS = 'x: R.Tensor((2, 3, 4), "float32")'


def relax_fn(body: str) -> str:
    lines = "\n".join("    " + line for line in body.split("\n"))
    return f"@R.function\ndef main({PARAMS}):\n{lines}\n"


def diagnose(call: str, message: str, at: str):
    """``lv = <call>`` fails to parse with ``message``, located (line 3) at the text ``at``."""
    src = relax_fn(f"lv = {call}\nreturn lv")
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    err = info.value
    assert message in err.message, err.message
    line = src.split("\n")[2]
    assert (err.span.line, err.span.col) == (3, line.index(at) + 1), f"{err.message} at {err.span}"


def test_text_axis_out_of_range():
    diagnose("R.sum(x, axis=[1, 3], keepdims=True)", "R.sum: axis 3 is out of range for a tensor of rank 3", "[1, 3]")


def test_text_repeated_axis():
    diagnose("R.variance(x, axis=[2, -1])", "R.variance: axis 2 appears more than once", "[2, -1]")


def test_text_argmax_axis():
    diagnose("R.argmax(x, axis=-4)", "R.argmax: axis -4 is out of range", "-4")
    diagnose("R.argmin(x, axis=[0])", "axis must be an integer or None", "[0]")


def test_text_keepdims_not_bool():
    diagnose('R.mean(x, axis=[0], keepdims="yes")', "keepdims must be True or False", '"yes"')


def test_text_reduction_parses_and_runs():
    src = relax_fn("lv = R.sum(x, axis=[-1], keepdims=False)\nreturn lv")
    mod = tvms.parse(src)
    x = rand((2, 3, 4))
    legal = legalize_checked(tvms.ir.IRModule({"main": mod}))
    np.testing.assert_allclose(run(legal, [x]), x.sum(axis=-1), rtol=1e-5)


# ----------------------------------------------------------------------------- std


def test_std_legalized_like_tvm():
    """variance's six stages, then ``compute`` taking the square root (TVM 0.27's ``std``)."""
    mod, _ = build_op_module(op.std, [rand((2, 3))], axis=[1], keepdims=True)
    assert "R.std(x0, axis=[1], keepdims=True)" in mod.script()
    text = LegalizeOps()(mod).script()
    blocks = [line.split('"')[1] for line in text.split("\n") if "T.block(" in line and "root" not in line]
    assert blocks == ["x0_red", "T_divide", "T_subtract", "T_multiply", "T_multiply_red", "T_divide_1", "compute"]
    assert "compute[v_i0, v_i1] = T.sqrt(T_divide_1[v_i0, v_i1])" in text


# ----------------------------------------------------------------------------- cumsum, cumprod


def np_cumulative(x, kind, axis=None, dtype=None, exclusive=False):
    """NumPy's cumsum/cumprod in ``dtype``; exclusive: each element left out of its prefix."""
    fn = np.cumsum if kind == "sum" else np.cumprod
    src = x.reshape(-1) if axis is None else x
    axis = 0 if axis is None else axis
    out = fn(src.astype(dtype or x.dtype), axis=axis)
    if exclusive:
        first = np.take(np.zeros_like(out) + (0 if kind == "sum" else 1), [0], axis=axis)
        out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
    return out.astype(dtype or x.dtype)


SCAN_CASES = [
    # shape, axis, dtype, exclusive, input dtype
    ((2, 3, 4), 1, None, False, "float32"),
    ((2, 3, 4), -1, None, True, "float32"),
    ((3, 5), None, None, False, "float32"),
    ((4, 3), 0, "int64", True, "int32"),
    ((6,), 0, "float64", False, "int32"),
    ((2, 7), None, None, True, "int32"),
]


@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("shape,axis,dtype,exclusive,in_dtype", SCAN_CASES, ids=str)
def test_cumulative(kind, shape, axis, dtype, exclusive, in_dtype):
    low, high = (0.5, 1.5) if kind == "prod" and in_dtype == "float32" else (-2, 2)
    x = rand(shape, in_dtype, low, high)
    fn = op.cumsum if kind == "sum" else op.cumprod
    legal = check_op(fn, [x], np_cumulative(x, kind, axis, dtype, exclusive), rtol=1e-5, atol=1e-5,
                     axis=axis, dtype=dtype, exclusive=exclusive)
    assert f'T.block("T_cum{kind}")' in legal.script()


def test_cumsum_prints_and_legalizes_as_a_scan():
    """Printed as TVM 0.27 prints it (``dtype=None``); legalized into one block whose scanned
    axis is a scan iterator, which AnnotateTIROpPattern finds opaque, so FuseOps leaves it alone."""
    mod, _ = build_op_module(op.cumsum, [rand((2, 3))], axis=1)
    assert "R.cumsum(x0, axis=1, dtype=None, exclusive=False)" in mod.script()
    legal = LegalizeOps()(mod)
    text = legal.script()
    assert "def cumsum(" in text and 'T.func_attr({"tir.noalias": True})' in text
    assert AnnotateTIROpPattern()(legal)["cumsum"].attrs["op_pattern"] == 8
    assert "v_ax1 = T.axis.scan(T.int64(3), ax1)" in text
    assert ("T_cumsum[v_ax0, v_ax1] = T.if_then_else(v_ax1 == T.int64(0), x0[v_ax0, v_ax1], "
            "T_cumsum[v_ax0, v_ax1 - T.int64(1)] + x0[v_ax0, v_ax1])") in text
    # TVM 0.25 wrote an unset dtype as "void": the same call
    again = tvms.parse(mod.script().replace("dtype=None", 'dtype="void"'))
    assert again.script() == mod.script()


def test_cumsum_symbolic_and_in_the_zero_pipeline():
    """A symbolic scanned extent (and the flattened length ``2 * n``) compile once; in the zero
    pipeline the scan stays a kernel of its own while its neighbours fuse around it."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([2, n], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(op.cumsum(x, axis=1))
        b = bb.emit(op.cumprod(x))
        bb.emit_func_output(relax.Tuple([a, b]))
    text = bb.get().script()
    assert 'R.Tensor((2 * n,), dtype="float32") = R.cumprod(x, axis=None, dtype=None, exclusive=False)' in text
    legal = LegalizeOps()(bb.get())
    for cols in (1, 6):
        xs = rand((2, cols), "float32", 0.5, 1.5)
        got_a, got_b = run(legal, [xs])
        np.testing.assert_allclose(got_a, np.cumsum(xs, axis=1), rtol=1e-5)
        np.testing.assert_allclose(got_b, np.cumprod(xs), rtol=1e-5)

    y = relax.Var("y", relax.TensorStructInfo([3, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [y]):
        with bb.dataflow():
            e = bb.emit(op.exp(y))
            c = bb.emit(op.cumsum(e, axis=1))
            out = bb.emit_output(op.multiply(c, c))
        bb.emit_func_output(out)
    fused = relax.get_pipeline("zero")(bb.get())
    calls = [b.value.args[0].name_hint for b in fused["main"].body.blocks[0].bindings]
    assert calls == ["tir_exp", "cumsum", "multiply"]
    ys = rand((3, 4))
    vm = relax.VirtualMachine(tvms.compile(fused, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](ys).numpy(), np.cumsum(np.exp(ys), axis=1) ** 2, rtol=1e-5)


@pytest.mark.parametrize("fn,attrs,message", [
    (op.cumsum, {"axis": 2}, "axis 2 is out of range for a tensor of rank 2"),
    (op.cumsum, {"axis": [0]}, "axis must be an integer or None"),
    (op.cumprod, {"dtype": "float33"}, "dtype must be a dtype"),
    (op.cumsum, {"exclusive": 1}, "exclusive must be True or False"),
    (op.cumsum, {"dtype": "bool"}, "running sum or product of bools needs a numeric dtype="),
])
def test_cumulative_errors(fn, attrs, message):
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    with pytest.raises(ValueError, match=message):
        fn(x, **attrs)
