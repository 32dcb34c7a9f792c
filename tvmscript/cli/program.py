"""The program `tvms run`, `tvms compile` and `tvms show --pipeline` work on: a parsed ``.tvms``
file (`Program`) or a shared library `tvms compile -o FILE.so` wrote (`LibraryProgram`), with
what they do to it in turn: transform it (``--bind``, ``--pipeline``, the GPU schedules), pick
the function asked for, compile it. Every failure is a `Failure`, placed in the file's text
when the error has a place there.
"""

from __future__ import annotations

import sys

from .inputs import load_arrays, unknown_name
from .options import PipelineOptions
from .reporting import Failure, debugging, fail, stream_is_terminal
from .sources import parse, parse_checked


class Program:
    """The parsed file and the function chosen to run."""

    def __init__(self, node, text: str, path: str) -> None:
        self.node = node
        self.text = text
        self.path = path
        self.progress = None  # a CompileProgress, shown from the pipeline to the end of `compile`
        self.legalized = False  # whether --pipeline ran LegalizeOps (`transform`)

    def module(self):
        from .. import ir, relax, tir

        node = self.node
        if isinstance(node, ir.IRModule):
            return node
        if isinstance(node, relax.Function):
            return ir.IRModule({"main": node})
        if isinstance(node, tir.PrimFunc):
            return ir.IRModule({prim_name(node): node})
        raise fail(f"{self.path} holds no function to compile")

    def pick(self, name: str | None):
        """(name, function) of the function to run: --func, else ``main``, else the only one."""
        from .. import relax, tir

        mod = self.module()
        funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, (relax.Function, tir.PrimFunc))}
        if not funcs:
            raise fail(f"{self.path} holds no function to run")
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
                    raise fail(f"{self.path} has no function named 'main': pick one with --func "
                               f"(the module has: {', '.join(funcs)})")
        elif name not in funcs:
            from ..diagnostics import did_you_mean

            hint = did_you_mean(name, funcs)
            raise fail(f"no function named '{name}' (the module has: {', '.join(funcs)})"
                       + (f"; {hint[0]}" if hint else ""))
        return name, funcs[name]

    def report(self, err) -> Failure:
        """The failure for a `TVMScriptError`: rendered at its place in the file."""
        color = stream_is_terminal(sys.stderr)
        return Failure(err.render(self.text, color=color))

    def transform(self, options: PipelineOptions, func_name: str | None, target: str = "llvm") -> None:
        """Apply ``--bind`` (the ``--params`` arrays into ``func_name``) and ``--pipeline``;
        the transformed module replaces the parsed one. (``target``: what the command compiles
        for, which only a `LibraryProgram` has a say about.)"""
        from ..compiler import transform as T
        from ..diagnostics import TVMScriptError

        if options.bind and not options.params:
            raise fail("--bind needs the arrays to bind: give them with --params FILE.npz")
        if options.params and not options.bind and not options.params_are_inputs:
            raise fail("--params is used with --bind (it binds the arrays into the function as constants)")
        mod = self.module()
        try:
            if options.bind:
                mod = self._bind(mod, options.params, func_name)
                if options.pipeline == "zero":
                    # Bound weights mean inference: batch norms fold into the convolution before
                    # them or become arithmetic FoldConstant folds (docs/commands.md).
                    mod = T.bound_inference_passes(func_name or "main", target)(mod)
            if options.pipeline == "legalize":
                mod = T.LegalizeOps()(mod)
            elif options.pipeline == "zero":
                mod = T.get_pipeline("zero")(mod)
            self.legalized = options.pipeline in ("legalize", "zero")
        except TVMScriptError as err:
            raise self.report(err) from None
        except (ValueError, TypeError, NotImplementedError) as err:
            if debugging():
                raise
            raise fail(f"cannot transform {self.path}: {err}") from None
        self.node = mod

    def apply_tuning(self, work_dir: str | None, target: str) -> None:
        """``--tuned DIR``: each kernel the tuning database in DIR has a record of for ``target``
        gets the best tuned schedule (`compiler.meta_schedule.apply`). Says on stderr how many
        did, and as warnings what of the database was dropped as invalid, so that a database
        that matches nothing is not taken for one that made no difference."""
        if work_dir is None:
            return
        import os
        import warnings

        from .. import tir
        from ..compiler.build import kernels_as_built
        from ..compiler.build_target import target_name_of
        from ..compiler.meta_schedule.apply import apply_database
        from ..compiler.meta_schedule.database import DatabaseWarning, JSONDatabase

        if not os.path.isdir(work_dir):
            raise fail(f"--tuned {work_dir}: no such folder")
        # The kernels as the build compiles them, the form `tvms tune` tuned (`kernels_as_built`).
        mod = kernels_as_built(self.module(), target_name_of(target), relax_pipeline=None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DatabaseWarning)
            try:
                database = JSONDatabase(work_dir, allow_missing=False)
                tuned = apply_database(mod, database, target)
            except FileNotFoundError:
                raise fail(f"--tuned {work_dir}: no tuning database there (it holds database_workload.json and "
                           "database_tuning_record.json)") from None
            except OSError as err:
                raise fail(f"--tuned {work_dir}: cannot read it: {err.strerror or err}") from None
        _show_warnings(caught, DatabaseWarning)
        kernels = [gv for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)]
        names = [gv.name_hint for gv in kernels if tuned[gv] is not mod[gv]]
        held = sum(database.has_workload(mod[gv]) for gv in kernels)
        hint = "" if held == len(kernels) else \
            "; it holds none of this module's kernels (tune the file with the --pipeline it is compiled with)" \
            if not held else f"; it holds {held} of them (the others were not tuned)"
        print(f"note: --tuned {work_dir}: tuned schedules for {len(names)} of {len(kernels)} kernels"
              + (f" ({', '.join(names)})" if names else "") + f" on {target}{hint}", file=sys.stderr)
        self.node = tuned

    def gpu_schedule(self, target_text: str) -> None:
        """Apply DLight's default GPU schedules for ``target_text`` (a CUDA target) to every
        PrimFunc without thread bindings; a CPU target leaves the module as it is."""
        from ..target import Target

        check_target(target_text)
        target = Target(target_text)
        if target.kind.name != "cuda":
            return
        from ..compiler.build_cuda import default_gpu_schedule
        from ..compiler.schedule import ScheduleError

        mod = self.module()
        try:
            mod = default_gpu_schedule(mod, target)
        except ScheduleError as err:
            if debugging():
                raise
            raise fail(f"cannot schedule {self.path} for {target}: {err}") from None
        self.node = mod

    def compile(self, mod, target: str, bounds_check: bool = True):
        """The executable for ``mod`` (a module of this program, transformed already); a build
        error is rendered at its place in the file."""
        from ..compiler.build import NotLoweredError
        from ..diagnostics import TVMScriptError
        from ..relax_api import compile as tvms_compile

        try:
            # --pipeline ran already
            return tvms_compile(mod, target=target, relax_pipeline=None, bounds_check=bounds_check)
        except NotLoweredError as err:
            if not err.notes and not self.legalized:
                err.notes = ["--pipeline none compiles the module as written; the default, --pipeline zero, "
                             "legalizes high-level ops first"]
            raise self.report(err) from None
        except TVMScriptError as err:
            raise self.report(err) from None
        except (NotImplementedError, ValueError, TypeError) as err:
            if debugging():
                raise
            raise fail(f"cannot compile {self.path}: {err}") from None
        finally:
            if self.progress is not None:  # the compile is over: the run's time is not compiling
                self.progress.close()

    def _bind(self, mod, paths: tuple, func_name: str | None):
        from .. import relax
        from ..compiler.transform import BindParams

        name = func_name or "main"
        if name not in mod or not isinstance(mod[name], relax.Function):
            raise fail(f"--bind binds parameters of a Relax function; {self.path} has no Relax function '{name}'")
        names = [p.name_hint for p in mod[name].params]
        arrays: dict = {}
        for path in paths:
            for key, value in load_arrays(path, "npz").items():
                if key not in names:
                    raise unknown_name(key, names, name, f"{path} has an array '{key}'")
                arrays[key] = value
        try:
            return BindParams(name, arrays)(mod)
        except ValueError as err:
            raise fail(str(err).replace("BindParams: ", f"--bind {', '.join(paths)}: ")) from None


class LibraryProgram(Program):
    """A shared library ``export_library`` wrote (``tvms run model.so``): its executable runs
    as it was built, with no parsing, pipeline or compiling."""

    def __init__(self, path: str) -> None:
        import time

        from ..runtime.library import LibraryError, load_module

        t0 = time.perf_counter()
        try:
            self.executable = load_module(path)
            self.load_s = time.perf_counter() - t0
        except LibraryError as err:
            raise fail(str(err)) from None
        if self.executable.mod is None:
            raise fail(f"{path} holds no Relax signatures to run it by (its module could not be saved when it "
                       "was exported): load it from Python with tvms.runtime.load_module")
        super().__init__(self.executable.mod, "", path)

    def transform(self, options: PipelineOptions, func_name: str | None, target: str = "llvm") -> None:
        if options.bind:
            raise fail(f"{self.path} is compiled: --bind applies to a .tvms file (pass the arrays with --params)")
        if target != "llvm":
            raise fail(f"{self.path} is compiled (for {self.executable.target}): --target applies to a .tvms file")

    def apply_tuning(self, work_dir: str | None, target: str) -> None:
        if work_dir is not None:
            raise fail(f"{self.path} is compiled: --tuned applies to a .tvms file")

    def compile(self, mod, target: str, bounds_check: bool = True):
        return self.executable

    def report(self, err) -> Failure:
        if err.span is not None:  # a place in the .tvms file it was built from (not at hand to show)
            return Failure(err.render(None, color=stream_is_terminal(sys.stderr)))
        return Failure(f"error: {self.path}: {err.message}")


def _show_warnings(caught: list, category) -> None:
    """The ``category`` warnings of ``caught`` as ``warning:`` lines on stderr, as the command's
    other messages are; any other warning as Python shows it."""
    import warnings

    for w in caught:
        if issubclass(w.category, category):
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def load_program(path: str, check: bool = False) -> Program:
    """The program in ``path`` (a .tvms file, or a library `tvms compile` wrote); ``check``:
    what `tvms check` finds in the file stops it here, reported as check reports it."""
    if path != "-" and _is_shared_library(path):
        return LibraryProgram(path)
    parsed = parse_checked(path) if check else parse(path)
    return Program(parsed.node, parsed.text, "<stdin>" if path == "-" else path)


def check_target(target: str, run_here: bool = False) -> str:
    """The target's name, once tvms accepts every option of it (`compiler.build_target.checked_target`);
    ``run_here``: also a CPU this machine can run the code of."""
    from ..compiler.build_target import target_name_of

    try:
        name = target_name_of(target)
    except (NotImplementedError, ValueError) as err:
        raise fail(f"--target: {err}") from None
    if run_here and name.split()[0] != "cuda":
        from ..compiler.llvm_target import unrunnable_here
        from ..target import Target

        reason = unrunnable_here(Target(target))
        if reason:
            raise fail(f"--target: tvms run runs the kernels on this machine, but {reason}; leave "
                       f"-mcpu/-mattr out, or compile a library to run there: tvms compile FILE --target "
                       f"\"{target}\" -o model.so")
    return name


def prim_name(func) -> str:
    """The name a lone prim_func goes by in its module: its global_symbol, else ``main``."""
    attrs = func.attrs if isinstance(func.attrs, dict) else {}
    return attrs.get("global_symbol") or "main"


def _is_shared_library(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False
