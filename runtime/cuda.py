"""The CUDA runtime, through pycuda: the driver, a caching memory pool, streams (one per VM),
tensors in GPU memory and event timing. The kernels loaded on a GPU are in `runtime.cuda_kernels`,
the DLPack exchange with PyTorch and CuPy in `runtime.cuda_dlpack`.

pycuda builds from source against a CUDA toolkit. On a machine without network, from the
sdist and wheels kept in the repository's git-ignored ``.whl/`` folder (``nvcc`` on PATH tells
pycuda's build where the toolkit is)::

    PATH=/usr/local/cuda/bin:$PATH python -m pip install --no-index --find-links .whl pycuda

How tvms uses a GPU:

* Each GPU is used through its *primary context* (the one the CUDA runtime API, hence PyTorch
  and CuPy, use too), made current on each thread that touches the device, and popped again
  when that thread ends (pycuda aborts the process when a thread exits with a context pushed).
* Work on a GPU (copies, kernels) goes to a stream (`Stream`): each VM has one of its own
  (`DeviceRuntime.acquire_stream`), made current on the calling thread while it runs
  (`DeviceRuntime.using`); outside a VM the device's default stream is current. Within a
  stream work runs in the order it was issued. Between streams, the memory of each tensor
  orders them: a block remembers the stream it was taken on and the streams that used it
  since, a stream about to use it waits for those first (`DeviceRuntime.order_after`, an
  event each), and a block used on several streams goes back to the pool only once their
  work is done (`MemoryPool`). So a VM's output fed to another VM, or read on the host, is
  complete, and two VMs on two threads run side by side.
* Memory comes from a caching pool (`MemoryPool`, in `runtime.cuda_memory`): sizes are rounded up to a few classes,
  blocks freed by tensors that die are kept and handed out again, so a VM call in a loop
  allocates nothing from the driver after the first one. `memory_stats` and `empty_cache`
  show and release it.
* Kernels (`runtime.cuda_kernels.CUDAKernel`) are launched on the current stream too.

Everything that needs pycuda or a GPU raises `CUDAUnavailableError` (a RuntimeError) saying in
one line what is missing; `unavailable_reason()` says it without raising.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import importlib.util
import re
import sys
import threading
import types
from typing import Optional

import numpy as np

from tvmscript.diagnostics import TVMScriptError

from .cuda_memory import DEFAULT_CACHE_LIMIT, DeviceMemoryError, MemoryPool, _Block, _new, round_size
from .cuda_tensor import _ITEMSIZE, CUDATensor, _bytes_of, _itemsize, as_tensor_on, tensor_class
from .devices import Device, cuda as cuda_device, device as as_device, kDLCUDA
from .ndarray import _dtype_name

__all__ = [
    "CUDAUnavailableError", "unavailable_reason", "device_arch", "runtime", "DeviceRuntime", "MemoryPool",
    "memory_stats", "empty_cache", "DeviceError", "DeviceMemoryError", "CUDATensor", "tensor_class", "as_tensor_on", "check_arch",
    "frame_factory", "Stream", "recreate_context", "round_size", "DEFAULT_CACHE_LIMIT",
]

# The device attributes a launch is checked against (`DeviceRuntime.limits`).
LAUNCH_LIMITS = ("MAX_THREADS_PER_BLOCK", "MAX_BLOCK_DIM_X", "MAX_BLOCK_DIM_Y", "MAX_BLOCK_DIM_Z", "MAX_GRID_DIM_X",
                 "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "MAX_REGISTERS_PER_BLOCK")
_ERROR_RECORD = np.zeros(4, np.int64)  # a cleared bounds-check error record (`DeviceRuntime.error_record`)

PYCUDA_MISSING = 'pycuda is not installed (pip install -e ".[cuda]"; it builds from source against a CUDA toolkit)'

# Dynamic shared memory a kernel may use without opting in (cuFuncSetAttribute) first.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


class CUDAUnavailableError(RuntimeError):
    """A CUDA device was asked for where there is none to use; the message says what is missing."""


# ----------------------------------------------------------------------------- the driver


@functools.lru_cache(maxsize=None)
def _driver_or_reason():
    """(pycuda.driver, None) once it is imported and cuInit has run, or (None, one line saying
    why that failed). Computed once per process."""
    if importlib.util.find_spec("pycuda") is None:
        return None, PYCUDA_MISSING
    try:
        import pycuda.driver as drv
    except ImportError as err:
        if isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] == "pycuda":
            return None, PYCUDA_MISSING
        if "libcuda" in str(err):  # pycuda is there, but not the driver library it links
            return None, f"no CUDA GPU: {_one_line(err)}"
        return None, f"pycuda cannot be imported: {_one_line(err)}"
    try:
        drv.init()
    except drv.Error as err:
        return None, f"no CUDA GPU: {_one_line(err)}"
    return drv, None


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _driver():
    """pycuda.driver, initialized; CUDAUnavailableError when there is no usable one."""
    drv, reason = _driver_or_reason()
    if drv is None:
        raise CUDAUnavailableError(reason)
    return drv


def unavailable_reason(index: int = 0) -> str | None:
    """None when GPU ``index`` can be used; otherwise one line saying what is missing: pycuda,
    a working driver and GPU, or that device."""
    drv, reason = _driver_or_reason()
    if drv is None:
        return reason
    count = drv.Device.count()
    if index >= count:
        return f"no CUDA device {index} (this machine has {count})"
    return None


def device_arch(index: int = 0) -> str:
    """The architecture of GPU ``index`` as compilers name it (``"sm_90"`` for an H100)."""
    reason = unavailable_reason(index)
    if reason is not None:
        raise CUDAUnavailableError(reason)
    major, minor = _driver().Device(index).compute_capability()
    return f"sm_{major}{minor}"


def check_arch(arch: str, capability: tuple, dev: Device) -> None:
    """Raise when CUBIN built for ``arch`` cannot run on a GPU of compute ``capability``: CUBIN
    runs on its own major version at the same or a higher minor one (``sm_80`` code on an
    sm_86 GPU), and arch-specific code (``sm_90a``) on exactly its architecture."""
    m = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", arch)
    if m is None:
        raise ValueError(f"unknown CUDA architecture {arch!r} (expected e.g. 'sm_90')")
    major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    have = f"sm_{capability[0]}{capability[1]}"
    fits = major == capability[0] and (minor == capability[1] if suffix else minor <= capability[1])
    if not fits:
        raise RuntimeError(
            f"the executable's CUDA code is for {arch}, but {dev} is {have} (compute capability "
            f"{capability[0]}.{capability[1]}): compile it for this GPU with "
            f"tvms.compile(mod, target=\"cuda -arch={have}\")")


# ----------------------------------------------------------------------------- contexts, per thread


class _PushedContext:
    """A primary context tvms pushed on the current thread. It lives in thread-local storage,
    so it is popped when the thread ends: pycuda aborts the process if a thread exits with a
    context still on its (per-thread) stack."""

    __slots__ = ("context",)

    def __init__(self, context) -> None:
        context.push()
        self.context = context

    def __del__(self) -> None:
        self.context.pop()


class _ThreadState(threading.local):
    runtime = None   # the DeviceRuntime whose context is current on this thread
    pushed = None    # its _PushedContext
    stream = None    # the `Stream` current on this thread (a VM's, while it runs), else None
    errors = None    # device index -> this thread's bounds-check error record (`DeviceRuntime.error_record`)


_thread = _ThreadState()


def _release_thread() -> None:
    _thread.runtime = None
    _thread.pushed = None


# ----------------------------------------------------------------------------- streams


class Stream:
    """A stream of one GPU: a queue whose work runs in the order it was issued. ``raw`` is the
    driver's stream object. Each VM gets one (`DeviceRuntime.acquire_stream`); the device has
    a default one for everything else. Streams are kept and reused, never destroyed, so the
    pool's blocks cached for a stream stay valid for its next user."""

    __slots__ = ("rt", "raw", "name")

    def __init__(self, rt: "DeviceRuntime", raw, name: str) -> None:
        self.rt, self.raw, self.name = rt, raw, name

    def synchronize(self) -> None:
        """Wait until the work queued on this stream is done."""
        self.rt.activate()
        with self.rt.faults_found():
            self.raw.synchronize()

    def record(self):
        """An event recorded on this stream now: done once the work queued so far is."""
        event = self.rt.drv.Event()
        event.record(self.raw)
        return event

    def wait_for(self, others) -> None:
        """Make this stream's later work wait until the work queued so far on each of
        ``others`` is done (an event each; the host does not wait)."""
        for other in others:
            if other is not self:
                self.raw.wait_for_event(other.record())

    def __repr__(self) -> str:
        return f"<tvms CUDA stream '{self.name}' of {self.rt.device}>"


class DeviceError(TVMScriptError, RuntimeError):
    """A kernel failed on the GPU: its launch was refused, or it faulted (an illegal address, an
    unspecified launch failure) and the next synchronization found out. The message names the
    kernel and its prim_func (for a fault found later, the kernels launched since the device
    last synchronized), and its span is the prim_func. ``sticky``: the error is one of those
    that leave the CUDA context unusable (`STICKY_ERRORS`); the message then says so, and how
    the context is recreated (`DeviceRuntime.recreate`). Also raised for a tensor whose memory
    was lost with a context."""

    def __init__(self, message: str, span=None, sticky: bool = False) -> None:
        if sticky:
            message += ("; this error leaves the CUDA context unusable: the next VM call recreates it (the "
                        "tensors on the device are lost), or call tvms.runtime.cuda.recreate_context()")
        super().__init__(message, span)
        self.sticky = sticky


# What a sticky CUDA error says (CUDA_ERROR_ILLEGAL_ADDRESS, _LAUNCH_FAILED, _MISALIGNED_ADDRESS,
# _ILLEGAL_INSTRUCTION, _HARDWARE_STACK_ERROR, _INVALID_PC, _ASSERT): after one, the context is lost.
STICKY_ERRORS = ("illegal memory access", "illegal address", "unspecified launch failure", "misaligned address",
                 "illegal instruction", "hardware stack error", "invalid program counter", "device-side assert")


def is_sticky(message: str) -> bool:
    """Whether a driver's error message is one of `STICKY_ERRORS`."""
    text = message.lower()
    return any(s in text for s in STICKY_ERRORS)


# ----------------------------------------------------------------------------- one device


class DeviceRuntime:
    """One GPU as tvms uses it: its primary context, its streams (the default one and those of
    the VMs), its memory pool, and the class of the tensors that live on it. One per device
    (`runtime`)."""

    def __init__(self, drv, index: int) -> None:
        self.drv = drv
        self.index = index
        self.device = Device(kDLCUDA, index)
        gpu = drv.Device(index)
        self.name = gpu.name()
        self.compute_capability = tuple(gpu.compute_capability())
        self.context = gpu.retain_primary_context()
        self.activate()
        self.default_stream = Stream(self, drv.Stream(), "default")
        self._streams = [self.default_stream]   # every stream made, so `sync` can name them
        self._idle_streams: list = []            # VMs' streams whose VM is gone, for the next VM
        self._streams_lock = threading.Lock()
        self.pool = MemoryPool(self._device_alloc, fence=self._fence)
        self.tensor_class = tensor_class(index)
        # The prim_funcs launched since the device last synchronized: the suspects of a fault
        # found there (`faults_found`); bounded, as a call may launch many.
        self.launched = collections.deque(maxlen=16)
        # Context recreation (`recreate`): what lost the context (None while it is sound), and
        # how many times it was recreated; what loaded code or kept memory checks it against.
        self.lost: Optional[str] = None
        self.generation = 0
        self._graveyard: list = []  # the lost contexts' objects, kept: freeing them would fail

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def activate(self) -> None:
        """Make this GPU's context current on the calling thread (nothing to do when it is)."""
        if _thread.runtime is not self:
            _thread.runtime = None
            _thread.pushed = None  # pops the context of the GPU used last on this thread
            _thread.pushed = _PushedContext(self.context)
            _thread.runtime = self

    # ---- streams
    def current_stream(self) -> Stream:
        """The stream work on this device goes to from the calling thread: the running VM's,
        else the default one."""
        stream = _thread.stream
        return stream if stream is not None and stream.rt is self else self.default_stream

    @contextlib.contextmanager
    def using(self, stream: Stream):
        """Make ``stream`` the calling thread's current stream for the block's duration."""
        previous = _thread.stream
        _thread.stream = stream
        try:
            yield stream
        finally:
            _thread.stream = previous

    def acquire_stream(self) -> Stream:
        """A stream for a new VM: one a collected VM left (`release_stream`), else a new one."""
        with self._streams_lock:
            if self._idle_streams:
                return self._idle_streams.pop()
            self.activate()
            stream = Stream(self, self.drv.Stream(), f"vm{len(self._streams)}")
            self._streams.append(stream)
            return stream

    def release_stream(self, stream: Stream) -> None:
        """Give a VM's stream back for the next VM (called when the VM is collected: it only
        files the stream, no driver call). The pool's blocks cached for it stay valid, as the
        next VM's work on it runs after the last one's."""
        self._idle_streams.append(stream)

    def order_after(self, values, stream: Stream) -> None:
        """Before ``stream`` uses the tensors in ``values`` (a sequence; tuples in it are
        walked), make it wait for the other streams that took or used their memory, and note
        it among the memory's users. The VM calls it on its arguments, a kernel called directly
        on its buffers, a copy on its source and target."""
        waits = None
        for value in values:
            block = getattr(value, "_mem", None)
            if block is None:
                if value.__class__ is tuple:
                    self.order_after(value, stream)
                continue
            owner = getattr(block, "stream", None)
            if owner is None:  # memory of a DLPack exporter: ordered when it was lent
                continue
            if block.pool is not self.pool:
                if not block.pool.retired:  # another GPU's memory: the argument checks say so
                    continue
                raise DeviceError(f"a tensor on {self.device} was lost when the CUDA context was recreated after "
                                  f"an error ({self._graveyard[-1][0] if self._graveyard else 'a fault'}): make it "
                                  "again")
            users = block.users
            if owner is stream and users is None:
                continue
            if waits is None:
                waits = set()
            waits.add(owner)
            if users:
                waits.update(users)
            if owner is not stream and (users is None or stream not in users):
                block.users = (users or frozenset()) | {stream}
        if waits:
            waits.discard(stream)
            if waits:
                self.activate()
                stream.wait_for(waits)

    def _fence(self, streams) -> list:
        """An event recorded on each of ``streams`` now (the pool waits for them)."""
        self.activate()
        return [s.record() for s in streams]

    def sync(self) -> None:
        """Wait until the work queued on the device, on all its streams, is done."""
        self.activate()
        with self.faults_found():
            self.drv.Context.synchronize()

    # ---- a lost context
    def recreate(self) -> None:
        """Recreate the device's context after a sticky error (`lost`): the primary context is
        reset (all its memory and loaded code go), retained again and made current; every
        stream gets a new driver stream, the pool starts empty, and `generation` counts one
        more, so loaded modules (`runtime.cuda_kernels.CUDAModule`) and VMs load their code and
        constants again. Tensors made before are lost: using one is a `DeviceError`. The
        lost context's objects are kept, not freed (freeing would fail). Nothing to do while
        the context is sound. Other threads must not be using the device meanwhile (as for
        ``cuDevicePrimaryCtxReset``)."""
        with self._streams_lock:
            if self.lost is None:
                return
            reset_primary_context(self.drv, self.index)
            old_context = self.context
            self.context = self.drv.Device(self.index).retain_primary_context()
            if _thread.runtime is self:  # pushed again, retained anew
                _thread.runtime = None
                _thread.pushed = None
            self.activate()
            self.pool.retired = True
            self._graveyard.append((self.lost, old_context, self.pool, [s.raw for s in self._streams]))
            for stream in self._streams:
                stream.raw = self.drv.Stream()
            self.pool = MemoryPool(self._device_alloc, fence=self._fence)
            self.launched.clear()
            self.generation += 1
            self.lost = None

    @contextlib.contextmanager
    def faults_found(self):
        """Around a synchronization: a sticky driver error there (`STICKY_ERRORS`) is a
        kernel's fault found late, raised as a `DeviceError` naming the kernels launched since
        the last synchronization (`launched`), which one of them faulted. Other errors (a
        misuse of the API, such as synchronizing a capturing stream) pass as they are."""
        try:
            yield
        except self.drv.Error as err:
            if not is_sticky(str(err)):
                raise
            kernels = ", ".join(f"'{k}'" for k in dict.fromkeys(self.launched)) or "none"
            self.launched.clear()
            self.lost = _one_line(err)
            raise DeviceError(f"a kernel failed on {self.device}: {_one_line(err)} (launched since the last "
                              f"synchronization: {kernels})", sticky=True) from None
        self.launched.clear()

    def _device_alloc(self, nbytes: int):
        """``nbytes`` from the driver; when the device is out of memory, the pool's cached
        blocks are released and the driver asked once more; then `DeviceMemoryError`."""
        self.activate()
        try:
            return self.drv.mem_alloc(nbytes)
        except self.drv.MemoryError:
            pass
        self.pool.release_cached()  # memory the pool holds for other sizes may be enough
        try:
            return self.drv.mem_alloc(nbytes)
        except self.drv.MemoryError as err:
            raise DeviceMemoryError(self, nbytes, _one_line(err)) from None

    def empty_cache(self) -> None:
        self.activate()
        self.pool.release_cached()

    @functools.cached_property
    def limits(self) -> dict:
        """The device's launch limits, by pycuda's attribute names (`LAUNCH_LIMITS`): what
        `runtime.cuda_kernels` checks a launch against before making it. A limit the driver
        does not report is left out (not checked)."""
        gpu = self.drv.Device(self.index)
        names = getattr(self.drv, "device_attribute", None)
        out = {}
        for name in LAUNCH_LIMITS:
            attr = getattr(names, name, None)
            if attr is None:
                continue
            try:
                out[name] = int(gpu.get_attribute(attr))
            except Exception:  # noqa: BLE001 - a driver without this attribute: not checked
                continue
        return out

    # ---- bounds checks
    @property
    def error_record(self) -> int:
        """The device address of the calling thread's record where kernels note a failed bounds
        check (four int64 words, all zero until one fails: `compiler.cuda_spec.BoundsChecks`),
        made on first use; kernels that check take it as their last argument. One per thread,
        so a failure is raised by the call that made it even when threads share a VM."""
        records = _thread.errors
        if records is None:
            records = _thread.errors = {}
        block = records.get(self.index)
        if block is None or block.pool is not self.pool:  # none yet, or lost with a context
            block = records[self.index] = self.new_error_record()
        return block.ptr

    def new_error_record(self) -> _Block:
        """A cleared error record, ready for any stream (a CUDA graph keeps one of its own)."""
        block = self.pool.malloc(_ERROR_RECORD.nbytes, self.current_stream())
        self.copy_from_host(block.ptr, _ERROR_RECORD)
        self.current_stream().synchronize()
        return block

    def take_bounds_failure(self, record: Optional[int] = None) -> Optional[tuple]:
        """``(site, lowest, highest, size)`` of the bounds check that failed first since the
        last call (in ``record``, the thread's by default), or None; waits for the work queued
        on the current stream, and clears the record."""
        record = self.error_record if record is None else record
        found = np.empty(4, np.int64)
        self.copy_to_host(found, record)
        if not found[0]:
            return None
        self.copy_from_host(record, _ERROR_RECORD)
        return int(found[0]) - 1, int(found[1]), int(found[2]), int(found[3])

    # ---- tensors
    def empty(self, shape, dtype: str, malloc=None) -> "CUDATensor":
        """An uninitialized tensor from the pool (the VM's ``_empty``), or over a block from
        ``malloc(nbytes)`` (a CUDA graph's own memory, `runtime.vm_cuda_graph`)."""
        if shape.__class__ is not tuple:
            shape = tuple(int(d) for d in shape)
        if self.lost is not None:  # the first new tensor after a sticky error recreates the context
            self.recreate()
        n = _ITEMSIZE.get(dtype) or _itemsize(dtype)
        for d in shape:
            n *= d
        try:
            block = self.pool.malloc(n, self.current_stream()) if malloc is None else malloc(n)
        except DeviceMemoryError as err:
            err.tensor = f"a {dtype} tensor of shape {shape}"
            raise
        t = _new(self.tensor_class)
        t._mem = block
        t._ptr = block.ptr
        t._shape = shape
        t._dtype = dtype
        t._device = self.device
        return t

    def view(self, mem, ptr: int, shape: tuple, dtype: str) -> "CUDATensor":
        """A tensor over memory someone else holds: ``mem`` keeps it alive."""
        t = _new(self.tensor_class)
        t._mem = mem
        t._ptr = ptr
        t._shape = shape
        t._dtype = dtype
        t._device = self.device
        return t

    def from_host(self, arr: np.ndarray) -> "CUDATensor":
        arr = np.require(arr, requirements="C")  # keeps 0-d arrays 0-d
        t = self.empty(arr.shape, _dtype_name(arr.dtype))
        self.copy_from_host(t._ptr, arr)
        return t

    def copy_from_host(self, ptr: int, arr: np.ndarray, stream: Optional[Stream] = None) -> None:
        """Queue a copy of C-contiguous ``arr`` to ``ptr`` on ``stream`` (the current one by
        default). From pageable host memory the driver stages the data before returning, so
        ``arr`` may change or go right after."""
        if arr.nbytes:
            self.activate()
            self.drv.memcpy_htod_async(ptr, _bytes_of(arr), (stream or self.current_stream()).raw)

    def copy_to_host(self, out: np.ndarray, ptr: int, stream: Optional[Stream] = None) -> None:
        """Copy into C-contiguous ``out`` once the work queued before on ``stream`` (the current
        one by default) is done."""
        if out.nbytes:
            self.activate()
            raw = (stream or self.current_stream()).raw
            with self.faults_found():
                self.drv.memcpy_dtoh_async(_bytes_of(out), ptr, raw)
                raw.synchronize()

    def copy_on_device(self, dst: int, src: int, nbytes: int, stream: Optional[Stream] = None) -> None:
        if nbytes:
            self.activate()
            self.drv.memcpy_dtod_async(dst, src, nbytes, (stream or self.current_stream()).raw)

    # ---- timing
    def time_calls(self, f, args: tuple, number: int, stream: Optional[Stream] = None) -> float:
        """Seconds that ``number`` calls of ``f(*args)`` take on the GPU, measured with CUDA
        events recorded on ``stream`` (the current one by default: a VM passes its own) before
        and after them."""
        self.activate()
        raw = (stream or self.current_stream()).raw
        start, end = self.drv.Event(), self.drv.Event()
        start.record(raw)
        for _ in range(number):
            f(*args)
        end.record(raw)
        end.synchronize()
        return start.time_till(end) / 1000.0

    def __repr__(self) -> str:
        return f"<tvms CUDA runtime {self.device}: {self.name}, {self.arch}>"


_RUNTIMES: dict = {}
_runtimes_lock = threading.Lock()


def runtime(dev) -> DeviceRuntime:
    """The `DeviceRuntime` of a CUDA device (created on first use); CUDAUnavailableError when
    it cannot be used."""
    index = _cuda_of(dev).index
    rt = _RUNTIMES.get(index)
    if rt is None:
        with _runtimes_lock:
            rt = _RUNTIMES.get(index)
            if rt is None:
                reason = unavailable_reason(index)
                if reason is not None:
                    raise CUDAUnavailableError(reason)
                rt = _RUNTIMES[index] = DeviceRuntime(_driver(), index)
    return rt


def recreate_context(dev=None) -> None:
    """Recreate GPU ``dev``'s CUDA context after a sticky error (`DeviceRuntime.recreate`);
    a VM does it itself on its next call."""
    runtime(dev).recreate()


def reset_primary_context(drv, index: int) -> None:
    """``cuDevicePrimaryCtxReset`` on GPU ``index``: pycuda wraps none, so through ``libcuda``
    (the library pycuda loaded), unless driver module ``drv`` offers
    ``reset_primary_context(index)`` itself (the test suite's stand-in does)."""
    own = getattr(drv, "reset_primary_context", None)
    if own is not None:
        own(index)
        return
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    handle = ctypes.c_int()
    status = lib.cuDeviceGet(ctypes.byref(handle), ctypes.c_int(index))
    if status == 0:
        status = lib.cuDevicePrimaryCtxReset_v2(handle)
    if status != 0:
        raise DeviceError(f"cannot recreate the CUDA context of cuda:{index}: cuDevicePrimaryCtxReset failed "
                          f"(error {status}); the process must start again")


def _cuda_of(dev) -> Device:
    dev = cuda_device(0) if dev is None else dev if isinstance(dev, Device) else as_device(dev)
    if dev.device_type != kDLCUDA:
        raise ValueError(f"expected a CUDA device, got {dev}")
    return dev


def memory_stats(dev=None) -> dict:
    """How GPU ``dev``'s memory pool is used (cuda:0 by default): ``in_use_bytes`` (lent to
    tensors, by size class), ``pooled_bytes`` (cached for reuse), ``reserved_bytes`` (both),
    ``peak_in_use_bytes`` and ``device_allocations`` (times the driver was asked)."""
    return runtime(dev).pool.stats()


def empty_cache(dev=None) -> None:
    """Give the memory cached by the pool back to the driver: of GPU ``dev``, or of every GPU
    tvms has used when None."""
    targets = list(_RUNTIMES.values()) if dev is None else [runtime(dev)]
    for rt in targets:
        rt.empty_cache()


@atexit.register
def _shutdown() -> None:
    """Free the cached memory and pop this thread's context before pycuda unloads (it aborts
    the process if a context is still pushed then)."""
    try:
        for rt in list(_RUNTIMES.values()):
            with contextlib.suppress(Exception):  # a failed kernel leaves the context unusable
                rt.sync()
                rt.empty_cache()
    finally:
        with contextlib.suppress(Exception):
            _release_thread()


def frame_factory(layout: list, nbytes: int, dev: Device, malloc=None):
    """The VM's arena frames on a GPU: one pool block per frame (from ``malloc``, the pool's by
    default), carved into the function's intermediate tensors (``layout``: (byte offset,
    shape, dtype) each)."""
    rt = runtime(dev)
    if malloc is None:
        def malloc(n: int):
            return rt.pool.malloc(n, rt.current_stream())  # the running VM's stream

    def new_frame() -> tuple:
        block = malloc(max(nbytes, 1))
        return tuple(rt.view(block, block.ptr + offset, tuple(shape), dtype) for offset, shape, dtype in layout)

    return new_frame


# ----------------------------------------------------------------------------- the module itself


class _CallableModule(types.ModuleType):
    """``tvms.runtime.cuda(0)`` names GPU 0, as TVM's ``tvm.runtime.cuda`` does, while
    ``tvms.runtime.cuda`` is also this module (``tvms.runtime.cuda.memory_stats()``)."""

    def __call__(self, index: int = 0) -> Device:
        return cuda_device(index)


sys.modules[__name__].__class__ = _CallableModule
