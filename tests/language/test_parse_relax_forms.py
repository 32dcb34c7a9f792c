"""Relax forms of TVM's own TVMScript that tvms reads (issue 11): the impure builtins
``R.print`` / ``R.assert_op``, ``R.call_tir_inplace`` / ``R.call_tir_with_grad``, arithmetic of
symbolic dims where a Relax value is meant, and ``I.module_global_infos``. Each form parses,
prints in TVM 0.27's layout and round-trips (print, re-parse, structurally equal, print again
identical); where the VM can run it, its results are checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import ir, relax
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import structural_equal

HEADER = ("# from tvm.script import ir as I\n# from tvm.script import tirx as T\n"
          "# from tvm.script import relax as R\n\n")


def _roundtrip(text: str):
    """Parse ``text``, print it, re-parse the printout: the two agree and print identically."""
    first = tvms.parse(HEADER + text)
    printed = first.script()
    second = tvms.parse(printed)
    assert structural_equal(first, second), printed
    assert second.script() == printed
    return first, printed


def _vm(mod):
    return relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())


# ----------------------------------------------------------------------------- R.print / R.assert_op

EFFECTS = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), dtype="int32"), ok: R.Tensor((), dtype="bool")) -> R.Tensor((3,), dtype="int32"):
        R.print(x, R.prim_value(7), format="values {} and {}")
        y = R.multiply(x, x)
        R.assert_op(ok, [x, y], format="x={} y={}")
        R.print(format="done")
        return y
'''


def test_print_and_assert_op_print_as_tvm():
    mod, printed = _roundtrip(EFFECTS)
    assert 'R.print(x, R.prim_value(7), format=R.str("values {} and {}"))' in printed
    assert 'R.assert_op(ok, x, y, format=R.str("x={} y={}"))' in printed
    assert 'R.print(format=R.str("done"))' in printed
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.print" and isinstance(call.args[0], relax.StringImm)
    assert isinstance(call.struct_info, relax.TupleStructInfo) and not call.struct_info.fields


def test_named_effect_binding_keeps_its_name():
    _, printed = _roundtrip('''
@R.function(pure=False)
def main(c: R.Tensor((), dtype="bool")) -> R.Tensor((), dtype="bool"):
    unit = R.assert_op(c, format="")
    return c
''')
    assert 'unit: R.Tuple = R.assert_op(c, format=R.str(""))' in printed


def test_print_and_assert_run_in_the_vm(capsys):
    mod = relax.transform.LegalizeOps()(tvms.parse(HEADER + EFFECTS))
    vm = _vm(mod)
    x = np.array([1, -2, 3], dtype="int32")
    out = vm["main"](tvms.nd.array(x), tvms.nd.array(np.array(True)))
    np.testing.assert_array_equal(out.numpy(), x * x)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"values {x} and 7", "done"]
    from tvmscript.runtime.vm_helpers import VMAssertionError

    with pytest.raises(VMAssertionError, match=r"x=\[ 1 -2  3\] y=\[1 4 9\]"):
        vm["main"](tvms.nd.array(x), tvms.nd.array(np.array(False)))


def test_assert_op_with_an_empty_format_joins_the_values():
    mod = tvms.parse(HEADER + '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((2,), dtype="float32"):
        R.assert_op(c, x, R.prim_value(5))
        return x
''')
    from tvmscript.runtime.vm_helpers import VMAssertionError

    vm = _vm(mod)
    with pytest.raises(VMAssertionError) as info:
        vm["main"](tvms.nd.array(np.array([1, 2], "float32")), tvms.nd.array(np.array(False)))
    assert info.value.message == "[1. 2.], 5 (in function 'main')"  # and its place, the R.assert_op's
    assert (info.value.span.line, info.value.span.col) == (10, 9)


def test_effect_call_errors():
    with pytest.raises(TVMScriptError, match="unexpected keyword argument 'fmt'"):
        tvms.parse(HEADER + '''
@R.function(pure=False)
def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
    R.print(x, fmt="{}")
    return x
''')
    with pytest.raises(TVMScriptError, match="expects a condition"):
        tvms.parse(HEADER + '''
@R.function(pure=False)
def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
    R.assert_op(format="no")
    return x
''')


# ----------------------------------------------------------------------------- call_tir variants

INPLACE = '''
@I.ir_module
class Module:
    @T.prim_func
    def accumulate(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("acc"):
                vi = T.axis.spatial(4, i)
                b[vi] = b[vi] + a[vi]

    @T.prim_func
    def split(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("split"):
                vi = T.axis.spatial(4, i)
                b[vi] = a[vi] * T.float32(0.5)
                a[vi] = a[vi] * T.float32(2)

    @T.prim_func
    def triple(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("triple"):
                vi = T.axis.spatial(4, i)
                b[vi] = a[vi] * T.float32(3)

    @R.function(pure=False)
    def main(x: R.Tensor((4,), dtype="float32"), y: R.Tensor((4,), dtype="float32")):
        cls = Module
        s = R.call_tir_inplace(cls.accumulate, (x, y), inplace_indices=[1], out_sinfo=R.Tensor((4,), dtype="float32"))
        pair = R.call_tir_inplace(cls.split, (s,), inplace_indices=[0, -1], out_sinfo=[R.Tensor((4,), dtype="float32"), R.Tensor((4,), dtype="float32")])
        t = R.call_tir_with_grad(cls.triple, (x,), out_sinfo=R.Tensor((4,), dtype="float32"), te_grad_name="triple_grad", te_grad_kwargs={"k": 3.0})
        return (s, pair, t)
'''


def test_call_tir_inplace_and_with_grad_print_as_tvm():
    mod, printed = _roundtrip(INPLACE)
    assert ('s: R.Tensor((4,), dtype="float32") = R.call_tir_inplace(cls.accumulate, (x, y), '
            'out_sinfo=R.Tensor((4,), dtype="float32"), inplace_indices=[1])') in printed
    assert "inplace_indices=[0, -1])" in printed
    assert ('R.call_tir_with_grad(cls.triple, (x,), out_sinfo=R.Tensor((4,), dtype="float32"), '
            'te_grad_name="triple_grad", te_grad_kwargs={"k": 3.0})') in printed
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.call_tir_inplace" and call.attrs == {"inplace_indices": [1]}


def test_call_tir_inplace_writes_the_argument_in_place():
    vm = _vm(tvms.parse(HEADER + INPLACE))
    x = np.array([1, 2, 3, 4], "float32")
    y = np.array([10, 20, 30, 40], "float32")
    yt = tvms.nd.array(y.copy())
    s, (doubled, half), t = vm["main"](tvms.nd.array(x), yt)
    # s is y (written in place), then split doubled it in place too: all three are one buffer.
    np.testing.assert_allclose(yt.numpy(), (x + y) * 2)
    np.testing.assert_allclose(s.numpy(), (x + y) * 2)
    np.testing.assert_allclose(doubled.numpy(), (x + y) * 2)
    np.testing.assert_allclose(half.numpy(), (x + y) * 0.5)
    np.testing.assert_allclose(t.numpy(), x * 3)


@pytest.mark.parametrize("indices, message", [
    ("[2]", "inplace index 2 is not an argument"),
    ("[0, 1]", "2 inplace_indices for 1 output"),
    ("[-1]", "at least one inplace index"),
    ('["a"]', "must be a list of ints"),
])
def test_call_tir_inplace_errors(indices, message):
    src = INPLACE.replace("inplace_indices=[1]", f"inplace_indices={indices}")
    with pytest.raises(TVMScriptError, match=message):
        tvms.parse(HEADER + src)


# ----------------------------------------------------------------------------- expression dims

def test_symbolic_arithmetic_as_relax_values():
    mod, printed = _roundtrip('''
@R.function
def main(x: R.Tensor(("a", "b"), "float32")) -> R.Tensor(("a // 2", "b * 2"), "float32"):
    a = T.int64()
    b = T.int64()
    gv: R.Tensor((a // 2, b * 2), "float32") = R.reshape(x, (a // 2, b * 2))
    tail = R.strided_slice(gv, (0,), (0,), (a // 2 - 1,))
    return gv
''')
    assert "R.reshape(x, R.shape([a // 2, b * 2]))" in printed
    assert "(R.prim_value(a // 2 - 1),)" in printed

    reshape_only = tvms.parse(HEADER + '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32")) -> R.Tensor(("a // 2", "b * 2"), "float32"):
        a = T.int64()
        b = T.int64()
        gv: R.Tensor((a // 2, b * 2), "float32") = R.reshape(x, (a // 2, b * 2))
        return gv
''')
    vm = _vm(relax.transform.LegalizeOps()(reshape_only))
    x = np.arange(24, dtype="float32").reshape(4, 6)
    np.testing.assert_array_equal(vm["main"](tvms.nd.array(x)).numpy(), x.reshape(2, 12))


def test_arithmetic_on_relax_values_is_reported():
    # TVM reads ``x + x`` on tensors as R.add (see test_parse_relax_tvm.py); an operator no
    # Relax op stands for is reported.
    with pytest.raises(TVMScriptError, match="may only use symbolic dims"):
        tvms.parse(HEADER + '''
@R.function
def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
    y = x << x
    return y
''')


# ----------------------------------------------------------------------------- module global infos

GLOBAL_INFOS = '''
@I.ir_module
class Module:
    I.module_attrs({"note": 1})
    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), I.vdevice("cuda", 1, "global")], "dummy": [I.dummy_global_info()]})
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return x
'''


def test_module_global_infos_round_trip():
    mod, printed = _roundtrip(GLOBAL_INFOS)
    assert mod.global_infos == {
        "vdevice": [ir.VDevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), ir.VDevice("cuda", 1, "global")],
        "dummy": [ir.DummyGlobalInfo()],
    }
    assert ('    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, '
            '"global"), I.vdevice("cuda", 1, "global")], "dummy": [I.dummy_global_info()]})') in printed
    assert tvms.parse(printed).global_infos == mod.global_infos


def test_module_global_infos_defaults_and_errors():
    mod = tvms.parse(HEADER + GLOBAL_INFOS.replace('I.vdevice("cuda", 1, "global")', 'I.vdevice("cuda")'))
    assert mod.global_infos["vdevice"][1] == ir.VDevice("cuda", 0, "global")
    with pytest.raises(TVMScriptError, match="expected I.vdevice"):
        tvms.parse(HEADER + GLOBAL_INFOS.replace("I.dummy_global_info()", "I.nothing()"))
    with pytest.raises(TVMScriptError, match="takes a dict of lists"):
        tvms.parse(HEADER + GLOBAL_INFOS.replace('"dummy": [I.dummy_global_info()]', '"dummy": 3'))


VDEVICES = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("cuda", 0), I.vdevice({"kind": "cuda", "arch": "sm_80"}, 0, "global")]})
    @R.function
    def main(a: R.Tensor((2,), "float32", "cuda:1"), b: R.Tensor((2,), "float32", "vdevice:2"), c: R.Tensor((2,), "float32", vdevice="llvm")) -> R.Tensor((2,), "float32", "vdevice:0"):
        return c
'''


def test_tensor_vdevice_prints_as_kind_index_scope():
    mod, printed = _roundtrip(VDEVICES)
    assert ('def main(a: R.Tensor((2,), dtype="float32", vdevice="cuda:1:global"), '
            'b: R.Tensor((2,), dtype="float32", vdevice="cuda:1:global"), '
            'c: R.Tensor((2,), dtype="float32", vdevice="llvm:0:global")) -> '
            'R.Tensor((2,), dtype="float32", vdevice="llvm:0:global"):') in printed
    assert mod["main"].params[1].struct_info.vdevice == "cuda:1:global"


@pytest.mark.parametrize("vdevice, message", [
    ('"vdevice:7"', "have 3 vdevice"),
    ('"cuda:x"', "is not of the form"),
    ("3.5", "vdevice must be a string"),
])
def test_tensor_vdevice_errors(vdevice, message):
    with pytest.raises(TVMScriptError, match=message):
        tvms.parse(HEADER + VDEVICES.replace('"vdevice:2"', vdevice))


def test_tensor_third_int_argument_is_still_ndim():
    func = tvms.parse(HEADER + '''
@R.function
def main(a: R.Tensor(None, "float32", 2)) -> R.Tensor(None, "float32", 2):
    return a
''')
    assert func.params[0].struct_info.ndim == 2 and func.params[0].struct_info.vdevice is None
