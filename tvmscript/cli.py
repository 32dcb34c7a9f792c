"""The ``tvms`` command line.

    tvms show FILE [--func NAME] [--no-color]     canonical TVMScript ('-' reads standard input)
    tvms fmt FILE... [--check] [--diff]           rewrite files in canonical form
    tvms check FILE...                            parse and check; diagnostics on error

Errors in the user's program are printed as located diagnostics and exit with status 1; a
Python traceback is a bug in tvms.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    parser = _argument_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `tvms show x | head`): not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:  # a bug in tvms, not in the user's program
        if os.environ.get("TVMS_DEBUG"):
            raise
        print(
            f"error: internal error in tvms ({type(exc).__name__}: {exc}); this is a bug in tvms, not in "
            "your program. Run with TVMS_DEBUG=1 for the Python traceback.",
            file=sys.stderr,
        )
        return 70


def _argument_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tvms", description="A TVMScript-first machine-learning compiler toolchain.")
    p.add_argument("--version", action="version", version=f"tvms {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    show = sub.add_parser("show", help="print a .tvms file in canonical TVMScript")
    show.add_argument("file", help="a .tvms file, or - for standard input")
    show.add_argument("--func", help="print only this function")
    show.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    show.set_defaults(run=cmd_show)

    fmt = sub.add_parser("fmt", help="rewrite .tvms files in canonical form, in place")
    fmt.add_argument("files", nargs="+", help=".tvms files ('-' formats standard input to standard output)")
    fmt.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    fmt.add_argument("--diff", action="store_true", help="change nothing; print what would change")
    fmt.set_defaults(run=cmd_fmt)

    check = sub.add_parser("check", help="parse and check .tvms files")
    check.add_argument("files", nargs="+", help=".tvms files ('-' for standard input)")
    check.set_defaults(run=cmd_check)
    return p


def _version() -> str:
    from . import __version__

    return __version__


# ----------------------------------------------------------------------------- helpers


def _read(path: str) -> tuple[str, str]:
    """(text, display name) of a file or of standard input; raises TVMScriptError on bad bytes."""
    from .api import decode_source

    if path == "-":
        data = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        with open(path, "rb") as f:
            data = f.read()
        name = path
    return decode_source(data, name), name


def _report(err, source: str | None) -> None:
    color = _stream_is_terminal(sys.stderr)
    print(err.render(source, color=color), file=sys.stderr)


def _stream_is_terminal(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return getattr(stream, "isatty", lambda: False)()


def _load(path: str):
    """Parse one file; returns (ir, text) or None after reporting what went wrong."""
    from .diagnostics import TVMScriptError
    from .parser import parse_source

    text = None
    try:
        text, name = _read(path)
        return parse_source(text, name), text
    except TVMScriptError as err:
        _report(err, text)
    except FileNotFoundError:
        print(f"error: no such file: {path}", file=sys.stderr)
    except IsADirectoryError:
        print(f"error: {path} is a directory", file=sys.stderr)
    except PermissionError:
        print(f"error: permission denied: {path}", file=sys.stderr)
    except OSError as err:
        print(f"error: cannot read {path}: {err.strerror or err}", file=sys.stderr)
    return None


# ----------------------------------------------------------------------------- commands


def cmd_show(args) -> int:
    from . import ir
    from .printer import show

    loaded = _load(args.file)
    if loaded is None:
        return 1
    node, _ = loaded
    if args.func:
        if not isinstance(node, ir.IRModule):
            print("error: --func needs a file holding an @I.ir_module", file=sys.stderr)
            return 1
        if args.func not in node:
            names = ", ".join(gv.name_hint for gv in node.get_global_vars())
            print(f"error: no function named '{args.func}' (the module has: {names})", file=sys.stderr)
            return 1
        node = node[args.func]
    color = not args.no_color and _stream_is_terminal(sys.stdout)
    show(node, color=color)
    return 0


def cmd_fmt(args) -> int:
    from .printer import to_script

    status = 0
    changed = 0
    for path in args.files:
        loaded = _load(path)
        if loaded is None:
            status = 1
            continue
        node, text = loaded
        formatted = to_script(node)
        if path == "-" and not (args.check or args.diff):
            sys.stdout.write(formatted)
            continue
        if formatted == text:
            continue
        problem = _unsafe_to_write(text, formatted)
        if problem:
            print(f"error: not reformatting {path}: {problem}; this is a bug in tvms", file=sys.stderr)
            status = 1
            continue
        changed += 1
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
            _write_atomically(path, formatted)
        except OSError as err:
            print(f"error: cannot write {path}: {err.strerror}", file=sys.stderr)
            status = 1
            continue
        print(f"reformatted {path}", file=sys.stderr)
    return status


def _unsafe_to_write(original: str, formatted: str) -> str | None:
    """Why the formatted text must not replace the original, if it must not: it does not parse,
    or a comment of the original is missing from it."""
    from collections import Counter

    from .diagnostics import TVMScriptError
    from .parser import parse_source
    from .parser.builder import is_printer_artifact
    from .parser.syntax import parse_syntax

    try:
        parse_source(formatted, "<formatted>")
    except TVMScriptError as err:
        return f"the formatted text does not parse ({err})"

    def comments(text: str) -> Counter:
        return Counter(c.text.rstrip() for c in parse_syntax(text)[1] if not is_printer_artifact(c.text))

    lost = comments(original) - comments(formatted)
    if lost:
        return f"formatting would lose the comment {next(iter(lost))!r}"
    return None


def _write_atomically(path: str, text: str) -> None:
    """Write through a temporary file in the same folder, then rename over the original, so a
    crash or a full disk never leaves the user's file half-written."""
    path = os.path.realpath(path)  # through a symlink: rewrite its target, keep the link
    folder = os.path.dirname(path)
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".tvms-fmt-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def cmd_check(args) -> int:
    from .diagnostics import TVMScriptError
    from .well_formed import check_well_formed

    status = 0
    for path in args.files:
        loaded = _load(path)
        if loaded is None:
            status = 1
            continue
        node, text = loaded
        try:
            check_well_formed(node)
        except TVMScriptError as err:
            _report(err, text)
            status = 1
    if status == 0:
        n = len(args.files)
        print(f"checked {n} file{'s' if n != 1 else ''}: no problems found", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
