"""What the default CPU schedule sizes its tiles and threads by: the host's vector width and
vector registers, the threads a parallel loop runs on, and the byte budgets of the caches.

Separate from the rules because every rule reads them and importers outside the package do
too (`runtime.cpu` and the benchmarks ask `parallel_threads`; tests size kernels by
`vector_bytes` and `tile_bytes`)."""

from __future__ import annotations

import os

VECTOR_REGISTERS_PER_TILE = 8  # accumulators: enough to keep two FMA pipes busy
PACKED_PANEL_BYTES = 256 * 1024  # reduce extent x tile of a packed operand, kept in L2
PANEL_BYTES = 64 * 1024  # the same, unpacked: strided rows use few cache sets, so far less fits
PARALLEL_MIN_WORK = 1 << 17  # iterations below which starting threads costs more than it saves
BLOCK_TILE_BYTES = 64  # each side of a block of a transposing copy: one cache line


def vector_bytes() -> int:
    """Bytes of the host's widest vector registers (64 with AVX-512, 32 with AVX, else 16)."""
    try:
        from tvmscript.runtime.host_cpu import host_target

        features = host_target().features
    except Exception:  # noqa: BLE001 - no LLVM: assume AVX
        features = "+avx"
    if "+avx512f" in features:
        return 64
    if "+avx" in features:
        return 32
    return 16


def parallel_threads() -> int:
    """Threads a parallel loop runs on: ``OMP_NUM_THREADS`` (its first value) when set, as
    libgomp reads it, else the CPUs this process may run on."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def vector_registers() -> int:
    """Vector registers of the host: 32 with AVX-512, else 16 (AVX, SSE on x86-64, and the
    NEON registers' count halved as a conservative guess elsewhere)."""
    return 32 if vector_bytes() == 64 else 16


def tile_bytes() -> int:
    """Bytes of one output row tile: `VECTOR_REGISTERS_PER_TILE` vectors of the host's widest
    vector registers (`vector_bytes`)."""
    return VECTOR_REGISTERS_PER_TILE * vector_bytes()
