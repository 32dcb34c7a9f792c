"""JIT compilation of TensorIR kernels for the host CPU.

``build_cpu(funcs)`` takes ``{name: tir.PrimFunc}`` (or an `IRModule`, whose PrimFuncs are
taken, or a lone PrimFunc), applies the CPU default schedule (`compiler.schedule_cpu`), lowers
and generates LLVM IR (`compiler.codegen_llvm`), optimizes it with LLVM's new pass manager (O2
with loop and SLP vectorization by default), and JIT-compiles it with MCJIT into a
`CPUModule`; all kernels of one call share one LLVM module and one execution engine::

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
loads that object (`load_object`) instead of scheduling, generating code and running LLVM:
a second cold ``tvms run`` of a file spends no time in LLVM. The same object is what
``export_library`` links into a shared library (`runtime.library`).

Kernels are optimized with LLVM's O3 pipeline, loop and SLP vectorization on, but loops are
unrolled and vector loops interleaved only where the IR asks for it (the annotations the
default schedule puts on the loops it creates, and small loop nests; see
`compiler.codegen_llvm.optimize`): LLVM's own heuristics unroll every loop they can, which
multiplies the code it then optimizes and selects instructions for — the seed MLP compiled
about four times slower (350 ms instead of ~80 ms) and its kernels ran no faster.

Parallel loops run on libgomp (`parallel_runtime`), whose idle workers by default spin for
~300,000 iterations (~6 ms on the machine measured) after each parallel region before they
sleep: on a busy machine they take cores from everything else, and from the caller itself
(the batch-1 MLP once took 496x NumPy's time with two busy processes on a 2-core machine).
Unless the user has set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``, tvms loads libgomp with
``GOMP_SPINCOUNT=TVMS_SPINCOUNT`` (10,000: ~0.2 ms of spinning, enough to catch the next
region of the same model call, as the kernels of one VM call follow each other within
microseconds; then the workers sleep: ~30x less than libgomp's default. With 1,000 (~20 us),
the batch-64 MLP measured 165 us in one run and 390 us in the next, a worker often asleep
by the next kernel, each wake-up tens of microseconds), set
in the environment only while libgomp loads (it reads it then, once), so the user's environment
and child processes keep theirs. Fully passive (0) measured no better for latency under load
and costs a futex wake-up (10-70 us on a virtual machine) on every region. libgomp is shared
per process: PyTorch's wheels bring their own ``libgomp.so.1`` (same soname), and if torch is
imported first, tvms uses that copy with the policy it was loaded with (`wait_policy` says
so); if tvms comes first, torch uses tvms's copy and policy. Small loops never wake the
workers at all (`compiler.codegen_llvm.PARALLEL_MIN_WORK_PER_THREAD`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from typing import Optional

import llvmlite.binding as llvm

from tvmscript import ir as tir_ir
from tvmscript.ir.structural import structural_hash  # noqa: F401  (re-exported)
from tvmscript.compiler.build_cache import BuildCache, compiler_fingerprint  # noqa: F401  (re-exported)
from tvmscript.ir import tir
from tvmscript.compiler import codegen_llvm, progress
from tvmscript.compiler.codegen_llvm import ASSERT_FAIL_SYMBOL, BOUNDS_FAIL_SYMBOL, HostTarget, host_target, init_llvm

from . import kernel as kernel_mod
from .kernel import Kernel

__all__ = ["CPUModule", "build_cpu", "structural_hash", "clear_cache", "parallel_runtime", "wait_policy",
           "TVMS_SPINCOUNT"]


# ----------------------------------------------------------------------------- runtime libraries

_runtime_lock = threading.Lock()
_parallel_runtime: Optional[str] = None
_wait_policy = ""
WAIT_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
TVMS_SPINCOUNT = 10_000  # idle workers spin ~0.2 ms, then sleep (see the module docstring)


def parallel_runtime() -> str:
    """``"gomp"`` when libgomp could be loaded into the process (parallel loops use it), else
    ``"serial"``. Also registers the kernels' assertion callback with LLVM's symbol table."""
    global _parallel_runtime
    with _runtime_lock:
        if _parallel_runtime is None:
            init_llvm()
            llvm.add_symbol(ASSERT_FAIL_SYMBOL, kernel_mod.assert_callback_address())
            llvm.add_symbol(BOUNDS_FAIL_SYMBOL, kernel_mod.bounds_callback_address())
            # libgcc's float16 helpers (__truncsfhf2, ...) for hosts without F16C.
            try:
                llvm.load_library_permanently("libgcc_s.so.1")
            except RuntimeError:
                pass
            _parallel_runtime = "gomp" if _load_libgomp() else "serial"
    return _parallel_runtime


def _load_libgomp() -> bool:
    """Load libgomp for the JIT's symbol lookups, with tvms's wait policy (`wait_policy`)
    in the environment while it loads (libgomp reads it once, when it is loaded); whether
    ``GOMP_parallel`` can be found."""
    global _wait_policy
    preloaded = _loaded_libgomp()
    user = {k: os.environ[k] for k in WAIT_POLICY_VARS if k in os.environ}
    if user:
        _wait_policy = "set by the user: " + ", ".join(f"{k}={v}" for k, v in user.items())
    elif preloaded:
        _wait_policy = (f"libgomp's own (it was loaded before tvms, from {preloaded}: tvms shares it and "
                        "cannot set its policy)")
    else:
        _wait_policy = f"GOMP_SPINCOUNT={TVMS_SPINCOUNT} (tvms's default)"
    with _policy_in_environment(not user and not preloaded):
        for name in ["libgomp.so.1", ctypes.util.find_library("gomp")]:
            if not name:
                continue
            try:
                llvm.load_library_permanently(name)
            except RuntimeError:
                continue
            if llvm.address_of_symbol("GOMP_parallel"):
                return True
    _wait_policy = "none (no libgomp: parallel loops run on the calling thread)"
    return False


@contextlib.contextmanager
def _policy_in_environment(apply: bool):
    """``GOMP_SPINCOUNT=TVMS_SPINCOUNT`` in ``os.environ`` (and the C environment libgomp
    reads) inside the block when ``apply``, removed again after it: only the libgomp loaded
    inside sees it, not the user's child processes."""
    if not apply:
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = str(TVMS_SPINCOUNT)
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


def _loaded_libgomp() -> Optional[str]:
    """The path of a libgomp already mapped into this process (PyTorch's wheels bring their
    own copy, torch/lib/libgomp.so.1, with the same soname as the system's: once torch is
    imported, loading "libgomp.so.1" gives torch's copy, already initialized), else None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libgomp" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def wait_policy() -> str:
    """How the idle workers of tvms's libgomp wait for work, in words: tvms's default
    (``GOMP_SPINCOUNT=TVMS_SPINCOUNT``), the user's ``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT``
    when either is set, or libgomp's own when it was loaded before tvms (e.g. by PyTorch)."""
    parallel_runtime()
    return _wait_policy


# ----------------------------------------------------------------------------- module


class CPUModule:
    """JIT-compiled kernels, by prim_func name. Holds the LLVM execution engine alive, and the
    kernels' machine code as an ELF object (``object_code``: what the disk cache keeps and
    ``export_library`` links into a shared library)."""

    def __init__(self, engine, target_machine, kernels: dict, llvm_ir, llvm_ir_unopt: str,
                 target: HostTarget, parallel: str, object_code: bytes = b"", opt_level: int = 3,
                 infos: tuple = ()) -> None:
        self._engine = engine
        self._tm = target_machine
        self.kernels: dict = kernels
        # text, the engine's optimized llvmlite module (printed on demand), or None for a module
        # loaded from the disk cache (optimized again from the unoptimized text if asked)
        self._llvm_ir = llvm_ir
        self._llvm_ir_unopt = llvm_ir_unopt
        self._asm: Optional[str] = None
        self.target = target
        self.parallel_runtime = parallel
        self.object_code = object_code
        self.opt_level = opt_level
        self.infos = tuple(infos)  # codegen_llvm.KernelInfo of each kernel, for export_library
        self.from_disk_cache = False
        # why the code cannot run in this process (built for another CPU), or None
        self.unrunnable = None if target == host_target() else target.unrunnable_on(host_target())

    def check_runnable(self) -> None:
        """A RuntimeError when the kernels were generated for a CPU this machine may not be
        (``llvm -mcpu=...``): calling them could stop the process with an illegal instruction.
        Their machine code is still there to print or export."""
        if self.unrunnable:
            raise RuntimeError(f"these kernels cannot run here: {self.unrunnable}. Compile them without "
                               "-mcpu/-mattr to run them here, or export_library() and load the library on a "
                               f"{self.target.cpu}")

    def __getitem__(self, name: str) -> Kernel:
        self.check_runnable()
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"the module has no kernel named {name!r} (it has: {', '.join(self.kernels)})") from None

    def __contains__(self, name) -> bool:
        return name in self.kernels

    def __iter__(self):
        return iter(self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    def keys(self):
        return self.kernels.keys()

    def get_function(self, name: str) -> Kernel:
        return self[name]

    def get_source(self, fmt: str = "llvm") -> str:
        """``"llvm"``: the optimized LLVM IR; ``"llvm-unopt"``: as generated; ``"asm"``: the
        host assembly."""
        if fmt in ("llvm", "ll"):
            if self._llvm_ir is None:
                self._llvm_ir = _optimized(self._llvm_ir_unopt, self._tm, self.target, self.opt_level)
            if not isinstance(self._llvm_ir, str):
                self._llvm_ir = str(self._llvm_ir)
            return self._llvm_ir
        if fmt in ("llvm-unopt", "ll-unopt"):
            return self._llvm_ir_unopt
        if fmt in ("asm", "s"):
            if self._asm is None:
                m = llvm.parse_assembly(self.get_source("llvm"))
                self._asm = self._tm.emit_assembly(m)
            return self._asm
        raise ValueError(f"unknown source format {fmt!r} (expected 'llvm', 'llvm-unopt' or 'asm')")

    def __repr__(self) -> str:
        return f"CPUModule({', '.join(self.kernels)}; {self.target.cpu}, parallel={self.parallel_runtime})"


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
    runtime = parallel_runtime()
    if parallel is not None:
        if parallel not in ("gomp", "serial"):
            raise ValueError("parallel must be 'gomp' or 'serial'")
        if parallel == "gomp" and runtime != "gomp":
            raise RuntimeError("libgomp is not available in this process")
        runtime = parallel
    target = target or host_target()
    # The default schedule fits its tiles to the threads parallel loops run on.
    from tvmscript.compiler.schedule_cpu import parallel_threads

    options = (bool(schedule), int(opt_level), runtime, target, parallel_threads() if schedule else 0,
               bool(bounds_check))
    if not use_cache:
        return _build(funcs, schedule, opt_level, runtime, target, bounds_check)
    return _builds.build(funcs, options, lambda: _build(funcs, schedule, opt_level, runtime, target, bounds_check),
                         _disk_entry, lambda entry: _from_disk_entry(entry, target, opt_level, runtime))


def _build(funcs: dict, schedule: bool, opt_level: int, runtime: str, target: HostTarget,
           bounds_check: bool = True) -> CPUModule:
    from tvmscript.compiler.kernel_places import numbered_spans

    # Numbered before the schedule moves them: the runtime numbers the PrimFuncs it was given.
    places = {n: numbered_spans(f) for n, f in funcs.items()}
    if schedule:
        from tvmscript.compiler.schedule_cpu import default_schedule

        scheduled = {}
        for i, (n, f) in enumerate(funcs.items()):
            progress.report("scheduling kernels", i, len(funcs))
            scheduled[n] = default_schedule(f)
        funcs = scheduled
    result = codegen_llvm.codegen(funcs, parallel_runtime=runtime, target=target, bounds_check=bounds_check,
                                  places=places)
    text = str(result.module)
    tm = target.target_machine(opt_level)
    progress.report(f"LLVM: optimizing and compiling {len(funcs)} kernels")
    llmod = _optimized(text, tm, target, opt_level)
    engine = llvm.create_mcjit_compiler(llmod, tm)
    objects: list = []
    engine.set_object_cache(notify_func=lambda _module, buffer: objects.append(bytes(buffer)))
    engine.finalize_object()
    engine.run_static_constructors()
    # The engine owns (and keeps alive) llmod: its text is printed only if someone asks.
    module = CPUModule(engine, tm, {}, llmod, text, target, runtime, b"".join(objects[:1]), opt_level,
                       result.kernels)
    bind_kernels(module, engine.get_function_address)
    return module


def _optimized(text: str, tm, target: HostTarget, opt_level: int):
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


def bind_kernels(module, address_of) -> None:
    """Fill ``module.kernels`` (a `CPUModule`, or a loaded library's `runtime.library.
    LibraryModule`) from its kernel infos, ``address_of(symbol)`` giving each kernel's entry
    point; the module is each kernel's owner (it keeps the code alive)."""
    for info in module.infos:
        addr = address_of(info.symbol)
        if not addr:
            raise RuntimeError(f"no address for kernel symbol {info.symbol}")
        module.kernels[info.name] = Kernel(info.name, info.params, info.sym_vars, addr, info.symbol, owner=module)


# ----------------------------------------------------------------------------- the disk cache
#
# A second process building the same kernels loads their machine code instead of running the
# schedule, the code generator and LLVM again (a cold `tvms run` spends most of its time
# there): `compiler.build_cache.BuildCache` keys, validates and stores the entries; these say
# what one holds.


def llvm_version() -> str:
    import llvmlite

    return f"{llvmlite.__version__}/{'.'.join(map(str, llvm.llvm_version_info))}"


def _disk_entry(module: CPUModule) -> Optional[dict]:
    if not module.object_code:
        return None
    return {"infos": list(module.infos), "object": module.object_code, "llvm_ir_unopt": module._llvm_ir_unopt,
            "parallel": module.parallel_runtime}


def _from_disk_entry(entry: dict, target: HostTarget, opt_level: int, runtime: str) -> Optional[CPUModule]:
    if entry["parallel"] != runtime:
        return None
    tm = target.target_machine(opt_level)
    module = load_object(entry["object"], tm, entry["infos"], entry["llvm_ir_unopt"], target, runtime, opt_level)
    module.from_disk_cache = True
    return module


def load_object(object_code: bytes, tm, infos: list, llvm_ir_unopt: str, target: HostTarget, runtime: str,
                opt_level: int = 3) -> CPUModule:
    """A `CPUModule` from machine code LLVM produced earlier: linked into this process by
    MCJIT's loader, with no optimization or code generation."""
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    module = CPUModule(engine, tm, {}, None, llvm_ir_unopt, target, runtime, object_code, opt_level, infos)
    bind_kernels(module, engine.get_function_address)
    return module
