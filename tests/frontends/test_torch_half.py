"""Models already in half precision (float16 and bfloat16) import with their own dtypes and run
on the CPU.

Each model is exported with ``torch.export`` in the half dtype, imported, checked to hold no
tensor of another float dtype (nothing the importer makes up, a constant, a scalar operand, a
product's ``out_dtype``, may fall back to float32), compiled with ``tvms.compile(mod, "llvm")``
and run against PyTorch's own CPU forward pass of the same half model. Both compute in the
half dtype, rounding at different places (PyTorch accumulates products and reductions in
float32; tvms rounds every operation to the dtype, as TIR says), so results agree to a few
units in the last place of the dtype: ``TOLERANCE`` is relative to the output's largest
magnitude. An ONNX float16 model and a bfloat16 one (which onnxruntime cannot run: numpy in
float32 is the reference there) go through ``from_onnx`` the same way.
"""

from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")  # NumPy's bfloat16
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tvmscript as tvms  # noqa: E402
from tvmscript import relax  # noqa: E402
from tvmscript.relax.frontend import detach_params  # noqa: E402
from tvmscript.relax.frontend.torch import from_exported_program, from_fx  # noqa: E402
from support.torch_models import GPTBlock  # noqa: E402

DTYPES = ["float16", "bfloat16"]
# Of max |reference|: float16 has 11 significant bits, bfloat16 8 (a few ulps of each).
TOLERANCE = {"float16": 5e-3, "bfloat16": 3e-2}
NP_DTYPES = {"float16": np.dtype("float16"), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


class MLP(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


class ResidualCNN(nn.Module):
    """conv2d + batch norm + relu, a residual add, adaptive average pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)
        for bn in (self.bn1, self.bn2):  # running statistics that are not the identity
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


MODELS = {
    "mlp": (MLP, lambda: (torch.randn(4, 16),)),
    "cnn": (ResidualCNN, lambda: (torch.randn(2, 3, 8, 8),)),
    # masked_fill with -inf, softmax, a Python-float scale, layer norm, GELU, residuals
    "gpt_block": (lambda: GPTBlock(32, 4, 16, sdpa=False), lambda: (torch.randn(1, 8, 32),)),
    "gpt_block_sdpa": (lambda: GPTBlock(32, 4, 16, sdpa=True), lambda: (torch.randn(1, 8, 32),)),
}


# ----------------------------------------------------------------------------- helpers


def half_model(name: str, dtype: str):
    """Model ``name`` and its inputs, in ``dtype``, with seeded weights."""
    make_model, make_inputs = MODELS[name]
    torch.manual_seed(0)
    with torch.no_grad():
        model = make_model().eval().to(getattr(torch, dtype))
    inputs = tuple(t.to(getattr(torch, dtype)) for t in make_inputs())
    return model, inputs


def as_numpy(t) -> np.ndarray:
    """A torch tensor's values as a NumPy array of the same dtype (bfloat16 through float32,
    which holds every bfloat16 exactly)."""
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(NP_DTYPES["bfloat16"])
    return t.numpy()


def float_dtypes(mod) -> set:
    """Every float dtype the printed module names: annotations, casts, constants."""
    return {d for d in re.findall(r'dtype="(\w+)"', mod.script()) if d.startswith(("float", "bfloat"))}


def run(mod, inputs, params=()) -> list:
    vm = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    out = vm["main"](*[tvms.nd.array(a) for a in inputs], *params)
    return [o.numpy() for o in out] if isinstance(out, (list, tuple)) else [out.numpy()]


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    out, ref = np.asarray(out, "float64"), np.asarray(ref, "float64")
    assert out.shape == ref.shape, (out.shape, ref.shape)
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


def torch_outputs(model, inputs) -> list:
    with torch.no_grad():
        out = model(*inputs)
    return [o.float().numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


# ----------------------------------------------------------------------------- PyTorch


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MODELS))
def test_half_model_imports_with_its_dtype_and_matches_pytorch(name, dtype):
    model, inputs = half_model(name, dtype)
    mod = from_exported_program(torch.export.export(model, inputs), unwrap_unit_return_tuple=True)
    assert float_dtypes(mod) == {dtype}, mod.script()
    (out,) = run(mod, [as_numpy(t) for t in inputs])
    assert out.dtype == NP_DTYPES[dtype]
    (ref,) = torch_outputs(model, inputs)
    assert rel_err(out, ref) <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_half_weights_kept_as_parameters(dtype):
    """The weights as the function's parameters: detached as tensors of the model's dtype."""
    model, inputs = half_model("mlp", dtype)
    mod, params = detach_params(from_exported_program(torch.export.export(model, inputs),
                                                      keep_params_as_input=True, unwrap_unit_return_tuple=True))
    weights = params["main"]
    assert {w.numpy().dtype for w in weights} == {NP_DTYPES[dtype]}
    np.testing.assert_array_equal(weights[0].numpy().astype("float32"), model[0].weight.float().detach().numpy())
    (out,) = run(mod, [as_numpy(t) for t in inputs], weights)
    assert rel_err(out, torch_outputs(model, inputs)[0]) <= TOLERANCE[dtype]


class Promotions(nn.Module):
    """Python scalars, creation ops and mixed dtypes, each promoted as PyTorch promotes them."""

    def forward(self, x, i):
        return (x * 0.5 + 2,                            # scalars keep the tensor's dtype
                torch.where(x > 0, x, -1.0),            # so does a scalar branch of where
                torch.full_like(x, 3.0) - x.new_ones(x.shape[-1]),
                (x / 3).sum(-1),
                i * 0.5,                                # int tensor, float scalar: float32
                x.float() + x,                          # float32 with a half tensor: float32
                torch.zeros(2, 3) + 1,                  # no dtype: torch's default, float32
                torch.arange(0.0, 3.0) * x[0, :3])      # float32 arange times half: float32


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_and_mixed_dtypes_promote_as_pytorch(dtype):
    half = getattr(torch, dtype)
    model = Promotions().eval()
    inputs = (torch.randn(3, 4).to(half), torch.arange(6).reshape(2, 3))
    mod = from_exported_program(torch.export.export(model, inputs))
    refs = torch_outputs(model, inputs)
    outs = run(mod, [as_numpy(t) for t in inputs])
    with torch.no_grad():
        want_dtypes = [str(o.dtype).replace("torch.", "") for o in model(*inputs)]
    assert [str(o.dtype) for o in outs] == want_dtypes
    for k, (out, ref) in enumerate(zip(outs, refs)):
        assert rel_err(out, ref) <= TOLERANCE[dtype], f"output {k}"


def test_fx_half_model():
    """from_fx with float16 inputs given: the graph has no dtypes of its own to go by."""
    model, inputs = half_model("mlp", "float16")
    mod = from_fx(torch.fx.symbolic_trace(model), [((4, 16), "float16")], unwrap_unit_return_tuple=True)
    assert float_dtypes(mod) == {"float16"}
    (out,) = run(mod, [as_numpy(inputs[0])])
    assert rel_err(out, torch_outputs(model, inputs)[0]) <= TOLERANCE["float16"]


def test_bfloat16_weights_through_npz_and_tvms_run(tmp_path):
    """The files ``tvms import`` writes for a bfloat16 .pt2 (made here as it makes them, with
    `read_model`, sparing a second process importing torch): NumPy keeps the weights in the
    .npz as 2-byte voids, which ``tvms run --params`` reads back as bfloat16."""
    from support.cli import load_npz, ok
    from tvmscript.printer import to_script
    from tvmscript.relax.frontend.model_file import read_model

    model, inputs = half_model("mlp", "bfloat16")
    torch.export.save(torch.export.export(model, inputs), str(tmp_path / "mlp.pt2"))
    mod, weights = read_model(str(tmp_path / "mlp.pt2"))
    (tmp_path / "mlp.tvms").write_text(to_script(mod, show_meta=True))
    np.savez(tmp_path / "mlp.npz", **weights)
    np.savez(tmp_path / "x.npz", input=as_numpy(inputs[0]))
    ok("run", tmp_path / "mlp.tvms", "--params", tmp_path / "mlp.npz", "--inputs", tmp_path / "x.npz",
       "--out", tmp_path / "y.npz")
    out = load_npz(tmp_path / "y.npz")["output"].view(NP_DTYPES["bfloat16"])
    assert rel_err(out, torch_outputs(model, inputs)[0]) <= TOLERANCE["bfloat16"]


# ----------------------------------------------------------------------------- ONNX


def test_onnx_float16_model():
    onnx = pytest.importorskip("onnx")
    from tvmscript.relax.frontend.onnx import from_onnx

    model, inputs = half_model("cnn", "float16")
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, buffer, dynamo=False)
    mod = from_onnx(onnx.load_from_string(buffer.getvalue()))
    assert float_dtypes(mod) == {"float16"}, mod.script()
    (out,) = run(relax.get_pipeline("zero")(mod), [as_numpy(inputs[0])])
    assert out.dtype == np.float16
    assert rel_err(out, torch_outputs(model, inputs)[0]) <= TOLERANCE["float16"]


def test_onnx_bfloat16_scalars_and_defaults():
    """Gemm's alpha, Clip without a max, LayerNormalization without a bias: the importer's
    own constants, made in bfloat16 (onnxruntime has no bfloat16 kernels for these)."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from tvmscript.relax.frontend.onnx import from_onnx

    rng = np.random.default_rng(0)
    bf16 = NP_DTYPES["bfloat16"]
    w = rng.uniform(-1, 1, (8, 6)).astype("float32").astype(bf16)
    gamma = rng.uniform(0.5, 1.5, 6).astype("float32").astype(bf16)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"], alpha=0.5),
             helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.asarray(-0.25, bf16), "lo")),
             helper.make_node("Clip", ["g", "lo"], ["c"]),
             helper.make_node("LayerNormalization", ["c", "gamma"], ["y"], axis=-1, epsilon=1e-5)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4, 6])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(gamma, "gamma")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = from_onnx(model)
    assert float_dtypes(mod) == {"bfloat16"}, mod.script()
    x = rng.uniform(-1, 1, (4, 8)).astype("float32").astype(bf16)
    (out,) = run(relax.get_pipeline("zero")(mod), [x])
    c = np.maximum(0.5 * (x.astype("float32") @ w.astype("float32")), -0.25)
    ref = (c - c.mean(-1, keepdims=True)) / np.sqrt(c.var(-1, keepdims=True) + 1e-5) * gamma.astype("float32")
    assert out.dtype == bf16
    assert rel_err(out, ref) <= TOLERANCE["bfloat16"]
