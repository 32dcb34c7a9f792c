"""What each CUDA kernel uses of a GPU (registers, spills, shared memory) and the occupancy that allows.

Why: a kernel's speed depends on how many of its warps an SM holds at once, and that is decided
by numbers ptxas knows at compile time. NVRTC runs ptxas when it makes CUBIN; asked for its
verbose log (``--ptxas-options=-v``, `compiler.nvrtc`), it reports per entry function::

    ptxas info    : Compiling entry function 'k' for 'sm_90'
    ptxas info    : Function properties for k
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem

`parse_ptxas_log` reads that into a `PtxasInfo` per kernel, and `occupancy` turns registers,
shared memory and the block size into the warps an SM keeps resident, so schedules can be
tuned on a machine without a GPU.

Where the numbers come from: `ARCHS` holds, per architecture tvms targets, the limits of the
CUDA C Programming Guide's table "Technical Specifications per Compute Capability" (resident
blocks, warps and threads per SM, 64K 32-bit registers per SM and per block, 255 registers per
thread, 1024 threads per block, shared memory per SM and per block) and of its "Shared Memory"
sections (1 KB of shared memory reserved by the system per block on compute capability 8.0 and
later). The allocation granularities are those NVIDIA's CUDA Occupancy Calculator and
``cuda_occupancy.h`` use: registers go to warps in units of 256, within each of the SM's four
sub-partitions (so warps resident by registers come in fours); shared memory goes to blocks in
units of 256 bytes on 7.x and 128 bytes on 8.x and 9.x. The carveout is assumed to give shared
memory its maximum, as the driver does for a kernel that needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

__all__ = ["PtxasInfo", "ArchLimits", "ARCHS", "arch_limits", "Occupancy", "occupancy", "parse_ptxas_log",
           "KernelResources", "resources_of", "PTXAS_VERBOSE"]

PTXAS_VERBOSE = "--ptxas-options=-v"
WARP_SIZE = 32


# ----------------------------------------------------------------------------- ptxas's log


@dataclass(frozen=True)
class PtxasInfo:
    """What ptxas reported for one entry function: registers per thread, named barriers, static
    shared memory (``__shared__`` arrays; dynamic shared memory is the launch's), its stack frame
    (local memory: arrays indexed at run time, spills), the bytes spilled to and reloaded from
    local memory, and constant memory (all ``cmem[N]`` banks, kernel parameters included)."""

    kernel: str
    registers: int = 0
    barriers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    constant_bytes: int = 0

    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


def parse_ptxas_log(log: str) -> dict:
    """Kernel name -> `PtxasInfo` from NVRTC's log of a CUBIN compile with ``-v``. The stack
    line of a callee (a ``Function properties`` block of a non-entry function) is not the
    kernel's and is skipped; lines ptxas adds in other releases are ignored."""
    found: dict = {}
    entry = properties_of = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            entry = properties_of = m.group(1)
            found[entry] = PtxasInfo(entry)
            continue
        m = _PROPERTIES.search(line)
        if m:
            properties_of = m.group(1)
            continue
        if entry is None:
            continue
        m = _FRAME.search(line)
        if m and properties_of == entry:
            stack, stores, loads = map(int, m.groups())
            found[entry] = replace(found[entry], stack_bytes=stack, spill_store_bytes=stores, spill_load_bytes=loads)
            continue
        m = _USED.search(line)
        if m:
            found[entry] = replace(found[entry], **_usage(line, int(m.group(1))))
    return found


def _usage(line: str, registers: int) -> dict:
    """The fields of a ``Used N registers, ...`` line."""
    barriers = _BARRIERS.search(line)
    smem = _SMEM.search(line)
    return {"registers": registers, "barriers": int(barriers.group(1)) if barriers else 0,
            "shared_bytes": int(smem.group(1)) if smem else 0,
            "constant_bytes": sum(int(n) for n in _CMEM.findall(line))}


# ----------------------------------------------------------------------------- the architectures


@dataclass(frozen=True)
class ArchLimits:
    """One compute capability's per-SM and per-block limits (see the module's docstring)."""

    name: str
    gpu: str                      # a GPU of that architecture, to name it in reports
    max_warps: int                # resident warps per SM
    max_blocks: int               # resident blocks per SM
    shared_per_sm: int            # bytes, the largest carveout
    shared_per_block: int         # bytes, with the opt-in (above the 48 KB default)
    shared_reserved: int          # bytes the system keeps per block
    shared_granularity: int       # bytes shared memory is allocated in
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    registers_per_thread: int = 255
    register_granularity: int = 256   # registers, allocated per warp
    sub_partitions: int = 4           # warps resident by registers come in multiples of this
    threads_per_block: int = 1024


_KB = 1024
ARCHS = {
    "sm_70": ArchLimits("sm_70", "V100", 64, 32, 96 * _KB, 96 * _KB, 0, 256),
    "sm_75": ArchLimits("sm_75", "T4", 32, 16, 64 * _KB, 64 * _KB, 0, 256),
    "sm_80": ArchLimits("sm_80", "A100", 64, 32, 164 * _KB, 163 * _KB, _KB, 128),
    "sm_86": ArchLimits("sm_86", "RTX 3090", 48, 16, 100 * _KB, 99 * _KB, _KB, 128),
    "sm_89": ArchLimits("sm_89", "L4", 48, 24, 100 * _KB, 99 * _KB, _KB, 128),
    "sm_90": ArchLimits("sm_90", "H100", 64, 32, 228 * _KB, 227 * _KB, _KB, 128),
}


def arch_limits(arch: str) -> Optional[ArchLimits]:
    """The limits of ``arch`` (``"sm_90"``; ``"sm_90a"`` is sm_90's), None for one not in `ARCHS`."""
    return ARCHS.get(re.sub(r"(sm_\d+)[a-z]$", r"\1", arch))


# ----------------------------------------------------------------------------- occupancy


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM for one kernel launch. ``limits`` maps each limit
    ("block size": warps per SM over warps per block, "blocks per SM", "registers", "shared
    memory") to the blocks it allows; the least of them is ``blocks``. ``register_warps``: the
    warps per SM the register file holds at this kernel's registers per thread."""

    arch: str
    warps_per_block: int
    blocks: int
    max_warps: int
    limits: tuple                 # ((limit name, blocks it allows), ...)
    register_warps: int

    @property
    def warps(self) -> int:
        return self.blocks * self.warps_per_block

    @property
    def fraction(self) -> float:
        return self.warps / self.max_warps

    @property
    def limited_by(self) -> tuple:
        """The limits that hold the occupancy below 100%: all that allow only ``blocks``, but
        registers only when the register file holds fewer than the SM's warps (a block size
        that does not divide them rounds the register limit down as it does the warp limit,
        and fewer registers would not help); empty at full occupancy."""
        if self.warps >= self.max_warps:
            return ()
        return tuple(name for name, blocks in self.limits if blocks == self.blocks and
                     (name != "registers" or self.register_warps < self.max_warps))

    def __str__(self) -> str:
        return f"{100 * self.fraction:.0f}% ({self.warps}/{self.max_warps} warps)"


def occupancy(arch, threads: int, registers: int, shared_bytes: int = 0) -> Optional[Occupancy]:
    """The occupancy of blocks of ``threads`` threads using ``registers`` registers per thread
    and ``shared_bytes`` of shared memory per block (static plus dynamic) on ``arch`` (a name or
    an `ArchLimits`); None for an architecture tvms has no limits for. A block that cannot be
    launched at all has 0 blocks, limited by what it asks too much of."""
    lim = arch if isinstance(arch, ArchLimits) else arch_limits(arch)
    if lim is None:
        return None
    warps = -(-threads // WARP_SIZE)
    register_warps = _register_warps(lim, warps, registers)
    limits = (("block size", lim.max_warps // warps if threads <= lim.threads_per_block else 0),
              ("blocks per SM", lim.max_blocks),
              ("registers", register_warps // warps),
              ("shared memory", _shared_limit(lim, shared_bytes)))
    return Occupancy(lim.name, warps, min(blocks for _, blocks in limits), lim.max_warps, limits, register_warps)


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _register_warps(lim: ArchLimits, warps: int, registers: int) -> int:
    """Warps per SM the register file holds: registers go to warps in `register_granularity`
    units, each sub-partition holding its share of the file. 0 when a block of ``warps`` cannot
    launch: its warps, rounded up to the sub-partitions, would exceed the per-block register
    limit (the hardware's check)."""
    if registers > lim.registers_per_thread:
        return 0
    per_warp = _round_up(registers * WARP_SIZE, lim.register_granularity)
    if per_warp == 0:
        return max(lim.max_blocks * warps, lim.max_warps)   # no registers: no limit
    if per_warp * _round_up(warps, lim.sub_partitions) > lim.registers_per_block:
        return 0
    return (lim.registers_per_sm // lim.sub_partitions // per_warp) * lim.sub_partitions


def _shared_limit(lim: ArchLimits, shared_bytes: int) -> int:
    """Blocks per SM shared memory allows: each block takes its bytes plus the system's
    reserve, rounded up to `shared_granularity`."""
    if shared_bytes > lim.shared_per_block:
        return 0
    if shared_bytes == 0 and lim.shared_reserved == 0:
        return lim.max_blocks
    per_block = _round_up(shared_bytes + lim.shared_reserved, lim.shared_granularity)
    return lim.shared_per_sm // per_block


# ----------------------------------------------------------------------------- per kernel


@dataclass(frozen=True)
class KernelResources:
    """One kernel of a `cuda_spec.CUDACode`: the prim_func that launches it, its block's
    dimensions (None where one is symbolic), its dynamic shared memory (bytes, None when it
    depends on the shapes), ptxas's `PtxasInfo` (None when no CUBIN was made) and the
    `Occupancy` on the code's architecture (None when something it needs is unknown; counting
    the static shared memory alone, an upper bound, when the dynamic one is unknown)."""

    kernel: str
    func: str
    arch: str
    block: Optional[tuple]
    dyn_shared_bytes: Optional[int]
    ptxas: Optional[PtxasInfo]
    occupancy: Optional[Occupancy]

    @property
    def threads(self) -> Optional[int]:
        if self.block is None:
            return None
        x, y, z = self.block
        return x * y * z

    @property
    def shared_bytes(self) -> Optional[int]:
        """Static plus dynamic shared memory per block; None when either is unknown."""
        if self.ptxas is None or self.dyn_shared_bytes is None:
            return None
        return self.ptxas.shared_bytes + self.dyn_shared_bytes


def resources_of(code) -> dict:
    """Kernel name -> `KernelResources` for every launch of a `cuda_spec.CUDACode`, in launch
    order, from its ptxas report (``code.ptxas``) and its launches' static dimensions."""
    out: dict = {}
    for func in code.functions.values():
        for launch in func.launches:
            if launch.kernel not in out:
                out[launch.kernel] = _launch_resources(code, func.name, launch)
    return out


def _launch_resources(code, func: str, launch) -> KernelResources:
    block = tuple(_static(t) for t in launch.block)
    block = None if None in block else block
    dyn = _static(launch.dyn_shared_bytes)
    info = code.ptxas.get(launch.kernel)
    occ = None
    if info is not None and block is not None:
        occ = occupancy(code.arch, block[0] * block[1] * block[2], info.registers, info.shared_bytes + (dyn or 0))
    return KernelResources(launch.kernel, func, code.arch, block, dyn, info, occ)


def _static(text: str) -> Optional[int]:
    """The value of a launch dimension text that names no symbolic variable, else None."""
    from tvmscript.runtime.kernel import eval_dim_text

    try:
        return eval_dim_text(text, {})
    except (ValueError, SyntaxError, ZeroDivisionError):
        return None
