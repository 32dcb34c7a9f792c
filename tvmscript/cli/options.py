"""Options several ``tvms`` commands share, and the argparse types of their values.

``--pipeline``, ``--bind`` and ``--params`` (the passes applied before anything else),
``--tuned`` (a tuning database applied after them) and ``--no-bounds-check`` mean the same in
every command that takes them; they are declared here once, and `PipelineOptions` is what the
commands hand on from them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

PIPELINES = ("none", "legalize", "zero")


@dataclass(frozen=True)
class PipelineOptions:
    """``--pipeline``, ``--bind`` and ``--params`` as `Program.transform` applies them.

    ``params_are_inputs``: the command (tvms run) also reads ``--params`` as the arrays of the
    parameters it calls the function with, so ``--params`` without ``--bind`` is no mistake."""

    pipeline: str
    bind: bool
    params: tuple = ()
    params_are_inputs: bool = False


def add_pipeline_arguments(parser, default: str, params: bool = True) -> None:
    """``--pipeline`` (``default`` when not given), ``--bind`` and, with ``params``, ``--params``
    (a command that reads ``--params`` as inputs declares its own)."""
    parser.add_argument(
        "--pipeline", choices=PIPELINES, default=default,
        help=f"passes applied first: none, legalize (LegalizeOps) or zero (LegalizeOps, then "
        f"AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR) (default: {default})")
    if params:
        parser.add_argument("--params", action="append", default=[], metavar="FILE.npz",
                            help="named arrays for parameters of the function (with --bind)")
    parser.add_argument("--bind", action="store_true",
                        help="bind the --params arrays into the function as constants (BindParams) "
                        "before the pipeline, so work on them is folded at compile time")


def pipeline_options(args, params_are_inputs: bool = False) -> PipelineOptions:
    """The `PipelineOptions` of parsed arguments (`add_pipeline_arguments` declared them)."""
    return PipelineOptions(args.pipeline, args.bind, tuple(args.params), params_are_inputs)


def add_bounds_check_argument(parser) -> None:
    """``--no-bounds-check``: read as ``args.bounds_check``."""
    parser.add_argument("--no-bounds-check", dest="bounds_check", action="store_false",
                        help="leave out the run-time checks of buffer accesses not proven in bounds at compile "
                        "time (an access outside its buffer is then undefined behaviour)")


def add_tuned_argument(parser) -> None:
    """``--tuned DIR``: read as ``args.tuned`` (None without it)."""
    parser.add_argument("--tuned", metavar="DIR", default=None,
                        help="a MetaSchedule tuning database (database_workload.json and "
                        "database_tuning_record.json in DIR): each kernel it has a record of for --target gets "
                        "the best tuned schedule, after the pipeline; the others get the default schedules")


def file_name(text: str) -> str:
    """An output file argument: an empty name would silently write nothing."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an output file name cannot be empty")
    return text


def _number_argument(convert, expected: str, ok, bound: str):
    """An argparse ``type``: ``convert(text)``, which must satisfy ``ok``; each failure is one
    line saying what was expected."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{bound}, got {text if convert is float else value}")
        return value

    return parse


positive_seconds = _number_argument(float, "a number of seconds", lambda v: 0 < v < float("inf"),
                                    "must be a positive number of seconds")
natural_int = _number_argument(int, "a whole number", lambda v: v >= 0, "must not be negative")
positive_int = _number_argument(int, "a whole number", lambda v: v >= 1, "must be at least 1")
