"""The ``tvms`` command line.

    tvms show FILE [--func NAME] [--no-color] [--show-meta]
                                                  canonical TVMScript ('-' reads standard input)
    tvms fmt FILE... [--check] [--diff]           rewrite files in canonical form
    tvms check FILE... [--max-errors N]           parse and check; a diagnostic per independent error
    tvms run FILE [--inputs F.npz] [--input NAME=F.npy] [--params F.npz] [--shape SYM=N]
                  [--func NAME] [--seed N] [--repeat N] [--out F.npz] [--profile]
                                                  compile for the CPU (FILE.tvms) or load (FILE.so),
                                                  run one function, print its outputs
    tvms compile FILE [--emit llvm|llvm-unopt|asm|python|library] [-o FILE] [--func NAME]
                                                  the generated code of a module; -o FILE.so: a
                                                  shared library of the compiled module
    tvms import MODEL.pt2|MODEL.onnx [-o FILE.tvms] [--params-out F.npz | --inline-params]
                                                  a PyTorch or ONNX model as a .tvms file + weights
    tvms lsp                                      the language server editors start (stdio)

Errors in the user's program are printed as located diagnostics and exit with status 1; a
Python traceback is a bug in tvms.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import re
import sys
import tempfile
import threading


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
    show.add_argument("--show-meta", action="store_true",
                      help="print the metadata section (the values of large constants); left out by default, "
                      "as TVM's show() does")
    _add_pipeline_arguments(show, default="none")
    show.add_argument("--target", default=None,
                      help="with a GPU target (cuda, 'cuda -arch=sm_90'), apply the default GPU schedules "
                      "(DLight: Matmul, GEMV, Reduction, GeneralReduction, Fallback) to every PrimFunc")
    show.set_defaults(run=cmd_show)

    fmt = sub.add_parser("fmt", help="rewrite .tvms files in canonical form, in place")
    fmt.add_argument("files", nargs="+", help=".tvms files ('-' formats standard input to standard output)")
    fmt.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    fmt.add_argument("--diff", action="store_true", help="change nothing; print what would change")
    fmt.set_defaults(run=cmd_fmt)

    check = sub.add_parser("check", help="parse and check .tvms files")
    check.add_argument("files", nargs="+", help=".tvms files ('-' for standard input)")
    check.add_argument("--max-errors", type=_positive_int, default=_MAX_ERRORS, metavar="N",
                       help=f"stop after reporting N errors (default: {_MAX_ERRORS})")
    check.set_defaults(run=cmd_check)

    run = sub.add_parser(
        "run", help="compile a .tvms file for the CPU and run one of its functions",
        description="Compile a .tvms file for the CPU and run one of its functions. Parameters come from "
        "--input, --inputs and --params (in that order of precedence); the ones still missing are made up "
        "at random from their annotations (said on stderr, reproducible with --seed).",
    )
    run.add_argument("file", help="a .tvms file, or - for standard input")
    run.add_argument("--func", help="the function to run (default: main)")
    run.add_argument("--inputs", action="append", default=[], metavar="FILE.npz",
                     help="named arrays; each key is a parameter name")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="one parameter from a .npy file (repeatable)")
    run.add_argument("--params", action="append", default=[], metavar="FILE.npz",
                     help="named arrays for the remaining parameters (the weights)")
    run.add_argument("--shape", action="append", default=[], metavar="SYM=N",
                     help="the value of a symbolic dimension no input gives (repeatable; also n=8,m=4); "
                     "for a lone prim_func also its scalar parameters")
    run.add_argument("--seed", type=_natural_int, default=0, metavar="N",
                     help="seed of the random inputs (default 0)")
    run.add_argument("--extern", action="append", default=[], metavar="FILE.py",
                     help="run this Python file first, to register the extern functions the module calls "
                     "(tvms.register_func); repeatable. It executes that file's code")
    run.add_argument("--timeout", type=_positive_seconds, default=None, metavar="SECONDS",
                     help="stop the run (exit 1) if it has not finished after SECONDS")
    run.add_argument("--profile", action="store_true",
                     help="also time each kernel the function calls (over --repeat calls) and print a table: "
                     "calls, total and mean time, share of the call, heaviest first")
    run.add_argument("--repeat", type=_positive_int, default=1, metavar="N",
                     help="after a first call, time N calls and report the median (default 1)")
    run.add_argument("--out", metavar="FILE.npz", type=_file_name, help="save the outputs: output, or output_0, output_1, ...")
    run.add_argument("--target", default="llvm", help="compilation target (default: llvm, the host CPU)")
    _add_bounds_check_argument(run)
    run.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    _add_pipeline_arguments(run, default="zero", params=False)
    run.set_defaults(run=cmd_run)

    comp = sub.add_parser(
        "compile", help="print the code tvms generates for a .tvms file, or write a shared library (-o FILE.so)",
        description="Compile a .tvms file and print the generated code: the LLVM IR (optimized, or as "
        "generated with llvm-unopt) or the host assembly of its prim_funcs, or the Python the VM runs for "
        "its Relax functions; or, with -o FILE.so, write the compiled module as a shared library that "
        "`tvms run FILE.so` and tvms.runtime.load_module run without compiling.",
    )
    comp.add_argument("file", help="a .tvms file, or - for standard input")
    comp.add_argument("--emit", choices=_EMIT_KINDS, default=None,
                      help="what to write (default: llvm; library when -o names a .so file: the kernels and the "
                      "VM's program as a shared library for `tvms run FILE.so` and tvms.runtime.load_module)")
    comp.add_argument("-o", "--output", metavar="FILE", type=_file_name, help="write to FILE instead of standard output")
    comp.add_argument("--func", help="only this function (a prim_func; a Relax function for --emit python)")
    comp.add_argument("--target", default="llvm", help="compilation target (default: llvm, the host CPU; cuda: "
                      "an NVIDIA GPU, with --emit cuda or ptx)")
    comp.add_argument("--arch", metavar="sm_XX", help="with --target cuda: the GPU architecture (default: the "
                      "GPU's, else sm_90)")
    _add_pipeline_arguments(comp, default="zero")
    _add_bounds_check_argument(comp)
    comp.set_defaults(run=cmd_compile)

    imp = sub.add_parser(
        "import", help="import a PyTorch (.pt2) or ONNX (.onnx) model as a .tvms file",
        description="Import a model saved with torch.export.save (.pt2) or an ONNX model (.onnx): its "
        "graph becomes the function main of a .tvms file, its weights the parameters after the inputs, "
        "saved beside it as an .npz archive for `tvms run FILE.tvms --params FILE.npz` (or bound into the "
        "file with --inline-params).",
    )
    imp.add_argument("model", help="the model file: .pt2 (needs the torch extra) or .onnx (the onnx extra)")
    imp.add_argument("-o", "--output", metavar="FILE.tvms", type=_file_name, help="the .tvms file to write (default: the "
                     "model's name with .tvms)")
    where = imp.add_mutually_exclusive_group()
    where.add_argument("--params-out", metavar="FILE.npz", help="where to save the weights (default: the "
                       "output's name with .npz)")
    where.add_argument("--inline-params", action="store_true", help="bind the weights into the file as "
                       "constants (its metadata section) instead of saving an .npz")
    imp.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                     help="ONNX: the shape of a graph input (repeatable), replacing the model's (with as "
                     "many dimensions as the model gives it)")
    imp.set_defaults(run=cmd_import)

    lsp = sub.add_parser(
        "lsp", help="run the language server (stdio) for editors",
        description="Run the tvms language server over standard input and output: diagnostics, formatting, "
        "hover, definitions, references, rename, completion and more for .tvms files. Editors start it; "
        "it needs the lsp extra (pip install 'tvms[lsp]').",
    )
    lsp.set_defaults(run=cmd_lsp)
    return p


_PIPELINES = ("none", "legalize", "zero")


def _add_pipeline_arguments(parser, default: str, params: bool = True) -> None:
    parser.add_argument(
        "--pipeline", choices=_PIPELINES, default=default,
        help=f"passes applied first: none, legalize (LegalizeOps) or zero (LegalizeOps, then "
        f"AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR) (default: {default})")
    if params:
        parser.add_argument("--params", action="append", default=[], metavar="FILE.npz",
                            help="named arrays for parameters of the function (with --bind)")
    parser.add_argument("--bind", action="store_true",
                        help="bind the --params arrays into the function as constants (BindParams) "
                        "before the pipeline, so work on them is folded at compile time")


_EMIT_KINDS = ("llvm", "llvm-unopt", "asm", "python", "cuda", "ptx", "library")
_GPU_EMIT_KINDS = ("cuda", "ptx")


def _file_name(text: str) -> str:
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


_positive_seconds = _number_argument(float, "a number of seconds", lambda v: 0 < v < float("inf"),
                                     "must be a positive number of seconds")
_natural_int = _number_argument(int, "a whole number", lambda v: v >= 0, "must not be negative")
_positive_int = _number_argument(int, "a whole number", lambda v: v >= 1, "must be at least 1")


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

    read = _read_reporting(path)
    if read is None:
        return None
    text, name = read
    try:
        return parse_source(text, name), text
    except TVMScriptError as err:
        _report(err, text)
    return None


def _read_reporting(path: str):
    """`_read`, or None after reporting why the file cannot be read."""
    from .diagnostics import TVMScriptError

    try:
        return _read(path)
    except TVMScriptError as err:
        _report(err, getattr(err, "source", None))
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
    node, text = loaded
    if args.pipeline != "none" or args.bind or args.params or args.target:
        try:
            program = _Program(node, text, "<stdin>" if args.file == "-" else args.file)
            program.transform(args, args.func or "main")
            if args.target:
                program.gpu_schedule(args.target)
        except _Failure as failure:
            return _report_failure(failure)
        node = program.node
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
    show(node, color=color, show_meta=args.show_meta)
    return 0


def cmd_fmt(args) -> int:
    from . import formatting

    status = 0
    changed = 0
    for path in args.files:
        loaded = _load(path)
        if loaded is None:
            status = 1
            continue
        node, text = loaded
        formatted = formatting.formatted_text(node)
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
        from .api import decode_source

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
    _write_new_atomically(target, data, before_replace=unchanged)


_MAX_ERRORS = 20  # what `tvms check` reports at most, and `tvms run` before it gives up


def cmd_check(args) -> int:
    """Report every independent error of each file, at most ``--max-errors`` in all
    (`tvmscript.checking.file_errors`)."""
    from .checking import file_errors

    status = 0
    left = args.max_errors
    found = 0
    for path in args.files:
        if left <= 0:
            break
        read = _read_reporting(path)
        if read is None:
            status = 1
            continue
        text, name = read
        errors = file_errors(text, name, left)
        for err in errors:
            _report(err, text)
        if errors:
            status = 1
            found += len(errors)
            left -= len(errors)
    if status == 0:
        n = len(args.files)
        print(f"checked {n} file{'s' if n != 1 else ''}: no problems found", file=sys.stderr)
    elif found:
        _report_found(found, left <= 0)
    return status


def _report_found(found: int, stopped: bool) -> None:
    stopped_text = " (stopped at --max-errors)" if stopped else ""
    print(f"found {found} error{'s' if found != 1 else ''}{stopped_text}", file=sys.stderr)


def _checked(path: str):
    """Parse one file and check it as `tvms check` does; returns (ir, text), or None after
    reporting what check finds, exactly as check reports it."""
    from .checking import file_errors
    from .diagnostics import TVMScriptError
    from .parser import parse_source

    read = _read_reporting(path)
    if read is None:
        return None
    text, name = read
    try:
        node = parse_source(text, name)
    except TVMScriptError:
        node = None  # file_errors finds it again, and the errors after it
    errors = file_errors(text, name, _MAX_ERRORS, parsed=node)
    if not errors:
        return node, text
    for err in errors:
        _report(err, text)
    _report_found(len(errors), len(errors) >= _MAX_ERRORS)
    return None


def cmd_lsp(args) -> int:
    """``tvms lsp``: the language server (tvmscript/lsp/server.py), imported only here, since
    pygls is an optional dependency."""
    try:
        from .lsp.server import serve_stdio
    except ImportError as err:
        if (err.name or "").split(".")[0] in ("pygls", "lsprotocol"):
            print("error: tvms lsp needs the lsp extra: pip install 'tvms[lsp]'", file=sys.stderr)
            return 1
        raise
    return serve_stdio()


# ============================================================================= run and compile
#
# Everything a user can get wrong (files, names, shapes, dtypes, a module that cannot be built)
# is raised as a _Failure with the text to print, and becomes "error: ..." and exit status 1.


class _Failure(Exception):
    """A user error; ``str(self)`` is the complete text to print (already rendered)."""


def _fail(message: str) -> "_Failure":
    return _Failure(f"error: {message}")


def _debugging() -> bool:
    return bool(os.environ.get("TVMS_DEBUG"))


def _add_bounds_check_argument(parser) -> None:
    parser.add_argument("--no-bounds-check", dest="bounds_check", action="store_false",
                        help="leave out the run-time checks of buffer accesses not proven in bounds at compile "
                        "time (an access outside its buffer is then undefined behaviour)")


def cmd_run(args) -> int:
    try:
        return _run(args)
    except _Failure as failure:
        return _report_failure(failure)


def cmd_compile(args) -> int:
    try:
        return _compile_command(args)
    except _Failure as failure:
        return _report_failure(failure)


def _report_failure(failure: _Failure) -> int:
    if str(failure):  # empty: reported already
        print(str(failure), file=sys.stderr)
    return 1


def cmd_import(args) -> int:
    """``tvms import``: read the model (relax/frontend/model_file.py), write the .tvms file and
    the weights. Nothing is written unless the whole import succeeded."""
    try:
        return _import_model(args)
    except _Failure as failure:
        return _report_failure(failure)


def _import_model(args) -> int:
    import io

    import numpy as np

    from .printer import to_script
    from .relax.frontend.common import FrontendError
    from .relax.frontend.model_file import bind_weights, model_format, read_model

    output = args.output or os.path.splitext(args.model)[0] + ".tvms"
    params_out = None if args.inline_params else (args.params_out or os.path.splitext(output)[0] + ".npz")
    try:
        model_format(args.model)
        shapes = _parse_input_shapes(args.shape)
        with _ImportProgress(args.model) as progress:
            mod, weights = read_model(args.model, progress=progress, shape_dict=shapes or None)
    except FrontendError as err:
        raise _fail(str(err)) from None
    if args.inline_params and weights:
        mod = bind_weights(mod, weights)
    text = to_script(mod, show_meta=True)  # a file: it must keep its constants
    try:
        _write_new_atomically(output, text.encode("utf-8"))
        if params_out is not None:
            buffer = io.BytesIO()
            np.savez(buffer, **weights)
            _write_new_atomically(params_out, buffer.getvalue())
    except OSError as err:
        raise _fail(f"cannot write {err.filename or output}: {err.strerror or err}") from None
    size = sum(a.nbytes for a in weights.values())
    where = "inline" if params_out is None else f"in {params_out}"
    print(f"imported {args.model} -> {output} ({len(weights)} weights, {size / 2**20:.1f} MiB {where})",
          file=sys.stderr)
    return 0


def _parse_input_shapes(items: list) -> dict:
    """{input name: [dims]} from --shape x=1,3,224,224."""
    shapes: dict = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            dims = [int(d) for d in text.split(",")] if sep and name.strip() else None
        except ValueError:
            dims = None
        if not dims:
            raise _fail(f"--shape expects INPUT=D0,D1,... (e.g. --shape input=1,3,224,224), got {item!r}")
        if name.strip() in shapes:
            raise _fail(f"--shape gives input '{name.strip()}' twice")
        shapes[name.strip()] = dims
    return shapes


class _ImportProgress:
    """A progress bar on standard error while an importer converts nodes, for models big enough
    to take a while (and only on a terminal); a callable ``(done, total)``."""

    MIN_NODES = 200

    def __init__(self, model: str) -> None:
        self.model = model
        self.bar = None
        self.task = None

    def __enter__(self):
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.MIN_NODES or not _stream_is_terminal(sys.stderr):
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("importing {task.description}"), BarColumn(), MofNCompleteColumn(),
                                console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(os.path.basename(self.model), total=total)
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


class _CompileProgress:
    """A transient progress line on standard error while a compile that has taken more than
    ``DELAY`` seconds goes on (only on a terminal): the stage the compiler reports
    (`compiler.progress`) and how far it is. Short compiles print nothing."""

    DELAY = 1.0

    def __init__(self) -> None:
        self.state = ("compiling", 0, 0)
        self.bar = None
        self.task = None
        self.lock = threading.Lock()
        self.timer = None
        self.listening = None

    def __enter__(self):
        from .compiler import progress

        if not _stream_is_terminal(sys.stderr):
            return self
        self.listening = progress.listen(self.update)
        self.listening.__enter__()
        self.timer = threading.Timer(self.DELAY, self.show)
        self.timer.daemon = True
        self.timer.start()
        return self

    def update(self, stage: str, done: int, total: int) -> None:
        with self.lock:
            self.state = (stage, done, total)
            if self.bar is not None:
                self.bar.update(self.task, description=stage, completed=done, total=total or None)

    def show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self.lock:
            if self.listening is None:
                return
            stage, done, total = self.state
            self.bar = Progress(SpinnerColumn(), TextColumn("compiling: {task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                                transient=True)
            self.task = self.bar.add_task(stage, total=total or None, completed=done)
            self.bar.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and take the line away (at once: idempotent)."""
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            if self.listening is not None:
                self.listening.__exit__(None, None, None)
                self.listening = None
            if self.bar is not None:
                self.bar.stop()
                self.bar = None


# ----------------------------------------------------------------------------- the program


class _Program:
    """The parsed file and the function chosen to run."""

    def __init__(self, node, text: str, path: str) -> None:
        self.node = node
        self.text = text
        self.path = path
        self.progress = None  # a _CompileProgress, shown from the pipeline to the end of `_compile`
        self.legalized = False  # whether --pipeline ran LegalizeOps (`transform`)

    def module(self):
        from . import ir, relax, tir

        node = self.node
        if isinstance(node, ir.IRModule):
            return node
        if isinstance(node, relax.Function):
            return ir.IRModule({"main": node})
        if isinstance(node, tir.PrimFunc):
            return ir.IRModule({_prim_name(node): node})
        raise _fail(f"{self.path} holds no function to compile")

    def pick(self, name: str | None):
        """(name, function) of the function to run: --func, else ``main``, else the only one."""
        from . import relax, tir

        mod = self.module()
        funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, (relax.Function, tir.PrimFunc))}
        if not funcs:
            raise _fail(f"{self.path} holds no function to run")
        if name is None:
            if "main" in funcs:
                name = "main"
            elif len(funcs) == 1:
                name = next(iter(funcs))
            else:
                relax_names = [n for n, f in funcs.items() if isinstance(f, relax.Function)]
                if len(relax_names) == 1:
                    name = relax_names[0]
                else:
                    raise _fail(f"{self.path} has no function named 'main': pick one with --func "
                                f"(the module has: {', '.join(funcs)})")
        elif name not in funcs:
            from .diagnostics import did_you_mean

            hint = did_you_mean(name, funcs)
            raise _fail(f"no function named '{name}' (the module has: {', '.join(funcs)})"
                        + (f"; {hint[0]}" if hint else ""))
        return name, funcs[name]

    def report(self, err) -> "_Failure":
        color = _stream_is_terminal(sys.stderr)
        return _Failure(err.render(self.text, color=color))

    def transform(self, args, func_name: str | None) -> None:
        """Apply ``--bind`` (the ``--params`` arrays into ``func_name``) and ``--pipeline``;
        the transformed module replaces the parsed one."""
        from .compiler import transform as T
        from .diagnostics import TVMScriptError

        if args.bind and not args.params:
            raise _fail("--bind needs the arrays to bind: give them with --params FILE.npz")
        if args.params and not args.bind and args.command != "run":
            raise _fail("--params is used with --bind (it binds the arrays into the function as constants)")
        mod = self.module()
        try:
            if args.bind:
                mod = self._bind(mod, args.params, func_name)
            if args.pipeline == "legalize":
                mod = T.LegalizeOps()(mod)
            elif args.pipeline == "zero":
                mod = T.get_pipeline("zero")(mod)
            self.legalized = args.pipeline in ("legalize", "zero")
        except TVMScriptError as err:
            raise self.report(err) from None
        except (ValueError, TypeError, NotImplementedError) as err:
            if _debugging():
                raise
            raise _fail(f"cannot transform {self.path}: {err}") from None
        self.node = mod

    def gpu_schedule(self, target_text: str) -> None:
        """Apply DLight's default GPU schedules for ``target_text`` (a CUDA target) to every
        PrimFunc without thread bindings; a CPU target leaves the module as it is."""
        from .target import Target

        _check_target(target_text)
        target = Target(target_text)
        if target.kind.name != "cuda":
            return
        from .compiler.build_cuda import default_gpu_schedule
        from .compiler.schedule import ScheduleError

        mod = self.module()
        try:
            mod = default_gpu_schedule(mod, target)
        except ScheduleError as err:
            if _debugging():
                raise
            raise _fail(f"cannot schedule {self.path} for {target}: {err}") from None
        self.node = mod

    def _bind(self, mod, paths: list, func_name: str | None):
        from . import relax
        from .compiler.transform import BindParams

        name = func_name or "main"
        if name not in mod or not isinstance(mod[name], relax.Function):
            raise _fail(f"--bind binds parameters of a Relax function; {self.path} has no Relax function '{name}'")
        names = [p.name_hint for p in mod[name].params]
        arrays: dict = {}
        for path in paths:
            for key, value in _load_arrays(path, "npz").items():
                if key not in names:
                    raise _unknown_name(key, names, name, f"{path} has an array '{key}'")
                arrays[key] = value
        try:
            return BindParams(name, arrays)(mod)
        except ValueError as err:
            raise _fail(str(err).replace("BindParams: ", f"--bind {', '.join(paths)}: ")) from None


class _LibraryProgram(_Program):
    """A shared library ``export_library`` wrote (``tvms run model.so``): its executable runs
    as it was built, with no parsing, pipeline or compiling."""

    def __init__(self, path: str) -> None:
        import time

        from .runtime.library import LibraryError, load_module

        t0 = time.perf_counter()
        try:
            self.executable = load_module(path)
            self.load_s = time.perf_counter() - t0
        except LibraryError as err:
            raise _fail(str(err)) from None
        if self.executable.mod is None:
            raise _fail(f"{path} holds no Relax signatures to run it by (its module could not be saved when it "
                        "was exported): load it from Python with tvms.runtime.load_module")
        super().__init__(self.executable.mod, "", path)

    def transform(self, args, func_name: str | None) -> None:
        if args.bind:
            raise _fail(f"{self.path} is compiled: --bind applies to a .tvms file (pass the arrays with --params)")
        if getattr(args, "target", "llvm") != "llvm":
            raise _fail(f"{self.path} is compiled (for {self.executable.target}): --target applies to a .tvms file")

    def report(self, err) -> "_Failure":
        if err.span is not None:  # a place in the .tvms file it was built from (not at hand to show)
            return _Failure(err.render(None, color=_stream_is_terminal(sys.stderr)))
        return _Failure(f"error: {self.path}: {err.message}")


def _is_shared_library(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _prim_name(func) -> str:
    attrs = func.attrs if isinstance(func.attrs, dict) else {}
    return attrs.get("global_symbol") or "main"


def _load_program(path: str, check: bool = False) -> _Program:
    """The program in ``path`` (a .tvms file, or a library `tvms compile` wrote); ``check``:
    what `tvms check` finds in the file stops it here, reported as check reports it."""
    if path != "-" and _is_shared_library(path):
        return _LibraryProgram(path)
    loaded = _checked(path) if check else _load(path)
    if loaded is None:
        raise _Failure("")  # reported already
    node, text = loaded
    return _Program(node, text, "<stdin>" if path == "-" else path)


def _check_target(target: str, run_here: bool = False) -> str:
    """The target's name, once tvms accepts every option of it (`compiler.build_target.checked_target`);
    ``run_here``: also a CPU this machine can run the code of."""
    from .compiler.build_target import target_name_of

    try:
        name = target_name_of(target)
    except (NotImplementedError, ValueError) as err:
        raise _fail(f"--target: {err}") from None
    if run_here and name.split()[0] != "cuda":
        from .compiler.llvm_target import unrunnable_here
        from .target import Target

        reason = unrunnable_here(Target(target))
        if reason:
            raise _fail(f"--target: tvms run runs the kernels on this machine, but {reason}; leave "
                        f"-mcpu/-mattr out, or compile a library to run there: tvms compile FILE --target "
                        f"\"{target}\" -o model.so")
    return name


def _cuda_text(program: _Program, mod, target: str, emit: str) -> str:
    """The CUDA C (``emit="cuda"``) or PTX of ``mod``'s prim_funcs after the default GPU
    schedules; build errors are rendered at their place in the file."""
    from . import tir
    from .compiler.build_cuda import build_cuda
    from .diagnostics import TVMScriptError

    prim_funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}
    if not prim_funcs:
        raise _fail(f"{program.path} has no T.prim_func: nothing to compile to {emit}")
    try:
        code = build_cuda(prim_funcs, target, kind="source" if emit == "cuda" else "ptx")
    except TVMScriptError as err:
        raise program.report(err) from None
    return code.source if emit == "cuda" else code.ptx


def _compile(program: _Program, mod, target: str, bounds_check: bool = True):
    """The executable for ``mod``; a build error is rendered at its place in the file."""
    from .diagnostics import TVMScriptError
    from .relax_api import compile as tvms_compile

    if isinstance(program, _LibraryProgram):
        return program.executable
    try:
        # --pipeline ran already
        return tvms_compile(mod, target=target, relax_pipeline=None, bounds_check=bounds_check)
    except TVMScriptError as err:
        if "is not lowered yet" in err.message and not err.notes and not program.legalized:
            err.notes = ["--pipeline none compiles the module as written; the default, --pipeline zero, "
                         "legalizes high-level ops first"]
        raise program.report(err) from None
    except (NotImplementedError, ValueError, TypeError) as err:
        if _debugging():
            raise
        raise _fail(f"cannot compile {program.path}: {err}") from None
    finally:
        if program.progress is not None:  # the compile is over: the run's time is not compiling
            program.progress.close()


# ----------------------------------------------------------------------------- inputs


class _Given:
    """A value read from a file for a parameter, and where it came from."""

    __slots__ = ("value", "source")

    def __init__(self, value, source: str) -> None:
        self.value = value
        self.source = source


def _load_arrays(path: str, want: str) -> dict:
    """{name: array} of a .npz file (``want="npz"``) or {None: array} of a .npy file."""
    import zipfile

    import numpy as np

    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise _fail(f"no such file: {path}") from None
    except IsADirectoryError:
        raise _fail(f"{path} is a directory") from None
    except PermissionError:
        raise _fail(f"permission denied: {path}") from None
    except OSError as err:
        raise _fail(f"cannot read {path}: {err.strerror or err}") from None
    is_npz = magic.startswith(b"PK\x03\x04") or magic.startswith(b"PK\x05\x06")
    is_npy = magic == b"\x93NUMPY"
    if want == "npz" and not is_npz:
        hint = " (it is a .npy file: give it with --input NAME=FILE)" if is_npy else ""
        raise _fail(f"{path} is not a NumPy .npz archive{hint}")
    if want == "npy" and not is_npy:
        hint = " (it is a .npz archive: give it with --inputs or --params)" if is_npz else ""
        raise _fail(f"{path} is not a NumPy .npy file{hint}")
    try:
        _check_array_sizes(path, is_npz)
        loaded = np.load(path, allow_pickle=False)
        if want == "npy":
            return {None: loaded}
        with loaded as archive:
            return {key: archive[key] for key in archive.files}
    except ValueError as err:
        if "pickle" in str(err).lower():
            raise _fail(f"cannot read {path}: it holds Python objects (pickled data), which tvms does not load; "
                        "save plain numeric arrays") from None
        raise _fail(f"cannot read {path}: {err}") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise _fail(f"cannot read {path}: a damaged or truncated NumPy file ({type(err).__name__}: {err})") from None


# An archive member that expands more than this many times, past 64 MB, is not loaded.
_MAX_EXPANSION = 200


def _check_array_sizes(path: str, is_npz: bool) -> None:
    """Refuse, before NumPy allocates anything, an array whose header claims more data than
    the file holds (a header saying 10**12 elements), and an archive member that expands
    hundreds of times (a zip bomb): each would take memory the input does not justify."""
    import math
    import zipfile

    import numpy as np

    def header(f):
        version = np.lib.format.read_magic(f)
        shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                           else np.lib.format.read_array_header_2_0(f))
        return math.prod(shape) * dtype.itemsize, shape

    def check(f, stored: int, what: str) -> None:
        claimed, shape = header(f)
        if claimed > stored:
            raise _fail(f"cannot read {path}: {what} claims shape {shape} ({claimed:,} bytes) but holds "
                        f"{stored:,} bytes")

    if not is_npz:
        with open(path, "rb") as f:
            check(f, os.path.getsize(path), "the array")
        return
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.file_size > 64 << 20 and info.file_size > _MAX_EXPANSION * max(info.compress_size, 1):
                raise _fail(f"cannot read {path}: {info.filename} expands {info.file_size // max(info.compress_size, 1):,} "
                            f"times, to {info.file_size:,} bytes; not loading it (a zip bomb?)")
            with archive.open(info) as f:
                check(f, info.file_size, info.filename)


def _unknown_name(name: str, names: list, fname: str, where: str) -> "_Failure":
    from .diagnostics import did_you_mean

    hint = did_you_mean(name, names)
    listed = ", ".join(names) or "none"
    sep = ", but" if where.endswith("'") else ":"
    return _fail(f"{where}{sep} {fname}() has no parameter named '{name}' (its parameters: {listed})"
                 + (f"; {hint[0]}" if hint else ""))


def _read_given(args, names: list, fname: str, aliases: dict | None = None) -> dict:
    """{parameter name: _Given} from --params, then --inputs, then --input (later ones win)."""
    aliases = aliases or {}
    given: dict = {}

    def put(key: str, value, source: str, where: str) -> None:
        key = aliases.get(key, key)
        if key not in names:
            raise _unknown_name(key, names, fname, where)
        given[key] = _Given(value, source)

    for path in [] if getattr(args, "bind", False) else args.params:  # --bind made them constants
        for key, value in _load_arrays(path, "npz").items():
            put(key, value, path, f"{path} has an array '{key}'")
    for path in args.inputs:
        for key, value in _load_arrays(path, "npz").items():
            put(key, value, path, f"{path} has an array '{key}'")
    for item in args.input:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise _fail(f"--input expects NAME=FILE.npy (e.g. --input x=image.npy), got {item!r}")
        put(name, _load_arrays(path, "npy")[None], path, f"--input {item}")
    return given


def _parse_shapes(items: list) -> dict:
    """{name: value} from --shape n=8 (repeatable, or comma-separated)."""
    values: dict = {}
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, text = part.partition("=")
            name = name.strip()
            text = text.strip()
            if not sep or not name.isidentifier():
                raise _fail(f"--shape expects SYM=N (e.g. --shape n=8), got {part!r}")
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    raise _fail(f"--shape {part}: {text!r} is not a number") from None
            values[name] = value
    return values


def _tir_names(e, out: list) -> list:
    """Names of the variables in a TIR expression, in order of appearance."""
    from . import tir

    if isinstance(e, tir.Var):
        if e.name not in out:
            out.append(e.name)
        return out
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, field, None)
        if isinstance(sub, tir.PrimExpr):
            _tir_names(sub, out)
    return out


def _sinfo_names(sinfo, out: list) -> list:
    """Symbolic names a Relax struct info mentions."""
    from . import relax

    if isinstance(sinfo, relax.TensorStructInfo) and sinfo.shape is not None:
        for d in sinfo.shape:
            _tir_names(d, out)
    elif isinstance(sinfo, relax.ShapeStructInfo) and sinfo.values is not None:
        for d in sinfo.values:
            _tir_names(d, out)
    elif isinstance(sinfo, relax.PrimStructInfo) and sinfo.value is not None:
        _tir_names(sinfo.value, out)
    elif isinstance(sinfo, relax.TupleStructInfo):
        for f in sinfo.fields:
            _sinfo_names(f, out)
    return out


class _Symbols:
    """Values of symbolic dimensions: from --shape first, then from the given inputs."""

    def __init__(self, shapes: dict, known: list, fname: str, float_ok=(), scalars: bool = False) -> None:
        what = "symbolic dimension or scalar parameter" if scalars else "symbolic dimension"
        for name, value in shapes.items():
            if name not in known:
                listed = f"it has: {', '.join(known)}" if known else "it has none"
                raise _fail(f"--shape {name}={value}: {fname}() has no {what} '{name}' ({listed})")
            if isinstance(value, float) and name not in float_ok:
                raise _fail(f"--shape {name}={value}: '{name}' is a dimension, which takes a whole number")
        self.env = dict(shapes)
        self.origin = {name: f"--shape {name}={value}" for name, value in shapes.items()}

    def bind(self, dims, values, what: str) -> None:
        """Bind the plain symbols of ``dims`` to ``values``; other mismatches are the VM's to report."""
        from . import tir

        if dims is None or len(dims) != len(values):
            return
        for d, (e, v) in enumerate(zip(dims, values)):
            if not isinstance(e, tir.Var):
                continue
            v = int(v)
            old = self.env.get(e.name)
            if old is None:
                self.env[e.name] = v
                self.origin[e.name] = f"{what}, dimension {d}"
            elif old != v and self.origin[e.name].startswith("--shape"):
                raise _fail(f"{what} has {e.name} = {v} (dimension {d}), but {self.origin[e.name]}")

    def value(self, e):
        from .compiler.vm_specs import dim_spec
        from .runtime.value_specs import eval_dim

        return eval_dim(dim_spec(e), self.env)


def _is_float_dtype(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _new_array(shape: tuple, dtype: str, fill):
    """``fill(np_dtype)`` for an array of ``shape`` and ``dtype``; a bad shape or dtype is the
    user's error."""
    from .runtime.ndarray import _np_dtype

    try:
        np_dtype = _np_dtype(dtype)
    except TypeError as err:
        raise _fail(str(err)) from None
    if any(d < 0 for d in shape):
        raise _fail(f"cannot make up an array of shape {shape}: a dimension is negative (see --shape)")
    try:
        return fill(np_dtype)
    except (MemoryError, ValueError) as err:  # NumPy: "array is too big" beyond the address space
        raise _fail(f"cannot make up an array of shape {shape} and dtype {dtype}: "
                    f"{'out of memory' if isinstance(err, MemoryError) else 'too big for memory'}") from None


def _zeros(shape: tuple, dtype: str):
    import numpy as np

    return _new_array(shape, dtype, lambda np_dtype: np.zeros(shape, np_dtype))


def _random_array(shape: tuple, dtype: str, rng):
    """Small random values: floats uniform in [-1, 1), ints in [0, 10), bools."""
    import numpy as np

    def fill(np_dtype):
        if dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if _is_float_dtype(dtype):
            return rng.uniform(-1.0, 1.0, size=shape).astype(np_dtype)
        if dtype.startswith(("int", "uint")):
            return rng.integers(0, 10, size=shape).astype(np_dtype)
        raise _fail(f"cannot make up random values of dtype {dtype}")

    return _new_array(shape, dtype, fill)


def _random_value(sinfo, symbols: _Symbols, rng, what: str, param: str):
    """A random value fitting ``sinfo`` (its symbols all bound)."""
    from . import relax
    from .printer import sinfo_text

    def cannot(why: str) -> "_Failure":
        return _fail(f"{what}: cannot make up a random value for it ({why}); "
                     f"give it with --input {param}=FILE.npy or in --inputs/--params")

    if isinstance(sinfo, relax.TensorStructInfo):
        if not sinfo.dtype:
            raise cannot(f"{sinfo_text(sinfo)} has no dtype")
        if sinfo.shape is None:
            raise cannot(f"{sinfo_text(sinfo)} has no shape")
        shape = tuple(int(symbols.value(d)) for d in sinfo.shape)
        return _random_array(shape, sinfo.dtype, rng)
    if isinstance(sinfo, relax.TupleStructInfo):
        return tuple(_random_value(f, symbols, rng, f"{what}[{k}]", param) for k, f in enumerate(sinfo.fields))
    if isinstance(sinfo, relax.ShapeStructInfo):
        if sinfo.values is None:
            raise cannot(f"{sinfo_text(sinfo)} has no values")
        return tuple(int(symbols.value(d)) for d in sinfo.values)
    if isinstance(sinfo, relax.PrimStructInfo):
        if sinfo.value is not None:
            return symbols.value(sinfo.value)
        return _random_array((), sinfo.dtype, rng).item()
    raise cannot(f"{sinfo_text(sinfo) if sinfo is not None else 'no annotation'}")


def _given_value(sinfo, value):
    """A loaded array as the VM expects it for ``sinfo``: arrays for tensors, Python scalars for
    prim values, tuples of ints for shapes."""
    import numpy as np

    from . import relax

    if isinstance(sinfo, relax.PrimStructInfo) and isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(sinfo, relax.ShapeStructInfo) and isinstance(value, np.ndarray) and value.ndim == 1 \
            and value.dtype.kind in "iu":
        return tuple(int(v) for v in value)
    return value


def _missing_symbols_error(missing: dict, fname: str) -> "_Failure":
    """``missing``: symbol -> [(parameter, its annotation, whether an input array can give the
    symbol)]."""
    lines = []
    for name, uses in missing.items():
        users = ", ".join(f"'{p}' {ann}" for p, ann, _ in uses)
        carriers = [p for p, _, array in uses if array]
        how = f"--shape {name}=VALUE"
        if carriers:
            how += f", or an input that has it (--input {carriers[0]}=FILE.npy)"
        lines.append(f"  {name}: used by {users}; pass {how}")
    names = ", ".join(f"'{n}'" for n in missing)
    what = "values for" if len(missing) > 1 else "a value for"
    return _Failure(f"error: {fname}() needs {what} {names}, which no input gives:\n" + "\n".join(lines))


# ----------------------------------------------------------------------------- running


def _run(args) -> int:
    from . import relax

    shapes = _parse_shapes(args.shape)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        if os.path.isdir(args.out):
            raise _fail(f"--out {args.out} is a directory")
        if not os.path.isdir(folder):
            raise _fail(f"--out {args.out}: no such folder {folder}")
    program = _load_program(args.file, check=True)
    target = _check_target(args.target, run_here=not isinstance(program, _LibraryProgram))
    if target.split()[0] == "cuda":
        _require_gpu()
    for path in args.extern:
        _load_extern_file(path)
    program.progress = _CompileProgress().__enter__()
    try:
        program.transform(args, args.func)
        name, func = program.pick(args.func)
        run = _run_relax if isinstance(func, relax.Function) else _run_prim
        outputs, compile_s, times = _interruptible(lambda: run(program, name, func, args, shapes, target),
                                                   args.timeout)
    finally:
        program.progress.close()
    color = not args.no_color and _stream_is_terminal(sys.stdout)
    if isinstance(program, _LibraryProgram):  # nothing compiled: the time to load the library
        _print_outputs(outputs, program.load_s, times, color, "load")
    else:
        _print_outputs(outputs, compile_s, times, color)
    report = getattr(args, "profile_report", None)
    if report is not None:
        print(f"\n{report}")
    elif args.profile:
        print(f"note: --profile times the kernels of a Relax function; '{name}' is a T.prim_func, whose time "
              "is the run's", file=sys.stderr)
    if args.out:
        _save_outputs(args.out, outputs)
    return 0


def _load_extern_file(path: str) -> None:
    """``--extern FILE.py``: run a Python file that registers extern functions
    (``tvms.register_func("env.linear", ...)``), as `runpy` runs a script. An error in it is
    one line naming the place in that file; no Python traceback."""
    import runpy
    import traceback

    if not os.path.isfile(path):
        raise _fail(f"--extern {path}: no such file")
    try:
        runpy.run_path(path, run_name="__tvms_extern__")
    except SyntaxError as err:
        where = f"{err.filename}:{err.lineno}:{err.offset or 1}"
        raise _fail(f"error: --extern {where}: SyntaxError: {err.msg}") from None
    except SystemExit as err:
        raise _fail(f"error: --extern {path} exited ({err.code})") from None
    except BaseException as err:  # noqa: BLE001 - the user's code: report where it failed
        if isinstance(err, KeyboardInterrupt):
            raise
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if os.path.abspath(f.filename) == os.path.abspath(path)]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        raise _fail(f"error: --extern {where}: {type(err).__name__}: {err}") from None


def _interruptible(work, timeout: float | None):
    """``work()``, run so that Ctrl-C and ``--timeout`` stop it promptly even inside a long
    kernel: a kernel is native code that Python's signal handling cannot enter, so the work runs
    in a worker thread while this one waits, and a stop ends the process at once (exit 130 for
    Ctrl-C, 1 for a timeout), with one line saying why."""
    import threading
    import time

    result: dict = {}

    def target() -> None:
        try:
            result["value"] = work()
        except BaseException as err:  # noqa: BLE001 - re-raised in the waiting thread
            result["error"] = err

    worker = threading.Thread(target=target, name="tvms-run", daemon=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        worker.start()
        while worker.is_alive():
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                _stop_now(f"error: tvms run: stopped after --timeout {timeout:g} s", 1)
            worker.join(left)
    except KeyboardInterrupt:
        _stop_now("tvms run: interrupted", 130)
    if "error" in result:
        raise result["error"]
    return result["value"]


def _stop_now(message: str, status: int) -> None:
    """Leave the process at once: a kernel still running in a worker thread cannot be stopped
    any other way."""
    sys.stdout.flush()
    print(message, file=sys.stderr, flush=True)
    os._exit(status)


def _require_gpu() -> None:
    """One line saying what is missing (pycuda, a GPU) and exit 1, before any work."""
    from .runtime.cuda import unavailable_reason

    reason = unavailable_reason(0)
    if reason is not None:
        raise _fail(f"--target cuda: {reason}")


def _on_device(values: list, target: str):
    """(device, values): with a CUDA target, NumPy inputs are copied to GPU 0."""
    if target.split()[0] != "cuda":
        return None, values
    import numpy as np

    from .runtime import devices, ndarray

    dev = devices.cuda(0)
    return dev, [ndarray.array(v, dev) if isinstance(v, np.ndarray) else v for v in values]


def _announce_random(random_names: list, zeroed: list, seed: int) -> None:
    if random_names:
        print(f"note: random inputs for {', '.join(random_names)} (seed {seed}); give them with --inputs, "
              "--input or --params", file=sys.stderr)
    if zeroed:
        print(f"note: zero-filled outputs {', '.join(zeroed)}", file=sys.stderr)


def _run_relax(program: _Program, name: str, func, args, shapes: dict, target: str):
    import time

    import numpy as np

    from .printer import sinfo_text
    from .runtime.vm import VirtualMachine

    params = [p.name_hint for p in func.params]
    sinfos = [p.struct_info for p in func.params]
    known = []
    for s in sinfos:
        _sinfo_names(s, known)
    symbols = _Symbols(shapes, known, name)
    given = _read_given(args, params, name)

    t0 = time.perf_counter()
    ex = _compile(program, program.module(), target, args.bounds_check)
    compile_s = time.perf_counter() - t0
    _check_externs(program, name, ex)

    # Bind the symbolic dims the given inputs fix, then make up the rest.
    values: list = [None] * len(params)
    for i, (pname, sinfo) in enumerate(zip(params, sinfos)):
        if pname in given:
            values[i] = _given_value(sinfo, given[pname].value)
            _bind_from(symbols, sinfo, values[i], f"input '{pname}' (from {given[pname].source})")
    missing: dict = {}
    for pname, sinfo in zip(params, sinfos):
        if pname in given:
            continue
        for sym in _sinfo_names(sinfo, []):
            if sym not in symbols.env:
                missing.setdefault(sym, []).append((pname, sinfo_text(sinfo), True))
    if missing:
        raise _missing_symbols_error(missing, name)
    rng = np.random.default_rng(args.seed)
    random_names = []
    for i, (pname, sinfo) in enumerate(zip(params, sinfos)):
        if pname not in given:
            values[i] = _random_value(sinfo, symbols, rng, f"{name}() parameter '{pname}'", pname)
            random_names.append(pname)
    _announce_random(random_names, [], args.seed)

    dev, values = _on_device(values, target)
    vm = VirtualMachine(ex, dev) if dev is not None else VirtualMachine(ex)
    f = vm[name]
    sources = {p: g.source for p, g in given.items()}
    call = (lambda: f(*values)) if dev is None else (lambda: _synced(f(*values), dev))
    result, first, times = _timed(program, call, args.repeat, sources)
    if args.profile:
        args.profile_report = vm.profile(name, *values, repeat=args.repeat)
    return _name_outputs(result, func.ret_struct_info), compile_s, (first, times)


def _synced(result, dev):
    """``result`` once the GPU has finished computing it (so timings are the GPU's)."""
    dev.sync()
    return result


def _bind_from(symbols: _Symbols, sinfo, value, what: str) -> None:
    import numpy as np

    from . import relax

    if isinstance(sinfo, relax.TensorStructInfo) and hasattr(value, "shape"):
        symbols.bind(sinfo.shape, tuple(value.shape), what)
    elif isinstance(sinfo, relax.ShapeStructInfo) and isinstance(value, tuple):
        symbols.bind(sinfo.values, value, what)
    elif isinstance(sinfo, relax.PrimStructInfo) and sinfo.value is not None \
            and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        symbols.bind([sinfo.value], (value,), what)


def _timed(program: _Program, call, repeat: int, sources: dict):
    """Call once (the outputs; it also warms up), then ``repeat`` timed times; returns (the
    first result, seconds of the first call, seconds of each timed call). Errors the call
    raises for bad arguments (the VM's and the kernels' checks) are the user's: one placed in
    the program (`runtime.sites`) is a diagnostic there."""
    import re
    import time

    from .diagnostics import TVMScriptError
    from .runtime.kernel import KernelAssertionError
    from .runtime.vm import CallDepthError

    times = []
    try:
        t0 = time.perf_counter()
        result = call()
        first = time.perf_counter() - t0
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    except (TypeError, ValueError, TVMScriptError, KernelAssertionError, CallDepthError) as err:
        if _debugging():
            raise
        placed = isinstance(err, TVMScriptError) and err.span is not None
        message = err.message if placed else str(err)
        m = re.search(r"argument '([^']+)'|parameter '([^']+)'", message)
        param = m and (m.group(1) or m.group(2))
        if param in sources:
            message += f" ({param} was read from {sources[param]})"
        if placed:
            err.message = message
            raise program.report(err) from None
        raise _fail(message) from None
    return result, first, times


def _name_outputs(result, sinfo) -> list:
    """[(name, NumPy array)]: ``output`` for one value, ``output_0``, ``output_1``, ... for a
    tuple (``output_1_0`` inside a nested one)."""
    import numpy as np

    from . import relax

    out: list = []

    def add(value, s, name: str) -> None:
        if isinstance(s, relax.ShapeStructInfo) or (
            isinstance(value, tuple) and value and all(isinstance(v, int) for v in value)
            and not isinstance(s, relax.TupleStructInfo)
        ):
            out.append((name, np.asarray(value, dtype=np.int64)))
        elif isinstance(value, (tuple, list)):
            fields = s.fields if isinstance(s, relax.TupleStructInfo) else [None] * len(value)
            for k, (v, fs) in enumerate(zip(value, fields)):
                add(v, fs, f"{name}_{k}")
        elif hasattr(value, "numpy"):
            out.append((name, value.numpy()))
        else:
            out.append((name, np.asarray(value)))

    add(result, sinfo, "output")
    return out


def _check_externs(program: _Program, name: str, ex) -> None:
    """A call of an extern function that nobody registered (the CLI registers none) is an
    error before the run, pointing at the call. Looks at ``name`` and the Relax functions it
    calls."""
    from . import ir, relax
    from .diagnostics import TVMScriptError
    from .runtime.registry import REGISTRY

    skipped = ("struct_info", "ret_struct_info", "sinfo_args", "span", "comments", "attrs", "params")
    mod = program.module()
    seen: set = set()
    todo = [name]

    def visit(x, fname: str) -> None:
        if isinstance(x, relax.Call):
            for callee in [x.op, *x.args[:1]]:
                if isinstance(callee, relax.ExternFunc) and callee.global_symbol not in ex.kernels \
                        and callee.global_symbol not in REGISTRY:
                    raise program.report(TVMScriptError(
                        f"'{callee.global_symbol}' is an extern function, and none is registered in tvms run "
                        f"(called in function '{fname}')", x.span,
                        notes=["extern functions are registered from Python with tvms.register_func: put "
                               "the registrations in a file and pass it with --extern FILE.py"]))
            if isinstance(x.op, ir.GlobalVar):
                todo.append(x.op.name_hint)
        if isinstance(x, (list, tuple)):
            for y in x:
                visit(y, fname)
        elif isinstance(x, (relax.Expr, relax.Binding, relax.BindingBlock)):
            for field in type(x).__dataclass_fields__:
                if field not in skipped:
                    visit(getattr(x, field, None), fname)

    while todo:
        fname = todo.pop()
        if fname in seen:
            continue
        seen.add(fname)
        func = mod[fname] if fname in mod else None
        if isinstance(func, relax.Function):
            visit(func.body, fname)


def _run_prim(program: _Program, name: str, func, args, shapes: dict, target: str):
    """A prim_func, called destination-passing: every buffer not given is made up, zero-filled
    when the kernel writes it (an output), random when it only reads it; the buffers it
    writes are the outputs."""
    import time

    import numpy as np

    from . import ir

    params = [v.name for v in func.params]
    buffers = {v.name: func.buffer_map.get(v) for v in func.params}
    aliases = {b.name: v for v, b in buffers.items() if b is not None and b.name not in buffers}
    scalars = [v for v in func.params if buffers[v.name] is None]
    known = []
    for b in buffers.values():
        if b is not None:
            for d in b.shape:
                _tir_names(d, known)
    for v in scalars:
        if v.name not in known:
            known.append(v.name)
    floats = {v.name for v in scalars if _is_float_dtype(v.dtype)}
    symbols = _Symbols(shapes, known, name, floats, scalars=bool(scalars))
    given = _read_given(args, params, name, aliases)

    t0 = time.perf_counter()
    ex = _compile(program, ir.IRModule({name: func}), target, args.bounds_check)
    compile_s = time.perf_counter() - t0
    kernel = ex.kernels[name] if name in ex.kernels else next(iter(ex.kernels.values()))
    written = {p.name for p in kernel.params if p.kind == "buffer" and p.written}

    for v in func.params:
        g = given.get(v.name)
        b = buffers[v.name]
        if g is None:
            continue
        if b is not None and hasattr(g.value, "shape"):
            symbols.bind(b.shape, tuple(g.value.shape), f"input '{v.name}' (from {g.source})")
        elif b is None and getattr(g.value, "ndim", None) == 0 and not _is_float_dtype(v.dtype):
            symbols.bind([v], (g.value.item(),), f"input '{v.name}' (from {g.source})")
    missing: dict = {}
    for v in func.params:
        b = buffers[v.name]
        if v.name in given:
            continue
        if b is None:
            if v.name not in symbols.env:
                missing.setdefault(v.name, []).append((v.name, f"(a {v.dtype} scalar parameter)", False))
            continue
        for sym in [n for d in b.shape for n in _tir_names(d, [])]:
            if sym not in symbols.env:
                dims = ", ".join(_dim_str(d) for d in b.shape) + ("," if len(b.shape) == 1 else "")
                missing.setdefault(sym, []).append((v.name, f'T.Buffer(({dims}), "{b.dtype}")', True))
    if missing:
        raise _missing_symbols_error(missing, name)

    rng = np.random.default_rng(args.seed)
    values: list = []
    random_names, zeroed = [], []
    for v in func.params:
        b = buffers[v.name]
        g = given.get(v.name)
        if b is None:
            value = g.value.item() if g is not None and getattr(g.value, "ndim", None) == 0 else \
                (g.value if g is not None else symbols.env[v.name])
            values.append(float(value) if _is_float_dtype(v.dtype) else value)
            continue
        if g is not None:
            values.append(np.ascontiguousarray(g.value) if isinstance(g.value, np.ndarray) else g.value)
            continue
        shape = tuple(int(symbols.value(d)) for d in b.shape)
        if v.name in written:
            values.append(_zeros(shape, b.dtype))
            zeroed.append(v.name)
        else:
            values.append(_random_array(shape, b.dtype, rng))
            random_names.append(v.name)
    _announce_random(random_names, zeroed, args.seed)

    out_index = [i for i, v in enumerate(func.params) if v.name in written] or \
        [i for i, v in enumerate(func.params) if buffers[v.name] is not None]
    pristine = {i: np.array(values[i], copy=True) for i in out_index if isinstance(values[i], np.ndarray)}
    runs = [0]

    dev, dev_values = _on_device(values, target)
    if dev is not None:
        kernel = ex[name]  # the kernel loaded on the GPU

    def call():
        if runs[0]:  # every run starts from the same buffers, so in-place kernels repeat
            for i, saved in pristine.items():
                if dev is None:
                    np.copyto(values[i], saved)
                else:
                    dev_values[i].copyfrom(saved)
        runs[0] += 1
        kernel(*dev_values)
        if dev is not None:
            dev.sync()

    sources = {p: g.source for p, g in given.items()}
    _, first, times = _timed(program, call, args.repeat, sources)
    outputs = [(params[i], np.asarray(values[i]) if dev is None else dev_values[i].numpy()) for i in out_index]
    return outputs, compile_s, (first, times)


def _dim_str(d) -> str:
    from . import tir

    if isinstance(d, tir.IntImm):
        return str(d.value)
    if isinstance(d, tir.Var):
        return d.name
    from .compiler.vm_specs import dim_text

    return dim_text(d)


# ----------------------------------------------------------------------------- printing


def _value_view(a) -> str:
    """A short one-line numpy-style view of an array's values."""
    import numpy as np

    a = np.asarray(a)
    shown = a if a.size <= 6 else a.ravel()
    try:
        text = np.array2string(shown, threshold=6, edgeitems=3, precision=4, separator=", ",
                               max_line_width=1 << 20, suppress_small=True)
    except Exception:  # an exotic dtype NumPy cannot format
        text = repr(shown.tolist()[:6])
    return " ".join(line.strip() for line in text.splitlines())


def _fmt_seconds(seconds: float) -> str:
    ms = seconds * 1000.0
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def _print_outputs(outputs: list, compile_s: float, timing: tuple, color: bool, prepared: str = "compile") -> None:
    rows = [(n, "(" + ", ".join(map(str, a.shape)) + ("," if a.ndim == 1 else "") + ")", str(a.dtype),
             _value_view(a)) for n, a in outputs]
    first, times = timing
    ordered = sorted(times)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    timing = [f"{prepared}: {_fmt_seconds(compile_s)}",
              f"run: median {_fmt_seconds(median)} over {n} run{'s' if n != 1 else ''} "
              f"(min {_fmt_seconds(ordered[0])}; first call {_fmt_seconds(first)})"]
    header = ("output", "shape", "dtype", "values")
    if color:
        from rich.console import Console
        from rich.table import Table

        table = Table(*header, header_style="bold")
        for row in rows:
            table.add_row(*row)
        console = Console(file=sys.stdout, highlight=False)
        if rows:
            console.print(table)
        else:
            console.print("(no outputs)")
        for line in timing:
            label, _, rest = line.partition(": ")
            console.print(f"[bold]{label}:[/bold] {rest}", markup=True)
        return
    lines = []
    if rows:
        widths = [max(len(r[k]) for r in [header, *rows]) for k in range(3)]
        for r in [header, *rows]:
            lines.append("  ".join(r[k].ljust(widths[k]) for k in range(3)) + "  " + r[3])
    else:
        lines.append("(no outputs)")
    sys.stdout.write("\n".join(lines + timing) + "\n")


def _save_outputs(path: str, outputs: list) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{n: a for n, a in outputs})
    try:
        _write_new_atomically(path, buffer.getvalue())
    except OSError as err:
        raise _fail(f"cannot write {path}: {err.strerror or err}") from None


def _write_new_atomically(path: str, data: bytes, before_replace=None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, so a
    crash or a full disk never leaves the file half-written. An existing file keeps its
    permissions (a new one gets the default ones); through a symlink, the target is rewritten
    and the link kept."""
    if os.path.isdir(path):
        raise IsADirectoryError(21, "it is a directory", path)
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".tvms-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if before_replace is not None:
            before_replace()  # the last moment to refuse (see `_reformat_file`)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- compile


def _compile_command(args) -> int:
    if args.emit is None:
        args.emit = "library" if (args.output or "").endswith(".so") else "llvm"
    if args.emit == "library" and not args.output:
        raise _fail("--emit library writes a shared library: name it with -o FILE.so")
    program = _load_program(args.file)
    target_text = args.target
    if args.arch:
        if not re.fullmatch(r"sm_\d+[a-z]?", args.arch):
            raise _fail(f"--arch {args.arch}: expected a CUDA architecture such as sm_90")
        target_text = f"{target_text} -arch={args.arch}"
    target = _check_target(target_text)
    gpu = target.split()[0] == "cuda"
    if args.arch and not gpu:
        raise _fail("--arch goes with --target cuda")
    program.progress = _CompileProgress().__enter__()
    try:
        return _compile_and_write(args, program, target, gpu)
    finally:
        program.progress.close()


def _compile_and_write(args, program: _Program, target: str, gpu: bool) -> int:
    from . import ir, tir

    if gpu and args.emit not in _GPU_EMIT_KINDS + ("python",):
        raise _fail(f"--target cuda emits CUDA C (--emit cuda), PTX (--emit ptx) or the VM's code (--emit python), "
                    f"not {args.emit}")
    if not gpu and args.emit in _GPU_EMIT_KINDS:
        raise _fail(f"--emit {args.emit} needs --target cuda")
    program.transform(args, args.func)
    mod = program.module()
    only = None
    if args.func:
        only, func = program.pick(args.func)
        if isinstance(func, tir.PrimFunc):
            if args.emit == "python":
                raise _fail(f"'{only}' is a T.prim_func: --emit python shows the code of Relax functions; "
                            "use --emit llvm or asm for a prim_func")
            mod = ir.IRModule({only: func})
        elif args.emit != "python":
            raise _fail(f"'{only}' is a Relax function: --emit {args.emit} shows the prim_funcs' code; "
                        "use --emit python, or give --func a prim_func")
    if args.emit == "library":
        if only is not None:
            raise _fail("--emit library writes the whole module; leave out --func")
        return _export(program, _compile(program, mod, target, args.bounds_check), args.output)
    if gpu and args.emit in _GPU_EMIT_KINDS:
        text = _cuda_text(program, mod, target, args.emit)
    elif args.emit == "python":
        ex = _compile(program, mod, target, args.bounds_check)
        if only is not None:
            text = ex.functions[only].source
        elif not ex.functions:
            raise _fail(f"{program.path} has no Relax function: nothing for --emit python")
        else:
            text = ex.as_python()
    else:
        ex = _compile(program, mod, target, args.bounds_check)
        if not ex.kernels:
            raise _fail(f"{program.path} has no T.prim_func: nothing to compile to {args.emit}")
        text = next(iter(ex.kernels.values())).module.get_source(args.emit)  # one CPUModule holds them all
    if not text.endswith("\n"):
        text += "\n"
    if args.output:
        try:
            _write_new_atomically(args.output, text.encode("utf-8"))
        except OSError as err:
            raise _fail(f"cannot write {args.output}: {err.strerror or err}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _export(program: _Program, ex, output: str) -> int:
    from .runtime.library import LibraryError

    try:
        ex.export_library(output)
    except LibraryError as err:
        raise _fail(str(err)) from None
    except OSError as err:
        raise _fail(f"cannot write {output}: {err.strerror or err}") from None
    size = os.path.getsize(output)
    print(f"wrote {output} ({len(ex.kernels)} kernels, {len(ex.functions)} Relax functions, "
          f"{size / 1024:.0f} KiB); run it with `tvms run {output}`", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
