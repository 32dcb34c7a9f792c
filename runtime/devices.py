"""Devices: where a tensor's memory lives and where kernels run.

A `Device` is a (type, index) pair with DLPack's device-type codes, as in Apache TVM
(``tvms.cpu(0)``, ``tvms.cuda(0)``, ``tvms.device("cpu", 0)``). Code runs on the CPU and, with
pycuda and a GPU, on CUDA devices (`runtime.cuda`); the other types can only be named.

(Named devices.py, not device.py: ``tvms.runtime.device(...)`` is TVM's function.)
This module imports nothing heavy: `import tvmscript` stays fast.
"""

from __future__ import annotations

__all__ = ["Device", "cpu", "cuda", "gpu", "device", "DEVICE_TYPES"]

# DLPack device type codes (dlpack.h: DLDeviceType).
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOpenCL = 4
kDLVulkan = 7
kDLMetal = 8
kDLROCM = 10

DEVICE_TYPES = {kDLCPU: "cpu", kDLCUDA: "cuda", kDLCUDAHost: "cuda_host", kDLOpenCL: "opencl",
                kDLVulkan: "vulkan", kDLMetal: "metal", kDLROCM: "rocm"}

# Names a user (or a target string) may use for a device type.
_NAME_TO_TYPE = {
    "cpu": kDLCPU, "llvm": kDLCPU, "c": kDLCPU, "stackvm": kDLCPU, "ext_dev": kDLCPU,
    "cuda": kDLCUDA, "gpu": kDLCUDA, "nvptx": kDLCUDA, "cuda_host": kDLCUDAHost,
    "opencl": kDLOpenCL, "cl": kDLOpenCL, "vulkan": kDLVulkan, "metal": kDLMetal, "rocm": kDLROCM,
}


class Device:
    """A device: ``device_type`` is a DLPack code (1 = CPU, 2 = CUDA), ``index`` its number.

    Prints as TVM prints devices: ``str(tvms.cpu())`` is ``cpu:0`` and its repr is
    ``device(type='cpu', index=0)``. Devices compare and hash by value."""

    __slots__ = ("device_type", "index")

    def __init__(self, device_type: int, index: int = 0) -> None:
        if device_type not in DEVICE_TYPES:
            raise ValueError(f"unknown device type code {device_type!r} (known: {sorted(DEVICE_TYPES)})")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"device index must be a non-negative integer, got {index!r}")
        self.device_type = device_type
        self.index = index

    # TVM's older attribute name for the index.
    @property
    def device_id(self) -> int:
        return self.index

    @property
    def type(self) -> str:
        """The device type's name: ``"cpu"`` or ``"cuda"``."""
        return DEVICE_TYPES[self.device_type]

    def dlpack_device_type(self) -> int:
        return self.device_type

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.index)

    @property
    def exist(self) -> bool:
        """Whether tvms can use this device now: the CPU; a CUDA GPU when pycuda, the driver
        and a GPU of that index are there (`runtime.cuda.unavailable_reason` says what is not)."""
        if self.device_type == kDLCUDA:
            from .cuda import unavailable_reason

            return unavailable_reason(self.index) is None
        return self.device_type == kDLCPU and self.index == 0

    def sync(self) -> None:
        """Wait for the work queued on the device: on a GPU, tvms's stream of it; CPU work is
        synchronous, so there is none."""
        if self.device_type == kDLCUDA:
            from .cuda import runtime

            runtime(self).sync()

    def __eq__(self, other) -> bool:
        return (isinstance(other, Device) and other.device_type == self.device_type
                and other.index == self.index)

    def __hash__(self) -> int:
        return hash((self.device_type, self.index))

    def __repr__(self) -> str:
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"


_CPU0 = Device(kDLCPU, 0)


def cpu(index: int = 0) -> Device:
    """The host CPU (``tvms.cpu(0)``)."""
    return _CPU0 if index == 0 else Device(kDLCPU, index)


def cuda(index: int = 0) -> Device:
    """CUDA GPU number ``index`` (``tvms.cuda(0)``)."""
    return Device(kDLCUDA, index)


gpu = cuda


def device(dev_type, index: int | None = None) -> Device:
    """A device from a name or a DLPack code: ``device("cpu", 0)``, ``device("cuda:1")``,
    ``device("llvm")`` (a target name means its device), ``device(1)``."""
    if isinstance(dev_type, Device):
        return dev_type if index is None else Device(dev_type.device_type, index)
    if isinstance(dev_type, str):
        name = dev_type.strip()
        if ":" in name:
            name, _, num = name.partition(":")
            if index is None:
                try:
                    index = int(num)
                except ValueError:
                    raise ValueError(f"bad device {dev_type!r}: expected e.g. 'cuda:0'") from None
        # A target string such as "llvm -mcpu=native" names its device by its first word.
        key = name.split()[0].lower() if name.split() else ""
        if key not in _NAME_TO_TYPE:
            raise ValueError(f"unknown device {dev_type!r}: expected one of {sorted(set(_NAME_TO_TYPE))}")
        code = _NAME_TO_TYPE[key]
    elif isinstance(dev_type, int) and not isinstance(dev_type, bool):
        code = dev_type
    else:
        raise TypeError(f"device type must be a name such as 'cpu' or a DLPack code, got {dev_type!r}")
    return Device(code, 0 if index is None else index)
