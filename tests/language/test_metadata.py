"""Constants round-trip through the text: small ones inline, large ones in a metadata section."""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import metadata
from tvmscript.ir import structural_equal
from tvmscript.ir.structural import structural_hash

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
    assert func.script(show_meta=True) == text
    assert structural_equal(tvms.parse(func.script(show_meta=True)), func)


def test_small_constants_print_inline():
    text = (
        "# from tvm.script import relax as R\n\n@R.function\n"
        'def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):\n'
        '    c: R.Tensor((2, 3), dtype="float32") = R.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32")\n'
        '    y: R.Tensor((2, 3), dtype="float32") = R.add(x, c)\n'
        "    return y\n"
    )
    assert tvms.parse(text).script(show_meta=True) == text
    assert "metadata" not in text


def test_one_constant_used_twice_is_stored_once():
    text = module_text(BIG).replace(
        "    y: R.Tensor((40, 3), dtype=\"float32\") = R.add(x, c)\n",
        "    c2: R.Tensor((40, 3), dtype=\"float32\") = metadata[\"relax.expr.Constant\"][0]\n"
        "    y: R.Tensor((40, 3), dtype=\"float32\") = R.add(c2, c)\n",
    )
    assert text.count("metadata[") == 2
    printed = tvms.parse(text).script(show_meta=True)
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
    assert 'metadata["relax.expr.Constant"][0]' in func.script(show_meta=True)


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


# ----------------------------------------------------------------------------- tensors in attributes

W = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
B = np.arange(3, dtype="int64")


def linear_module(arrays) -> tvms.IRModule:
    """``main(x, w, b)`` with its weights as ``"params"``, the way the importers keep them."""
    import dataclasses

    x = tvms.relax.Var("x", tvms.relax.TensorStructInfo([2, 4], "float32"))
    w = tvms.relax.Var("w", tvms.relax.TensorStructInfo([3, 4], "float32"))
    b = tvms.relax.Var("b", tvms.relax.TensorStructInfo([3], "int64"))
    bb = tvms.relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        bb.emit_func_output(bb.emit(tvms.relax.op.matmul(x, tvms.relax.op.permute_dims(w))))
    mod = bb.get()
    mod["main"] = dataclasses.replace(mod["main"], attrs={**mod["main"].attrs, "num_input": 1,
                                                          "params": arrays})
    return mod


def test_attribute_tensors_print_as_tvm_references_with_a_second_table():
    mod = linear_module([tvms.nd.array(W), tvms.nd.array(B)])
    text = mod.script(show_meta=True)
    assert 'R.func_attr({"num_input": 1, "params": [metadata["ffi.Tensor"][0], metadata["ffi.Tensor"][1]]})' in text
    section = text[text.index("metadata = {"):]
    assert section == "\n".join(metadata.section([], tensors=[W, B])) + "\n"
    assert section.startswith('metadata = {\n    "ffi.Tensor": [\n        R.const_data((3, 4), "float32",\n')
    assert '        R.const_data((3,), "int64",\n            "AAAAAAAAAAABAAAAAAAAAAIAAAAAAAAA"),\n' in section
    assert "relax.expr.Constant" not in text


def test_attribute_tensors_round_trip_and_detach():
    mod = linear_module([tvms.nd.array(W), tvms.nd.array(B)])
    text = mod.script(show_meta=True)
    again = tvms.parse(text)
    assert again.script(show_meta=True) == text
    params = again["main"].attrs["params"]
    assert [type(p) for p in params] == [tvms.nd.Tensor] * 2
    assert [p.dtype for p in params] == ["float32", "int64"]
    np.testing.assert_array_equal(params[0].numpy(), W)
    np.testing.assert_array_equal(params[1].numpy(), B)
    assert structural_equal(again, mod)  # tensors compare by contents
    assert structural_hash(again) == structural_hash(mod)
    changed = linear_module([tvms.nd.array(W + 1), tvms.nd.array(B)])
    assert not structural_equal(changed, mod) and structural_hash(changed) != structural_hash(mod)
    plain, detached = tvms.relax.frontend.detach_params(again)
    expected_plain, _ = tvms.relax.frontend.detach_params(mod)
    assert structural_equal(plain, expected_plain)
    assert "params" not in plain["main"].attrs and plain["main"].attrs["num_input"] == 1
    assert [d.numpy().tolist() for d in detached["main"]] == [W.tolist(), B.tolist()]


def test_one_attribute_tensor_used_twice_is_stored_once_and_read_back_once():
    w = tvms.nd.array(W)
    text = linear_module([w, w]).script(show_meta=True)
    assert "metadata[\"ffi.Tensor\"][0], metadata[\"ffi.Tensor\"][0]]" in text
    assert text.count("R.const_data(") == 1
    first, second = tvms.parse(text)["main"].attrs["params"]
    assert first is second


def test_constants_and_attribute_tensors_share_the_section():
    """A constant in the body keeps its own table, printed first and unchanged."""
    text = module_text(BIG)
    func = tvms.parse(text)
    import dataclasses

    func = dataclasses.replace(func, attrs={**func.attrs, "params": [tvms.nd.array(W)]})
    printed = func.script(show_meta=True)
    constants_table = "\n".join(metadata.section([BIG])[1:-1])
    assert printed.endswith("metadata = {\n" + constants_table + "\n"
                            + "\n".join(metadata.section([], tensors=[W])[1:]) + "\n")
    again = tvms.parse(printed)
    assert again.script(show_meta=True) == printed
    np.testing.assert_array_equal(again.body.blocks[0].bindings[0].value.data, BIG)
    np.testing.assert_array_equal(again.attrs["params"][0].numpy(), W)


def test_older_runtime_ndarray_table_name_reads_as_ffi_tensor():
    text = linear_module([tvms.nd.array(W), tvms.nd.array(B)]).script(show_meta=True).replace("ffi.Tensor", "runtime.NDArray")
    again = tvms.parse(text)
    np.testing.assert_array_equal(again["main"].attrs["params"][1].numpy(), B)
    assert 'metadata["ffi.Tensor"][1]' in again.script(show_meta=True)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.replace('metadata["ffi.Tensor"][1]]', 'metadata["ffi.Tensor"][2]]'), "has 2 entries; there is no [2]"),
        (lambda t: t.replace('metadata["ffi.Tensor"][1]]', 'metadata["relax.expr.Constant"][0]]'),
         "the metadata section has no 'relax.expr.Constant' table"),
        (lambda t: t.replace('"params": [', '"params": [x, '), 'expected a literal value or a metadata["ffi.Tensor"][i] reference'),
        (lambda t: t.replace("R.permute_dims(w, axes=None)", 'metadata["ffi.Tensor"][0]'),
         'holds the tensors of function attributes; a constant in the body is metadata["relax.expr.Constant"][i]'),
    ],
)
def test_attribute_tensor_errors_are_located(change, message):
    text = change(linear_module([tvms.nd.array(W), tvms.nd.array(B)]).script(show_meta=True))
    with pytest.raises(tvms.TVMScriptError, match=message.replace("[", r"\[").replace("(", r"\(")) as info:
        tvms.parse(text, "m.tvms")
    assert info.value.span is not None and info.value.span.line > 1


def test_constant_table_entry_in_an_attribute_is_an_error():
    text = module_text(BIG).replace("    c: R.Tensor", '    R.func_attr({"params": [metadata["relax.expr.Constant"][0]]})\n    c: R.Tensor', 1)
    with pytest.raises(tvms.TVMScriptError, match=r"a tensor in a function attribute is metadata\[\"ffi.Tensor\"\]\[i\]"):
        tvms.parse(text, "m.tvms")


def test_torch_import_with_params_as_input_round_trips_and_runs():
    torch = pytest.importorskip("torch")
    from tvmscript.relax.frontend.torch import from_exported_program

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 5)

        def forward(self, x):
            return torch.relu(self.fc(x))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 6)
    mod = from_exported_program(torch.export.export(net, (x,)), keep_params_as_input=True)
    text = mod.script(show_meta=True)
    assert '"params": [metadata["ffi.Tensor"][0], metadata["ffi.Tensor"][1]]' in text
    again = tvms.parse(text)
    assert again.script(show_meta=True) == text
    plain, params = tvms.relax.frontend.detach_params(again)
    expected_plain, expected = tvms.relax.frontend.detach_params(mod)
    assert structural_equal(plain, expected_plain)
    for got, want in zip(params["main"], expected["main"], strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    vm = tvms.relax.VirtualMachine(tvms.compile(plain, "llvm"), tvms.cpu())
    out = vm["main"](x.numpy(), *params["main"])
    with torch.no_grad():
        np.testing.assert_allclose(out[0].numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
