"""TVM's ``relax.frontend.nn``: write a model the way PyTorch does and export it as Relax.

    from tvmscript.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            self.fc1 = nn.Linear(784, 256)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(256, 10)

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})

``mod`` holds one Relax function per spec'd method — its inputs, then the weights named
``fc1_weight``, ``fc1_bias``, ... — and ``params`` lists ``("fc1.weight", Parameter)`` in that
order. Methods are traced, not parsed: Python control flow runs at export time, and each
``nn.op`` call (or tensor operator) emits one binding.

- `core`: `Tensor`, `Parameter`, `Module`, containers, `Effect`;
- `modules`: the layers (`Linear`, `Conv2D`, `LayerNorm`, `Embedding`, ...);
- `op`: the operators (``nn.op.matmul``, ...), also importable from here (``nn.matmul``);
- `spec`: input specs (``nn.spec.Tensor``, ``nn.spec.Int``);
- `exporter`: how ``export_tvm`` builds the functions.
"""

from . import op, spec
from .core import (
    Effect,
    ExportError,
    Module,
    ModuleDict,
    ModuleList,
    Parameter,
    ParameterDict,
    ParameterList,
    Sequential,
    Tensor,
    get_default_dtype,
    set_default_dtype,
)
from .modules import (
    GELU,
    Conv1D,
    Conv2D,
    Dropout,
    Embedding,
    GroupNorm,
    Identity,
    IOEffect,
    LayerNorm,
    Linear,
    ReLU,
    RMSNorm,
    SiLU,
)
from .op import *  # noqa: F401,F403  (TVM exposes the ops at nn.*, too)

__all__ = [
    "op", "spec", "Effect", "ExportError", "Module", "ModuleDict", "ModuleList", "Parameter",
    "ParameterDict", "ParameterList", "Sequential", "Tensor", "get_default_dtype", "set_default_dtype",
    "GELU", "Conv1D", "Conv2D", "Dropout", "Embedding", "GroupNorm", "Identity", "IOEffect", "LayerNorm",
    "Linear", "ReLU", "RMSNorm", "SiLU",
] + list(op.__all__)
