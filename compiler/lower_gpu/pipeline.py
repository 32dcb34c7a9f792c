"""`lower_for_gpu`: the GPU lowering passes of this package, in the order the package
docstring gives, from a scheduled prim_func to a `DeviceProgram`."""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir

from ..bounds_check import instrument_bounds_checks
from ..lower_tir import _with_body, buffer_size, convert_blocks_to_loops, flatten_buffers, lower_init, lower_intrinsics
from ..mma_tiles import tensorize_mma
from ..tensor_cores import MMA_ANN, WMMA_ANN, tensorize_wmma
from ..wgmma_tiles import WGMMA_ANN, tensorize_wgmma
from .async_copy import inject_async_copy
from .buffer_locations import plan_buffer_locations
from .common import ON_CHIP_SCOPES, DeviceProgram
from .compaction import collect_dim_aligns, compact_buffers
from .cross_thread_reduction import lower_cross_thread_reduction
from .index_simplify import simplify_indices
from .index_widths import narrow_indices
from .kernels import split_kernels
from .permuted_layout import collect_permuted_layouts, permute_layouts
from .software_pipeline import inject_software_pipeline
from .thread_sync import inject_thread_sync


def lower_for_gpu(func: tir.PrimFunc, name: str = "main", bounds_check: bool = False,
                  places: Optional[dict] = None) -> DeviceProgram:
    """All GPU lowering passes, in order (see the package docstring). ``bounds_check``: every
    access to global memory not proven in bounds is checked at run time (`bounds_check`,
    while the thread-bound loops are still loops, so that their ranges prove most accesses);
    ``places`` numbers the accesses' spans for the messages (`compiler.kernel_places`)."""
    func = lower_cross_thread_reduction(func)
    func = plan_buffer_locations(func)
    func = lower_init(func)
    aligns, permuted = collect_dim_aligns(func), collect_permuted_layouts(func)
    func = convert_blocks_to_loops(func, keep_annotations=(WMMA_ANN, MMA_ANN, WGMMA_ANN))
    if bounds_check:
        func = instrument_bounds_checks(func, places, checked=lambda buf: buf.scope not in ON_CHIP_SCOPES)
    program = split_kernels(func, name)
    for k in program.kernels:
        body = inject_software_pipeline(compact_buffers(k.body, k.extents, aligns))
        body = tensorize_wgmma(tensorize_mma(tensorize_wmma(body), k.extents), k.extents)
        body = permute_layouts(body, permuted)
        flat = flatten_buffers(_with_body(func, body))
        body = lower_intrinsics(_with_body(func, inject_async_copy(flat.body))).body
        k.body = inject_thread_sync(simplify_indices(narrow_indices(body, k.extents), k.extents))
    program.workspaces = [_flat_buffer(b) for b in program.workspaces]
    return program


def _flat_buffer(buf: tir.Buffer) -> tir.Buffer:
    return tir.Buffer(buf.name, [buffer_size(buf)], buf.dtype, data=buf.data, scope=buf.scope, align=buf.align)
