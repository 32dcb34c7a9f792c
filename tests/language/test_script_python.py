"""TVMScript written inside Python (issue 11): ``@I.ir_module class ...``, ``@T.prim_func`` and
``@R.function`` decorating Python definitions, as TVM's tutorials and tests write them.

The decorators read the definition's source, parse it with tvms's parser and return the IR;
names the TVMScript does not define come from the Python scope around it; diagnostics point at
this file's own lines and columns.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import ir, relax, tir
from tvmscript.ir import structural_equal
from tvmscript.script import ir as I, relax as R, tir as T

HIDDEN = 16  # read by the modules below through the Python scope


# Seed 000's MLP, written in Python (TVM's own printout of it, with the class decorated here).
@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"), w1: R.Tensor((256, 784), dtype="float32"), b1: R.Tensor((256,), dtype="float32"), w2: R.Tensor((10, 256), dtype="float32"), b2: R.Tensor((10,), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            lv: R.Tensor((784, 256), dtype="float32") = R.permute_dims(w1, axes=None)
            lv1: R.Tensor((1, 256), dtype="float32") = R.matmul(x, lv, out_dtype="float32")
            lv2: R.Tensor((1, 256), dtype="float32") = R.add(lv1, b1)
            lv3: R.Tensor((1, 256), dtype="float32") = R.nn.relu(lv2)
            lv4: R.Tensor((256, 10), dtype="float32") = R.permute_dims(w2, axes=None)
            lv5: R.Tensor((1, 10), dtype="float32") = R.matmul(lv3, lv4, out_dtype="float32")
            gv: R.Tensor((1, 10), dtype="float32") = R.add(lv5, b2)
            R.output(gv)
        return gv


# Seed 004's style: @tvm.script.ir_module (here tvms.script), T.Buffer[...] subscripts, the
# module's own functions called through the class name.
@tvms.script.ir_module
class MyModule:
    @T.prim_func
    def relu0(X: T.Buffer[(1, HIDDEN), "float32"], Y: T.Buffer[(1, HIDDEN), "float32"]):
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, HIDDEN):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor((1, 16), "float32")):
        with R.dataflow():
            out = R.call_tir(MyModule.relu0, (x,), R.Tensor((1, 16), dtype="float32"))
            R.output(out)
        return out


def _run(mod, *arrays):
    ex = tvms.compile(mod, "llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    return vm["main"](*[tvms.nd.array(a) for a in arrays]).numpy()


def test_class_decorator_returns_the_parsed_module():
    assert isinstance(MLP, ir.IRModule)
    assert [gv.name_hint for gv in MLP.functions] == ["main"]
    # The same text through the text parser gives the same module.
    text = MLP.script()
    assert structural_equal(tvms.parse(text), MLP)


def test_seed000_mlp_runs_like_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype("float32")
    w1 = rng.standard_normal((256, 784)).astype("float32") * 0.05
    b1 = rng.standard_normal((256,)).astype("float32")
    w2 = rng.standard_normal((10, 256)).astype("float32") * 0.05
    b2 = rng.standard_normal((10,)).astype("float32")
    expected = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(_run(MLP, x, w1, b1, w2, b2), expected, rtol=1e-4, atol=1e-4)


def test_seed004_style_module_class_name_and_python_constant():
    assert isinstance(MyModule, ir.IRModule)
    relu0 = MyModule["relu0"]
    assert [int(d.value) for d in relu0.buffer_map[relu0.params[0]].shape] == [1, HIDDEN]
    text = MyModule.script()
    assert "R.call_tir(cls.relu0" in text  # MyModule.relu0 means cls.relu0
    x = np.linspace(-1, 1, 16, dtype="float32").reshape(1, 16)
    np.testing.assert_allclose(_run(MyModule, x), np.maximum(x, 0))


def test_function_decorators_standalone():
    @T.prim_func
    def fill(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = T.float32(1)

    @R.function
    def ident(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        return x

    @T.prim_func(private=True)
    def priv(A: T.Buffer((4,), "float32")):
        A[0] = T.float32(1)

    assert isinstance(fill, tir.PrimFunc)
    assert isinstance(ident, relax.Function)
    assert isinstance(priv, tir.PrimFunc)
    assert "global_symbol" not in (priv.attrs or {})


def test_names_from_the_enclosing_python_scope():
    n = 8
    dtype = "float16"
    scale = 2.5
    m = tir.Var("int32", "m")

    @T.prim_func
    def f(A: T.Buffer((n,), dtype), B: T.Buffer((m,), "int32")):
        for i in T.grid(n):
            A[i] = T.float16(scale)
        for j in range(m):
            B[j] = j

    a, b = (f.buffer_map[p] for p in f.params)
    assert int(a.shape[0].value) == 8 and a.dtype == "float16"
    assert b.shape[0] is m  # the very PrimExpr of the Python scope
    assert "A[i] = T.float16(2.5)" in f.script()  # a Python number in T.float16(...): a literal

    shape = (2, 5)

    @I.ir_module
    class Shaped:
        @T.prim_func
        def zero(A: T.Buffer(shape, "float32")):
            for i, j in T.grid(*shape):
                A[i, j] = T.float32(0)

        @R.function
        def main(x: R.Tensor((HIDDEN, n), "float32"), y: R.Tensor(shape, dtype)):
            return x

    zero = Shaped["zero"]
    assert [int(d.value) for d in zero.buffer_map[zero.params[0]].shape] == [2, 5]
    sinfo = Shaped["main"].params[0].struct_info
    assert [int(d.value) for d in sinfo.shape] == [16, 8]
    sinfo = Shaped["main"].params[1].struct_info
    assert [int(d.value) for d in sinfo.shape] == [2, 5] and sinfo.dtype == "float16"


def test_diagnostics_point_at_this_files_lines_and_columns():
    with pytest.raises(tvms.TVMScriptError) as info:
        @I.ir_module
        class Broken:
            @T.prim_func
            def f(A: T.Buffer((4,), "float32")):
                for i in range(4):
                    A[i] = undefined_thing + T.float32(1)  # noqa: F821
    err = info.value
    lines = open(__file__, encoding="utf-8").read().split("\n")
    assert err.span.filename == __file__
    line = lines[err.span.line - 1]
    assert line[err.span.col - 1:].startswith("undefined_thing")
    assert "undefined name 'undefined_thing'" in err.message
    assert "undefined_thing" in err.render()


def test_annotations_are_harmless_python_values():
    # What Python evaluates in signatures before the decorator runs.
    for value in (R.Tensor((1, 784), dtype="float32"), T.Buffer((128, 128), "float32"), T.handle,
                  R.Shape([1, 2]), R.Object, T.int64, T.int64(3), T.Buffer[(4,), "int8"], R.Tuple([R.Tensor])):
        assert "TVMScript" in repr(value)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        T.prim_func(bogus=True)


# A file without ``from __future__ import annotations``: Python evaluates every annotation of
# the methods, so the dialect names must all be harmless values. The module is indented inside
# a function, so diagnostics must add the indentation back.
EVALUATED = '''\
import tvmscript as tvms
from tvmscript.script import ir as I, relax as R, tir as T

ROWS = 4


def make():
    @tvms.script.ir_module
    class Module:
        @T.prim_func
        def copy(a: T.handle, b: T.handle, n: T.int64, X: T.Buffer[(ROWS,), "float32"]):
            A = T.match_buffer(a, (ROWS,), "float32")
            B = T.match_buffer(b, (ROWS,), "float32")
            for i in range(ROWS):
                B[i] = A[i]

        @R.function
        def main(x: R.Tensor((ROWS,), dtype="float32"), s: R.Shape([2, 2]), o: R.Object, t: R.Tuple([R.Tensor((2,), "int8")]), p: R.Prim("int64")) -> R.Tensor((ROWS,), dtype="float32"):
            return x
    return Module


def broken():
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((ROWS,), dtype="float32")):
            return R.add(x, nowhere)
    return Module
'''


def _load(tmp_path, monkeypatch, name: str, text: str):
    """Import ``text`` as the module ``name``, from a file (as an import would)."""
    import importlib.util
    import sys

    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module, str(path)


def test_evaluated_annotations_and_indented_definitions(tmp_path, monkeypatch):
    module, path = _load(tmp_path, monkeypatch, "evaluated_annotations", EVALUATED)
    mod = module.make()
    copy = mod["copy"]
    assert [p.name for p in copy.params] == ["a", "b", "n", "X"]
    assert [int(d.value) for d in copy.buffer_map[copy.params[0]].shape] == [4]
    main = mod["main"]
    assert [int(d.value) for d in main.params[0].struct_info.shape] == [4]
    # The IR keeps the file's own places: the parameter x of main, after the indentation.
    span = main.params[0].span
    line = EVALUATED.split("\n")[span.line - 1]
    assert span.filename == path and line[span.col - 1:].startswith("x: R.Tensor"), (span, line)
    with pytest.raises(tvms.TVMScriptError) as info:
        module.broken()
    span = info.value.span
    line = EVALUATED.split("\n")[span.line - 1]
    assert span.filename == path
    assert line[span.col - 1:].startswith("nowhere"), (span, line)
    assert "return R.add(x, nowhere)" in info.value.render()


class BeforeAfter:
    """TVM's tests keep functions in plain classes: each is parsed on its own."""

    @T.prim_func
    def before(A: T.Buffer((HIDDEN,), "float32")):
        for i in range(HIDDEN):
            A[i] = T.float32(0)

    @R.function
    def expected(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x


def test_functions_in_a_plain_class_are_parsed_each():
    assert isinstance(BeforeAfter.before, tir.PrimFunc)
    assert isinstance(BeforeAfter.expected, relax.Function)
    assert "ir_module" not in repr(BeforeAfter.before)


def _row_major(i, j):
    return i * HIDDEN + j


def test_python_helper_functions_in_tir():
    @T.prim_func
    def flat(A: T.Buffer((4 * HIDDEN,), "float32"), B: T.Buffer((4, HIDDEN), "float32")):
        for i, j in T.grid(4, HIDDEN):
            B[i, j] = A[_row_major(i, j)]

    @T.prim_func
    def direct(A: T.Buffer((4 * HIDDEN,), "float32"), B: T.Buffer((4, HIDDEN), "float32")):
        for i, j in T.grid(4, HIDDEN):
            B[i, j] = A[i * 16 + j]

    assert flat.script().replace("def flat", "def direct") == direct.script()

    def broken(i):
        raise ValueError("no")

    with pytest.raises(tvms.TVMScriptError, match="the Python function 'broken' failed: ValueError: no"):
        @T.prim_func
        def g(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[broken(i)] = T.float32(0)


def test_relax_reads_python_shapes_numbers_and_lists():
    shape = (3, 2)
    scale = 2.0
    n = 6

    @I.ir_module
    class Scaled:
        @R.function
        def main(x: R.Tensor((n,), "float32")):
            y = R.reshape(x, shape)
            z = R.multiply(y, R.const(scale, "float32"))
            a = R.permute_dims(z, axes=[1, 0])
            return a

    x = np.arange(6, dtype="float32")
    ex = tvms.compile(Scaled, "llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    np.testing.assert_allclose(vm["main"](tvms.nd.array(x)).numpy(), (x.reshape(3, 2) * 2.0).T)


def test_symbolic_variables_declared_in_python():
    n = T.int64()
    assert isinstance(n, tir.Var) and n.dtype == "int64"

    @I.ir_module
    class Dynamic:
        @T.prim_func
        def zero(A: T.Buffer((n,), "float32")):
            for i in range(n):
                A[i] = T.float32(0)

        @R.function
        def main(x: R.Tensor((n,), "float32")) -> R.Tensor((n,), "float32"):
            return x

    zero = Dynamic["zero"]
    assert zero.buffer_map[zero.params[0]].shape[0] is n
    assert Dynamic["main"].params[0].struct_info.shape[0] is n
    assert n.name == "n"
    assert 'R.Tensor(("n",)' in Dynamic.script()
