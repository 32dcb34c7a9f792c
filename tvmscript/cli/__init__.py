"""The ``tvms`` command line.

    tvms show FILE [--func NAME] [--no-color] [--show-meta] [--graph OUT.svg|.dot|.png]
                                                  canonical TVMScript ('-' reads standard input), or
                                                  a picture of a Relax function's dataflow
    tvms fmt FILE... [--check] [--diff]           rewrite files in canonical form
    tvms check FILE... [--max-errors N]           parse and check; a diagnostic per independent error
    tvms run FILE [--inputs F.npz] [--input NAME=F.npy] [--params F.npz] [--shape SYM=N]
                  [--func NAME] [--seed N] [--repeat N] [--out F.npz] [--profile]
                                                  compile for the CPU (FILE.tvms) or load (FILE.so),
                                                  run one function, print its outputs
    tvms compile FILE [--emit llvm|llvm-unopt|asm|python|library] [-o FILE] [--func NAME]
                                                  the generated code of a module; -o FILE.so: a
                                                  shared library of the compiled module
    tvms tune FILE --work-dir DIR [--target llvm|cuda] [--trials N] [--per-iter N] [--func NAME]
                  [--seed N] [--scheduler ADDRESS]
                                                  search for faster schedules of its prim_funcs; the
                                                  database in DIR is what --tuned DIR applies
    tvms import MODEL.pt2|MODEL.onnx [-o FILE.tvms] [--params-out F.npz | --inline-params]
                                                  a PyTorch or ONNX model as a .tvms file + weights
    tvms lsp                                      the language server editors start (stdio)
    tvms env [--json]                             versions and capabilities, for a bug report

Errors in the user's program are printed as located diagnostics and exit with status 1; a
Python traceback is a bug in tvms.

Each command is a module here that registers its subparser and holds its handler; what they
share is in `reporting` (errors), `options`, `sources` (reading files), `writing`, `progress`
and `program` (what run, compile and show transform and compile).
"""

from __future__ import annotations

import argparse
import os
import sys

from . import check, compile, env, fmt, import_model, lsp, run, show, tune
from .reporting import Failure, print_failure

_COMMANDS = (show, fmt, check, run, compile, tune, import_model, lsp, env)  # in the order --help lists them


def main(argv: list[str] | None = None) -> int:
    parser = _argument_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.handler(args)
    except Failure as failure:
        print_failure(failure)
        return 1
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
    for command in _COMMANDS:
        command.register(sub)
    return p


def _version() -> str:
    from ..version import __version__

    return __version__
