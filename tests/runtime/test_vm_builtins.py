"""Ops the VM runs itself, never legalized (as in TVM 0.27's LegalizeOps): ``R.shape_of``,
``R.shape_to_tensor`` (tvmscript/ir/op/vm_builtin.py) and ``R.sort``/``R.argsort``/``R.topk``
(tvmscript/ir/op/sort.py). Each: TVM's printed form round-trips, struct info keeps symbolic dims,
LegalizeOps leaves the call, and the compiled module's results match NumPy's. Also
``R.dynamic_strided_slice`` (sliced on the host), ``R.nonzero``/``R.unique`` (legalized to TVM's
runtime functions "relax.run.*") and ``R.bucketize`` (a kernel, checked through op_check)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax

from support.op_check import check_op

RNG = np.random.default_rng(11)


def _module(body: str, params: str) -> str:
    return ("from tvm.script import ir as I\nfrom tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n"
            f"    @R.function\n    def main({params}):\n" + "".join(f"        {line}\n" for line in body.split("\n")))


def _run(src: str, *arrays):
    mod = tvms.parse(src)
    legal = relax.transform.LegalizeOps()(mod)
    vm = relax.VirtualMachine(tvms.compile(legal, "llvm"), tvms.cpu())
    return mod, legal, vm["main"](*arrays)


def test_shape_of_and_shape_to_tensor_symbolic():
    src = _module("s = R.shape_of(x)\nt = R.shape_to_tensor(s)\nreturn (s, t)", 'x: R.Tensor(("n", 3), dtype="float32")')
    mod, legal, (s, t) = _run(src, np.zeros((5, 3), "float32"))
    text = mod.script()
    assert "s: R.Shape([n, 3]) = R.shape_of(x)" in text
    assert 't: R.Tensor((2,), dtype="int64") = R.shape_to_tensor(s)' in text
    assert tvms.parse(text).script() == text
    assert "R.shape_of(x)" in legal.script()  # the VM's builtin, as TVM's vm.builtin.shape_of
    assert tuple(s) == (5, 3)
    got = t.numpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array([5, 3]))


def test_shape_to_tensor_of_a_literal_shape():
    src = _module("t = R.shape_to_tensor(R.shape([4, 7, 2]))\nreturn t", 'x: R.Tensor((1,), dtype="float32")')
    _, _, t = _run(src, np.zeros((1,), "float32"))
    np.testing.assert_array_equal(t.numpy(), np.array([4, 7, 2], "int64"))


def test_shape_to_tensor_rejects_a_tensor():
    src = _module("t = R.shape_to_tensor(x)\nreturn t", 'x: R.Tensor((1,), dtype="float32")')
    with pytest.raises(tvms.diagnostics.TVMScriptError, match="expr must be a shape"):
        tvms.parse(src)


def _np_argsort(a, axis, descending):
    """Stable, descending included: equal elements keep their order (a reference built with
    ``np.lexsort`` on the position, independent of the VM's)."""
    a = np.moveaxis(a, axis, -1)
    out = np.empty(a.shape, np.int64)
    pos = np.arange(a.shape[-1])
    for i in np.ndindex(*a.shape[:-1]):
        key = -a[i].astype(np.float64) if descending else a[i]
        out[i] = np.lexsort((pos, key))
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("axis,descending", [(-1, False), (0, True), (1, True), (1, False)], ids=str)
def test_sort_argsort(axis, descending):
    x = RNG.integers(0, 4, (3, 6, 2)).astype("int32")  # many ties: checks stability
    flag = "True" if descending else "False"
    src = _module(f"a = R.sort(x, axis={axis}, descending={flag})\n"
                  f'b = R.argsort(x, axis={axis}, descending={flag}, dtype="int64")\nreturn (a, b)',
                  'x: R.Tensor((3, 6, 2), dtype="int32")')
    mod, legal, (a, b) = _run(src, x)
    assert "R.sort(" in legal.script() and "R.argsort(" in legal.script()  # TVM leaves them too
    idx = _np_argsort(x, axis, descending)
    np.testing.assert_array_equal(b.numpy(), idx)
    assert b.numpy().dtype == np.int64
    np.testing.assert_array_equal(a.numpy(), np.take_along_axis(x, idx, axis))


@pytest.mark.parametrize("k,axis,largest", [(2, -1, True), (3, 0, False), (0, 1, True)], ids=str)
def test_topk(k, axis, largest):
    x = RNG.standard_normal((4, 5)).astype("float32")
    src = _module(f"c = R.topk(x, k={k}, axis={axis}, largest={largest})\nreturn c",
                  'x: R.Tensor((4, 5), dtype="float32")')
    mod, _, (values, indices) = _run(src, x)
    idx = _np_argsort(x, axis, largest)
    if k >= 1:
        idx = np.take(idx, np.arange(k), axis=axis)
    np.testing.assert_array_equal(indices.numpy(), idx.astype("int32"))
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, idx, axis))
    n = x.shape[axis] if k < 1 else k
    shape = list(x.shape)
    shape[axis] = n
    assert tuple(values.numpy().shape) == tuple(shape)


def test_topk_values_only_and_indices_only():
    x = RNG.standard_normal((2, 6)).astype("float32")
    src = _module('v = R.topk(x, k=3, ret_type="values")\ni = R.topk(x, k=3, ret_type="indices", dtype="int64")\n'
                  "return (v, i)", 'x: R.Tensor((2, 6), dtype="float32")')
    _, _, (v, i) = _run(src, x)
    order = np.argsort(-x, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(i.numpy(), order)
    np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, order, -1))


def test_sort_ops_print_like_tvm():
    """TVM 0.27's printed forms (every attribute, in its order) and its parser test's program."""
    src = _module('lv0 = R.sort(x, axis=1)\nlv1 = R.argsort(lv0)\nr = R.topk(lv1, axis=1, k=2)\nreturn r',
                  'x: R.Tensor(("n", 3), dtype="int32")')
    text = tvms.parse(src).script()
    assert 'lv0: R.Tensor((n, 3), dtype="int32") = R.sort(x, axis=1, descending=False)' in text
    assert 'lv1: R.Tensor((n, 3), dtype="int32") = R.argsort(lv0, axis=-1, descending=False, dtype="int32")' in text
    assert ('r: R.Tuple(R.Tensor((n, 2), dtype="int32"), R.Tensor((n, 2), dtype="int32")) = '
            'R.topk(lv1, k=2, axis=1, ret_type="both", largest=True, dtype="int32")') in text
    assert tvms.parse(text).script() == text


def test_block_builder_sort_ops():
    x = relax.Var("x", relax.TensorStructInfo([2, 3], "int32"))
    bb = relax.BlockBuilder()
    with bb.function("foo", [x]):
        lv0 = bb.emit(relax.op.sort(x, axis=1))
        lv1 = bb.emit(relax.op.argsort(lv0))
        r = bb.emit(relax.op.topk(lv1, axis=1, k=2))
        bb.emit_func_output(r)
    sinfo = r.struct_info
    assert isinstance(sinfo, relax.TupleStructInfo) and [d.value for d in sinfo.fields[0].shape] == [2, 2]


@pytest.mark.parametrize("call,message", [
    ("R.topk(x, k=7)", "k=7 is larger than the dimension (5)"),
    ('R.argsort(x, dtype="float32")', 'dtype must be "int32" or "int64"'),
    ('R.topk(x, ret_type="all")', 'ret_type must be "both", "values" or "indices"'),
    ("R.sort(x, axis=2)", "axis 2 is out of range for a tensor of rank 2"),
], ids=str)
def test_sort_op_errors(call, message):
    src = _module(f"c = {call}\nreturn c", 'x: R.Tensor((4, 5), dtype="float32")')
    with pytest.raises(tvms.diagnostics.TVMScriptError) as info:
        tvms.parse(src)
    assert message in info.value.message


# ----------------------------------------------------------------------------- bucketize (legalized)


@pytest.mark.parametrize("right,out_int32", [(False, False), (True, True)], ids=str)
def test_bucketize(right, out_int32):
    x = RNG.integers(-2, 8, (4, 5)).astype("float32")  # on the boundaries too: right matters
    boundaries = np.array([0.0, 1.0, 3.0, 5.0, 6.0], "float32")
    expected = np.searchsorted(boundaries, x, side="right" if right else "left")
    expected = expected.astype("int32" if out_int32 else "int64")
    legal = check_op(relax.op.bucketize, [x, boundaries], expected, out_int32=out_int32, right=right)
    assert "def searchsorted(" in legal.script()


def test_bucketize_prints_like_tvm():
    src = _module("f = R.bucketize(x, bd)\nreturn f", 'x: R.Tensor(("n", 3), dtype="float32"), bd: R.Tensor((2,), dtype="float32")')
    text = tvms.parse(src).script()
    assert 'f: R.Tensor((n, 3), dtype="int64") = R.bucketize(x, bd, out_int32=False, right=False)' in text
    assert tvms.parse(text).script() == text


# ----------------------------------------------------------------------------- nonzero, unique (runtime functions)


def test_nonzero_legalizes_to_tvms_runtime_function():
    x = RNG.integers(-1, 2, (4, 3, 2)).astype("float32")
    src = _module("nz = R.nonzero(x)\nreturn nz", 'x: R.Tensor((4, 3, 2), dtype="float32")')
    mod, legal, nz = _run(src, x)
    assert 'nz: R.Tensor(dtype="int64", ndim=2) = R.nonzero(x)' in mod.script()
    assert 'R.call_pure_packed("relax.run.nonzero", x' in legal.script()  # TVM's legalization
    np.testing.assert_array_equal(nz.numpy(), np.stack(np.nonzero(x)))


def _first_occurrence_unique(x):
    """Unique values in order of first occurrence, with index/inverse/counts, by a plain loop."""
    flat = list(x.reshape(-1))
    values, index, counts, inverse = [], [], [], []
    for i, v in enumerate(flat):
        if v not in values:
            values.append(v)
            index.append(i)
            counts.append(0)
        k = values.index(v)
        counts[k] += 1
        inverse.append(k)
    return [np.array(values, x.dtype)] + [np.array(a, np.int64) for a in (index, inverse, counts)]


@pytest.mark.parametrize("sorted_", [True, False])
def test_unique(sorted_):
    x = RNG.integers(0, 5, (4, 6)).astype("int32")
    flag = "True" if sorted_ else "False"
    src = _module(f"u = R.unique(x, {flag}, False, False, False)\nv = R.unique(x, {flag}, True, True, True)\n"
                  "return (u, v)", 'x: R.Tensor((4, 6), dtype="int32")')
    mod, legal, (u, v) = _run(src, x)
    assert 'R.call_pure_packed("relax.run.unique", x' in legal.script()
    text = mod.script()
    assert 'u: R.Tensor(dtype="int32", ndim=1) = R.unique(x, ' in text and tvms.parse(text).script() == text
    expected = _first_occurrence_unique(x)
    if sorted_:
        order = np.argsort(expected[0], kind="stable")
        rank = np.argsort(order)
        expected = [expected[0][order], expected[1][order], rank[expected[2]], expected[3][order]]
    np.testing.assert_array_equal(u.numpy(), expected[0])
    for got, want in zip(v, expected):
        np.testing.assert_array_equal(got.numpy(), want)


def test_unique_along_an_axis():
    x = np.array([[1, 2], [3, 4], [1, 2], [0, 0]], "float32")
    src = _module("u = R.unique(x, True, False, False, False, axis=0)\nreturn u", 'x: R.Tensor((4, 2), dtype="float32")')
    mod, _, u = _run(src, x)
    assert 'R.Tensor(dtype="float32", ndim=2)' in mod.script()
    np.testing.assert_array_equal(u.numpy(), np.unique(x, axis=0))


def test_unique_flags_must_be_constants():
    src = _module("u = R.unique(x, True, False, False, R.prim_value(T.int64(2) + n))\nreturn u",
                  'x: R.Tensor(("n",), dtype="float32")')
    with pytest.raises(tvms.diagnostics.TVMScriptError, match="return_counts must be a constant True or False"):
        tvms.parse(src)


# ----------------------------------------------------------------------------- dynamic_strided_slice (host)


@pytest.mark.parametrize("begin,end,strides", [([0, 1], [3, 3], [1, 1]), ([-1, 0], [-5, 3], [-2, 2]),
                                               ([1, 2], [100, -100], [1, -1])], ids=str)
def test_dynamic_strided_slice(begin, end, strides):
    x = RNG.standard_normal((4, 3)).astype("float32")
    src = _module("d = R.dynamic_strided_slice(x, b, e, s)\nreturn d",
                  'x: R.Tensor((4, 3), dtype="float32"), b: R.Tensor((2,), dtype="int64"), '
                  'e: R.Tensor((2,), dtype="int64"), s: R.Tensor((2,), dtype="int64")')
    arrays = [np.array(v, "int64") for v in (begin, end, strides)]
    mod, _, d = _run(src, x, *arrays)
    assert 'd: R.Tensor(dtype="float32", ndim=2) = R.dynamic_strided_slice(x, b, e, s)' in mod.script()
    np.testing.assert_array_equal(d.numpy(), x[tuple(slice(*t) for t in zip(begin, end, strides))])


def test_dynamic_strided_slice_zero_stride_is_a_clear_error():
    src = _module("d = R.dynamic_strided_slice(x, b, b, b)\nreturn d",
                  'x: R.Tensor((4,), dtype="float32"), b: R.Tensor((1,), dtype="int64")')
    with pytest.raises(ValueError, match="a stride is 0"):
        _run(src, np.zeros(4, "float32"), np.zeros(1, "int64"))


def test_dynamic_strided_slice_checks_lengths():
    src = _module("d = R.dynamic_strided_slice(x, b, b, b)\nreturn d",
                  'x: R.Tensor((4, 2), dtype="float32"), b: R.Tensor((3,), dtype="int64")')
    with pytest.raises(tvms.diagnostics.TVMScriptError, match="begin has 3 values but x has rank 2"):
        tvms.parse(src)


def test_r_tuple_call_form_is_a_tuple():
    """TVM 0.27's ``R.tuple(*fields)`` builds the tuple itself."""
    src = _module("t = R.tuple(x, R.shape_of(x))\ne = R.tuple()\nreturn (t, e)", 'x: R.Tensor((2,), dtype="float32")')
    mod, _, (t, e) = _run(src, np.ones(2, "float32"))
    text = mod.script()
    # As TVM's parser: the nested call is bound first.
    assert 'gv: R.Shape([2]) = R.shape_of(x)\n        t: R.Tuple(R.Tensor((2,), dtype="float32"), R.Shape([2])) = x, gv' in text
    assert tvms.parse(text).script() == text
    np.testing.assert_array_equal(t[0].numpy(), np.ones(2, "float32"))
    assert tuple(t[1]) == (2,) and len(e) == 0
