"""What the GPU lowering passes share: hardware indices, memory scopes, results, IR queries.

`THREAD_VARS` are the hardware indices every kernel's code is written over, recognised by
identity after `kernels.split_kernels`; `SHARED_SCOPES`, `FRAGMENT_SCOPES` and
`ON_CHIP_SCOPES` sort buffers by where they live. `Kernel` and `DeviceProgram` are what the
lowering produces, `GPULoweringError` what it raises for a schedule a GPU cannot run. The
queries (thread-bound loops, buffers accessed, pointers taken) are asked by several passes
and by the CUDA code generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_arith import is_one, make_cast
from tvmscript.ir.tir_visitor import TIRVisitor


THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")

# The hardware indices, one Var per tag shared by every kernel: a bound loop's variable is
# replaced by (a cast of) these, so passes after `split_kernels` and the code generator
# recognise them by identity.
THREAD_VARS = {tag: tir.Var("int32", tag) for tag in THREAD_TAGS}

# ``T.tvm_thread_allreduce(combiner, value, tag, ...)``: reduce ``value`` (a load of a
# one-element local buffer) with ``combiner`` ("sum", "prod", "max", "min") over the threads of
# the named tags, leaving the result in that buffer in every thread.
ALLREDUCE_OP = "tir.tvm_thread_allreduce"
SYNC_OP = "tir.tvm_storage_sync"

SHARED_SCOPES = ("shared", "shared.dyn")
# Tensor-core fragments (CUDA's nvcuda::wmma::fragment): per-warp register tiles that only the
# ``tvm_*_matrix_sync`` / ``tvm_mma_sync`` / ``tvm_fill_fragment`` intrinsics touch, through the
# buffer's data pointer. One a schedule made is compacted to a warp's tiles before
# `tensorize_wmma` makes those intrinsics; one written with them keeps its declared shape.
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
# mma.sync's operands and accumulators: a warp's tiles, as a schedule declares them, until
# `mma_tiles.tensorize_mma` gives each lane its registers ("local" arrays). TVM's mma
# intrinsics keep them in "warp" memory; the tag says which operand.
MMA_FRAGMENT_SCOPES = ("warp.mma_a", "warp.mma_b", "warp.mma_acc")
# wgmma's accumulators (Hopper): a warpgroup's tiles of C, until `wgmma_tiles.tensorize_wgmma`
# gives each of its 128 threads its registers; the operands stay in shared memory.
WGMMA_ACC_SCOPE = "warpgroup.wgmma_acc"
ON_CHIP_SCOPES = ("local", "warp", "shared", "shared.dyn") + FRAGMENT_SCOPES + MMA_FRAGMENT_SCOPES + (WGMMA_ACC_SCOPE,)


class GPULoweringError(ValueError):
    """A schedule the GPU backend cannot turn into kernels (code outside any thread binding,
    a cross-thread reduction it cannot express, ...); the message names the block or loop."""


def is_shared(buf: tir.Buffer) -> bool:
    """Whether ``buf`` lives in a thread block's shared memory."""
    return buf.scope in SHARED_SCOPES


def has_thread_bindings(func: tir.PrimFunc) -> bool:
    """Whether any loop of ``func`` is bound to a GPU thread or block index."""
    return any(loop.kind == "thread_binding" for loop in all_loops(func.body))


class _LoopCollector(TIRVisitor):
    def __init__(self) -> None:
        self.loops: list = []

    def visit_For(self, node) -> None:
        self.loops.append(node)
        self.generic_visit(node)


def all_loops(stmt) -> list:
    """Every loop in ``stmt``, outer before inner."""
    c = _LoopCollector()
    c.visit(stmt)
    return c.loops


@dataclass
class Kernel:
    """One ``__global__`` function: ``body`` is flat, loop-level IR over `THREAD_VARS`;
    ``extents`` maps each thread tag it uses to the launch extent (a PrimExpr over the
    function's symbolic variables)."""

    name: str
    body: tir.Stmt
    extents: dict

    def threads_per_block(self) -> Optional[int]:
        n = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            e = self.extents.get(tag)
            if e is None:
                continue
            if not isinstance(e, tir.IntImm):
                return None
            n *= e.value
        return n

    def extent(self, tag: str) -> int:
        """A static launch extent (1 for a tag the kernel does not use); ValueError if symbolic."""
        e = self.extents.get(tag)
        if e is None:
            return 1
        if not isinstance(e, tir.IntImm):
            raise ValueError(f"the extent of {tag} is not a constant")
        return e.value


@dataclass
class DeviceProgram:
    """A prim_func after GPU lowering: ``workspaces`` are the global buffers the host
    allocates for one call (flat `tir.Buffer`s), ``kernels`` run in order."""

    func: tir.PrimFunc
    workspaces: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    host_checks: list = field(default_factory=list)  # `HostCheck`s, run before the kernels


@dataclass
class HostCheck:
    """A bounds check hoisted out of every kernel (`compiler.bounds_check`'s ``CHECK_RANGE``
    over the whole launch): the host evaluates it from the function's sizes before launching
    kernel ``before`` (the first kernel it guards), when ``condition`` (None: always) holds."""

    before: int
    check: tir.Call
    condition: Optional[tir.PrimExpr] = None


def is_thread_loop(s) -> bool:
    """Whether ``s`` is a loop bound to a GPU thread or block index (not a ``vthread``)."""
    return isinstance(s, tir.For) and s.kind == "thread_binding" and (s.thread_tag or "").startswith(
        ("threadIdx", "blockIdx"))


class BufferAccesses(TIRVisitor):
    """The buffers loaded and stored, inside nested blocks too unless ``nested`` is False;
    ``pointers``: the data variables used as values (fragments, ``tvm_access_ptr``)."""

    def __init__(self, nested: bool) -> None:
        self.nested = nested
        self.loaded: set = set()
        self.stored: set = set()
        self.pointers: set = set()

        self.pointer_reads: set = set()      # data variables read or written through
        self.pointer_writes: set = set()     # ``tvm_access_ptr`` (its access mask says which)

    def visit_Var(self, node) -> None:
        if node.dtype == "handle":
            self.pointers.add(node)

    def visit_Call(self, node) -> None:
        if node.op == "tir.tvm_access_ptr" and isinstance(node.args[1], tir.Var):
            mask = node.args[4].value if isinstance(node.args[4], tir.IntImm) else 3
            if mask & 1:
                self.pointer_reads.add(node.args[1])
            if mask & 2:
                self.pointer_writes.add(node.args[1])
        self.generic_visit(node)

    def visit_BlockRealize(self, node) -> None:
        if self.nested:
            self.generic_visit(node)

    def visit_BufferLoad(self, node) -> None:
        self.loaded.add(node.buffer)
        self.generic_visit(node)

    def visit_BufferStore(self, node) -> None:
        self.stored.add(node.buffer)
        self.generic_visit(node)


def buffer_accesses(node, nested: bool = True) -> BufferAccesses:
    """What `BufferAccesses` finds in ``node``."""
    v = BufferAccesses(nested)
    v.visit(node)
    return v


def buffers_accessed(node, nested: bool = True) -> set:
    """Buffers loaded or stored in a statement or expression, inside nested blocks too unless
    ``nested`` is False."""
    v = buffer_accesses(node, nested)
    return v.loaded | v.stored


def same_expr(a, b) -> bool:
    """Whether two expressions are the same object or structurally equal."""
    from tvmscript.ir import structural_equal

    return a is b or structural_equal(a, b)


def thread_value(loop: tir.For):
    """A bound loop's variable as its thread index: ``min + threadIdx.x`` in the loop's dtype
    (just ``min`` for a loop of one iteration, so nothing depends on an index that is 0)."""
    if is_one(loop.extent):
        return make_cast(loop.min, loop.loop_var.dtype)
    v = make_cast(THREAD_VARS[loop.thread_tag], loop.loop_var.dtype)
    if isinstance(loop.min, tir.IntImm) and loop.min.value == 0:
        return v
    return tir.Add(loop.loop_var.dtype, make_cast(loop.min, loop.loop_var.dtype), v)


def pointer_targets(body) -> set:
    """The data variables ``body`` reads or writes through ``tvm_access_ptr``."""
    v = buffer_accesses(body)
    return v.pointer_reads | v.pointer_writes
