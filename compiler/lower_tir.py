"""Lowering of TensorIR to the loop-level form the CPU code generator reads.

`lower(func)` runs small passes, each a plain ``PrimFunc -> PrimFunc`` function:

1. `lower_thread_bindings`    ``T.thread_binding`` loops become the serial loops they annotate,
                              ``T.tvm_storage_sync`` barriers disappear
2. `lower_init`               a block's ``T.init()`` becomes an ``if`` on its first reduction step
3. `convert_blocks_to_loops`  blocks disappear: iterators are replaced by their bindings,
                              ``T.where`` becomes an ``if``, ``T.alloc_buffer`` an `tir.Allocate`
4. `loop_partition.partition_guarded_loops`  a loop whose padding guards
                              (``T.if_then_else`` conditions) hold on a middle range of it runs
                              that range without them, its edges with them
   (`bounds_check.instrument_bounds_checks`, when asked: accesses not proven in bounds are
                              checked at run time)
5. `flatten_buffers`          N-d buffer accesses become 1-D element offsets
6. `lower_intrinsics`         intrinsics with a simple definition in others (``rsqrt``,
                              ``sigmoid``, integer ``abs``) are rewritten into it
7. `plan_allocations`         each `tir.Allocate` is placed on the stack or on the heap by its size

GPU-scheduled code runs on the CPU. In TensorIR a thread binding is an annotation on a loop:
``for tx in T.thread_binding(128, thread="threadIdx.x")`` still means "for tx in range(128)",
and a function keeps the meaning of its loops run in order whatever threads they are bound to
(a GPU runs the iterations of bound loops at once, which the schedule guarantees gives the
same result). So `lower_thread_bindings` makes every bound loop — ``blockIdx.*``,
``threadIdx.*``, ``vthread*`` — the serial loop it annotates, and the rest follows: buffers
whose scope is ``"shared"``, ``"shared.dyn"``, ``"local"`` or ``"warp"`` are ordinary
allocations where they are declared (the scope is kept on the buffer, and ignored), and a
cross-thread reduction — a reduction block whose reduce loop is bound to ``threadIdx.x``, as
TVM's dlight rules write GEMV and row reductions — is the sequential reduction it annotates.
What has no sequential meaning is code written SPMD-style, where each thread writes its part
of a shared buffer and, after a barrier, reads the others' parts: TensorIR schedules never
produce it before lowering (a cooperative fetch is a loop over the whole tile nested in the
thread loops), but by hand it can be written, and run serially it computes something else.

After lowering, a function holds only `tir.For`, `tir.IfThenElse`, `tir.SeqStmt`,
`tir.LetStmt`, `tir.AssertStmt`, `tir.While`, `tir.Evaluate`, `tir.BufferStore` and this
module's `tir.Allocate`; every buffer it reads or writes is one-dimensional and shares the ``data``
variable of the buffer it came from. ``buffer_map`` still holds the original (N-d) parameter
buffers: they describe the kernel's arguments. The lowered function has the attribute
``"tvms.lowered"``.

The passes never change the order in which a program touches memory; the loop transformations
that make naive loops fast live in `compiler.schedule_cpu` and run before lowering.
"""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import make_add, make_and, make_cast, make_mul

from .kernel_places import at_span

__all__ = [
    "lower", "lower_thread_bindings", "lower_init", "convert_blocks_to_loops",
    "flatten_buffers", "lower_intrinsics", "plan_allocations", "STACK_ALLOC_LIMIT", "dump",
    "VECTORIZE_ANN", "INTERLEAVE_ANN", "UNROLL_ANN", "THREAD_SYNC_OPS",
]

# Allocations of at most this many bytes, with a constant size, live on the stack (each thread
# of a parallel loop has its own stack of at least 2 MiB); the rest are malloc'ed.
STACK_ALLOC_LIMIT = 64 * 1024

# Loop annotations (``tir.For.annotations``) the CPU code generator turns into LLVM loop
# metadata; they change how a loop is compiled, never what it computes. `compiler.schedule_cpu`
# sets them on loops it creates.
VECTORIZE_ANN = "tvms.vectorize_width"  # int: vectorize at this width
INTERLEAVE_ANN = "tvms.interleave"  # int: ... with this many vectors per iteration (default 1)
UNROLL_ANN = "tvms.unroll"  # int: 0 never unroll this loop, n > 1 unroll it n times

LOWERED_ATTR = "tvms.lowered"


def _with_body(func: tir.PrimFunc, body, **attrs) -> tir.PrimFunc:
    new_attrs = dict(func.attrs)
    new_attrs.update(attrs)
    return tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, new_attrs, func.private, func.span)


# ----------------------------------------------------------------------------- passes


# Intrinsics that synchronize the threads of a GPU block: barriers, with nothing to do when
# the threads run one after another.
THREAD_SYNC_OPS = frozenset(("tir.tvm_storage_sync",))


def lower_thread_bindings(func: tir.PrimFunc) -> tir.PrimFunc:
    """Make each ``T.thread_binding`` loop a ``T.serial`` one (same variable, range and
    annotations; the thread tag is dropped), each ``T.launch_thread`` scope a serial loop over
    its body, each ``T.tvm_storage_sync`` barrier a no-op, and drop `tir.DeclBuffer` scopes
    (their buffers keep the memory they alias).

    Why: a thread binding annotates a loop, it does not change what the loop computes; a
    function scheduled for a GPU keeps the meaning of its loops run in order (see the module
    docstring), and a barrier among threads that already run one after another has nothing to
    wait for. Bound loops become serial rather than parallel: iterations of a ``blockIdx``
    loop may share a buffer allocated outside it, which is one buffer per block on a GPU but
    one buffer for all of them here, so running them at once could race."""

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op in THREAD_SYNC_OPS:
                return tir.Evaluate(tir.IntImm("int32", 0))
            if isinstance(s, tir.AttrStmt) and s.attr_key == "thread_extent" and isinstance(s.node, tir.IterVar):
                # ``T.launch_thread(tx, n)`` over a body: the body for tx in range(n), as a
                # bound loop is.
                var = s.node.var
                return tir.For(var, tir.IntImm(var.dtype, 0), s.value, "serial", self.visit_stmt(s.body))
            if isinstance(s, tir.DeclBuffer):
                # Accesses through a declared buffer already name its memory (buffer.data);
                # flattening reads its shape from the buffer itself. Nothing is left to do.
                return self.visit_stmt(s.body)
            s = super().visit_stmt(s)
            if isinstance(s, tir.For) and s.kind == "thread_binding":
                return dataclasses.replace(s, kind="serial", thread_tag=None)
            return s

    return _with_body(func, M().visit_stmt(func.body))


def lower_init(func: tir.PrimFunc) -> tir.PrimFunc:
    """Replace each block's ``T.init()`` by ``if <every reduce iterator == its domain's min>:
    init`` placed before the block body.

    Why: a reduction block's init runs once per spatial point, before its first update; once
    blocks become plain loops the only place left to say "first" is a condition on the reduce
    iterators. This holds for any order of the surrounding loops, since a loop nest always
    visits the lexicographically first reduce point of a spatial point first."""

    class M(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.Block) and s.init is not None:
                cond = None
                for iv in s.iter_vars:
                    if iv.kind == "R":
                        cond = make_and(cond, tir.EQ("bool", iv.var, make_cast(iv.dom.min, iv.var.dtype)))
                init = s.init if cond is None else tir.IfThenElse(cond, s.init)
                return dataclasses.replace(s, body=tir.seq([init, s.body]), init=None)
            return s

    return _with_body(func, M().visit_stmt(func.body))


def convert_blocks_to_loops(func: tir.PrimFunc, keep_annotations: tuple = ()) -> tir.PrimFunc:
    """Remove blocks: substitute each iterator by the value it is bound to, turn a ``T.where``
    predicate into an ``if``, and make the block's ``T.alloc_buffer``s `tir.Allocate` statements
    around its body. A block annotation whose key is in ``keep_annotations`` stays, as an
    ``AttrStmt`` (key, value) around the body, for a later pass (the GPU lowering's wmma
    operations).

    Why: blocks carry the information schedules need (iterator domains, declared regions), but
    execution only needs their bodies at the bound points. Declared reads/writes are dropped."""

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.BlockRealize):
                block = s.block
                if block.init is not None:
                    raise ValueError(f"block '{block.name}' still has an init; run lower_init first")
                if block.match_buffers:
                    raise NotImplementedError(f"block '{block.name}': T.match_buffer inside a block is not supported")
                body = self.visit_stmt(block.body)
                mapping = {iv.var: make_cast(v, iv.var.dtype) for iv, v in zip(block.iter_vars, s.iter_values)}
                body = substitute(body, mapping)
                for key in keep_annotations:
                    if key in block.annotations:
                        value = block.annotations[key]
                        value = tir.StringImm("handle", value) if isinstance(value, str) else value
                        body = tir.AttrStmt(tir.IntImm("int32", 0), key, value, body)
                pred = s.predicate
                if not (isinstance(pred, tir.IntImm) and pred.value == 1):
                    body = tir.IfThenElse(substitute(self.visit_expr(pred), mapping), body)
                for buf in reversed(block.alloc_buffers):
                    body = tir.Allocate(buf, body)
                return body
            if isinstance(s, tir.Block):
                raise ValueError("a Block outside a BlockRealize")
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


def _row_major_strides(shape: list, dtype: str) -> list:
    strides = []
    acc = tir.IntImm(dtype, 1)
    for dim in reversed(shape):
        strides.append(acc)
        acc = make_mul(acc, make_cast(dim, dtype))
    return list(reversed(strides))


def buffer_size(buf: tir.Buffer, dtype: str = "int64"):
    """Number of elements a buffer's storage spans (its extent under explicit strides)."""
    if not buf.shape:
        return tir.IntImm(dtype, 1)
    if buf.strides:
        # The last element's offset plus one.
        size = tir.IntImm(dtype, 1)
        for dim, stride in zip(buf.shape, buf.strides):
            size = make_add(size, make_mul(make_add(make_cast(dim, dtype), tir.IntImm(dtype, -1)), make_cast(stride, dtype)))
        return size
    size = tir.IntImm(dtype, 1)
    for dim in buf.shape:
        size = make_mul(size, make_cast(dim, dtype))
    return size


def _index_dtype(buf: tir.Buffer, indices: list) -> str:
    """int32 when every index is int32 and the buffer's offsets provably fit; int64 otherwise."""
    if any(i.dtype != "int32" for i in indices):
        return "int64"
    size = buffer_size(buf, "int64")
    if not isinstance(size, tir.IntImm) or size.value >= 2**31:
        return "int64"
    if buf.elem_offset is not None and not isinstance(buf.elem_offset, tir.IntImm):
        return "int64"
    return "int32"


def flatten_buffers(func: tir.PrimFunc) -> tir.PrimFunc:
    """Rewrite every N-d buffer access into a 1-D access at ``sum(index_d * stride_d) +
    elem_offset``, using the buffer's explicit strides or, without them, row-major strides
    from its shape.

    Why: machine code addresses memory with one offset from a base pointer. Each flat buffer
    keeps the ``data`` variable of the original one, so a parameter's pointer and an
    allocation's pointer are found through it."""
    flat: dict = {}

    def flat_of(buf: tir.Buffer) -> tir.Buffer:
        fb = flat.get(buf)
        if fb is None:
            if buf.data is None:
                buf.data = tir.Var("handle", buf.name)
            fb = tir.Buffer(buf.name, [buffer_size(buf)], buf.dtype, data=buf.data, scope=buf.scope, align=buf.align)
            flat[buf] = fb
            flat[fb] = fb
        return fb

    def offset(buf: tir.Buffer, indices: list):
        if buf in flat and flat[buf] is buf:
            return indices[0]  # already flat
        dtype = _index_dtype(buf, indices)
        strides = [make_cast(s, dtype) for s in buf.strides] if buf.strides else _row_major_strides(buf.shape, dtype)
        off = tir.IntImm(dtype, 0)
        for idx, stride in zip(indices, strides):
            off = make_add(off, make_mul(make_cast(idx, dtype), stride))
        if buf.elem_offset is not None:
            off = make_add(off, make_cast(buf.elem_offset, dtype))
        return off

    class M(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, tir.BufferLoad):
                idx = [self.visit_expr(i) for i in e.indices]
                return tir.BufferLoad(e.dtype, flat_of(e.buffer), [offset(e.buffer, idx)], e.span)
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                idx = [self.visit_expr(i) for i in s.indices]
                return tir.BufferStore(flat_of(s.buffer), self.visit_expr(s.value), [offset(s.buffer, idx)], s.span)
            if isinstance(s, tir.Allocate):
                return tir.Allocate(flat_of(s.buffer), self.visit_stmt(s.body), s.storage)
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


def lower_intrinsics(func: tir.PrimFunc) -> tir.PrimFunc:
    """Rewrite intrinsics that are short formulas of others: ``rsqrt(x) = 1 / sqrt(x)``,
    ``sigmoid(x) = 1 / (1 + exp(-x))``, integer ``abs(x) = x < 0 ? -x : x``.

    Why: the code generator then needs one implementation of ``exp`` and ``sqrt`` (which LLVM
    knows and may vectorize) instead of one per derived function."""

    class M(IRMutator):
        def visit_expr(self, e):
            e = super().visit_expr(e)
            if isinstance(e, tir.Call) and len(e.args) == 1:
                x = e.args[0]
                dt = e.dtype
                if e.op == "tir.rsqrt" and tir.is_float(dt):
                    return tir.Div(dt, tir.FloatImm(dt, 1.0), tir.Call(dt, "tir.sqrt", [x]))
                if e.op == "tir.sigmoid" and tir.is_float(dt):
                    neg = tir.Sub(dt, tir.FloatImm(dt, 0.0), x)
                    den = tir.Add(dt, tir.FloatImm(dt, 1.0), tir.Call(dt, "tir.exp", [neg]))
                    return tir.Div(dt, tir.FloatImm(dt, 1.0), den)
                if e.op in ("tir.abs", "tir.fabs") and tir.is_int(dt):
                    if dt.startswith("uint"):
                        return x
                    zero = tir.IntImm(dt, 0)
                    return tir.Select(dt, tir.LT("bool", x, zero), tir.Sub(dt, zero, x), x)
                if e.op == "tir.abs" and tir.is_float(dt):
                    return tir.Call(dt, "tir.fabs", [x])
            return e

    return _with_body(func, M().visit_stmt(func.body))


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (``float32x4``: 16; ``bool``: 1; ``handle``: 8)."""
    base, sep, lanes = dtype.rpartition("x")
    vector = bool(sep) and lanes.isdigit() and bool(base)
    lanes_n, scalar = (int(lanes), base) if vector else (1, dtype)
    if scalar == "bool":
        return lanes_n
    digits = "".join(ch for ch in scalar if ch.isdigit())
    return (max(1, int(digits) // 8) if digits else 8) * lanes_n


def plan_allocations(func: tir.PrimFunc, stack_limit: int = STACK_ALLOC_LIMIT) -> tir.PrimFunc:
    """Decide where each `tir.Allocate` lives: on the stack when its size is a constant of at most
    ``stack_limit`` bytes, on the heap (64-byte aligned ``malloc``) otherwise.

    Why: stack storage is free to allocate and lets LLVM keep small buffers in registers, but
    stacks are small (worker threads especially) and a dynamic size cannot be reserved in the
    function's entry block."""

    class M(IRMutator):
        def visit_stmt(self, s):
            s = super().visit_stmt(s)
            if isinstance(s, tir.Allocate) and s.storage == "auto":
                size = s.buffer.shape[0]
                nbytes = size.value * dtype_bytes(s.buffer.dtype) if isinstance(size, tir.IntImm) else None
                storage = "stack" if nbytes is not None and nbytes <= stack_limit else "heap"
                return tir.Allocate(s.buffer, s.body, storage)
            return s

    return _with_body(func, M().visit_stmt(func.body))


def _reject_uncompilable(func: tir.PrimFunc) -> None:
    """Stop with a clear error on what tvms reads and prints but cannot compile yet: calls
    between prim_funcs, loops with a step, the runtime and GPU builtins (`tir.BUILTINS`, ``T.call_packed``, the
    tensor-core intrinsics) and attribute scopes other than thread launches. Why here: every
    build path lowers first, so this one check covers them all before codegen meets them."""
    from tvmscript.ir.tir_visitor import TIRVisitor

    builtin_ops = {op: name for op, (name, _) in tir.BUILTIN_NAMES.items()}

    class Check(TIRVisitor):
        def visit(self, node) -> None:
            try:
                super().visit(node)
            except NotImplementedError as err:  # told the innermost place it is in
                raise at_span(err, getattr(node, "span", None))

        def visit_Call(self, e) -> None:
            if isinstance(e.op, str) and e.op in builtin_ops:
                raise NotImplementedError(f"T.{builtin_ops[e.op]} is not supported for compilation yet")
            if not isinstance(e.op, str):
                raise NotImplementedError(f"calls between prim_funcs ({getattr(e.op, 'name_hint', e.op)}(...)) "
                                          "are not supported for compilation yet")
            self.generic_visit(e)

        def visit_For(self, s) -> None:
            if s.step is not None:
                raise NotImplementedError("loops with a step (range(lo, hi, step)) are not supported for compilation yet")
            self.generic_visit(s)

        def visit_AttrStmt(self, s) -> None:
            if not (s.attr_key == "thread_extent" and isinstance(s.node, tir.IterVar)):
                raise NotImplementedError(f'T.attr(..., "{s.attr_key}", ...) is not supported for compilation yet')
            self.generic_visit(s)

    Check().visit(func.body)


def lower(func: tir.PrimFunc, bounds_check: bool = False, places: dict | None = None) -> tir.PrimFunc:
    """All lowering passes, in order. Idempotent: a lowered function is returned as is.

    ``bounds_check``: after blocks become loops, every buffer access not proven in bounds gets
    a run-time check (`compiler.bounds_check`); ``places`` numbers the accesses' spans for its
    messages (`compiler.kernel_places`)."""
    # (imported here: it reads `schedule_cpu.analysis`, whose package imports this module)
    from .loop_partition import partition_guarded_loops

    if func.attrs.get(LOWERED_ATTR):
        return func
    _reject_uncompilable(func)
    for p in (lower_thread_bindings, lower_init, convert_blocks_to_loops, partition_guarded_loops):
        func = p(func)
    if bounds_check:
        from .bounds_check import instrument_bounds_checks

        func = instrument_bounds_checks(func, places)
    for p in (flatten_buffers, lower_intrinsics, plan_allocations):
        func = p(func)
    return _with_body(func, func.body, **{LOWERED_ATTR: True})


# ----------------------------------------------------------------------------- debugging


def dump(node, indent: int = 0) -> str:
    """A plain-text rendering of lowered IR (the TVMScript printer does not know `tir.Allocate`)."""
    pad = "    " * indent
    if isinstance(node, tir.PrimFunc):
        params = ", ".join(p.name for p in node.params)
        return f"def ({params}):\n" + dump(node.body, 1)
    s = node
    if isinstance(s, tir.SeqStmt):
        return "".join(dump(x, indent) for x in s.seq)
    if isinstance(s, tir.For):
        return f"{pad}for {s.loop_var.name} in {s.kind}({_e(s.min)}, {_e(s.min)} + {_e(s.extent)}):\n" + dump(s.body, indent + 1)
    if isinstance(s, tir.IfThenElse):
        out = f"{pad}if {_e(s.condition)}:\n" + dump(s.then_case, indent + 1)
        if s.else_case is not None:
            out += f"{pad}else:\n" + dump(s.else_case, indent + 1)
        return out
    if isinstance(s, tir.BufferStore):
        return f"{pad}{s.buffer.name}[{', '.join(_e(i) for i in s.indices)}] = {_e(s.value)}\n"
    if isinstance(s, tir.Allocate):
        return f"{pad}{s.buffer.name} = allocate[{s.storage}]({s.buffer.dtype}, {_e(s.buffer.shape[0])})\n" + dump(s.body, indent)
    if isinstance(s, tir.LetStmt):
        return f"{pad}{s.var.name} = {_e(s.value)}\n" + dump(s.body, indent)
    if isinstance(s, tir.AssertStmt):
        return f"{pad}assert {_e(s.condition)}\n" + dump(s.body, indent)
    if isinstance(s, tir.While):
        return f"{pad}while {_e(s.condition)}:\n" + dump(s.body, indent + 1)
    if isinstance(s, tir.Evaluate):
        return f"{pad}{_e(s.value)}\n"
    if isinstance(s, tir.BlockRealize):
        return f"{pad}block {s.block.name}:\n" + dump(s.block.body, indent + 1)
    return f"{pad}<{type(s).__name__}>\n"


_OPS = {tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.Div: "/", tir.Mod: "tmod", tir.FloorDiv: "//",
        tir.FloorMod: "%", tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">",
        tir.GE: ">=", tir.And: "and", tir.Or: "or"}


def _e(e) -> str:
    if isinstance(e, tir.Var):
        return e.name
    if isinstance(e, (tir.IntImm, tir.FloatImm)):
        return repr(e.value)
    if isinstance(e, tir.StringImm):
        return repr(e.value)
    if type(e) in _OPS:
        return f"({_e(e.a)} {_OPS[type(e)]} {_e(e.b)})"
    if isinstance(e, (tir.Min, tir.Max)):
        return f"{type(e).__name__.lower()}({_e(e.a)}, {_e(e.b)})"
    if isinstance(e, tir.BufferLoad):
        return f"{e.buffer.name}[{', '.join(_e(i) for i in e.indices)}]"
    if isinstance(e, tir.Cast):
        return f"{e.dtype}({_e(e.value)})"
    if isinstance(e, tir.Not):
        return f"not {_e(e.a)}"
    if isinstance(e, tir.Select):
        return f"select({_e(e.condition)}, {_e(e.true_value)}, {_e(e.false_value)})"
    if isinstance(e, tir.Call):
        return f"{e.op}({', '.join(_e(a) for a in e.args)})"
    if isinstance(e, tir.Let):
        return f"(let {e.var.name} = {_e(e.value)} in {_e(e.body)})"
    return f"<{type(e).__name__}>"
