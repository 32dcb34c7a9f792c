"""``tvms fmt``: rewrite files in canonical form, or say what would change (``--check``,
``--diff``), never leaving a file worse than it was: a file edited meanwhile, read-only, linked
or someone else's keeps what makes it so."""

from __future__ import annotations

import difflib
import errno
import os
import sys

from .reporting import Reported
from .sources import parse
from .writing import write_new_atomically


def register(sub) -> None:
    fmt = sub.add_parser("fmt", help="rewrite .tvms files in canonical form, in place")
    fmt.add_argument("files", nargs="+", help=".tvms files ('-' formats standard input to standard output)")
    fmt.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    fmt.add_argument("--diff", action="store_true", help="change nothing; print what would change")
    fmt.set_defaults(handler=fmt_command)


def fmt_command(args) -> int:
    from .. import formatting

    status = 0
    for path in args.files:
        try:
            parsed = parse(path)
        except Reported:
            status = 1
            continue
        text = parsed.text
        formatted = formatting.formatted_text(parsed.node)
        if path == "-" and not (args.check or args.diff):
            sys.stdout.write(formatted)
            continue
        if formatted == text:
            continue
        problem = formatting.unsafe_to_write(text, formatted)
        if problem:
            print(f"error: not reformatting {path}: {problem}; this is a bug in tvms", file=sys.stderr)
            status = 1
            continue
        if args.diff:
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(keepends=True), formatted.splitlines(keepends=True),
                    fromfile=path, tofile=path,
                )
            )
        if args.check:
            print(f"would reformat {'<stdin>' if path == '-' else path}", file=sys.stderr)
            status = 1
            continue
        if args.diff or path == "-":
            continue
        try:
            _reformat_file(path, text, formatted)
        except OSError as err:
            print(f"error: not reformatting {path}: {err.strerror}", file=sys.stderr)
            status = 1
            continue
        print(f"reformatted {path}", file=sys.stderr)
    return status


def _reformat_file(path: str, original: str, formatted: str) -> None:
    """Replace the text of ``path``, which read as ``original``, by ``formatted``, leaving the
    file what it was in every other way. Raises OSError (nothing written) when the file is
    read-only to us (a formatter does not write through a permission the user took away) or
    no longer holds ``original`` (it was edited while we formatted: the edit is kept). A file
    with other hard links, or one a new file would not get the owner of, is rewritten in place,
    so its links and owner stay; any other goes through a temporary file and a rename, so a
    crash never leaves half a file."""
    target = os.path.realpath(path)
    st = os.stat(target)
    # Write permission for no one (0444) counts even for root, whom os.access lets write.
    if not os.access(target, os.W_OK) or not st.st_mode & 0o222:
        raise PermissionError(errno.EACCES, "the file is read-only", path)
    data = formatted.encode("utf-8")

    def unchanged() -> None:
        from ..api import decode_source

        with open(target, "rb") as f:
            now = f.read()
        if decode_source(now, path) != original:
            raise OSError(errno.EBUSY, "the file changed while it was being formatted; run tvms fmt again", path)

    if st.st_nlink > 1 or (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        unchanged()
        with open(target, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        return
    write_new_atomically(target, data, before_replace=unchanged)
