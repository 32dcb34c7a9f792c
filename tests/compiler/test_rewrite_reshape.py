"""RewriteDataflowReshape: which PrimFuncs are reshapes (the legalized forms, static and
symbolic, and copies that only look like one), and what the build does with their calls (a
view instead of a kernel, results against NumPy, an arena tensor returned through a view, the
calls left alone), on the CPU and on the GPU (emulated, unless ``--op-gpu real``)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform.rewrite_reshape import RewriteDataflowReshape, is_reshape

from support import op_check
from support.gpu_drivers import EmulatedDriver, install_driver

RNG = np.random.default_rng(0)


def legalized_prim_func(op_fn, in_shape, **attrs):
    """The PrimFunc LegalizeOps makes of ``op_fn(x, **attrs)`` for a float32 ``x`` of ``in_shape``."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(list(in_shape), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op_fn(x, **attrs))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    (func,) = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)]
    return func


n = tir.Var("int64", "n")


@pytest.mark.parametrize("op_fn, shape, attrs", [
    (relax.op.reshape, (2, 3, 4), {"shape": (6, 4)}),
    (relax.op.reshape, (24,), {"shape": (2, 3, 4)}),
    (relax.op.reshape, (1, 6, 4), {"shape": (1, 2, 3, 4)}),
    (relax.op.reshape, (n, 256), {"shape": (n, 8, 32)}),
    (relax.op.reshape, (1, n, 8, 32), {"shape": (1, n, 256)}),
    (relax.op.flatten, (2, 3, 4), {}),
    (relax.op.expand_dims, (3, 4), {"axis": [1]}),
    (relax.op.squeeze, (3, 1, 4), {"axis": [1]}),
    (relax.op.permute_dims, (1, 4, 1), {"axes": [2, 1, 0]}),  # moves unit dimensions only
], ids=["merge", "split", "unit-dims", "symbolic-split", "symbolic-merge", "flatten", "expand_dims", "squeeze",
        "transpose-of-unit-dims"])
def test_legalized_reshapes_are_recognized(op_fn, shape, attrs):
    assert is_reshape(legalized_prim_func(op_fn, shape, **attrs))


@pytest.mark.parametrize("op_fn, shape, attrs", [
    (relax.op.permute_dims, (3, 4), {}),
    (relax.op.permute_dims, (2, 1, 3), {"axes": [2, 1, 0]}),
    (relax.op.astype, (3, 4), {"dtype": "float16"}),
    (relax.op.strided_slice, (4, 6), {"axes": [1], "begin": [1], "end": [5]}),
    (relax.op.negative, (3, 4), {}),
    (relax.op.flip, (6,), {"axis": 0}),
], ids=["transpose", "transpose-3d", "cast", "slice", "negative", "flip"])
def test_other_copies_are_not_reshapes(op_fn, shape, attrs):
    assert not is_reshape(legalized_prim_func(op_fn, shape, **attrs))


COPY_TO_2x3 = '''
@T.prim_func
def copy(X: T.Buffer({x_shape}, "float32"), Y: T.Buffer((2, 3), "float32")):
    for i, j in T.grid(2, 3):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[{index}]
'''


@pytest.mark.parametrize("x_shape, index, expected", [
    ((6,), "(vi * 3 + vj + 1) % 6", False),                     # rotated by one
    ((6,), "vj * 2 + vi", False),                               # column-major
    ((3, 2), "(vi * 3 + vj) // 3, (vi * 3 + vj) % 2", False),   # the wrong stride
    ((8,), "vi * 3 + vj", False),                               # more elements than the output
    ((6,), "vi * 3 + vj", True),
    ((3, 2), "(vi * 3 + vj) // 2, (vi * 3 + vj) % 2", True),
], ids=["rotated", "column-major", "wrong-stride", "more-elements", "row-major", "unravel"])
def test_hand_written_copies(x_shape, index, expected):
    assert is_reshape(tvms.parse(COPY_TO_2x3.format(x_shape=x_shape, index=index))) is expected


PART_OF_THE_OUTPUT = '''
@T.prim_func
def copy(X: T.Buffer((6,), "float32"), Y: T.Buffer((2, 3), "float32")):
    for i, j in T.grid(2, {columns}):
        with T.block("Y"):
            vi = T.axis.spatial(2, i)
            vj = T.axis.spatial(3, j)
            {where}
            Y[vi, vj] = X[vi * 3 + vj]
'''


@pytest.mark.parametrize("columns, where", [(3, "T.where(vj < 2)"), (2, "")], ids=["predicated", "partial-loop"])
def test_a_copy_of_part_of_the_output_is_not_a_reshape(columns, where):
    text = PART_OF_THE_OUTPUT.format(columns=columns, where=where or "T.reads(X[vi * 3 + vj])")
    assert not is_reshape(tvms.parse(text))
    assert is_reshape(tvms.parse(PART_OF_THE_OUTPUT.format(columns=3, where="T.reads(X[vi * 3 + vj])")))


# ----------------------------------------------------------------------------- the build

THROUGH_A_VIEW = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32"), w: R.Tensor((3, 5), "float32")) -> R.Tensor((8, 5), "float32"):
        with R.dataflow():
            a = R.add(x, x)
            b = R.reshape(a, R.shape([8, 3]))
            c = R.matmul(b, w)
            R.output(c)
        return c

    @R.function
    def returned(x: R.Tensor((4, 6), "float32")) -> R.Tensor((2, 12), "float32"):
        with R.dataflow():
            a = R.multiply(x, x)
            b = R.reshape(a, R.shape([2, 12]))
            R.output(b)
        return b

    @R.function
    def of_a_parameter(x: R.Tensor(("m", 6), "float32")) -> R.Tensor(("m * 2", 3), "float32"):
        m = T.int64()
        with R.dataflow():
            b = R.reshape(x, R.shape([m * 2, 3]))
            c = R.exp(b)
            R.output(c)
        return c

    @R.function
    def symbolic(x: R.Tensor(("m", 6), "float32")) -> R.Tensor(("m", 2, 3), "float32"):
        m = T.int64()
        with R.dataflow():
            a = R.exp(x)
            b = R.reshape(a, R.shape([m, 2, 3]))
            c = R.add(b, b)
            R.output(c)
        return c
'''


def legalized():
    """THROUGH_A_VIEW with its ops legalized and nothing fused: each reshape its own call."""
    return relax.transform.LegalizeOps()(tvms.parse(THROUGH_A_VIEW))


def kernels_called(vm, name, *args) -> set:
    return {k for k, calls, _ in vm.profile(name, *args, repeat=1).rows if calls}


def test_reshape_calls_become_views_and_the_kernels_go():
    mod = RewriteDataflowReshape()(legalized())
    text = mod.script()
    assert text.count("R.reshape(") == 3  # main, returned, symbolic; not of_a_parameter's
    names = {gv.name_hint for gv in mod.functions}
    assert "reshape" not in names and "reshape1" not in names and "reshape3" not in names
    assert "reshape2" in names  # of_a_parameter still calls it
    assert RewriteDataflowReshape()(mod) is mod  # nothing left to rewrite


def test_results_match_numpy_and_no_reshape_kernel_runs():
    vm = relax.VirtualMachine(tvms.compile(legalized()), tvms.cpu())
    x = RNG.standard_normal((4, 6), dtype=np.float32)
    w = RNG.standard_normal((3, 5), dtype=np.float32)
    np.testing.assert_allclose(vm["main"](x, w).numpy(), (x + x).reshape(8, 3) @ w, rtol=1e-5, atol=1e-5)
    assert not any(k.startswith("reshape") for k in kernels_called(vm, "main", x, w))
    assert any(k.startswith("reshape") for k in kernels_called(vm, "of_a_parameter", x))
    np.testing.assert_allclose(vm["of_a_parameter"](x).numpy(), np.exp(x.reshape(8, 3)), rtol=1e-6)
    for m in (1, 5):
        xs = RNG.standard_normal((m, 6), dtype=np.float32)
        got = vm["symbolic"](xs).numpy()
        assert got.shape == (m, 2, 3)
        np.testing.assert_allclose(got, 2 * np.exp(xs).reshape(m, 2, 3), rtol=1e-6)


def test_a_view_returned_keeps_its_memory_out_of_the_arena():
    """The arena's slots serve every call: a result viewing one would change under the caller
    at the next call."""
    vm = relax.VirtualMachine(tvms.compile(legalized()), tvms.cpu())
    x1 = RNG.standard_normal((4, 6), dtype=np.float32)
    x2 = RNG.standard_normal((4, 6), dtype=np.float32)
    first = vm["returned"](x1)
    second = vm["returned"](x2)
    np.testing.assert_array_equal(first.numpy(), (x1 * x1).reshape(2, 12))
    np.testing.assert_array_equal(second.numpy(), (x2 * x2).reshape(2, 12))


def test_functions_with_in_place_calls_are_left_alone():
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def double(X: T.Buffer((6,), "float32")):
        for i in range(6):
            with T.block("X"):
                vi = T.axis.spatial(6, i)
                X[vi] = X[vi] * T.float32(2)

    @T.prim_func
    def exp(X: T.Buffer((6,), "float32"), Y: T.Buffer((6,), "float32")):
        for i in range(6):
            with T.block("Y"):
                vi = T.axis.spatial(6, i)
                Y[vi] = T.exp(X[vi])

    @T.prim_func
    def reshape(X: T.Buffer((6,), "float32"), Y: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi * 3 + vj]

    @R.function
    def main(x: R.Tensor((6,), "float32")) -> R.Tensor((2, 3), "float32"):
        cls = Module
        with R.dataflow():
            a = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((6,), "float32"))
            b = R.call_tir(cls.reshape, (a,), out_sinfo=R.Tensor((2, 3), "float32"))
            c = R.call_tir_inplace(cls.double, (a,), inplace_indices=[0], out_sinfo=R.Tensor((6,), "float32"))
            R.output(b)
        return b
'''
    mod = tvms.parse(src)
    assert RewriteDataflowReshape()(mod) is mod
    x = RNG.standard_normal(6).astype(np.float32)
    vm = relax.VirtualMachine(tvms.compile(mod), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x).reshape(2, 3), rtol=1e-6)


def test_views_on_the_gpu(monkeypatch):
    """On the emulated GPU, or on GPU 0 with ``--op-gpu real`` (test_cuda_gpu runs this file so)."""
    if op_check.op_gpu == "none":
        pytest.skip("--op-gpu none")
    if op_check.op_gpu == "emulated":
        install_driver(monkeypatch, EmulatedDriver())
    dev = tvms.cuda(0)
    vm = relax.VirtualMachine(tvms.compile(legalized(), target="cuda"), dev)
    x = RNG.standard_normal((4, 6), dtype=np.float32)
    w = RNG.standard_normal((3, 5), dtype=np.float32)
    got = vm["main"](tvms.nd.array(x, dev), tvms.nd.array(w, dev)).numpy()
    np.testing.assert_allclose(got, (x + x).reshape(8, 3) @ w, rtol=1e-5, atol=1e-5)
    xs = RNG.standard_normal((3, 6), dtype=np.float32)
    np.testing.assert_allclose(vm["symbolic"](tvms.nd.array(xs, dev)).numpy(), 2 * np.exp(xs).reshape(3, 2, 3),
                               rtol=1e-6)
