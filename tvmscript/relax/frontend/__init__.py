"""Ways models come into tvms, under TVM's names (``tvms.relax.frontend``):

- `nn`: a PyTorch-like module API that writes Relax directly (``Module.export_tvm``);
- `torch`: PyTorch's ExportedProgram and torch.fx graphs (``from_exported_program``, ``from_fx``);
- `onnx`: ONNX models (``from_onnx``).

Importers that keep the weights as function parameters attach the arrays to the function as its
``"params"`` attribute; `detach_params` takes them off, so the module prints as plain TVMScript
and the arrays travel separately (``tvms import`` writes them to an ``.npz`` beside the file).
The submodules are loaded on first use: `torch` and `onnx` need their extras installed.
"""

from __future__ import annotations

import importlib

from ...ir import IRModule

__all__ = ["detach_params", "nn", "torch", "onnx"]

# The function attribute importers keep the weights in, in parameter order after the inputs.
PARAMS_ATTR = "params"


def detach_params(mod: IRModule) -> tuple[IRModule, dict]:
    """``(mod, {function name: [weights]})``: a copy of `mod` whose functions no longer carry
    their ``"params"`` attribute, and the arrays taken from it. The module given is unchanged."""
    import dataclasses

    out = mod.copy()
    detached: dict = {}
    for gv, func in list(out.functions.items()):
        attrs = getattr(func, "attrs", None)
        if not attrs or PARAMS_ATTR not in attrs:
            continue
        rest = {k: v for k, v in attrs.items() if k != PARAMS_ATTR}
        out[gv] = dataclasses.replace(func, attrs=rest)
        detached[gv.name_hint] = list(attrs[PARAMS_ATTR])
    return out, detached


def __getattr__(name: str):
    if name in ("nn", "torch", "onnx"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
