"""Applying a tuning database at compile time: each PrimFunc of a module that the database has a
record of, for the target being compiled for, becomes the best record's schedule of it.

Why here and not in the builds: `tvms.compile` (``tuning_db=``), the pass
``relax.transform.MetaScheduleApplyDatabase`` and ``tvms compile/run --tuned`` all do the same
thing to a lowered module (after legalization and fusion, before kernels are built), and the
builds need only know to leave a tuned function alone: its default schedule would undo the
tuning, or refuse a function already scheduled. So a tuned function is marked for both, with
`TUNED_ATTRS`: ``tvms.no_default_schedule`` (the CPU's default schedule,
`compiler.schedule_cpu.default_schedule`, skips it) and ``tir.is_scheduled`` (DLight's
`ApplyDefaultSchedule`, which the CUDA build runs, skips it, as TVM's does after its
MetaScheduleApplyDatabase). Functions without a record keep the default schedules, and so do
those whose best record has an empty trace: that is how the tuner records the default schedule
itself (it measures it first), and its best being the default means keeping it.
"""

from __future__ import annotations

import dataclasses
import os

from tvmscript.ir import IRModule, tir

from ..dlight.base import IS_SCHEDULED
from ..schedule_choices import CHOICES_ATTR
from ..schedule_cpu.driver import NO_DEFAULT_SCHEDULE

__all__ = ["apply_database", "as_database", "TUNED_ATTRS"]

TUNED_ATTRS = {NO_DEFAULT_SCHEDULE: True, IS_SCHEDULED: True}


def as_database(database):
    """``database`` as a `Database`: one already, or a work dir's path (a `JSONDatabase` that
    must exist there: a mistyped path is an error, not a module compiled untuned)."""
    from .database import Database, JSONDatabase

    if isinstance(database, Database):
        return database
    if isinstance(database, (str, os.PathLike)):
        if not os.path.isdir(database):
            raise FileNotFoundError(f"no tuning database: {os.fspath(database)} is not a folder")
        return JSONDatabase(database, allow_missing=False)
    raise TypeError(f"a tuning database is a JSONDatabase or the path of its work dir, not {type(database).__name__}")


def apply_database(mod: IRModule, database, target) -> IRModule:
    """``mod`` with each PrimFunc that ``database`` (a `Database` or a work dir's path) has a
    replayable record of for ``target`` replaced by the best record's schedule of it, marked
    with `TUNED_ATTRS`; its name, ``global_symbol`` (or none, for a private function) and
    other attributes are kept. The others, and those whose best record is the default
    schedule (an empty trace), are left as they are; ``mod`` itself is unchanged (it is
    returned when nothing was tuned)."""
    database = as_database(database)
    out = None
    for gv, func in mod.functions.items():
        if not isinstance(func, tir.PrimFunc):
            continue
        sch = database.query_schedule(func, target)
        if sch is None or not sch.trace.insts:
            continue
        if out is None:
            out = mod.copy()
        out[gv] = _tuned(sch.mod["main"], func)
    return mod if out is None else out


def _tuned(scheduled: tir.PrimFunc, original: tir.PrimFunc) -> tir.PrimFunc:
    """``scheduled`` (made on the workload's form of ``original``: public, named "main") as
    ``original`` was named and marked, with `TUNED_ATTRS`."""
    attrs = {k: v for k, v in scheduled.attrs.items() if k != "global_symbol"}
    if "global_symbol" in (original.attrs or {}):
        attrs["global_symbol"] = original.attrs["global_symbol"]
    if CHOICES_ATTR not in attrs:   # (the default schedule's picks: the build schedules it with them)
        attrs.update(TUNED_ATTRS)
    return dataclasses.replace(scheduled, attrs=attrs, private=original.private, span=original.span)
