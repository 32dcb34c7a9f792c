"""Constants round-trip through the text: small ones inline, large ones in a metadata section."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import metadata
from tvmscript.ir import structural_equal

BIG = np.random.default_rng(0).standard_normal((40, 3)).astype("float32")


def module_text(array) -> str:
    shape = ", ".join(str(d) for d in array.shape)
    lines = [
        "# from tvm.script import relax as R",
        "",
        "@R.function",
        f'def main(x: R.Tensor(({shape}), dtype="{array.dtype}")) -> R.Tensor(({shape}), dtype="{array.dtype}"):',
        f'    c: R.Tensor(({shape}), dtype="{array.dtype}") = metadata["relax.expr.Constant"][0]',
        f'    y: R.Tensor(({shape}), dtype="{array.dtype}") = R.add(x, c)',
        "    return y",
        "",
    ]
    return "\n".join(lines + metadata.section([array])) + "\n"


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int8", "bool", "float64"])
def test_large_constant_round_trips_byte_for_byte(dtype):
    array = (BIG * 10).astype(dtype)
    text = module_text(array)
    func = tvms.parse(text)
    const = func.body.blocks[0].bindings[0].value
    assert const.data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(const.data, array)
    assert func.script() == text
    assert structural_equal(tvms.parse(func.script()), func)


def test_small_constants_print_inline():
    text = (
        "# from tvm.script import relax as R\n\n@R.function\n"
        'def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):\n'
        '    c: R.Tensor((2, 3), dtype="float32") = R.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32")\n'
        '    y: R.Tensor((2, 3), dtype="float32") = R.add(x, c)\n'
        "    return y\n"
    )
    assert tvms.parse(text).script() == text
    assert "metadata" not in text


def test_one_constant_used_twice_is_stored_once():
    text = module_text(BIG).replace(
        "    y: R.Tensor((40, 3), dtype=\"float32\") = R.add(x, c)\n",
        "    c2: R.Tensor((40, 3), dtype=\"float32\") = metadata[\"relax.expr.Constant\"][0]\n"
        "    y: R.Tensor((40, 3), dtype=\"float32\") = R.add(c2, c)\n",
    )
    assert text.count("metadata[") == 2
    printed = tvms.parse(text).script()
    assert printed.count("R.const_data(") == 1
    assert printed == text


def test_module_with_metadata_runs_with_the_stored_values():
    text = module_text(BIG)
    func = tvms.parse(text)
    assert np.array_equal(func.body.blocks[0].bindings[0].value.data, BIG)


def test_older_meta_relay_constant_reference_reads_the_section():
    text = module_text(BIG).replace('metadata["relax.expr.Constant"][0]', "meta[relay.Constant][0]")
    func = tvms.parse(text)
    np.testing.assert_array_equal(func.body.blocks[0].bindings[0].value.data, BIG)
    assert 'metadata["relax.expr.Constant"][0]' in func.script()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.replace('["relax.expr.Constant"][0]', '["relax.expr.Constant"][3]'), "has 1 entries; there is no [3]"),
        (lambda t: t.replace("R.const_data((40, 3)", "R.const_data((41, 3)"), "bad metadata entry"),
        (lambda t: t[: t.index("metadata = {")], "which this file does not have"),
        (lambda t: t.replace("R.const_data(", "R.const("), "a metadata entry is R.const_data"),
    ],
)
def test_metadata_errors_are_located(change, message):
    text = change(module_text(BIG))
    with pytest.raises(tvms.TVMScriptError, match=message.replace("[", r"\[").replace("(", r"\(")) as info:
        tvms.parse(text, "m.tvms")
    assert info.value.span is not None and info.value.span.line > 1
