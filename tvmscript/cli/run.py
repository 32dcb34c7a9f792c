"""``tvms run``: compile a file for the CPU (or load a library `tvms compile` wrote), call one of
its functions with the inputs given or made up, and print its outputs and times.

The call runs in a worker thread, so that Ctrl-C and ``--timeout`` stop even a long kernel;
calling a Relax function and a prim_func are in `relax_call` and `prim_call`.
"""

from __future__ import annotations

import os
import sys

from .calls import CallOptions
from .inputs import GivenFiles
from .options import (add_bounds_check_argument, add_pipeline_arguments, add_tuned_argument, file_name, natural_int,
                      pipeline_options, positive_int, positive_seconds)
from .outputs import print_outputs, save_outputs
from .prim_call import call_prim
from .program import LibraryProgram, check_target, load_program
from .progress import CompileProgress
from .relax_call import call_relax
from .reporting import fail, stream_is_terminal
from .symbols import parse_shapes
from .writing import write_new_atomically


def register(sub) -> None:
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
    run.add_argument("--seed", type=natural_int, default=0, metavar="N",
                     help="seed of the random inputs (default 0)")
    run.add_argument("--extern", action="append", default=[], metavar="FILE.py",
                     help="run this Python file first, to register the extern functions the module calls "
                     "(tvms.register_func); repeatable. It executes that file's code")
    run.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                     help="stop the run (exit 1) if it has not finished after SECONDS")
    run.add_argument("--profile", action="store_true",
                     help="also time each kernel the function calls (over --repeat calls) and print a table: "
                     "calls, total and mean time, share of the call, heaviest first")
    run.add_argument("--trace", metavar="FILE.json", type=file_name, default=None,
                     help="with --profile (implied), write every kernel, allocation and call as a Chrome trace "
                     "that Perfetto (ui.perfetto.dev) and chrome://tracing open")
    run.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                     help="after a first call, time N calls and report the median (default 1)")
    run.add_argument("--out", metavar="FILE.npz", type=file_name,
                     help="save the outputs: output, or output_0, output_1, ...")
    run.add_argument("--target", default="llvm", help="compilation target (default: llvm, the host CPU)")
    add_bounds_check_argument(run)
    run.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    add_pipeline_arguments(run, default="zero", params=False)
    add_tuned_argument(run)
    run.set_defaults(handler=run_command)


def run_command(args) -> int:
    from .. import relax

    shapes = parse_shapes(args.shape)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        if os.path.isdir(args.out):
            raise fail(f"--out {args.out} is a directory")
        if not os.path.isdir(folder):
            raise fail(f"--out {args.out}: no such folder {folder}")
    program = load_program(args.file, check=True)
    library = isinstance(program, LibraryProgram)
    target = check_target(args.target, run_here=not library)
    if target.split()[0] == "cuda":
        _require_gpu()
    for path in args.extern:
        _load_extern_file(path)
    options = CallOptions(GivenFiles(() if args.bind else tuple(args.params), tuple(args.inputs), tuple(args.input)),
                          shapes, target, args.seed, args.repeat, args.bounds_check, args.profile or bool(args.trace))
    program.progress = CompileProgress().__enter__()
    try:
        program.transform(pipeline_options(args, params_are_inputs=True), args.func, args.target)
        program.apply_tuning(args.tuned, target)
        name, func = program.pick(args.func)
        call = call_relax if isinstance(func, relax.Function) else call_prim
        result = _interruptible(lambda: call(program, name, func, options), args.timeout)
    finally:
        program.progress.close()
    color = not args.no_color and stream_is_terminal(sys.stdout)
    if library:  # nothing compiled: the time to load the library
        print_outputs(result, "load", program.load_s, color)
    else:
        print_outputs(result, "compile", result.compile_s, color)
    if result.profile is not None:
        print(f"\n{result.profile}")
        if args.trace:
            import json

            write_new_atomically(args.trace, json.dumps(result.profile.chrome_trace()).encode())
            print(f"wrote the trace to {args.trace} (open it in ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
    elif args.profile or args.trace:
        print(f"note: --profile times the kernels of a Relax function; '{name}' is a T.prim_func, whose time "
              "is the run's", file=sys.stderr)
    if args.out:
        save_outputs(args.out, result.outputs)
    return 0


def _load_extern_file(path: str) -> None:
    """``--extern FILE.py``: run a Python file that registers extern functions
    (``tvms.register_func("env.linear", ...)``), as `runpy` runs a script. An error in it is
    one line naming the place in that file; no Python traceback."""
    import runpy
    import traceback

    if not os.path.isfile(path):
        raise fail(f"--extern {path}: no such file")
    try:
        runpy.run_path(path, run_name="__tvms_extern__")
    except SyntaxError as err:
        where = f"{err.filename}:{err.lineno}:{err.offset or 1}"
        raise fail(f"error: --extern {where}: SyntaxError: {err.msg}") from None
    except SystemExit as err:
        raise fail(f"error: --extern {path} exited ({err.code})") from None
    except BaseException as err:  # noqa: BLE001 - the user's code: report where it failed
        if isinstance(err, KeyboardInterrupt):
            raise
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if os.path.abspath(f.filename) == os.path.abspath(path)]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        raise fail(f"error: --extern {where}: {type(err).__name__}: {err}") from None


def _require_gpu() -> None:
    """One line saying what is missing (pycuda, a GPU) and exit 1, before any work. Then the
    GPU's context is opened here, on the main thread, not in the worker thread the call runs in
    (`_interruptible`): pycuda frees a context's modules, streams and memory at exit only from
    the thread that opened it, and otherwise warns "... in out-of-thread context could not be
    cleaned up" for each of them."""
    from ..runtime.cuda import runtime, unavailable_reason
    from ..runtime.devices import cuda

    reason = unavailable_reason(0)
    if reason is not None:
        raise fail(f"--target cuda: {reason}")
    runtime(cuda(0))


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
