"""Lowering of thread-bound TensorIR to GPU kernels: what `compiler.codegen_cuda` prints.

`lower_for_gpu(func)` turns a scheduled prim_func (loops bound to ``blockIdx.*`` /
``threadIdx.*``, as `tvms.dlight` or a hand schedule leaves it) into a `DeviceProgram`: the
host's part (global scratch buffers, then kernel launches in order) and, per kernel, a
loop-level body in which every thread-bound loop has become the hardware index it names.
Small passes, in order:

1. `lower_cross_thread_reduction`  a reduction block whose reduce loop is bound to
                                   ``threadIdx`` becomes a per-thread partial result, a
                                   ``tvm_thread_allreduce`` over those threads, and one
                                   thread's write-back (TVM's LowerCrossThreadReduction)
2. `plan_buffer_locations`         each local/shared ``T.alloc_buffer`` moves down to the
                                   innermost loop that holds all its uses, so that it can be
                                   sized for one loop iteration (a shared tile, not the matrix)
3. `lower_tir.lower_init`, `lower_tir.convert_blocks_to_loops`
4. `split_kernels`                 the function body becomes launches: each outermost
                                   thread-bound loop nest is one kernel; thread loops inside it
                                   become ``threadIdx.x``... (`THREAD_VARS`), guarded when a loop
                                   is shorter than the launch; ``vthread`` loops stay serial
5. `compact_buffers`               local and shared buffers shrink to the region one thread
                                   (local) or one thread block (shared) touches, fragments
                                   to one warp's, and take the padded strides a schedule's
                                   `storage_align` asked for (`collect_dim_aligns`); then
                                   `tensor_cores.tensorize_wmma` makes the ``tvms.wmma`` tiles
                                   tensor-core intrinsics
6. `lower_tir.flatten_buffers`, `lower_tir.lower_intrinsics`
7. `inject_thread_sync`            ``__syncthreads()`` where a thread may read a shared
                                   buffer another thread wrote, or overwrite one another
                                   thread has yet to read (TVM's InjectThreadSync)

Why a separate pipeline from `lower_tir.lower`: on the CPU a thread binding is only an
annotation (its loop runs serially), but on a GPU the bound loops are the threads themselves,
so buffers are per thread or per block and reductions across threads need communication.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in

from tvmscript.ir.arith import const_int_bound, eval_range
from tvmscript.ir.arith.canonical import Canonical
from .tensor_cores import WMMA_ANN, tensorize_wmma
from .lower_tir import _with_body, convert_blocks_to_loops, flatten_buffers, lower_init, lower_intrinsics, THREAD_SYNC_OPS
from tvmscript.ir.tir import Allocate
from tvmscript.ir.mutator import IRMutator, substitute
from tvmscript.ir.tir_arith import make_cast

__all__ = [
    "GPULoweringError", "Kernel", "DeviceProgram", "THREAD_VARS", "THREAD_TAGS", "ALLREDUCE_OP", "SYNC_OP",
    "lower_for_gpu", "lower_cross_thread_reduction", "plan_buffer_locations", "split_kernels",
    "collect_dim_aligns", "compact_buffers", "aligned_strides", "inject_thread_sync", "narrow_indices", "is_shared", "has_thread_bindings", "pointer_targets",
]

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
ON_CHIP_SCOPES = ("local", "warp", "shared", "shared.dyn") + FRAGMENT_SCOPES


class GPULoweringError(ValueError):
    """A schedule the GPU backend cannot turn into kernels (code outside any thread binding,
    a cross-thread reduction it cannot express, ...); the message names the block or loop."""


def is_shared(buf: tir.Buffer) -> bool:
    return buf.scope in SHARED_SCOPES


def has_thread_bindings(func: tir.PrimFunc) -> bool:
    """Whether any loop of ``func`` is bound to a GPU thread or block index."""
    return any(loop.kind == "thread_binding" for loop in _loops(func.body))


class _LoopCollector(TIRVisitor):
    def __init__(self) -> None:
        self.loops: list = []

    def visit_For(self, node) -> None:
        self.loops.append(node)
        self.generic_visit(node)


def _loops(stmt) -> list:
    c = _LoopCollector()
    c.visit(stmt)
    return c.loops


# ----------------------------------------------------------------------------- results


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


def lower_for_gpu(func: tir.PrimFunc, name: str = "main") -> DeviceProgram:
    """All GPU lowering passes, in order (see the module docstring)."""
    func = lower_cross_thread_reduction(func)
    func = plan_buffer_locations(func)
    func = lower_init(func)
    aligns = collect_dim_aligns(func)
    func = convert_blocks_to_loops(func, keep_annotations=(WMMA_ANN,))
    program = split_kernels(func, name)
    for k in program.kernels:
        body = tensorize_wmma(compact_buffers(k.body, k.extents, aligns))
        flat = flatten_buffers(_with_body(func, body))
        body = lower_intrinsics(flat).body
        k.body = inject_thread_sync(narrow_indices(body, k.extents))
    program.workspaces = [_flat_buffer(b) for b in program.workspaces]
    return program


def _flat_buffer(buf: tir.Buffer) -> tir.Buffer:
    from .lower_tir import buffer_size

    return tir.Buffer(buf.name, [buffer_size(buf)], buf.dtype, data=buf.data, scope=buf.scope, align=buf.align)


# ----------------------------------------------------------------------------- helpers


def _is_thread_loop(s) -> bool:
    return isinstance(s, tir.For) and s.kind == "thread_binding" and (s.thread_tag or "").startswith(
        ("threadIdx", "blockIdx"))


def _conjuncts(e) -> list:
    if isinstance(e, tir.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    if isinstance(e, tir.IntImm) and e.value == 1:
        return []
    return [e]


def _all_of(conds: list):
    out = None
    for c in conds:
        out = c if out is None else tir.And("bool", out, c)
    return out if out is not None else tir.IntImm("bool", 1)


class _BufferAccesses(TIRVisitor):
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


def _buffer_accesses(node, nested: bool = True) -> _BufferAccesses:
    v = _BufferAccesses(nested)
    v.visit(node)
    return v


def _buffers_accessed(node, nested: bool = True) -> set:
    """Buffers loaded or stored in a statement or expression, inside nested blocks too unless
    ``nested`` is False."""
    v = _buffer_accesses(node, nested)
    return v.loaded | v.stored


# ----------------------------------------------------------------------------- 1. cross-thread reductions


_COMBINERS = {tir.Add: "sum", tir.Mul: "prod", tir.Max: "max", tir.Min: "min"}


def reduction_identity(combiner: str, dtype: str):
    """The value that changes nothing under ``combiner`` (the start of each thread's partial)."""
    if combiner == "sum":
        return tir.FloatImm(dtype, 0.0) if tir.is_float(dtype) else tir.IntImm(dtype, 0)
    if combiner == "prod":
        return tir.FloatImm(dtype, 1.0) if tir.is_float(dtype) else tir.IntImm(dtype, 1)
    lowest = combiner == "max"
    return tir.Call(dtype, "tir.min_value" if lowest else "tir.max_value", [])


def combine(combiner: str, a, b):
    cls = {"sum": tir.Add, "prod": tir.Mul, "max": tir.Max, "min": tir.Min}[combiner]
    return cls(a.dtype, a, b)


def _match_reduction(block: tir.Block):
    """``(buffer, indices, combiner, rhs)`` for a block whose body is
    ``buf[idx] = buf[idx] <op> rhs`` (or ``rhs <op> buf[idx]``); None otherwise."""
    st = block.body
    if not isinstance(st, tir.BufferStore):
        return None
    v = st.value
    combiner = _COMBINERS.get(type(v))
    if combiner is None:
        return None

    def is_self(e):
        return (isinstance(e, tir.BufferLoad) and e.buffer is st.buffer and len(e.indices) == len(st.indices)
                and all(_same(a, b) for a, b in zip(e.indices, st.indices)))

    if is_self(v.a):
        return st.buffer, st.indices, combiner, v.b
    if is_self(v.b):
        return st.buffer, st.indices, combiner, v.a
    return None


def _same(a, b) -> bool:
    from tvmscript.ir import structural_equal

    return a is b or structural_equal(a, b)


def lower_cross_thread_reduction(func: tir.PrimFunc) -> tir.PrimFunc:
    """Rewrite each reduction block with a reduce loop bound to ``threadIdx``:

    ``for k in thread_binding(T, "threadIdx.x"): block(init=C[i] = 0; C[i] += f(k))`` becomes
    (every thread) ``red[0] = identity; for k ...: red[0] += f(k)``, then
    ``tvm_thread_allreduce("sum", red[0], "threadIdx.x")`` and ``if threadIdx.x == 0:
    C[i] = init + red[0]`` (just ``red[0]`` when the init is the identity).

    Why: the threads of a bound reduce loop run at once, each holding part of the sum; the
    block's sequential meaning (accumulate into ``C[i]`` in order) would be a race."""
    counter = [0]

    def rewrite(path: list, br: tir.BlockRealize):
        """``path``: the For loops above ``br`` (outermost first). Returns (index in path of
        the loop to replace, new statement) or None when ``br`` is not a cross-thread reduction."""
        block = br.block
        reduce_vars = set()
        for iv, value in zip(block.iter_vars, br.iter_values):
            if iv.kind == "R":
                reduce_vars.update(vars_in([value]))
        if not reduce_vars:
            return None
        reduce_idx = [i for i, loop in enumerate(path) if loop.loop_var in reduce_vars]
        cross = [path[i] for i in reduce_idx if _is_thread_loop(path[i]) and path[i].thread_tag.startswith("threadIdx")]
        if not cross:
            return None
        where = f"block '{block.name}'"
        match = _match_reduction(block)
        if match is None or block.init is None:
            raise GPULoweringError(
                f"{where}: a reduction across threads must have an init and a body 'buf[i] = buf[i] + value' "
                "(or *, T.max, T.min)")
        buf, indices, combiner, rhs = match
        top = reduce_idx[0]
        inner = path[top:]
        for loop in inner:
            if loop.loop_var not in reduce_vars and not _is_thread_loop(loop) and not _is_one(loop.extent):
                raise GPULoweringError(
                    f"{where}: loop '{loop.loop_var.name}' lies between the reduction's loops but does not reduce")
        for outer, nxt in zip(inner, inner[1:] + [br]):
            if outer.body is not nxt:
                raise GPULoweringError(
                    f"{where}: the loops of a reduction across threads must hold only that block")
        counter[0] += 1
        dtype = buf.dtype
        red = tir.Buffer(f"{block.name}_red", [tir.IntImm("int32", 1)], dtype, scope="local",
                         data=tir.Var("handle", f"{block.name}_red"))
        zero = [tir.IntImm("int32", 0)]
        red_load = tir.BufferLoad(dtype, red, zero)
        identity = reduction_identity(combiner, dtype)
        # Each thread's partial result: the block with its init dropped, accumulating into red.
        partial = dataclasses.replace(block, body=tir.BufferStore(red, combine(combiner, red_load, rhs), zero),
                                      init=None, reads=[], writes=[], name=block.name + "_in_thread")
        nest = tir.BlockRealize(br.iter_values, br.predicate, partial)
        for loop in reversed(inner):
            nest = dataclasses.replace(loop, body=nest)
        # The write-back: the spatial indices, with loops inside `top` replaced by thread indices.
        binding = {iv.var: v for iv, v in zip(block.iter_vars, br.iter_values)}
        inner_threads = {loop.loop_var: _thread_value(loop) for loop in inner if _is_thread_loop(loop)}
        inner_vars = {loop.loop_var for loop in inner}

        def outer_value(e, what):
            e = substitute(substitute(e, binding), inner_threads)
            if any(v in inner_vars for v in vars_in([e])):
                raise GPULoweringError(f"{where}: the {what} depends on a reduce loop")
            return e

        out_idx = [outer_value(i, "written index") for i in indices]
        init_value = block.init.value if isinstance(block.init, tir.BufferStore) else None
        if init_value is None:
            raise GPULoweringError(f"{where}: the init must store one value")
        init_value = outer_value(init_value, "init value")
        result = red_load if _same(init_value, identity) else combine(combiner, init_value, red_load)
        # Every reducing thread holds the result: one of them writes a buffer the threads
        # share; a thread's own (local) buffer is written by each, for the code after it.
        guard = [] if buf.scope in ("local", "warp") else [
            tir.EQ("bool", THREAD_VARS[loop.thread_tag], tir.IntImm("int32", 0)) for loop in cross]
        for c in _conjuncts(br.predicate):  # spatial conditions (a tail of the output)
            c2 = substitute(substitute(c, binding), inner_threads)
            if not any(v in inner_vars for v in vars_in([c2])):
                guard.append(c2)
        tags = sorted({loop.thread_tag for loop in cross})
        allreduce = tir.Evaluate(tir.Call("handle", ALLREDUCE_OP,
                                          [tir.StringImm("handle", combiner), red_load]
                                          + [tir.StringImm("handle", t) for t in tags]))
        write_back = tir.IfThenElse(_all_of(guard), tir.BufferStore(buf, result, out_idx))
        body = tir.seq([tir.BufferStore(red, identity, zero), nest, allreduce, write_back])
        return top, Allocate(red, body)

    class M(IRMutator):
        def __init__(self):
            self.path: list = []

        def visit_stmt(self, s):
            if isinstance(s, tir.For):
                self.path.append(s)
                try:
                    body = self.visit_stmt(s.body)
                finally:
                    self.path.pop()
                if isinstance(body, _Replace):
                    if body.depth == len(self.path):
                        return body.stmt
                    return body
                return s if body is s.body else dataclasses.replace(s, body=body)
            if isinstance(s, tir.BlockRealize) and s.block.init is not None:
                found = rewrite(list(self.path), s)
                if found is not None:
                    top, stmt = found
                    if top == len(self.path):  # pragma: no cover - a reduce loop always exists
                        return stmt
                    return _Replace(top, stmt)
            if isinstance(s, tir.SeqStmt):
                seq = [self.visit_stmt(x) for x in s.seq]
                for x in seq:
                    if isinstance(x, _Replace):
                        raise GPULoweringError("a reduction across threads must be the only statement of its loops")
                return s if all(x is y for x, y in zip(seq, s.seq)) else tir.seq(seq)
            if isinstance(s, tir.Block):
                body = self.visit_stmt(s.body)
                if isinstance(body, _Replace):
                    raise GPULoweringError(f"block '{s.name}': unexpected reduction structure")
                return s if body is s.body else dataclasses.replace(s, body=body)
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


@dataclass(eq=False)
class _Replace(tir.Stmt):
    """A rewritten subtree travelling up to the loop at ``depth`` it replaces."""

    depth: int
    stmt: tir.Stmt


def _is_one(e) -> bool:
    return isinstance(e, tir.IntImm) and e.value == 1


def _thread_value(loop: tir.For):
    """A bound loop's variable as its thread index: ``min + threadIdx.x`` in the loop's dtype
    (just ``min`` for a loop of one iteration, so nothing depends on an index that is 0)."""
    if _is_one(loop.extent):
        return make_cast(loop.min, loop.loop_var.dtype)
    v = make_cast(THREAD_VARS[loop.thread_tag], loop.loop_var.dtype)
    if isinstance(loop.min, tir.IntImm) and loop.min.value == 0:
        return v
    return tir.Add(loop.loop_var.dtype, make_cast(loop.min, loop.loop_var.dtype), v)


# ----------------------------------------------------------------------------- 2. buffer locations


def plan_buffer_locations(func: tir.PrimFunc) -> tir.PrimFunc:
    """Move each local/shared ``T.alloc_buffer`` into the innermost loop whose body holds every
    block that uses it (never into a loop a reduction into it spans).

    Why: DLight and ``cache_read``/``cache_write`` declare caches at the root, sized like the
    whole tensor; a shared tile refilled at each step of a ``k`` loop only needs the part one
    step touches, and `compact_buffers` can only find that part relative to where the buffer
    lives. A block that reduces into the buffer pins it above its reduce loops, where the
    accumulated value must survive from one iteration to the next."""
    owners: dict = {}        # buffer -> Block declaring it
    uses: dict = {}          # buffer -> list of paths (tuple of For/Block nodes)

    def visit(s, path):
        if isinstance(s, tir.For):
            visit(s.body, path + (s,))
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                visit(x, path)
        elif isinstance(s, tir.BlockRealize):
            block = s.block
            for b in block.alloc_buffers:
                if b.scope in ON_CHIP_SCOPES:
                    owners[b] = block
            reduce_vars = set()
            for iv, value in zip(block.iter_vars, s.iter_values):
                if iv.kind == "R":
                    reduce_vars.update(vars_in([value]))
            here = path + (block,)
            touched = _buffers_accessed(block.body, nested=False)
            if block.init is not None:
                touched |= _buffers_accessed(block.init, nested=False)
            touched |= _buffers_accessed(s.predicate) | _buffers_accessed_values(s.iter_values)
            written = _buffer_accesses(block.body, nested=False).stored
            for b in touched:
                p = here
                if reduce_vars and b in written:
                    cut = next((i for i, n in enumerate(path) if isinstance(n, tir.For) and n.loop_var in reduce_vars),
                               None)
                    if cut is not None:
                        p = path[:cut]
                uses.setdefault(b, []).append(p)
            visit(block.body, here)
            if block.init is not None:
                visit(block.init, here)
        elif isinstance(s, (tir.LetStmt, tir.AssertStmt, tir.While, Allocate)):
            visit(s.body, path)
        elif isinstance(s, tir.IfThenElse):
            visit(s.then_case, path)
            if s.else_case is not None:
                visit(s.else_case, path)

    visit(func.body, ())
    target: dict = {}        # For or Block node -> buffers to allocate there
    moved: set = set()
    for buf, owner in owners.items():
        paths = uses.get(buf)
        if not paths:
            continue
        common = paths[0]
        for p in paths[1:]:
            n = 0
            while n < len(common) and n < len(p) and common[n] is p[n]:
                n += 1
            common = common[:n]
        # The deepest loop of the common path below the owner block.
        if owner not in common:
            continue
        below = common[common.index(owner) + 1:]
        loops = [n for n in below if isinstance(n, tir.For)]
        if not loops:
            continue
        node = loops[-1]
        # Never below a node that is itself a block other than a loop: keep it simple, a loop.
        target.setdefault(node, []).append(buf)
        moved.add(buf)
    if not moved:
        return func

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and s in target:
                body = self.visit_stmt(s.body)
                bufs = target[s]
                opaque = tir.Block("", [], [], [], body, None, list(bufs))
                return dataclasses.replace(s, body=tir.BlockRealize([], tir.IntImm("bool", 1), opaque))
            if isinstance(s, tir.Block):
                s2 = super().visit_stmt(s)
                kept = [b for b in s2.alloc_buffers if b not in moved]
                if len(kept) != len(s2.alloc_buffers):
                    s2 = dataclasses.replace(s2, alloc_buffers=kept)
                return s2
            return super().visit_stmt(s)

    return _with_body(func, M().visit_stmt(func.body))


def _buffers_accessed_values(values) -> set:
    out: set = set()
    for v in values:
        out |= _buffers_accessed(v)
    return out


# ----------------------------------------------------------------------------- 4. kernels


def _unbound_error(what: str) -> GPULoweringError:
    return GPULoweringError(
        f"{what} is not inside any loop bound to a GPU thread: did you forget to bind it? "
        "(schedule the function with tvms.dlight.ApplyDefaultSchedule or sch.bind)")


def split_kernels(func: tir.PrimFunc, name: str) -> DeviceProgram:
    """Cut the (loop-level) body into kernel launches; see `Kernel`."""
    program = DeviceProgram(func)
    params_data = {b.data for b in func.buffer_map.values()}
    host_allocs: list = []

    def host(s, lets: dict):
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                host(x, lets)
        elif isinstance(s, tir.LetStmt):
            host(s.body, {**lets, s.var: substitute(s.value, lets)})
        elif isinstance(s, Allocate):
            host_allocs.append(s.buffer)
            host(s.body, lets)
        elif isinstance(s, tir.Evaluate) and isinstance(s.value, tir.IntImm):
            return
        elif isinstance(s, tir.AssertStmt):
            host(s.body, lets)  # host-side checks are the VM's; device code has no asserts
        elif _is_thread_loop(s):
            k = len(program.kernels)
            kname = f"{name}_kernel" if k == 0 else f"{name}_kernel_{k}"  # never a CUDA function's name
            program.kernels.append(_make_kernel(kname, substitute(s, lets)))
        elif isinstance(s, tir.For):
            raise _unbound_error(f"loop '{s.loop_var.name}' of '{name}'")
        else:
            raise _unbound_error(f"a {type(s).__name__} of '{name}'")

    host(func.body, {})
    # Buffers allocated outside the kernels: global ones are the host's scratch; an on-chip one
    # used by a single kernel moves into it; one shared by kernels cannot live on chip.
    accesses = [(k, _buffer_accesses(k.body)) for k in program.kernels]
    for buf in host_allocs:
        users = [k for k, a in accesses if buf in a.loaded or buf in a.stored or buf.data in a.pointers]
        if buf.scope in ON_CHIP_SCOPES:
            if len(users) > 1:
                raise GPULoweringError(
                    f"buffer '{buf.name}' (scope {buf.scope!r}) is used by {len(users)} kernels of '{name}': "
                    "on-chip memory does not outlive a kernel")
            for k in users:
                k.body = Allocate(buf, k.body)
        elif buf.data not in params_data:
            program.workspaces.append(buf)
    return program


def _make_kernel(name: str, root: tir.For) -> Kernel:
    extents: dict = {}

    for loop in _loops(root):
        if not _is_thread_loop(loop):
            continue
        tag = loop.thread_tag
        if tag not in THREAD_VARS:
            raise GPULoweringError(f"unknown thread tag {tag!r} on loop '{loop.loop_var.name}'")
        old = extents.get(tag)
        if old is None:
            extents[tag] = loop.extent
        elif isinstance(old, tir.IntImm) and isinstance(loop.extent, tir.IntImm):
            if loop.extent.value > old.value:
                extents[tag] = loop.extent
        elif not _same(old, loop.extent):
            raise GPULoweringError(
                f"loops bound to {tag} in kernel '{name}' have different extents ({_text(old)} and "
                f"{_text(loop.extent)}) and one is not a constant")

    class Bind(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For) and _is_thread_loop(s):
                body = substitute(s.body, {s.loop_var: _thread_value(s)})
                body = self.visit_stmt(body)
                launch = extents[s.thread_tag]
                if not _same(launch, s.extent) and not (
                        isinstance(launch, tir.IntImm) and isinstance(s.extent, tir.IntImm)
                        and launch.value == s.extent.value):
                    cond = tir.LT("bool", THREAD_VARS[s.thread_tag], make_cast(s.extent, "int32"))
                    body = tir.IfThenElse(cond, body)
                return body
            if isinstance(s, tir.For) and _is_one(s.extent):  # one iteration: no loop at all
                return self.visit_stmt(substitute(s.body, {s.loop_var: make_cast(s.min, s.loop_var.dtype)}))
            if isinstance(s, tir.For) and s.kind == "thread_binding":  # vthread: a serial loop
                return dataclasses.replace(s, kind="serial", thread_tag=None, body=self.visit_stmt(s.body))
            if isinstance(s, tir.AssertStmt):
                return self.visit_stmt(s.body)
            return super().visit_stmt(s)

    return Kernel(name, Bind().visit_stmt(root), extents)


def _text(e) -> str:
    from .lower_tir import _e

    return _e(e)


# ----------------------------------------------------------------------------- 5. compaction


def collect_dim_aligns(func: tir.PrimFunc) -> dict:
    """The ``buffer_dim_align`` annotations `storage_align` leaves on blocks, gathered before
    the blocks are gone: buffer data Var -> {axis: (factor, offset)}."""
    aligns: dict = {}

    class V(TIRVisitor):
        def visit_Block(self, node) -> None:
            for entry in node.annotations.get("buffer_dim_align", ()):
                index, axis, factor, offset = (int(getattr(v, "value", v)) for v in entry)
                if index < len(node.writes):
                    aligns.setdefault(node.writes[index].buffer.data, {})[axis] = (factor, offset)
            self.generic_visit(node)

    V().visit(func.body)
    return aligns


def aligned_strides(shape: list, dims: dict) -> Optional[list]:
    """Strides (in elements) for a buffer of constant ``shape`` whose dimensions ``dims``
    (axis -> (factor, offset)) must have ``stride % factor == offset % factor``: built from the
    innermost dimension out, each aligned stride rounded up to the next such value, as TVM's
    buffer compaction does. None when the shape is not constant or nothing is padded."""
    if not all(isinstance(d, tir.IntImm) for d in shape):
        return None
    strides = [0] * len(shape)
    stride = 1
    for axis in reversed(range(len(shape))):
        if axis in dims:
            factor, offset = dims[axis]
            stride += (factor + offset - stride % factor) % factor
        strides[axis] = stride
        stride *= shape[axis].value
    row_major = [1] * len(shape)
    for axis in reversed(range(len(shape) - 1)):
        row_major[axis] = row_major[axis + 1] * shape[axis + 1].value
    return None if strides == row_major else strides


def compact_buffers(body: tir.Stmt, extents: dict, aligns: Optional[dict] = None) -> tir.Stmt:
    """Shrink each local/shared `Allocate` of a kernel to the box its accesses cover, relaxing
    the loops inside the allocation and, for shared memory, the thread indices (the block's
    threads share it); indices are rebased on the box's corner. A buffer named in ``aligns``
    (`collect_dim_aligns`) then gets the padded strides `aligned_strides` gives its new shape.

    Why: a cache declared with the shape of the whole tensor would not fit on chip; each
    thread (local) or block (shared) only ever touches a tile of it. The padding is computed
    here because it depends on the tile's shape, which only compaction knows."""
    aligns = aligns or {}
    thread_dom = {THREAD_VARS[t]: tir.Range(tir.IntImm("int32", 0), make_cast(e, "int32"))
                  for t, e in extents.items() if t.startswith("threadIdx")}
    ranges = {THREAD_VARS[t]: (tir.IntImm("int32", 0), make_cast(e, "int32")) for t, e in extents.items()}
    # Buffers also used through their data pointer (a tensor-core fragment or a shared tile
    # handed to an intrinsic): what that touches is not known here, so they keep the shape
    # they are declared with. (Fragments a schedule made are loads and stores until
    # `tensorize_wmma`, which runs after this, and shrink like local buffers: to one warp's.)
    opaque = _buffer_accesses(body).pointers

    class M(IRMutator):
        def visit_stmt(self, s):
            if isinstance(s, tir.For):  # the loops around an allocation bound what it depends on
                ranges[s.loop_var] = (s.min, s.extent)
            s = super().visit_stmt(s)
            if isinstance(s, Allocate) and s.buffer.scope in ON_CHIP_SCOPES and s.buffer.shape:
                dims = aligns.get(s.buffer.data)
                if s.buffer.data not in opaque:
                    s = _compact_one(s, thread_dom if is_shared(s.buffer) else {}, ranges)
                if dims:
                    s = _align_one(s, dims)
            return s

    return M().visit_stmt(body)


def _align_one(alloc: Allocate, dims: dict) -> Allocate:
    buf = alloc.buffer
    strides = aligned_strides(buf.shape, dims)
    if strides is None or buf.strides:
        return alloc
    dtype = buf.shape[0].dtype
    new = dataclasses.replace(buf, strides=[tir.IntImm(dtype, v) for v in strides])
    return Allocate(new, _rebind(alloc.body, buf, new), alloc.storage)


def _rebind(stmt, old: tir.Buffer, new: tir.Buffer, rebase=None):
    """``stmt`` with every load and store of ``old`` going to ``new``, indices mapped by
    ``rebase`` (a function of the index list) when given."""
    rebase = rebase or (lambda indices: indices)

    class R(IRMutator):
        def visit_expr(self, e):
            if isinstance(e, tir.BufferLoad) and e.buffer is old:
                return tir.BufferLoad(e.dtype, new, rebase([self.visit_expr(i) for i in e.indices]), e.span)
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore) and s.buffer is old:
                return tir.BufferStore(new, self.visit_expr(s.value), rebase([self.visit_expr(i) for i in s.indices]), s.span)
            return super().visit_stmt(s)

    return R().visit_stmt(stmt)


class _AccessCollector(TIRVisitor):
    """``(indices, loop domain)`` of every access to one buffer: the loops (Var -> Range)
    enclosing it inside the statement walked."""

    def __init__(self, buf) -> None:
        self.buf = buf
        self.dom: dict = {}
        self.found: list = []

    def visit_For(self, node) -> None:
        outer = self.dom
        self.dom = {**outer, node.loop_var: tir.Range(node.min, node.extent)}
        self.visit(node.body)
        self.dom = outer

    def visit_BufferLoad(self, node) -> None:
        if node.buffer is self.buf:
            self.found.append((node.indices, self.dom))
        self.generic_visit(node)

    visit_BufferStore = visit_BufferLoad


def _accesses(stmt, buf) -> list:
    c = _AccessCollector(buf)
    c.visit(stmt)
    return c.found


# int64 stand-ins for the thread indices: int64 index expressions hold ``int64(threadIdx.x)``,
# which the range analysis sees through only as a variable of its own.
_WIDE_THREAD_VARS = {tag: tir.Var("int64", tag) for tag in THREAD_TAGS}


def _widen_threads(e):
    class M(IRMutator):
        def visit_expr(self, x):
            if isinstance(x, tir.Cast) and x.dtype == "int64" and isinstance(x.value, tir.Var):
                for tag, var in THREAD_VARS.items():
                    if x.value is var:
                        return _WIDE_THREAD_VARS[tag]
            return super().visit_expr(x)

    return M().visit_expr(e)


def _narrow_threads(e):
    return substitute(e, {w: tir.Cast("int64", THREAD_VARS[t]) for t, w in _WIDE_THREAD_VARS.items()})


def _compact_one(alloc: Allocate, thread_dom: dict, ranges: dict) -> Allocate:
    buf = alloc.buffer
    accesses = [([_widen_threads(i) for i in idx], dom) for idx, dom in _accesses(alloc.body, buf)]
    if not accesses or buf.strides:
        return alloc
    thread_dom = {**thread_dom, **{_WIDE_THREAD_VARS[v.name]: tir.Range(tir.IntImm("int64", 0),
                                                                          make_cast(r.extent, "int64"))
                                   for v, r in thread_dom.items()}}
    ranges = {**ranges, **{_WIDE_THREAD_VARS[v.name]: (tir.IntImm("int64", 0), make_cast(r[1], "int64"))
                           for v, r in ranges.items() if v.name in _WIDE_THREAD_VARS and v in THREAD_VARS.values()}}
    ndim = len(buf.shape)
    lows: list = [None] * ndim
    highs: list = [None] * ndim
    c = Canonical(dict(ranges))
    for indices, dom in accesses:
        dom = {**thread_dom, **dom}
        for d, idx in enumerate(indices):
            if lows[d] is False:
                continue
            r = eval_range(idx, dom, ranges)
            if r is None:
                lows[d] = False
                continue
            lo, ext = r
            hi = c.simplify(tir.Add(lo.dtype, lo, make_cast(ext, lo.dtype)))
            if lows[d] is None:
                lows[d], highs[d] = lo, hi
                continue
            lows[d] = _merge(lows[d], lo, c, ranges, lower=True)
            highs[d] = _merge(highs[d], hi, c, ranges, lower=False) if lows[d] is not None else None
            if lows[d] is None or highs[d] is None:
                lows[d] = False
    new_shape, offsets = [], []
    changed = False
    for d in range(ndim):
        old = buf.shape[d]
        if lows[d] in (None, False) or highs[d] is None:
            new_shape.append(old)
            offsets.append(None)
            continue
        ext = c.simplify(tir.Sub(lows[d].dtype, highs[d], lows[d]))
        if not isinstance(ext, tir.IntImm):
            hi = const_int_bound(ext, ranges)[1]
            ext = tir.IntImm(lows[d].dtype, hi) if isinstance(hi, int) and hi < 2**31 else None
        if ext is None or (isinstance(old, tir.IntImm) and ext.value >= old.value):
            new_shape.append(old)
            offsets.append(None)
            continue
        new_shape.append(tir.IntImm(old.dtype if isinstance(old, tir.PrimExpr) else "int32", max(ext.value, 1)))
        offsets.append(_narrow_threads(lows[d]))
        changed = True
    if not changed:
        return alloc
    new = tir.Buffer(buf.name, new_shape, buf.dtype, data=tir.Var("handle", buf.name), scope=buf.scope,
                     align=buf.align)

    def rebase(indices):
        out = []
        for i, off in zip(indices, offsets):
            out.append(i if off is None else c.simplify(tir.Sub(i.dtype, i, make_cast(off, i.dtype))))
        return out

    return Allocate(new, _rebind(alloc.body, buf, new, rebase), alloc.storage)


def _merge(a, b, c: Canonical, ranges: dict, lower: bool):
    """The smaller (``lower``) or larger of two bounds when their difference is a constant
    (given the ranges of the variables around); None otherwise."""
    d = c.simplify(tir.Sub(a.dtype, a, make_cast(b, a.dtype)))
    if not isinstance(d, tir.IntImm):
        lo, hi = const_int_bound(d, ranges)
        if lo != hi or not isinstance(lo, int):
            return None
        d = tir.IntImm(a.dtype, lo)
    if lower:
        return b if d.value > 0 else a
    return b if d.value < 0 else a


# ----------------------------------------------------------------------------- 7. barriers


@dataclass
class _Summary:
    """Shared buffers a statement touches: before its first barrier (``head_*``), after its
    last one (``tail_*``), and whether it contains a barrier at all."""

    head_r: set
    head_w: set
    tail_r: set
    tail_w: set
    synced: bool


def _sync():
    return tir.Evaluate(tir.Call("int32", SYNC_OP, [tir.StringImm("handle", "shared")]))


def _is_sync(s) -> bool:
    return isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call) and s.value.op in THREAD_SYNC_OPS


def pointer_targets(body) -> set:
    """The data variables ``body`` reads or writes through ``tvm_access_ptr``."""
    v = _buffer_accesses(body)
    return v.pointer_reads | v.pointer_writes


def _shared_rw(node, shared: frozenset) -> tuple:
    """The data variables of the shared buffers ``node`` reads and writes: by loads and
    stores, and through pointers (``tvm_access_ptr``, as the tensor-core loads and stores take
    them) to one of ``shared``."""
    v = _buffer_accesses(node)
    return ({b.data for b in v.loaded if is_shared(b)} | (v.pointer_reads & shared),
            {b.data for b in v.stored if is_shared(b)} | (v.pointer_writes & shared))


class _SharedAllocations(TIRVisitor):
    def __init__(self) -> None:
        self.found: set = set()

    def visit_Allocate(self, node) -> None:
        if is_shared(node.buffer):
            self.found.add(node.buffer.data)
        self.generic_visit(node)


def inject_thread_sync(body: tir.Stmt) -> tir.Stmt:
    """Insert ``__syncthreads()`` (``T.tvm_storage_sync("shared")``) between a write of a
    shared buffer and a later read of it (RAW), a read and a later write (WAR), including
    across iterations of a loop (the next iteration's writes against this one's reads).
    Two writes need none: a schedule never has two threads write one element.

    Why: the threads of a block share shared memory but run at their own pace; a cooperative
    fetch must finish before any thread computes with the tile, and the compute must finish
    before the next fetch overwrites it. Accesses by the same statement are one thread's own
    (a thread reading what it wrote itself needs no barrier)."""
    allocations = _SharedAllocations()
    allocations.visit(body)
    out, _ = _sync_stmt(body, frozenset(allocations.found))
    return out


def _sync_stmt(s, shared: frozenset) -> tuple:
    if isinstance(s, tir.SeqStmt):
        return _sync_seq(list(s.seq), shared)
    if isinstance(s, tir.For):
        body, summ = _sync_stmt(s.body, shared)
        if summ.synced or _loop_carried(summ):
            if _loop_carried(summ):
                body = tir.seq([body, _sync()]) if not isinstance(body, tir.SeqStmt) else tir.seq(list(body.seq) + [_sync()])
                summ = _Summary(summ.head_r, summ.head_w, set(), set(), True)
            return dataclasses.replace(s, body=body), summ
        return s, summ
    if isinstance(s, (tir.LetStmt, Allocate)):
        body, summ = _sync_stmt(s.body, shared)
        if body is s.body:
            return s, summ
        if isinstance(s, tir.LetStmt):
            return tir.LetStmt(s.var, s.value, body), summ
        return Allocate(s.buffer, body, s.storage), summ
    if isinstance(s, tir.IfThenElse) and s.else_case is None:
        body, summ = _sync_stmt(s.then_case, shared)
        if summ.synced:
            return tir.IfThenElse(s.condition, body), summ
        return s, summ
    if _is_sync(s):
        return s, _Summary(set(), set(), set(), set(), True)
    r, w = _shared_rw(s, shared)
    return s, _Summary(r, w, set(r), set(w), False)


def _loop_carried(summ: _Summary) -> bool:
    """Whether the next iteration's first accesses conflict with this iteration's last."""
    return bool((summ.tail_w & summ.head_r) or (summ.tail_r & summ.head_w))


def _sync_seq(items: list, shared: frozenset) -> tuple:
    out = []
    pend_r: set = set()
    pend_w: set = set()
    head_r: Optional[set] = None
    head_w: Optional[set] = None
    synced = False
    acc_r: set = set()
    acc_w: set = set()
    for item in items:
        new, summ = _sync_stmt(item, shared)
        if (summ.head_r & pend_w) or (summ.head_w & pend_r):
            out.append(_sync())
            if not synced:
                head_r, head_w = set(acc_r), set(acc_w)
            synced = True
            pend_r, pend_w = set(), set()
        out.append(new)
        if summ.synced:
            if not synced:
                head_r, head_w = acc_r | summ.head_r, acc_w | summ.head_w
            synced = True
            pend_r, pend_w = set(summ.tail_r), set(summ.tail_w)
        else:
            pend_r |= summ.head_r
            pend_w |= summ.head_w
        acc_r |= summ.head_r
        acc_w |= summ.head_w
    if not synced:
        return tir.seq(out) if len(out) != 1 else out[0], _Summary(acc_r, acc_w, set(acc_r), set(acc_w), False)
    return tir.seq(out), _Summary(head_r, head_w, pend_r, pend_w, True)


# ----------------------------------------------------------------------------- 8. index widths


_INDEX_OPS = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Min, tir.Max, tir.Div, tir.Mod)
_INT32_MAX = 2**31 - 1


def narrow_indices(body: tir.Stmt, extents: dict) -> tir.Stmt:
    """Compute int64 index arithmetic in int32 wherever every value it takes provably fits:
    loop variables with constant bounds become int32, and buffer indices, loop bounds and
    conditions over them are rewritten in int32.

    Why: Relax writes shapes as ``T.int64``, so legalized kernels index in 64 bits, and 64-bit
    integer multiplies and divides cost GPUs several instructions each; TVM narrows the same
    way. Indices that involve a symbolic dimension (unbounded here) or data stay int64."""
    ranges = {THREAD_VARS[t]: (0, e.value) for t, e in extents.items() if isinstance(e, tir.IntImm)}
    retyped: dict = {}   # int64 loop var -> int32 var

    def fits(e) -> bool:
        lo, hi = const_int_bound(e, ranges)
        return isinstance(lo, int) and isinstance(hi, int) and -_INT32_MAX - 1 <= lo and hi <= _INT32_MAX

    def narrow(e):
        """``e`` (an int64 index expression) in int32, or None if it cannot be."""
        if isinstance(e, tir.IntImm):
            return tir.IntImm("int32", e.value) if -_INT32_MAX - 1 <= e.value <= _INT32_MAX else None
        if isinstance(e, tir.Var):
            return retyped.get(e)
        if isinstance(e, tir.Cast) and tir.is_int(e.value.dtype) and e.value.dtype != "int64":
            # An int32 value widened (``T.Cast("int64", idx[k])``): the value itself, its own
            # indices rewritten too (their loop variables may be retyped).
            return mutator.visit_expr(e.value) if e.value.dtype == "int32" else None
        if isinstance(e, _INDEX_OPS):
            a, b = narrow(e.a), narrow(e.b)
            if a is None or b is None:
                return None
            out = type(e)("int32", a, b)
            return out if fits(out) else None
        return None

    class M(IRMutator):
        def index(self, e):
            """An index: narrowed when it can be, else with retyped variables cast back."""
            if e.dtype == "int64":
                n = narrow(e)
                if n is not None:
                    return n
            return self.visit_expr(e)

        def visit_expr(self, e):
            if isinstance(e, tir.Var) and e in retyped:
                return tir.Cast("int64", retyped[e])
            if isinstance(e, tir.BufferLoad):
                return tir.BufferLoad(e.dtype, e.buffer, [self.index(i) for i in e.indices], e.span)
            if isinstance(e, _COMPARE_OPS) and e.a.dtype == "int64":
                a, b = narrow(e.a), narrow(e.b)
                if a is not None and b is not None:
                    return type(e)("bool", a, b)
            return super().visit_expr(e)

        def visit_stmt(self, s):
            if isinstance(s, tir.BufferStore):
                return tir.BufferStore(s.buffer, self.visit_expr(s.value), [self.index(i) for i in s.indices], s.span)
            if isinstance(s, tir.For) and s.loop_var.dtype == "int64":
                lo, ext = narrow(s.min), narrow(s.extent)
                if isinstance(lo, tir.IntImm) and isinstance(ext, tir.IntImm) and lo.value + ext.value <= _INT32_MAX:
                    var = tir.Var("int32", s.loop_var.name)
                    retyped[s.loop_var] = var
                    ranges[var] = (lo.value, ext.value)
                    return dataclasses.replace(s, loop_var=var, min=lo, extent=ext, body=self.visit_stmt(s.body))
            if isinstance(s, tir.For) and isinstance(s.min, tir.IntImm) and isinstance(s.extent, tir.IntImm):
                ranges[s.loop_var] = (s.min.value, s.extent.value)
            return super().visit_stmt(s)

    mutator = M()
    return mutator.visit_stmt(body)


_COMPARE_OPS = (tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE)
