"""A call of another Relax function of the module has its callee's return struct info, wherever
the callee is written: functions are built callees first. (TVM's parser leaves a call of an
unannotated function defined later unknown, which then changes when the printer puts the
callee first; tvms's answer does not depend on the order.) Only functions that call each other
fall back to the annotation, or to unknown (``R.Object``) without one."""

from __future__ import annotations

import pytest

import tvmscript as tvms

HEADER = "# from tvm.script import ir as I\n# from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n"
CALLER = '''    @R.function
    def main(x: R.Tensor((2,), "float32")):
        y = Module.zeta(x)
        return y
'''


def callee(annotated: bool, ret: str = '(2,), "float32"') -> str:
    arrow = f" -> R.Tensor({ret})" if annotated else ""
    return f'''    @R.function
    def zeta(x: R.Tensor((2,), "float32")){arrow}:
        y = R.exp(x)
        return y
'''


@pytest.mark.parametrize("callee_first, annotated, expected", [
    (True, False, 'y: R.Tensor((2,), dtype="float32") = cls.zeta(x)'),
    (False, True, 'y: R.Tensor((2,), dtype="float32") = cls.zeta(x)'),
    (False, False, 'y: R.Tensor((2,), dtype="float32") = cls.zeta(x)'),
])
def test_call_struct_info_follows_what_the_parser_knows(callee_first, annotated, expected):
    parts = [callee(annotated), CALLER] if callee_first else [CALLER, callee(annotated)]
    printed = tvms.parse(HEADER + "\n".join(parts)).script()
    assert expected in printed, printed
    assert tvms.parse(printed).script() == printed


def test_a_later_callee_with_symbolic_dims_stays_unknown_at_the_caller():
    text = HEADER + CALLER + "\n" + callee(True, '("n",), "float32"').replace('x: R.Tensor((2,)', 'x: R.Tensor(("n",)')
    assert "y: R.Object = cls.zeta(x)" in tvms.parse(text).script()


def test_functions_calling_each_other_fall_back_to_the_annotation():
    text = HEADER + '''    @R.function
    def ping(x: R.Tensor((2,), "float32")):
        y = Module.pong(x)
        return y

    @R.function
    def pong(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = Module.ping(x)
        return y
'''
    printed = tvms.parse(text).script()
    assert 'y: R.Object = cls.ping(x)' in printed  # built first: ping is not known yet
    assert 'y: R.Tensor((2,), dtype="float32") = cls.pong(x)' in printed  # pong's annotation
