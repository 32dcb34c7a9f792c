"""The CUDA runtime, through pycuda: the driver, a caching memory pool, one stream per device,
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
* All work on a GPU (copies, kernels) goes to one stream of that GPU, so it runs in the order
  it was issued: memory a tensor gives back to the pool can serve the next allocation at once,
  as later work on the stream runs after the earlier work that used it.
* Memory comes from a caching pool (`MemoryPool`): sizes are rounded up to a few classes,
  blocks freed by tensors that die are kept and handed out again, so a VM call in a loop
  allocates nothing from the driver after the first one. `memory_stats` and `empty_cache`
  show and release it.
* Kernels (`runtime.cuda_kernels.CUDAKernel`) are launched on that stream too.

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

from .devices import DEVICE_TYPES, Device, cuda as cuda_device, device as as_device, kDLCPU, kDLCUDA
from .ndarray import Tensor, _aligned_empty, _dtype_name, _np_dtype, _wrap

__all__ = [
    "CUDAUnavailableError", "unavailable_reason", "device_arch", "runtime", "DeviceRuntime", "MemoryPool",
    "memory_stats", "empty_cache", "DeviceError", "DeviceMemoryError", "CUDATensor", "tensor_class", "as_tensor_on", "check_arch",
    "frame_factory",
]

# The device attributes a launch is checked against (`DeviceRuntime.limits`).
LAUNCH_LIMITS = ("MAX_THREADS_PER_BLOCK", "MAX_BLOCK_DIM_X", "MAX_BLOCK_DIM_Y", "MAX_BLOCK_DIM_Z", "MAX_GRID_DIM_X",
                 "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "MAX_REGISTERS_PER_BLOCK")
_ERROR_RECORD = np.zeros(4, np.int64)
DEFAULT_CACHE_LIMIT = 1 << 30  # bytes of free blocks a device's pool keeps at most (`MemoryPool.cache_limit`)  # a cleared bounds-check error record (`DeviceRuntime.error_record`)

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


_thread = _ThreadState()


def _release_thread() -> None:
    _thread.runtime = None
    _thread.pushed = None


# ----------------------------------------------------------------------------- memory


def round_size(nbytes: int) -> int:
    """The pool's size class for ``nbytes``: a multiple of 512 bytes below 1 MiB, then eight
    classes per power of two (at most 12.5% more than asked)."""
    if nbytes <= 512:
        return 512
    if nbytes < 1 << 20:
        return (nbytes + 511) & ~511
    step = 1 << (nbytes.bit_length() - 4)
    return (nbytes + step - 1) // step * step


class _Block:
    """A block of device memory lent by a `MemoryPool`. Tensors hold it (views of one block
    share it); when the last one goes, the block goes back to the pool, not to the driver."""

    __slots__ = ("pool", "alloc", "size", "ptr")

    def __del__(self) -> None:
        self.pool._give_back(self.alloc, self.ptr, self.size)


_new = object.__new__


class MemoryPool:
    """A caching allocator for one GPU. ``allocate(nbytes)`` gets memory from the driver (an
    object whose ``int()`` is the device address and whose ``free()`` releases it); blocks
    are handed out by size class (`round_size`) and kept, when given back, for the next
    request of that class. Reuse needs no synchronization because all of tvms's work on the
    device is on one stream (see the module's docstring). No lock: blocks come back from
    finalizers, which may run in the middle of `malloc` on the same thread; each list and dict
    operation is atomic, and only the counters may drift when several threads allocate."""

    def __init__(self, allocate, cache_limit: Optional[int] = DEFAULT_CACHE_LIMIT) -> None:
        self._allocate = allocate
        self._cached: dict = {}      # size class -> [(allocation, address)]
        self.in_use = 0              # bytes lent out (by size class)
        self.pooled = 0              # bytes cached, free
        self.peak = 0
        self.device_allocations = 0  # times the driver was asked for memory
        self.cache_limit = cache_limit  # the high-water mark of `pooled` (None: no limit)

    def malloc(self, nbytes: int) -> _Block:
        size = round_size(nbytes)
        try:
            alloc, ptr = self._cached[size].pop()  # one step: another thread may take the last one
            self.pooled -= size
        except (KeyError, IndexError):
            if self.cache_limit is not None and self.pooled > self.cache_limit:
                # Above the high-water mark (calls of ever new shapes leave blocks of ever new
                # sizes): the cached blocks go back to the driver before it is asked for more.
                self.release_cached()
            alloc = self._allocate(size)
            ptr = int(alloc)
            self.device_allocations += 1
        self.in_use += size
        if self.in_use > self.peak:
            self.peak = self.in_use
        block = _new(_Block)
        block.pool = self
        block.alloc = alloc
        block.size = size
        block.ptr = ptr
        return block

    def _give_back(self, alloc, ptr: int, size: int) -> None:
        self.in_use -= size
        self.pooled += size
        self._cached.setdefault(size, []).append((alloc, ptr))

    def release_cached(self) -> None:
        """Free the cached blocks back to the driver (those lent out stay)."""
        cached, self._cached = self._cached, {}
        self.pooled = 0
        for blocks in cached.values():
            for alloc, _ in blocks:
                alloc.free()

    def stats(self) -> dict:
        return {"in_use_bytes": self.in_use, "pooled_bytes": self.pooled,
                "reserved_bytes": self.in_use + self.pooled, "peak_in_use_bytes": self.peak,
                "device_allocations": self.device_allocations}


class DeviceError(TVMScriptError, RuntimeError):
    """A kernel failed on the GPU: its launch was refused, or it faulted (an illegal address, an
    unspecified launch failure) and the next synchronization found out. The message names the
    kernel and its prim_func (for a fault found later, the kernels launched since the device
    last synchronized), and its span is the prim_func. ``sticky``: the error is one of those
    that leave the CUDA context unusable (`STICKY_ERRORS`); the message then says so."""

    def __init__(self, message: str, span=None, sticky: bool = False) -> None:
        if sticky:
            message += ("; this error leaves the CUDA context unusable: every later call on the device fails "
                        "until the process starts again")
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


class DeviceMemoryError(TVMScriptError, MemoryError):
    """The GPU is out of memory, even after the pool released its cached blocks: the message
    names what was being allocated (a tensor's dtype and shape, when it is one: ``tensor``),
    its size, the bytes tvms's tensors hold and what the device has free. Raised at a Relax
    binding, the VM places it there (which tensor of the program)."""

    def __init__(self, rt: "DeviceRuntime", nbytes: int, driver_message: str = "") -> None:
        self.device, self.nbytes, self.in_use, self.driver_message = rt.device, nbytes, rt.pool.in_use, driver_message
        self.free = self.total = None
        try:
            self.free, self.total = (int(x) for x in rt.drv.mem_get_info())
        except Exception:  # noqa: BLE001 - a driver that cannot tell: left out of the message
            pass
        self._tensor = None
        super().__init__(self._text())

    @property
    def tensor(self) -> Optional[str]:
        return self._tensor

    @tensor.setter
    def tensor(self, what: str) -> None:
        self._tensor = what
        self.message = self._text()

    def _text(self) -> str:
        what = f"{self._tensor} ({_bytes(self.nbytes)})" if self._tensor else _bytes(self.nbytes)
        free = f", {_bytes(self.free)} of {_bytes(self.total)} free on the device" if self.total is not None else ""
        return (f"out of memory on {self.device}: cannot allocate {what}; tvms's tensors hold "
                f"{_bytes(self.in_use)}{free} (the pool's cached blocks were released first)")


def _bytes(n: int) -> str:
    """``n`` bytes, readably: ``"4.0 MiB"``, ``"512 bytes"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


# ----------------------------------------------------------------------------- one device


class DeviceRuntime:
    """One GPU as tvms uses it: its primary context, the stream all of tvms's work on it goes
    to, its memory pool, and the class of the tensors that live on it. One per device
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
        self.stream = drv.Stream()
        self.pool = MemoryPool(self._device_alloc)
        self.tensor_class = tensor_class(index)
        self._errors = None  # the kernels' bounds-check error record (`error_record`)
        # The prim_funcs launched since the device last synchronized: the suspects of a fault
        # found there (`faults_found`); bounded, as a call may launch many.
        self.launched = collections.deque(maxlen=16)

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

    def sync(self) -> None:
        """Wait until the work queued on the device's stream is done."""
        self.activate()
        with self.faults_found():
            self.stream.synchronize()

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
        """The device address of the record where kernels note a failed bounds check (four
        int64 words, all zero until one fails: `compiler.cuda_spec.BoundsChecks`), allocated
        and cleared on first use; kernels that check take it as their last argument."""
        if self._errors is None:
            self._errors = self._device_alloc(_ERROR_RECORD.nbytes)
            self.copy_from_host(int(self._errors), _ERROR_RECORD)
        return int(self._errors)

    def take_bounds_failure(self) -> Optional[tuple]:
        """``(site, lowest, highest, size)`` of the bounds check that failed first since the
        last call, or None; waits for the work queued on the stream, and clears the record."""
        record = np.empty(4, np.int64)
        self.copy_to_host(record, self.error_record)
        if not record[0]:
            return None
        self.copy_from_host(self.error_record, _ERROR_RECORD)
        return int(record[0]) - 1, int(record[1]), int(record[2]), int(record[3])

    # ---- tensors
    def empty(self, shape, dtype: str, malloc=None) -> "CUDATensor":
        """An uninitialized tensor from the pool (the VM's ``_empty``), or over a block from
        ``malloc(nbytes)`` (a CUDA graph's own memory, `runtime.vm_cuda_graph`)."""
        if shape.__class__ is not tuple:
            shape = tuple(int(d) for d in shape)
        n = _ITEMSIZE.get(dtype) or _itemsize(dtype)
        for d in shape:
            n *= d
        try:
            block = self.pool.malloc(n) if malloc is None else malloc(n)
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

    def copy_from_host(self, ptr: int, arr: np.ndarray) -> None:
        """Queue a copy of C-contiguous ``arr`` to ``ptr``. From pageable host memory the
        driver stages the data before returning, so ``arr`` may change or go right after."""
        if arr.nbytes:
            self.activate()
            self.drv.memcpy_htod_async(ptr, _bytes_of(arr), self.stream)

    def copy_to_host(self, out: np.ndarray, ptr: int) -> None:
        """Copy into C-contiguous ``out`` once the work queued before is done."""
        if out.nbytes:
            self.activate()
            with self.faults_found():
                self.drv.memcpy_dtoh_async(_bytes_of(out), ptr, self.stream)
                self.stream.synchronize()

    def copy_on_device(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.activate()
            self.drv.memcpy_dtod_async(dst, src, nbytes, self.stream)

    # ---- timing
    def time_calls(self, f, args: tuple, number: int) -> float:
        """Seconds that ``number`` calls of ``f(*args)`` take on the GPU, measured with CUDA
        events recorded on the device's stream before and after them."""
        self.activate()
        start, end = self.drv.Event(), self.drv.Event()
        start.record(self.stream)
        for _ in range(number):
            f(*args)
        end.record(self.stream)
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


# ----------------------------------------------------------------------------- dtypes


_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
             "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}


def _itemsize(dtype: str) -> int:
    m = re.fullmatch(r"(?:u?int|float|bfloat)(\d+)", dtype)
    if m is not None:
        return max(1, int(m.group(1)) // 8)
    return _np_dtype(dtype).itemsize


def _bytes_of(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous array's bytes, as a flat uint8 view (every dtype, bfloat16 and bool
    included, copies as raw bytes)."""
    return arr.reshape(-1).view(np.uint8)


# ----------------------------------------------------------------------------- tensors


class CUDATensor(Tensor):
    """A tensor in GPU memory: ``tvms.nd.array(x, tvms.cuda(0))``, a VM's output on a GPU, or
    ``tvms.runtime.from_dlpack(torch_cuda_tensor)``. ``numpy()`` copies to the host,
    ``copyto`` to any device; ``__dlpack__`` lends the memory to PyTorch, CuPy, ...

    The memory (``_mem``) is a block of the device's pool, returned to it when the last tensor
    over it goes, or the memory of a DLPack exporter. Each device has its own subclass
    (`tensor_class`), so a VM knows a tensor is on its GPU from its class alone."""

    __slots__ = ("_mem",)

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("GPU tensors are made with tvms.nd.array(x, tvms.cuda(0)) or "
                        "tvms.nd.empty(shape, dtype, tvms.cuda(0))")

    @property
    def _runtime(self) -> DeviceRuntime:
        return runtime(self._device)

    @property
    def strides(self) -> tuple:
        out, n = [], 1
        for d in reversed(self._shape):
            out.append(n)
            n *= d
        return tuple(reversed(out))

    def numel(self) -> int:
        n = 1
        for d in self._shape:
            n *= d
        return n

    size = numel

    @property
    def nbytes(self) -> int:
        return self.numel() * _itemsize(self._dtype)

    # ---- data in and out
    def numpy(self) -> np.ndarray:
        """A copy of the tensor in host memory, once the work queued on the GPU is done."""
        out = np.empty(self._shape, _np_dtype(self._dtype))
        self._runtime.copy_to_host(out, self._ptr)
        return out

    asnumpy = numpy

    def __array__(self, dtype=None, copy=None):
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def copyfrom(self, source) -> "CUDATensor":
        """Copy ``source`` (a tensor on any device, a NumPy array, anything array-like) into
        this tensor; shapes must match, the dtype is converted."""
        if isinstance(source, CUDATensor) and source._device == self._device and source._dtype == self._dtype:
            self._check_shape(source._shape)
            self._runtime.copy_on_device(self._ptr, source._ptr, self.nbytes)
            return self
        src = source.numpy() if isinstance(source, Tensor) else np.asarray(source)
        self._check_shape(src.shape)
        self._runtime.copy_from_host(self._ptr, np.ascontiguousarray(src, dtype=_np_dtype(self._dtype)))
        return self

    def _check_shape(self, shape) -> None:
        if tuple(shape) != self._shape:
            raise ValueError(f"copyfrom: source shape {tuple(shape)} does not match the tensor's shape {self._shape}")

    def copyto(self, target) -> Tensor:
        """Copy into another tensor (returned), or onto a device (a new tensor there)."""
        if isinstance(target, Tensor):
            return target.copyfrom(self)
        if not isinstance(target, (Device, str)):
            raise TypeError(f"copyto expects a Tensor or a Device, got {type(target).__name__}")
        dev = as_device(target)
        if dev.device_type == kDLCPU:
            out = _aligned_empty(self._shape, _np_dtype(self._dtype))
            self._runtime.copy_to_host(out, self._ptr)
            return _wrap(out, dev)
        if dev == self._device:
            t = self._runtime.empty(self._shape, self._dtype)
            self._runtime.copy_on_device(t._ptr, self._ptr, self.nbytes)
            return t
        return runtime(_cuda_of(dev)).from_host(self.numpy())  # another GPU: through the host

    # ---- DLPack
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A ``"dltensor"`` capsule over the tensor's memory (a copy's, with ``copy=True``).
        Unless the consumer passes ``stream=-1``, tvms's queued work is finished first, so
        the consumer's stream sees the data complete."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: the tensor is on {self._device}; cannot export it to device {dl_device}")
        if copy:
            return self.copyto(self._device).__dlpack__(stream=stream)
        if stream != -1:
            self._runtime.sync()
        from .cuda_dlpack import export

        return export(self)

    to_dlpack = __dlpack__

    def __repr__(self) -> str:
        return f"<tvms.runtime.Tensor shape={self._shape}, {self._device}>\n{self.numpy()!r}"

    def __str__(self) -> str:
        return str(self.numpy())

    def __reduce__(self):
        return (_unpickle, (self.numpy(), self._device.index))


def _unpickle(arr: np.ndarray, index: int) -> CUDATensor:
    return runtime(cuda_device(index)).from_host(arr)


_TENSOR_CLASSES: dict = {}


def tensor_class(index: int) -> type:
    """The class of the tensors on GPU ``index``: a subclass of `CUDATensor` of its own."""
    cls = _TENSOR_CLASSES.get(index)
    if cls is None:
        cls = _TENSOR_CLASSES.setdefault(
            index, type("CUDATensor", (CUDATensor,), {"__slots__": (), "__module__": __name__,
                                                      "__doc__": f"A tensor on cuda:{index}."}))
    return cls


def as_tensor_on(value, dev: Device, what: str, name: str = "x"):
    """``value`` as a tensor on GPU ``dev``: a tvms tensor there as it is, a DLPack exporter
    there (a PyTorch or CuPy tensor) wrapped without a copy; None when ``value`` is no tensor
    at all. A tensor anywhere else is a TypeError starting with ``what`` that says where it
    is and how to copy it over (``name`` stands for the value in that hint)."""
    if value.__class__ is tensor_class(dev.index):
        return value
    if isinstance(value, Tensor):
        got, hint = f"a tensor on {value._device}", f"{name}.copyto(tvms.cuda({dev.index}))"
    elif isinstance(value, np.ndarray):
        got, hint = "a NumPy array on the CPU", f"tvms.nd.array({name}, tvms.cuda({dev.index}))"
    elif hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        dev_type, index = value.__dlpack_device__()
        if (dev_type, index) == (kDLCUDA, dev.index):
            from .cuda_dlpack import from_dlpack

            return from_dlpack(value)
        where = ("the CPU" if dev_type == kDLCPU else str(Device(dev_type, index)) if dev_type in DEVICE_TYPES
                 else f"DLPack device ({dev_type}, {index})")
        got, hint = f"a {_type_name(value)} on {where}", f"tvms.nd.array({name}, tvms.cuda({dev.index}))"
    else:
        return None
    raise TypeError(f"{what}: expected a tensor on {dev}, got {got} (copy it with {hint})")


def _type_name(value) -> str:
    t = type(value)
    return t.__name__ if t.__module__ in ("builtins", None) else f"{t.__module__.split('.')[0]}.{t.__name__}"


def frame_factory(layout: list, nbytes: int, dev: Device, malloc=None):
    """The VM's arena frames on a GPU: one pool block per frame (from ``malloc``, the pool's by
    default), carved into the function's intermediate tensors (``layout``: (byte offset,
    shape, dtype) each)."""
    rt = runtime(dev)
    malloc = malloc or rt.pool.malloc

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
