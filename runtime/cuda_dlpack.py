"""DLPack exchange of GPU tensors: `from_dlpack` takes a CUDA tensor of PyTorch, CuPy... without
a copy, and `export` lends a `runtime.cuda.CUDATensor`'s memory (its ``__dlpack__``).

The exchange goes through ``"dltensor"`` capsules holding dlpack.h's ``DLManagedTensor``,
written and read here with ctypes (no DLPack library needed). An exported tensor stays alive
until the consumer calls its deleter (or the capsule dies unconsumed); memory taken from an
exporter goes back to it when the last tvms tensor over it goes, once the work tvms queued on
it is done.
"""

from __future__ import annotations

import ctypes
import re

from .cuda import CUDATensor, runtime
from .cuda_tensor import _type_name
from .devices import cuda as cuda_device, kDLCUDA

__all__ = ["from_dlpack", "export"]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DLDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DLDeleter)]


# dlpack.h's DLDataTypeCode
_DL_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4}
_DL_BOOL = 6
_DL_NAMES = {code: name for name, code in _DL_CODES.items()}

_DLTENSOR = b"dltensor"
_USED_DLTENSOR = b"used_dltensor"

_pyapi = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _pyapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pyapi))
_capsule_rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _pyapi))
# The same two, on a capsule being destroyed (a bare address: it must not be revived).
_capsule_is_valid_at = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pyapi))
_capsule_pointer_at = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pyapi))


def _dl_dtype(dtype: str) -> tuple:
    if dtype == "bool":
        return _DL_BOOL, 8
    m = re.fullmatch(r"(u?int|float|bfloat)(\d+)", dtype)
    if m is None:
        raise BufferError(f"__dlpack__: no DLPack type for dtype {dtype!r}")
    return _DL_CODES[m.group(1)], int(m.group(2))


def _dtype_of_dl(t: _DLDataType) -> str:
    if t.lanes != 1:
        raise TypeError(f"from_dlpack: vector types ({t.lanes} lanes) are not supported")
    if t.code == _DL_BOOL:
        return "bool"
    if t.code not in _DL_NAMES:
        raise TypeError(f"from_dlpack: unsupported DLPack type code {t.code}")
    return f"{_DL_NAMES[t.code]}{t.bits}"


# Exported DLManagedTensors by address, with what they point into: kept until their deleter runs.
_exports: dict = {}


@_DLDeleter
def _delete_export(address) -> None:
    _exports.pop(address, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule) -> None:
    # A consumer renames the capsule "used_dltensor" and calls the deleter itself; a capsule
    # still named "dltensor" was never consumed, and its tensor is ours to release.
    if _capsule_is_valid_at(capsule, _DLTENSOR):
        _exports.pop(_capsule_pointer_at(capsule, _DLTENSOR), None)


_CAPSULE_DESTRUCTOR = ctypes.cast(_capsule_destructor, ctypes.c_void_p)


def export(t: CUDATensor):
    """A "dltensor" capsule over ``t``'s memory; ``t`` stays alive until the consumer's
    deleter call (or the capsule's destruction, if nobody consumed it)."""
    managed = _DLManagedTensor()
    shape = (ctypes.c_int64 * max(len(t._shape), 1))(*t._shape)
    dl = managed.dl_tensor
    dl.data = t._ptr
    dl.device = _DLDevice(kDLCUDA, t._device.index)
    dl.ndim = len(t._shape)
    code, bits = _dl_dtype(t._dtype)
    dl.dtype = _DLDataType(code, bits, 1)
    dl.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    dl.strides = None  # compact, row-major
    dl.byte_offset = 0
    managed.deleter = _delete_export
    address = ctypes.addressof(managed)
    _exports[address] = (managed, shape, t)
    return _capsule_new(address, _DLTENSOR, _CAPSULE_DESTRUCTOR)


class _ForeignMemory:
    """Memory lent by a DLPack exporter: its deleter runs when the last tensor over it goes,
    after the work tvms queued on it is done (the exporter may reuse it right away)."""

    __slots__ = ("address", "deleter", "runtime")

    def __init__(self, address: int, deleter) -> None:
        self.address = address
        self.deleter = deleter
        self.runtime = None

    def __del__(self) -> None:
        try:
            if self.runtime is not None:
                self.runtime.sync()
        finally:
            if self.deleter:
                self.deleter(self.address)


def _consume(capsule) -> tuple:
    """Take over a "dltensor" capsule: (owner, data address, shape, dtype, device index)."""
    try:
        address = _capsule_pointer(capsule, _DLTENSOR)
    except ValueError:
        raise TypeError("from_dlpack: expected an unused \"dltensor\" capsule") from None
    managed = _DLManagedTensor.from_address(address)
    _capsule_rename(capsule, _USED_DLTENSOR)
    owner = _ForeignMemory(address, managed.deleter)
    dl = managed.dl_tensor
    if dl.device.device_type != kDLCUDA:
        raise ValueError(f"from_dlpack: the tensor is on DLPack device type {dl.device.device_type}, not a CUDA GPU")
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    dtype = _dtype_of_dl(dl.dtype)
    if dl.strides:
        n = 1
        for d in reversed(range(dl.ndim)):
            if shape[d] > 1 and dl.strides[d] != n:
                raise ValueError("from_dlpack: the tensor is not contiguous; make it so first (.contiguous())")
            n *= shape[d]
    return owner, (dl.data or 0) + dl.byte_offset, shape, dtype, dl.device.device_id


def from_dlpack(obj) -> CUDATensor:
    """A tensor sharing the memory of a CUDA DLPack exporter (a PyTorch or CuPy tensor on a
    GPU), no copy. The exporter's pending work is ordered before tvms's (its ``__dlpack__``
    gets tvms's stream), and it gets its memory back when the last tvms tensor over it goes."""
    if isinstance(obj, CUDATensor):
        return obj
    dev_type, index = obj.__dlpack_device__()
    if dev_type != kDLCUDA:
        raise ValueError(f"from_dlpack: the {_type_name(obj)} is on DLPack device type {dev_type}, not a CUDA GPU")
    rt = runtime(cuda_device(index))
    try:
        capsule = obj.__dlpack__(stream=rt.current_stream().raw.handle)
    except TypeError:  # an exporter from before the stream argument
        capsule = obj.__dlpack__()
    owner, ptr, shape, dtype, _ = _consume(capsule)
    owner.runtime = rt
    return rt.view(owner, ptr, shape, dtype)
