"""``tvms import``: PyTorch (.pt2) and ONNX models to a .tvms file plus weights, run with
``tvms run --params``; and the digits sample (samples/digits/) against PyTorch's accuracy."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from support.cli import load_npz, ok, tvms

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIGITS = ROOT / "samples" / "digits"


# ----------------------------------------------------------------------------- PyTorch


@pytest.fixture(scope="module")
def torch_mlp(tmp_path_factory):
    """Seed 000's MLP saved with torch.export.save, with an input and PyTorch's output."""
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).eval()
    x = torch.randn(2, 784)
    folder = tmp_path_factory.mktemp("torch")
    path = folder / "mlp.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    np.savez(folder / "x.npz", input=x.numpy())  # Sequential.forward(input)
    with torch.no_grad():
        expected = model(x).numpy()
    return path, folder / "x.npz", expected


def test_import_pt2_writes_module_and_weights_that_run(torch_mlp, tmp_path):
    model, inputs, expected = torch_mlp
    out = tmp_path / "mlp.tvms"
    proc = ok("import", model, "-o", out)
    assert "4 weights" in proc.err
    text = out.read_text()
    assert text.startswith("# from tvm.script import ir as I") or "@I.ir_module" in text
    weights = load_npz(tmp_path / "mlp.npz")  # beside the output by default
    assert sorted(weights) == sorted(["p_0_weight", "p_0_bias", "p_2_weight", "p_2_bias"])
    assert "metadata" not in text  # weights are parameters, not constants
    ok("check", out)
    ok("run", out, "--params", tmp_path / "mlp.npz", "--inputs", inputs, "--out", tmp_path / "y.npz")
    np.testing.assert_allclose(load_npz(tmp_path / "y.npz")["output"], expected, rtol=1e-4, atol=1e-5)


def test_import_inline_params_needs_no_npz(torch_mlp, tmp_path):
    model, inputs, expected = torch_mlp
    out = tmp_path / "inline.tvms"
    ok("import", model, "-o", out, "--inline-params")
    assert not (tmp_path / "inline.npz").exists()
    assert 'metadata["relax.expr.Constant"]' in out.read_text()
    ok("run", out, "--inputs", inputs, "--out", tmp_path / "y.npz")
    np.testing.assert_allclose(load_npz(tmp_path / "y.npz")["output"], expected, rtol=1e-4, atol=1e-5)


def test_import_params_out(torch_mlp, tmp_path):
    model, _, _ = torch_mlp
    proc = ok("import", model, "-o", tmp_path / "a.tvms", "--params-out", tmp_path / "weights.npz")
    assert "weights.npz" in proc.err and (tmp_path / "weights.npz").exists()


def test_import_pt2_batch_norm_statistics_are_replaceable_params(tmp_path):
    """BatchNorm's running statistics go to model.npz with the weights: new statistics given
    with --params change tvms run's output as they change PyTorch's."""
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    x = torch.randn(1, 3, 6, 6)
    torch.export.save(torch.export.export(model, (x,)), str(tmp_path / "bn.pt2"))
    ok("import", tmp_path / "bn.pt2")
    weights = load_npz(tmp_path / "bn.npz")
    assert sorted(weights) == sorted(["p_0_weight", "p_0_bias", "p_1_weight", "p_1_bias",
                                      "b_1_running_mean", "b_1_running_var"])
    assert "metadata" not in (tmp_path / "bn.tvms").read_text()

    weights["b_1_running_mean"] = np.linspace(-1, 1, 4, dtype=np.float32)
    weights["b_1_running_var"] = np.linspace(0.5, 2, 4, dtype=np.float32)
    np.savez(tmp_path / "changed.npz", **weights)
    np.savez(tmp_path / "x.npz", input=x.numpy())
    ok("run", tmp_path / "bn.tvms", "--params", tmp_path / "changed.npz", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "y.npz")
    with torch.no_grad():
        model[1].running_mean.copy_(torch.from_numpy(weights["b_1_running_mean"]))
        model[1].running_var.copy_(torch.from_numpy(weights["b_1_running_var"]))
        expected = model(x).numpy()
    np.testing.assert_allclose(load_npz(tmp_path / "y.npz")["output"], expected, rtol=1e-4, atol=1e-5)


def test_import_pt2_with_a_dim_refuses_sizes_outside_its_range(tmp_path):
    """A Dim's min and max travel in the .tvms file; tvms run refuses a size outside them with
    an error naming the dim, the size and the range (no traceback)."""
    torch = pytest.importorskip("torch")
    from torch.export import Dim

    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    ep = torch.export.export(model, (torch.randn(5, 4),), dynamic_shapes=({0: Dim("batch", min=2, max=8)},))
    torch.export.save(ep, str(tmp_path / "lin.pt2"))
    ok("import", tmp_path / "lin.pt2")
    (symbol,) = [str(s) for s in ep.range_constraints]  # the file keeps torch's symbol, not "batch"
    assert f'"tir_var_upper_bound": {{"{symbol}": 8}}' in (tmp_path / "lin.tvms").read_text()
    for rows in (3, 9):
        np.savez(tmp_path / "x.npz", input=np.ones((rows, 4), np.float32))
        proc = tvms("run", tmp_path / "lin.tvms", "--params", tmp_path / "lin.npz", "--inputs", tmp_path / "x.npz")
        if rows == 3:
            assert proc.returncode == 0, proc.err
        else:
            assert proc.returncode == 1
            assert f"size '{symbol}' is 9" in proc.err and "must be between 2 and 8" in proc.err


UNSUPPORTED_MODEL = """\
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.cumprod(x, 0)
        return torch.logcumsumexp(y, 1) + torch.cumprod(x, 1)


torch.export.save(torch.export.export(Model(), (torch.randn(3, 4),)), "odd.pt2")
"""


def test_import_pt2_lists_every_unsupported_op_with_its_line(tmp_path):
    """All the operators tvms lacks, in one error, each with its nodes and the model's lines."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    (tmp_path / "make_model.py").write_text(UNSUPPORTED_MODEL)
    subprocess.run([sys.executable, "make_model.py"], cwd=tmp_path, check=True, capture_output=True)
    proc = tvms("import", tmp_path / "odd.pt2")
    assert proc.returncode == 1
    assert proc.err.startswith("error: 2 PyTorch operators have no translation")
    assert "aten.cumprod.default, used by 2 nodes:" in proc.err
    assert "'cumprod' at " in proc.err and "make_model.py:6: y = torch.cumprod(x, 0)" in proc.err
    assert "'cumprod_1' at " in proc.err and "aten.logcumsumexp.default, used by 1 node:" in proc.err
    assert not (tmp_path / "odd.tvms").exists() and not (tmp_path / "odd.npz").exists()


# ----------------------------------------------------------------------------- ONNX


def _onnx_model(path, op_type: str = "Gemm", domain: str = ""):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [helper.make_node(op_type, ["x", "w", "b"], ["h"], name="fc", domain=domain, transB=1),
             helper.make_node("Relu", ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [w, b])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.save(model, str(path))
    return model


def test_import_onnx_runs_like_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model_path = tmp_path / "fc.onnx"
    _onnx_model(model_path)
    ok("import", model_path)  # -o defaults to the model's name with .tvms
    assert (tmp_path / "fc.tvms").exists() and (tmp_path / "fc.npz").exists()
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    ok("run", tmp_path / "fc.tvms", "--params", tmp_path / "fc.npz", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "y.npz")
    expected = ort.InferenceSession(str(model_path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(load_npz(tmp_path / "y.npz")["output"], expected, rtol=1e-5, atol=1e-6)


def test_import_onnx_unsupported_op_names_op_and_node(tmp_path):
    pytest.importorskip("onnx")
    model_path = tmp_path / "odd.onnx"
    _onnx_model(model_path, op_type="FancyGemm", domain="com.example")  # valid ONNX, unknown to tvms
    proc = tvms("import", model_path, "-o", tmp_path / "odd.tvms")
    assert proc.returncode == 1
    assert "FancyGemm" in proc.err and "fc" in proc.err
    assert not (tmp_path / "odd.tvms").exists() and not (tmp_path / "odd.npz").exists()


def test_import_onnx_with_external_data_needs_the_data_file_beside_it(tmp_path):
    """torch.onnx.export keeps the weights in NAME.onnx.data beside NAME.onnx: imported together
    the two run like PyTorch; the .onnx copied alone is an error naming the missing file."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU()).eval()
    x = torch.randn(2, 256)
    exported = tmp_path / "export"
    exported.mkdir()
    torch.onnx.export(model, (x,), str(exported / "fc.onnx"))
    assert (exported / "fc.onnx.data").stat().st_size >= 64 * 256 * 4, "the weights left the .onnx file"

    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "fc.onnx").write_bytes((exported / "fc.onnx").read_bytes())
    proc = tvms("import", alone / "fc.onnx")
    assert proc.returncode == 1 and "Traceback" not in proc.err
    assert "'fc.onnx.data'" in proc.err and "same folder" in proc.err, proc.err
    assert not (alone / "fc.tvms").exists()

    ok("import", exported / "fc.onnx", "-o", tmp_path / "fc.tvms")
    np.savez(tmp_path / "x.npz", input=x.numpy())  # Sequential.forward(input)
    ok("run", tmp_path / "fc.tvms", "--params", tmp_path / "fc.npz", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "y.npz")
    with torch.no_grad():
        np.testing.assert_allclose(load_npz(tmp_path / "y.npz")["output"], model(x).numpy(), rtol=1e-5, atol=1e-6)


def _onnx_conv(path):
    """A Conv over an image input declared (batch, 3, 8, 8): the rank --shape must keep."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["input", "w"], ["y"], name="conv")], "g",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 6, 6])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_import_onnx_shape_replaces_the_models(tmp_path):
    _onnx_conv(tmp_path / "conv.onnx")
    ok("import", tmp_path / "conv.onnx", "--shape", "input=2,3,8,8")
    assert 'R.Tensor((2, 3, 8, 8), dtype="float32")' in (tmp_path / "conv.tvms").read_text()


@pytest.mark.parametrize("shape, expected", [
    ("bogus=1", "a shape was given for 'bogus', which is not an input of the model "
                "(its inputs: 'input' (batch, 3, 8, 8))"),
    ("w=2,3,3,3", "a shape was given for 'w', which is not an input of the model"),  # a weight
    ("input=1,3", "the shape given for input 'input', (1, 3), is 2-D, but input 'input' is 4-D "
                  "(batch, 3, 8, 8) in the model: give 4 dimensions"),
    ("input=1,3,8,8,1", "is 5-D, but input 'input' is 4-D"),
])
def test_import_onnx_shape_errors(tmp_path, shape, expected):
    _onnx_conv(tmp_path / "conv.onnx")
    proc = tvms("import", tmp_path / "conv.onnx", "--shape", shape)
    assert proc.returncode == 1 and expected in proc.err, proc.err
    assert "Conv" not in proc.err  # the cause, not the first node it breaks
    assert not (tmp_path / "conv.tvms").exists() and not (tmp_path / "conv.npz").exists()


def test_import_shape_given_twice(tmp_path):
    _onnx_conv(tmp_path / "conv.onnx")
    proc = tvms("import", tmp_path / "conv.onnx", "--shape", "input=1,3,8,8", "--shape", "input=2,3,8,8")
    assert proc.returncode == 1 and "--shape gives input 'input' twice" in proc.err


def test_import_pt2_refuses_shapes(torch_mlp, tmp_path):
    model, _, _ = torch_mlp
    proc = tvms("import", model, "-o", tmp_path / "mlp.tvms", "--shape", "input=1,784")
    assert proc.returncode == 1
    assert "input shapes cannot be given for" in proc.err and "fixed when it was exported" in proc.err
    assert not (tmp_path / "mlp.tvms").exists()


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["broken.onnx", "broken.pt2"])
def test_import_unreadable_model(tmp_path, name):
    pytest.importorskip("onnx" if name.endswith(".onnx") else "torch")
    path = tmp_path / name
    path.write_bytes(b"\x00not a model\xff" * 10)
    proc = tvms("import", path)
    assert proc.returncode == 1
    assert proc.err.startswith("error: cannot read") and name in proc.err


def test_import_errors(tmp_path):
    proc = tvms("import", tmp_path / "missing.onnx")
    assert proc.returncode == 1 and "no such file" in proc.err
    proc = tvms("import", tmp_path / "model.h5")
    assert proc.returncode == 1 and ".pt2" in proc.err and ".onnx" in proc.err
    proc = tvms("import", tmp_path / "x.onnx", "--shape", "x")
    assert proc.returncode == 1 and "--shape expects" in proc.err


def test_missing_extra_says_how_to_install(tmp_path, monkeypatch, capsys):
    import importlib.util

    from tvmscript import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    path = tmp_path / "m.pt2"
    path.write_bytes(b"PK")
    assert cli.main(["import", str(path)]) == 1
    assert "pip install 'tvms[torch]'" in capsys.readouterr().err


def test_progress_reaches_the_last_node(tmp_path):
    pytest.importorskip("onnx")
    from tvmscript.relax.frontend.model_file import read_model

    model_path = tmp_path / "fc.onnx"
    _onnx_model(model_path)
    calls = []
    read_model(str(model_path), progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (2, 2)


# ----------------------------------------------------------------------------- the digits sample


def test_digits_sample_matches_pytorch_accuracy(tmp_path):
    """docs/frontends.md's command prints the predictions; their accuracy on the held-out split is the
    accuracy of the same weights in PyTorch (the training framework)."""
    torch = pytest.importorskip("torch")
    import sys

    labels = np.load(DIGITS / "test_labels.npy")
    proc = ok("run", DIGITS / "digits.tvms", "--params", DIGITS / "digits.npz", "--inputs",
              DIGITS / "test.npz", "--out", tmp_path / "pred.npz")
    assert str(len(labels)) in proc.out  # the predictions are printed
    predictions = load_npz(tmp_path / "pred.npz")["output"]
    assert predictions.shape == labels.shape
    tvms_accuracy = float((predictions == labels).mean())

    sys.path.insert(0, str(DIGITS))
    try:
        from train import make_model
    finally:
        sys.path.remove(str(DIGITS))
    weights = load_npz(DIGITS / "digits.npz")
    model = make_model(hidden=weights["p_fc1_weight"].shape[0]).eval()
    model.load_state_dict({k[2:].replace("_", ".", 1): torch.from_numpy(v) for k, v in weights.items()})
    with torch.no_grad():
        torch_predictions = model(torch.from_numpy(load_npz(DIGITS / "test.npz")["x"])).numpy()
    assert tvms_accuracy == float((torch_predictions == labels).mean())
    assert tvms_accuracy > 0.9
