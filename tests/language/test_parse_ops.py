"""Op calls in TVMScript text as TVM writes and reads them: positional arguments bound in the order
of TVM's Python function (``R.nn.pad(x, [..], "reflect")`` gives pad_mode), and typed numbers
(``T.float32(0.5)``) as attributes, prim-value arguments and inside ``R.prim_value``, ``"inf"``
and ``"-inf"`` included, as TVM 0.27 prints them. Each form parses, prints in this printer's form,
parses back the same, and the numbers are checked by running the call."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.compiler.transform import LegalizeOps
from tvmscript.diagnostics import TVMScriptError

from support.op_check import run

RNG = np.random.default_rng(3)


def program(line: str, params: str = 'x: R.Tensor((4, 5), dtype="float32")') -> str:
    return f"@R.function\ndef main({params}):\n    y = {line}\n    return y\n"


def call_of(func):
    return func.body.blocks[0].bindings[0].value


def parse_round_trip(src: str):
    """The parsed function, after checking its printed form parses back to the same text."""
    func = tvms.parse(src)
    text = func.script()
    again = tvms.parse(text)
    assert again.script() == text
    tvms.ir.assert_structural_equal(again, func)
    return func


def run_func(func, *arrays):
    return run(LegalizeOps()(tvms.IRModule({"main": func})), list(arrays))


# ----------------------------------------------------------------------------- positional arguments


def test_pad_positional_arguments_follow_tvms_python_signature():
    """``nn.pad(data, pad_width, pad_mode="constant", pad_value=0.0)``: TVM's parser calls this
    function, so the third positional argument is the mode (it prints pad_value first)."""
    func = parse_round_trip(program('R.nn.pad(x, [1, 1, 2, 2], "reflect")'))
    call = call_of(func)
    assert call.attrs["pad_mode"] == "reflect" and call.attrs["pad_value"] == 0.0
    assert 'R.nn.pad(x, pad_width=[1, 1, 2, 2], pad_value=0.0, pad_mode="reflect")' in func.script()
    x = RNG.standard_normal((4, 5)).astype("float32")
    np.testing.assert_array_equal(run_func(func, x), np.pad(x, [(1, 1), (2, 2)], mode="reflect"))

    func = parse_round_trip(program('R.nn.pad(x, [0, 0, 1, 0], "constant", 2.5)'))
    assert call_of(func).attrs["pad_value"] == 2.5
    np.testing.assert_array_equal(run_func(func, x), np.pad(x, [(0, 0), (1, 0)], constant_values=2.5))


def test_pool_positional_padding_comes_before_dilation():
    func = parse_round_trip(program("R.nn.max_pool2d(x, 3, 2, 1)", 'x: R.Tensor((1, 1, 6, 6), dtype="float32")'))
    attrs = call_of(func).attrs
    assert attrs["padding"] == [1, 1, 1, 1] and attrs["dilation"] == [1, 1]
    assert 'R.Tensor((1, 1, 3, 3), dtype="float32")' in func.script()


def test_too_many_positional_arguments_is_located():
    src = program('R.nn.pad(x, [1, 1, 2, 2], "reflect", 0.0, 1)')
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert "takes 4 positional arguments but 5 were given" in info.value.message


# ----------------------------------------------------------------------------- typed numbers


def test_float_attribute_written_as_typed_number():
    """TVM 0.27 prints ``scale=T.float32(0.5)``; it is the number 0.5."""
    q = 'q: R.Tensor((1, 3, 2, 4), dtype="float32")'
    func = parse_round_trip(program("R.nn.attention(q, q, q, scale=T.float32(0.5), causal_mask=None, "
                                    "window_size=None)", q))
    assert call_of(func).attrs["scale"] == 0.5
    plain = tvms.parse(program("R.nn.attention(q, q, q, scale=0.5)", q))
    tvms.ir.assert_structural_equal(plain, func)
    func = tvms.parse(program("R.nn.leakyrelu(x, alpha=T.float64(0.25))"))
    assert call_of(func).attrs["alpha"] == 0.25


def test_prim_value_of_a_typed_number():
    func = parse_round_trip(program("R.clip(x, R.prim_value(T.float32(-1.5)), R.prim_value(T.float32(2.5)))"))
    lo = call_of(func).args[1]
    assert isinstance(lo, relax.PrimValue) and lo.value.dtype == "float32" and lo.value.value == -1.5
    x = RNG.uniform(-4, 4, (4, 5)).astype("float32")
    np.testing.assert_array_equal(run_func(func, x), np.clip(x, -1.5, 2.5))


def test_prim_value_of_infinity():
    """``R.prim_value(T.float64("-inf"))``: TVM quotes the infinities; a one-sided clip."""
    func = parse_round_trip(program('R.clip(x, R.prim_value(T.float64("-inf")), R.prim_value(T.float64(0.5)))'))
    lo = call_of(func).args[1].value
    assert lo.dtype == "float64" and math.isinf(lo.value) and lo.value < 0
    assert 'R.prim_value(T.float64("-inf"))' in func.script()
    x = RNG.uniform(-4, 4, (4, 5)).astype("float32")
    np.testing.assert_array_equal(run_func(func, x), np.minimum(x, 0.5))
    func = parse_round_trip(program('R.clip(x, R.prim_value(-1), R.prim_value(T.float32("inf")))'))
    np.testing.assert_array_equal(run_func(func, x), np.maximum(x, -1))


def test_bare_typed_numbers_are_prim_values():
    """TVM 0.27 prints a PrimValue argument as the bare number: ``R.clip(x, T.float64(-1.5),
    T.float64(2.5))``."""
    func = parse_round_trip(program("R.clip(x, T.float64(-1.5), T.float64(2.5))"))
    assert all(isinstance(a, relax.PrimValue) and a.value.dtype == "float64" for a in call_of(func).args[1:])
    bare = tvms.parse(program("R.clip(x, R.prim_value(T.float64(-1.5)), R.prim_value(T.float64(2.5)))"))
    tvms.ir.assert_structural_equal(bare, func)
    x = RNG.uniform(-4, 4, (4, 5)).astype("float32")
    np.testing.assert_array_equal(run_func(func, x), np.clip(x, -1.5, 2.5))


def test_typed_integer_prim_value():
    """(Printed back as ``R.prim_value(7)``, int64 when read again, as TVM 0.27 prints it too.)"""
    func = tvms.parse(program("R.prim_value(T.int32(7))", ""))
    value = func.body.blocks[0].bindings[0].value.value
    assert isinstance(value, tir.IntImm) and value.dtype == "int32" and value.value == 7


@pytest.mark.parametrize("line,message,at", [
    ("R.clip(x, T.int32(0.5), T.int32(1))", "T.int32() takes an integer, not 0.5", "0.5"),
    ('R.clip(x, R.prim_value(T.float32("big")), 1)', "T.float32() takes a number here, not 'big'", '"big"'),
    ("R.nn.leakyrelu(x, alpha=T.float32(True))", "T.float32() takes a number here, not True", "True"),
])
def test_bad_typed_numbers_are_located(line, message, at):
    src = program(line)
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(src)
    assert message in info.value.message
    assert (info.value.span.line, info.value.span.col) == (3, src.split("\n")[2].index(at) + 1)


def test_relu6_in_text_is_tvms_clip():
    """``R.nn.relu6(x)`` is TVM's Python helper: the call it builds is ``R.clip(x, 0, 6)`` (as
    TVM 0.27 prints it, bare numbers for the bounds)."""
    func = parse_round_trip(program("R.nn.relu6(x)"))
    tvms.ir.assert_structural_equal(func, tvms.parse(program("R.clip(x, 0, 6)")))
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(program("R.nn.relu6(x, 1)"))
    assert "takes 1 positional argument but 2 were given" in info.value.message
    with pytest.raises(TVMScriptError) as info:
        tvms.parse(program("R.nn.relu7(x)"))
    assert "unknown Relax function 'R.nn.relu7'" in info.value.message
