"""The local runner: every candidate timed in a separate, persistent worker process, one at a
time, each with a timeout, and checked against the default schedule's outputs first.

Why a separate process: a candidate is machine code nobody has run yet. One that writes out
of bounds (bounds checks off), hangs or aborts must cost that candidate only, not the tuner:
a hang is killed at its timeout (``"timeout"``), a death is seen as the worker's end of the
pipe closing (``"crash"``), and a new worker serves the next candidate. Why persistent: a new
process pays Python's and LLVM's start-up (a few tenths of a second) per candidate, more than
timing a small kernel takes. Why one at a time: two kernels timed at once on a 2-core machine
each measure the other.

What a candidate goes through in the worker (`_measure`): its artifact is loaded
(`builder.CPUArtifact` / `builder.CUDAArtifact`), the arguments copied in (aligned, as
``tvms.nd.array`` aligns them; a batch's shared arguments travel to the worker once), one
checked call runs (the warm-up, and the outputs compared with `RunnerInput.expected`: a
candidate that computes something else is ``"wrong"`` and never timed), then ``repeat``
rounds of ``number`` unchecked calls, ``number`` grown until a round lasts
``min_repeat_ms``, as TVM's ``time_evaluator`` does (`time_rounds`). The CPU clock is
``perf_counter`` around the calls; on a GPU, CUDA events on the device's stream.

`WorkerProcess` (the worker, a ``python -c`` child talking pickles over two pipes) serves the
builder's pool too. It is a plain subprocess, not a ``multiprocessing.Process``: it starts in
a daemonic Dask worker (which multiprocessing forbids children), re-imports no ``__main__``,
and inherits no threads (libgomp's pool breaks in a forked child).

The helpers make a task's checking data: `arg_infos_of` and `output_indices` read a PrimFunc's
parameters, `random_args` fills them, `reference_outputs` runs the default schedule on them.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait as wait_connections
from typing import Optional

import numpy as np

from .measure import ArgInfo, BuildInput, RunnerResult

__all__ = ["LocalRunner", "WorkerProcess", "WorkerError", "WorkerCrashed", "WorkerTimeout", "reference_outputs",
           "random_args", "arg_infos_of", "output_indices", "time_rounds", "short_error"]


def short_error(err: BaseException, limit: int = 600) -> str:
    """An exception as a short message: its type and its first lines (a compiler's error can
    quote a whole program; the tuner logs thousands of these)."""
    text = str(err).strip()
    lines = text.splitlines()[:6]
    text = "\n".join(lines)
    if len(text) > limit:
        text = text[:limit] + " ..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# ----------------------------------------------------------------------------- the worker process


class WorkerError(RuntimeError):
    """The function raised in the worker; the message is the worker's `short_error`."""


class WorkerCrashed(RuntimeError):
    """The worker died while running the function (a signal, an exit)."""


class WorkerTimeout(RuntimeError):
    """The function ran past its timeout; the worker was killed."""


_BOOT = ("import sys; from tvmscript.compiler.meta_schedule.runner import serve_worker; "
         "serve_worker(int(sys.argv[1]), int(sys.argv[2]))")


class WorkerProcess:
    """A child process that runs module-level functions sent to it, one at a time, and keeps
    running between them. ``warm_up`` (a module-level function) runs once when it starts, so
    that the first job does not pay for imports. `submit` / `result` (or `call`) run a job;
    a job that times out kills the process, and so does one that crashes it; the next job
    starts a new one (``generation`` counts them: state kept in the child is gone)."""

    def __init__(self, warm_up=None, name: str = "tvms-worker", start_timeout_s: float = 120.0) -> None:
        self.warm_up = warm_up
        self.name = name
        self.start_timeout_s = start_timeout_s
        self.generation = 0
        self._proc: Optional[subprocess.Popen] = None
        self._to: Optional[Connection] = None
        self._from: Optional[Connection] = None
        self._ready = False
        self._pending = False

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Launch the process unless it runs; returns at once (`wait_ready` waits for it)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        child_in, parent_out = os.pipe()
        parent_in, child_out = os.pipe()
        try:
            # What a candidate's build or run prints (LLVM's "loop not vectorized" remarks, by
            # the hundred in a tuning run) is not the user's business; TVMS_DEBUG=1 shows it.
            quiet = None if os.environ.get("TVMS_DEBUG") else subprocess.DEVNULL
            self._proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(child_in), str(child_out)],
                                          pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, stderr=quiet)
        except BaseException:
            os.close(parent_out)
            os.close(parent_in)
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        self._to = Connection(parent_out, readable=False)
        self._from = Connection(parent_in, writable=False)
        self.generation += 1
        self._to.send(list(sys.path))  # first alone: the child needs the path to unpickle warm_up
        self._to.send(self.warm_up)

    def wait_ready(self) -> None:
        """Start the process if needed and wait until its warm-up is done."""
        self.start()
        if self._ready:
            return
        if not self._from.poll(self.start_timeout_s):
            self.kill()
            raise WorkerCrashed(f"the {self.name} process did not start within {self.start_timeout_s:g} s")
        try:
            status, value = self._from.recv()
        except (EOFError, OSError):
            raise WorkerCrashed(f"the {self.name} process died while starting ({self._reap()})") from None
        if status != "ready":
            self.kill()
            raise WorkerCrashed(f"the {self.name} process failed to start: {value}")
        self._ready = True

    def submit(self, fn, *args) -> None:
        """Send ``fn(*args)`` to the (started) process; `result` gets what it returns."""
        if self._pending:
            raise RuntimeError(f"the {self.name} process is running a job already")
        self.wait_ready()
        self._pending = True
        try:
            self._to.send((fn, args))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process died: `result` finds its pipe closed and says how it ended

    def has_result(self) -> bool:
        """Whether the job submitted last has finished (or the process has died)."""
        return self._pending and self._from is not None and self._from.poll(0)

    def result(self, timeout: Optional[float]):
        """What the job submitted last returned. WorkerTimeout when it has not finished within
        ``timeout`` seconds (the process is killed), WorkerCrashed when the process died,
        WorkerError with its message when the function raised."""
        if not self._pending:
            raise RuntimeError(f"no job was submitted to the {self.name} process")
        self._pending = False
        if not self._from.poll(timeout):
            self.kill()
            raise WorkerTimeout(f"no result within {timeout:g} s")
        try:
            status, value = self._from.recv()
        except (EOFError, OSError):
            raise WorkerCrashed(f"the {self.name} process died ({self._reap()})") from None
        if status == "error":
            raise WorkerError(value)
        return value

    def call(self, fn, *args, timeout: Optional[float] = None):
        """``fn(*args)`` in the process (see `result`); its start-up is not in ``timeout``."""
        self.submit(fn, *args)
        return self.result(timeout)

    @staticmethod
    def wait_any(workers: list, timeout: Optional[float]) -> None:
        """Block until one of ``workers`` has a result (or died), or ``timeout`` seconds pass."""
        conns = [w._from for w in workers if w._from is not None]
        if conns:
            wait_connections(conns, timeout)

    def kill(self) -> None:
        """Kill the process now (a running job is lost)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._discard()

    def close(self) -> None:
        """Ask the process to exit, kill it if it does not within 2 s."""
        if self._proc is not None and self._proc.poll() is None and not self._pending:
            try:
                self._to.send(None)
                self._proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def _reap(self) -> str:
        """How the (dead) process ended, in words; it is discarded."""
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:  # its pipe closed, yet it runs: stop it
                proc.kill()
                code = proc.wait()
        self._discard()
        return exit_status(code)

    def _discard(self) -> None:
        for conn in (self._to, self._from):
            if conn is not None:
                conn.close()
        self._proc = self._to = self._from = None
        self._ready = self._pending = False

    def __del__(self) -> None:
        try:
            self.kill()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be gone
            pass


def exit_status(code: Optional[int]) -> str:
    """A process's return code in words: ``"killed by SIGSEGV"``, ``"exit status 3"``."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def serve_worker(fd_in: int, fd_out: int) -> None:
    """The child's loop (`WorkerProcess`): set the parent's ``sys.path``, warm up, then run
    each ``(fn, args)`` received and send back ``("ok", value)`` or ``("error", message)``,
    until ``None`` or the parent's end closes. Ctrl-C is the parent's to handle; the child
    exits by itself when the parent dies (a hung kernel would otherwise outlive it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox, outbox = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    sys.path[:0] = [p for p in inbox.recv() if p not in sys.path]
    _exit_with_parent()
    try:
        warm_up = inbox.recv()
        if warm_up is not None:
            warm_up()
    except Exception as err:  # noqa: BLE001 - reported to the parent, which gives up on this worker
        outbox.send(("failed", short_error(err)))
        return
    outbox.send(("ready", os.getpid()))
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            return
        except Exception as err:  # noqa: BLE001 - a job that cannot be unpickled here
            outbox.send(("error", f"the job cannot be received: {short_error(err)}"))
            continue
        if message is None:
            return
        fn, args = message
        try:
            reply = ("ok", fn(*args))
        except Exception as err:  # noqa: BLE001 - the job's failure is its result
            reply = ("error", short_error(err))
        try:
            outbox.send(reply)
        except Exception as err:  # noqa: BLE001 - an unpicklable result
            outbox.send(("error", f"the result cannot be sent back: {short_error(err)}"))


def _exit_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# ----------------------------------------------------------------------------- in the worker: timing


def time_rounds(clock, number: int, repeat: int, min_repeat_ms: float, stop_above_s: Optional[float] = None) -> list:
    """``repeat`` rounds of ``clock(number)`` (seconds for ``number`` calls), each as the mean
    seconds per call. A round shorter than ``min_repeat_ms`` is run again with more calls, as
    TVM's time_evaluator does (a round of a few microseconds is mostly the clock's noise):
    enough, by the last round's time per call, for 1.2 times ``min_repeat_ms`` (TVM asks for
    exactly it, at least 1.618 times the calls: a first call a little slow, and the next round
    falls just short; the one after then lasts 1.6 times as long).

    ``stop_above_s``: a first round slower than this per call is the only one. Why: a tuner
    passes twice its best time, and a candidate that far behind is not a contender; one round
    places it for the cost model, and the rounds saved go to measuring more candidates (most
    of a search's candidates are such)."""
    number = max(1, int(number))
    secs: list = []
    while len(secs) < max(1, int(repeat)):
        elapsed = clock(number)
        if elapsed * 1e3 < min_repeat_ms and number < _MAX_NUMBER:
            wanted = int(1.2 * min_repeat_ms / 1e3 / max(elapsed / number, 1e-9)) + 1
            number = min(_MAX_NUMBER, max(wanted, number + 1))
            continue
        secs.append(elapsed / number)
        if stop_above_s is not None and secs[0] > stop_above_s:
            break
    return secs


_MAX_NUMBER = 100_000_000

# The values a batch's candidates share (arguments, expected outputs), by token: sent once per
# batch (`_SharedValues`), forgotten at its end.
_STORE: dict = {}


@dataclass(frozen=True)
class _Job:
    """One candidate to measure: its artifact, the tokens of its arguments and expected
    outputs in `_STORE`, how to compare and how to time."""

    artifact: object
    target: str
    args: str
    expected: str
    rtol: float
    atol: float
    number: int
    repeat: int
    min_repeat_ms: float
    stop_above_s: Optional[float] = None


def _measure(job: _Job, puts: dict) -> tuple:
    """``("ok", run_secs)`` or ``("wrong", why)``, in the worker."""
    _STORE.update(puts)
    device = _device(job.target)
    kernel = device.load(job.artifact)
    args = device.copy_in(_packed(job.artifact, _STORE[job.args]))
    kernel(*args)
    expected = _STORE[job.expected]
    wrong = mismatch({i: device.to_host(args[i]) for i in expected}, expected, job.rtol, job.atol)
    if wrong is not None:
        return "wrong", wrong
    call = device.raw_call(kernel, args)
    return "ok", time_rounds(lambda n: device.clock(call, n), job.number, job.repeat, job.min_repeat_ms,
                             job.stop_above_s)


def _packed(artifact, args: list) -> list:
    """``args`` with the weights ``artifact`` reads packed packed (`builder.CPUArtifact.pack`)."""
    pack = getattr(artifact, "pack", None)
    return pack(args) if pack is not None else args


def _forget(tokens: list) -> None:
    for token in tokens:
        _STORE.pop(token, None)


def _reference(inp: BuildInput, args: list, outputs: list) -> dict:
    """The outputs of ``inp``'s function compiled as `tvms.compile` would (with its default
    schedule, unless it is marked scheduled), on ``args``, in the worker."""
    from .builder import build_artifact

    device = _device(inp.target)
    artifact = build_artifact(inp)
    kernel = device.load(artifact)
    dev_args = device.copy_in(_packed(artifact, args))
    kernel(*dev_args)
    return {i: device.to_host(dev_args[i]) for i in outputs}


def mismatch(got: dict, expected: dict, rtol: float, atol: float) -> Optional[str]:
    """Why the outputs ``got`` (parameter index -> array) are not ``expected`` within
    ``rtol``/``atol``, or None. A NaN where the reference has none is an error; where it has
    one, a NaN is expected."""
    for i, want in sorted(expected.items()):
        have = got[i]
        want = np.asarray(want)
        if have.shape != want.shape:
            return f"parameter {i} has shape {have.shape}, the reference {want.shape}"
        have64, want64 = have.astype(np.float64), want.astype(np.float64)
        close = np.isclose(have64, want64, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            continue
        bad = ~close
        with np.errstate(invalid="ignore"):
            error = np.abs(have64 - want64)[bad]
        finite = error[np.isfinite(error)]
        text = (f"parameter {i}: {int(bad.sum())} of {have.size} elements differ from the default schedule's, max abs "
                f"error {float(finite.max()) if finite.size else float('nan'):.3g} (rtol {rtol:g}, atol {atol:g})")
        nans = int((np.isnan(have64) & ~np.isnan(want64)).sum())
        return text + (f", {nans} NaN where the reference has none" if nans else "")
    return None


def _flat_args(kernel, args: list, address) -> Optional[tuple]:
    """(buffer addresses, symbolic variables' values) for an unchecked call, or None when the
    kernel takes scalars or a symbolic value cannot be read off a shape (then the checked
    call times it)."""
    pointers, env = [], {}
    for spec, arg in zip(kernel.params, args):
        if spec.kind != "buffer":
            return None
        pointers.append(address(arg))
        for dim, size in zip(spec.shape, arg.shape):
            if isinstance(dim, str) and dim.isidentifier():
                env[dim] = size
    if any(name not in env for name in kernel.sym_vars):
        return None
    return pointers, [env[name] for name in kernel.sym_vars]


class _CPUDevice:
    """The host CPU: kernels JIT-linked from machine code, called on NumPy arrays."""

    def load(self, artifact):
        return artifact.load()

    def copy_in(self, args: list) -> list:
        return [_aligned_copy(a) if isinstance(a, np.ndarray) else a for a in args]

    def to_host(self, arg) -> np.ndarray:
        return arg

    def raw_call(self, kernel, args: list):
        flat = _flat_args(kernel, args, lambda a: a.__array_interface__["data"][0])
        if flat is None:
            return lambda: kernel(*args)
        pointers, syms = flat
        call_raw = kernel.call_raw
        return lambda: call_raw(pointers, syms)

    def clock(self, call, number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            call()
        return time.perf_counter() - start


class _CUDADevice:
    """GPU ``index``: arguments uploaded to it, calls timed with CUDA events on its stream."""

    def __init__(self, index: int = 0) -> None:
        from tvmscript.runtime import cuda
        from tvmscript.runtime.devices import cuda as cuda_device

        self.index = index
        self.rt = cuda.runtime(cuda_device(index))
        self.module = None  # the code of the kernel measured last, kept loaded while it runs

    def load(self, artifact):
        self.module = None
        self.module = artifact.load_module(self.index)
        return self.module.kernels[artifact.name]

    def copy_in(self, args: list) -> list:
        return [self.rt.from_host(a) if isinstance(a, np.ndarray) else a for a in args]

    def to_host(self, arg) -> np.ndarray:
        return arg.numpy()

    def raw_call(self, kernel, args: list):
        flat = _flat_args(kernel, args, lambda t: t._ptr)
        if flat is None:
            return lambda: kernel(*args)
        pointers, syms = flat
        launch = kernel.launch
        return lambda: launch(*pointers, *syms)

    def clock(self, call, number: int) -> float:
        return self.rt.time_calls(call, (), number)


_DEVICES: dict = {}


def _device(target: str):
    from .builder import target_kind

    kind = target_kind(target)
    if kind not in _DEVICES:
        _DEVICES[kind] = _CUDADevice() if kind == "cuda" else _CPUDevice()
    return _DEVICES[kind]


def _aligned_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``arr`` starting on a 64-byte boundary, as ``tvms.nd.array``
    allocates: a kernel's vector loads are timed as they will run."""
    from tvmscript.runtime.ndarray import ALIGNMENT

    raw = np.empty(arr.nbytes + ALIGNMENT, np.uint8)
    start = (-raw.__array_interface__["data"][0]) % ALIGNMENT
    out = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    np.copyto(out, arr)
    return out


def warm_runner() -> None:
    """Load what measuring a CPU kernel needs (LLVM's JIT, libgomp) before the first one."""
    from tvmscript.runtime.cpu import parallel_runtime
    from tvmscript.runtime.host_cpu import init_native_target

    init_native_target()
    parallel_runtime()


# ----------------------------------------------------------------------------- the runner


class _SharedValues:
    """The arguments and expected outputs of one batch, sent to the worker once each however
    many inputs share them (the same object), by token. A worker started again (after a
    crash or a timeout) has none: they are sent again."""

    def __init__(self, worker: WorkerProcess, counter) -> None:
        self.worker = worker
        self.counter = counter
        self.generation = worker.generation
        self.sent: dict = {}  # id(value) -> (value, token); the value is held so its id stays its own

    def tokens(self, *values) -> tuple:
        """(values to send now: {token: value}, the token of each value)."""
        if self.worker.generation != self.generation:
            self.sent.clear()
            self.generation = self.worker.generation
        puts, tokens = {}, []
        for value in values:
            entry = self.sent.get(id(value))
            if entry is None or entry[0] is not value:
                entry = self.sent[id(value)] = (value, f"v{next(self.counter)}")
                puts[entry[1]] = value
            tokens.append(entry[1])
        return (puts, *tokens)

    def forget(self) -> None:
        if self.sent and self.worker.generation == self.generation and self.worker.pid is not None:
            try:
                self.worker.call(_forget, [token for _, token in self.sent.values()], timeout=10.0)
            except (WorkerError, WorkerCrashed, WorkerTimeout):
                pass
        self.sent.clear()


class LocalRunner:
    """Times candidates in one persistent worker process, one at a time (see the module
    docstring). ``timeout_s``: each candidate's limit, load, check and timing together;
    None: each `RunnerInput`'s own ``timeout_s``. Close it, or use it as a context manager,
    to stop the worker; it also stops with this process."""

    def __init__(self, timeout_s: Optional[float] = None) -> None:
        self.timeout_s = timeout_s
        self._worker = WorkerProcess(warm_up=warm_runner, name="tvms-runner")
        self._counter = itertools.count()

    def run(self, inputs: list) -> list:
        """One `RunnerResult` per input, in order."""
        shared = _SharedValues(self._worker, self._counter)
        try:
            return [self._run_one(inp, shared) for inp in inputs]
        finally:
            shared.forget()

    def _run_one(self, inp, shared: _SharedValues) -> RunnerResult:
        if inp.artifact is None:
            return RunnerResult(error="nothing to run: the candidate did not build", error_kind="build")
        timeout = self.timeout_s if self.timeout_s is not None else inp.timeout_s
        try:
            self._worker.wait_ready()
        except WorkerCrashed as err:
            return RunnerResult(error=str(err), error_kind="crash")
        puts, args, expected = shared.tokens(inp.args, inp.expected)
        job = _Job(inp.artifact, inp.target, args, expected, inp.rtol, inp.atol, inp.number, inp.repeat,
                   inp.min_repeat_ms, inp.stop_above_s)
        try:
            status, value = self._worker.call(_measure, job, puts, timeout=timeout)
        except WorkerTimeout:
            return RunnerResult(error=f"ran past its timeout of {timeout:g} s (the worker was killed)",
                                error_kind="timeout")
        except WorkerCrashed as err:
            return RunnerResult(error=f"the kernel crashed the worker: {err}", error_kind="crash")
        except WorkerError as err:
            if _is_cuda(inp.target):
                self._worker.kill()  # a failed kernel can leave the GPU context unusable
            return RunnerResult(error=str(err), error_kind="run")
        if status == "wrong":
            return RunnerResult(error=value, error_kind="wrong")
        return RunnerResult(run_secs=value)

    def reference(self, inp: BuildInput, args: list, outputs: list, timeout_s: float = 120.0) -> dict:
        """The outputs (parameter index -> array) of ``inp``'s function under its default
        schedule, built and run in the worker on ``args``; RuntimeError when that fails."""
        try:
            return self._worker.call(_reference, inp, list(args), list(outputs), timeout=timeout_s)
        except (WorkerError, WorkerCrashed, WorkerTimeout) as err:
            raise RuntimeError(f"the default schedule of {inp.name!r} could not be run: {err}") from None

    @property
    def worker_pid(self) -> Optional[int]:
        """The worker's process id (None before the first candidate or after a crash)."""
        return self._worker.pid

    def close(self) -> None:
        self._worker.close()

    def __enter__(self) -> "LocalRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_cuda(target: str) -> bool:
    return str(target).split()[:1] == ["cuda"]


# ----------------------------------------------------------------------------- a task's checking data


def arg_infos_of(func) -> list:
    """An `ArgInfo` per parameter of ``func``; ValueError for a scalar parameter or a shape that
    is not constant (a tuner measures one concrete workload)."""
    from tvmscript.ir import tir

    infos = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            raise ValueError(f"parameter '{p.name}' is a scalar: tuning needs functions of buffers only")
        if not all(isinstance(d, tir.IntImm) for d in buf.shape):
            raise ValueError(f"parameter '{p.name}' has a symbolic shape: tuning needs constant shapes")
        infos.append(ArgInfo(tuple(int(d.value) for d in buf.shape), buf.dtype))
    return infos


def output_indices(func) -> list:
    """The indices of the parameters ``func`` writes (a store to their buffer, or a block
    that declares a write to it): what the runner compares."""
    from tvmscript.ir import tir
    from tvmscript.ir.tir_visitor import TIRVisitor

    written: set = set()

    class Stores(TIRVisitor):
        def visit_BufferStore(self, node) -> None:
            written.add(node.buffer.data)
            self.generic_visit(node)

        def visit_Block(self, node) -> None:
            written.update(region.buffer.data for region in node.writes)
            self.generic_visit(node)

    Stores().visit(func.body)
    return [i for i, p in enumerate(func.params)
            if isinstance(func.buffer_map.get(p), tir.Buffer) and func.buffer_map[p].data in written]


def random_args(arg_infos: list, seed: int = 0) -> list:
    """Random arrays for ``arg_infos`` (outputs too: a kernel that forgets to initialize one
    then gives another result than the reference): floats uniform in [-1, 1), integers small
    (their products do not overflow), booleans fair."""
    from tvmscript.runtime.ndarray import _np_dtype   # (bfloat16 through ml_dtypes, as tvms.nd arrays)

    rng = np.random.default_rng(seed)
    out = []
    for info in arg_infos:
        dtype = _np_dtype(info.dtype)
        if info.dtype == "bool":
            arr = rng.random(info.shape) < 0.5
        elif info.dtype.startswith("uint"):
            arr = rng.integers(0, 8, info.shape)
        elif info.dtype.startswith("int"):
            arr = rng.integers(-8, 8, info.shape)
        else:
            arr = rng.uniform(-1.0, 1.0, info.shape)
        out.append(np.ascontiguousarray(arr).astype(dtype))
    return out


def reference_outputs(func, target: str, args: list, runner: Optional[LocalRunner] = None,
                      name: str = "main", timeout_s: float = 120.0) -> dict:
    """The outputs the default schedule of ``func`` computes from ``args`` (parameter index ->
    array), built and run in ``runner``'s worker (a new one, closed after, when None): the
    `RunnerInput.expected` of every candidate of ``func``. Run in the worker, so that a
    default schedule that crashes cannot take the tuner with it. (A ``func`` marked
    ``tvms.no_default_schedule`` runs as it is scheduled, as everywhere else.)"""
    own = runner is None
    runner = runner or LocalRunner()
    try:
        return runner.reference(BuildInput(func, target, name), args, output_indices(func), timeout_s)
    finally:
        if own:
            runner.close()
