"""``tvms check``: every independent error of each file (`tvmscript.checking.file_errors`),
as located diagnostics, up to ``--max-errors`` in all."""

from __future__ import annotations

import sys

from .options import positive_int
from .reporting import MAX_ERRORS, Reported, report, report_found
from .sources import read


def register(sub) -> None:
    check = sub.add_parser("check", help="parse and check .tvms files")
    check.add_argument("files", nargs="+", help=".tvms files ('-' for standard input)")
    check.add_argument("--max-errors", type=positive_int, default=MAX_ERRORS, metavar="N",
                       help=f"stop after reporting N errors (default: {MAX_ERRORS})")
    check.set_defaults(handler=check_command)


def check_command(args) -> int:
    """Report every independent error of each file, at most ``--max-errors`` in all."""
    from ..checking import file_errors

    status = 0
    left = args.max_errors
    found = 0
    for path in args.files:
        if left <= 0:
            break
        try:
            source = read(path)
        except Reported:
            status = 1
            continue
        errors = file_errors(source.text, source.name, left)
        for err in errors:
            report(err, source.text)
        if errors:
            status = 1
            found += len(errors)
            left -= len(errors)
    if status == 0:
        n = len(args.files)
        print(f"checked {n} file{'s' if n != 1 else ''}: no problems found", file=sys.stderr)
    elif found:
        report_found(found, left <= 0)
    return status
