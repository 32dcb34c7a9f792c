"""What the CUDA backend hands the runtime: compiled code plus, per prim_func, how to launch it.

The compiler side (`compiler.codegen_cuda`, `compiler.nvrtc`) fills these in without a GPU;
the runtime side (`runtime.cuda`) loads ``CUDACode.cubin`` onto a device and runs each
`CUDAFunction` by evaluating its launch dimensions and launching its kernels in order.

Dimension texts (``grid``, ``block``, ``dyn_shared_bytes``, ``workspaces``) are Python
expressions over the prim_func's symbolic variables, read by `runtime.kernel.eval_dim_text`
(``"((n + 127) // 128)"``, ``"4"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = ["KernelArg", "LaunchSpec", "CUDAFunction", "CUDACode", "BoundsChecks", "HostCheckSpec"]


@dataclass(frozen=True)
class KernelArg:
    """One argument of a ``__global__`` kernel, in order.

    ``kind``: ``"buffer"`` (``index`` is the position of the buffer among the prim_func's
    buffer parameters, i.e. in the ``pointers`` the VM passes), ``"scalar"`` (``index`` among
    its scalar parameters), ``"sym"`` (``name`` is a symbolic variable of
    `CUDAFunction.sym_vars`), ``"workspace"`` (``index`` into `CUDAFunction.workspaces`) or
    ``"errors"`` (the device's bounds-check error record, `BoundsChecks`).
    ``ctype`` is pycuda's struct letter for the argument: ``"P"`` a device pointer, ``"i"``
    int32, ``"q"`` int64, ``"f"`` float, ``"d"`` double, ``"b"``/``"B"``/``"h"``/``"H"``/``"I"``/``"Q"``
    smaller or unsigned integers."""

    kind: str
    ctype: str
    index: int = -1
    name: str = ""


@dataclass
class LaunchSpec:
    """One kernel launch: ``kernel`` is the ``extern "C" __global__`` function's name in
    `CUDACode.source`; ``grid`` and ``block`` hold three dimension texts (x, y, z);
    ``dyn_shared_bytes`` the dynamic shared memory (a dimension text, ``"0"`` for none)."""

    kernel: str
    grid: tuple
    block: tuple
    dyn_shared_bytes: str
    args: list


@dataclass
class HostCheckSpec:
    """A bounds check the host runs before launch ``before`` (`compiler.bounds_check`'s
    ``CHECK_RANGE`` hoisted out of every kernel): ``lowest``, ``highest`` and ``size`` are
    dimension texts, and so is ``runs_if`` (None: always checked; else checked only when it is
    positive: the loops the access is in run at all); it fails when an index in ``[lowest,
    highest]`` is outside ``[0, size)``, with message ``site`` of the function's `BoundsChecks`."""

    before: int
    lowest: str
    highest: str
    size: str
    site: int
    runs_if: Optional[str] = None


@dataclass
class BoundsChecks:
    """A function's bounds checks that did not prove their access in bounds at compile time.

    ``messages[site]``: the message of each check (with the runtime's marks for the index and
    size, `runtime.kernel_abi.INDEX_MARK`, and its place by number, ``PLACE_MARK``), as the CPU
    kernels bake it in. Sites are numbered across the module, this function's from
    ``first_site`` on, so that a record names its function. A kernel's failing check records
    ``first_site + site + 1``, the lowest and highest
    index and the size in the device's error record (four int64 words, the first failure
    only) and stops that thread (``return``: no trap, so the CUDA context survives); the host
    reads the record after the kernels that have such checks (``device``) and raises.
    ``host``: `HostCheckSpec`s, run before launching."""

    messages: list = field(default_factory=list)
    host: list = field(default_factory=list)
    device: bool = False
    first_site: int = 0


@dataclass
class CUDAFunction:
    """A prim_func compiled for CUDA: its parameters (`runtime.kernel_abi.ParamSpec`, as the CPU
    kernels have), its symbolic variables (values come from the buffer shapes, as on the
    CPU), the global scratch buffers the host allocates for one call (bytes, dimension texts)
    and the launches, run in order on one stream; ``checks`` its run-time bounds checks, and
    ``places`` (a `runtime.kernel_abi.PlaceTable`) where their failures are in the PrimFunc
    the build was given."""

    name: str
    params: list
    sym_vars: list
    workspaces: list = field(default_factory=list)
    launches: list = field(default_factory=list)
    span: object = None
    checks: BoundsChecks = field(default_factory=BoundsChecks)
    places: object = None


@dataclass
class CUDACode:
    """One CUDA translation unit (every kernel of a module) and what NVRTC made of it.
    ``arch`` is ``"sm_90"``; ``cubin`` the machine code for it (None when only PTX was asked
    for); ``nvrtc_version`` a (major, minor) pair; ``ptxas`` what ptxas reported of each kernel
    (kernel name -> `compiler.kernel_resources.PtxasInfo`; empty without CUBIN)."""

    source: str
    functions: dict
    arch: str
    cubin: Optional[bytes] = None
    ptx: Optional[str] = None
    nvrtc_version: tuple = (0, 0)
    compile_seconds: float = 0.0
    ptxas: dict = field(default_factory=dict)

    @property
    def resources(self) -> dict:
        """Kernel name -> `compiler.kernel_resources.KernelResources`: registers, spills,
        shared memory and occupancy on ``arch`` of every kernel the functions launch."""
        from .kernel_resources import resources_of

        return resources_of(self)
