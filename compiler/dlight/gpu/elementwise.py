"""`ElementWise`: elementwise functions at full memory bandwidth (tvms's rule; TVM's DLight
leaves them to `Fallback`).

Why: an elementwise kernel does no arithmetic to speak of; its speed is the bandwidth its
memory accesses reach, and that needs 16-byte accesses and enough bytes in flight per thread.
Fallback gives each thread one element: an add of 2^26 float32 ran at 68% of PyTorch's
bandwidth on an H200, whose kernel moves a ``float4`` per access.

What it does: after inlining what it can (as Fallback does), every block left must be
spatial only; each block that writes its output in iteration order (``C[i, j]`` for its
iterators ``i, j``) gets its fused loop split into vectors of `vector_lanes` elements (16
bytes of the widest dtype the block touches, a ``float4`` of float32, 8 halves), the vector
loop ``T.vectorized``, over blocks of 256 threads. The CUDA printer makes the loop vector loads
and stores where the reads are contiguous too (`codegen_cuda.vectorize`), a guard of a partial
last block outside them, and an unrolled loop otherwise. A function none of whose blocks can
take a vector (an odd length, a transposing write, symbolic extents) is left to Fallback.
"""

from __future__ import annotations

from tvmscript.ir import tir

from ...lower_tir import dtype_bytes
from ..analysis import has_thread_env, normalize_prim_func
from ..base import max_threads_per_block, try_inline
from .base import GPUScheduleRule

VECTOR_BYTES = 16
VECTOR_THREADS = 256


class ElementWise(GPUScheduleRule):
    """Each thread computes a 16-byte vector of an elementwise function's output."""

    def apply(self, func, target, tunable: bool = False):
        sch = self.new_schedule(func, target)
        if sch is None:
            return None
        block_infos = normalize_prim_func(sch)
        if block_infos is None:
            return None
        block_infos = try_inline(sch, block_infos)
        if not block_infos or not all(info.is_injective() for info in block_infos):
            return None
        lanes = [vector_lanes(sch.get(info.block_rv)) for info in block_infos]
        if max(lanes) == 1:
            return None
        threads = min(max_threads_per_block(target), VECTOR_THREADS)
        for info, n in zip(block_infos, lanes):
            block = info.block_rv
            loops = sch.get_loops(block)
            if any(sch.get(lp).kind == "thread_binding" for lp in loops) or (
                    not loops and has_thread_env(sch.get(block).body)):
                return None
            fused = sch.fuse(*loops) if loops else sch.add_unit_loop(block)
            if n > 1:
                fused, vec = sch.split(fused, factors=[None, n])
                sch.vectorize(vec)
            bx, tx = sch.split(fused, factors=[None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
        return sch


def vector_lanes(block: tir.Block) -> int:
    """How many consecutive elements a thread of an elementwise ``block`` handles: 16 bytes
    of the widest dtype it reads or writes, halved until it divides the number of elements;
    1 (no vector) when the block writes anything but one element of one buffer in iteration
    order (``C[i, j]`` for iterators ``i, j``), or its extents are not constants."""
    if len(block.writes) != 1:
        return 1
    region = block.writes[0].region
    ivs = [iv.var for iv in block.iter_vars]
    if len(region) != len(ivs) or any(r.min is not v or not _is_int(r.extent, 1) for r, v in zip(region, ivs)):
        return 1
    total = 1
    for iv in block.iter_vars:
        if not (isinstance(iv.dom.extent, tir.IntImm) and _is_int(iv.dom.min, 0)):
            return 1
        total *= iv.dom.extent.value
    widest = max(dtype_bytes(r.buffer.dtype) for r in (*block.reads, *block.writes))
    lanes = max(VECTOR_BYTES // widest, 1)
    while lanes > 1 and total % lanes:
        lanes //= 2
    return lanes


def _is_int(e, value: int) -> bool:
    return isinstance(e, tir.IntImm) and e.value == value
