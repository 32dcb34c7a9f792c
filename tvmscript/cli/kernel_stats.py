"""``tvms compile --target cuda --stats``: what each CUDA kernel uses of the GPU, one row per kernel.

The numbers are ptxas's (registers, spills, stack frame, static shared memory, reported when
NVRTC makes CUBIN) and the occupancy they allow on the target architecture
(`compiler.kernel_resources`), so a schedule can be tuned without a GPU: a kernel below 100%
says which limit holds it there.
"""

from __future__ import annotations

import sys

HEADER = ("kernel", "block", "registers", "spills (st/ld)", "stack", "shared memory", "occupancy", "limited by")


def stats_rows(resources: dict) -> list:
    """One row of text per kernel (`compiler.kernel_resources.KernelResources`), as `HEADER`."""
    return [_row(r) for r in resources.values()]


def _row(r) -> tuple:
    info, occ = r.ptxas, r.occupancy
    spills = "-" if info is None or not info.spills else (
        f"{_bytes(info.spill_store_bytes)} / {_bytes(info.spill_load_bytes)}")
    stack = "-" if info is None or not info.stack_bytes else _bytes(info.stack_bytes)
    return (r.kernel, _block(r.block), str(info.registers) if info else "-", spills, stack, _shared(r),
            str(occ) if occ else "-", ", ".join(occ.limited_by) if occ and occ.limited_by else "-")


def _block(block) -> str:
    """``"256"``, or ``"128 (16x8)"`` for a block of more than one dimension; ``"?"`` when symbolic."""
    if block is None:
        return "?"
    x, y, z = block
    dims = [x, y, z]
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return str(x * y * z) if len(dims) == 1 else f"{x * y * z} ({'x'.join(map(str, dims))})"


def _shared(r) -> str:
    """Static plus dynamic shared memory per block, saying how much is dynamic."""
    static = r.ptxas.shared_bytes if r.ptxas else 0
    if r.dyn_shared_bytes is None:
        return f"{_bytes(static)} + dynamic" if static else "dynamic"
    if not r.dyn_shared_bytes:
        return _bytes(static) if static else "-"
    if not static:
        return f"{_bytes(r.dyn_shared_bytes)} dynamic"
    return f"{_bytes(static + r.dyn_shared_bytes)} ({_bytes(r.dyn_shared_bytes)} dynamic)"


def _bytes(n: int) -> str:
    """Exact bytes up to 10 KiB (what tuning compares), KiB beyond."""
    if n < 10 * 1024:
        return f"{n} B"
    text = f"{n / 1024:.1f}".removesuffix(".0")
    return f"{text} KiB"


def limits_line(arch: str) -> str:
    """What the occupancy is measured against: the architecture's per-SM limits."""
    from ..compiler.kernel_resources import ARCHS, arch_limits

    lim = arch_limits(arch)
    if lim is None:
        return f"{arch}: no occupancy (tvms knows the limits of {', '.join(ARCHS)})"
    return (f"{arch} ({lim.gpu}), per SM: {lim.max_warps} warps, {lim.max_blocks} blocks, "
            f"{lim.registers_per_sm // 1024}K registers, {_bytes(lim.shared_per_sm)} shared memory")


def print_stats(resources: dict, arch: str, color: bool) -> None:
    """The table of `stats_rows`, then `limits_line`: with rich on a terminal, plain otherwise."""
    rows = stats_rows(resources)
    caption = limits_line(arch)
    if color:
        from rich.console import Console
        from rich.table import Table

        table = Table(*HEADER, header_style="bold")
        for row in rows:
            table.add_row(*row)
        console = Console(file=sys.stdout, highlight=False)
        console.print(table)
        console.print(caption, markup=False)
        return
    widths = [max(len(r[k]) for r in [HEADER, *rows]) for k in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [HEADER, *rows]]
    sys.stdout.write("\n".join(lines + [caption]) + "\n")
