"""The CPU build: TensorIR kernels compiled for the host CPU, as JIT-loaded machine code.

``build_cpu(funcs)`` takes ``{name: tir.PrimFunc}`` (or an `IRModule`, whose PrimFuncs are
taken, or a lone PrimFunc), applies the CPU default schedule (`compiler.schedule_cpu`), lowers
and generates LLVM IR (`compiler.codegen_llvm`), optimizes it with LLVM's new pass manager (O2
with loop and SLP vectorization by default), and JIT-compiles it with MCJIT into a
`runtime.cpu.CPUModule`; all kernels of one call share one LLVM module and one execution
engine::

    mod = build_cpu(ir_mod)
    mod["linear0"](x, w, b, out)        # a runtime.kernel.Kernel, destination-passing
    print(mod.get_source("asm"))

Compiled modules are cached by `compiler.build_cache.BuildCache` (shared with the CUDA
backend): in memory, keyed by a structural hash of the functions (names of variables do not
matter, as in `tvmscript.ir.structural_equal`) and the build options, a hit confirmed with
`structural_equal` against a private copy of the functions it was built from (kept pickled:
pickling is several times cheaper than `copy.deepcopy` on a cold build). They are also kept
on disk (`tvmscript.cache`, subfolder ``cpu``): the kernels' machine code
(the ELF object MCJIT produced, position-independent), their signatures and the functions
they were built from, under a name hashing the in-memory key with `compiler_fingerprint`.
Another process building structurally equal functions with the same options on the same CPU
loads that object (`runtime.cpu.load_object`) instead of scheduling, generating code and
running LLVM: a second cold ``tvms run`` of a file spends no time in LLVM. The same object is
what ``export_library`` links into a shared library (`runtime.library`).

Kernels are optimized with LLVM's O3 pipeline, loop and SLP vectorization on, but loops are
unrolled and vector loops interleaved only where the IR asks for it (the annotations the
default schedule puts on the loops it creates, and small loop nests; see
`compiler.codegen_llvm.optimize`): LLVM's own heuristics unroll every loop they can, which
multiplies the code it then optimizes and selects instructions for — the seed MLP compiled
about four times slower (350 ms instead of ~80 ms) and its kernels ran no faster.

This is the compiler's half of the CPU backend; the runtime's half (`runtime.cpu`: libgomp
and its wait policy, the JIT-loaded module, loading machine code) runs compiled kernels
without it.
"""

from __future__ import annotations

from typing import Optional

import llvmlite.binding as llvm

from tvmscript import ir as tir_ir
from tvmscript.ir import tir
from tvmscript.runtime.cpu import CPUModule, bind_kernels, load_object, parallel_runtime
from tvmscript.runtime.host_cpu import HostTarget, host_target

from . import codegen_llvm, progress
from .build_cache import BuildCache
from .codegen_llvm import init_llvm
from .kernel_places import numbered_spans

__all__ = ["build_cpu", "clear_cache"]


def _as_func_dict(funcs) -> dict:
    if isinstance(funcs, tir.PrimFunc):
        return {funcs.attrs.get("global_symbol") or "main": funcs}
    if isinstance(funcs, tir_ir.IRModule):
        return {gv.name_hint: f for gv, f in funcs.functions.items() if isinstance(f, tir.PrimFunc)}
    if isinstance(funcs, dict):
        return dict(funcs)
    raise TypeError(f"build_cpu expects a dict of PrimFuncs, an IRModule or a PrimFunc, not {type(funcs).__name__}")


_builds = BuildCache("cpu", b"TVMSCPU2")


def clear_cache() -> None:
    """Forget the kernels built in this process (the disk cache stays)."""
    _builds.clear()


def build_cpu(funcs, *, schedule: bool = True, opt_level: int = 3, use_cache: bool = True,
              parallel: Optional[str] = None, bounds_check: bool = True,
              target: Optional[HostTarget] = None) -> CPUModule:
    """Compile PrimFuncs for the host CPU (or ``target``'s, see `compiler.llvm_target`: the
    kernels of another CPU are there to print and export, and refuse to run here).

    ``schedule``: apply `compiler.schedule_cpu.default_schedule` first (it never changes
    results). ``opt_level``: LLVM's optimization level, 0 to 3. ``parallel``: ``"gomp"``/``"serial"`` to force a parallel runtime
    (default: gomp when libgomp is present). ``bounds_check``: accesses not proven in bounds
    are checked at run time (`compiler.bounds_check`). Structurally equal inputs built with equal
    options return the same cached `CPUModule`; ``use_cache`` also looks in, and adds to, the
    disk cache (see the module docstring)."""
    funcs = _as_func_dict(funcs)
    init_llvm()
    runtime = parallel_runtime()
    if parallel is not None:
        if parallel not in ("gomp", "serial"):
            raise ValueError("parallel must be 'gomp' or 'serial'")
        if parallel == "gomp" and runtime != "gomp":
            raise RuntimeError("libgomp is not available in this process")
        runtime = parallel
    target = target or host_target()
    # The default schedule fits its tiles to the threads parallel loops run on, and to the
    # target's vector registers: `target` (its CPU and features) is in the key.
    from .schedule_cpu import parallel_threads

    options = (bool(schedule), int(opt_level), runtime, target, parallel_threads() if schedule else 0,
               bool(bounds_check))
    if not use_cache:
        return _build(funcs, schedule, opt_level, runtime, target, bounds_check)
    return _builds.build(funcs, options, lambda: _build(funcs, schedule, opt_level, runtime, target, bounds_check),
                         _disk_entry, lambda entry: _from_disk_entry(entry, target, opt_level, runtime))


def _build(funcs: dict, schedule: bool, opt_level: int, runtime: str, target: HostTarget,
           bounds_check: bool = True) -> CPUModule:
    # Numbered before the schedule moves them: the runtime numbers the PrimFuncs it was given.
    places = {n: numbered_spans(f) for n, f in funcs.items()}
    if schedule:
        from .schedule_cpu import default_schedule, scheduling_for

        scheduled = {}
        with scheduling_for(target):  # tiles sized by the target's vector registers, not this machine's
            for i, (n, f) in enumerate(funcs.items()):
                progress.report("scheduling kernels", i, len(funcs))
                scheduled[n] = default_schedule(f)
        funcs = scheduled
    result = codegen_llvm.codegen(funcs, parallel_runtime=runtime, target=target, bounds_check=bounds_check,
                                  places=places)
    text = str(result.module)
    tm = target.target_machine(opt_level)
    progress.report(f"LLVM: optimizing and compiling {len(funcs)} kernels")
    llmod = optimized(text, tm, target, opt_level)
    engine = llvm.create_mcjit_compiler(llmod, tm)
    objects: list = []
    engine.set_object_cache(notify_func=lambda _module, buffer: objects.append(bytes(buffer)))
    engine.finalize_object()
    engine.run_static_constructors()
    # The engine owns (and keeps alive) llmod: its text is printed only if someone asks.
    module = CPUModule(engine, tm, {}, llmod, text, target, runtime, b"".join(objects[:1]), opt_level,
                       result.kernels, reoptimize=optimized)
    bind_kernels(module, engine.get_function_address)
    module.packed_layouts = packed_layouts(funcs)
    return module


def packed_layouts(scheduled: dict) -> dict:
    """Kernel -> {parameter index: `PackedLayout`}: the layouts the default schedule gave
    parameters bound to constants, which the build packs the constants into
    (`compiler.prepack_constants`); a module carries them, its disk cache entry too."""
    from .schedule_cpu.prepack import PACKED_LAYOUTS_ATTR

    return {name: dict(f.attrs[PACKED_LAYOUTS_ATTR]) for name, f in scheduled.items()
            if f.attrs.get(PACKED_LAYOUTS_ATTR)}


def optimized(text: str, tm, target: HostTarget, opt_level: int):
    """The llvmlite module of generated IR ``text``, verified and optimized at ``opt_level``:
    what the JIT compiles, and what `CPUModule.get_source` prints for a module whose machine
    code came from the disk cache."""
    llmod = llvm.parse_assembly(text)
    llmod.triple = target.triple
    llmod.data_layout = str(tm.target_data)
    llmod.verify()
    if opt_level > 0:
        codegen_llvm.optimize(llmod, tm, speed_level=opt_level)
    return llmod


# ----------------------------------------------------------------------------- the disk cache
#
# A second process building the same kernels loads their machine code instead of running the
# schedule, the code generator and LLVM again (a cold `tvms run` spends most of its time
# there): `compiler.build_cache.BuildCache` keys, validates and stores the entries; these say
# what one holds.


def _disk_entry(module: CPUModule) -> Optional[dict]:
    if not module.object_code:
        return None
    return {"infos": list(module.infos), "object": module.object_code, "llvm_ir_unopt": module.llvm_ir_unopt,
            "parallel": module.parallel_runtime, "packed_layouts": module.packed_layouts}


def _from_disk_entry(entry: dict, target: HostTarget, opt_level: int, runtime: str) -> Optional[CPUModule]:
    if entry["parallel"] != runtime:
        return None
    tm = target.target_machine(opt_level)
    module = load_object(entry["object"], tm, entry["infos"], entry["llvm_ir_unopt"], target, runtime, opt_level,
                         reoptimize=optimized)
    module.from_disk_cache = True
    module.packed_layouts = entry.get("packed_layouts", {})
    return module
