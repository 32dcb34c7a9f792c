"""Scratch buffers kept between calls: a kernel's large top-level allocations of constant size
reuse one block per allocation site instead of asking malloc for it on every call.

Why: freed, a block of a few hundred KiB goes back to the operating system (glibc returns the
top of its heap past 128 KiB, and serves larger requests with mmap), and the next call's
allocation faults in fresh zeroed pages: about 0.2 ms per MiB here. A Winograd convolution's
6 MiB of transformed tiles (`schedule_cpu.winograd`) then took 2.2 ms a call instead of 1.1,
and the direct convolution's padded copy paid the same tax on a smaller scale. TVM's CPU
runtime keeps a workspace pool for the same reason (``TVMBackendAllocWorkspace``).

How: each kept site gets two module globals, the block (null until first used) and a busy
flag. A call takes the flag with a compare-and-swap; if another thread holds it (one kernel
called from two threads at once), that call allocates and frees a block of its own, as before.
Only allocations outside parallel regions are kept (`KEEP_MIN_BYTES` or more, of constant
size): inside, every thread allocates its own, and those are small. The process keeps at most
a budget of bytes in all (`SCRATCH_BUDGET_SYMBOL`, the runtime's: `runtime.cpu.scratch_budget`,
256 MiB unless ``TVMS_SCRATCH_KEEP_MB`` says otherwise): a compiled module stays in the build
cache for the rest of the process, so without a bound a process that compiles many modules
would keep every one's blocks; past the budget, a site allocates and frees as before. What a call finds in a
kept block is whatever the last call left, so the zero fill the code generator decides on
(`statements.StmtGen.zero_fill`) runs on every call as it did. The module exports
`RELEASE_SCRATCH_SYMBOL`, which frees the kept blocks; the runtime calls it when the module is
dropped (`runtime.cpu.bind_kernels`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import llvmlite.ir as ir

from tvmscript.runtime.kernel_abi import RELEASE_SCRATCH_SYMBOL, SCRATCH_BUDGET_SYMBOL

from .dtypes import I32, I64, PTR, VOID

__all__ = ["KEEP_MIN_BYTES", "Scratch", "kept_allocation", "release", "emit_release_function"]

KEEP_MIN_BYTES = 64 * 1024  # smaller blocks stay in malloc's free lists anyway


@dataclass
class Scratch:
    """A heap block live at the current point: its pointer and, for a kept site, the site's
    busy flag and whether this call holds it (an i1)."""

    ptr: object
    busy: Optional[ir.GlobalVariable] = None
    held: object = None


def kept_allocation(gen, nbytes: int, name: str) -> Scratch:
    """Code taking the kept block of a new allocation site of ``nbytes`` (see the module
    docstring) in the function ``gen`` generates; a block of its own when the site is busy,
    or when keeping a first block would exceed the process's budget."""
    mg = gen.mg
    slot, busy = _site_globals(mg, name, nbytes)
    budget = mg.runtime_global(SCRATCH_BUDGET_SYMBOL, I64)
    alloc = mg.declare("aligned_alloc", PTR, [I64, I64])
    n = ir.Constant(I64, nbytes)
    size = [ir.Constant(I64, 64), n]
    b = gen.b
    pair = b.cmpxchg(busy, ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
    kept, fresh, take, refuse, own, join = (gen.new_block(f"{name}.{part}")
                                            for part in ("kept", "fresh", "take", "refuse", "own", "ready"))
    b.cbranch(b.extract_value(pair, 1), kept, own)
    b.position_at_end(kept)  # this call holds the site
    cached = b.load(slot, typ=PTR)
    b.cbranch(b.icmp_unsigned("==", cached, ir.Constant(PTR, None)), fresh, join)
    b.position_at_end(fresh)  # its first block: within the budget?
    left = b.atomic_rmw("sub", budget, n, "monotonic")
    b.cbranch(b.icmp_signed(">=", left, n), take, refuse)
    b.position_at_end(take)
    new = b.call(alloc, size)
    b.store(new, slot)
    failed = b.icmp_unsigned("==", new, ir.Constant(PTR, None))
    b.atomic_rmw("add", budget, b.select(failed, n, ir.Constant(I64, 0)), "monotonic")  # not kept after all
    b.branch(join)
    b.position_at_end(refuse)  # over the budget: give it back, and the site, and allocate as before
    b.atomic_rmw("add", budget, n, "monotonic")
    b.store_atomic(ir.Constant(I32, 0), busy, "release", 4)
    b.branch(own)
    b.position_at_end(own)
    mine = b.call(alloc, size)
    b.branch(join)
    b.position_at_end(join)
    ptr, held = b.phi(PTR, name=name), b.phi(ir.IntType(1))
    for value, flag, block in ((cached, 1, kept), (new, 1, take), (mine, 0, own)):
        ptr.add_incoming(value, block)
        held.add_incoming(ir.Constant(ir.IntType(1), flag), block)
    return Scratch(ptr, busy, held)


def release(gen, scratch: Scratch) -> None:
    """Code giving ``scratch`` back: the site's flag when this call holds it, else free."""
    free = gen.mg.declare("free", VOID, [PTR])
    b = gen.b
    if scratch.busy is None:
        b.call(free, [scratch.ptr])
        return
    give, own, done = (gen.new_block(f"scratch.{part}") for part in ("give", "free", "done"))
    b.cbranch(scratch.held, give, own)
    b.position_at_end(give)
    b.store_atomic(ir.Constant(I32, 0), scratch.busy, "release", 4)
    b.branch(done)
    b.position_at_end(own)
    b.call(free, [scratch.ptr])
    b.branch(done)
    b.position_at_end(done)


def _site_globals(mg, name: str, nbytes: int) -> tuple:
    """The block and busy flag of a new kept site (`mg.scratch_sites` lists them, with the
    block's size)."""
    slot = ir.GlobalVariable(mg.module, PTR, name=mg.unique(f"scratch.{name}"))
    slot.linkage = "internal"
    slot.initializer = ir.Constant(PTR, None)
    busy = ir.GlobalVariable(mg.module, I32, name=mg.unique(f"scratch.{name}.busy"))
    busy.linkage = "internal"
    busy.initializer = ir.Constant(I32, 0)
    mg.scratch_sites.append((slot, busy, nbytes))
    return slot, busy


def emit_release_function(mg) -> None:
    """``void RELEASE_SCRATCH_SYMBOL()``: frees each kept block whose site no call holds,
    giving its bytes back to the budget, when the module has kept sites."""
    if not mg.scratch_sites:
        return
    fn = ir.Function(mg.module, ir.FunctionType(VOID, []), name=RELEASE_SCRATCH_SYMBOL)
    free = mg.declare("free", VOID, [PTR])
    budget = mg.runtime_global(SCRATCH_BUDGET_SYMBOL, I64)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for slot, busy, nbytes in mg.scratch_sites:
        pair = b.cmpxchg(busy, ir.Constant(I32, 0), ir.Constant(I32, 1), "acquire", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            block = b.load(slot, typ=PTR)
            with b.if_then(b.icmp_unsigned("!=", block, ir.Constant(PTR, None))):
                b.call(free, [block])
                b.store(ir.Constant(PTR, None), slot)
                b.atomic_rmw("add", budget, ir.Constant(I64, nbytes), "monotonic")
            b.store_atomic(ir.Constant(I32, 0), busy, "release", 4)
    b.ret_void()
