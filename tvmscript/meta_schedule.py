"""``tvms.meta_schedule``: auto-tuning under TVM's names (``tvm.meta_schedule``).

    from tvmscript import meta_schedule as ms
    db = ms.tune_tir(mod, "llvm", work_dir="tuning", max_trials_global=200)
    ex = tvms.compile(mod, "llvm", tuning_db=db)            # or relax.transform.MetaScheduleApplyDatabase

The implementation is in compiler/meta_schedule/ (its docstring maps the parts); this module
only gives them TVM's names: ``tune_tir``, ``database.JSONDatabase``, ``builder.LocalBuilder``,
``runner.LocalRunner``, ``cost_model.XGBModel``, ``search_strategy.EvolutionarySearch``,
``schedule_rule.MultiLevelTiling`` and the others, ``postproc``. Served on first use, so
importing tvmscript stays cheap.
"""

from __future__ import annotations

import importlib

# TVM's submodule names -> ours, in compiler/meta_schedule/.
_SUBMODULES = {"database": "database", "builder": "builder", "runner": "runner", "cost_model": "cost_model",
               "feature_extractor": "features", "search_strategy": "search", "schedule_rule": "schedule_rules",
               "postproc": "postproc", "space_generator": "space", "dask_runner": "dask_runner", "tune": "tune"}
# Names at the top of tvm.meta_schedule -> the submodule of ours that holds them.
_NAMES = {"tune_tir": "tune", "tune_tasks": "tune", "extract_tasks": "tune", "TuneTask": "tune",
          "JSONDatabase": "database", "Database": "database", "TuningRecord": "database", "Workload": "database",
          "LocalBuilder": "builder", "LocalRunner": "runner", "XGBModel": "cost_model", "RandomModel": "cost_model",
          "EvolutionarySearch": "search", "apply_database": "apply"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        value = importlib.import_module(f"tvmscript.compiler.meta_schedule.{_SUBMODULES[name]}")
    elif name in _NAMES:
        value = getattr(importlib.import_module(f"tvmscript.compiler.meta_schedule.{_NAMES[name]}"), name)
    else:
        raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
    globals()[name] = value
    return value


__all__ = sorted(_NAMES) + sorted(_SUBMODULES)
