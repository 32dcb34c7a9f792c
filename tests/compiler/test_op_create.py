"""Tensor creation ops (tvmscript/ir/op/create.py, compiler/op/create.py): functions with no tensor inputs legalize, compile
and run (``R.call_tir(cls.zeros, R.tuple(), ...)``); fill values and dtypes; arange's length
``ceil((end - start) / step)``, its defaults (``arange(n)``, dtype from the bounds), constant
folding and symbolic extents; tril/triu (with a GPT causal mask of symbolic size); located
diagnostics from text."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform import LegalizeOps

from support.op_check import assert_located, check_op, legalize_checked, run

X = np.random.default_rng(3).standard_normal((2, 3)).astype("float32")


@pytest.mark.parametrize("shape,dtype", [((2, 3), "float32"), ((4,), "int32"), ((1, 2, 2), "float16"), ((), "int64")])
def test_zeros_ones(shape, dtype):
    legal = check_op(relax.op.zeros, [shape], np.zeros(shape, dtype), dtype=dtype)
    assert "R.call_tir(cls.zeros, R.tuple()" in legal.script() and "T_full" in legal.script()
    check_op(relax.op.ones, [shape], np.ones(shape, dtype), dtype=dtype)


@pytest.mark.parametrize("shape,value,dtype,expected_dtype", [
    ((2, 3), relax.const(1.5, "float32"), "void", "float32"),
    ((3,), relax.const(1.5, "float32"), "float16", "float16"),
    ((2, 2), relax.const(7, "int32"), "void", "int32"),
    ((2, 1, 2), relax.const(-2, "int32"), "float32", "float32"),
])
def test_full(shape, value, dtype, expected_dtype):
    check_op(relax.op.full, [shape, value], np.full(shape, value.data.item(), expected_dtype), dtype=dtype)


def test_full_with_a_tensor_fill_value():
    v = np.asarray(2.5, dtype="float32")
    check_op(relax.op.full, [(2, 3), v], np.full((2, 3), 2.5, "float32"))


@pytest.mark.parametrize("dtype", ["void", "int32", "float16"])
def test_like_ops(dtype):
    out = X.dtype if dtype == "void" else dtype
    check_op(relax.op.zeros_like, [X], np.zeros_like(X, dtype=out), dtype=dtype)
    check_op(relax.op.ones_like, [X], np.ones_like(X, dtype=out), dtype=dtype)
    check_op(relax.op.full_like, [X, relax.const(3, "int32")], np.full_like(X, 3, dtype=out), dtype=dtype)


def test_full_errors():
    with pytest.raises(ValueError, match="fill_value must be a scalar"):
        relax.op.full((2, 3), relax.const(np.ones(2, "float32")))
    with pytest.raises(TypeError):
        relax.op.zeros((2, 3))  # dtype is required, as in TVM


@pytest.mark.parametrize("args,dtype,expected", [
    ((0, 10, 3), None, np.arange(0, 10, 3, dtype="int64")),
    ((5,), None, np.arange(5, dtype="int64")),
    ((0.5, 3.0, 0.5), "float32", np.arange(0.5, 3.0, 0.5, dtype="float32")),
    ((10, 0, -3), "int32", np.arange(10, 0, -3, dtype="int32")),
    ((3, 3), None, np.arange(3, 3, dtype="int64")),
])
def test_arange(args, dtype, expected):
    kwargs = {} if dtype is None else {"dtype": dtype}
    legal = check_op(relax.op.arange, list(args), expected, **kwargs)
    assert "R.arange(" not in legal.script()  # constant bounds fold to a constant, as TVM's


def test_arange_prints_like_tvm():
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        out = bb.emit(relax.op.arange(5))
        bb.emit_func_output(out)
    text = bb.get().script()
    assert 'R.arange(R.prim_value(0), R.prim_value(5), R.prim_value(1), dtype="int64")' in text
    assert tvms.parse(text).script() == text


def test_arange_symbolic():
    """``arange(0, n)`` with ``n`` from an input's shape: a T_arange PrimFunc of extent n. (Not
    run: a call_tir with no tensor argument carrying n would need TVM's tir_vars, which
    te.create_prim_func here cannot make yet.)"""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit(relax.op.arange(0, n, 2))
        bb.emit_func_output(out)
    mod = bb.get()
    assert mod["main"].ret_struct_info.ndim == 1
    legal = LegalizeOps()(tvms.parse(mod.script()))
    assert "T_arange" in legal.script()
    assert "(n + T.int64(1)) // T.int64(2)" in legal.script()


# ----------------------------------------------------------------------------- tril, triu


@pytest.mark.parametrize("shape,k,dtype", [((4, 5), 0, "float32"), ((2, 3, 4), 1, "float32"),
                                           ((5, 5), -2, "int32"), ((3, 2), 3, "float32")], ids=str)
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_trilu(name, shape, k, dtype):
    x = (np.random.default_rng(5).standard_normal(shape) * 4).astype(dtype)
    check_op(getattr(relax.op, name), [x, k], getattr(np, name)(x, k))


def test_trilu_prints_and_legalizes_like_tvm():
    """``R.tril(x, R.prim_value(1))`` (k a PrimValue argument, 0 when left out) legalizes to
    TVM's ``trilu`` block: ``T.Select(col <= row + k, x, 0)``."""
    x = relax.Var("x", relax.TensorStructInfo([2, 3, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(relax.op.tril(x, 1))
        bb.emit_func_output(bb.emit(relax.op.triu(a)))
    text = bb.get().script()
    assert "R.tril(x, R.prim_value(1))" in text and "R.triu(gv, R.prim_value(0))" in text
    legal = LegalizeOps()(bb.get()).script()
    assert "trilu[v_i0, v_i1, v_i2] = T.Select(v_i2 <= v_i1 + T.int64(1), x[v_i0, v_i1, v_i2], T.float32(0.0))" in legal
    assert "T.Select(v_i1 <= v_i2, gv[v_i0, v_i1, v_i2], T.float32(0.0))" in legal


def test_causal_mask_of_symbolic_size():
    """GPT's causal mask: ``triu`` of an (n, n) tensor, compiled once and run at two lengths."""
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([1, n, n], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.triu(x, 1)))
    legal = legalize_checked(bb.get())
    for size in (3, 6):
        a = np.full((1, size, size), -1e9, "float32")
        np.testing.assert_array_equal(run(legal, [a]), np.triu(a, 1))


def test_trilu_errors():
    with pytest.raises(ValueError, match="rank 2 or more"):
        relax.op.tril(relax.Var("v", relax.TensorStructInfo([4], "float32")))
    with pytest.raises(ValueError, match="k must be an integer"):
        relax.op.triu(relax.Var("m", relax.TensorStructInfo([4, 4], "float32")), 1.5)


located = assert_located


def fn(line: str) -> str:
    return f'@R.function\ndef main(x: R.Tensor((2, 3), "float32")):\n    lv = {line}\n    return lv\n'


def test_text_diagnostics():
    located(fn('R.zeros(R.shape([2, 3]), dtype="float33")'), "unknown dtype", '"float33"')
    located(fn('R.full(R.shape([2]), x, dtype="void")'), "fill_value must be a scalar", "x,")
    located(fn('R.arange(R.prim_value(0), R.prim_value(4), R.prim_value(0), dtype="int64")'), "step may not be 0",
            "R.prim_value(0), dtype")
    mod = tvms.parse(fn("R.arange(4)"))
    assert "R.arange(R.prim_value(0), R.prim_value(4), R.prim_value(1), dtype=\"int64\")" in mod.script()
