"""Does GPU-scheduled TensorIR fit the GPU? ``tvms.tir.analysis.verify_gpu_code``.

`gpu_code_errors(func, target)` walks a scheduled `tir.PrimFunc` (blocks and all, before any
lowering) and returns one message per problem, each naming the function, the block or the
kernel, and the limit. It judges the function as TVM's VerifyGPUCode judges it after TVM's
lowering (CompactBufferAllocation and the passes before it), without lowering it:

(a) every store runs on threads: it is nested in a ``blockIdx.*`` loop and in a
    ``threadIdx.*`` loop, or it is in a kernel (under ``blockIdx.*``) that binds
    ``threadIdx.*`` elsewhere: a store between the ``blockIdx`` and the ``threadIdx`` loops,
    as TVM's Reduction rule writes its epilogue, is run by every thread of the block, which
    TVM accepts. Reported: a store under no ``blockIdx.*`` loop (under no thread-bound loop
    at all, or under ``threadIdx`` alone; a function with no thread bindings has every block
    "not bound to threads"), and the stores of a kernel that binds no ``threadIdx.*``
    anywhere — TVM would launch it with one thread per block, which is legal but never what
    a GPU schedule means;
(b) per kernel launch — an outermost thread-bound loop and everything in it — the extents of
    ``threadIdx.x``, ``.y``, ``.z`` multiply to at most ``max_threads_per_block``, each is
    within ``max_thread_x``/``_y``/``_z``, one thread tag is not bound with two different
    extents (a cooperative fetch binds ``threadIdx.x`` again inside the thread loops: with the
    same extent that is the same thread, with another it is a bug), and the ``vthread``
    extents multiply to at most ``max_vthread``;
(c) the "shared" (and "shared.dyn") buffers a kernel allocates or uses add up to at most
    ``max_shared_memory_per_block`` bytes, and the "local" ones to at most
    ``max_local_memory_per_block`` bytes per thread.

Sizes in (c) are what TVM's CompactBufferAllocation shrinks each block-allocated buffer to,
not its declared shape: a schedule leaves cache buffers (``A_shared``, ``C_local``) at the
function's root with the whole tensor's shape, and a kernel only touches a tile of them. Per
kernel, every load, store and ``T.match_buffer`` source region of the buffer is mapped through
the block bindings and relaxed over the loops below the lowest loop common to all of them (where
TVM places the allocation): a shared buffer also over the ``threadIdx``/``vthread`` loops (one
thread block holds it), a local one over no thread-bound loop (one thread holds it); the
``blockIdx`` variables stay fixed. Loops bound to one thread tag are one index. Per dimension
the hull of the relaxed regions is the size when the extents and the offsets between them are
constants; otherwise an upper bound from `const_int_bound`, at most the declared extent; a
dimension with neither is the declared extent, and a shared buffer whose size is still not a
constant is reported (``"shared.dyn"`` is for that). A message names a tile that is smaller
than its buffer (``'A_shared' 16384 (its 32x128 tile)``); the padding a ``buffer_dim_align``
annotation adds to a row is not counted. Extents that are not constants (a
symbolic ``blockIdx`` extent is common) are not checked, as in TVM.

Limits come from a `tvms.target.Target` (the current one, else ``"cuda"``: an H100, 1024
threads per block, 48 KiB of shared memory; whatever the target, ``max_thread_x``/``_y`` 1024
and ``max_thread_z`` 64 as on every CUDA GPU, ``max_vthread`` 8 as TVM's meta-schedule checks,
and 512 KiB of local memory per thread, CUDA's ceiling) or, as in TVM, from a dict of constraints
(``max_threads_per_block``, ``max_shared_memory_per_block``, ``max_local_memory_per_block``,
``max_thread_x``/``_y``/``_z``, ``max_vthread``, ``max_vector_bytes``, ``max_kernels``), of
which only the ones given are checked. `verify_gpu_code(func, target_or_constraints)` is TVM's
``tvm.tir.analysis.verify_gpu_code``: True when the function passes.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from tvmscript.ir.arith import NEG_INF, POS_INF, const_int_bound, expr_key, relax_region, simplify
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import const_int

from .lower_tir import dtype_bytes
__all__ = ["verify_gpu_code", "gpu_code_errors", "constraints_of", "CONSTRAINT_NAMES"]

CONSTRAINT_NAMES = (
    "max_threads_per_block", "max_shared_memory_per_block", "max_local_memory_per_block",
    "max_thread_x", "max_thread_y", "max_thread_z", "max_vthread", "max_vector_bytes", "max_kernels",
)

# Limits no target attribute gives, CUDA's on every architecture since Kepler (blockDim.z is at
# most 64; a thread has at most 512 KiB of local memory); max_vthread is what TVM's
# meta-schedule checks.
_MAX_THREAD_XY = 1024
_MAX_THREAD_Z = 64
_MAX_VTHREAD = 8
_MAX_LOCAL_BYTES_PER_THREAD = 512 * 1024

_SHARED_SCOPES = ("shared", "shared.dyn")
_LOCAL_SCOPES = ("local",)


def constraints_of(target=None) -> dict:
    """The limits `gpu_code_errors` checks for ``target`` (a `Target`, a target string or
    dict; None: the current target, else ``"cuda"``)."""
    from tvmscript.target import Target

    if target is None:
        target = Target.current() or Target("cuda")
    elif not isinstance(target, Target):
        target = Target(target)
    if "gpu" not in target.keys or target.max_threads_per_block is None:
        raise ValueError(f"verify_gpu_code needs a GPU target, not '{target.kind.name}'")
    per_block = target.max_threads_per_block
    return {
        "max_threads_per_block": per_block,
        "max_shared_memory_per_block": target.max_shared_memory_per_block,
        "max_local_memory_per_block": _MAX_LOCAL_BYTES_PER_THREAD,
        "max_thread_x": _MAX_THREAD_XY,
        "max_thread_y": _MAX_THREAD_XY,
        "max_thread_z": _MAX_THREAD_Z,
        "max_vthread": _MAX_VTHREAD,
    }


def _constraints(target_or_constraints) -> dict:
    if isinstance(target_or_constraints, dict) and "kind" not in target_or_constraints and "tag" not in target_or_constraints:
        unknown = sorted(set(target_or_constraints) - set(CONSTRAINT_NAMES))
        if unknown:
            raise ValueError(f"verify_gpu_code: unknown constraint {unknown[0]!r}; the constraints are "
                             f"{', '.join(CONSTRAINT_NAMES)}")
        out = {}
        for key, value in target_or_constraints.items():
            value = getattr(value, "value", value)  # an IntImm, as TVM's tests pass them
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"verify_gpu_code: constraint {key!r} must be an integer, not {value!r}")
            out[key] = value
        return out
    return constraints_of(target_or_constraints)


def gpu_code_errors(func, target=None, name: Optional[str] = None) -> list:
    """Every way ``func`` breaks the limits of ``target`` (a `Target`, a target string, a
    dict of constraints, or None for the current target / ``"cuda"``), as messages; empty
    when it fits. ``func`` may be an IRModule: each PrimFunc is checked."""
    limits = _constraints(target)
    if hasattr(func, "functions") and not isinstance(func, tir.PrimFunc):  # an IRModule
        errors = []
        for gv, f in func.functions.items():
            if isinstance(f, tir.PrimFunc):
                errors += _Checker(gv.name_hint, limits).run(f)
        return errors
    if not isinstance(func, tir.PrimFunc):
        raise TypeError(f"verify_gpu_code expects a tir.PrimFunc, not {type(func).__name__}")
    if name is None:
        name = func.attrs.get("global_symbol") or "main"
    return _Checker(str(name), limits).run(func)


def verify_gpu_code(func, target=None) -> bool:
    """TVM's ``tvm.tir.analysis.verify_gpu_code``: True when ``func`` fits ``target`` (a
    `Target`, a target string or dict, None for the current target, or TVM's dict of
    constraints). `gpu_code_errors` says why not."""
    return not gpu_code_errors(func, target)


# ----------------------------------------------------------------------------- the walk


class _Kernel:
    def __init__(self, loop: tir.For) -> None:
        self.loop = loop
        self.extents: dict = {}  # thread tag -> [(extent, loop var name)]
        self.allocs: dict = {}  # data var or buffer -> Buffer allocated inside the kernel
        self.used: dict = {}  # data var or buffer -> Buffer loaded or stored inside it
        self.blocks: list = []  # names of the blocks in it, in order
        # data var or buffer -> [(region, loops)] for the shared and local buffers: region a
        # list of (min, extent) in the loop variables, loops the enclosing _Loops in the kernel
        self.accesses: dict = {}
        self.tag_vars: dict = {}  # (thread tag, dtype) -> the one Var its loops stand for
        self.no_threads: list = []  # stores under blockIdx but outside every threadIdx loop

    def tag_var(self, loop: tir.For) -> tir.Var:
        key = (loop.thread_tag, loop.loop_var.dtype)
        if key not in self.tag_vars:
            self.tag_vars[key] = tir.Var(loop.loop_var.dtype, loop.thread_tag)
        return self.tag_vars[key]

    def label(self) -> str:
        where = f"kernel at loop '{self.loop.loop_var.name}' ({self.loop.thread_tag})"
        if not self.blocks:
            return where
        names = ", ".join(f"'{b}'" for b in self.blocks[:4]) + (", ..." if len(self.blocks) > 4 else "")
        return f"{where} with block{'s' if len(self.blocks) > 1 else ''} {names}"


class _Loop:
    """A loop of a kernel as the accesses below it see it: ``var`` is the loop variable, or
    the thread tag's Var for a thread-bound loop; ``min``/``extent`` in the same terms."""

    __slots__ = ("loop", "var", "min", "extent", "tag")

    def __init__(self, loop, var, mn, extent) -> None:
        self.loop, self.var, self.min, self.extent = loop, var, mn, extent
        self.tag = loop.thread_tag if loop.kind == "thread_binding" else None


def _key(buf: tir.Buffer):
    return buf.data if buf.data is not None else buf


def _scalar_int(e) -> bool:
    dtype = getattr(e, "dtype", "")
    return isinstance(dtype, str) and dtype.startswith(("int", "uint")) and "x" not in dtype


def _tile_shape(buf: tir.Buffer, uses: list) -> list:
    """The extents, per dimension, of the part of ``buf`` one thread block ("shared") or one
    thread ("local") touches through ``uses`` (its accesses in one kernel), as TVM's
    CompactBufferAllocation shrinks it; None for a dimension of unknown size."""
    declared = [const_int(d) for d in buf.shape]
    if any(len(region) != len(declared) or not all(_scalar_int(mn) and _scalar_int(ext) for mn, ext in region)
           for region, _ in uses):
        return declared  # a vector index or a flat view: the declared shape
    local = buf.scope not in _SHARED_SCOPES
    first = uses[0][1]
    common = 0  # the loops all accesses are in: TVM allocates the buffer inside them
    while common < len(first) and all(len(lp) > common and lp[common].loop is first[common].loop for _, lp in uses):
        common += 1
    relaxed = []  # per use: [(min, extent) or None per dimension]
    ranges: dict = {}  # every loop variable -> (min, extent), for bounds and simplification
    for region, loops in uses:
        dom, fixed = {}, {}
        for n, lp in enumerate(loops):
            # blockIdx stays fixed (one block at a time), and for a local buffer every
            # thread-bound index (one thread); shared memory spans the threads of the block
            if lp.tag is not None:
                relax = not (lp.tag.startswith("blockIdx") or local)
            else:
                relax = n >= common
            (dom if relax else fixed).setdefault(lp.var, (lp.min, lp.extent))
            ranges.setdefault(lp.var, (lp.min, lp.extent))
        dom_r = {v: tir.Range(mn, ext) for v, (mn, ext) in dom.items()}
        out = []
        for mn, ext in region:
            r = relax_region([tir.Range(mn, ext)], dom_r, fixed)
            out.append((r[0].min, r[0].extent) if r else None)
        relaxed.append(out)
    shape = []
    for d in range(len(declared)):
        rs = [r[d] for r in relaxed]
        size = None
        if all(r is not None for r in rs):
            size = _hull(rs, ranges)
        if size is None:  # not relaxable: bound the indices over every loop of the kernel
            lo = hi = None
            for region, _ in uses:
                mn, ext = region[d]
                b_lo = const_int_bound(mn, ranges)[0]
                b_hi = const_int_bound(tir.Add(mn.dtype, mn, tir.Sub(mn.dtype, ext, tir.IntImm(mn.dtype, 1))), ranges)[1]
                lo = b_lo if lo is None else min(lo, b_lo)
                hi = b_hi if hi is None else max(hi, b_hi)
            if lo is not None and lo != NEG_INF and hi != POS_INF:
                size = max(0, int(hi - lo + 1))
        if declared[d] is not None:
            size = declared[d] if size is None else min(size, declared[d])
        shape.append(size)
    return shape


def _hull(rs: list, ranges: dict) -> Optional[int]:
    """Extent of the union of the ``(min, extent)`` ranges ``rs``: exact when the extents and
    the offsets between the mins are constants, else an upper bound (None if unbounded)."""
    base = rs[0][0]
    lo, hi = 0, None
    for mn, ext in rs:
        e = const_int(ext)
        off = 0 if mn is base or expr_key(mn) == expr_key(base) else const_int(simplify(tir.Sub(mn.dtype, mn, base), ranges))
        if e is None or off is None:
            break
        lo, hi = min(lo, off), (off + e if hi is None else max(hi, off + e))
    else:
        return hi - lo
    best = 0
    for mn_a, ext_a in rs:  # the last element of one range minus the first of another
        last = tir.Add(mn_a.dtype, mn_a, tir.Sub(mn_a.dtype, ext_a, tir.IntImm(mn_a.dtype, 1)))
        for mn_b, _ in rs:
            b = const_int_bound(simplify(tir.Sub(mn_a.dtype, last, mn_b), ranges), ranges)[1]
            if b == POS_INF:
                return None
            best = max(best, int(b) + 1)
    return best


class _Loads(TIRVisitor):
    def __init__(self, checker: "_Checker") -> None:
        self.checker = checker

    def visit_BufferLoad(self, e) -> None:
        self.checker.use(e.buffer, [(i, None) for i in e.indices])
        self.generic_visit(e)


class _Checker:
    def __init__(self, fname: str, limits: dict) -> None:
        self.fname = fname
        self.limits = limits
        self.errors: list = []
        self.kernel: Optional[_Kernel] = None
        self.kernels = 0
        self.tags: list = []  # thread tags of the enclosing bound loops
        self.block: Optional[str] = None  # the enclosing block (None: the function's root)
        self.unbound: set = set()  # blocks already reported as not bound to threads
        self.outside: dict = {}  # buffers allocated outside every kernel
        self.vector_loops: list = []  # enclosing vectorized loops with a constant extent
        self.loops: list = []  # the enclosing loops inside the current kernel, as _Loop
        self.mapping: dict = {}  # block iterators, let and thread loop variables -> their values
        self.loads = _Loads(self)

    def run(self, func: tir.PrimFunc) -> list:
        body = func.body
        if isinstance(body, tir.BlockRealize) and not body.block.iter_vars and body.block.name == "root":
            for buf in body.block.alloc_buffers:
                self.outside[_key(buf)] = buf
            body = body.block.body
        self.stmt(body)
        limit = self.limits.get("max_kernels")
        if limit is not None and self.kernels > limit:
            self.errors.append(f"{self.fname}: {self.kernels} kernel launch{'es' if self.kernels != 1 else ''} "
                               f"exceed{'s' if self.kernels == 1 else ''} max_kernels = {limit}")
        return self.errors

    # ---- expressions and buffers
    def expr(self, e) -> None:
        if e is not None:
            self.loads.visit(e)

    def use(self, buf: tir.Buffer, region: Optional[list] = None) -> None:
        """``buf`` is accessed at ``region`` (per dimension (min, extent); extent None: 1), in
        the terms of the enclosing block."""
        if self.kernel is not None:
            key = _key(buf)
            self.kernel.used.setdefault(key, buf)
            if region is not None and buf.scope in _SHARED_SCOPES + _LOCAL_SCOPES:
                sub = [(substitute(mn, self.mapping),
                        substitute(ext, self.mapping) if ext is not None else tir.IntImm(mn.dtype, 1))
                       for mn, ext in region]
                self.kernel.accesses.setdefault(key, []).append((sub, tuple(self.loops)))
        limit = self.limits.get("max_vector_bytes")
        if limit is not None:
            for loop in self.vector_loops:
                nbytes = loop.extent.value * dtype_bytes(buf.dtype)
                if nbytes > limit:
                    self.errors.append(
                        f"{self.fname}: {self._where()}: the vectorized loop '{loop.loop_var.name}' accesses "
                        f"'{buf.name}' {nbytes} bytes at a time, more than max_vector_bytes = {limit}")

    def _where(self) -> str:
        return f"block '{self.block}'" if self.block is not None else "the function body"

    # ---- statements
    def stmt(self, s) -> None:
        if isinstance(s, tir.BufferStore):
            self.store(s)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, tir.For):
            self.loop(s)
        elif isinstance(s, tir.BlockRealize):
            for v in s.iter_values:
                self.expr(v)
            self.expr(s.predicate)
            outer = self.mapping
            self.mapping = dict(outer)
            for iv, v in zip(s.block.iter_vars, s.iter_values):
                self.mapping[iv.var] = substitute(v, outer)
            self.block_(s.block)
            self.mapping = outer
        elif isinstance(s, tir.Block):
            self.block_(s)
        elif isinstance(s, tir.IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, tir.LetStmt):
            self.expr(s.value)
            outer = self.mapping
            self.mapping = {**outer, s.var: substitute(s.value, outer)}
            self.stmt(s.body)
            self.mapping = outer
        elif isinstance(s, (tir.AssertStmt, tir.While)):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.Evaluate):
            self.expr(s.value)

    def store(self, s: tir.BufferStore) -> None:
        self.use(s.buffer, [(i, None) for i in s.indices])
        self.expr(s.value)
        for i in s.indices:
            self.expr(i)
        blocks = any(t.startswith("blockIdx.") for t in self.tags)
        threads = any(t.startswith("threadIdx.") for t in self.tags)
        if blocks and threads:
            return
        what = f"block '{self.block}'" if self.block is not None else f"the store to '{s.buffer.name}'"
        if blocks:
            # Every thread of the block runs it (an epilogue): fine if the kernel has threads.
            if what not in self.kernel.no_threads:
                self.kernel.no_threads.append(what)
            return
        if not threads:
            why = "it runs inside no blockIdx.* and no threadIdx.* loop"
        else:
            why = "it runs inside no blockIdx.* loop"
        self.unbind(what, why)

    def unbind(self, what: str, why: str) -> None:
        if what in self.unbound:
            return
        self.unbound.add(what)
        self.errors.append(f"{self.fname}: {what} is not bound to threads: {why}")

    def block_(self, block: tir.Block) -> None:
        outer = self.block
        self.block = block.name
        if self.kernel is not None and block.name not in self.kernel.blocks:
            self.kernel.blocks.append(block.name)
        for buf in block.alloc_buffers:
            if self.kernel is not None:
                self.kernel.allocs[_key(buf)] = buf
            else:
                self.outside[_key(buf)] = buf
        for mb in block.match_buffers:
            self.use(mb.source.buffer, [(r.min, r.extent) for r in mb.source.region])
        if block.init is not None:
            self.stmt(block.init)
        self.stmt(block.body)
        self.block = outer

    def loop(self, s: tir.For) -> None:
        self.expr(s.min)
        self.expr(s.extent)
        vector = s.kind == "vectorized" and isinstance(s.extent, tir.IntImm)
        if vector:
            self.vector_loops.append(s)
        starts = s.kind == "thread_binding" and self.kernel is None
        if starts:
            self.kernel = _Kernel(s)
            self.kernels += 1
        outer = self.mapping
        if self.kernel is not None:
            var = s.loop_var
            if s.kind == "thread_binding":
                var = self.kernel.tag_var(s)
                self.mapping = {**outer, s.loop_var: var}
            self.loops.append(_Loop(s, var, substitute(s.min, outer), substitute(s.extent, outer)))
        if s.kind != "thread_binding":
            self.stmt(s.body)
        else:
            self.kernel.extents.setdefault(s.thread_tag, []).append((s.extent, s.loop_var.name))
            self.tags.append(s.thread_tag)
            self.stmt(s.body)
            self.tags.pop()
        if self.kernel is not None:
            self.loops.pop()
        self.mapping = outer
        if starts:
            self.finish(self.kernel)
            self.kernel = None
        if vector:
            self.vector_loops.pop()

    # ---- per kernel
    def finish(self, k: _Kernel) -> None:
        where = f"{self.fname}: {k.label()}"
        lim = self.limits
        if not any(tag.startswith("threadIdx.") for tag in k.extents):
            for what in k.no_threads:
                self.unbind(what, "it runs inside no threadIdx.* loop, and its kernel binds none (TVM would "
                                  "launch it with one thread per block)")
        extent_of: dict = {}
        for tag, seen in k.extents.items():
            consts = [(e.value, v) for e, v in seen if isinstance(e, tir.IntImm)]
            values = sorted({c for c, _ in consts})
            if len(values) > 1:
                loops = ", ".join(f"{c} at loop '{v}'" for c, v in consts)
                self.errors.append(f"{where}: {tag} is bound with different extents ({loops}); "
                                   "a thread tag has one extent per kernel")
            if values:
                extent_of[tag] = values[-1]
        threads = 1
        parts = []
        for axis in "xyz":
            tag = f"threadIdx.{axis}"
            if tag not in extent_of:
                continue
            n = extent_of[tag]
            threads *= n
            parts.append(f"{tag} {n}")
            limit = lim.get(f"max_thread_{axis}")
            if limit is not None and n > limit:
                self.errors.append(f"{where}: {tag} has extent {n}, more than max_thread_{axis} = {limit}")
        limit = lim.get("max_threads_per_block")
        if limit is not None and threads > limit:
            self.errors.append(f"{where}: {threads} threads per block ({' x '.join(parts)}) exceed "
                               f"max_threads_per_block = {limit}")
        vthreads = 1
        for tag, n in extent_of.items():
            if tag.startswith("vthread"):
                vthreads *= n
        limit = lim.get("max_vthread")
        if limit is not None and vthreads > limit:
            self.errors.append(f"{where}: {vthreads} virtual threads exceed max_vthread = {limit}")
        # Memory: the buffers allocated in the kernel and those allocated outside it that it uses.
        buffers = dict(k.allocs)
        for key, buf in k.used.items():
            if key in self.outside:
                buffers.setdefault(key, self.outside[key])
        self.memory(where, k, buffers, _SHARED_SCOPES, "shared memory", "max_shared_memory_per_block")
        self.memory(where, k, buffers, _LOCAL_SCOPES, "local memory per thread", "max_local_memory_per_block")

    def memory(self, where: str, k: _Kernel, buffers: dict, scopes: tuple, what: str, key: str) -> None:
        limit = self.limits.get(key)
        total, parts = 0, []
        for bkey, buf in buffers.items():
            if buf.scope not in scopes:
                continue
            uses = _dedup(k.accesses.get(bkey, ()))
            shape = _tile_shape(buf, uses) if uses else [const_int(d) for d in buf.shape]
            if any(n is None for n in shape):
                if buf.scope == "shared":
                    self.errors.append(f"{where}: shared buffer '{buf.name}' has a size that is not a constant "
                                       "(use scope \"shared.dyn\" for dynamic shared memory)")
                continue
            nbytes = dtype_bytes(buf.dtype)
            for n in shape:
                nbytes *= n
            total += nbytes
            if shape == [const_int(d) for d in buf.shape]:
                parts.append(f"'{buf.name}' {nbytes}")
            else:
                parts.append(f"'{buf.name}' {nbytes} (its {'x'.join(map(str, shape)) or 'scalar'} tile)")
        if limit is not None and total > limit:
            self.errors.append(f"{where}: {total} bytes of {what} ({', '.join(parts)}) exceed {key} = {limit}")


def _dedup(uses) -> list:
    out, seen = [], set()
    for region, loops in uses:
        k = (tuple((expr_key(mn), expr_key(ext)) for mn, ext in region), tuple(id(lp.loop) for lp in loops))
        if k not in seen:
            seen.add(k)
            out.append((region, loops))
    return out
