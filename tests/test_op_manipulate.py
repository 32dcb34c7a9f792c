"""Shape manipulation ops (compiler/op/manipulate.py): each legalized on several shapes (negative
axes, -1/0 in reshape, clamped slices, broadcast dims), compiled for the CPU and compared with
NumPy through tests/op_check.py; symbolic-shape inference; located diagnostics for bad
attributes written in TVMScript text."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import tvmscript as tvms  # noqa: E402
from tvmscript import relax, tir  # noqa: E402

from tvmscript.compiler.transform import LegalizeOps  # noqa: E402

from op_check import assert_located, _compare, check_op, legalize_checked, run  # noqa: E402

RNG = np.random.default_rng(7)


def arr(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


X = arr(2, 3, 4)


# ----------------------------------------------------------------------------- permute_dims, reshape


@pytest.mark.parametrize("shape,axes", [((2, 3, 4), None), ((2, 3, 4), [1, -1, 0]), ((5, 1), [1, 0]), ((2, 1, 3, 2), [3, 1, 0, 2])])
def test_permute_dims(shape, axes):
    x = arr(*shape)
    check_op(relax.op.permute_dims, [x], np.transpose(x, axes), axes=axes)


@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, -1)), ((2, 3, 4), (24,)), ((2, 3, 4), (0, -1, 2)),
                                      ((6,), (1, 2, 3)), ((2, 3), (3, 2))])
def test_reshape(shape, new):
    x = arr(*shape)
    expected = x.reshape([shape[i] if d == 0 else d for i, d in enumerate(new)])
    legal = check_op(relax.op.reshape, [x, new], expected)
    assert "T_reshape" in legal.script()


def test_reshape_resolves_minus_one_in_the_call():
    x = relax.Var("x", relax.TensorStructInfo([2, 3, 4], "float32"))
    call = relax.op.reshape(x, (6, -1))
    assert [d.value for d in call.args[1].values] == [6, 4]
    n = tir.Var("int64", "n")
    y = relax.Var("y", relax.TensorStructInfo([n, 4], "float32"))
    out = relax.op.reshape(y, (-1, 2)).struct_info
    assert out.ndim == 2 and out.shape[1].value == 2 and not isinstance(out.shape[0], tir.IntImm)


def test_reshape_errors():
    x = relax.Var("x", relax.TensorStructInfo([2, 3, 4], "float32"))
    with pytest.raises(ValueError, match="cannot reshape"):
        relax.op.reshape(x, (5, 5))
    with pytest.raises(ValueError, match="at most one -1"):
        relax.op.reshape(x, (-1, -1))
    with pytest.raises(ValueError, match="cannot reshape"):
        relax.op.reshape(x, (5, -1))


@pytest.mark.parametrize("shape", [(2, 3, 4), (7, 2), (1, 1, 5)])
def test_flatten(shape):
    x = arr(*shape)
    check_op(relax.op.flatten, [x], x.reshape(-1))


# ----------------------------------------------------------------------------- expand_dims, squeeze


@pytest.mark.parametrize("shape,axis", [((2, 3), 0), ((2, 3), -1), ((2, 3), [0, -1]), ((4,), [1, 0])])
def test_expand_dims(shape, axis):
    x = arr(*shape)
    check_op(relax.op.expand_dims, [x], np.expand_dims(x, axis if isinstance(axis, int) else tuple(axis)), axis=axis)


@pytest.mark.parametrize("shape,axis", [((2, 1, 3, 1), None), ((2, 1, 3, 1), [1]), ((2, 1, 3, 1), -1), ((1, 4), [0])])
def test_squeeze(shape, axis):
    x = arr(*shape)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    check_op(relax.op.squeeze, [x], np.squeeze(x, np_axis), axis=axis)


def test_squeeze_non_unit_axis():
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "float32"))
    with pytest.raises(ValueError, match="only unit dimensions"):
        relax.op.squeeze(x, axis=[1])


# ----------------------------------------------------------------------------- concat, split


def check_tuple_input_op(op_fn, arrays, expected, **attrs):
    """check_op for an op whose first argument is a tuple of tensors: one parameter per array."""
    params = [relax.Var(f"x{i}", relax.TensorStructInfo(list(a.shape), str(a.dtype))) for i, a in enumerate(arrays)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op_fn(params, **attrs))
        bb.emit_func_output(out)
    mod = bb.get()
    text = mod.script()
    again = tvms.parse(text)
    assert again.script() == text
    _compare(run(legalize_checked(again), arrays), expected, 0, 0)


@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], 0),
                                         ([(2, 3, 1), (2, 3, 2)], -1), ([(4,), (2,)], 0)])
def test_concat(shapes, axis):
    arrays = [arr(*s) for s in shapes]
    check_tuple_input_op(relax.op.concat, arrays, np.concatenate(arrays, axis), axis=axis)


def test_concat_tuple_variable():
    """A tuple-typed variable (not a literal tuple) is unpacked with TupleGetItem bindings."""
    a, b = arr(2, 3), arr(2, 2)
    x0 = relax.Var("x0", relax.TensorStructInfo([2, 3], "float32"))
    x1 = relax.Var("x1", relax.TensorStructInfo([2, 2], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x0, x1]):
        t = bb.emit(relax.Tuple([x0, x1]))
        out = bb.emit(relax.op.concat(t, axis=1))
        bb.emit_func_output(out)
    legal = LegalizeOps()(tvms.parse(bb.get().script()))
    assert "t[0]" in legal.script() or "lv[0]" in legal.script()
    np.testing.assert_array_equal(run(legal, [a, b]), np.concatenate([a, b], 1))


def test_concat_errors():
    a = relax.Var("a", relax.TensorStructInfo([2, 3], "float32"))
    b = relax.Var("b", relax.TensorStructInfo([3, 3], "float32"))
    c = relax.Var("c", relax.TensorStructInfo([2, 3], "int32"))
    with pytest.raises(ValueError, match="shapes differ"):
        relax.op.concat([a, b], axis=1)
    with pytest.raises(ValueError, match="dtypes differ"):
        relax.op.concat([a, c])
    with pytest.raises(ValueError, match="out of range"):
        relax.op.concat([a, a], axis=2)


@pytest.mark.parametrize("shape,sections,axis", [((6, 4), 3, 0), ((6, 4), [1, 4], 0), ((2, 6), 2, -1),
                                                 ((3, 5), [2, 9], 1), ((4,), [1, 1, 3], 0)])
def test_split(shape, sections, axis):
    x = arr(*shape)
    check_op(relax.op.split, [x], np.split(x, sections, axis), indices_or_sections=sections, axis=axis)


def test_split_sections_must_divide():
    x = relax.Var("x", relax.TensorStructInfo([5, 4], "float32"))
    with pytest.raises(ValueError, match="3 sections do not divide axis 0"):
        relax.op.split(x, 3)


# ----------------------------------------------------------------------------- strided_slice


@pytest.mark.parametrize("shape,axes,begin,end,strides", [
    ((8, 9), [0, 1], [1, -1], [7, 0], [2, -2]),
    ((8, 9), [1], [2], [100], None),
    ((4, 5, 6), [-1, 0], [-4, 1], [-1, 3], [1, 1]),
    ((10,), [0], [-100], [5], [3]),
    ((6, 3), [0], [5], [-100], [-1]),
])
def test_strided_slice(shape, axes, begin, end, strides):
    x = arr(*shape)
    index = [slice(None)] * len(shape)
    for a, b, e, s in zip(axes, begin, end, strides or [1] * len(axes)):
        index[a] = slice(b, e, s)
    check_op(relax.op.strided_slice, [x, axes, begin, end, strides], x[tuple(index)])


def test_strided_slice_prints_like_tvm():
    x = relax.Var("x", relax.TensorStructInfo([8, 9], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit(relax.op.strided_slice(x, [0], [2], [5]))
        bb.emit_func_output(out)
    assert ("R.strided_slice(x, (R.prim_value(0),), (R.prim_value(2),), (R.prim_value(5),), "
            "assume_inbound=False)") in bb.get().script()


# ----------------------------------------------------------------------------- take


@pytest.mark.parametrize("shape,indices,axis,mode", [
    ((5, 4), [[0, 2], [4, 1]], 0, "fast"),
    ((5, 4), [3, 0, 3], 1, "fast"),
    ((5, 4), [-1, 7, 2], -1, "clip"),
    ((5, 4), [-1, 7, 2], 0, "wrap"),
    ((6,), [5, 0], None, "fast"),
    ((2, 3), [[5], [1]], None, "fast"),
    ((3, 4), 2, 0, "fast"),
])
def test_take(shape, indices, axis, mode):
    x = arr(*shape)
    idx = np.asarray(indices, dtype="int64" if mode != "fast" else "int32")
    np_mode = {"fast": "raise"}.get(mode, mode)
    check_op(relax.op.take, [x, idx], np.take(x, idx, axis=axis, mode=np_mode), axis=axis, mode=mode)


def test_take_needs_integer_indices():
    x = relax.Var("x", relax.TensorStructInfo([5, 4], "float32"))
    i = relax.Var("i", relax.TensorStructInfo([2], "float32"))
    with pytest.raises(ValueError, match="indices must be integers"):
        relax.op.take(x, i, axis=0)
    with pytest.raises(ValueError, match="mode must be"):
        relax.op.take(x, relax.Var("j", relax.TensorStructInfo([2], "int64")), mode="nearest")


# ----------------------------------------------------------------------------- broadcast_to, tile, repeat


@pytest.mark.parametrize("shape,target", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (4, 2, 3)), ((1, 4), (3, 4))])
def test_broadcast_to(shape, target):
    x = arr(*shape)
    check_op(relax.op.broadcast_to, [x, target], np.broadcast_to(x, target))


def test_broadcast_to_incompatible():
    x = relax.Var("x", relax.TensorStructInfo([3, 2], "float32"))
    with pytest.raises(ValueError, match="cannot broadcast shape"):
        relax.op.broadcast_to(x, (3, 4))
    with pytest.raises(ValueError, match="rank 2 to rank 1"):
        relax.op.broadcast_to(x, (6,))


@pytest.mark.parametrize("shape,reps", [((2, 3), [2, 1, 2]), ((2, 3), 3), ((2, 3, 4), [2, 1]), ((4,), [1])])
def test_tile(shape, reps):
    x = arr(*shape)
    check_op(relax.op.tile, [x], np.tile(x, reps), repeats=reps)


@pytest.mark.parametrize("shape,reps,axis", [((2, 3), 2, 1), ((2, 3), 2, None), ((2, 3, 2), 3, -1), ((4,), 3, 0)])
def test_repeat(shape, reps, axis):
    x = arr(*shape)
    check_op(relax.op.repeat, [x], np.repeat(x, reps, axis), repeats=reps, axis=axis)


# ----------------------------------------------------------------------------- symbolic inference


def test_symbolic_shapes():
    n = tir.Var("int64", "n")
    x = relax.Var("x", relax.TensorStructInfo([n, 4], "float32"))
    assert relax.op.expand_dims(x, 1).struct_info.shape[0] is n
    assert relax.op.permute_dims(x).struct_info.shape[1] is n
    assert relax.op.concat([x, x], axis=1).struct_info.shape[0] is n
    assert relax.op.tile(x, [1, 2]).struct_info.shape[1].value == 8
    assert relax.op.take(x, relax.Var("i", relax.TensorStructInfo([3], "int64")), axis=1).struct_info.shape[0] is n
    assert relax.op.squeeze(x).struct_info.ndim == -1  # whether n is 1 is not known
    parts = relax.op.split(x, [1, 3], axis=1).struct_info.fields
    assert [p.shape[1].value for p in parts] == [1, 2, 1]


# ----------------------------------------------------------------------------- diagnostics from text


def relax_fn(line: str, params: str = 'x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 4), "float32")') -> str:
    return f"@R.function\ndef main({params}):\n    lv = {line}\n    return lv\n"


located = assert_located


def test_text_bad_axis():
    located(relax_fn("R.expand_dims(x, axis=[5])"), "R.expand_dims: axis 5 is out of range", "[5]")
    located(relax_fn("R.squeeze(x, axis=[-3])"), "axis -3 is out of range", "[-3]")
    located(relax_fn("R.repeat(x, repeats=2, axis=2)"), "axis 2 is out of range", "2)")


def test_text_reshape_count_mismatch():
    located(relax_fn("R.reshape(x, R.shape([4, 2]))"), "cannot reshape a tensor of shape (2, 3)", "R.shape([4, 2])")


def test_text_concat_mismatch():
    located(relax_fn("R.concat((x, y), axis=0)"), "shapes differ off the concatenation axis 0", "(x, y)")
    src = relax_fn("R.concat((x, y), axis=1)")
    assert tvms.parse(src).ret_struct_info.shape[1].value == 7


def test_text_split_and_take_errors():
    located(relax_fn("R.split(x, indices_or_sections=2, axis=1)"), "2 sections do not divide axis 1", "2,")
    located(relax_fn("R.take(x, y, axis=0)"), "indices must be integers", "y,")
    located(relax_fn("R.broadcast_to(x, R.shape([2, 5]))"), "cannot broadcast shape (2, 3)", "R.shape")


def test_text_forms_parse():
    src = relax_fn("R.strided_slice(x, (R.prim_value(1),), (R.prim_value(-1),), (R.prim_value(0),), "
                   "(R.prim_value(-1),), assume_inbound=False)")
    func = tvms.parse(src)
    assert [d.value for d in func.ret_struct_info.shape] == [2, 2]
    mod = tvms.parse(relax_fn("R.reshape(x, (3, -1))"))
    assert "R.reshape(x, R.shape([3, 2]))" in mod.script()
