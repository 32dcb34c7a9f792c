"""Software prefetch of a streamed weight's next block (`prefetch_next_blocks`).

Why: a register-tiled kernel whose parallel loop runs over blocks of a packed weight
(``w[b, ...]``: a convolution's or a dense layer's output channels) reads each block from memory
when its first tile needs it, and from L2 for the tiles after. When the weights are larger than
the caches (resnet18's last layers hold 46 MB, this machine's L3 32 MB; every ViT layer), the
first tile of each block waits for the whole block, and the memory bus then idles for the rest
of it. With its weights in memory, resnet18's 7x7x512 convolution ran 560-580 µs, against
455-480 with them in L3; with this prefetch it runs 497 (and 2% slower, 464 against 455, when
they are in L3 anyway). ViT-B/16 runs 0.96x the time.

How: the innermost plain loop above the micro-kernel (the reduction loop the unrolled and
vectorized loops sit in) gets one ``llvm.prefetch`` per iteration (more where an iteration's
share exceeds a cache line), of the next block (``min(b + 1, last)``), at an offset that walks
the block evenly over the iterations of the loops between the parallel loop and it:
``t * step >> STEP_BITS`` bytes for the flattened iteration number ``t``, ``step`` being the
block's bytes over the iterations in fixed point. So the whole next block is requested once,
at an even rate the memory keeps up with, while the current one is computed from the cache;
LLVM makes ``t * step`` an induction variable, which leaves an add and a shift per iteration.
Each thread runs a contiguous chunk of blocks (`codegen_llvm.parallel`), so the next block is
its own next one except at the end of its chunk.

The prefetch reads the weight through a byte view (``T.decl_buffer`` of ``uint8`` over its
data), so the offset needs no rounding to elements. Every address lies in the weight (the block
index is clamped, and the last iteration's offset and lines are inside the block), so the
bounds check proves it and emits nothing. The hint is emitted only where it can pay: the
weight is larger than the target's L2 and one iteration's share of the block is at most
`MAX_PREFETCHES` cache lines.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_arith import const_int
from tvmscript.ir.tir_visitor import contains

from ..lower_tir import VECTORIZE_ANN, dtype_bytes
from .host import l2_bytes

CACHE_LINE = 64
STEP_BITS = 16  # fraction bits of the bytes an iteration's prefetch advances
MAX_PREFETCHES = 4  # cache lines one iteration may request; more would come in bursts
PREFETCH_READ, PREFETCH_KEEP_L1, PREFETCH_DATA = 0, 3, 1  # llvm.prefetch's rw, locality, cache type


def prefetch_next_blocks(body: tir.Stmt, packed: list) -> tir.Stmt:
    """``body`` with the next block of each of the ``packed`` weight buffers (parameters whose
    layout the schedule chose, `prepack`) prefetched inside the parallel loop that walks its
    blocks (see the module docstring)."""
    if not packed:
        return body
    return _Prefetch(packed).visit_stmt(body)


class _Prefetch(IRMutator):
    def __init__(self, packed: list) -> None:
        super().__init__()
        self.packed = packed

    def visit_stmt(self, s):
        if isinstance(s, tir.For) and s.kind == "parallel":
            return _prefetched(s, self.packed) or s
        return super().visit_stmt(s)


def _prefetched(loop: tir.For, packed: list) -> Optional[tir.Stmt]:
    """``loop`` (a parallel loop) with its blocks' next one prefetched, or None where no packed
    weight is read block by block under it or the hint would not pay."""
    extent = const_int(loop.extent)
    if extent is None or extent < 2 or not tir.is_const_int(loop.min, 0):
        return None
    for weight in packed:
        if const_int(weight.shape[0]) != extent:
            continue
        path = _path_to_block_read(loop.body, weight, loop.loop_var)
        if path is None:
            continue
        site = _site(path)
        if site is None:
            continue
        body = _with_prefetch(loop, weight, path[:site + 1])
        if body is not None:
            return body
    return None


def _path_to_block_read(s, weight: tir.Buffer, block_var: tir.Var) -> Optional[list]:
    """The loops from ``s`` down to the first read ``weight[block_var, ...]``, outermost
    first, or None when there is none (or it sits under a branch: not read on every
    iteration)."""
    if isinstance(s, tir.For):
        inner = _path_to_block_read(s.body, weight, block_var)
        return None if inner is None else [s] + inner
    if isinstance(s, tir.SeqStmt):
        for x in s.seq:
            inner = _path_to_block_read(x, weight, block_var)
            if inner is not None:
                return inner
        return None
    if isinstance(s, tir.BlockRealize):
        return _path_to_block_read(s.block, weight, block_var)
    if isinstance(s, tir.Block):
        return _path_to_block_read(s.body, weight, block_var)
    if isinstance(s, (tir.LetStmt, tir.Allocate, tir.DeclBuffer)):
        return _path_to_block_read(s.body, weight, block_var)
    if isinstance(s, tir.BufferStore):
        return [] if _reads_block(s.value, weight, block_var) else None
    return None


def _reads_block(e, weight: tir.Buffer, block_var: tir.Var) -> bool:
    return contains(e, lambda x: isinstance(x, tir.BufferLoad) and x.buffer is weight
                    and x.indices[0] is block_var)


def _site(path: list) -> Optional[int]:
    """Index in ``path`` of the loop the prefetch goes in: the innermost plain loop (serial,
    not vectorized) with the micro-kernel's loops inside it; None when there is none."""
    for i in range(len(path) - 2, -1, -1):
        if path[i].kind == "serial" and VECTORIZE_ANN not in path[i].annotations:
            return i
    return None


def _with_prefetch(loop: tir.For, weight: tir.Buffer, walk: list) -> Optional[tir.Stmt]:
    """``loop`` with the prefetch in the last loop of ``walk`` (the loops between it and the
    site, whose iterations walk the next block), or None where the hint would not pay."""
    extents = [const_int(x.extent) for x in walk]
    mins = [const_int(x.min) for x in walk]
    dims = [const_int(d) for d in weight.shape]
    if weight.data is None or None in extents or None in mins or None in dims:
        return None
    blocks, block_bytes = dims[0], math.prod(dims[1:]) * dtype_bytes(weight.dtype)
    if blocks * block_bytes <= l2_bytes():
        return None  # stays in the caches between calls
    iterations = math.prod(extents)
    # Bytes per iteration in fixed point (`STEP_BITS` fraction bits), so that the block's
    # bytes spread over the iterations exactly, whatever their ratio; LLVM turns ``t * step``
    # into an induction variable, which leaves an add and a shift per iteration.
    step = (block_bytes << STEP_BITS) // iterations
    lines = -(-step // (CACHE_LINE << STEP_BITS))
    if step == 0 or lines > MAX_PREFETCHES:
        return None
    last = ((iterations - 1) * step) >> STEP_BITS  # the last iteration's offset
    lines = min(lines, (block_bytes - 1 - last) // CACHE_LINE + 1)  # its lines inside the block
    t = None
    stride = 1
    for x, lo, n in reversed(list(zip(walk, mins, extents))):
        term = _as(x.loop_var, "int64")
        term = term - lo if lo else term
        term = term * stride if stride != 1 else term
        t = term if t is None else term + t
        stride *= n
    flat = dataclasses.replace(weight, name=f"{weight.name}_bytes", shape=[tir.const(blocks * block_bytes, "int64")],
                               dtype="uint8", strides=[], axis_separators=[], span=None)
    nxt = tir.Min("int64", _as(loop.loop_var, "int64") + 1, tir.const(blocks - 1, "int64"))
    offset = tir.FloorDiv("int64", t * step, tir.const(1 << STEP_BITS, "int64"))
    hints = []
    for j in range(lines):
        at = nxt * block_bytes + (offset + j * CACHE_LINE if j else offset)
        address = tir.Call("handle", "tir.address_of", [tir.BufferLoad("uint8", flat, [at])])
        flags = [tir.const(v, "int32") for v in (PREFETCH_READ, PREFETCH_KEEP_L1, PREFETCH_DATA)]
        hints.append(tir.Evaluate(tir.Call("void", "tir.call_llvm_intrin",
                                           [tir.StringImm("handle", "llvm.prefetch"), address, *flags])))
    site = walk[-1]
    body = _replaced(loop.body, site, dataclasses.replace(site, body=tir.SeqStmt(hints + [site.body])))
    return dataclasses.replace(loop, body=tir.DeclBuffer(flat, body))


def _replaced(s, old: tir.Stmt, new: tir.Stmt):
    class _Swap(IRMutator):
        def visit_stmt(self, x):
            return new if x is old else super().visit_stmt(x)

    return _Swap().visit_stmt(s)


def _as(v: tir.Var, dtype: str):
    return v if v.dtype == dtype else tir.Cast(dtype, v)
