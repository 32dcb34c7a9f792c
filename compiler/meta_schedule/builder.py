"""The local builder: candidates compiled in a pool of persistent worker processes.

Why processes: most of a build (lowering, code generation) is Python, which threads would run
one at a time under the GIL; and a compiler that crashes or hangs on one odd schedule must
cost that candidate, not the tuner. Why persistent: a fresh process pays Python's and LLVM's start-up
on every candidate, several times the ~0.1 s a small kernel takes to compile.

What a build makes is an *artifact*, plain data a runner loads in another process:

* `CPUArtifact` (target ``llvm``): the ELF object MCJIT produced for the one kernel, with what
  `runtime.cpu.load_object` needs to link it (the kernel's signature, the CPU and LLVM
  optimization level it was compiled for, the parallel runtime its loops call).
* `CUDAArtifact` (target ``cuda``): the `compiler.cuda_spec.CUDACode` (NVRTC's CUBIN and how
  to launch each kernel) that `runtime.cuda_kernels.load_module` loads onto a GPU.

A function is compiled as ``tvms.compile`` would compile it, so that a candidate's time is
the time it will run in the model. A tuner's candidates carry the attribute
``tvms.no_default_schedule`` (`NO_DEFAULT_SCHEDULE`, set by `postproc`): they are compiled as
scheduled, never rescheduled (on the CPU ``build_cpu(schedule=False)``; for CUDA a candidate
must be bound to GPU threads already and is compiled without DLight, which would otherwise
time DLight's kernel in the candidate's name). Any other function gets its default schedule
(the CPU's, or DLight's for one bound to no GPU thread): the baseline a tuner measures
first, and the reference its candidates are checked against (`runner.reference_outputs`).
Where a model binds a weight as a constant (the function's ``layout_free_buffers``), the
default CPU schedule may read it packed: the artifact then says how to pack it
(`CPUArtifact.pack`), and the runner packs the weight before the calls it times, as the
model's build packs it once.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Optional

from ..schedule_cpu.driver import NO_DEFAULT_SCHEDULE   # scheduled already: no default schedule may touch it
from .measure import BuildInput, BuildResult
from .runner import WorkerCrashed, WorkerError, WorkerProcess, WorkerTimeout, short_error

__all__ = ["LocalBuilder", "CPUArtifact", "CUDAArtifact", "build_artifact", "build_one", "prim_func_of",
           "target_kind", "NO_DEFAULT_SCHEDULE"]



# ----------------------------------------------------------------------------- artifacts


@dataclass(frozen=True)
class CPUArtifact:
    """One CPU kernel's machine code, picklable, loadable in any process on this CPU. The
    unoptimized LLVM IR a `CPUModule` also keeps is left out: it is only there to print, and
    it would be most of what travels to the runner."""

    name: str
    object_code: bytes
    infos: tuple
    target: object  # runtime.host_cpu.HostTarget
    parallel_runtime: str
    opt_level: int
    packed: tuple = ()  # (parameter index, schedule_cpu.prepack.PackedLayout): weights it reads packed

    def pack(self, args: list) -> list:
        """``args`` with each weight the kernel reads packed (`packed`) packed into its layout,
        as the build packs a model's bound weights once (`compiler.prepack_constants`)."""
        if not self.packed:
            return list(args)
        from ..prepack_constants import pack_array

        out = list(args)
        for index, layout in self.packed:
            out[index] = pack_array(layout, out[index])
        return out

    def load(self):
        """The `runtime.kernel.Kernel`, linked into this process. The kernels' callbacks and
        libgomp must be in LLVM's symbol table before the object is linked, which
        `parallel_runtime()` sees to; a kernel compiled to call libgomp cannot run where there
        is none."""
        from tvmscript.runtime.cpu import load_object, parallel_runtime

        here = parallel_runtime()
        if here != self.parallel_runtime:
            raise RuntimeError(f"the kernel was compiled for the '{self.parallel_runtime}' parallel runtime, "
                               f"and this process has '{here}'")
        tm = self.target.target_machine(self.opt_level)
        module = load_object(self.object_code, tm, list(self.infos), "", self.target, self.parallel_runtime,
                             self.opt_level)
        return module[self.name]


@dataclass(frozen=True)
class CUDAArtifact:
    """One prim_func's CUDA code (`compiler.cuda_spec.CUDACode`, CUBIN or PTX), picklable."""

    name: str
    code: object

    def load_module(self, device_index: int = 0):
        """The code loaded on GPU ``device_index`` (needs pycuda): a `runtime.cuda_kernels.
        CUDAModule`, whose ``kernels[name]`` runs the function. Keep the module while calling
        the kernel: the driver unloads the code with it."""
        from tvmscript.runtime.cuda_kernels import load_module
        from tvmscript.runtime.devices import cuda as cuda_device

        return load_module(self.code, cuda_device(device_index))


# ----------------------------------------------------------------------------- building


def prim_func_of(mod, name: str = "main"):
    """The PrimFunc a `BuildInput` names: ``mod`` is an IRModule holding it, or the PrimFunc."""
    from tvmscript.ir import tir

    if isinstance(mod, tir.PrimFunc):
        return mod
    try:
        func = mod[name]
    except (KeyError, TypeError):
        raise ValueError(f"the module has no function named {name!r}") from None
    if not isinstance(func, tir.PrimFunc):
        raise ValueError(f"{name!r} is a {type(func).__name__}, not a PrimFunc")
    return func


def target_kind(target: str) -> str:
    """``"llvm"`` (also for ``c``, compiled by LLVM too) or ``"cuda"``: which backend builds and
    runs a candidate; a ValueError for any other target."""
    kind = str(target).split()[0] if str(target).strip() else ""
    if kind in ("llvm", "c"):
        return "llvm"
    if kind == "cuda":
        return "cuda"
    raise ValueError(f"cannot tune for target {target!r}: the builders compile for 'llvm' and 'cuda'")


def build_artifact(inp: BuildInput, *, bounds_check: bool = True):
    """Compile ``inp``'s function into an artifact (`CPUArtifact` or `CUDAArtifact`), raising what
    the compiler raises: as scheduled when it carries `NO_DEFAULT_SCHEDULE`, else with its
    default schedule (see the module docstring)."""
    func = prim_func_of(inp.mod, inp.name)
    as_scheduled = bool(func.attrs.get(NO_DEFAULT_SCHEDULE))
    if target_kind(inp.target) == "cuda":
        return _build_cuda(func, inp.target, inp.name, as_scheduled)
    return _build_cpu(func, inp.target, inp.name, bounds_check, as_scheduled)


def _build_cpu(func, target: str, name: str, bounds_check: bool, as_scheduled: bool) -> CPUArtifact:
    from ..build_cpu import build_cpu
    from ..build_target import cpu_build_options

    options = cpu_build_options(target)
    module = build_cpu({name: func}, schedule=not as_scheduled, use_cache=False, bounds_check=bounds_check,
                       **options)
    if not module.object_code:
        raise RuntimeError("LLVM produced no object code to hand to another process")
    packed = tuple(sorted((module.packed_layouts.get(name) or {}).items()))
    return CPUArtifact(name, module.object_code, tuple(module.infos), module.target, module.parallel_runtime,
                       module.opt_level, packed)


def _build_cuda(func, target: str, name: str, as_scheduled: bool) -> CUDAArtifact:
    from ..build_cuda import build_cuda, cuda_target, feature_arch
    from ..build_error import BuildError
    from ..codegen_cuda import codegen_cuda
    from ..cuda_spec import CUDACode
    from ..kernel_resources import parse_ptxas_log
    from ..lower_gpu import has_thread_bindings
    from ..nvrtc import compile_cuda, nvrtc_version

    if not as_scheduled:
        code = build_cuda({name: func}, target)  # DLight for a function bound to no thread, as tvms.compile
    else:
        if not has_thread_bindings(func):
            raise BuildError(f"{name!r} is bound to no GPU thread: a scheduled CUDA candidate must be bound to GPU "
                             "threads (the builder applies no default schedule to it)")
        _, arch = cuda_target(target)
        src = codegen_cuda({name: func}, False, arch)
        arch = feature_arch(src.source, arch)   # sm_90a for wgmma
        result = compile_cuda(src.source, arch, kind="cubin", use_cache=False)
        code = CUDACode(src.source, src.functions, arch, cubin=result.binary, nvrtc_version=nvrtc_version(),
                        compile_seconds=result.seconds, ptxas=parse_ptxas_log(result.log))
    functions = {n: replace(f, span=None) for n, f in code.functions.items()}  # spans need not travel
    return CUDAArtifact(name, replace(code, functions=functions))


def build_one(inp: BuildInput, bounds_check: bool = True) -> BuildResult:
    """`build_artifact` as a `BuildResult`: the error's first lines instead of the exception."""
    start = time.perf_counter()
    try:
        artifact = build_artifact(inp, bounds_check=bounds_check)
    except Exception as err:  # noqa: BLE001 - any failure of one candidate is that candidate's
        return BuildResult(error=short_error(err), build_secs=time.perf_counter() - start)
    return BuildResult(artifact=artifact, build_secs=time.perf_counter() - start)


def warm_builder() -> None:
    """Import the compiler and start LLVM in a new worker before its first candidate."""
    import importlib

    from tvmscript.runtime.cpu import parallel_runtime

    from ..codegen_llvm import init_llvm

    importlib.import_module("tvmscript.compiler.build_cpu")
    init_llvm()
    parallel_runtime()


# ----------------------------------------------------------------------------- the pool


@dataclass
class _Slot:
    """A worker and the candidate it is compiling (index into the batch, deadline)."""

    worker: WorkerProcess
    index: Optional[int] = None
    deadline: float = 0.0
    started: float = 0.0


@dataclass
class LocalBuilder:
    """Compiles candidates in ``max_workers`` persistent processes (default: the CPUs this
    process may use), each candidate given ``timeout_s`` seconds. A build that raises, hangs
    (its worker is killed) or kills its worker gives a `BuildResult` with the error; the
    others are unaffected. ``bounds_check``: as `compiler.build`'s (on by default, so that
    candidates are timed as the final build will run them). Close it, or use it as a context
    manager, to stop the workers; they also stop with this process."""

    max_workers: Optional[int] = None
    timeout_s: float = 30.0
    bounds_check: bool = True
    _slots: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_workers is None:
            self.max_workers = _usable_cpus()
        if self.max_workers < 1:
            raise ValueError("max_workers must be at least 1")

    def build(self, inputs: list) -> list:
        """One `BuildResult` per input, in order."""
        inputs = list(inputs)
        results: list = [None] * len(inputs)
        if not inputs:
            return results
        self._start(min(self.max_workers, len(inputs)))
        pending = deque(range(len(inputs)))
        try:
            while pending or any(slot.index is not None for slot in self._slots):
                for slot in self._slots:
                    if slot.index is None and pending:
                        self._submit(slot, pending.popleft(), inputs, results)
                busy = [slot for slot in self._slots if slot.index is not None]
                if busy:
                    self._collect(busy, results)
        except BaseException:  # interrupted: the builds under way are abandoned with their workers
            for slot in self._slots:
                if slot.index is not None:
                    slot.worker.kill()
                    slot.index = None
            raise
        return results

    def start(self) -> None:
        """Launch every worker now, without waiting for them: they warm up while the caller
        does something else (a tuner computes its references and searches its first batch).
        Otherwise each build starts the workers it uses."""
        while len(self._slots) < self.max_workers:
            self._slots.append(_Slot(WorkerProcess(warm_up=warm_builder, name="tvms-builder")))
        for slot in self._slots:
            slot.worker.start()

    def _start(self, n: int) -> None:
        """At least ``n`` workers, started together: they import and start LLVM in parallel."""
        while len(self._slots) < n:
            self._slots.append(_Slot(WorkerProcess(warm_up=warm_builder, name="tvms-builder")))
        for slot in self._slots[:n]:
            slot.worker.start()
        for slot in self._slots[:n]:
            slot.worker.wait_ready()

    def _submit(self, slot: _Slot, index: int, inputs: list, results: list) -> None:
        try:
            slot.worker.wait_ready()  # one lost to the last candidate starts again, outside this one's time
        except WorkerCrashed as err:
            results[index] = BuildResult(error=f"no process to build in: {err}")
            return
        slot.index = index
        slot.started = time.perf_counter()
        slot.deadline = time.monotonic() + self.timeout_s
        slot.worker.submit(build_one, inputs[index], self.bounds_check)

    def _collect(self, busy: list, results: list) -> None:
        """Wait for the first finished build or deadline, and record what has finished."""
        timeout = max(0.0, min(s.deadline for s in busy) - time.monotonic())
        WorkerProcess.wait_any([s.worker for s in busy], timeout)
        for slot in busy:
            result = self._result_of(slot)
            if result is not None:
                results[slot.index] = result
                slot.index = None

    def _result_of(self, slot: _Slot) -> Optional[BuildResult]:
        """The slot's result if it has one (or has run out of time), else None."""
        elapsed = time.perf_counter() - slot.started
        try:
            if not slot.worker.has_result() and time.monotonic() < slot.deadline:
                return None
            return slot.worker.result(timeout=0.0)
        except WorkerTimeout:
            return BuildResult(error=f"the build ran past its timeout of {self.timeout_s:g} s", build_secs=elapsed)
        except WorkerCrashed as err:
            return BuildResult(error=f"the build crashed its process: {err}", build_secs=elapsed)
        except WorkerError as err:
            return BuildResult(error=str(err), build_secs=elapsed)

    def close(self) -> None:
        """Stop the workers (a later `build` starts new ones)."""
        for slot in self._slots:
            slot.worker.close()
        self._slots.clear()

    def __enter__(self) -> "LocalBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
