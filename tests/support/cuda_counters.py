"""Per-launch counters of CUDA kernels from the CPU emulator: memory transactions, bank
conflicts, instructions and tensor-core operations, without a GPU.

The CUDA printer's trace mode (``build_cuda(..., kind="source", trace=True)``,
``compiler/codegen_cuda/trace.py``) reports every global and shared access and the arithmetic of
each statement; ``cuda_emulator_counters.h`` groups the accesses of each warp into warp-level
instructions and counts sectors, wavefronts and operations. `CountingModule` is an
`EmulatedModule` that switches the counting on and turns each launch's totals into a
`compiler.roofline.KernelCounters`, which `compiler.roofline.estimate` turns into a time::

    code = build_cuda({"mm": func}, kind="source", trace=True)
    mod = CountingModule(code, blocks=16)     # 16 blocks of each grid, the counts scaled up
    mod.run("mm", a, b, c)
    print(mod.counters[0].summary(), estimate(mod.counters[0], "h200"))

    count({"mm": func}, "mm", blocks=16)      # the same with random arguments

``blocks``: None runs every block; an int runs that many blocks spread evenly over the grid
(linear indices ``i * total // blocks``) and scales the counts by total / run; a sequence runs
those linear indices. A sampled run leaves the other blocks' outputs unwritten: its results
are not the kernel's.
"""

from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

from tvmscript.compiler.roofline import TENSOR_PRECISIONS, KernelCounters

from .cuda_emulator import EmulatedModule, _launch_lock, random_arguments

__all__ = ["CountingModule", "count", "traced_code", "sample_blocks", "FIELDS"]

# The shim's `Field` order (cuda_emulator_counters.h), as KernelCounters' names.
FIELDS = ("global_load_requests", "global_load_sectors", "global_load_bytes", "global_load_lines",
          "global_store_requests", "global_store_sectors", "global_store_bytes", "global_store_lines",
          "shared_load_requests", "shared_load_wavefronts", "shared_load_ideal",
          "shared_store_requests", "shared_store_wavefronts", "shared_store_ideal", "reused_loads",
          "fma", "fp32_ops", "fp16_ops", "special_ops", "fma_inst", "fp32_inst", "fp16_inst", "special_inst",
          "mma", "fp16_flops", "bf16_flops", "tf32_flops", "int8_flops", "blocks_run")


def traced_code(prim_funcs: dict, target: str = "cuda"):
    """The `cuda_spec.CUDACode` of ``prim_funcs`` in the printer's trace mode (CUDA C alone)."""
    from tvmscript.compiler.build_cuda import build_cuda

    return build_cuda(dict(prim_funcs), target, kind="source", trace=True)


def sample_blocks(grid: tuple, blocks) -> Optional[list]:
    """The linear block indices a launch of ``grid`` runs for ``blocks`` (see the module's
    docstring); None for all of them."""
    total = grid[0] * grid[1] * grid[2]
    if blocks is None:
        return None
    if isinstance(blocks, int):
        if blocks >= total:
            return None
        if blocks <= 0:
            raise ValueError(f"blocks must be positive, not {blocks}")
        return [i * total // blocks for i in range(blocks)]
    ids = sorted({int(b) for b in blocks})
    if not ids or ids[0] < 0 or ids[-1] >= total:
        raise ValueError(f"block indices {blocks!r} are not within the grid's {total} blocks")
    return ids


class CountingModule(EmulatedModule):
    """An `EmulatedModule` of traced CUDA C that counts: after `run` or `launch`, ``counters``
    holds one `KernelCounters` per kernel launch, in order. ``blocks``: which blocks each launch
    runs (see the module's docstring). A hand-written source calls ``tvms_trace`` and friends
    itself."""

    def __init__(self, code, *, blocks=None, **options) -> None:
        super().__init__(code, **options)
        self.blocks = blocks
        self.counters: list = []
        self._dram: dict = {}     # kernel -> bytes of the buffers its next launch gets
        lib = self.lib
        lib.tvms_emu__trace.argtypes = [ctypes.c_int]
        lib.tvms_emu__trace.restype = None
        lib.tvms_emu__counters.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
        lib.tvms_emu__counters.restype = ctypes.c_int
        lib.tvms_emu__select_blocks.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_ulonglong]
        lib.tvms_emu__select_blocks.restype = None

    def run(self, func_name: str, *args) -> None:
        self.counters = []
        fn = self.code.functions[func_name] if self.code is not None else None
        if fn is not None:
            arrays = [a for p, a in zip(fn.params, args) if p.kind == "buffer"]
            for launch in fn.launches:
                used = {a.index for a in launch.args if a.kind == "buffer" and a.index < len(arrays)}
                self._dram[launch.kernel] = sum(getattr(arrays[i], "nbytes", 0) for i in used)
        super().run(func_name, *args)

    def launch(self, kernel: str, grid, block, *args, dyn_shared_bytes: int = 0) -> None:
        self.counters = []
        seen, nbytes = set(), 0
        for a in args:
            if isinstance(a, np.ndarray) and id(a) not in seen:
                seen.add(id(a))
                nbytes += a.nbytes
        self._dram[kernel] = nbytes
        super().launch(kernel, grid, block, *args, dyn_shared_bytes=dyn_shared_bytes)

    def _launch(self, kernel: str, grid: tuple, block: tuple, values: list, dyn: int) -> None:
        ids = sample_blocks(grid, self.blocks)
        lib = self.lib
        raw = (ctypes.c_ulonglong * 64)()
        with _launch_lock:
            if ids:
                lib.tvms_emu__select_blocks((ctypes.c_ulonglong * len(ids))(*ids), len(ids))
            lib.tvms_emu__trace(1)
            try:
                super()._launch(kernel, grid, block, values, dyn)
            finally:
                lib.tvms_emu__trace(0)
                lib.tvms_emu__select_blocks(None, 0)
                n = lib.tvms_emu__counters(raw, len(raw))
        if n != len(FIELDS):
            raise RuntimeError(f"the emulator reports {n} counters, cuda_counters.py knows {len(FIELDS)}")
        self.counters.append(_kernel_counters(kernel, grid, block, list(raw[:n]), self._dram.pop(kernel, None)))


def _kernel_counters(kernel: str, grid: tuple, block: tuple, raw: list, dram: Optional[int]) -> KernelCounters:
    """The shim's totals of one launch as `KernelCounters`, scaled from the blocks run to the grid."""
    values = dict(zip(FIELDS, raw))
    total = grid[0] * grid[1] * grid[2]
    run = values.pop("blocks_run")
    flops = {p: values.pop(f"{p}_flops") for p in TENSOR_PRECISIONS}
    counters = KernelCounters(kernel=kernel, grid=tuple(grid), block=tuple(block), blocks_run=run,
                              blocks_total=total, tensor_flops={p: f for p, f in flops.items() if f},
                              dram_bytes=dram, **values)
    return counters.scaled(total, run) if run and run != total else counters


def count(funcs_or_code, name: str, *args, blocks=None, sym_values: Optional[dict] = None, seed: int = 0,
          target: str = "cuda") -> list:
    """`KernelCounters` of each launch of prim_func ``name``: ``funcs_or_code`` is a dict of
    prim_funcs (built in trace mode here) or a traced `CUDACode`; without ``args``, random
    arguments (symbolic sizes from ``sym_values``)."""
    code = traced_code(funcs_or_code, target) if isinstance(funcs_or_code, dict) else funcs_or_code
    if not args:
        args = random_arguments(code.functions[name].params, sym_values, seed)
    mod = CountingModule(code, blocks=blocks)
    mod.run(name, *args)
    return mod.counters
