"""``tvms.relax``: TVM's ``tvm.relax`` names, as a user imports them.

The nodes are the IR layer's (`tvmscript.ir.relax`, re-exported here unchanged). The rest of
what TVM keeps under ``tvm.relax`` is built above the IR and served on first use, so that
``import tvmscript`` loads neither the compiler nor the runtime:

- ``op``, ``const``, ``BlockBuilder``, ``DynTensorType``: building Relax from Python;
- ``transform``, ``get_pipeline``: the passes (compiler/transform/);
- ``build``, ``VirtualMachine``, ``Executable``, ``vm``: compiling and running (relax_api);
- ``frontend``: nn.Module, PyTorch and ONNX import (tvmscript/relax/frontend/).
"""

from __future__ import annotations

import importlib

from ..ir.relax import *  # noqa: F401,F403  (the Relax nodes and struct info: TVM's tvm.relax)


def __getattr__(name: str):
    if name in ("build", "VirtualMachine", "Executable", "vm"):
        from .. import relax_api

        value = relax_api.vm_namespace if name == "vm" else getattr(relax_api, name)
    elif name in ("transform", "get_pipeline"):
        from ..compiler import transform

        value = transform if name == "transform" else transform.get_pipeline
    elif name == "BlockBuilder":
        from ..compiler.block_builder import BlockBuilder as value
    elif name in ("op", "const", "DynTensorType"):
        from ..ir.op import api

        value = api if name == "op" else getattr(api, name)
    elif name == "visualize":  # tvms.relax.visualize(mod): a picture of a Relax function's dataflow
        from .dataflow_graph import visualize as value
    elif name == "frontend":  # tvms.relax.frontend.{nn,torch,onnx}, detach_params
        # (a subpackage of this one: `from . import frontend` would ask this __getattr__ again)
        value = importlib.import_module(f"{__name__}.frontend")
    else:
        raise AttributeError(f"module 'tvmscript.relax' has no attribute '{name}'")
    globals()[name] = value
    return value
