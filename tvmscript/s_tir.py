"""``tvms.s_tir``: TVM 0.27's home of the schedulable-TIR tools (``tvm.s_tir``).

``s_tir.Schedule`` and ``s_tir.ScheduleError`` are `tvms.tir.Schedule` and its error (the
implementation is in compiler/schedule/); ``s_tir.dlight`` is `tvms.dlight`. Served on first
use, so importing tvmscript stays cheap.
"""

from __future__ import annotations

_SCHEDULE_NAMES = ("Schedule", "ScheduleError", "BlockRV", "LoopRV", "Trace")


def __getattr__(name: str):
    if name == "Trace":
        from .compiler.schedule import Trace as value
    elif name == "dlight":
        from . import dlight as value
    elif name in _SCHEDULE_NAMES or name == "analysis":  # served by tvms.tir
        from . import tir

        value = getattr(tir, name)
    else:
        raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
    globals()[name] = value
    return value


__all__ = list(_SCHEDULE_NAMES)  # and, served on first use, dlight and analysis
