"""``tvms.compile`` / ``tvms.relax.build``: an IRModule to an `Executable`.

The module must already be lowered: its Relax functions call TensorIR through ``R.call_tir``,
extern functions through ``R.call_dps_packed`` / ``R.call_packed``, and allocate with
``R.alloc_tensor``; high-level ops (``R.add``, ``R.matmul``, ...) are an error naming the op
until LegalizeOps has turned them into prim_funcs.

Each ``T.prim_func`` is compiled by the CPU backend (`runtime.cpu.build_cpu`). Each Relax
function is translated once into Python source, which the VM executes: the translation resolves
everything that does not depend on the arguments, so a call costs what the Python lines below
cost and nothing more::

    def _fn0_main(*args):                 # ex.as_python() shows this code
        if len(args) != 2: _arity(_F0_o0_sig, args)
        x, y = args
        if x.__class__ is not _Tensor: x = _coerce(x, _F0_o0_sig, 0)   # NumPy: wrapped, no copy
        _s = x._shape
        if x._dtype != 'float32' or len(_s) != 2: _bad(_F0_o0_sig, 0, x, {})
        n = _s[0]                              # a symbolic dim binds at its first use ...
        ...                                    # ... and is compared everywhere after
        lv = _empty((n, 4), 'float32')         # or a slot of the function's arena
        _K0_add1(x._ptr, lv._ptr, n)           # the kernel's ctypes entry: pointers, scalars, dims
        if _kerr: _kraise()                    # an assertion the kernel reported
        return lv

Checks that the build can prove (a call_tir argument's static shape against the prim_func's
buffer) are done here and fail the build, naming the call; the others run at call time.
"""

from __future__ import annotations

import builtins
import keyword
import re

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.diagnostics import TVMScriptError
from tvmscript.well_formed import return_annotation_problem

from . import progress
from tvmscript.ir.op.call_tir import describe_arg

__all__ = ["build", "compile", "BuildError", "NotLoweredError"]


class BuildError(TVMScriptError, ValueError):
    """A module that cannot be compiled as it is (an op that is not lowered, a call_tir whose
    arguments do not fit its prim_func, ...); ``span`` points at the offending call when known."""


class NotLoweredError(BuildError):
    """A high-level op left in a module being built that LegalizeOps would lower: the module
    did not go through it (`tvms run --pipeline none`, say), which the CLI's note points out."""


SUPPORTED_TARGETS = ("llvm", "c", "cuda")


def build(mod, target="llvm", params=None, exec_mode: str = "bytecode", system_lib=None,
          relax_pipeline="default", bounds_check: bool = True, **kwargs):
    """Compile ``mod`` (an IRModule, or a lone Relax function / prim_func) for ``target``.

    As TVM's ``tvm.compile`` does, a module that still holds high-level ops (``R.matmul``, as
    ``nn.Module.export_tvm`` and the importers write them) goes through ``relax_pipeline``
    first: "default" (LegalizeOps and fusion: the zero pipeline), another pipeline's name, or
    a pass. A module without them compiles as written, and ``relax_pipeline=None`` never
    transforms (a high-level op left is then a BuildError).

    ``bounds_check`` (CPU): every buffer access not proven in bounds at compile time is
    checked when it runs, and an access outside its buffer raises `BoundsCheckError` instead
    of touching memory there (`compiler.bounds_check`); ``bounds_check=False`` leaves the
    checks out. CUDA kernels are not checked.

    Returns an `Executable`: ``ex["prim_func_name"]`` is a kernel; Relax functions run through
    ``tvms.relax.VirtualMachine(ex, tvms.cpu())``."""
    from tvmscript.runtime.executable import Executable

    if params:
        raise NotImplementedError("build(params=...) is not supported: bind parameters into the module first")
    mod = _as_module(mod)
    target_name = target_name_of(target)
    if relax_pipeline is not None and _has_high_level_ops(mod):
        mod = _pipeline(relax_pipeline)(mod)
    if target_name.split()[0] != "cuda":
        # The build's own pipeline: kernels read transposed weights in place instead of a
        # transpose kernel copying them on every call (compiler/transform/read_transposed.py).
        from .transform.read_transposed import read_transposed_in_place

        progress.report("reading transposed operands in place")
        mod = read_transposed_in_place(mod)

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
    cuda_code = build_cuda(prim_funcs, target) if gpu and prim_funcs else None
    if gpu:
        kernels = dict(cuda_code.functions) if cuda_code is not None else {}
    else:
        kernels = _compile_kernels(prim_funcs, relax_funcs, bounds_check, cpu_build_options(target)) if prim_funcs else {}

    functions = {}
    for index, (name, func) in enumerate(relax_funcs.items()):
        progress.report("the VM's program", index, len(relax_funcs))
        functions[name] = _FunctionCodegen(name, index, func, kernels, relax_funcs).run()
    if gpu:
        return Executable(mod, "cuda", kernels, functions, cuda_code=cuda_code)
    return Executable(mod, target_name, kernels, functions)


compile = build  # tvms.compile: TVM's newer name


# ----------------------------------------------------------------------------- module and target


def _as_module(mod) -> ir.IRModule:
    if isinstance(mod, ir.IRModule):
        return mod
    if isinstance(mod, relax.Function):
        return ir.IRModule({"main": mod})
    if isinstance(mod, tir.PrimFunc):
        name = mod.attrs.get("global_symbol", "main") if isinstance(mod.attrs, dict) else "main"
        return ir.IRModule({name: mod})
    raise TypeError(f"tvms.compile expects an IRModule, got {type(mod).__name__}")


def target_name_of(target) -> str:
    """The target's name: its text as given (``"llvm -mcpu=skylake"``), else its kind
    (``"llvm"`` for None); the errors of `checked_target`."""
    checked = checked_target(target)
    return target if isinstance(target, str) else checked.kind.name


# The options of each kind that tvms's backends act on. A `Target` takes every option TVM's
# takes (tvmscript/target.py); compiling with one that tvms would ignore is an error instead.
_ACTED_ON = {
    "llvm": ("mcpu", "mattr", "mtriple", "opt-level"),
    "c": ("mcpu",),
    "cuda": ("arch", "max_threads_per_block", "max_num_threads", "max_shared_memory_per_block"),
}

# Options that describe the target without directing the compiler (TVM's tags carry them):
# accepted, though no pass of tvms consults the last three yet.
_DESCRIPTIVE = ("keys", "device", "model", "tag", "thread_warp_size", "registers_per_block", "l2_cache_size_bytes")

# Why tvms does not act on an option TVM's Target takes, and what does what it asks for.
_NOT_ACTED_ON = {
    "num-cores": "parallel loops run on OMP_NUM_THREADS threads: set that variable instead",
    "libs": "tvms compiles every op itself and calls no vendor library",
    "fast-math": "tvms keeps IEEE float semantics",
    "mcpu": "a CUDA GPU's architecture is -arch, such as -arch=sm_80",  # for cuda; llvm acts on it
}


def checked_target(target) -> "Target":
    """``target`` (a string, a dict, a `tvms.target.Target`, or None for ``llvm``) as a
    `Target` tvms can compile for. ValueError for an unknown kind or option (`Target`'s), an
    option tvms would ignore, or a CPU or feature LLVM does not know (`llvm_target`);
    NotImplementedError for a kind tvms cannot compile for yet."""
    from tvmscript.target import Target, UnknownTargetOption

    try:
        checked = Target("llvm" if target is None else target)
    except UnknownTargetOption as err:
        if err.kind not in _ACTED_ON:
            raise
        raise ValueError(err.with_options(f"the options tvms compiles '{err.kind}' with are",
                                          _options_text(err.kind))) from None
    kind = checked.kind.name
    if kind not in SUPPORTED_TARGETS:
        raise NotImplementedError(f"target '{kind}' is not supported yet: tvms compiles for the CPU ('llvm') "
                                  "and NVIDIA GPUs ('cuda')")
    acted_on = _ACTED_ON[kind]
    for name in sorted(checked.attrs):
        if name not in acted_on and name not in _DESCRIPTIVE:
            why = _NOT_ACTED_ON.get(name, "not supported yet")
            raise ValueError(f"tvms does not act on -{name} ({why}); the options it compiles '{kind}' with are "
                             f"{', '.join(_options_text(kind))}")
    if kind == "cuda" and checked.thread_warp_size != 32:
        raise ValueError(f"-thread_warp_size={checked.thread_warp_size}: NVIDIA GPUs run warps of 32 threads")
    if kind != "cuda":
        level = checked.attrs.get("opt-level", 3)
        if not 0 <= level <= 3:
            raise ValueError(f"-opt-level={level}: LLVM's optimization levels are 0 to 3")
        from .llvm_target import cpu_target

        cpu_target(checked)
    return checked


def _options_text(kind: str) -> list:
    return ["-" + n for n in _ACTED_ON[kind]]


def cpu_build_options(target) -> dict:
    """`runtime.cpu.build_cpu`'s ``target`` and ``opt_level`` for an ``llvm`` (or ``c``)
    target: the CPU its options name and LLVM's optimization level (3 by default)."""
    from .llvm_target import cpu_target

    checked = checked_target(target)
    return {"target": cpu_target(checked), "opt_level": checked.attrs.get("opt-level", 3)}


# ----------------------------------------------------------------------------- CUDA


def cuda_target(target):
    """``target`` as a CUDA `Target`, and the architecture to compile for: the one the target
    names (``cuda -arch=sm_80``), else the GPU's own when one is present, else the target's
    default (an H100, sm_90)."""
    from tvmscript.target import Target

    explicit = False
    if isinstance(target, str):
        explicit = "-arch" in target
        target = Target(target)
    elif isinstance(target, dict):
        explicit = "arch" in target
        target = Target(target)
    elif isinstance(target, Target):
        explicit = True
    arch = str(target.attrs.get("arch") or "sm_90")
    if not explicit:
        try:
            from tvmscript.runtime.cuda import device_arch, unavailable_reason

            found = device_arch(0) if unavailable_reason(0) is None else None
        except Exception:  # noqa: BLE001 - no pycuda, no GPU: the default architecture
            found = None
        arch = found or arch
    return target, arch


def default_gpu_schedule(mod, target):
    """DLight's default GPU schedules (`tvms.dlight`), as TVM's default CUDA pipeline applies
    them, for the prim_funcs of ``mod`` that no schedule has bound to threads yet."""
    from tvmscript import dlight as dl

    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.MatmulTensorCore(), dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.LowBatchGEMV(),
                                       dl.gpu.Reduction(),
                                       dl.gpu.GeneralReduction(), dl.gpu.Transpose(), dl.gpu.Fallback())(mod)


def _fallback_schedule(name: str, func, target):
    from tvmscript import dlight as dl

    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.Fallback())(ir.IRModule({name: func}))[name]


# Whole CUDA builds (schedules, CUDA C, NVRTC's output) by what they were built from: a
# rebuild of the same functions in this process or the next skips all three.
_cuda_builds = None


def clear_cuda_cache() -> None:
    """Forget the CUDA builds made in this process (the disk cache stays)."""
    if _cuda_builds is not None:
        _cuda_builds.clear()


def build_cuda(prim_funcs: dict, target="cuda", kind: str = "cubin"):
    """CUDA C and NVRTC's CUBIN for ``prim_funcs``, as a `cuda_spec.CUDACode` (``kind="ptx"``:
    PTX instead; ``kind="source"``: the CUDA C alone, NVRTC not needed). Functions without
    thread bindings get the default GPU schedules first. Needs no GPU. The result is cached
    (`compiler.build_cache`): in memory, and on disk keyed by the functions' structure, the
    target, the kind, tvms's source and NVRTC's version."""
    global _cuda_builds
    from . import nvrtc
    from .build_cache import BuildCache

    if kind not in ("cubin", "ptx", "source"):
        raise ValueError(f"kind must be 'cubin', 'ptx' or 'source', not {kind!r}")
    target, arch = cuda_target(target)
    try:
        version = nvrtc.nvrtc_version() if kind != "source" else None
    except nvrtc.NVRTCUnavailable as err:
        raise BuildError(str(err)) from None
    if _cuda_builds is None:
        _cuda_builds = BuildCache("cuda-builds", b"TVMSCUDABUILD1")
    funcs = dict(prim_funcs)
    return _cuda_builds.build(funcs, ("cuda", str(target), arch, kind, version),
                              lambda: _build_cuda(funcs, target, arch, kind),
                              lambda code: {"code": code}, lambda entry: entry["code"])


def _build_cuda(prim_funcs: dict, target, arch: str, kind: str):
    from . import nvrtc
    from .codegen_cuda import codegen_cuda
    from .cuda_spec import CUDACode
    from .lower_gpu import GPULoweringError, has_thread_bindings
    from .schedule import ScheduleError

    unscheduled = {n: f for n, f in prim_funcs.items() if not has_thread_bindings(f)}
    if unscheduled:
        try:
            scheduled = default_gpu_schedule(ir.IRModule(dict(unscheduled)), target)
        except ScheduleError as err:
            raise BuildError(f"the default GPU schedules failed: {err}") from None
        prim_funcs = {n: (scheduled[n] if n in unscheduled else f) for n, f in prim_funcs.items()}
    fallen_back: set = set()
    while True:
        try:
            src = codegen_cuda(prim_funcs)
            break
        except GPULoweringError as err:
            name = getattr(err, "func_name", None)
            if name in unscheduled and name not in fallen_back:
                # A default schedule the GPU cannot run as is (a rule bound only part of a
                # function): the one that always works, one thread per output element.
                fallen_back.add(name)
                prim_funcs = dict(prim_funcs)
                prim_funcs[name] = _fallback_schedule(name, unscheduled[name], target)
                continue
            raise BuildError(str(err), getattr(prim_funcs.get(name), "span", None)) from None
    if kind == "source":
        return CUDACode(src.source, src.functions, arch)
    try:
        result = nvrtc.compile_cuda(src.source, arch, kind=kind)
    except nvrtc.NVRTCError as err:
        raise _nvrtc_build_error(err, src, prim_funcs) from None
    except (nvrtc.NVRTCUnavailable, ValueError) as err:
        raise BuildError(str(err)) from None
    code = CUDACode(src.source, src.functions, arch, nvrtc_version=nvrtc.nvrtc_version())
    if kind == "cubin":
        code.cubin = result.binary
    else:
        code.ptx = result.binary.decode("utf-8", "replace")
    code.compile_seconds = result.seconds
    return code


def _nvrtc_build_error(err, src, prim_funcs) -> BuildError:
    """A BuildError quoting NVRTC's log, naming the kernel its first error is in and pointing
    at that kernel's prim_func."""
    log = err.log.strip()
    kernel = func_name = None
    m = re.search(r"\((\d+)\): (?:catastrophic )?error", log)
    if m:
        line = int(m.group(1))
        for sym, (first, last) in src.kernel_lines.items():
            if first <= line <= last:
                kernel, func_name = sym, src.kernel_funcs[sym]
    where = f" in kernel '{kernel}' (prim_func '{func_name}')" if kernel else ""
    quoted = "\n".join("    " + x for x in log.splitlines()[:40])
    return BuildError(f"NVRTC could not compile the CUDA code{where}:\n{quoted}",
                      getattr(prim_funcs.get(func_name), "span", None))


def _compile_kernels(prim_funcs: dict, relax_funcs: dict, bounds_check: bool, options: dict) -> dict:
    """The CPU kernels of ``prim_funcs`` for the CPU ``options`` name (`cpu_build_options`),
    each placing its run-time failures in its PrimFunc here (`Kernel.compiled_from`). A kernel
    the code generator cannot compile is a BuildError at its place in the source
    (`_kernel_error`)."""
    try:
        from tvmscript.runtime.cpu import build_cpu
    except ImportError as err:
        if "tvmscript.runtime.cpu" not in str(err) and "runtime.cpu" not in str(err):
            raise
        raise NotImplementedError(
            "this module has T.prim_funcs, and the TensorIR compiler (runtime/cpu.py) is not available "
            "in this checkout"
        ) from err
    try:
        built = build_cpu(prim_funcs, bounds_check=bounds_check, **options)
    except (NotImplementedError, ValueError, TypeError) as err:
        kernel = getattr(err, "kernel", None)
        if kernel not in prim_funcs:
            raise
        raise _kernel_error(err, kernel, prim_funcs[kernel], relax_funcs) from None
    # .kernels: those of another CPU are kept (to print or export) though they refuse to run here
    return {name: kernel.compiled_from(prim_funcs[name]) for name, kernel in built.kernels.items()}


def _kernel_error(err: Exception, kernel: str, func: tir.PrimFunc, relax_funcs: dict) -> BuildError:
    """A BuildError for a kernel the code generator cannot compile, at the statement it is
    about (``err.span``) in the user's PrimFunc or, in TIR that has no place of its own (what
    LegalizeOps made), at the call of the op it came from (a call's `FusedSpan` says which op
    of a fused kernel)."""
    from tvmscript.runtime.sites import Site, locate

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


_VM_OPS = frozenset((
    "relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed", "relax.builtin.alloc_tensor",
    "relax.call_tir_inplace", "relax.call_tir_with_grad",
    "relax.null_value", "relax.shape_of", "relax.shape_to_tensor", "relax.sort", "relax.argsort", "relax.topk",
    "relax.dynamic_strided_slice", "relax.print", "relax.assert_op",
))

# Impure builtins the VM runs for their effect (runtime/vm.py: _effect_helpers): the op's name,
# its helper. Their arguments (the format string first for print, after the condition for
# assert_op) are passed as they are.
_EFFECT_OPS = {"relax.print": "_vm_print", "relax.assert_op": "_vm_assert"}

# Ops the VM runs on the host (TVM's LegalizeOps leaves sort/argsort/topk for a sort library;
# dynamic_strided_slice's output shape is known only at run time): the op's name, the
# runtime/vm.py helper, the attributes it takes after the call's arguments, in order.
_HOST_OPS = {
    "relax.sort": ("_sort", ("axis", "descending")),
    "relax.argsort": ("_argsort", ("axis", "descending", "dtype")),
    "relax.topk": ("_topk", ("k", "axis", "ret_type", "largest", "dtype")),
    "relax.dynamic_strided_slice": ("_dynamic_strided_slice", ()),
}


def _where(name: str, binding_var=None) -> str:
    if binding_var is not None and binding_var.name_hint != "_":
        return f"in function '{name}', binding '{binding_var.name_hint}'"
    return f"in function '{name}'"


def _has_high_level_ops(mod: ir.IRModule) -> bool:
    return any(_is_high_level(e) for func in mod.functions.values() if isinstance(func, relax.Function)
               for e, _ in _calls_and_closures(func))


def _pipeline(relax_pipeline):
    """The pass `build` runs on a module with high-level ops: a pipeline by name, or a pass."""
    if isinstance(relax_pipeline, str):
        from .transform import get_pipeline

        return get_pipeline(relax_pipeline)
    if callable(relax_pipeline):
        return relax_pipeline
    raise TypeError(f"relax_pipeline must be a pipeline's name, a pass or None, not {relax_pipeline!r}")


def _is_high_level(e) -> bool:
    """A call of a Relax op that LegalizeOps lowers (the VM runs only `_VM_OPS` itself)."""
    return isinstance(e, relax.Call) and isinstance(e.op, relax.Op) and e.op.name not in _VM_OPS


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
            raise BuildError(f"local functions (closures) are not supported by the VM yet ({_where(fname, var)})",
                             getattr(e, "span", None))
        if _is_high_level(e):
            raise _not_lowered_error(e, _where(fname, var))


def _not_lowered_error(call: relax.Call, where: str) -> BuildError:
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
                          f"and LegalizeOps lowers it ({where})", call.span)
    return NotLoweredError(f"{script} is not lowered yet: run LegalizeOps (tvms.relax.transform.LegalizeOps()(mod)) "
                           f"before compiling ({where})", call.span)


# ----------------------------------------------------------------------------- escape analysis


def _arena_candidates(func: relax.Function, kernels: dict) -> dict:
    """Variables whose tensor can live in the function's arena: made by the VM (an R.call_tir
    output or an R.alloc_tensor) with a static shape and dtype, and only ever read by kernels
    (never returned, put in a tuple, passed to an extern or another function, ...). Such a tensor
    is dead when the function returns, so the same memory serves every call."""
    candidates = {}
    alias = {}
    escaped = set()

    def root(v):
        while v in alias:
            v = alias[v]
        return v

    def escape_all(e):
        if isinstance(e, relax.Var):
            escaped.add(root(e))
        elif isinstance(e, relax.Call):
            if not isinstance(e.op, (relax.Op, relax.ExternFunc, ir.GlobalVar)):
                escape_all(e.op)
            for a in e.args:
                escape_all(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                escape_all(f)
        elif isinstance(e, relax.TupleGetItem):
            escape_all(e.tuple_value)
        elif isinstance(e, relax.If):
            escape_all(e.cond)
            seq(e.true_branch)
            seq(e.false_branch)
        elif isinstance(e, relax.SeqExpr):
            seq(e)

    def seq(s: relax.SeqExpr):
        for block in s.blocks:
            for b in block.bindings:
                value = b.value
                if isinstance(b, relax.VarBinding) and isinstance(value, relax.Var):
                    alias[b.var] = value
                    continue
                if isinstance(b, relax.VarBinding) and _is_kernel_call(value, kernels):
                    kernel_args(value)
                    if len(value.sinfo_args) == 1 and _static_tensor(value.sinfo_args[0]):
                        candidates[b.var] = value.sinfo_args[0]
                    continue
                if (isinstance(b, relax.VarBinding) and isinstance(value, relax.Call)
                        and isinstance(value.op, relax.Op) and value.op.name == "relax.builtin.alloc_tensor"):
                    if _static_tensor(value.struct_info):
                        candidates[b.var] = value.struct_info
                    continue
                escape_all(value)
        if _is_kernel_call(s.body, kernels):  # an if branch ending in a call: its result escapes
            kernel_args(s.body)
        else:
            escape_all(s.body)

    def kernel_args(call):
        """A kernel reads its tensor arguments and keeps none of them."""
        for a in call.args[1].fields if isinstance(call.args[1], relax.Tuple) else [call.args[1]]:
            if not isinstance(a, relax.Var):
                escape_all(a)

    seq(func.body)
    # var -> its (static) struct info, in program order
    return {v: s for v, s in candidates.items() if root(v) not in escaped and v not in escaped}


def _is_kernel_call(value, kernels) -> bool:
    if not (isinstance(value, relax.Call) and isinstance(value.op, relax.Op)):
        return False
    if value.op.name == "relax.call_tir" and isinstance(value.args[0], ir.GlobalVar):
        return True
    if value.op.name in ("relax.call_tir", "relax.call_dps_packed") and isinstance(value.args[0], relax.ExternFunc):
        return value.args[0].global_symbol in kernels
    return False


def _kernel_of(e):
    """The name of the kernel a call runs (``R.call_tir`` and its kin), else None."""
    if not (isinstance(e, relax.Call) and isinstance(e.op, relax.Op) and e.args) or e.op.name not in relax.DPS_CALL_OPS:
        return None
    callee = e.args[0]
    return callee.name_hint if isinstance(callee, ir.GlobalVar) else getattr(callee, "global_symbol", None)


def _static_tensor(sinfo) -> bool:
    return (isinstance(sinfo, relax.TensorStructInfo) and bool(sinfo.dtype) and sinfo.shape is not None
            and all(isinstance(d, tir.IntImm) for d in sinfo.shape))


def _static_shape(sinfo) -> tuple:
    return tuple(int(d.value) for d in sinfo.shape)


# ----------------------------------------------------------------------------- code generation


_BINOPS = {
    tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.FloorDiv: "//", tir.FloorMod: "%",
    tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">=",
    tir.And: "and", tir.Or: "or",
}


def _sinfo_text(sinfo) -> str:
    from tvmscript.printer import sinfo_text

    try:
        return sinfo_text(sinfo)
    except Exception:  # pragma: no cover - printing must never hide the real error
        return type(sinfo).__name__


class _FunctionCodegen:
    """Translates one Relax function into the Python source of a VM function."""

    def __init__(self, name: str, index: int, func: relax.Function, kernels: dict, relax_funcs: dict) -> None:
        from tvmscript.runtime.executable import FuncSig

        self.name = name
        self.func = func
        self.kernels = kernels
        self.relax_funcs = relax_funcs
        self.prefix = f"_F{index}"
        self.pyname = py_function_name(name, index)
        self.lines: list[str] = []
        self.indent = 1
        self.used: set[str] = set(_RESERVED)
        self.vars: dict = {}          # relax.Var -> Python local
        self.syms: dict = {}          # symbolic dim name -> Python local (bound so far)
        self.kernel_globals: dict = {}
        self.constants: dict = {}
        self.objects: dict = {}
        self.n_kernel_calls = 0
        self.sig = FuncSig(name, [p.name_hint for p in func.params], [p.struct_info for p in func.params])
        self.arena_vars = _arena_candidates(func, kernels)
        self.arena: list = []
        self.arena_bytes = 0
        self.arena_slot: dict = {}    # relax.Var -> Python local holding its arena tensor
        self.var_trust: dict = {p: p.struct_info for p in func.params}
        # The binding each line computes (runtime/sites.py): where an error raised there is.
        self.site = None
        self.line_sites: list = []

    # ---- helpers
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)
        self.line_sites.append(self.site)

    def fresh(self, hint: str, internal: bool = False) -> str:
        """A new Python local for ``hint``. Names from the program never start with "_" here
        (those belong to the VM's helpers and globals) and never shadow a builtin it uses."""
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or (base[0] == "_" and not internal):
            base = "v" + base
        name = base
        k = 1
        while name in self.used or keyword.iskeyword(name):
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def glob(self, kind: str, value, store: dict, hint: str = "") -> str:
        for g, v in store.items():
            if v is value:
                return g
        g = f"{self.prefix}_{kind}{len(store)}" + (f"_{re.sub(r'[^0-9A-Za-z_]', '_', hint)}" if hint else "")
        store[g] = value
        return g

    def obj(self, value, hint: str = "") -> str:
        return self.glob("o", value, self.objects, hint)

    def error(self, message: str, span=None, var=None) -> BuildError:
        return BuildError(f"{message} ({_where(self.name, var)})", span)

    # ---- the function
    def run(self):
        from tvmscript.runtime.executable import VMFunction

        func = self.func
        params = []
        for p in func.params:
            local = self.fresh(p.name_hint)
            self.vars[p] = local
            params.append(local)
        sig_name = self.obj(self.sig, "sig")
        header = [f"def {self.pyname}(*args):",
                  f"    # Relax function '{self.name}'",
                  f"    if len(args) != {len(params)}: _arity({sig_name}, args)"]
        if params:
            header.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = args")
        self.header = header
        self.emit_param_checks(params, sig_name)
        self.emit_range_checks(sig_name)

        # Arena slots: one aligned block per frame, carved into the intermediate tensors.
        arena_locals = []
        for var, sinfo in self.arena_vars.items():
            shape = _static_shape(sinfo)
            itemsize = _itemsize(sinfo.dtype)
            n = 1
            for d in shape:
                n *= d
            offset = self.arena_bytes
            self.arena.append((offset, shape, sinfo.dtype))
            self.arena_bytes = _align(offset + max(n * itemsize, 1))
            local = self.fresh(var.name_hint)
            self.arena_slot[var] = local
            arena_locals.append(local)
        pool = f"{self.prefix}_pool"
        factory = f"{self.prefix}_frame"
        if arena_locals:
            self.emit("try:")
            self.emit(f"    _fr = {pool}.pop()")
            self.emit("except IndexError:")
            self.emit(f"    _fr = {factory}()")
            self.emit(f"{', '.join(arena_locals)}{',' if len(arena_locals) == 1 else ''} = _fr")

        result = self.seq(func.body)
        if arena_locals:
            self.emit(f"{pool}.append(_fr)")
        self.emit(f"return {result}")

        source = "\n".join(self.header + self.lines) + "\n"
        code = compile_source(source, f"<tvms vm: {self.name}>")
        first = len(self.header) + 1
        return VMFunction(
            name=self.name, pyname=self.pyname, sig=self.sig, source=source, code=code,
            kernels=self.kernel_globals, constants=self.constants, objects=self.objects,
            arena=self.arena, arena_bytes=self.arena_bytes, arena_names=(pool, factory),
            num_kernel_calls=self.n_kernel_calls,
            sites={first + i: site for i, site in enumerate(self.line_sites) if site is not None},
        )

    # ---- parameters
    def emit_param_checks(self, params: list, sig_name: str) -> None:
        deferred = []   # (param index, local, checks needing symbols bound by later params)
        for i, (p, local) in enumerate(zip(self.func.params, params)):
            sinfo = p.struct_info
            before = dict(self.syms)
            if isinstance(sinfo, relax.TensorStructInfo):
                later = self.tensor_check(local, sinfo, i, sig_name, before)
                if later:
                    deferred.append((i, local, later))
            elif sinfo is None or isinstance(sinfo, relax.ObjectStructInfo):
                continue
            else:
                self.generic_match(local, sinfo, f"{self.name}() argument '{p.name_hint}'", origin=i)
        for i, local, checks in deferred:
            conds = []
            for d, e in checks:
                conds.append(f"_s[{d}] != {self.dim(e, None)}")
            self.emit(f"_s = {local}._shape")
            self.emit(f"if {' or '.join(conds)}: _bad({sig_name}, {i}, {local}, {self.env_literal()})")

    def emit_range_checks(self, sig_name: str) -> None:
        """The function's ``tir_var_lower_bound``/``tir_var_upper_bound`` attributes (the ranges
        ``torch.export.Dim(min=, max=)`` gave a symbolic dim) checked for each symbol the
        parameters bound: a size outside its range is the caller's error, raised at entry."""
        for name, (lo, hi) in symbol_bounds(self.func).items():
            local = self.syms.get(name)
            if local is None:
                continue
            self.sig.sym_bounds[name] = (lo, hi)
            conds = ([f"{local} < {lo}"] if lo is not None else []) + ([f"{local} > {hi}"] if hi is not None else [])
            self.emit(f"if {' or '.join(conds)}: _out_of_range({sig_name}, {name!r}, {local})")

    def env_literal(self, syms: dict | None = None) -> str:
        syms = self.syms if syms is None else syms
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in syms.items()) + "}"

    def tensor_check(self, local: str, sinfo, i: int, sig_name: str, before: dict):
        """Fast checks of one tensor parameter; binds its new symbolic dims. Returns the dim
        checks that need symbols bound only by later parameters."""
        self.emit(f"if {local}.__class__ is not _Tensor: {local} = _coerce({local}, {sig_name}, {i})")
        bad = f"_bad({sig_name}, {i}, {local}, {self.env_literal(before)})"
        if sinfo.shape is not None and all(isinstance(d, tir.IntImm) for d in sinfo.shape):
            shape = _static_shape(sinfo)
            cond = f"{local}._shape != {shape!r}"
            if sinfo.dtype:
                cond += f" or {local}._dtype != {sinfo.dtype!r}"
            self.emit(f"if {cond}: {bad}")
            return []
        first = []
        if sinfo.dtype:
            first.append(f"{local}._dtype != {sinfo.dtype!r}")
        if sinfo.ndim >= 0:
            first.append(f"len(_s) != {sinfo.ndim}")
        if sinfo.shape is None:
            if first:
                self.emit(f"_s = {local}._shape")
                self.emit(f"if {' or '.join(first)}: {bad}")
            return []
        self.emit(f"_s = {local}._shape")
        if first:
            self.emit(f"if {' or '.join(first)}: {bad}")
        # Bind the dims that are a symbol seen for the first time.
        checks = []
        for d, e in enumerate(sinfo.shape):
            if isinstance(e, tir.Var) and e.name not in self.syms:
                py = self.fresh(e.name)
                self.emit(f"{py} = _s[{d}]")
                self.syms[e.name] = py
                self.sig.sym_origin.setdefault(e.name, (i, d))
            else:
                checks.append((d, e))
        now, later = [], []
        for d, e in checks:
            (now if _free_syms(e) <= set(self.syms) else later).append((d, e))
        if now:
            conds = [f"_s[{d}] != {self.dim(e, None)}" for d, e in now]
            bad_now = f"_bad({sig_name}, {i}, {local}, {self.env_literal(before)})"
            self.emit(f"if {' or '.join(conds)}: {bad_now}")
        return later

    def generic_match(self, local: str, sinfo, what: str, origin=None) -> None:
        """Check ``local`` against any struct info through the VM's general matcher, which binds
        new symbolic dims into the env dict it is given; the bound ones are read back."""
        names_before = set(self.syms)
        new = [n for n in relax.sinfo_symbols(sinfo) if n not in names_before]
        si = self.obj(sinfo, "sinfo")
        env = "_e" if new else self.env_literal()
        if new:
            self.emit(f"_e = {self.env_literal()}")
        self.emit(f"{local} = _match({local}, {si}, {env}, {what!r})")
        for n in new:
            py = self.fresh(n)
            self.emit(f"{py} = _e[{n!r}]")
            self.syms[n] = py
            if origin is not None:
                self.sig.sym_origin.setdefault(n, (origin, None))

    # ---- expressions
    def dim(self, e, var) -> str:
        """A TIR expression (a shape dim, a prim value) as Python, over the bound symbols."""
        if isinstance(e, tir.IntImm):
            if e.dtype == "bool":
                return "True" if e.value else "False"
            return str(int(e.value))
        if isinstance(e, tir.FloatImm):
            v = float(e.value)
            return repr(v) if v == v and v not in (float("inf"), float("-inf")) else f"float({str(v)!r})"
        if isinstance(e, tir.Var):
            if e.name not in self.syms:
                raise self.error(
                    f"symbolic dimension '{e.name}' is used before anything gives it a value "
                    f"(a parameter's shape or an R.match_cast must bind it)", getattr(e, "span", None), var)
            return self.syms[e.name]
        op = _BINOPS.get(type(e))
        if op is not None:
            return f"({self.dim(e.a, var)} {op} {self.dim(e.b, var)})"
        if isinstance(e, tir.Div):
            a, b = self.dim(e.a, var), self.dim(e.b, var)
            return f"_truncdiv({a}, {b})" if tir.is_int(e.dtype) else f"({a} / {b})"
        if isinstance(e, tir.Mod):
            return f"_truncmod({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Min):
            return f"min({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Max):
            return f"max({self.dim(e.a, var)}, {self.dim(e.b, var)})"
        if isinstance(e, tir.Not):
            return f"(not {self.dim(e.a, var)})"
        if isinstance(e, tir.Select):
            return (f"({self.dim(e.true_value, var)} if {self.dim(e.condition, var)} "
                    f"else {self.dim(e.false_value, var)})")
        if isinstance(e, tir.Cast):
            conv = "float" if tir.is_float(e.dtype) else ("bool" if e.dtype == "bool" else "int")
            return f"{conv}({self.dim(e.value, var)})"
        raise self.error(f"unsupported expression {type(e).__name__} in a shape or prim value", None, var)

    def shape_literal(self, sinfo, var) -> str:
        dims = [self.dim(d, var) for d in sinfo.shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def atom(self, e, var=None) -> str:
        """Python for a Relax expression; calls and ifs are bound to a temporary first."""
        if isinstance(e, relax.Var):
            if e not in self.vars:
                raise self.error(f"variable '{e.name_hint}' is used before it is defined",
                                 getattr(e, "span", None), var)
            return self.vars[e]
        if isinstance(e, relax.Constant):
            import numpy as np

            data = np.require(e.data, requirements="C")  # ascontiguousarray makes 0-d arrays 1-d
            return self.glob("c", data, self.constants)
        if isinstance(e, relax.Tuple):
            items = [self.atom(f, var) for f in e.fields]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(e, relax.TupleGetItem):
            return f"{self.atom(e.tuple_value, var)}[{int(e.index)}]"
        if isinstance(e, relax.ShapeExpr):
            dims = [self.dim(d, var) for d in e.values]
            return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        if isinstance(e, relax.PrimValue):
            return self.dim(e.value, var)
        if isinstance(e, (relax.StringImm, relax.DataTypeImm)):
            return repr(e.value)
        if isinstance(e, relax.ExternFunc):
            return f"_extern({e.global_symbol!r})"
        if isinstance(e, ir.GlobalVar):
            if e.name_hint in self.relax_funcs:
                return py_function_name(e.name_hint, list(self.relax_funcs).index(e.name_hint))
            raise self.error(f"'{e.name_hint}' is a T.prim_func: call it with R.call_tir", None, var)
        if isinstance(e, (relax.Call, relax.If, relax.SeqExpr)):
            tmp = self.fresh("_t", internal=True)
            self.bind_value(tmp, e, None)
            return tmp
        raise self.error(f"the VM cannot evaluate a {type(e).__name__} yet", getattr(e, "span", None), var)

    # ---- what is known for sure about values
    def trusted(self, e):
        """The struct info a value is known to satisfy at run time, in this function's symbols
        (None when nothing is certain: results of Relax function calls and ifs, whose struct
        info is the callee's claim, are not relied on for unchecked kernel calls)."""
        if isinstance(e, relax.Var):
            return self.var_trust.get(e)
        if isinstance(e, relax.Constant):
            return e.struct_info
        if isinstance(e, relax.TupleGetItem):
            t = self.trusted(e.tuple_value)
            if isinstance(t, relax.TupleStructInfo) and 0 <= e.index < len(t.fields):
                return t.fields[e.index]
        return None

    def trust_of_value(self, value):
        if isinstance(value, (relax.Var, relax.Constant, relax.TupleGetItem)):
            return self.trusted(value)
        if isinstance(value, relax.Tuple):
            return relax.TupleStructInfo([self.trusted(f) or relax.ObjectStructInfo() for f in value.fields])
        if isinstance(value, relax.Call):
            op = value.op
            if isinstance(op, relax.Op) and op.name in ("relax.call_tir", "relax.call_dps_packed",
                                                          "relax.builtin.alloc_tensor"):
                return value.struct_info
            if (isinstance(op, relax.ExternFunc) or isinstance(op, relax.Op)) and value.sinfo_args:
                return value.struct_info  # call_packed results are checked against it
        return None

    # ---- bodies
    def seq(self, s: relax.SeqExpr) -> str:
        for block in s.blocks:
            for b in block.bindings:
                self.binding(b)
        return self.atom(s.body)

    def binding(self, b) -> None:
        from tvmscript.runtime.sites import Site

        outer = self.site
        span = b.value.span if isinstance(b.value, relax.Call) else getattr(b.var, "span", None)
        self.site = Site(self.name, b.var.name_hint, span)
        try:
            self.bind(b)
        finally:
            self.site = outer

    def bind(self, b) -> None:
        var = b.var
        local = self.arena_slot.get(var)
        if local is None:
            local = self.fresh(var.name_hint) if var.name_hint != "_" else self.fresh("_u", internal=True)
        if isinstance(b, relax.MatchCast):
            value = self.atom(b.value, var)
            self.vars[var] = local
            self.emit(f"{local} = {value}")
            self.generic_match(local, b.struct_info, f"R.match_cast of '{var.name_hint}' in {self.name}()")
            self.var_trust[var] = b.struct_info
            return
        self.bind_value(local, b.value, var)
        self.vars[var] = local
        trust = self.trust_of_value(b.value)
        if trust is not None:
            self.var_trust[var] = trust

    def bind_value(self, local: str, value, var) -> None:
        if isinstance(value, relax.Call):
            self.call(local, value, var)
        elif isinstance(value, relax.If):
            self.if_(local, value, var)
        elif isinstance(value, relax.SeqExpr):
            saved = dict(self.syms)
            self.emit(f"{local} = {self.seq(value)}")
            self.syms = saved
        else:
            self.emit(f"{local} = {self.atom(value, var)}")

    def if_(self, local: str, e: relax.If, var) -> None:
        cond = self.atom(e.cond, var)
        csinfo = relax.struct_info_of(e.cond)
        test = cond if isinstance(csinfo, relax.PrimStructInfo) else f"_truth({cond})"
        self.emit(f"if {test}:")
        for branch in (e.true_branch, e.false_branch):
            self.indent += 1
            saved = dict(self.syms)
            mark = len(self.lines)
            result = self.seq(branch)
            self.emit(f"{local} = {result}")
            if len(self.lines) == mark:  # pragma: no cover - a branch always assigns
                self.emit("pass")
            self.syms = saved
            self.indent -= 1
            if branch is e.true_branch:
                self.emit("else:")

    # ---- calls
    def call(self, local: str, call: relax.Call, var) -> None:
        op = call.op
        if isinstance(op, relax.Op):
            name = op.name
            if name in ("relax.call_tir_inplace", "relax.call_tir_with_grad"):
                callee = call.args[0]
                if not isinstance(callee, ir.GlobalVar) or callee.name_hint not in self.kernels:
                    raise self.error(f"R.{name[len('relax.'):]} expects a T.prim_func of this module", call.span, var)
                return self.kernel_call(local, callee.name_hint, call, var, call.attrs.get("inplace_indices"))
            if name in ("relax.call_tir", "relax.call_dps_packed"):
                callee = call.args[0]
                if isinstance(callee, ir.GlobalVar):
                    if callee.name_hint not in self.kernels:
                        raise self.error(f"R.call_tir to '{callee.name_hint}', which is not a T.prim_func of "
                                         "this module", call.span, var)
                    return self.kernel_call(local, callee.name_hint, call, var)
                if isinstance(callee, relax.ExternFunc):
                    if callee.global_symbol in self.kernels:
                        return self.kernel_call(local, callee.global_symbol, call, var)
                    return self.dps_extern(local, callee.global_symbol, call, var)
                raise self.error(f"{name} expects a prim_func or an extern function name", call.span, var)
            if name == "relax.call_pure_packed":
                callee = call.args[0]
                return self.packed(local, callee, call.args[1:], call, var)
            if name == "relax.builtin.alloc_tensor":
                return self.alloc_tensor(local, call, var)
            if name == "relax.null_value":
                self.emit(f"{local} = None")  # TVM's vm.builtin.null_value: an empty object
                return None
            if name == "relax.shape_of":  # TVM's vm.builtin.shape_of: a Shape is a tuple of ints here
                self.emit(f"{local} = tuple({self.atom(call.args[0], var)}._shape)")
                return None
            if name == "relax.shape_to_tensor":  # runtime/vm.py: _shape_tensor
                self.emit(f"{local} = _shape_tensor({self.atom(call.args[0], var)})")
                return None
            if name in _EFFECT_OPS:
                values = [self.atom(a, var) for a in call.args]
                self.emit(f"{local} = {_EFFECT_OPS[name]}({', '.join(values)})")
                return None
            if name in _HOST_OPS:
                helper, attrs = _HOST_OPS[name]
                values = [self.atom(a, var) for a in call.args] + [repr(call.attrs[a]) for a in attrs]
                self.emit(f"{local} = {helper}({', '.join(values)})")
                return None
            raise self.error(f"{name} is not supported by the VM", call.span, var)
        if isinstance(op, relax.ExternFunc):
            return self.packed(local, op, call.args, call, var)
        if isinstance(op, ir.GlobalVar):
            if op.name_hint in self.relax_funcs:
                fn = py_function_name(op.name_hint, list(self.relax_funcs).index(op.name_hint))
                args = [self.atom(a, var) for a in call.args]
                self.emit(f"{local} = {fn}({', '.join(args)})")
                return None
            raise self.error(f"'{op.name_hint}' is a T.prim_func: call it with R.call_tir", call.span, var)
        # A call of a function value (a variable holding a function).
        fn = self.atom(op, var)
        args = [self.atom(a, var) for a in call.args]
        self.emit(f"{local} = {fn}({', '.join(args)})")
        return None

    def out_tensors(self, local: str, sinfos: list, var, arena_ok: bool, call) -> list:
        outs = []
        for k, s in enumerate(sinfos):
            if not isinstance(s, relax.TensorStructInfo) or s.shape is None or not s.dtype:
                raise self.error("the output of a call must have a known shape and dtype "
                                 "(out_sinfo=R.Tensor(shape, dtype))", call.span, var)
            if arena_ok and var is not None and var in self.arena_slot and len(sinfos) == 1:
                outs.append(self.arena_slot[var])
                continue
            name = local if len(sinfos) == 1 else self.fresh(f"{local}_{k}")
            self.emit(f"{name} = _empty({self.shape_literal(s, var)}, {s.dtype!r})")
            outs.append(name)
        return outs

    def kernel_call(self, local: str, kname: str, call: relax.Call, var, inplace=None) -> None:
        """A PrimFunc call: its arguments, then its new outputs. With ``inplace`` (call_tir_inplace's
        indices), output ``i`` is the argument ``inplace[i]``, which the kernel writes in place;
        only the outputs at -1 are allocated and passed after the arguments."""
        kernel = self.kernels[kname]
        args_tuple = call.args[1]
        if not isinstance(args_tuple, relax.Tuple):
            raise self.error("R.call_tir expects its arguments as a tuple", call.span, var)
        args = list(args_tuple.fields)
        tir_vars = list(call.args[2].values) if len(call.args) > 2 and isinstance(call.args[2], relax.ShapeExpr) else []
        sinfos = list(call.sinfo_args)
        arg_atoms = [self.atom(a, var) for a in args]
        tensors = list(zip(arg_atoms, [self.trusted(a) for a in args], [describe_arg(a) for a in args]))
        if inplace is None:
            outs = self.out_tensors(local, sinfos, var, True, call)
            tensors += [(o, s, f"output {k}") for k, (o, s) in enumerate(zip(outs, sinfos))]
        else:
            outs = self.inplace_outputs(local, inplace, arg_atoms, sinfos, var, call)
            tensors += [(outs[k], s, f"output {k}") for k, (i, s) in enumerate(zip(inplace, sinfos)) if i == -1]
        plan = _plan_kernel_args(kname, kernel, tensors, tir_vars, lambda m: self.error(m, call.span, var))
        self.n_kernel_calls += 1
        kglob = self.kernel_globals_name(kname)
        outer = self.site
        self.site = self.call_site(call, kname)
        if plan.runtime_check:
            scalars = "".join(f"{self.dim(e, var)}, " for e in plan.scalars)
            self.emit(f"_kcheck({self.obj(kernel, 'kernel_' + kname)}, ({', '.join(plan.buffer_atoms)},), "
                      f"{self.obj(self.site, 'site')}, ({scalars}))")
        # The kernel's machine-code ABI: buffer data pointers in parameter order, then the
        # scalar parameters (tir_vars), then one int64 per symbolic dim (kernel.sym_vars).
        values = [f"{atom}._ptr" for atom in plan.buffer_atoms]
        values += [self.dim(e, var) for e in plan.scalars]
        for kind, item in plan.syms:
            if kind == "expr":
                values.append(self.dim(item, var))
            elif kind == "shape":
                values.append(f"{item[0]}._shape[{item[1]}]")
            else:  # a stride of a compact tensor
                values.append(f"_stride({item[0]}, {item[1]})")
        self.emit(f"{kglob}({', '.join(values)})")
        self.emit("if _kerr: _kraise()")
        self.site = outer
        if len(outs) > 1:
            self.emit(f"{local} = ({', '.join(outs)},)")
        elif outs[0] != local:
            self.emit(f"{local} = {outs[0]}")

    def call_site(self, call: relax.Call, kname: str):
        """The `Site` of a kernel call: the binding it is in, the call's span, the kernel."""
        from tvmscript.runtime.sites import Site

        binding = self.site.binding if self.site is not None else ""
        return Site(self.name, binding, call.span, kname)

    def inplace_outputs(self, local: str, inplace, arg_atoms: list, sinfos: list, var, call) -> list:
        """call_tir_inplace's outputs: the argument named by each index, a new tensor at -1."""
        if len(inplace) != len(sinfos) or any(i < -1 or i >= len(arg_atoms) for i in inplace):
            raise self.error(f"R.call_tir_inplace: inplace_indices {list(inplace)} do not fit "
                             f"{len(arg_atoms)} argument(s) and {len(sinfos)} output(s)", call.span, var)
        outs = []
        for k, (i, s) in enumerate(zip(inplace, sinfos)):
            if i >= 0:
                outs.append(arg_atoms[i])
            else:
                outs += self.out_tensors(self.fresh(f"{local}_{k}"), [s], var, False, call)
        return outs

    def kernel_globals_name(self, kname: str) -> str:
        g = f"_K{list(self.kernels).index(kname)}_" + re.sub(r"\W", "_", kname)
        self.kernel_globals[g] = kname
        return g

    def dps_extern(self, local: str, fname: str, call: relax.Call, var) -> None:
        args_tuple = call.args[1]
        args = list(args_tuple.fields) if isinstance(args_tuple, relax.Tuple) else [args_tuple]
        arg_atoms = [self.atom(a, var) for a in args]
        outs = self.out_tensors(local, list(call.sinfo_args), var, False, call)
        self.emit(f"_extern({fname!r})({', '.join(arg_atoms + outs)})")
        if len(outs) > 1:
            self.emit(f"{local} = ({', '.join(outs)},)")

    def packed(self, local: str, callee, args: list, call: relax.Call, var) -> None:
        if not isinstance(callee, relax.ExternFunc):
            raise self.error("R.call_packed expects the function's name as a string", call.span, var)
        arg_atoms = [self.atom(a, var) for a in args]
        self.emit(f"{local} = _extern({callee.global_symbol!r})({', '.join(arg_atoms)})")
        sinfo = call.struct_info
        if sinfo is not None and not isinstance(sinfo, relax.ObjectStructInfo):
            self.generic_match(local, sinfo, f"the result of R.call_packed('{callee.global_symbol}') in {self.name}()")

    def alloc_tensor(self, local: str, call: relax.Call, var) -> None:
        if var is not None and var in self.arena_slot:
            if self.arena_slot[var] != local:  # pragma: no cover
                self.emit(f"{local} = {self.arena_slot[var]}")
            return
        shape = self.atom(call.args[0], var)
        dtype = call.args[1].value if isinstance(call.args[1], relax.DataTypeImm) else call.struct_info.dtype
        self.emit(f"{local} = _empty({shape}, {dtype!r})")


_RESERVED = {
    # the VM's helpers (runtime/vm.py) and the builtins the generated code uses
    "args", "_s", "_e", "_fr", "_Tensor", "_coerce", "_bad", "_arity", "_empty", "_match", "_extern", "_truth",
    "_kcheck", "_truncdiv", "_truncmod", "_kerr", "_kraise", "_stride", "min", "max", "int", "float", "bool",
    "_shape_tensor", "_sort", "_argsort", "_topk", "_dynamic_strided_slice",
    "len", "True", "False", "None",
}


def py_function_name(name: str, index: int) -> str:
    return f"_fn{index}_" + re.sub(r"\W", "_", name)


def compile_source(source: str, filename: str):
    return builtins.compile(source, filename, "exec")


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def _itemsize(dtype: str) -> int:
    m = re.match(r"^(bool|u?int|float|bfloat)(\d+)$", dtype) if dtype != "bool" else None
    if dtype == "bool":
        return 1
    if m is not None:
        return max(1, int(m.group(2)) // 8)
    try:
        from tvmscript.runtime.ndarray import _np_dtype

        return _np_dtype(dtype).itemsize
    except TypeError:
        raise BuildError(f"unknown dtype {dtype!r}") from None


# Function attributes giving symbolic dims their ranges, as TVM's importers write them:
# {"tir_var_upper_bound": {"seq": 15}} (inclusive bounds, by the symbol's name).
LOWER_BOUND_ATTR = "tir_var_lower_bound"
UPPER_BOUND_ATTR = "tir_var_upper_bound"


def symbol_bounds(func) -> dict:
    """``{symbol name: (lower or None, upper or None)}`` from a function's bound attributes."""
    attrs = getattr(func, "attrs", None) or {}
    out: dict = {}
    for key, side in ((LOWER_BOUND_ATTR, 0), (UPPER_BOUND_ATTR, 1)):
        for name, value in dict(attrs.get(key) or {}).items():
            pair = out.setdefault(str(name), [None, None])
            pair[side] = int(value.value if isinstance(value, tir.IntImm) else value)
    return {name: tuple(pair) for name, pair in out.items()}


def _free_syms(e) -> set:
    """Names of the symbolic dims an expression uses."""
    from tvmscript.ir.tir_visitor import vars_in

    return {v.name for v in vars_in([e])}


# ----------------------------------------------------------------------------- call_tir arguments


class _KernelPlan:
    __slots__ = ("scalars", "syms", "runtime_check", "buffer_atoms")

    def __init__(self) -> None:
        self.buffer_atoms = []  # per buffer parameter, in order: the Python expression of its tensor
        self.scalars = []       # per scalar parameter, in order: the tir_vars expression
        self.syms = []          # per kernel sym var: ("expr", relax dim) | ("shape"/"stride", (atom, dim))
        self.runtime_check = False


def _plan_kernel_args(kname: str, kernel, tensors: list, tir_vars: list, error) -> _KernelPlan:
    """Match a call_tir's tensors (inputs then outputs) and tir_vars against the kernel's
    parameters. Mismatches the build can see are errors; what it cannot prove (a dim that is
    symbolic on the Relax side, an unknown dtype) is checked at run time."""
    plan = _KernelPlan()
    params = list(kernel.params)
    buffers = [p for p in params if p.kind == "buffer"]
    scalars = [p for p in params if p.kind != "buffer"]
    n_in = sum(1 for t in tensors if not t[2].startswith("output"))
    if len(buffers) != len(tensors):
        raise error(
            f"R.call_tir to '{kname}' passes {n_in} argument(s) and {len(tensors) - n_in} output(s), "
            f"but the prim_func has {len(buffers)} buffer parameter(s) ({', '.join(p.name for p in buffers)})")
    if len(scalars) != len(tir_vars):
        raise error(f"R.call_tir to '{kname}' passes {len(tir_vars)} tir_vars, but the prim_func has "
                    f"{len(scalars)} scalar parameter(s) ({', '.join(p.name for p in scalars) or 'none'})")
    sym_src: dict = {}   # kernel sym name -> ("expr", relax dim) | ("shape", (atom, d))
    stride_src: dict = {}
    it_t = iter(tensors)
    it_s = iter(tir_vars)
    scalar_values = {}
    for p in params:
        if p.kind != "buffer":
            e = next(it_s)
            plan.scalars.append(e)
            scalar_values[p.name] = e
            continue
        atom, sinfo, desc = next(it_t)
        plan.buffer_atoms.append(atom)
        if p.strides is not None:
            # Declared strides: VM tensors are compact, which the run-time check compares.
            plan.runtime_check = True
            for d, st in enumerate(p.strides):
                if isinstance(st, str) and st.isidentifier() and st not in stride_src:
                    stride_src[st] = ("stride", (atom, d))
        want = f'T.Buffer({_shape_text(p.shape)}, "{p.dtype}")'
        if sinfo is not None and not isinstance(sinfo, (relax.TensorStructInfo, relax.ObjectStructInfo)):
            raise error(f"R.call_tir to '{kname}': {desc} is {_sinfo_text(sinfo)}, "
                        f"but parameter '{p.name}' is a buffer")
        if not isinstance(sinfo, relax.TensorStructInfo):
            plan.runtime_check = True
            for d, kd in enumerate(p.shape):
                if isinstance(kd, str) and kd.isidentifier() and kd not in sym_src:
                    sym_src[kd] = ("shape", (atom, d))
            continue
        got = _sinfo_text(sinfo)
        if sinfo.dtype and sinfo.dtype != p.dtype:
            raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} (dtype differs)")
        if not sinfo.dtype:
            plan.runtime_check = True
        if sinfo.ndim >= 0 and sinfo.ndim != len(p.shape):
            raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                        f"({sinfo.ndim}-d vs {len(p.shape)}-d)")
        if sinfo.shape is None:
            plan.runtime_check = True
            for d, kd in enumerate(p.shape):
                if isinstance(kd, str) and kd.isidentifier() and kd not in sym_src:
                    sym_src[kd] = ("shape", (atom, d))
            continue
        for d, (kd, rd) in enumerate(zip(p.shape, sinfo.shape)):
            if isinstance(kd, int):
                if isinstance(rd, tir.IntImm):
                    if int(rd.value) != kd:
                        raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                                    f"(dimension {d}: {int(rd.value)} vs {kd})")
                else:
                    plan.runtime_check = True
                continue
            if not kd.isidentifier():  # an expression over the kernel's symbols, e.g. "(n * 2)"
                plan.runtime_check = True
                continue
            src = sym_src.get(kd)
            if src is None:
                sym_src[kd] = ("expr", rd)
            elif src[0] == "expr":
                a, b = src[1], rd
                if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
                    if a.value != b.value:
                        raise error(f"R.call_tir to '{kname}': {desc} is {got}, but parameter '{p.name}' is {want} "
                                    f"and '{kd}' was already {int(a.value)} (dimension {d} is {int(b.value)})")
                elif not _same_dim(a, b):
                    plan.runtime_check = True
            else:
                plan.runtime_check = True
    for s in getattr(kernel, "sym_vars", ()):
        src = sym_src.get(s) or stride_src.get(s)
        if src is None:
            if s in scalar_values:
                plan.syms.append(("expr", scalar_values[s]))
                continue
            raise error(f"R.call_tir to '{kname}': the value of its symbolic dimension '{s}' cannot be found "
                        f"from the shapes of its arguments")
        plan.syms.append(src)
    return plan


def _same_dim(a, b) -> bool:
    from tvmscript.ir.structural import StructuralEqual

    if isinstance(a, tir.Var) and isinstance(b, tir.Var):
        return a.name == b.name
    return StructuralEqual(map_free_vars=False).equal(a, b)


def _shape_text(shape) -> str:
    items = [str(d) if isinstance(d, int) else d for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
