"""``tvms.compile`` / ``tvms.relax.build``: an IRModule to an `Executable`, the build driver.

The module must already be lowered: its Relax functions call TensorIR through ``R.call_tir``,
extern functions through ``R.call_dps_packed`` / ``R.call_packed``, and allocate with
``R.alloc_tensor``; high-level ops (``R.add``, ``R.matmul``, ...) are an error naming the op
until LegalizeOps has turned them into prim_funcs (`build` runs a pipeline first on a module
that still has them).

The parts: the target is checked (`compiler.build_target`); each ``T.prim_func`` is compiled
by the CPU build (`compiler.build_cpu`) or the CUDA build (`compiler.build_cuda`); each Relax
function is translated once into the Python source the VM runs (`compiler.vm_codegen`). The
`Executable` holds the result, and the runtime runs it without the compiler.
"""

from __future__ import annotations

import dataclasses

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.runtime.executable import Executable
from tvmscript.runtime.sites import Site, locate

from . import progress
from .build_cpu import build_cpu
from .build_cuda import build_cuda
from .build_error import BuildError, NotLoweredError, where
from .build_target import cpu_build_options, target_name_of
from .kernel_places import place_table
from .prepack_constants import mark_layout_free, pack_constants
from .transform._common import copy_module
from .transform.rewrite_cuda_graph import ATTR as CUDA_GRAPH_ATTR, RewriteCUDAGraph, capture_blocker, cuda_graph_enabled
from .transform.rewrite_reshape import RewriteDataflowReshape
from .vm_codegen import VM_OPS, FunctionCodegen
from .well_formed import return_annotation_problem

__all__ = ["build", "compile", "BuildError", "NotLoweredError"]


def build(mod, target="llvm", params=None, exec_mode: str = "bytecode", system_lib=None,
          relax_pipeline="default", bounds_check: bool = True, tuning_db=None, **kwargs):
    """Compile ``mod`` (an IRModule, or a lone Relax function / prim_func) for ``target``.

    As TVM's ``tvm.compile`` does, a module that still holds high-level ops (``R.matmul``, as
    ``nn.Module.export_tvm`` and the importers write them) goes through ``relax_pipeline``
    first: "default" (the inference rewrites that keep its meaning, such as batch norms in eval
    mode folded into the convolutions, then LegalizeOps and fusion: `default_pipeline`),
    another pipeline's name, or a pass. A module without them compiles as written, and
    ``relax_pipeline=None`` never transforms (a high-level op left is then a BuildError).

    ``bounds_check``: every buffer access not proven in bounds at compile time is checked when
    it runs, and an access outside its buffer raises `BoundsCheckError` instead of touching
    memory there (`compiler.bounds_check`); ``bounds_check=False`` leaves the checks out. On
    a GPU, accesses to global memory are checked, on the host where a check depends only on
    sizes, else in the kernel, which records the failure for the host to raise
    (`compiler.codegen_cuda.checks`).

    ``tuning_db`` (a MetaSchedule `JSONDatabase`, or the path of its work dir): each PrimFunc
    it has a record of for ``target`` gets the best record's schedule instead of the default
    one, after the pipeline and before the kernels are built (`compiler.meta_schedule.apply`);
    the functions it has none of get the default schedules.

    Returns an `Executable`: ``ex["prim_func_name"]`` is a kernel; Relax functions run through
    ``tvms.relax.VirtualMachine(ex, tvms.cpu())``."""
    if params:
        raise NotImplementedError("build(params=...) is not supported: bind parameters into the module first")
    mod = _as_module(mod)
    target_name = target_name_of(target)
    mod = kernels_as_built(mod, target_name, relax_pipeline)
    if tuning_db is not None:
        from .meta_schedule.apply import apply_database

        progress.report("applying the tuning database")
        mod = apply_database(mod, tuning_db, "llvm" if target is None else target)

    prim_funcs = {}
    relax_funcs = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tir.PrimFunc):
            prim_funcs[gv.name_hint] = func
        elif isinstance(func, relax.Function):
            relax_funcs[gv.name_hint] = func
        else:
            raise BuildError(f"cannot compile '{gv.name_hint}': {type(func).__name__} is not a function tvms knows")

    # Ops that are not lowered, and return annotations the body contradicts, fail fast, before
    # any kernel is compiled.
    for name, func in relax_funcs.items():
        problem = return_annotation_problem(func)
        if problem:
            raise BuildError(f"cannot compile '{name}': {problem}", getattr(func, "span", None))
        _check_lowered(name, func)

    gpu = target_name.split()[0] == "cuda"
    cuda_code = build_cuda(prim_funcs, target, bounds_check=bounds_check) if gpu and prim_funcs else None
    if gpu:
        # Each placing its failures in its PrimFunc here (a cached build may be another's).
        kernels = {name: dataclasses.replace(f, places=place_table(prim_funcs[name]))
                   for name, f in cuda_code.functions.items()} if cuda_code is not None else {}
        if cuda_code is not None:
            cuda_code = dataclasses.replace(cuda_code, functions=kernels)
    else:
        kernels, layouts = _compile_kernels(prim_funcs, relax_funcs, bounds_check, cpu_build_options(target)) \
            if prim_funcs else ({}, {})
        packed = pack_constants(relax_funcs, layouts)
        if any(packed[n] is not f for n, f in relax_funcs.items()):
            mod = copy_module(mod)
            for gv in list(mod.functions):
                if gv.name_hint in packed:
                    mod[gv] = packed[gv.name_hint]
            relax_funcs = packed

    functions = {}
    for index, (name, func) in enumerate(relax_funcs.items()):
        progress.report("the VM's program", index, len(relax_funcs))
        functions[name] = FunctionCodegen(name, index, func, kernels, relax_funcs).run()
        if gpu:
            _mark_cuda_graph(functions[name], func, mod)
    if gpu:
        return Executable(mod, "cuda", kernels, functions, cuda_code=cuda_code)
    return Executable(mod, target_name, kernels, functions)


compile = build  # tvms.compile: TVM's newer name


def _mark_cuda_graph(vm_func, func, mod) -> None:
    """Whether the VM replays ``func`` as a CUDA graph: marked by RewriteCUDAGraph, graphs on in
    the PassContext, and nothing against it (the attribute written by hand is checked too);
    else why not, for ``vm.cuda_graph_stats()`` and ``ex.stats()``."""
    blocker = capture_blocker(func, mod)
    if not cuda_graph_enabled():
        vm_func.cuda_graph_note = "relax.backend.use_cuda_graph is off in the PassContext"
    elif blocker is not None:
        vm_func.cuda_graph_note = blocker
    elif not func.attrs.get(CUDA_GRAPH_ATTR):
        vm_func.cuda_graph_note = "RewriteCUDAGraph did not mark it"
    else:
        vm_func.cuda_graph = True


# ----------------------------------------------------------------------------- the module


def _as_module(mod) -> ir.IRModule:
    if isinstance(mod, ir.IRModule):
        return mod
    if isinstance(mod, relax.Function):
        return ir.IRModule({"main": mod})
    if isinstance(mod, tir.PrimFunc):
        name = mod.attrs.get("global_symbol", "main") if isinstance(mod.attrs, dict) else "main"
        return ir.IRModule({name: mod})
    raise TypeError(f"tvms.compile expects an IRModule, got {type(mod).__name__}")


# ----------------------------------------------------------------------------- kernels


def _compile_kernels(prim_funcs: dict, relax_funcs: dict, bounds_check: bool, options: dict) -> tuple:
    """The CPU kernels of ``prim_funcs`` for the CPU ``options`` name (`cpu_build_options`),
    each placing its run-time failures in its PrimFunc here (`Kernel.compiled_from`), and the
    layouts their schedule gave constant parameters (kernel -> {index: `PackedLayout`}). A
    kernel the code generator cannot compile is a BuildError at its place in the source
    (`_kernel_error`)."""
    try:
        built = build_cpu(prim_funcs, bounds_check=bounds_check, **options)
    except (NotImplementedError, ValueError, TypeError) as err:
        kernel = getattr(err, "kernel", None)
        if kernel not in prim_funcs:
            raise
        raise _kernel_error(err, kernel, prim_funcs[kernel], relax_funcs) from None
    # .kernels: those of another CPU are kept (to print or export) though they refuse to run here
    kernels = {name: kernel.compiled_from(place_table(prim_funcs[name])) for name, kernel in built.kernels.items()}
    return kernels, built.packed_layouts


def _kernel_error(err: Exception, kernel: str, func: tir.PrimFunc, relax_funcs: dict) -> BuildError:
    """A BuildError for a kernel the code generator cannot compile, at the statement it is
    about (``err.span``) in the user's PrimFunc or, in TIR that has no place of its own (what
    LegalizeOps made), at the call of the op it came from (a call's `FusedSpan` says which op
    of a fused kernel)."""
    text = str(err)
    text = text[len(f"kernel '{kernel}': "):] if text.startswith(f"kernel '{kernel}': ") else text
    error = BuildError(f"cannot compile kernel '{kernel}': {text}", getattr(err, "span", None))
    for fname, f in relax_funcs.items():
        for e, var in _calls_and_closures(f):
            if _kernel_of(e) == kernel:
                locate(error, Site(fname, var.name_hint if var is not None else "", e.span, kernel), {})
                return error
    if error.span is None:
        error.span = func.span
    return error


# ----------------------------------------------------------------------------- checks


def kernels_as_built(mod: ir.IRModule, target_name: str, relax_pipeline="default") -> ir.IRModule:
    """``mod`` as `build` compiles its kernels: through ``relax_pipeline`` if it still has
    high-level ops, then the build's own rewrites for the target. Tuning extracts its tasks
    from this form and a tuning database applies to it (`compiler.meta_schedule`), so that a
    tuned kernel is the one the model calls, with the weights the model binds as constants
    marked (the default CPU schedule then reads them packed, in tuning as in the model)."""
    if relax_pipeline is not None and _has_high_level_ops(mod):
        mod = _pipeline(relax_pipeline, target_name)(mod)
    # Kernels that only reshape become views of their input (compiler/transform/rewrite_reshape.py).
    mod = RewriteDataflowReshape()(mod)
    if target_name.split()[0] == "cuda":
        # Functions that only launch kernels replay them as a CUDA graph (rewrite_cuda_graph.py).
        return RewriteCUDAGraph()(mod)
    # The build's own pipeline: kernels read transposed weights in place instead of a
    # transpose kernel copying them on every call (compiler/transform/read_transposed.py).
    from .transform.read_transposed import read_transposed_in_place

    progress.report("reading transposed operands in place")
    mod = read_transposed_in_place(mod)
    # Weights bound as constants: the kernels' schedule may choose their layout, and the
    # build packs them into it once (compiler/prepack_constants.py).
    return mark_layout_free(mod)


def _has_high_level_ops(mod: ir.IRModule) -> bool:
    return any(_is_high_level(e) for func in mod.functions.values() if isinstance(func, relax.Function)
               for e, _ in _calls_and_closures(func))


def _pipeline(relax_pipeline, target_name: str):
    """The pass `build` runs on a module with high-level ops: a pipeline by name (for the
    target), or a pass."""
    if isinstance(relax_pipeline, str):
        from .transform import get_pipeline

        return get_pipeline(relax_pipeline, target_name)
    if callable(relax_pipeline):
        return relax_pipeline
    raise TypeError(f"relax_pipeline must be a pipeline's name, a pass or None, not {relax_pipeline!r}")


def _is_high_level(e) -> bool:
    """A call of a Relax op that LegalizeOps lowers (the VM runs only `VM_OPS` itself)."""
    return isinstance(e, relax.Call) and isinstance(e.op, relax.Op) and e.op.name not in VM_OPS


def _calls_and_closures(func: relax.Function):
    """``(expr, binding var)`` for every call and every local function in ``func``'s body, in
    source order (a call before its arguments)."""

    def visit(e, var):
        if isinstance(e, relax.Call):
            yield e, var
            for a in e.args:
                yield from visit(a, var)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                yield from visit(f, var)
        elif isinstance(e, relax.TupleGetItem):
            yield from visit(e.tuple_value, var)
        elif isinstance(e, relax.If):
            yield from visit(e.cond, var)
            yield from seq(e.true_branch)
            yield from seq(e.false_branch)
        elif isinstance(e, relax.SeqExpr):
            yield from seq(e)
        elif isinstance(e, relax.Function):
            yield e, var

    def seq(s: relax.SeqExpr):
        for block in s.blocks:
            for b in block.bindings:
                yield from visit(b.value, b.var)
        yield from visit(s.body, None)

    return seq(func.body)


def _check_lowered(fname: str, func: relax.Function) -> None:
    """A BuildError for the first high-level op (or local function) left in ``func``."""
    for e, var in _calls_and_closures(func):
        if isinstance(e, relax.Function):
            raise BuildError(f"local functions (closures) are not supported by the VM yet ({where(fname, var)})",
                             getattr(e, "span", None))
        if _is_high_level(e):
            raise _not_lowered_error(e, where(fname, var))


def _not_lowered_error(call: relax.Call, place: str) -> BuildError:
    """The error for a high-level op still in a module being built, saying why it is there.
    LegalizeOps lowers an op only when its result's shape is known (as TVM's does): two
    unrelated symbolic dims such as ``(n, 64) * (m, 64)`` broadcast to a shape that depends on
    the values, and the op stays as it is even though the pipeline ran (a BuildError); any
    other op was not legalized at all (a NotLoweredError)."""
    op = call.op.name
    script = "R." + op[len("relax."):] if op.startswith("relax.") else op
    sinfo = call.struct_info
    if isinstance(sinfo, relax.TensorStructInfo) and sinfo.shape is None:
        from tvmscript.printer import sinfo_text

        given = [sinfo_text(relax.struct_info_of(a)) for a in call.args
                 if isinstance(relax.struct_info_of(a), relax.TensorStructInfo)]
        return BuildError(f"{script} cannot be lowered to a kernel: the shape of its result is not known when "
                          f"compiling (its tensor arguments are {', '.join(given)}); give the arguments shapes "
                          "that fix it, for example with R.match_cast of an argument to the shape you expect, "
                          f"and LegalizeOps lowers it ({place})", call.span)
    return NotLoweredError(f"{script} is not lowered yet: run LegalizeOps (tvms.relax.transform.LegalizeOps()(mod)) "
                           f"before compiling ({place})", call.span)


def _kernel_of(e):
    """The name of the kernel a call runs (``R.call_tir`` and its kin), else None."""
    if not (isinstance(e, relax.Call) and isinstance(e.op, relax.Op) and e.args) or e.op.name not in relax.DPS_CALL_OPS:
        return None
    callee = e.args[0]
    return callee.name_hint if isinstance(callee, ir.GlobalVar) else getattr(callee, "global_symbol", None)
