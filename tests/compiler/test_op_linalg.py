"""Linear algebra (tvmscript/ir/op/linalg.py, compiler/op/linalg.py): matmul on 1-D/2-D/batched operands with broadcast batch
dims and out_dtype, symbolic inference; linear (``x @ w.T + b``) as a registered op, from Python
and from TVMScript text; einsum (NumPy's, ellipsis and implicit output included); located
diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.diagnostics import TVMScriptError

from support.op_check import check_op

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
    # TVM's helper: the weight is transposed, then multiplied (then the bias added).
    assert "T_transpose" in legal.script() or len(sw) == 1


def test_linear_out_dtype_and_errors():
    x, w = arr(2, 3, dtype="float16"), arr(4, 3, dtype="float16")
    check_op(relax.op.linear, [x, w], x.astype("float32") @ w.astype("float32").T, rtol=1e-3, atol=1e-3,
             out_dtype="float32")
    xv = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    with pytest.raises(ValueError, match="reduction dimensions differ"):
        relax.op.linear(xv, relax.Var("w", relax.TensorStructInfo([4, 5], "float32")))
    with pytest.raises(ValueError, match="do not broadcast"):
        relax.op.linear(xv, relax.Var("w", relax.TensorStructInfo([4, 3], "float32")),
                        relax.Var("b", relax.TensorStructInfo([5], "float32")))


SRC = '''@R.function
def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((4,), "float32")):
    lv = {}
    return lv
'''


def test_linear_from_text_expands_as_tvm():
    # TVM 0.27's printout of the same function, but for out_dtype (tvms prints "void").
    func = tvms.parse(SRC.format("R.linear(x, w, b)"))
    assert [d.value for d in func.ret_struct_info.shape] == [2, 4]
    assert ('    gv: R.Tensor((3, 4), dtype="float32") = R.permute_dims(w, axes=None)\n'
            '    gv1: R.Tensor((2, 4), dtype="float32") = R.matmul(x, gv, out_dtype="void")\n'
            '    lv: R.Tensor((2, 4), dtype="float32") = R.add(gv1, b)\n') in func.script()
    func = tvms.parse(SRC.format("R.linear(x, w)"))
    assert '    lv: R.Tensor((2, 4), dtype="float32") = R.matmul(x, gv, out_dtype="void")\n' in func.script()


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
    assert (info.value.span.line, info.value.span.col) == (3, 10)  # the R.linear call its add is part of


# ----------------------------------------------------------------------------- einsum


def _einsum(*operands, subscripts):
    return relax.op.einsum(operands, subscripts)


@pytest.mark.parametrize("subscripts,shapes,contraction", [
    ("ij,jk->ik", [(2, 3), (3, 4)], True),
    ("bhij,hjk->bhik", [(2, 5, 3, 4), (5, 4, 6)], True),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 6)], True),  # implicit output, broadcast ellipsis
    ("i,i->", [(7,), (7,)], True),
    ("bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 2)], True),
    ("ij,kj->ikj", [(2, 3), (4, 3)], False),  # nothing summed: a broadcast product
], ids=str)
def test_einsum(subscripts, shapes, contraction):
    """Contractions go through check_op (their pattern is the op table's out-ewise-fusable);
    a product without a summed subscript analyzes as a broadcast and is run directly."""
    ops = [arr(*s) for s in shapes]
    expected = np.einsum(subscripts, *ops).astype("float32")
    if contraction:
        legal = check_op(_einsum, ops, expected, rtol=1e-4, atol=1e-4, subscripts=subscripts)
        assert 'T.block("T_einsum")' in legal.script()
    else:
        np.testing.assert_allclose(_run(_einsum_module(ops, subscripts), ops), expected, rtol=1e-5, atol=1e-5)


def _einsum_module(ops, subscripts):
    params = [relax.Var(f"x{i}", relax.TensorStructInfo(list(o.shape), "float32")) for i, o in enumerate(ops)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        bb.emit_func_output(bb.emit(relax.op.einsum(params, subscripts)))
    return bb.get()


def _run(mod, arrays):
    from tvmscript.compiler.transform import LegalizeOps

    vm = relax.VirtualMachine(tvms.compile(LegalizeOps()(mod), target="llvm"), tvms.cpu())
    return vm["main"](*arrays).numpy()


@pytest.mark.parametrize("subscripts,shape", [("ii->i", (3, 3)), ("ij->ji", (2, 3)), ("ij->", (2, 3)), ("ii", (4, 4)),
                                              ("i...->...", (3, 2, 2))], ids=str)
def test_einsum_one_operand(subscripts, shape):
    x = arr(*shape)
    np.testing.assert_allclose(_run(_einsum_module([x], subscripts), [x]), np.einsum(subscripts, x),
                               rtol=1e-5, atol=1e-5)


def test_einsum_prints_and_legalizes_like_tvm():
    a = relax.Var("a", relax.TensorStructInfo([2, 3], "float32"))
    n = tir.Var("int64", "n")
    b = relax.Var("b", relax.TensorStructInfo([3, n], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        bb.emit_func_output(bb.emit(relax.op.einsum((a, b), "ij,jk->ik")))
    text = bb.get().script()
    assert 'R.Tensor((2, n), dtype="float32") = R.einsum((a, b), subscripts="ij,jk->ik")' in text
    assert tvms.parse(text).script() == text
    from tvmscript.compiler.transform import LegalizeOps

    legal = LegalizeOps()(bb.get())
    assert "T_einsum[v_ax0, v_ax1] = T_einsum[v_ax0, v_ax1] + a[v_ax0, v_j] * b[v_j, v_ax1]" in legal.script()
    xa, xb = arr(2, 3), arr(3, 5)
    vm = relax.VirtualMachine(tvms.compile(legal, target="llvm"), tvms.cpu())
    np.testing.assert_allclose(vm["main"](xa, xb).numpy(), xa @ xb, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("subscripts,shapes,message", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "subscript 'j' has extent 3 and 4"),
    ("ij,jk", [(2, 3)], "name 2 operand(s), but 1 are given"),
    ("ijk,jk->ik", [(2, 3), (3, 4)], "3 subscripts for an operand of rank 2"),
    ("ij,jk->iz", [(2, 3), (3, 4)], "output subscript 'z' appears in no operand"),
    ("ij,jk->ii", [(2, 3), (3, 4)], "output subscript 'i' appears more than once"),
    ("i1,jk->ik", [(2, 3), (3, 4)], "'1' is not a subscript letter"),
])
def test_einsum_errors(subscripts, shapes, message):
    ops = [relax.Var(f"x{i}", relax.TensorStructInfo(list(s), "float32")) for i, s in enumerate(shapes)]
    with pytest.raises(ValueError) as info:
        relax.op.einsum(ops, subscripts)
    assert message in str(info.value)


def test_text_einsum_error_points_at_subscripts():
    src = ('@R.function\ndef main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((4, 5), "float32")):\n'
           '    y = R.einsum((a, b), subscripts="ij,jk->ik")\n    return y\n')
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert "subscript 'j' has extent 3 and 4" in info.value.message
    assert (info.value.span.line, info.value.span.col) == (3, src.split("\n")[2].index('"ij') + 1)


def test_linear_and_nested_calls_in_a_dataflow_block_as_tvm_prints_them():
    # TVM 0.27's printout of this function (out_dtype=None there; tvms prints "void").
    func = tvms.parse('''# from tvm.script import relax as R
@R.function
def f(x: R.Tensor((2, 4), "float32"), w: R.Tensor((3, 4), "float32"), b: R.Tensor((3,), "float32")):
    with R.dataflow():
        y = R.linear(x, w, b)
        z = R.rsqrt(R.add(y, y))
        R.output(z)
    return z
''')
    assert ('''    with R.dataflow():
        lv: R.Tensor((4, 3), dtype="float32") = R.permute_dims(w, axes=None)
        lv1: R.Tensor((2, 3), dtype="float32") = R.matmul(x, lv, out_dtype="void")
        y: R.Tensor((2, 3), dtype="float32") = R.add(lv1, b)
        lv3: R.Tensor((2, 3), dtype="float32") = R.add(y, y)
        z: R.Tensor((2, 3), dtype="float32") = R.rsqrt(lv3)
        R.output(z)
''') in func.script()
