"""Lowering of thread-bound TensorIR to GPU kernels: what `compiler.codegen_cuda` prints.

`lower_for_gpu(func)` turns a scheduled prim_func (loops bound to ``blockIdx.*`` /
``threadIdx.*``, as `tvms.dlight` or a hand schedule leaves it) into a `DeviceProgram`: the
host's part (global scratch buffers, then kernel launches in order) and, per kernel, a
loop-level body in which every thread-bound loop has become the hardware index it names.
Small passes, in order (`pipeline`), one module each:

1. `lower_cross_thread_reduction`  a reduction block whose reduce loop is bound to
   (cross_thread_reduction)        ``threadIdx`` becomes a per-thread partial result, a
                                   ``tvm_thread_allreduce`` over those threads, and one
                                   thread's write-back (TVM's LowerCrossThreadReduction)
2. `plan_buffer_locations`         each local/shared ``T.alloc_buffer`` moves down to the
   (buffer_locations)              innermost loop that holds all its uses, so that it can be
                                   sized for one loop iteration (a shared tile, not the matrix)
3. `lower_tir.lower_init`, `lower_tir.convert_blocks_to_loops`
4. `split_kernels` (kernels)       the function body becomes launches: each outermost
                                   thread-bound loop nest is one kernel; thread loops inside it
                                   become ``threadIdx.x``... (`THREAD_VARS`), guarded when a loop
                                   is shorter than the launch; ``vthread`` loops stay serial
5. `compact_buffers` (compaction)  local and shared buffers shrink to the region one thread
                                   (local) or one thread block (shared) touches, fragments
                                   to one warp's, and take the padded strides a schedule's
                                   `storage_align` asked for (`collect_dim_aligns`)
5b. `inject_software_pipeline`     a loop annotated ``software_pipeline_stage`` runs its
   (software_pipeline)             statements stages apart (prologue, steady state,
                                   epilogue), tiles written and read stages apart get a version
                                   per stage in flight, asynchronous stages commit and wait
                                   (TVM's InjectSoftwarePipeline); then
                                   `tensor_cores.tensorize_wmma` and `mma_tiles.tensorize_mma`
                                   make the ``tvms.wmma`` / ``tvms.mma`` tiles tensor-core
                                   intrinsics (mma's fragments become each lane's registers)
5c. `permute_layouts`              shared tiles whose copy is annotated ``permuted_layout``
   (permuted_layout)               get their 16-byte chunks XOR-swizzled by row, so that
                                   ``ldmatrix`` and the copies hit every bank once (TVM's
                                   InjectPermutedLayout)
6. `lower_tir.flatten_buffers`,    and in between, `inject_async_copy` (async_copy): the
   `lower_tir.lower_intrinsics`    global-to-shared copies of asynchronous stages become
                                   ``cp.async`` (TVM's InjectPTXAsyncCopy)
7. `narrow_indices`                int64 index arithmetic in int32 wherever it provably fits
   (index_widths)
7b. `simplify_indices`             index arithmetic simplified with the loops' and threads'
   (index_simplify)                ranges in scope (``(f * 128 + t) % 128`` is ``t`` for t < 128)
8. `inject_thread_sync`            ``__syncthreads()`` where a thread may read a shared
   (thread_sync)                   buffer another thread wrote, or overwrite one another
                                   thread has yet to read (TVM's InjectThreadSync); a
                                   ``cp.async`` lands at the ``ptx_wait_group`` after it

What the passes share (the hardware indices, memory scopes, `Kernel`, `DeviceProgram`,
`GPULoweringError`, IR queries) is in `common`.

Why a separate pipeline from `lower_tir.lower`: on the CPU a thread binding is only an
annotation (its loop runs serially), but on a GPU the bound loops are the threads themselves,
so buffers are per thread or per block and reductions across threads need communication.
"""

from .buffer_locations import plan_buffer_locations
from .common import (ALLREDUCE_OP, FRAGMENT_SCOPES, ON_CHIP_SCOPES, SHARED_SCOPES, SYNC_OP, THREAD_TAGS, THREAD_VARS,
                     DeviceProgram, GPULoweringError, HostCheck, Kernel, has_thread_bindings, is_shared, pointer_targets)
from .compaction import aligned_strides, collect_dim_aligns, compact_buffers
from .cross_thread_reduction import combine, lower_cross_thread_reduction, reduction_identity
from .index_simplify import simplify_indices
from .index_widths import narrow_indices
from .kernels import split_kernels
from .permuted_layout import PERMUTED_LAYOUT, collect_permuted_layouts, permute_layouts
from .async_copy import inject_async_copy
from .pipeline import lower_for_gpu
from .software_pipeline import inject_software_pipeline
from .thread_sync import inject_thread_sync

__all__ = [
    "GPULoweringError", "Kernel", "DeviceProgram", "HostCheck", "THREAD_VARS", "THREAD_TAGS", "ALLREDUCE_OP", "SYNC_OP",
    "lower_for_gpu", "lower_cross_thread_reduction", "plan_buffer_locations", "split_kernels",
    "collect_dim_aligns", "compact_buffers", "aligned_strides", "inject_thread_sync", "narrow_indices",
    "simplify_indices", "is_shared",
    "has_thread_bindings", "pointer_targets", "SHARED_SCOPES", "FRAGMENT_SCOPES", "ON_CHIP_SCOPES",
    "reduction_identity", "combine", "inject_software_pipeline", "inject_async_copy", "PERMUTED_LAYOUT",
    "collect_permuted_layouts", "permute_layouts",
]
