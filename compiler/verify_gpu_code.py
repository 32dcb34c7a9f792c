"""Does GPU-scheduled TensorIR fit the GPU? ``tvms.tir.analysis.verify_gpu_code``.

`gpu_code_errors(func, target)` walks a scheduled `tir.PrimFunc` (blocks and all, before any
lowering) and returns one message per problem, each naming the function, the block or the
kernel, and the limit:

(a) every store runs on threads: it is nested in at least one ``blockIdx.*`` and one
    ``threadIdx.*`` loop (a function with no thread bindings at all has every block "not
    bound to threads");
(b) per kernel launch — an outermost thread-bound loop and everything in it — the extents of
    ``threadIdx.x``, ``.y``, ``.z`` multiply to at most ``max_threads_per_block``, each is
    within ``max_thread_x``/``_y``/``_z``, one thread tag is not bound with two different
    extents (a cooperative fetch binds ``threadIdx.x`` again inside the thread loops: with the
    same extent that is the same thread, with another it is a bug), and the ``vthread``
    extents multiply to at most ``max_vthread``;
(c) the "shared" (and "shared.dyn") buffers a kernel allocates or uses add up to at most
    ``max_shared_memory_per_block`` bytes, and the "local" ones to at most
    ``max_local_memory_per_block`` bytes per thread.

Sizes are the buffers' declared ones: a buffer declared at the root with its full shape (as a
schedule leaves it before TVM's CompactBufferAllocation shrinks it to the tile a kernel
touches) counts whole, so a kernel can be refused here that TVM, checking after that pass,
would accept. Extents that are not constants (a symbolic ``blockIdx`` extent is common) are
not checked, as in TVM.

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

from tvmscript import tir
from tvmscript.tir_visitor import TIRVisitor

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

    def label(self) -> str:
        where = f"kernel at loop '{self.loop.loop_var.name}' ({self.loop.thread_tag})"
        if not self.blocks:
            return where
        names = ", ".join(f"'{b}'" for b in self.blocks[:4]) + (", ..." if len(self.blocks) > 4 else "")
        return f"{where} with block{'s' if len(self.blocks) > 1 else ''} {names}"


def _key(buf: tir.Buffer):
    return buf.data if buf.data is not None else buf


def _dtype_bytes(dtype: str) -> int:
    base, sep, lanes = dtype.rpartition("x")
    lanes_n = int(lanes) if sep and lanes.isdigit() and base else 1
    scalar = base if sep and lanes.isdigit() and base else dtype
    if scalar == "bool":
        return lanes_n
    digits = "".join(ch for ch in scalar if ch.isdigit())
    return (max(1, int(digits) // 8) if digits else 8) * lanes_n


def _buffer_bytes(buf: tir.Buffer) -> Optional[int]:
    n = 1
    for dim in buf.shape:
        if not isinstance(dim, tir.IntImm):
            return None
        n *= dim.value
    return n * _dtype_bytes(buf.dtype)


class _Loads(TIRVisitor):
    def __init__(self, checker: "_Checker") -> None:
        self.checker = checker

    def visit_BufferLoad(self, e) -> None:
        self.checker.use(e.buffer)
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

    def use(self, buf: tir.Buffer) -> None:
        if self.kernel is not None:
            self.kernel.used.setdefault(_key(buf), buf)
        limit = self.limits.get("max_vector_bytes")
        if limit is not None:
            for loop in self.vector_loops:
                nbytes = loop.extent.value * _dtype_bytes(buf.dtype)
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
            self.block_(s.block)
        elif isinstance(s, tir.Block):
            self.block_(s)
        elif isinstance(s, tir.IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, tir.LetStmt):
            self.expr(s.value)
            self.stmt(s.body)
        elif isinstance(s, (tir.AssertStmt, tir.While)):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.Evaluate):
            self.expr(s.value)

    def store(self, s: tir.BufferStore) -> None:
        self.use(s.buffer)
        self.expr(s.value)
        for i in s.indices:
            self.expr(i)
        blocks = any(t.startswith("blockIdx.") for t in self.tags)
        threads = any(t.startswith("threadIdx.") for t in self.tags)
        if blocks and threads:
            return
        what = f"block '{self.block}'" if self.block is not None else f"the store to '{s.buffer.name}'"
        if what in self.unbound:
            return
        self.unbound.add(what)
        if not blocks and not threads:
            why = "it runs inside no blockIdx.* and no threadIdx.* loop"
        elif not blocks:
            why = "it runs inside no blockIdx.* loop"
        else:
            why = "it runs inside no threadIdx.* loop"
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
            self.use(mb.source.buffer)
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
        if s.kind != "thread_binding":
            self.stmt(s.body)
        else:
            starts = self.kernel is None
            if starts:
                self.kernel = _Kernel(s)
                self.kernels += 1
            self.kernel.extents.setdefault(s.thread_tag, []).append((s.extent, s.loop_var.name))
            self.tags.append(s.thread_tag)
            self.stmt(s.body)
            self.tags.pop()
            if starts:
                self.finish(self.kernel)
                self.kernel = None
        if vector:
            self.vector_loops.pop()

    # ---- per kernel
    def finish(self, k: _Kernel) -> None:
        where = f"{self.fname}: {k.label()}"
        lim = self.limits
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
        self.memory(where, buffers, _SHARED_SCOPES, "shared memory", "max_shared_memory_per_block")
        self.memory(where, buffers, _LOCAL_SCOPES, "local memory per thread", "max_local_memory_per_block")

    def memory(self, where: str, buffers: dict, scopes: tuple, what: str, key: str) -> None:
        limit = self.limits.get(key)
        total, parts = 0, []
        for buf in buffers.values():
            if buf.scope not in scopes:
                continue
            nbytes = _buffer_bytes(buf)
            if nbytes is None:
                if buf.scope == "shared":
                    self.errors.append(f"{where}: shared buffer '{buf.name}' has a size that is not a constant "
                                       "(use scope \"shared.dyn\" for dynamic shared memory)")
                continue
            total += nbytes
            parts.append(f"'{buf.name}' {nbytes}")
        if limit is not None and total > limit:
            self.errors.append(f"{where}: {total} bytes of {what} ({', '.join(parts)}) exceed {key} = {limit}")
