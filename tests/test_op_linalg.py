"""Linear algebra (compiler/op/linalg.py): matmul on 1-D/2-D/batched operands with broadcast batch
dims and out_dtype, symbolic inference; linear (``x @ w.T + b``) as a registered op, from Python
and from TVMScript text; located diagnostics."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import tvmscript as tvms  # noqa: E402
from tvmscript import relax, tir  # noqa: E402
from tvmscript.diagnostics import TVMScriptError  # noqa: E402

from op_check import check_op  # noqa: E402

RNG = np.random.default_rng(11)


def arr(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((3, 4), (4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 6)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5))])
def test_matmul(sa, sb):
    a, b = arr(*sa), arr(*sb)
    check_op(relax.op.matmul, [a, b], np.matmul(a, b), rtol=1e-4, atol=1e-5)


def test_matmul_out_dtype():
    a, b = arr(3, 4, dtype="float16"), arr(4, 2, dtype="float16")
    check_op(relax.op.matmul, [a, b], np.matmul(a.astype("float32"), b.astype("float32")),
             rtol=1e-3, atol=1e-3, out_dtype="float32")
    ia = RNG.integers(-100, 100, (2, 5)).astype("int8")
    ib = RNG.integers(-100, 100, (5, 3)).astype("int8")
    check_op(relax.op.matmul, [ia, ib], ia.astype("int32") @ ib.astype("int32"), out_dtype="int32")


def test_matmul_symbolic_inference():
    n, m = tir.Var("int64", "n"), tir.Var("int64", "m")
    a = relax.Var("a", relax.TensorStructInfo([n, 4], "float32"))
    b = relax.Var("b", relax.TensorStructInfo([4, m], "float32"))
    out = relax.op.matmul(a, b).struct_info
    assert out.shape[0] is n and out.shape[1] is m
    c = relax.Var("c", relax.TensorStructInfo([2, 1, n, 4], "float32"))
    d = relax.Var("d", relax.TensorStructInfo([3, 4, 5], "float32"))
    shape = relax.op.matmul(c, d).struct_info.shape
    assert [shape[0].value, shape[1].value, shape[3].value] == [2, 3, 5] and shape[2] is n
    with pytest.raises(ValueError, match="reduction dimensions differ"):
        relax.op.matmul(a, relax.Var("e", relax.TensorStructInfo([3, 2], "float32")))
    with pytest.raises(ValueError, match="do not broadcast"):
        relax.op.matmul(relax.Var("f", relax.TensorStructInfo([2, 3, 4], "float32")),
                        relax.Var("g", relax.TensorStructInfo([3, 4, 5], "float32")))


@pytest.mark.parametrize("sx,sw,sb", [((2, 3), (4, 3), (4,)), ((2, 5, 3), (4, 3), None), ((3,), (4, 3), (4,)),
                                      ((2, 3), (3,), None), ((2, 3), (4, 3), (2, 1))])
def test_linear(sx, sw, sb):
    x, w = arr(*sx), arr(*sw)
    args = [x, w] + ([arr(*sb)] if sb else [])
    expected = np.matmul(x, w.T) + (args[2] if sb else 0)
    legal = check_op(relax.op.linear, args, expected.astype("float32"), rtol=1e-4, atol=1e-5)
    assert "T_transpose" not in legal.script()


def test_linear_out_dtype_and_errors():
    x, w = arr(2, 3, dtype="float16"), arr(4, 3, dtype="float16")
    check_op(relax.op.linear, [x, w], x.astype("float32") @ w.astype("float32").T, rtol=1e-3, atol=1e-3,
             out_dtype="float32")
    xv = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    with pytest.raises(ValueError, match="reduction dimensions differ"):
        relax.op.linear(xv, relax.Var("w", relax.TensorStructInfo([4, 5], "float32")))
    with pytest.raises(ValueError, match="bias"):
        relax.op.linear(xv, relax.Var("w", relax.TensorStructInfo([4, 3], "float32")),
                        relax.Var("b", relax.TensorStructInfo([5], "float32")))


SRC = '''@R.function
def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((4,), "float32")):
    lv = {}
    return lv
'''


def test_linear_from_text():
    func = tvms.parse(SRC.format("R.linear(x, w, b)"))
    assert [d.value for d in func.ret_struct_info.shape] == [2, 4]
    assert 'R.linear(x, w, b, out_dtype="void")' in func.script()
    func = tvms.parse(SRC.format("R.linear(x, w)"))
    assert 'R.linear(x, w, out_dtype="void")' in func.script()


def test_text_diagnostics():
    src = SRC.format("R.matmul(x, b)")
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert "reduction dimensions differ" in info.value.message
    assert (info.value.span.line, info.value.span.col) == (3, 10)
    src = SRC.format("R.linear(x, w, x)")
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert "do not broadcast" in info.value.message
    assert (info.value.span.line, info.value.span.col) == (3, src.split("\n")[2].index("x)") + 1)
