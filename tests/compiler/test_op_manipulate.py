"""Shape manipulation ops (tvmscript/ir/op/manipulate.py, compiler/op/manipulate.py): each legalized on several shapes (negative
axes, -1/0 in reshape, clamped slices, broadcast dims), compiled for the CPU and compared with
NumPy through tests/support/op_check.py; symbolic-shape inference; located diagnostics for bad
attributes written in TVMScript text."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir

from tvmscript.compiler.transform import LegalizeOps

from support.op_check import assert_located, _compare, check_op, legalize_checked, run

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
    assert " = gv[0]" in legal.script()  # `t` is the builder's gv, as TVM names it
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


def test_split_sections_must_not_overrun():
    # 3 uneven sections of 5 are fine (2, 2, 1: TVM's rule); 4 sections of 6 would leave the
    # last one -2 long, which TVM infers and this table rejects.
    x = relax.Var("x", relax.TensorStructInfo([5, 4], "float32"))
    assert [f.shape[0].value for f in relax.struct_info_of(relax.op.split(x, 3)).fields] == [2, 2, 1]
    y = relax.Var("y", relax.TensorStructInfo([10, 4], "float32"))
    with pytest.raises(ValueError, match="7 sections of 2 overrun axis 0"):
        relax.op.split(y, 7)


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
    located(relax_fn("R.take(x, y, axis=0)"), "indices must be integers", "y,")
    located(relax_fn("R.broadcast_to(x, R.shape([2, 5]))"), "cannot broadcast shape (2, 3)", "R.shape")


def test_text_forms_parse():
    src = relax_fn("R.strided_slice(x, (R.prim_value(1),), (R.prim_value(-1),), (R.prim_value(0),), "
                   "(R.prim_value(-1),), assume_inbound=False)")
    func = tvms.parse(src)
    assert [d.value for d in func.ret_struct_info.shape] == [2, 2]
    mod = tvms.parse(relax_fn("R.reshape(x, (3, -1))"))
    assert "R.reshape(x, R.shape([3, 2]))" in mod.script()


# ----------------------------------------------------------------------------- gather, scatter, one_hot


@pytest.mark.parametrize("dshape,ishape,axis", [((3, 4), (3, 2), 1), ((3, 4), (2, 4), 0), ((2, 3, 4), (2, 3, 5), -1),
                                                ((5,), (7,), 0)], ids=str)
def test_gather_elements(dshape, ishape, axis):
    data = arr(*dshape)
    size = dshape[axis]
    indices = RNG.integers(-size, size, ishape)  # negative ones count from the end
    expected = _np_gather_elements(data, indices, axis)
    legal = check_op(relax.op.gather_elements, [data, indices.astype("int64")], expected, axis=axis)
    assert "def gather(" in legal.script() and 'T.block("T_gather")' in legal.script()
    check_op(relax.op.gather_elements, [data, indices.astype("int32")], expected, axis=axis)


def _np_gather_elements(data, indices, axis):
    """ONNX GatherElements by its definition (the indices may be smaller than the data)."""
    out = np.empty(indices.shape, data.dtype)
    axis %= data.ndim
    for q in np.ndindex(*indices.shape):
        p = list(q)
        p[axis] = indices[q] % data.shape[axis]
        out[q] = data[tuple(p)]
    return out


def np_scatter_elements(data, indices, updates, axis, reduction):
    """ONNX ScatterElements by its definition: the updates applied one by one in row-major
    order (a later update of the same element wins for "update")."""
    out = data.copy()
    axis %= data.ndim
    for q in np.ndindex(*indices.shape):
        p = list(q)
        p[axis] = indices[q] % data.shape[axis]
        p, u = tuple(p), updates[q]
        out[p] = {"update": lambda a: u, "add": lambda a: a + u, "mul": lambda a: a * u,
                  "min": lambda a: min(a, u), "max": lambda a: max(a, u)}[reduction](out[p])
    return out


SCATTER_CASES = [
    # data, indices (updates share them), axis
    ((3, 5), [[0, 2], [4, 4], [1, -1]], 1),
    ((4, 3), [[1, 0, 2], [1, 2, 2]], 0),  # fewer rows than the data: the others stay
    ((2, 3, 4), [[[3], [0], [-4]], [[1], [1], [2]]], 2),
]


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "min", "max"])
@pytest.mark.parametrize("dshape,indices,axis", SCATTER_CASES, ids=str)
def test_scatter_elements(reduction, dshape, indices, axis):
    data = arr(*dshape)
    idx = np.array(indices, "int64")
    updates = arr(*idx.shape)
    legal = check_op(relax.op.scatter_elements, [data, idx, updates],
                     np_scatter_elements(data, idx, updates, axis, reduction), axis=axis, reduction=reduction)
    assert "def scatter_elements(" in legal.script()


def test_scatter_elements_against_torch():
    torch = pytest.importorskip("torch")
    data, idx = arr(4, 6), RNG.integers(0, 6, (4, 3))
    upd = arr(4, 3)
    expected = torch.tensor(data).scatter_reduce(1, torch.tensor(idx), torch.tensor(upd), "sum").numpy()
    check_op(relax.op.scatter_elements, [data, idx, upd], expected, axis=1, reduction="add")


@pytest.mark.parametrize("ishape,depth,axis,dtype", [((4,), 5, -1, "float32"), ((2, 3), 4, 0, "int64"),
                                                     ((2, 3), 3, 1, "float32"), ((), 4, -1, "float64")], ids=str)
def test_one_hot(ishape, depth, axis, dtype):
    indices = RNG.integers(-1, depth + 1, ishape).astype("int64")  # -1 and depth: rows of off values
    on, off = (tir.const(2.5, dtype), tir.const(-1.0, dtype)) if dtype != "int64" else \
        (tir.const(1, dtype), tir.const(0, dtype))
    hot = np.arange(depth) == indices[..., None]
    expected = np.moveaxis(np.where(hot, on.value, off.value).astype(dtype), -1, axis)
    legal = check_op(relax.op.one_hot, [indices, on, off], expected, depth=depth, axis=axis)
    assert 'T.block("T_one_hot")' in legal.script()


def test_new_gather_scatter_ops_print_like_tvm():
    d = relax.Var("d", relax.TensorStructInfo([2, 3], "float32"))
    i = relax.Var("i", relax.TensorStructInfo([2, 2], "int64"))
    u = relax.Var("u", relax.TensorStructInfo([2, 2], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [d, i, u]):
        a = bb.emit(relax.op.gather_elements(d, i, 1))
        b = bb.emit(relax.op.scatter_elements(d, i, u, 1, "add"))
        c = bb.emit(relax.op.one_hot(i, tir.FloatImm("float32", 1.0), tir.FloatImm("float32", 0.0), 4))
        bb.emit_func_output(relax.Tuple([a, b, c]))
    text = bb.get().script()
    assert 'R.Tensor((2, 2), dtype="float32") = R.gather_elements(d, i, axis=1)' in text
    assert 'R.scatter_elements(d, i, u, axis=1, reduction="add")' in text
    assert ('R.Tensor((2, 2, 4), dtype="float32") = R.one_hot(i, R.prim_value(T.float32(1.0)), '
            'R.prim_value(T.float32(0.0)), depth=4, axis=-1)') in text
    assert tvms.parse(text).script() == text


def test_tvm_027_one_hot_text_parses():
    """TVM 0.27 writes one_hot's values as bare typed numbers."""
    src = ('@R.function\ndef main(x: R.Tensor((3,), dtype="int64")):\n'
           '    gv = R.one_hot(x, T.float32(1.0), T.float32(0.0), depth=4, axis=-1)\n    return gv\n')
    func = tvms.parse(src)
    assert 'R.Tensor((3, 4), dtype="float32")' in func.script()


def test_gather_scatter_one_hot_symbolic_run():
    n = tir.Var("int64", "n")
    d = relax.Var("d", relax.TensorStructInfo([n, 4], "float32"))
    i = relax.Var("i", relax.TensorStructInfo([n, 2], "int64"))
    u = relax.Var("u", relax.TensorStructInfo([n, 2], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [d, i, u]):
        a = bb.emit(relax.op.gather_elements(d, i, 1))
        b = bb.emit(relax.op.scatter_elements(d, i, u, 1))
        c = bb.emit(relax.op.one_hot(i, 1, 0, 4, axis=1))
        bb.emit_func_output(relax.Tuple([a, b, c]))
    legal = LegalizeOps()(bb.get())
    for rows in (1, 3):
        ds, us = arr(rows, 4), arr(rows, 2)
        idx = RNG.integers(0, 4, (rows, 2))
        got_a, got_b, got_c = run(legal, [ds, idx, us])
        np.testing.assert_array_equal(got_a, np.take_along_axis(ds, idx, 1))
        np.testing.assert_array_equal(got_b, np_scatter_elements(ds, idx, us, 1, "update"))
        np.testing.assert_array_equal(got_c, np.moveaxis(np.eye(4, dtype="int64")[idx], -1, 1))


@pytest.mark.parametrize("make,message", [
    (lambda d, i: relax.op.gather_elements(d, relax.op.astype(i, "float32")), "indices must be integers"),
    (lambda d, i: relax.op.gather_elements(d, relax.op.reshape(i, (4,))), "indices must have the data's rank 2"),
    (lambda d, i: relax.op.gather_elements(d, i, axis=2), "axis 2 is out of range"),
    (lambda d, i: relax.op.scatter_elements(d, i, relax.op.astype(i, "float64")), "updates have dtype float64"),
    (lambda d, i: relax.op.scatter_elements(d, i, d), "updates have shape (2, 3) but indices (2, 2)"),
    (lambda d, i: relax.op.scatter_elements(d, i, relax.op.astype(i, "float32"), reduction="mean"),
     'reduction "mean" is not supported'),
    (lambda d, i: relax.op.one_hot(i, 1.0, 0, 3), "on_value and off_value dtypes differ (float64 and int64)"),
    (lambda d, i: relax.op.one_hot(i, 1, 0, 0), "depth must be at least 1"),
    (lambda d, i: relax.op.one_hot(i, 1, 0, 3, axis=3), "axis 3 is out of range for a result of rank 3"),
    (lambda d, i: relax.op.one_hot(i, d, 0, 3), "on_value must be a prim value"),
])
def test_gather_scatter_one_hot_errors(make, message):
    d = relax.Var("d", relax.TensorStructInfo([2, 3], "float32"))
    i = relax.Var("i", relax.TensorStructInfo([2, 2], "int64"))
    with pytest.raises(ValueError) as info:
        make(d, i)
    assert message in str(info.value)


def test_text_scatter_bad_reduction_points_at_it():
    src = ('@R.function\ndef main(d: R.Tensor((2, 3), "float32"), i: R.Tensor((2, 2), "int64"), '
           'u: R.Tensor((2, 2), "float32")):\n    y = R.scatter_elements(d, i, u, reduction="sum")\n    return y\n')
    assert_located(src, "reduction must be one of", '"sum"')


# ----------------------------------------------------------------------------- flip


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((2, 3, 4), -1), ((5,), 0), ((3, 1), 0)], ids=str)
def test_flip(shape, axis):
    x = arr(*shape)
    legal = check_op(relax.op.flip, [x], np.flip(x, axis), axis=axis)
    assert "def flip(" in legal.script() and 'T.block("T_reverse_sequence")' in legal.script()


def test_flip_prints_like_tvm_and_keeps_symbolic_shape():
    src = ('@R.function\ndef main(x: R.Tensor(("n", 3), dtype="float32")):\n'
           '    d = R.flip(x, axis=1)\n    return d\n')
    text = tvms.parse(src).script()
    assert 'd: R.Tensor((n, 3), dtype="float32") = R.flip(x, axis=1)' in text
    assert tvms.parse(text).script() == text


def test_flip_bad_axis_is_located():
    src = ('@R.function\ndef main(x: R.Tensor((2, 3), dtype="float32")):\n'
           '    d = R.flip(x, axis=2)\n    return d\n')
    assert_located(src, "axis 2 is out of range for a tensor of rank 2", "2)")


# ----------------------------------------------------------------------------- gather_nd


def _np_gather_nd(data, indices, b):
    """ONNX GatherND by its definition."""
    m = indices.shape[-1]
    out = np.empty(indices.shape[:-1] + data.shape[b + m:], data.dtype)
    for q in np.ndindex(*indices.shape[:-1]):
        out[q] = data[tuple(q[:b]) + tuple(indices[q])]
    return out


@pytest.mark.parametrize("dshape,ishape,b", [((4, 3, 5), (6, 2), 0), ((4, 3), (2, 2), 0), ((4, 3), (5, 1), 0),
                                             ((2, 3, 4), (2, 5, 1), 1), ((3, 4), (2, 3, 2), 0)], ids=str)
def test_gather_nd(dshape, ishape, b):
    data = arr(*dshape)
    m = ishape[-1]
    hi = np.array(dshape[b:b + m])
    indices = (RNG.integers(0, 1 << 30, ishape) % hi).astype("int64")
    legal = check_op(relax.op.gather_nd, [data, indices], _np_gather_nd(data, indices, b), batch_dims=b)
    assert "def te_gather_nd(" in legal.script() and 'T.block("T_gather_nd")' in legal.script()


def test_gather_nd_negative_indices_count_from_the_end():
    data = arr(4, 3)
    indices = np.array([[-1, -2], [0, 2]], "int64")
    check_op(relax.op.gather_nd, [data, indices.astype("int32")], _np_gather_nd(data, indices % [4, 3], 0))


def test_gather_nd_prints_like_tvm():
    src = ('@R.function\ndef main(x: R.Tensor(("n", 3, 5), dtype="float32"), i: R.Tensor(("k", 2), dtype="int64")):\n'
           '    d = R.gather_nd(x, i)\n    return d\n')
    text = tvms.parse(src).script()
    assert 'd: R.Tensor((k, 5), dtype="float32") = R.gather_nd(x, i, batch_dims=0)' in text
    assert tvms.parse(text).script() == text


def test_gather_nd_too_many_coordinates_is_located():
    src = ('@R.function\ndef main(x: R.Tensor((4, 3), dtype="float32"), i: R.Tensor((2, 3), dtype="int64")):\n'
           '    d = R.gather_nd(x, i)\n    return d\n')
    assert_located(src, "plus the coordinates' length 3 exceed the data's rank 2", "i)")


# ----------------------------------------------------------------------------- scatter_nd


def _np_scatter_nd(data, indices, updates, reduction):
    """ONNX ScatterND by its definition: the updates applied in order."""
    out = data.copy()
    ops = {"update": lambda a, b: b, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
    for q in np.ndindex(*indices.shape[:-1]):
        at = tuple(indices[q])
        out[at] = ops[reduction](out[at], updates[q])
    return out


@pytest.mark.parametrize("dshape,ishape,reduction", [
    ((4, 3), (2, 2), "update"), ((4, 3), (5, 1), "add"), ((4, 3, 2), (2, 3, 2), "max"), ((6,), (4, 1), "mul"),
    ((5, 4), (3, 1), "min"), ((4, 3), (2,), "update"), ((4, 3), (1,), "add"),
], ids=str)
def test_scatter_nd(dshape, ishape, reduction):
    data = arr(*dshape)
    m = ishape[-1]
    indices = (RNG.integers(0, 1 << 30, ishape) % np.array(dshape[:m])).astype("int64")
    if reduction == "update" and len(ishape) > 1:
        indices[-1] = indices[0]  # a repeated position: the last update wins
    updates = arr(*(ishape[:-1] + dshape[m:]))
    expected = _np_scatter_nd(data, indices, updates, reduction)
    pattern = "broadcast" if len(ishape) == 1 else None  # one update: the data read where it is written
    legal = check_op(relax.op.scatter_nd, [data, indices, updates], expected, reduction=reduction,
                     expect_pattern=pattern)
    assert "def scatter_nd(" in legal.script()


def test_scatter_nd_prints_like_tvm():
    src = ('@R.function\ndef main(x: R.Tensor(("n", 3), dtype="float32"), i: R.Tensor((2, 2), dtype="int64"), '
           'u: R.Tensor((2,), dtype="float32")):\n    e = R.scatter_nd(x, i, u)\n    return e\n')
    text = tvms.parse(src).script()
    assert 'e: R.Tensor((n, 3), dtype="float32") = R.scatter_nd(x, i, u, reduction="update")' in text
    assert tvms.parse(text).script() == text


def test_scatter_nd_bad_updates_are_located():
    src = ('@R.function\ndef main(x: R.Tensor((4, 3), dtype="float32"), i: R.Tensor((2, 2), dtype="int64"), '
           'u: R.Tensor((2, 3), dtype="float32")):\n    e = R.scatter_nd(x, i, u)\n    return e\n')
    assert_located(src, "updates have shape (2, 3), expected (2,)", "u)")
