"""MetaScheduleApplyDatabase: TVM's pass that gives each PrimFunc of a lowered module the best
schedule a tuning database holds for it (`compiler.meta_schedule.apply`).

As TVM's, it takes the target from the ``with Target(...):`` around it (a record is only the
best on the target it was measured on) and the database from ``work_dir`` or else the
``with database:`` around it, so that the usual way to compile a tuned model reads as in TVM::

    with tvms.target.Target("llvm"):
        mod = relax.transform.MetaScheduleApplyDatabase(work_dir="tuning")(mod)

The module is first put in the form the build compiles its kernels in (`build.kernels_as_built`:
weights the model binds marked, transposed reads rewritten), the form `tvms tune` tuned. The
tuning machinery is imported when the pass runs, not with `compiler.transform`.
"""

from __future__ import annotations

import warnings

from tvmscript import ir
from tvmscript.ir import tir

__all__ = ["MetaScheduleApplyDatabase"]


class MetaScheduleApplyDatabase:
    """``IRModule -> IRModule``: each PrimFunc the database has a record of for the current
    target replaced by its best tuned schedule (marked so that the default schedules leave
    it alone); the others unchanged. ``work_dir``: a `JSONDatabase`'s folder (it must exist);
    ``database``: a `Database` object; neither: `Database.current()`. ``enable_warning``: warn
    for each PrimFunc left untuned, as TVM's does."""

    def __init__(self, work_dir=None, database=None, enable_warning: bool = False) -> None:
        if work_dir is not None and database is not None:
            raise ValueError("MetaScheduleApplyDatabase takes a work_dir or a database, not both")
        self.work_dir = work_dir
        self.database = database
        self.enable_warning = enable_warning

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        from tvmscript.target import Target

        from ..build import kernels_as_built
        from ..build_target import target_name_of
        from ..meta_schedule.apply import apply_database
        from ..meta_schedule.database import Database

        target = Target.current()
        if target is None:
            raise ValueError("MetaScheduleApplyDatabase needs the target the records are for: run it inside "
                             "`with tvms.target.Target(\"llvm\"):` (or the target you compile for)")
        database = self.database if self.work_dir is None else self.work_dir
        if database is None:
            database = Database.current()
            if database is None:
                raise ValueError("MetaScheduleApplyDatabase needs a database: give it work_dir=, database=, or run "
                                 "it inside `with database:`")
        built = kernels_as_built(mod, target_name_of(target), relax_pipeline=None)
        out = apply_database(built, database, target)
        if self.enable_warning:
            # (Untuned: a function `apply_database` left as the build's form has it. `mod` may
            # not hold it: the build's rewrites make new kernels, transposed reads.)
            for gv, func in out.functions.items():
                if isinstance(func, tir.PrimFunc) and built[gv] is func:
                    warnings.warn(f"MetaScheduleApplyDatabase: no tuning record of '{gv.name_hint}' for {target}; "
                                  "it keeps the default schedule", stacklevel=2)
        return mod if out is built else out   # nothing tuned: the module as it came

    def __repr__(self) -> str:
        where = f"work_dir={self.work_dir!r}" if self.work_dir is not None else \
            f"database={self.database!r}" if self.database is not None else ""
        return f"MetaScheduleApplyDatabase({where})"
