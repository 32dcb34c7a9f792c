"""The models the model benchmarks import, and the ways in: torchvision's image models and GPT
blocks (`CASES`), exported with ``torch.export`` (`export`) or ``torch.onnx.export``
(`onnx_model`), imported, compiled for the CPU with the weights bound (`compile_bound`), and
checked against PyTorch (`relative_error`). Run the benchmarks as scripts: this folder and
tests/ (support.torch_models, the models the tests import) are on sys.path."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from support.torch_models import GPTBlock, import_torchvision  # noqa: E402

GPT_DIM, GPT_HEADS, GPT_LENGTH = 256, 8, 128
GPT_MAX_LENGTH = 512  # the dynamic block's causal mask: lengths below this (torch.export guards T != 512)


@dataclass(frozen=True)
class Goal:
    """The issue's goal for a model: tvms's time at most ``eager`` times PyTorch eager's and
    ``ort`` times onnxruntime's."""

    eager: float
    ort: float

    def met(self, eager_ratio: float, ort_ratio: float | None) -> bool:
        return eager_ratio <= self.eager and (ort_ratio is None or ort_ratio <= self.ort)

    def __str__(self) -> str:
        return f"<= {self.eager:g}x eager, <= {self.ort:g}x ort"


@dataclass
class Case:
    """A model to time: ``make()`` builds the PyTorch module (random weights, seeded) and its
    example input; ``lengths``, for a model with a dynamic sequence length (axis 1 of its
    input), are the lengths it runs at, compiled once for all."""

    name: str
    make: object
    goal: Goal
    lengths: tuple = field(default=())

    @property
    def dynamic(self) -> bool:
        return bool(self.lengths)

    def inputs(self, example: torch.Tensor) -> list:
        """The inputs it is timed at: the example, or the example cut or grown to each length."""
        if not self.dynamic:
            return [example]
        g = torch.Generator().manual_seed(1)
        return [torch.randn(example.shape[0], t, *example.shape[2:], generator=g) for t in self.lengths]


def _torchvision(name: str):
    def make():
        tv = import_torchvision()
        torch.manual_seed(0)
        model = getattr(tv.models, name)(weights=None).eval()
        _randomize_zero_weights(model)
        return model, torch.randn(1, 3, 224, 224)
    return make


def _randomize_zero_weights(model: nn.Module) -> None:
    """Give random values to the weight matrices torchvision initializes to zeros (vit_b_16's
    classifier head): a model whose output is all zeros would pass any check."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                nn.init.normal_(p, std=0.02)


def _gpt(max_length: int):
    """Two GPT blocks (layer norm, causal self-attention written out in PyTorch with a tril
    mask, output projection, GELU MLP, residuals) on a (1, T, d_model) input."""
    def make():
        torch.manual_seed(0)
        blocks = nn.Sequential(*[GPTBlock(GPT_DIM, GPT_HEADS, max_length, sdpa=False) for _ in range(2)])
        return blocks.eval(), torch.randn(1, GPT_LENGTH, GPT_DIM)
    return make


IMAGE_GOAL = Goal(eager=0.8, ort=1.0)
CASES = [
    Case("resnet18", _torchvision("resnet18"), IMAGE_GOAL),
    Case("mobilenet_v2", _torchvision("mobilenet_v2"), IMAGE_GOAL),
    Case("vit_b_16", _torchvision("vit_b_16"), Goal(eager=0.9, ort=1.0)),
    Case("gpt", _gpt(GPT_LENGTH), Goal(eager=0.9, ort=1.0)),
    Case("gpt_dynamic", _gpt(GPT_MAX_LENGTH), Goal(eager=0.9, ort=1.0), lengths=(7, 128, 300)),
]


def export(model, *args, dynamic_shapes=None):
    """``torch.export.export`` of ``model`` at ``args`` (under ``torch.no_grad``)."""
    with torch.no_grad():
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes)


def export_case(case: Case, model, example):
    """The ExportedProgram of a case: axis 1 of the input is a ``Dim`` for a dynamic one."""
    if not case.dynamic:
        return export(model, example)
    length = torch.export.Dim("T", min=2, max=GPT_MAX_LENGTH - 1)
    return export(model, example, dynamic_shapes=({1: length},))


def onnx_model(case: Case, model, example):
    """``torch.onnx.export`` (the TorchScript exporter, opset 17) of a case as an
    onnx.ModelProto with one input, "x", whose axis 1 is "T" for a dynamic case. Not under
    ``torch.no_grad``: there ``nn.MultiheadAttention`` (vit_b_16's) takes its fused fast path,
    ``aten::_native_multi_head_attention``, which this exporter cannot write."""
    import onnx

    axes = {"dynamic_axes": {"x": {1: "T"}}} if case.dynamic else {}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), buffer, dynamo=False, input_names=["x"], opset_version=17, **axes)
    return onnx.load_from_string(buffer.getvalue())


def compile_bound(mod):
    """``main`` of ``mod`` (weights bound as constants) compiled for the host CPU as
    ``tvms.compile`` does by default, and the VM running it. Bound weights mean inference, so
    the module first takes the passes ``tvms run --bind`` runs (``bound_inference_passes``):
    batch norms folded into the convolutions' weights, the bn[0] reads after them removed."""
    import tvmscript as tvms

    mod = tvms.relax.transform.bound_inference_passes("main")(mod)
    vm = tvms.relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return vm


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest absolute difference over the largest magnitude of the reference."""
    return float(np.abs(got - expected).max() / max(float(np.abs(expected).max()), 1e-30))
