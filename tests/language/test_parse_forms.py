"""TVMScript forms TVM's own test programs write (issue 11, items 3 and 4): a module's functions
called through the class name, ``R.Tuple([...])``, True/False in Relax, list attributes, a
single-target ``T.axis.remap``, tuple declarations ``m, n = T.int64(), T.int64()``,
``T.grid(*A.shape)`` and lowercase ``T.buffer``. Each is checked against the spelling the
parser already knew (structural equality), and numerically where it computes something.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from tvmscript.ir import structural_equal

ADD_MODULE = '''
@I.ir_module
class Expected:
    @T.prim_func(private=True)
    def fused_add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("c"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] + B[vi]

    @R.function(private=True)
    def twice(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Expected
        z = R.call_tir(REF.fused_add, (x, y), out_sinfo=R.Tensor((4,), "float32"))
        w = REF.twice(z)
        return w
'''


def _run(mod, *arrays):
    ex = tvms.compile(mod, "llvm")
    vm = tvms.relax.VirtualMachine(ex, tvms.cpu())
    return vm["main"](*[tvms.nd.array(a) for a in arrays]).numpy()


def _same(a: str, b: str) -> None:
    assert structural_equal(tvms.parse(a), tvms.parse(b)), tvms.parse(a).script()


def test_functions_through_the_class_name_mean_cls():
    by_class = tvms.parse(ADD_MODULE.replace("REF", "Expected"))
    assert structural_equal(by_class, tvms.parse(ADD_MODULE.replace("REF", "cls")))
    text = by_class.script()
    assert "R.call_tir(cls.fused_add" in text and "cls.twice(" in text
    assert "Expected." not in text
    x = np.arange(4, dtype="float32")
    y = np.full(4, 0.5, dtype="float32")
    np.testing.assert_allclose(_run(by_class, x, y), 2 * (x + y))


def test_class_name_of_another_module_is_not_cls():
    with pytest.raises(tvms.TVMScriptError, match="Other"):
        tvms.parse(ADD_MODULE.replace("REF", "Other"))


def test_tuple_list_form():
    _same(
        '@R.function\ndef f(x: R.Tensor((2,), "float32")) -> R.Tuple([R.Tensor((2,), "float32"), R.Tensor((2,), "float32")]):\n    return (x, x)\n',
        '@R.function\ndef f(x: R.Tensor((2,), "float32")) -> R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2,), "float32")):\n    return (x, x)\n',
    )


def test_true_false_in_relax():
    f = tvms.parse(
        '@R.function\ndef f(x: R.Tensor((2,), "float32")):\n'
        '    c = R.const(True)\n    d = R.prim_value(False)\n    e = True\n    return (c, d, e)\n'
    )
    c, d, e = (relax.struct_info_of(b.value) for b in f.body.blocks[0].bindings)
    assert c.dtype == "bool"
    assert d.dtype == "bool" and int(d.value.value) == 0
    assert isinstance(e, relax.TensorStructInfo) and e.dtype == "bool" and e.ndim == 0  # as TVM: R.const(True)
    assert bool(f.body.blocks[0].bindings[2].value.data) is True


def test_list_attributes_strided_slice():
    mod = tvms.parse(
        '@I.ir_module\nclass M:\n    @R.function\n    def main(x: R.Tensor((8, 11), "float32")):\n'
        '        y = R.strided_slice(x, axes=[0, 1], begin=[1, 2], end=[7, 10], strides=[2, 3])\n'
        '        return y\n'
    )
    x = np.arange(88, dtype="float32").reshape(8, 11)
    np.testing.assert_array_equal(_run(mod, x), x[1:7:2, 2:10:3])


REDUCE = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(8):
        with T.block("r"):
            REMAP
            with T.init():
                B[0] = T.float32(0)
            B[0] = B[0] + A[vi]
'''


def test_single_target_axis_remap():
    f = tvms.parse(REDUCE.replace("REMAP", 'vi = T.axis.remap("R", [i])'))
    assert structural_equal(f, tvms.parse(REDUCE.replace("REMAP", "vi = T.axis.reduce(8, i)")))


def test_tuple_declarations():
    _same(
        '@T.prim_func\ndef f(a: T.handle):\n    m, n = T.int64(), T.int64()\n'
        '    A = T.match_buffer(a, (m, n), "float32")\n    for i, j in T.grid(m, n):\n        A[i, j] = T.float32(0)\n',
        '@T.prim_func\ndef f(a: T.handle):\n    m = T.int64()\n    n = T.int64()\n'
        '    A = T.match_buffer(a, (m, n), "float32")\n    for i, j in T.grid(m, n):\n        A[i, j] = T.float32(0)\n',
    )
    _same(
        '@R.function\ndef f(x: R.Tensor(("m", "n"), "float32")):\n    m, n = T.int64(), T.int64()\n'
        '    y = R.reshape(x, (n, m))\n    return y\n',
        '@R.function\ndef f(x: R.Tensor(("m", "n"), "float32")):\n    m = T.int64()\n    n = T.int64()\n'
        '    y = R.reshape(x, (n, m))\n    return y\n',
    )
    with pytest.raises(tvms.TVMScriptError, match="2 names but 3 declarations"):
        tvms.parse('@T.prim_func\ndef f():\n    m, n = T.int64(), T.int64(), T.int64()\n    T.evaluate(0)\n')


def test_starred_grid_and_lowercase_buffer():
    explicit = '@T.prim_func\ndef f(A: T.Buffer((4, 5), "float32")):\n    for i, j in T.grid(4, 5):\n        A[i, j] = T.float32(0)\n'
    _same(explicit.replace("T.grid(4, 5)", "T.grid(*A.shape)"), explicit)
    _same(explicit.replace("T.Buffer(", "T.buffer("), explicit)
    with pytest.raises(tvms.TVMScriptError, match="buffer's shape"):
        tvms.parse(explicit.replace("T.grid(4, 5)", "T.grid(*A)"))


def test_meta_var_is_substituted():
    direct = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    for i in range(4):\n        A[i] = A[i] * T.float32(2) + T.float32(1)\n'
    _same(
        direct.replace("        A[i] = A[i] * T.float32(2) + T.float32(1)",
                       "        t = T.meta_var(A[i] * T.float32(2))\n        A[i] = t + T.float32(1)"),
        direct,
    )
