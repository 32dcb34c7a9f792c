"""The CPU runtime: the parallel runtime kernels run on, and compiled kernels loaded into the
process.

`CPUModule` holds JIT-loaded kernels by prim_func name (each a `runtime.kernel.Kernel`) and the
MCJIT execution engine that keeps their machine code alive. The compiler makes one from the IR
it generates (`compiler.build_cpu`); `load_object` makes one from machine code compiled
earlier (the compiler's disk cache), with no optimization or code generation.

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
import weakref
from typing import Optional

import llvmlite.binding as llvm

from . import kernel as kernel_mod
from .host_cpu import HostTarget, host_target
from .kernel import Kernel
from .kernel_abi import (ASSERT_FAIL_SYMBOL, BOUNDS_FAIL_SYMBOL, RELEASE_SCRATCH_SYMBOL, SCRATCH_BUDGET_SYMBOL,
                         THREADS_SYMBOL)

__all__ = ["CPUModule", "load_object", "bind_kernels", "parallel_runtime", "wait_policy", "num_threads",
           "default_threads", "TVMS_SPINCOUNT"]


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
            llvm.add_symbol(ASSERT_FAIL_SYMBOL, kernel_mod.assert_callback_address())
            llvm.add_symbol(BOUNDS_FAIL_SYMBOL, kernel_mod.bounds_callback_address())
            _threads.value = default_threads()
            llvm.add_symbol(THREADS_SYMBOL, ctypes.addressof(_threads))
            _scratch_left.value = scratch_budget()
            llvm.add_symbol(SCRATCH_BUDGET_SYMBOL, ctypes.addressof(_scratch_left))
            # libgcc's float16 helpers (__truncsfhf2, ...) for hosts without F16C.
            try:
                llvm.load_library_permanently("libgcc_s.so.1")
            except RuntimeError:
                pass
            _parallel_runtime = "gomp" if _load_libgomp() else "serial"
    return _parallel_runtime


# The most threads a kernel's parallel loop runs on, which the kernels read (`THREADS_SYMBOL`).
# Not libgomp's omp_get_max_threads(): PyTorch shares the process's libgomp and sets its
# thread count (torch.set_num_threads, or its own default, 1 on a machine whose two CPUs it
# counts as one core), which made every tvms kernel run on one thread after `import torch`
# (mobilenet_v2: 6.5 ms instead of 4.0).
_threads = ctypes.c_int32(1)


# Bytes of scratch blocks the JIT-compiled kernels may still keep between calls
# (`SCRATCH_BUDGET_SYMBOL`; `compiler.codegen_llvm.scratch`): they take from it and give back.
_scratch_left = ctypes.c_int64(0)


def scratch_budget() -> int:
    """The most bytes of scratch blocks a process's kernels keep between calls:
    ``TVMS_SCRATCH_KEEP_MB`` mebibytes when set (0: keep none), else 256 MiB."""
    value = os.environ.get("TVMS_SCRATCH_KEEP_MB", "").strip()
    return (int(value) if value.isdigit() else 256) << 20


def default_threads() -> int:
    """Threads a parallel loop runs on unless told otherwise: ``OMP_NUM_THREADS`` (its first
    value) when set, as libgomp reads it, else the CPUs this process may run on. The default
    schedule fits its tiles to it too (`compiler.schedule_cpu.parallel_threads`)."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def num_threads() -> int:
    """The most threads the kernels' parallel loops run on in this process (`default_threads`
    when the runtime started)."""
    parallel_runtime()
    return _threads.value


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
    ``export_library`` links into a shared library). ``reoptimize(text, target machine,
    target, opt level)``, given by the compiler, makes the optimized IR of a module whose
    machine code was loaded, if someone asks to see it."""

    def __init__(self, engine, target_machine, kernels: dict, llvm_ir, llvm_ir_unopt: str,
                 target: HostTarget, parallel: str, object_code: bytes = b"", opt_level: int = 3,
                 infos: tuple = (), reoptimize=None) -> None:
        self._engine = engine
        self._tm = target_machine
        self.kernels: dict = kernels
        # text, the engine's optimized llvmlite module (printed on demand), or None for a module
        # loaded from the disk cache (optimized again from the unoptimized text if asked)
        self._llvm_ir = llvm_ir
        self._reoptimize = reoptimize
        self.llvm_ir_unopt = llvm_ir_unopt
        self._asm: Optional[str] = None
        self.target = target
        self.parallel_runtime = parallel
        self.object_code = object_code
        self.opt_level = opt_level
        self.infos = tuple(infos)  # runtime.kernel_abi.KernelInfo of each kernel, for export_library
        self.from_disk_cache = False
        # kernel -> {parameter index: layout} the compiler's schedule gave constant parameters
        # (compiler.prepack_constants packs the constants into them)
        self.packed_layouts: dict = {}
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
                if self._reoptimize is None:
                    raise ValueError("this module holds machine code only: its optimized LLVM IR was not kept")
                self._llvm_ir = self._reoptimize(self.llvm_ir_unopt, self._tm, self.target, self.opt_level)
            if not isinstance(self._llvm_ir, str):
                self._llvm_ir = str(self._llvm_ir)
            return self._llvm_ir
        if fmt in ("llvm-unopt", "ll-unopt"):
            return self.llvm_ir_unopt
        if fmt in ("asm", "s"):
            if self._asm is None:
                m = llvm.parse_assembly(self.get_source("llvm"))
                self._asm = self._tm.emit_assembly(m)
            return self._asm
        raise ValueError(f"unknown source format {fmt!r} (expected 'llvm', 'llvm-unopt' or 'asm')")

    def __repr__(self) -> str:
        return f"CPUModule({', '.join(self.kernels)}; {self.target.cpu}, parallel={self.parallel_runtime})"


def bind_kernels(module, address_of) -> None:
    """Fill ``module.kernels`` (a `CPUModule`, or a loaded library's `runtime.library.
    LibraryModule`) from its kernel infos, ``address_of(symbol)`` giving each kernel's entry
    point; the module is each kernel's owner (it keeps the code alive)."""
    for info in module.infos:
        addr = address_of(info.symbol)
        if not addr:
            raise RuntimeError(f"no address for kernel symbol {info.symbol}")
        module.kernels[info.name] = Kernel(info.name, info.params, info.sym_vars, addr, info.symbol, owner=module)
    _release_scratch_when_dropped(module, address_of)


def _release_scratch_when_dropped(module, address_of) -> None:
    """When ``module`` is garbage, call its kernels' `RELEASE_SCRATCH_SYMBOL` (if it has one),
    which frees the scratch blocks they keep between calls (`compiler.codegen_llvm.scratch`).
    The finalizer holds the function, and through it the code, until then."""
    try:
        addr = address_of(RELEASE_SCRATCH_SYMBOL)
    except Exception:  # noqa: BLE001 - a library without the symbol says so by raising
        addr = None
    if addr:
        code = getattr(module, "_engine", None) or getattr(module, "_handle", None)
        weakref.finalize(module, _call_release, ctypes.CFUNCTYPE(None)(addr), code)


def _call_release(release, _code) -> None:
    release()


def load_object(object_code: bytes, tm, infos: list, llvm_ir_unopt: str, target: HostTarget, runtime: str,
                opt_level: int = 3, reoptimize=None) -> CPUModule:
    """A `CPUModule` from machine code LLVM produced earlier: linked into this process by
    MCJIT's loader (``tm``: the target machine it was compiled with), with no optimization or
    code generation."""
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    module = CPUModule(engine, tm, {}, None, llvm_ir_unopt, target, runtime, object_code, opt_level, infos,
                       reoptimize)
    bind_kernels(module, engine.get_function_address)
    return module
