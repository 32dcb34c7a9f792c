"""Statements of lowered TIR as LLVM code: stores, branches, allocations and serial loops.

Loops: ``T.serial`` loops are plain loops, and so are ``T.thread_binding`` loops, which
`lower_tir.lower_thread_bindings` has made serial (GPU-scheduled code keeps its sequential
meaning on the CPU); ``T.unroll`` loops with a constant extent of at most
`UNROLL_LIMIT` are unrolled here (larger ones get ``llvm.loop.unroll.full``); ``T.vectorized``
loops carry ``llvm.loop.vectorize.enable`` (and their width when constant), so LLVM's loop
vectorizer treats them as vectorizable; ``T.parallel`` loops are outlined and run on libgomp
(`parallel`). Loop annotations (set by `compiler.schedule_cpu`, see `lower_tir.VECTORIZE_ANN`)
steer LLVM without changing results: ``"tvms.vectorize_width": n`` vectorizes a serial loop at
width n (``1``: never vectorizes it), ``"tvms.interleave": c`` with c vectors per iteration
(default 1), ``"tvms.unroll": 0`` never unrolls it and ``"tvms.unroll": n`` unrolls it n times.
Below O3, LLVM unrolls and interleaves only what the IR asks for (`target.optimize`): these
annotations, and the full unrolling asked for on small loop nests (`cost.UNROLL_BUDGET`).

Allocations are zero-filled (`StmtGen.zero_fill`, why there); heap ones are freed when their
statement ends, or when a failed check leaves the kernel, except large ones of constant size
outside parallel loops, whose block the next call reuses (`scratch`).

`StmtGen` is mixed into `function.FuncGen`; it uses the builder ``self.b``, ``self.expr``
and ``self.fail_if`` from there, and ``self.stmt_parallel`` from `parallel.ParallelGen`.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tvmscript.ir import tir
from tvmscript.ir.tir import Allocate

from ..kernel_params import NameOf, dim_text
from ..written_first import needs_zero_fill
from ..kernel_places import at_span
from ..lower_tir import INTERLEAVE_ANN, UNROLL_ANN, VECTORIZE_ANN
from .cost import UNROLL_BUDGET, unroll_cost
from .scratch import KEEP_MIN_BYTES, Scratch, kept_allocation, release
from .dtypes import (I1, I8, I32, I64, PTR, VOID, constant, dtype_bits, elem_align, is_unsigned, memory_type,
                     value_type)

UNROLL_LIMIT = 64  # T.unroll loops of at most this many iterations are unrolled here


class StmtGen:
    """The statements of a function being generated (mixed into `function.FuncGen`)."""

    def stmt(self, s) -> None:
        if self.b.block.is_terminated:
            # Code after a failed assertion's `ret`: give it a block of its own (unreachable).
            self.b.position_at_end(self.new_block("dead"))
        if isinstance(s, tir.BufferStore):
            outer, self.at = self.at, s.span or self.at
            try:
                value = self.expr(s.value)
                if s.buffer.dtype == "bool":
                    value = self.b.zext(value, I8)
                elif s.buffer.dtype == "bfloat16":
                    value = self.bf16_bits(value)
                ptr = self.buffer_ptr(s.buffer, s.indices[0])
                self.b.store(value, ptr, align=elem_align(s.buffer.dtype))
            except (NotImplementedError, ValueError, TypeError) as err:
                raise at_span(err, s.span)
            self.at = outer
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, tir.For):
            self.stmt_for(s)
        elif isinstance(s, tir.IfThenElse):
            cond = self.expr(s.condition)
            then_bb = self.new_block("if.then")
            end_bb = self.new_block("if.end")
            else_bb = self.new_block("if.else") if s.else_case is not None else end_bb
            self.b.cbranch(cond, then_bb, else_bb)
            self.b.position_at_end(then_bb)
            self.stmt(s.then_case)
            if not self.b.block.is_terminated:
                self.b.branch(end_bb)
            if s.else_case is not None:
                self.b.position_at_end(else_bb)
                self.stmt(s.else_case)
                if not self.b.block.is_terminated:
                    self.b.branch(end_bb)
            self.b.position_at_end(end_bb)
        elif isinstance(s, tir.LetStmt):
            self.env[s.var] = self.expr(s.value)
            if tir.is_int(s.var.dtype) and self.is_nonneg(s.value):
                self.nonneg.add(s.var)
            self.stmt(s.body)
        elif isinstance(s, tir.AssertStmt):
            msg = s.message.value if isinstance(s.message, tir.StringImm) else ""
            self.fail_if(self.b.not_(self.expr(s.condition)), msg or "assertion failed")
            self.stmt(s.body)
        elif isinstance(s, tir.While):
            head = self.new_block("while.cond")
            body = self.new_block("while.body")
            end = self.new_block("while.end")
            self.b.branch(head)
            self.b.position_at_end(head)
            self.b.cbranch(self.expr(s.condition), body, end)
            self.b.position_at_end(body)
            self.stmt(s.body)
            if not self.b.block.is_terminated:
                self.b.branch(head)
            self.b.position_at_end(end)
        elif isinstance(s, tir.Evaluate):
            if not isinstance(s.value, (tir.IntImm, tir.FloatImm, tir.StringImm, tir.Var)):
                self.expr(s.value)
        elif isinstance(s, Allocate):
            self.stmt_allocate(s)
        elif isinstance(s, (tir.BlockRealize, tir.Block)):
            raise ValueError("codegen: blocks must be lowered first (compiler.lower_tir.lower)")
        else:
            raise NotImplementedError(f"codegen: unsupported statement {type(s).__name__}")

    def stmt_allocate(self, s: Allocate) -> None:
        buf = s.buffer
        ety = memory_type(buf.dtype)
        size = s.buffer.shape[0]
        if s.storage == "stack":
            if not isinstance(size, tir.IntImm):
                raise ValueError(f"stack allocation of '{buf.name}' needs a constant size")
            ptr = self.alloca(ir.ArrayType(ety, max(1, size.value)), align=max(64, buf.align or 0), name=buf.name)
            if needs_zero_fill(s.body, buf):
                self.zero_fill(ptr, ir.Constant(I64, max(1, size.value) * elem_align(buf.dtype)))
            self.env[buf.data] = ptr
            self.noalias.add(buf.data)
            self.stmt(s.body)
            return
        esize = elem_align(buf.dtype)
        const_bytes = -(-size.value * esize // 64) * 64 if isinstance(size, tir.IntImm) else None
        if const_bytes is not None and const_bytes >= KEEP_MIN_BYTES and not self.in_parallel:
            nbytes = ir.Constant(I64, const_bytes)
            block = kept_allocation(self, const_bytes, buf.name)  # reused across calls (`scratch`)
        else:
            n = self.b.sext(self.expr(size), I64) if dtype_bits(size.dtype) < 64 else self.expr(size)
            nbytes = self.b.mul(n, ir.Constant(I64, esize))
            nbytes = self.b.and_(self.b.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, ~63))
            nbytes = self.b.select(self.b.icmp_signed("==", nbytes, ir.Constant(I64, 0)), ir.Constant(I64, 64), nbytes)
            alloc = self.mg.declare("aligned_alloc", PTR, [I64, I64])
            block = Scratch(self.b.call(alloc, [ir.Constant(I64, 64), nbytes], name=buf.name))
        ptr = block.ptr
        self.heap.append(block)  # given back if a check fails from here on (free(NULL) is nothing)
        self.fail_if(self.b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)),
                     f"cannot allocate '{buf.name}' ({buf.dtype}, {dim_text(size, NameOf())} elements): out of memory")
        if needs_zero_fill(s.body, buf):
            self.zero_fill(ptr, nbytes)
        self.env[buf.data] = ptr
        self.noalias.add(buf.data)
        self.stmt(s.body)
        self.heap.pop()
        if not self.b.block.is_terminated:
            release(self, block)

    def zero_fill(self, ptr, nbytes) -> None:
        """Zeros over a new allocation. Why: a kernel may read an element it never wrote; LLVM
        takes such a load as undefined and may then compile the kernel into anything, an
        endless loop included (found by the fuzzer). Zeros make the read defined and the result
        reproducible, and they leak nothing of earlier calls. Left out where the allocation's
        first statements provably write every element before any is read, for all but small
        ones (`written_first.needs_zero_fill`); LLVM deletes what straight-line stores overwrite."""
        memset = self.mg.declare("llvm.memset.p0.i64", VOID, [PTR, I8, I64, I1])
        self.b.call(memset, [ptr, ir.Constant(I8, 0), nbytes, ir.Constant(I1, 0)])

    def stmt_for(self, s: tir.For) -> None:
        kind = s.kind
        if kind == "thread_binding":
            raise ValueError(f"kernel '{self.kname}': thread-bound loops must be lowered first "
                             "(compiler.lower_tir.lower_thread_bindings)")
        if tir.is_const_int(s.extent, 1):
            # One iteration: no loop at all, just the body at the loop variable's minimum (fewer
            # loops for LLVM to analyse, simplify and delete; no thread start for a parallel one).
            self.env[s.loop_var] = self.expr(s.min)
            if self.is_nonneg(s.min):
                self.nonneg.add(s.loop_var)
            self.stmt(s.body)
            return
        if kind == "parallel" and not self.in_parallel:
            self.stmt_parallel(s)
            return
        if kind == "unroll" and isinstance(s.extent, tir.IntImm) and isinstance(s.min, tir.IntImm) \
                and s.extent.value <= UNROLL_LIMIT:
            for i in range(s.min.value, s.min.value + s.extent.value):
                self.env[s.loop_var] = constant(s.loop_var.dtype, i)
                self.stmt(s.body)
            return
        props = []
        if kind == "vectorized":
            props.append(("llvm.loop.vectorize.enable", ir.Constant(I1, 1)))
            if isinstance(s.extent, tir.IntImm) and s.extent.value > 1:
                width = 1
                while width * 2 <= min(s.extent.value, 16):
                    width *= 2
                props.append(("llvm.loop.vectorize.width", ir.Constant(I32, width)))
        elif kind == "unroll":
            props.append(("llvm.loop.unroll.full", None))
        props += self.annotation_props(s)
        lo = self.expr(s.min)
        hi = self.int_add(lo, self.expr(s.extent), s.loop_var.dtype)
        self.emit_loop(s.loop_var, lo, hi, s.body, props, nonneg=self.is_nonneg(s.min))

    def annotation_props(self, s: tir.For) -> list:
        """LLVM loop metadata for the loop's annotations (`VECTORIZE_ANN`, `INTERLEAVE_ANN`,
        `UNROLL_ANN`) or, for an unannotated serial loop whose whole nest is small (constant
        extents of at most `UNROLL_MAX_EXTENT`, at most `UNROLL_BUDGET` loads and stores in all
        its iterations), full unrolling: what LLVM's own heuristics do to such a nest at O3
        (they are off below O3, see `optimize`). A small reduction nest unrolled that way lets
        the loop around it be vectorized (a convolution's window, a short matmul row)."""
        ann = s.annotations
        props = []
        if not ann:
            # (A parallel loop inside a parallel one runs serially: it is a serial loop here.)
            serial = s.kind == "serial" or (s.kind == "parallel" and self.in_parallel)
            if serial and unroll_cost(s, self.in_parallel) <= UNROLL_BUDGET:
                props.append(("llvm.loop.unroll.full", None))
            return props
        width = ann.get(VECTORIZE_ANN)
        if width is not None and _int_value(width) > 1 and s.kind == "serial":
            props.append(("llvm.loop.vectorize.enable", ir.Constant(I1, 1)))
            props.append(("llvm.loop.vectorize.width", ir.Constant(I32, _int_value(width))))
            count = max(1, _int_value(ann.get(INTERLEAVE_ANN, 1)))
            if count & (count - 1):
                # LLVM ignores an interleave count that is not a power of two: three vectors
                # (a 48-float tile) then stayed a loop, and a register tile's accumulators,
                # indexed by it, went to memory (half the speed). Unrolled whole instead.
                props.append(("llvm.loop.vectorize.followup_vectorized",
                              self.mg.module.add_metadata([ir.MetaDataString(self.mg.module, "llvm.loop.unroll.full")])))
            else:
                props.append(("llvm.loop.interleave.count", ir.Constant(I32, count)))
        elif width is not None and _int_value(width) == 1:
            props.append(("llvm.loop.vectorize.enable", ir.Constant(I1, 0)))
        unroll = ann.get(UNROLL_ANN)
        if unroll is not None and s.kind != "unroll":
            count = _int_value(unroll)
            if count == 0:
                props.append(("llvm.loop.unroll.disable", None))
            elif count > 1:
                props.append(("llvm.loop.unroll.count", ir.Constant(I32, count)))
        return props

    def emit_loop(self, var: tir.Var, lo, hi, body, props, nonneg: bool) -> None:
        pre = self.b.block
        head = self.new_block("for.head")
        body_bb = self.new_block("for.body")
        end = self.new_block("for.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        ty = value_type(var.dtype)
        phi = self.b.phi(ty, name=var.name)
        phi.add_incoming(lo, pre)
        cmp = self.b.icmp_unsigned("<", phi, hi) if is_unsigned(var.dtype) else self.b.icmp_signed("<", phi, hi)
        self.b.cbranch(cmp, body_bb, end)
        self.b.position_at_end(body_bb)
        self.env[var] = phi
        if nonneg:
            self.nonneg.add(var)
        self.stmt(body)
        if not self.b.block.is_terminated:
            nxt = self.int_add(phi, ir.Constant(ty, 1), var.dtype) if not is_unsigned(var.dtype) else self.b.add(phi, ir.Constant(ty, 1), flags=["nuw"])
            latch = self.b.block
            br = self.b.branch(head)
            if props:
                br.set_metadata("llvm.loop", self.mg.loop_metadata(props))
            phi.add_incoming(nxt, latch)
        self.b.position_at_end(end)


def _int_value(value) -> int:
    """An annotation value as an int: ``8`` and ``T.int32(8)`` (an IntImm) alike."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        return int(value.value)
    return int(value)
