"""Tensors in GPU memory (`CUDATensor`, a class per device: `tensor_class`), their dtypes'
sizes, and `as_tensor_on`, which takes a value to a tensor on a given GPU (a tvms tensor, or a
PyTorch or CuPy one through DLPack). The device they live on is `runtime.cuda`'s
`DeviceRuntime`, which makes them and copies their data."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from .devices import DEVICE_TYPES, Device, cuda as cuda_device, device as as_device, kDLCPU, kDLCUDA
from .ndarray import Tensor, _aligned_empty, _np_dtype, _wrap

if TYPE_CHECKING:
    from .cuda import DeviceRuntime, Stream

__all__ = ["CUDATensor", "tensor_class", "as_tensor_on"]


def runtime(dev):
    """`runtime.cuda.runtime` (imported when first needed: that module imports this one)."""
    from .cuda import runtime as device_runtime

    return device_runtime(dev)


def _cuda_of(dev):
    from .cuda import _cuda_of as cuda_of

    return cuda_of(dev)


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
    def _stream_to_touch(self, *others) -> Stream:
        """The stream to copy this tensor's data on, made to wait first for the other streams
        that used its memory (and ``others``'s): the one it was made on (a read needs no new
        user noted), the current one for memory of a DLPack exporter."""
        rt = self._runtime
        stream = getattr(self._mem, "stream", None) or rt.current_stream()
        rt.order_after((self, *others), stream)
        return stream

    def numpy(self) -> np.ndarray:
        """A copy of the tensor in host memory, once the work queued on the GPU is done."""
        out = np.empty(self._shape, _np_dtype(self._dtype))
        self._runtime.copy_to_host(out, self._ptr, self._stream_to_touch())
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
            self._runtime.copy_on_device(self._ptr, source._ptr, self.nbytes, self._stream_to_touch(source))
            return self
        src = source.numpy() if isinstance(source, Tensor) else np.asarray(source)
        self._check_shape(src.shape)
        self._runtime.copy_from_host(self._ptr, np.ascontiguousarray(src, dtype=_np_dtype(self._dtype)),
                                     self._stream_to_touch())
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
            self._runtime.copy_to_host(out, self._ptr, self._stream_to_touch())
            return _wrap(out, dev)
        if dev == self._device:
            rt = self._runtime
            stream = rt.current_stream()
            rt.order_after((self,), stream)
            t = rt.empty(self._shape, self._dtype)
            rt.copy_on_device(t._ptr, self._ptr, self.nbytes, stream)
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
