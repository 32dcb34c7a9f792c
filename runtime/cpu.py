"""JIT compilation of TensorIR kernels for the host CPU.

``build_cpu(funcs)`` takes ``{name: tir.PrimFunc}`` (or an `IRModule`, whose PrimFuncs are
taken, or a lone PrimFunc), applies the CPU default schedule (`compiler.schedule_cpu`), lowers
and generates LLVM IR (`compiler.codegen_llvm`), optimizes it with LLVM's new pass manager (O2
with loop and SLP vectorization by default), and JIT-compiles it with MCJIT into a
`CPUModule`; all kernels of one call share one LLVM module and one execution engine::

    mod = build_cpu(ir_mod)
    mod["linear0"](x, w, b, out)        # a runtime.kernel.Kernel, destination-passing
    print(mod.get_source("asm"))

Compiled modules are cached in memory, keyed by a structural hash of the functions (names of
variables do not matter, as in `tvmscript.ir.structural_equal`) and the build options; a hit
is confirmed with `structural_equal` against a private copy of the functions it was built from
(kept pickled: pickling is several times cheaper than `copy.deepcopy` on a cold build).

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
import copy
import ctypes
import ctypes.util
import hashlib
import os
import pickle
import threading
from typing import Optional

import llvmlite.binding as llvm

from tvmscript import ir as tir_ir
from tvmscript.structural import structural_hash  # noqa: F401  (re-exported)
from tvmscript import tir
from tvmscript.compiler import codegen_llvm
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
    """JIT-compiled kernels, by prim_func name. Holds the LLVM execution engine alive."""

    def __init__(self, engine, target_machine, kernels: dict, llvm_ir, llvm_ir_unopt: str,
                 target: HostTarget, parallel: str) -> None:
        self._engine = engine
        self._tm = target_machine
        self.kernels: dict = kernels
        self._llvm_ir = llvm_ir  # text, or the engine's optimized llvmlite module (printed on demand)
        self._llvm_ir_unopt = llvm_ir_unopt
        self._asm: Optional[str] = None
        self.target = target
        self.parallel_runtime = parallel

    def __getitem__(self, name: str) -> Kernel:
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


_cache_lock = threading.Lock()
_cache: dict = {}  # key -> list of (pickled or copied funcs, CPUModule)


def _private_copy(funcs: dict):
    """A copy of ``funcs`` that later changes to them cannot reach: their pickle (bytes), or a
    deep copy if something in them cannot be pickled."""
    try:
        return pickle.dumps(funcs, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable attribute value: fall back
        return copy.deepcopy(funcs)


def _restore(saved) -> dict:
    return pickle.loads(saved) if isinstance(saved, bytes) else saved


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def build_cpu(funcs, *, schedule: bool = True, opt_level: int = 3, use_cache: bool = True,
              parallel: Optional[str] = None, bounds_check: bool = True) -> CPUModule:
    """Compile PrimFuncs for the host CPU.

    ``schedule``: apply `compiler.schedule_cpu.default_schedule` first (it never changes
    results). ``opt_level``: LLVM's optimization level, 0 to 3. ``parallel``: ``"gomp"``/``"serial"`` to force a parallel runtime
    (default: gomp when libgomp is present). ``bounds_check``: accesses not proven in bounds
    are checked at run time (`compiler.bounds_check`). Structurally equal inputs built with equal
    options return the same cached `CPUModule`."""
    funcs = _as_func_dict(funcs)
    runtime = parallel_runtime()
    if parallel is not None:
        if parallel not in ("gomp", "serial"):
            raise ValueError("parallel must be 'gomp' or 'serial'")
        if parallel == "gomp" and runtime != "gomp":
            raise RuntimeError("libgomp is not available in this process")
        runtime = parallel
    target = host_target()
    # The default schedule fits its tiles to the threads parallel loops run on.
    from tvmscript.compiler.schedule_cpu import parallel_threads

    options = (bool(schedule), int(opt_level), runtime, target, parallel_threads() if schedule else 0,
               bool(bounds_check))
    key = None
    if use_cache:
        parts = [repr(options)] + [f"{n}:{structural_hash(funcs[n])}" for n in sorted(funcs)]
        key = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        with _cache_lock:
            candidates = list(_cache.get(key, ()))
        for saved, module in candidates:
            saved = _restore(saved)
            if saved.keys() == funcs.keys() and all(
                tir_ir.structural_equal(saved[n], funcs[n]) for n in funcs
            ):
                return module
    module = _build(funcs, schedule, opt_level, runtime, target, bounds_check)
    if use_cache:
        saved = _private_copy(funcs)
        with _cache_lock:
            _cache.setdefault(key, []).append((saved, module))
    return module


def _build(funcs: dict, schedule: bool, opt_level: int, runtime: str, target: HostTarget,
           bounds_check: bool = True) -> CPUModule:
    if schedule:
        from tvmscript.compiler.schedule_cpu import default_schedule

        funcs = {n: default_schedule(f) for n, f in funcs.items()}
    result = codegen_llvm.codegen(funcs, parallel_runtime=runtime, target=target, bounds_check=bounds_check)
    text = str(result.module)
    tm = target.target_machine(opt_level)
    llmod = llvm.parse_assembly(text)
    llmod.triple = target.triple
    llmod.data_layout = str(tm.target_data)
    llmod.verify()
    if opt_level > 0:
        codegen_llvm.optimize(llmod, tm, speed_level=opt_level)
    engine = llvm.create_mcjit_compiler(llmod, tm)
    engine.finalize_object()
    engine.run_static_constructors()
    # The engine owns (and keeps alive) llmod: its text is printed only if someone asks.
    module = CPUModule(engine, tm, {}, llmod, text, target, runtime)
    for info in result.kernels:
        addr = engine.get_function_address(info.symbol)
        if not addr:
            raise RuntimeError(f"JIT: no address for kernel symbol {info.symbol}")
        module.kernels[info.name] = Kernel(info.name, info.params, info.sym_vars, addr, info.symbol, owner=module)
    return module
