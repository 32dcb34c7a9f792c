"""``tvms.tir``: TVM's ``tvm.tir`` names for TensorIR, as a user imports them.

The nodes are the IR layer's (`tvmscript.ir.tir`, re-exported here unchanged, so
``tvms.tir.IntImm is tvmscript.ir.tir.IntImm``). What TVM also keeps under ``tvm.tir`` but
tvms builds in the compiler, ``Schedule`` and ``analysis``, is served on first use, so that
``import tvmscript`` does not load the compiler.
"""

from __future__ import annotations

import sys
import types

from .ir.tir import *  # noqa: F401,F403  (the TensorIR nodes and helpers: TVM's tvm.tir)

_SCHEDULE_NAMES = ("Schedule", "ScheduleError", "BlockRV", "LoopRV")


def _analysis_module() -> types.ModuleType:
    """``tvms.tir.analysis``: TVM's analyses of TensorIR (``verify_gpu_code``)."""
    from .compiler import verify_gpu_code as impl

    module = types.ModuleType(f"{__name__}.analysis", "TVM's tvm.tir.analysis names: verify_gpu_code.")
    module.__all__ = ["verify_gpu_code", "gpu_code_errors", "constraints_of"]
    for attr in module.__all__:
        setattr(module, attr, getattr(impl, attr))
    sys.modules[module.__name__] = module
    return module


def __getattr__(name: str):
    if name == "analysis":
        return globals().setdefault("analysis", _analysis_module())
    if name in _SCHEDULE_NAMES:  # compiler/schedule/
        from .compiler import schedule

        return globals().setdefault(name, getattr(schedule, name))
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
