"""``tvms.compile``'s default pipeline (`compiler.transform.pipeline.default_pipeline`): the
inference rewrites that keep a module's meaning, then the zero pipeline.

A batch norm marked ``training=False`` folds into the convolution before it when the weights
are constants, and fuses into its kernel as the epilogue when they are parameters; one marked
``training=True`` is left for LegalizeOps (its batch statistics are not the moving ones). Every
result is checked against NumPy. resnet18 and mobilenet_v2, as ``from_exported_program``
imports them, compile to one kernel launch per convolution for the CUDA target (the GPU speed
issue's goal: at most 25 for resnet18, from 61 through the zero pipeline).
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import relax
from support.conv_bn import conv_bn_program, conv_bn_weights


def conv_bn_reference(x, w, gamma, beta, mean, var, training: bool):
    """NumPy: a padded 3x3 convolution, then a batch norm over axis 1 (the batch's statistics
    when ``training``, else the moving ones)."""
    c = w.shape[0]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    size = x.shape[2]
    conv = np.zeros((1, c, size, size), dtype=np.float64)
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", padded[:, :, i:i + size, j:j + size], w[:, :, i, j])
    if training:
        mean, var = conv.mean(axis=(0, 2, 3)), conv.var(axis=(0, 2, 3))
    shape = (1, c, 1, 1)
    return (conv - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * gamma.reshape(shape) \
        + beta.reshape(shape)


def kernel_calls(ex, func: str = "main") -> int:
    return ex.functions[func].num_kernel_calls


def has_batch_norm_kernel(ex) -> bool:
    return any("batch_norm" in name for name in ex.kernels)


@pytest.fixture
def weights():
    return conv_bn_weights(np.random.default_rng(0), 8)


@pytest.mark.parametrize("training", [False, True])
def test_parameters_batch_norm_fuses_into_the_convolution_in_eval_mode_only(weights, training):
    src = conv_bn_program(8, 6)
    if training:
        src = src.replace("training=False", "training=True")
    ex = tvms.compile(tvms.parse(src), "llvm")
    # eval mode: one kernel (the batch norm is the convolution's epilogue); training: the
    # convolution and the batch norm's own multi-output kernel.
    assert kernel_calls(ex) == (2 if training else 1)
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype("float32")
    vm = relax.VirtualMachine(ex, tvms.cpu())
    out = vm["main"](x, *(weights[k] for k in ("w", "gamma", "beta", "mean", "var"))).numpy()
    ref = conv_bn_reference(x, *(weights[k] for k in ("w", "gamma", "beta", "mean", "var")), training)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("training", [False, True])
def test_bound_batch_norm_folds_into_the_weights_in_eval_mode_only(weights, training):
    src = conv_bn_program(8, 6)
    if training:
        src = src.replace("training=False", "training=True")
    mod = relax.transform.BindParams("main", {k: tvms.nd.array(v) for k, v in weights.items()})(tvms.parse(src))
    lowered = relax.get_pipeline("default")(mod)
    text = lowered.script()
    assert ("batch_norm" in text) == training
    ex = tvms.compile(mod, "llvm")
    # (On the CPU the convolution runs in NHWC, with a transpose of the input before it.)
    assert has_batch_norm_kernel(ex) == training
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype("float32")
    out = relax.VirtualMachine(ex, tvms.cpu())["main"](x).numpy()
    ref = conv_bn_reference(x, *(weights[k] for k in ("w", "gamma", "beta", "mean", "var")), training)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_the_zero_pipeline_is_unchanged(weights):
    """Zero is TVM's: it still legalizes the batch norm as its own kernel."""
    mod = relax.get_pipeline("zero")(tvms.parse(conv_bn_program(8, 6)))
    assert "batch_norm" in mod.script()


@pytest.fixture(scope="module")
def vision_models():
    torch = pytest.importorskip("torch")
    from support.torch_models import import_torchvision
    from tvmscript.relax.frontend.torch import from_exported_program

    try:
        tv = import_torchvision()
    except ImportError as err:
        pytest.skip(str(err))
    models = {}
    for name in ("resnet18", "mobilenet_v2"):
        torch.manual_seed(0)
        model = getattr(tv.models, name)(weights=None, num_classes=10).eval()
        x = torch.randn(1, 3, 32, 32)
        with torch.no_grad():
            models[name] = (model, x, from_exported_program(torch.export.export(model, (x,))))
    return models


# One launch per convolution (resnet18: 20, its 2 pooling layers, the classifier's matmul;
# mobilenet_v2: 52, its average pooling, the classifier's matmul).
LAUNCHES = {"resnet18": 23, "mobilenet_v2": 54}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_imported_models_compile_to_a_launch_per_convolution_for_cuda(vision_models, name):
    _, _, mod = vision_models[name]
    ex = tvms.compile(mod, target="cuda")  # CUDA C and NVRTC's CUBIN: no GPU needed
    assert kernel_calls(ex) == LAUNCHES[name]
    if name == "resnet18":
        assert kernel_calls(ex) <= 25


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_imported_models_compiled_by_default_match_pytorch(vision_models, name):
    import torch

    model, x, mod = vision_models[name]
    ex = tvms.compile(mod, "llvm")
    assert not has_batch_norm_kernel(ex)
    out = relax.VirtualMachine(ex, tvms.cpu())["main"](x.numpy())[0].numpy()  # the exported 1-tuple
    with torch.no_grad():
        ref = model(x).numpy()
    assert np.abs(out - ref).max() / np.abs(ref).max() <= 1e-4


def test_a_module_without_those_ops_is_left_as_written():
    """No rewrite applies: the same module comes back, its bindings (and the names errors
    cite) as written."""
    from tvmscript.compiler.transform.pipeline import EvalModeRewrites

    mod = tvms.parse((pathlib.Path(__file__).parents[2] / "samples" / "mlp.tvms").read_text())
    assert EvalModeRewrites()(mod) is mod
