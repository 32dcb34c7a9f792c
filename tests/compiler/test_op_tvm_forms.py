"""Relax op forms TVM's own tests use: binary ops with a prim-value operand, ``atan2``,
``ewise_fma``, ``collapse_sum_like``/``collapse_sum_to``, ``tensor_to_shape``, ``take`` of a
prim-value index, ``reverse_sequence``, ``median``, ``layout_transform`` with a lambda index
map, and the shapes TVM infers where older checks here were stricter (uneven ``split``
sections, unsorted split indices, ``concat(axis=None)``, einsum extents of 1). Each is checked
for its inferred struct info (as TVM 0.27 infers it), its text round trip, and, where TVM
legalizes the op, its legalized kernel against NumPy (``op_check.check_op``).

Two legalization fidelity points have their own tests, their expected text taken from what
TVM 0.27's LegalizeOps prints for the same module:

(a) a scalar constant operand of a binary op becomes a TIR immediate in the kernel
    (``x[v_ax0, v_ax1] + T.float32(1.0)``), not a 0-d buffer parameter;
(b) shapes given as Python ints stay int64 (``T.Buffer((T.int64(4), T.int64(2)), ...)``).
"""

from __future__ import annotations

import numpy as np
import pytest

from support.op_check import assert_located, check_op, legalize_checked, run

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform import LegalizeOps

RNG = np.random.default_rng(7)
op = relax.op


def arr(*shape, dtype="float32"):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


def var(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(list(shape), dtype))


def func(params: str, *lines: str) -> str:
    body = "".join(f"    {line}\n" for line in lines)
    return f"@R.function\ndef main({params}):\n{body}"


def roundtrip(src: str):
    """Parse, print, parse again: the same text and an equal structure; the parsed function."""
    f = tvms.parse(src)
    text = f.script()
    again = tvms.parse(text)
    assert again.script() == text
    tvms.ir.assert_structural_equal(again, f)
    return f


def ret_text(src: str) -> str:
    from tvmscript.printer import sinfo_text

    return sinfo_text(tvms.parse(src).ret_struct_info)


def prim(value) -> relax.PrimValue:
    """``R.prim_value(value)`` with its struct info (a typed TIR immediate)."""
    return relax.PrimValue(value, relax.PrimStructInfo(value.dtype, value))


# ----------------------------------------------------------------------------- binary ops with a prim value


@pytest.mark.parametrize("call,ret", [
    ("R.add(x, y)", 'R.Tensor((2, 3), dtype="float32")'),
    ("R.power(y, x)", 'R.Tensor((2, 3), dtype="float32")'),
    ("R.floor_divide(x, y)", 'R.Tensor((2, 3), dtype="float32")'),
    ("R.greater(x, y)", 'R.Tensor((2, 3), dtype="bool")'),
    ("R.equal(x, n)", 'R.Tensor((2, 3), dtype="bool")'),  # TVM compares across dtypes
    ("R.maximum(y, y)", "R.Prim(\"float32\")"),
    ("R.less(y, y)", "R.Prim(\"bool\")"),
])
def test_binary_prim_operand_inference(call, ret):
    src = func('x: R.Tensor((2, 3), "float32"), y: R.Prim("float32"), n: R.Prim("int64")', f"gv = {call}", "return gv")
    assert ret_text(src) == ret
    roundtrip(src)


def test_binary_prim_operand_dtype_mismatch_is_located():
    src = func('x: R.Tensor((2, 3), "float32"), n: R.Prim("int64")', "gv = R.add(x, n)", "return gv")
    assert_located(src, "operand dtypes differ: float32 and int64", "R.add")


@pytest.mark.parametrize("fn,ref", [(op.subtract, np.subtract), (op.minimum, np.minimum), (op.less, np.less)])
def test_binary_prim_value_constant_legalizes(fn, ref):
    x = arr(2, 3)
    legal = check_op(fn, [x, prim(tir.FloatImm("float32", 0.5))], ref(x, np.float32(0.5)))
    assert "T.float32(0.5)" in legal.script()


def test_binary_prim_variable_operand_is_left_for_the_vm():
    # A prim-value variable would be a scalar parameter of the kernel, which call_te does not
    # pass yet: the call stays a high-level op rather than becoming a wrong kernel.
    src = ('@I.ir_module\nclass Module:\n    @R.function\n'
           '    def main(x: R.Tensor((2, 3), "float32"), y: R.Prim("float32")):\n'
           '        gv = R.add(x, y)\n        return gv\n')
    assert "= R.add(x, y)" in LegalizeOps()(tvms.parse(src)).script()


# ----------------------------------------------------------------------------- (a) scalar constants are immediates

_SCALAR_MODULE = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        gv: R.Tensor((2, 3), dtype="float32") = R.add(x, R.const(1.0, "float32"))
        gv2: R.Tensor((2, 3), dtype="float32") = R.multiply(R.const(2.0, "float32"), gv)
        return gv2
"""

# What TVM 0.27's LegalizeOps prints for _SCALAR_MODULE (its T.sblock/tirx spelt as tvms's).
_SCALAR_EXPECTED_ADD = """    @T.prim_func(private=True)
    def add(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), T_add: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for ax0, ax1 in T.grid(T.int64(2), T.int64(3)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(x[v_ax0, v_ax1])
                T.writes(T_add[v_ax0, v_ax1])
                T_add[v_ax0, v_ax1] = x[v_ax0, v_ax1] + T.float32(1.0)
"""


def test_scalar_constant_operand_becomes_an_immediate():
    legal = LegalizeOps()(tvms.parse(_SCALAR_MODULE))
    text = legal.script()
    assert _SCALAR_EXPECTED_ADD in text
    assert "T_multiply[v_ax0, v_ax1] = T.float32(2.0) * gv[v_ax0, v_ax1]" in text
    assert "gv = R.call_tir(cls.add, (x,), out_sinfo=" in text
    assert "gv2 = R.call_tir(cls.multiply, (gv,), out_sinfo=" in text
    x = arr(2, 3)
    np.testing.assert_allclose(run(legal, [x]), 2.0 * (x + 1.0), rtol=1e-6)


def test_only_the_second_of_two_scalar_constants_becomes_an_immediate():
    # TVM converts the second operand first and then leaves the first alone.
    legal = check_op(op.multiply, [relax.const(np.array(2, "int8")), relax.const(np.array(3, "int8"))],
                     np.array(6, "int8"))
    assert "A[()] * T.int8(3)" in legal.script()


def test_higher_rank_constants_stay_buffers():
    x = arr(2, 3)
    c = np.array([1.0, 2.0, 3.0], "float32")
    legal = check_op(op.add, [x, relax.const(c)], x + c)
    assert "B: T.Buffer((T.int64(3),), \"float32\")" in legal.script()


# ----------------------------------------------------------------------------- (b) shapes stay int64


@pytest.mark.parametrize("make,ref", [
    (lambda x: op.broadcast_to(x, (4, 2, 3)), lambda x: np.broadcast_to(x, (4, 2, 3))),
    (lambda x: op.reshape(x, (3, 2)), lambda x: x.reshape(3, 2)),
    (lambda x: op.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1))),
    (lambda x: op.zeros((2, 3), "float32"), lambda x: np.zeros((2, 3), "float32")),
    (lambda x: op.ones((2, 3), "float32"), lambda x: np.ones((2, 3), "float32")),
    (lambda x: op.full((2, 3), relax.const(np.array(1.5, "float32"))), lambda x: np.full((2, 3), 1.5, "float32")),
])
def test_python_int_shapes_stay_int64(make, ref):
    x = arr(2, 3)
    v = var("x0", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [v]):
        out = bb.emit(make(v))
        bb.emit_func_output(out)
    legal = LegalizeOps()(bb.get())
    text = legal.script()
    for line in text.splitlines():
        if "T.Buffer(" in line or "T.grid(" in line or "range(" in line:
            # every extent is T.int64(n): no bare int32 literal among the dims
            assert "((2" not in line and "(4," not in line and "T.grid(2" not in line and "T.grid(4" not in line, line
    np.testing.assert_allclose(run(legal, [x]), ref(x))


def test_broadcast_to_buffer_matches_tvm():
    v = var("x", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [v]):
        out = bb.emit(op.broadcast_to(v, (4, 2, 3)))
        bb.emit_func_output(out)
    text = LegalizeOps()(bb.get()).script()
    # TVM 0.27's text for the same call
    assert ('def broadcast_to(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), T_broadcast_to: '
            'T.Buffer((T.int64(4), T.int64(2), T.int64(3)), "float32")):') in text
    assert "for ax0, ax1, ax2 in T.grid(T.int64(4), T.int64(2), T.int64(3)):" in text


# ----------------------------------------------------------------------------- atan2, ewise_fma


def test_atan2_broadcasts_and_legalizes():
    x, y = arr(2, 3), arr(3)
    legal = check_op(op.atan2, [x, y], np.arctan2(x, y), rtol=1e-5, atol=1e-6)
    assert "T_atan2[v_ax0, v_ax1] = T.atan2(x0[v_ax0, v_ax1], x1[v_ax1])" in legal.script()


def test_atan2_symbolic_shapes():
    src = func('x: R.Tensor((1, "c", "d"), "float32"), y: R.Tensor(("a", "b", "c", 1), "float32")',
               "gv = R.atan2(x, y)", "return gv")
    assert ret_text(src) == 'R.Tensor((a, b, c, d), dtype="float32")'


def test_ewise_fma_inference():
    src = func('x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), z: R.Tensor(dtype="float32", ndim=2)',
               "gv = R.ewise_fma(x, y, y)", "gv2 = R.ewise_fma(x, y, z)", "return (gv, gv2)")
    assert ret_text(src) == 'R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor(dtype="float32", ndim=2))'
    roundtrip(src)
    bad = func('x: R.Tensor((2, 3), "float32"), y: R.Tensor((3,), "float32")', "gv = R.ewise_fma(x, x, y)",
               "return gv")
    assert_located(bad, "the operands' ranks differ: 2, 2, 1", "R.ewise_fma")


# ----------------------------------------------------------------------------- collapse_sum_like, collapse_sum_to


def test_collapse_sum_like():
    x, t = arr(3, 4, 5), arr(4, 1)
    legal = check_op(op.collapse_sum_like, [x, t], x.sum(axis=(0, 2))[:, None], rtol=1e-5, atol=1e-5)
    assert "x0_red" in legal.script()


def test_collapse_sum_to():
    x = arr(2, 3)
    check_op(op.collapse_sum_to, [x, (1, 3)], x.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)
    check_op(op.collapse_sum_to, [x, (3,)], x.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_collapse_sum_target_must_broadcast():
    src = func('x: R.Tensor((2, 3), "float32")', "gv = R.collapse_sum_to(x, R.shape([4]))", "return gv")
    assert_located(src, "does not broadcast to the data's shape (2, 3)", "R.shape")


# ----------------------------------------------------------------------------- tensor_to_shape


def test_tensor_to_shape_inference():
    src = func('x: R.Tensor((2,), "int64"), y: R.Tensor((16,), "float32")',
               "lv = R.tensor_to_shape(x)", "gv = R.reshape(y, lv)", "return gv")
    f = roundtrip(src)
    assert ret_text(src) == 'R.Tensor(dtype="float32", ndim=2)'
    assert "lv: R.Shape(ndim=2) = R.tensor_to_shape(x)" in f.script()
    bad = func('x: R.Tensor((2, 3), "int64")', "gv = R.tensor_to_shape(x)", "return gv")
    assert_located(bad, "needs a 1-D tensor, got rank 2", "x)")


# ----------------------------------------------------------------------------- take with a prim-value index


def test_take_prim_index_inference():
    src = func('x: R.Tensor((2, 3, 4), "float32"), i: R.Prim("int64")', "gv = R.take(x, i, axis=1)", "return gv")
    assert ret_text(src) == 'R.Tensor((2, 4), dtype="float32")'
    roundtrip(src)
    sym = func('x: R.Tensor((2, "n", 4), "float32")', "n = T.int64()", "gv = R.take(x, R.prim_value(n - 1), axis=1)",
               "return gv")
    assert ret_text(sym) == 'R.Tensor((2, 4), dtype="float32")'


def test_take_prim_value_constant_index_legalizes():
    x = arr(2, 3, 4)
    # its loads index the output's loop variables in order, one left out: broadcast, not injective
    legal = check_op(op.take, [x, prim(tir.IntImm("int64", 2))], x[:, 2, :], axis=1, expect_pattern="broadcast")
    assert "x0[v_ax0, T.int64(2), v_ax1]" in legal.script()


def test_take_symbolic_prim_index_legalizes():
    src = ('@I.ir_module\nclass Module:\n    @R.function\n'
           '    def main(x: R.Tensor((2, "n", 4), "float32")):\n        n = T.int64()\n'
           '        gv = R.take(x, R.prim_value(n - 1), axis=1)\n        return gv\n')
    legal = LegalizeOps()(tvms.parse(src))
    assert "T_take[v_ax0, v_ax1] = x[v_ax0, n - T.int64(1), v_ax1]" in legal.script()  # TVM's load
    x = arr(2, 5, 4)
    np.testing.assert_allclose(run(legal, [x]), x[:, 4, :])


# ----------------------------------------------------------------------------- reverse_sequence


def _reverse_sequence_ref(x, lengths, seq_axis, batch_axis):
    out = x.copy()
    for b, n in enumerate(lengths):
        n = min(int(n), x.shape[seq_axis])
        if n <= 1:
            continue
        src = np.take(x, b, axis=batch_axis)
        dst_axis = seq_axis - (seq_axis > batch_axis)
        rev = np.concatenate([np.flip(np.take(src, range(n), axis=dst_axis), axis=dst_axis),
                              np.take(src, range(n, x.shape[seq_axis]), axis=dst_axis)], axis=dst_axis)
        idx = [slice(None)] * x.ndim
        idx[batch_axis] = b
        out[tuple(idx)] = rev
    return out


@pytest.mark.parametrize("seq_axis,batch_axis,lengths", [(0, 1, [1, 3]), (1, 0, [4, 2, 0, 3]), (-1, 0, [5, 2, 1, 3])])
def test_reverse_sequence(seq_axis, batch_axis, lengths):
    x = arr(4, 3, 4) if batch_axis == 0 else arr(4, 2, 3)
    lens = np.array(lengths, "int64")
    expected = _reverse_sequence_ref(x, lens, seq_axis % 3, batch_axis)
    check_op(op.reverse_sequence, [x, lens], expected, seq_axis=seq_axis, batch_axis=batch_axis)


def test_reverse_sequence_checks_batch_extent():
    src = func('x: R.Tensor((2, 3), "float32"), s: R.Tensor((2,), "int64")',
               "gv = R.reverse_sequence(x, s, seq_axis=0, batch_axis=1)", "return gv")
    assert_located(src, "seq_lengths has 2 lengths but the data has 3 batches along axis 1", "s,")


# ----------------------------------------------------------------------------- median


def test_median_inference():
    src = func('x: R.Tensor((2, 3, 4), "float32")', "a = R.median(x)", "b = R.median(x, axis=[1], keepdims=True)",
               "c = R.median(x, axis=[0, 2])", "return (a, b, c)")
    assert ret_text(src) == ('R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((2, 1, 4), dtype="float32"), '
                             'R.Tensor((2, 1, 4), dtype="int64")), R.Tensor((3,), dtype="float32"))')
    assert "R.median(x, axis=None, keepdims=False)" in roundtrip(src).script()


def _lower_median(x, axis):
    s = np.sort(x, axis=axis, kind="stable")
    k = (x.shape[axis] - 1) // 2
    idx = np.take(np.argsort(x, axis=axis, kind="stable"), k, axis=axis)
    return np.take(s, k, axis=axis), idx.astype("int64")


@pytest.mark.parametrize("shape,axis", [((5, 4), 0), ((3, 6), 1)])
def test_median_one_axis_values_and_indices(shape, axis):
    x = RNG.integers(0, 3, size=shape).astype("float32")  # many ties: the stable order matters
    values, indices = _lower_median(x, axis)
    check_op(op.median, [x], [values, indices], axis=[axis])


def test_median_all_axes():
    x = arr(3, 4)
    check_op(op.median, [x], np.sort(x.ravel())[(12 - 1) // 2].reshape(1, 1), keepdims=True)


# ----------------------------------------------------------------------------- split, concat, einsum as TVM infers them


def test_split_uneven_sections():
    src = func('x: R.Tensor((2, 10, 4), "float32")', "gv = R.split(x, indices_or_sections=3, axis=1)", "return gv")
    assert ret_text(src) == ('R.Tuple(R.Tensor((2, 4, 4), dtype="float32"), R.Tensor((2, 4, 4), dtype="float32"), '
                             'R.Tensor((2, 2, 4), dtype="float32"))')
    x = arr(2, 10)
    check_op(op.split, [x], np.split(x, [4, 8], axis=1), indices_or_sections=3, axis=1)


def test_split_unsorted_indices():
    src = func('x: R.Tensor((10,), "float32")', "gv = R.split(x, indices_or_sections=[-2, 2, 6, 4, 12, 9])",
               "return gv")
    extents = [f.shape[0].value for f in tvms.parse(src).ret_struct_info.fields]
    assert extents == [0, 2, 4, 0, 6, 0, 1]  # each piece [clamp(a), clamp(b)), empty when b < a


def test_concat_axis_none():
    a, b = arr(2), arr(3)
    pa, pb = var("a", (2,)), var("b", (3,))
    bb = relax.BlockBuilder()
    with bb.function("main", [pa, pb]):
        out = bb.emit(op.concat([pa, pb], axis=None))
        bb.emit_func_output(out)
    mod = bb.get()
    assert "R.concat((a, b), axis=None)" in mod.script()
    np.testing.assert_allclose(run(legalize_checked(mod), [a, b]), np.concatenate([a, b]))
    bad = func('x: R.Tensor((2, 3), "float32")', "gv = R.concat((x, x), axis=None)", "return gv")
    assert_located(bad, "concat with axis=None needs 1-D tensors", "(x, x)")


def test_einsum_letter_extent_one_broadcasts():
    x, y = arr(1, 4), arr(2, 4)
    src = func('x: R.Tensor((1, 4), "float32"), y: R.Tensor((2, 4), "float32")',
               'gv = R.einsum((x, y), subscripts="ij, ij -> i")', "return gv")
    assert ret_text(src) == 'R.Tensor((2,), dtype="float32")'
    check_op(lambda a, b: op.einsum([a, b], "ij,ij->i"), [x, y], (x * y).sum(axis=1), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- layout_transform


def test_layout_transform_text_forms():
    src = func('x: R.Tensor((10,), "float32"), y: R.Tensor((4, 6), "float16")',
               "a = R.layout_transform(x, index_map=lambda i: (i // 4, i % 4), pad_value=2)",
               "b = R.layout_transform(y, index_map=T.index_map(lambda i, j: (j, i)))",
               "return (a, b)")
    text = roundtrip(src).script()
    # TVM 0.27 prints these two calls so
    assert ('a: R.Tensor((3, 4), dtype="float32") = R.layout_transform(x, index_map=T.index_map(lambda i: '
            '(i // 4, i % 4)), pad_value=T.float32(2.0))') in text
    assert ('b: R.Tensor((6, 4), dtype="float16") = R.layout_transform(y, index_map=T.index_map(lambda i, j: '
            '(j, i)), pad_value=None)') in text


def test_layout_transform_rank_must_match():
    src = func('x: R.Tensor((4, 6), "float32")', "a = R.layout_transform(x, index_map=lambda i: (i,))", "return a")
    assert_located(src, "index_map takes 1 indices but the data has rank 2", "i: (i,)")


def test_layout_transform_pads():
    x = arr(10)
    expected = np.concatenate([x, np.full(2, 2.0, "float32")]).reshape(3, 4)
    legal = check_op(op.layout_transform, [x], expected, index_map=lambda i: (i // 4, i % 4), pad_value=2.0)
    assert "def te_layout_transform_with_pad(" in legal.script()


def test_layout_transform_split_and_permute():
    x = arr(2, 8)
    expected = x.reshape(2, 2, 4).transpose(2, 0, 1)  # [j % 4, i, j // 4]
    check_op(op.layout_transform, [x], expected, index_map=lambda i, j: (j % 4, i, j // 4))


# ----------------------------------------------------------------------------- prelu with one slope


def test_prelu_single_slope_broadcasts():
    x, alpha = arr(2, 3), np.array([0.25], "float32")
    legal = check_op(op.nn.prelu, [x, alpha], np.where(x > 0, x, x * 0.25), axis=1)
    # TVM 0.27 broadcasts the slope in a stage of its own
    assert "slope_broadcasted[v_c] = x1[T.int64(0)]" in legal.script()


def test_a_prim_value_built_in_python_knows_its_struct_info():
    """As TVM's constructor: relax.PrimValue(imm) is typed at once, so ops take it directly."""
    v = relax.PrimValue(tir.IntImm("int32", 3))
    assert isinstance(v.struct_info, relax.PrimStructInfo) and v.struct_info.dtype == "int32"
    assert relax.PrimValue(2).struct_info.dtype == "int64"
    x = relax.Var("x", relax.TensorStructInfo([2], "int32"))
    call = op.add(x, v)
    assert isinstance(call.struct_info, relax.TensorStructInfo) and call.struct_info.dtype == "int32"


def test_a_function_printed_alone_imports_t_for_its_index_map():
    src = ('# from tvm.script import relax as R\n\n@R.function\ndef f(x: R.Tensor((16,), "float32")):\n'
           '    y = R.layout_transform(x, index_map=lambda i: (i // 4, i % 4))\n    return y\n')
    printed = tvms.parse(src).script()
    assert printed.startswith("# from tvm.script import tir as T\n# from tvm.script import relax as R\n")
    assert "index_map=T.index_map(lambda i: (i // 4, i % 4))" in printed
    assert tvms.parse(printed).script() == printed
