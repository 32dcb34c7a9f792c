"""``tvms compile``: the code tvms generates for a file (LLVM IR, assembly, CUDA C, PTX, the
VM's Python), or the whole compiled module as a shared library (``-o FILE.so``) that
`tvms run FILE.so` and tvms.runtime.load_module run without compiling; or, with ``--stats``,
what each CUDA kernel uses of the GPU (`kernel_stats`)."""

from __future__ import annotations

import os
import re
import sys

from .options import (add_bounds_check_argument, add_pipeline_arguments, add_tuned_argument, file_name,
                      pipeline_options)
from .program import Program, check_target, load_program
from .progress import CompileProgress
from .reporting import fail
from .writing import write_new_atomically

EMIT_KINDS = ("llvm", "llvm-unopt", "asm", "python", "cuda", "ptx", "library")
_GPU_EMIT_KINDS = ("cuda", "ptx")


def register(sub) -> None:
    comp = sub.add_parser(
        "compile", help="print the code tvms generates for a .tvms file, or write a shared library (-o FILE.so)",
        description="Compile a .tvms file and print the generated code: the LLVM IR (optimized, or as "
        "generated with llvm-unopt) or the host assembly of its prim_funcs, or the Python the VM runs for "
        "its Relax functions; or, with -o FILE.so, write the compiled module as a shared library that "
        "`tvms run FILE.so` and tvms.runtime.load_module run without compiling.",
    )
    comp.add_argument("file", help="a .tvms file, or - for standard input")
    comp.add_argument("--emit", choices=EMIT_KINDS, default=None,
                      help="what to write (default: llvm; library when -o names a .so file: the kernels and the "
                      "VM's program as a shared library for `tvms run FILE.so` and tvms.runtime.load_module)")
    comp.add_argument("-o", "--output", metavar="FILE", type=file_name,
                      help="write to FILE instead of standard output")
    comp.add_argument("--func", help="only this function (a prim_func; a Relax function for --emit python)")
    comp.add_argument("--target", default="llvm", help="compilation target (default: llvm, the host CPU; cuda: "
                      "an NVIDIA GPU, with --emit cuda or ptx)")
    comp.add_argument("--arch", metavar="sm_XX", help="with --target cuda: the GPU architecture (default: the "
                      "GPU's, else sm_90)")
    comp.add_argument("--stats", action="store_true",
                      help="with --target cuda: instead of code, print per kernel its block size, the registers, "
                      "spills and shared memory ptxas reports, and the occupancy that gives on --arch (no GPU needed)")
    add_pipeline_arguments(comp, default="zero")
    add_tuned_argument(comp)
    add_bounds_check_argument(comp)
    comp.set_defaults(handler=compile_command)


def compile_command(args) -> int:
    emit = args.emit or ("library" if (args.output or "").endswith(".so") else "llvm")
    if emit == "library" and not args.output:
        raise fail("--emit library writes a shared library: name it with -o FILE.so")
    program = load_program(args.file)
    target_text = args.target
    if args.arch:
        if not re.fullmatch(r"sm_\d+[a-z]?", args.arch):
            raise fail(f"--arch {args.arch}: expected a CUDA architecture such as sm_90")
        target_text = f"{target_text} -arch={args.arch}"
    target = check_target(target_text)
    gpu = target.split()[0] == "cuda"
    if args.arch and not gpu:
        raise fail("--arch goes with --target cuda")
    if args.stats:
        _check_stats_arguments(args, gpu)
    program.progress = CompileProgress().__enter__()
    try:
        if args.stats:
            return _print_stats(args, program, target)
        return _compile_and_write(args, emit, program, target, gpu)
    finally:
        program.progress.close()


def _compile_and_write(args, emit: str, program: Program, target: str, gpu: bool) -> int:
    from .. import ir, tir

    if gpu and emit not in _GPU_EMIT_KINDS + ("python",):
        raise fail(f"--target cuda emits CUDA C (--emit cuda), PTX (--emit ptx) or the VM's code (--emit python), "
                   f"not {emit}")
    if not gpu and emit in _GPU_EMIT_KINDS:
        raise fail(f"--emit {emit} needs --target cuda")
    program.transform(pipeline_options(args), args.func, args.target)
    program.apply_tuning(args.tuned, target)
    mod = program.module()
    only = None
    if args.func:
        only, func = program.pick(args.func)
        if isinstance(func, tir.PrimFunc):
            if emit == "python":
                raise fail(f"'{only}' is a T.prim_func: --emit python shows the code of Relax functions; "
                           "use --emit llvm or asm for a prim_func")
            mod = ir.IRModule({only: func})
        elif emit != "python":
            raise fail(f"'{only}' is a Relax function: --emit {emit} shows the prim_funcs' code; "
                       "use --emit python, or give --func a prim_func")
    if emit == "library":
        if only is not None:
            raise fail("--emit library writes the whole module; leave out --func")
        return _export(program.compile(mod, target, args.bounds_check), args.output)
    if gpu and emit in _GPU_EMIT_KINDS:
        text = _cuda_text(program, mod, target, emit)
    elif emit == "python":
        ex = program.compile(mod, target, args.bounds_check)
        if only is not None:
            text = ex.functions[only].source
        elif not ex.functions:
            raise fail(f"{program.path} has no Relax function: nothing for --emit python")
        else:
            text = ex.as_python()
    else:
        ex = program.compile(mod, target, args.bounds_check)
        if not ex.kernels:
            raise fail(f"{program.path} has no T.prim_func: nothing to compile to {emit}")
        text = next(iter(ex.kernels.values())).module.get_source(emit)  # one CPUModule holds them all
    if not text.endswith("\n"):
        text += "\n"
    if args.output:
        try:
            write_new_atomically(args.output, text.encode("utf-8"))
        except OSError as err:
            raise fail(f"cannot write {args.output}: {err.strerror or err}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _check_stats_arguments(args, gpu: bool) -> None:
    if not gpu:
        raise fail("--stats reports the resources of CUDA kernels: use it with --target cuda")
    if args.emit or args.output:
        raise fail("--stats prints a table of the kernels instead of code: leave out --emit and -o")


def _print_stats(args, program: Program, target: str) -> int:
    """``--stats``: the kernels' resource table (`kernel_stats`) of the module's prim_funcs, or
    of the one --func names, compiled to CUBIN as `tvms run` compiles them."""
    from .. import ir, tir
    from .kernel_stats import print_stats
    from .reporting import stream_is_terminal

    program.transform(pipeline_options(args), args.func, args.target)
    program.apply_tuning(args.tuned, target)
    mod = program.module()
    if args.func:
        only, func = program.pick(args.func)
        if not isinstance(func, tir.PrimFunc):
            raise fail(f"'{only}' is a Relax function: --stats --func takes a prim_func (leave out --func for "
                       "every kernel of the module)")
        mod = ir.IRModule({only: func})
    code = _cuda_code(program, mod, target, "cubin", "CUBIN")
    program.progress.close()
    print_stats(code.resources, code.arch, stream_is_terminal(sys.stdout))
    return 0


def _cuda_text(program: Program, mod, target: str, emit: str) -> str:
    """The CUDA C (``emit="cuda"``) or PTX of ``mod``'s prim_funcs after the default GPU
    schedules; build errors are rendered at their place in the file."""
    code = _cuda_code(program, mod, target, "source" if emit == "cuda" else "ptx", emit)
    return code.source if emit == "cuda" else code.ptx


def _cuda_code(program: Program, mod, target: str, kind: str, what: str):
    """`build_cuda`'s `CUDACode` (``kind``: source, ptx or cubin) of ``mod``'s prim_funcs;
    ``what`` names the output in the error for a module without any."""
    from .. import tir
    from ..compiler.build_cuda import build_cuda
    from ..diagnostics import TVMScriptError

    prim_funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}
    if not prim_funcs:
        raise fail(f"{program.path} has no T.prim_func: nothing to compile to {what}")
    try:
        return build_cuda(prim_funcs, target, kind=kind)
    except TVMScriptError as err:
        raise program.report(err) from None


def _export(ex, output: str) -> int:
    """Write the executable ``ex`` as the shared library ``output``."""
    from ..runtime.library import LibraryError

    try:
        ex.export_library(output)
    except LibraryError as err:
        raise fail(str(err)) from None
    except OSError as err:
        raise fail(f"cannot write {output}: {err.strerror or err}") from None
    size = os.path.getsize(output)
    print(f"wrote {output} ({len(ex.kernels)} kernels, {len(ex.functions)} Relax functions, "
          f"{size / 1024:.0f} KiB); run it with `tvms run {output}`", file=sys.stderr)
    return 0
