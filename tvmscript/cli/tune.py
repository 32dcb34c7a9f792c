"""``tvms tune``: search for faster schedules of a file's PrimFuncs and keep them in a tuning
database (`compiler.meta_schedule.tune_tir`), which ``tvms run/compile --tuned DIR`` and
``tvms.compile(..., tuning_db=DIR)`` apply.

The module goes through the same passes ``tvms run`` applies (``--pipeline``, ``--bind`` with
``--params``), so the PrimFuncs tuned are the ones a run builds; trials are shared among them
by their share of the time. On a terminal a live table shows each task's trials, best GFLOP/s
and speedup over the default schedule; Ctrl-C stops between two candidates and keeps the
database, and a second run on the same ``--work-dir`` continues from it.
"""

from __future__ import annotations

import re
import sys

from .options import add_pipeline_arguments, natural_int, pipeline_options, positive_int
from .program import check_target, load_program
from .reporting import fail, stream_is_terminal


def register(sub) -> None:
    tune = sub.add_parser(
        "tune", help="search for faster schedules of a .tvms file's prim_funcs (auto-tuning)",
        description="Tune the prim_funcs of a .tvms file (after the pipeline, as tvms run builds them): "
        "measure candidate schedules from a search space, guided by a cost model, and keep the results in a "
        "tuning database in --work-dir, which tvms run/compile --tuned DIR apply. Interruptible (Ctrl-C keeps "
        "the database) and resumable (a second run continues).",
    )
    tune.add_argument("file", help="a .tvms file, or - for standard input")
    tune.add_argument("--target", default="llvm", help="compilation target: llvm (the host CPU, default) or cuda")
    tune.add_argument("--arch", metavar="sm_XX", help="with --target cuda: the GPU architecture")
    tune.add_argument("--trials", type=positive_int, default=200, metavar="N",
                      help="candidates to measure in all, shared among the prim_funcs (default 200)")
    tune.add_argument("--work-dir", required=True, metavar="DIR", help="where the tuning database is kept")
    tune.add_argument("--per-iter", type=positive_int, default=32, metavar="N",
                      help="candidates proposed and measured per round (default 32)")
    tune.add_argument("--func", help="tune only this prim_func")
    tune.add_argument("--seed", type=natural_int, default=0, metavar="N", help="seed of the search (default 0)")
    tune.add_argument("--scheduler", metavar="ADDRESS",
                      help="measure on a Dask cluster (tcp://host:8786) instead of local processes")
    tune.add_argument("--no-live", action="store_true", help="no live table, even on a terminal")
    add_pipeline_arguments(tune, default="zero")
    tune.set_defaults(handler=tune_command)


def tune_command(args) -> int:
    from ..compiler.meta_schedule.tune import extract_tasks, tune_tir
    from ..ir import IRModule

    target = args.target
    if args.arch:
        if not re.fullmatch(r"sm_\d+[a-z]?", args.arch) or target.split()[0] != "cuda":
            raise fail(f"--arch {args.arch}: expected a CUDA architecture such as sm_90, with --target cuda")
        target = f"{target} -arch={args.arch}"
    target = check_target(target)
    program = load_program(args.file, check=True)
    program.transform(pipeline_options(args), None, target)
    mod = program.module()
    if args.func:
        name, func = program.pick(args.func)
        mod = IRModule({name: func})
    tasks = extract_tasks(mod, target)
    if not tasks:
        raise fail(f"{program.path} has no prim_func to tune")
    builder = runner = None
    if args.scheduler:
        from ..compiler.meta_schedule.dask_runner import DaskBuilder, DaskRunner

        builder, runner = DaskBuilder(args.scheduler), DaskRunner(args.scheduler)
    table = _LiveTable(enabled=stream_is_terminal(sys.stdout) and not args.no_live)
    try:
        with table:
            db = tune_tir(mod, target, args.work_dir, args.trials, num_trials_per_iter=args.per_iter,
                          seed=args.seed, builder=builder, runner=runner, on_progress=table.update)
    except ImportError as err:
        raise fail(str(err)) from None
    report = db.last_report
    table.print_final(report)
    if report.interrupted:
        print(f"interrupted: the database in {args.work_dir} keeps what was measured; run again to continue",
              file=sys.stderr)
        return 130
    return 0


class _LiveTable:
    """The tasks' progress as a table: redrawn in place on a terminal (rich), printed once at
    the end otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.live = enabled, None

    def __enter__(self):
        if self.enabled:
            from rich.live import Live

            self.live = Live(refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def update(self, report) -> None:
        if self.live is not None:
            self.live.update(_table(report))

    def print_final(self, report) -> None:
        """The final table: drawn by rich on a terminal, plain aligned columns otherwise (a
        log or a pipe)."""
        if self.enabled:
            from rich.console import Console

            Console(highlight=False).print(_table(report))
            return
        rows = [_COLUMNS] + _cells(report)
        widths = [max(len(r[k]) for r in rows) for k in range(len(_COLUMNS))]
        print(f"tuning: {report.seconds:.0f} s")
        for r in rows:
            print("  ".join(c.ljust(w) if k in (0, 6) else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths))))


_COLUMNS = ("task", "trials", "default ms", "best ms", "best GFLOP/s", "speedup", "discarded")


def _cells(report) -> list:
    out = []
    for row in report.rows():
        failures = ", ".join(f"{k} {v}" for k, v in sorted(row["failures"].items())) or "-"
        out.append((row["task"], str(row["trials"]), _num(row["default_ms"], ".4g"), _num(row["best_ms"], ".4g"),
                    _num(row["gflops"], ".1f"), _num(row["speedup"], ".2f", "x"), failures))
    return out


def _table(report):
    from rich.table import Table

    table = Table(title=f"tuning: {report.seconds:.0f} s", title_justify="left")
    for column in _COLUMNS:
        table.add_column(column, justify="left" if column in ("task", "discarded") else "right")
    for cells in _cells(report):
        table.add_row(*cells)
    return table


def _num(value, spec: str, suffix: str = "") -> str:
    """``value`` in format ``spec``, or "-" where there is none (a task whose default failed)."""
    return "-" if value is None else f"{value:{spec}}{suffix}"
