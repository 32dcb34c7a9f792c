"""What the default CPU schedule sizes its tiles and threads by: the target CPU's vector width
and vector registers, the threads a parallel loop runs on, and the byte budgets of the caches.

The target CPU is the one the kernels are being compiled for: the CPU build schedules them
inside ``scheduling_for(target)`` (``llvm -mcpu=haswell`` gets 32-byte vectors and 16
registers on any machine), and outside one it is this machine's (`host_target`). A context
variable rather than an argument because every rule reads it, several calls deep.

Separate from the rules because every rule reads them and importers outside the package do
too (`runtime.cpu` and the benchmarks ask `parallel_threads`; tests size kernels by
`vector_bytes` and `tile_bytes`)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Iterator, Optional

from tvmscript.runtime.cpu import default_threads
from tvmscript.runtime.host_cpu import HostTarget, host_target

from ..llvm_target import vector_unit

VECTOR_REGISTERS_PER_TILE = 8  # accumulators: enough to keep two FMA pipes busy
PACKED_PANEL_BYTES = 256 * 1024  # a packed panel kept in L2, when the target's L2 is unknown
DEFAULT_L2_BYTES = 256 * 1024  # a per-core L2 when the target's is unknown (Haswell's)
PANEL_BYTES = 64 * 1024  # the same, unpacked: strided rows use few cache sets, so far less fits
PARALLEL_MIN_WORK = 1 << 17  # iterations below which starting threads costs more than it saves
BLOCK_TILE_BYTES = 64  # each side of a block of a transposing copy: one cache line


_scheduled_for: ContextVar[Optional[HostTarget]] = ContextVar("tvms_cpu_schedule_target", default=None)


@contextmanager
def scheduling_for(target: HostTarget) -> Iterator[None]:
    """Within it, the default schedule sizes tiles for ``target``'s vector registers."""
    token = _scheduled_for.set(target)
    try:
        yield
    finally:
        _scheduled_for.reset(token)


def target_cpu() -> HostTarget:
    """The CPU the kernels being scheduled are for: ``scheduling_for``'s, else this machine's."""
    return _scheduled_for.get() or host_target()


def vector_bytes() -> int:
    """Bytes of the target CPU's widest vector registers (64 with AVX-512, 32 with AVX, else
    16; `compiler.llvm_target.vector_unit`)."""
    return vector_unit(target_cpu()).bytes


def parallel_threads() -> int:
    """Threads a parallel loop runs on (`runtime.cpu.default_threads`: ``OMP_NUM_THREADS``,
    else the CPUs this process may run on), read again at each call: tiles are fitted to it."""
    return default_threads()


def vector_registers() -> int:
    """Vector registers of the target CPU: 32 with AVX-512 and on AArch64 (NEON), else 16."""
    return vector_unit(target_cpu()).registers


def tile_bytes() -> int:
    """Bytes of one output row tile: `VECTOR_REGISTERS_PER_TILE` vectors of the target's widest
    vector registers (`vector_bytes`)."""
    return VECTOR_REGISTERS_PER_TILE * vector_bytes()


def packed_panel_bytes() -> int:
    """Bytes of a packed operand's panel (reduce extent x tile) that stay in L2 while the rows
    reuse it: three quarters of this machine's per-core L2 when the kernels are for it (a
    resnet18 3x3 convolution's 590 KB panel, split in four to fit 256 KB, ran 0.84-0.91x the
    time whole on a 1 MB L2), else `PACKED_PANEL_BYTES` (a 256 KB L2, as Haswell's)."""
    if _scheduled_for.get() not in (None, host_target()):
        return PACKED_PANEL_BYTES
    return max(PACKED_PANEL_BYTES, _host_l2_bytes() * 3 // 4)


def l2_bytes() -> int:
    """Bytes of the target CPU's per-core L2: this machine's when the kernels are for it (and
    it says), else `DEFAULT_L2_BYTES`."""
    if _scheduled_for.get() not in (None, host_target()):
        return DEFAULT_L2_BYTES
    return _host_l2_bytes() or DEFAULT_L2_BYTES


@lru_cache(maxsize=None)
def _host_l2_bytes() -> int:
    """This machine's per-core unified L2 in bytes (Linux sysfs), or 0 when unknown."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    size = 0
    try:
        for index in sorted(os.listdir(base)):
            with open(f"{base}/{index}/level") as f:
                level = f.read().strip()
            with open(f"{base}/{index}/size") as f:
                text = f.read().strip()
            if level == "2" and text[:-1].isdigit():
                size = int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 0)
    except OSError:
        pass
    return size
