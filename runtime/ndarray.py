"""Tensors: n-dimensional arrays on a device, TVM's ``tvm.runtime.Tensor`` (``tvm.nd.NDArray``).

A CPU `Tensor` wraps a C-contiguous NumPy array. ``t.numpy()`` is a view of the same memory
(zero-copy), ``np.from_dlpack(t)`` / ``torch.from_dlpack(t)`` share it too (``__dlpack__`` is
NumPy's own), and a NumPy array handed to the VM is wrapped without a copy when it is already
C-contiguous. ``tvms.nd.array(x)`` copies, as TVM's does, so the tensor owns its memory.

On a CUDA device (``tvms.nd.array(x, tvms.cuda(0))``) a tensor is a `runtime.cuda.CUDATensor`,
a subclass of `Tensor` whose memory is on the GPU; the functions here hand such devices over to
`runtime.cuda`, which is imported only then.

The tensor keeps its data pointer, shape and dtype in slots: the VM reads them on every kernel
call, and reading them from NumPy (``arr.ctypes.data``) costs microseconds.
"""

from __future__ import annotations

import ctypes as _ctypes

import numpy as np

from .devices import Device, cpu, device as _as_device, kDLCPU, kDLCUDA
from .tensor_base import TensorBase

__all__ = ["Tensor", "NDArray", "array", "tensor", "empty", "from_dlpack", "data_ptr", "ALIGNMENT"]

# Memory that tvms allocates itself (tvms.nd.array/empty, the VM's per-function arenas) starts on
# this boundary, as TVM's allocator does; kernels may assume no more than the dtype's alignment
# for other tensors (NumPy arrays handed in, fresh VM outputs from np.empty: 16 bytes).
ALIGNMENT = 64

_CPU0 = cpu(0)
_new = object.__new__
_from_address = _ctypes.c_void_p.from_address


def _find_data_offset() -> int | None:
    """Where a NumPy array object keeps its data pointer (``PyArrayObject.data``), so it can be
    read in ~150 ns instead of ~2 us through ``arr.ctypes`` / ``__array_interface__``. Verified
    on a few arrays; None (use the slow, portable way) if the layout is not the expected one."""
    probes = [np.empty(n, np.uint8)[k:] for n, k in ((7, 0), (64, 3), (4096, 17))]
    for off in (16, 24, 32):
        try:
            if all(_from_address(id(a) + off).value == a.__array_interface__["data"][0] for a in probes):
                return off
        except Exception:  # pragma: no cover - exotic interpreters
            return None
    return None  # pragma: no cover


_DATA_OFFSET = _find_data_offset()

if _DATA_OFFSET is not None:
    def data_ptr(arr: np.ndarray, _fa=_from_address, _id=id, _off=_DATA_OFFSET) -> int:
        """The address of an array's first element."""
        return _fa(_id(arr) + _off).value or 0
else:  # pragma: no cover
    def data_ptr(arr: np.ndarray) -> int:
        return arr.__array_interface__["data"][0]


class Tensor(TensorBase):
    """An n-dimensional array on a device. ``shape`` is a tuple of ints, ``dtype`` a string
    (``"float32"``), ``device`` a `Device`; ``numpy()`` shares memory with the tensor."""

    __slots__ = ("_array", "_ptr", "_shape", "_dtype", "_device", "__weakref__")

    def __init__(self, array, device: Device | None = None) -> None:
        """Wrap ``array`` (any array-like) without copying when it is a C-contiguous NumPy
        array; ``tvms.nd.array`` is the copying constructor."""
        arr = np.asarray(array)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        self._array = arr
        self._ptr = data_ptr(arr)
        self._shape = arr.shape
        self._dtype = _dtype_name(arr.dtype)
        self._device = _host_device(device)

    # ---- attributes, with TVM's names
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def strides(self) -> tuple:
        """Element strides (the tensor is always compact, row-major)."""
        return tuple(s // self._array.itemsize for s in self._array.strides)

    def numel(self) -> int:
        return int(self._array.size)

    def size(self) -> int:
        return int(self._array.size)

    @property
    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def data_ptr(self) -> int:
        return self._ptr

    def is_contiguous(self) -> bool:
        return True

    # ---- data in and out
    def numpy(self) -> np.ndarray:
        """A NumPy view of the tensor: no copy; writing to it writes the tensor."""
        return self._array.view()

    asnumpy = numpy  # TVM's old name

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            return self._array.astype(dtype)
        if copy:
            return self._array.copy()
        return self._array

    def copyfrom(self, source) -> "Tensor":
        """Copy ``source`` (a NumPy array, a Tensor, anything array-like) into this tensor;
        shapes must match, the dtype is converted."""
        src = source.numpy() if isinstance(source, Tensor) else np.asarray(source)
        if src.shape != self._shape:
            raise ValueError(f"copyfrom: source shape {tuple(src.shape)} does not match the tensor's shape "
                             f"{self._shape}")
        np.copyto(self._array, src, casting="unsafe")
        return self

    def copyto(self, target) -> "Tensor":
        """Copy into another tensor (returned), or onto a device (a new tensor)."""
        if isinstance(target, Tensor):
            target.copyfrom(self)
            return target
        if isinstance(target, (Device, str)):
            return array(self._array, device=_as_device(target))
        raise TypeError(f"copyto expects a Tensor or a Device, got {type(target).__name__}")

    # ---- DLPack: NumPy's own export, so consumers share the memory
    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.index)

    to_dlpack = __dlpack__

    # ---- misc
    def same_as(self, other) -> bool:
        return self is other

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __repr__(self) -> str:
        return f"<tvms.runtime.Tensor shape={self._shape}, {self._device}>\n{self._array!r}"

    def __str__(self) -> str:
        return str(self._array)

    def __getstate__(self):
        return {"array": np.array(self._array), "device": (self._device.device_type, self._device.index)}

    def __setstate__(self, state) -> None:
        arr = np.require(state["array"], requirements="C")  # keeps 0-d arrays 0-d
        self._array = arr
        self._ptr = data_ptr(arr)
        self._shape = arr.shape
        self._dtype = _dtype_name(arr.dtype)
        self._device = Device(*state["device"])


NDArray = Tensor  # the name before TVM 0.21


_DTYPE_NAMES: dict = {}


def _dtype_name(dt: np.dtype) -> str:
    """TVM's name of a NumPy dtype ("float32"); cached: ``dtype.name`` costs a microsecond."""
    try:
        return _DTYPE_NAMES[dt]
    except KeyError:
        name = dt.name
        _DTYPE_NAMES[dt] = name
        return name


def _check_device(dev) -> Device:
    """``dev`` as a Device tensors can live on: the CPU (the default) or a CUDA GPU."""
    if dev is None:
        return _CPU0
    if not isinstance(dev, Device):
        dev = _as_device(dev)
    if dev.device_type not in (kDLCPU, kDLCUDA):
        raise NotImplementedError(f"tensors on {dev} are not supported: only on the CPU and on CUDA GPUs")
    return dev


def _host_device(dev) -> Device:
    dev = _check_device(dev)
    if dev.device_type != kDLCPU:
        raise TypeError(f"Tensor(array, {dev}) wraps host memory; copy the array to the GPU with "
                        f"tvms.nd.array(array, tvms.cuda({dev.index}))")
    return dev


def _cuda():
    from . import cuda

    return cuda


def _gpu_tensor(arr):
    """``arr`` as a tvms tensor when it lives on a CUDA GPU (a PyTorch or CuPy GPU tensor is
    wrapped, not copied); None when it is host data."""
    if isinstance(arr, Tensor):
        return arr if arr._device.device_type == kDLCUDA else None
    if hasattr(arr, "__dlpack_device__") and not isinstance(arr, np.ndarray):
        if arr.__dlpack_device__()[0] == kDLCUDA:
            from .cuda_dlpack import from_dlpack

            return from_dlpack(arr)
    return None


def _wrap(arr: np.ndarray, dev: Device = _CPU0) -> Tensor:
    """A tensor over ``arr`` (C-contiguous), no checks: the VM's fast path."""
    t = _new(Tensor)
    t._array = arr
    t._ptr = data_ptr(arr)
    t._shape = arr.shape
    t._dtype = _dtype_name(arr.dtype)
    t._device = dev
    return t


def _aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an ALIGNMENT boundary."""
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = (-data_ptr(raw)) % ALIGNMENT
    return raw[start:start + nbytes].view(dt).reshape(shape)


def empty(shape, dtype="float32", device=None, mem_scope=None) -> Tensor:
    """An uninitialized tensor (``tvms.runtime.empty``)."""
    dev = _check_device(device)
    if isinstance(shape, int):
        shape = (shape,)
    if dev.device_type == kDLCUDA:
        return _cuda().runtime(dev).empty(tuple(int(d) for d in shape), _dtype_name(_np_dtype(dtype)))
    return _wrap(_aligned_empty(shape, _np_dtype(dtype)), dev)


def array(arr, device=None, dtype=None, mem_scope=None) -> Tensor:
    """A tensor holding a copy of ``arr`` (a NumPy array, a Tensor on any device, anything
    array-like or exporting DLPack), on ``device`` (the CPU by default, or a CUDA GPU:
    ``tvms.nd.array(x, tvms.cuda(0))``), converted to ``dtype`` if given."""
    dev = _check_device(device)
    gpu = _gpu_tensor(arr)
    if gpu is not None:
        if dev.device_type == kDLCUDA and (dtype is None or _dtype_name(_np_dtype(dtype)) == gpu._dtype):
            return gpu.copyto(dev)
        src = gpu.numpy()
    elif isinstance(arr, Tensor):
        src = arr._array
    elif isinstance(arr, np.ndarray):
        src = arr
    elif hasattr(arr, "__dlpack__") and not isinstance(arr, (list, tuple)):
        src = np.from_dlpack(arr)
    else:
        src = np.asarray(arr)
    if dtype is not None:
        src = src.astype(_np_dtype(dtype), copy=False)
    if src.dtype == object:
        raise TypeError(f"cannot make a tensor from {type(arr).__name__} holding Python objects")
    if dev.device_type == kDLCUDA:
        return _cuda().runtime(dev).from_host(src)
    out = _aligned_empty(src.shape, src.dtype)
    np.copyto(out, src)
    return _wrap(out, dev)


def tensor(arr, device=None, mem_scope=None) -> Tensor:
    """TVM 0.21+'s name for `array`: ``tvms.runtime.tensor(np_array, tvms.cpu())``."""
    return array(arr, device)


def from_dlpack(obj) -> Tensor:
    """A tensor sharing memory with any DLPack exporter (NumPy, PyTorch and CuPy tensors, on
    the CPU or a CUDA GPU)."""
    if isinstance(obj, Tensor):
        return obj
    gpu = _gpu_tensor(obj)
    if gpu is not None:
        return gpu
    arr = obj if isinstance(obj, np.ndarray) else np.from_dlpack(obj)
    if not arr.flags.c_contiguous:
        raise ValueError("from_dlpack: the tensor is not contiguous; copy it with tvms.nd.array instead")
    return _wrap(arr)


def _np_dtype(dtype) -> np.dtype:
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:  # pragma: no cover
            raise TypeError("bfloat16 tensors need the ml_dtypes package") from None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}") from None
