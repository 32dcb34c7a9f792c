"""One kernel as CUDA C: its names, shared memory, statements and loops (`KernelGen`).

What it prints, and why: ``local`` buffers as per-thread arrays (registers once indices are
constant), ``shared`` ones as ``__shared__`` arrays, or slices of one ``extern __shared__``
array when the kernel's shared memory exceeds the 48 KiB a static allocation may use
(`STATIC_SHARED_LIMIT`); tensor-core fragments as arrays of ``nvcuda::wmma::fragment``
(`wmma`); PTX's ldmatrix, mma.sync and cp.async as calls of inline-assembly helpers (`ptx`),
the arrays they use as registers 16-byte aligned; thread-bound loops are gone (`lower_gpu`
made them ``threadIdx.x``...), other loops are C ``for`` loops, ``T.vectorized`` ones vector
accesses where they can be (`vectorize`). Device code has no assertions, as in TVM.

`KernelGen` gathers the printer's parts, one mixin per concern: vectorized loops
(`vectorize.VectorGen`), cross-thread reductions (`allreduce.AllreduceGen`), tensor-core
intrinsics (`wmma.WmmaGen`), PTX's builtins (`ptx.PtxGen`), expressions
(`expressions.ExprGen`) and the trace mode only the CPU emulator compiles (`trace.TraceGen`:
every global and shared access and the arithmetic of each store reported, for counting;
``trace=True``).
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_visitor import TIRVisitor

from ..lower_gpu import (ALLREDUCE_OP, FRAGMENT_SCOPES, THREAD_VARS, GPULoweringError, Kernel, is_shared,
                         pointer_targets)
from ..lower_tir import THREAD_SYNC_OPS, dtype_bytes
from ..bounds_check import CHECK_RANGE
from ..cuda_spec import BoundsChecks
from .allreduce import AllreduceGen
from .checks import ERRORS_PARAM, CheckGen
from .expressions import ExprGen
from .literals import ctype, ident, is_zero
from .ptx import WGMMA_TILE_ALIGN, PtxGen, calls_op, register_arrays
from .trace import TraceGen
from .vectorize import VectorGen
from .wmma import WmmaGen, fragment_declaration

# The most shared memory a kernel may declare statically; beyond it, the kernel takes its
# shared buffers from dynamic shared memory (which the launch sizes, up to the GPU's limit).
STATIC_SHARED_LIMIT = 48 * 1024


class KernelGen(VectorGen, AllreduceGen, WmmaGen, PtxGen, CheckGen, ExprGen, TraceGen):
    """Prints one `Kernel` as a ``__global__`` function.

    The methods here hold the kernel's names, shared memory and statements; vectorized loops,
    cross-thread reductions, tensor-core calls, PTX builtins, expressions and the trace mode come
    from the mixins. ``arch`` (``"sm_80"``), when known, is the architecture the kernel is for."""

    def __init__(self, kernel: Kernel, symbol: str, names: dict, dims: set, trace: bool = False,
                 arch: Optional[str] = None, checks: Optional[BoundsChecks] = None) -> None:
        self.kernel = kernel
        self.checks = checks if checks is not None else BoundsChecks()
        self.trace = trace
        self.arch = arch
        self.symbol = symbol
        self.lines: list = []
        self.indent = 1
        self.names: dict = {}
        self.taken: set = {ERRORS_PARAM}
        self.ranges: dict = {}           # Var -> (min, extent) for proving indices non-negative
        self.dims = dims
        for v in dims:
            self.ranges[v] = (tir.IntImm(v.dtype, 0), None)
        for tag, var in THREAD_VARS.items():
            ext = kernel.extents.get(tag)
            self.ranges[var] = (tir.IntImm("int32", 0), ext if ext is not None else tir.IntImm("int32", 1))
        for v, n in names.items():
            self.names[v] = ident(n)
            self.taken.add(ident(n))
        self.counter = 0
        self.shared_offsets: dict = {}
        self.dynamic_shared_bytes = 0
        self.fragments: dict = {}        # data Var -> a wmma.* buffer allocated in the kernel
        self.register_arrays = register_arrays(kernel.body)  # local arrays PTX builtins view as registers
        self._plan_shared()

    # ---- names
    def name(self, v: tir.Var) -> str:
        n = self.names.get(v)
        if n is None:
            base = ident(v.name)
            n, i = base, 1
            while n in self.taken:
                n, i = f"{base}_{i}", i + 1
            self.taken.add(n)
            self.names[v] = n
        return n

    def name_as(self, v: tir.Var, preferred: str) -> str:
        """Name ``v`` after ``preferred`` (a buffer's name rather than its data variable's)."""
        if v not in self.names:
            base = ident(preferred)
            n, i = base, 1
            while n in self.taken:
                n, i = f"{base}_{i}", i + 1
            self.taken.add(n)
            self.names[v] = n
        return self.names[v]

    def fresh(self, base: str) -> str:
        self.counter += 1
        n = f"{base}{self.counter}"
        while n in self.taken:
            self.counter += 1
            n = f"{base}{self.counter}"
        self.taken.add(n)
        return n

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    # ---- shared memory
    def _plan_shared(self) -> None:
        """Static ``__shared__`` arrays, or offsets into dynamic shared memory when the kernel
        needs more than `STATIC_SHARED_LIMIT` (or asks for ``shared.dyn``)."""
        found = _SharedUse(self)
        found.visit(self.kernel.body)
        allocs = found.allocs
        self.shared_data = {b.data for b in allocs}
        self.local_data = found.local_data
        self.allreduce_smem = found.allreduce_bytes
        # Tensor-core loads and stores (through tvm_access_ptr) need 32-byte aligned addresses.
        pointers = pointer_targets(self.kernel.body)
        self.shared_align = 32 if any(b.data in pointers for b in allocs) else 16
        # Tiles a wgmma reads through descriptors are 128-byte swizzled, which the tensor cores
        # apply to the address bits: each tile starts at a 1024-byte boundary of dynamic
        # shared memory (whose base is so aligned).
        wgmma = calls_op(self.kernel.body, "tir.ptx_wgmma_desc")
        if wgmma:
            self.shared_align = WGMMA_TILE_ALIGN
        total = self.allreduce_smem
        sizes = {}
        for buf in allocs:
            size = buf.shape[0]
            if not isinstance(size, tir.IntImm):
                raise GPULoweringError(f"shared buffer '{buf.name}' has no constant size")
            sizes[buf] = size.value * dtype_bytes(buf.dtype)
            total += sizes[buf]
        dynamic = total > STATIC_SHARED_LIMIT or any(b.scope == "shared.dyn" for b in allocs) or wgmma
        if dynamic:
            offset = 0
            for buf in allocs:
                self.shared_offsets[buf.data] = offset
                offset += -(-sizes[buf] // self.shared_align) * self.shared_align
            self.dynamic_shared_bytes = offset

    # ---- the function
    def emit(self, params_c: list) -> list:
        threads = self.kernel.threads_per_block()
        bounds = f"__launch_bounds__({threads}) " if threads else ""
        header = f'extern "C" __global__ void {bounds}{self.symbol}({", ".join(params_c)}) {{'
        if self.dynamic_shared_bytes:
            self.line(f"extern __shared__ __align__({self.shared_align}) unsigned char tvms_dynamic_smem[];")
        self.stmt(self.kernel.body)
        return [header] + self.lines + ["}", ""]

    # ---- statements
    def stmt(self, s) -> None:
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, tir.BufferStore):
            self.count_ops(s.value)
            self.line(f"{self.store_target(s)} = {self.expr(s.value)};")
        elif isinstance(s, tir.For):
            self.loop(s)
        elif isinstance(s, tir.IfThenElse):
            self.line(f"if ({self.expr(s.condition)}) {{")
            self.block(s.then_case)
            if s.else_case is not None:
                self.line("} else {")
                self.block(s.else_case)
            self.line("}")
        elif isinstance(s, tir.LetStmt):
            self.count_ops(s.value)
            self.line(f"{ctype(s.var.dtype)} {self.name(s.var)} = {self.expr(s.value)};")
            self.stmt(s.body)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, tir.While):
            self.line(f"while ({self.expr(s.condition)}) {{")
            self.block(s.body)
            self.line("}")
        elif isinstance(s, tir.AssertStmt):
            self.stmt(s.body)  # device code has no assertions, as in TVM
        elif isinstance(s, tir.Evaluate):
            v = s.value
            if isinstance(v, tir.IntImm):
                return
            if isinstance(v, tir.Call) and v.op in THREAD_SYNC_OPS:
                self.line("__syncthreads();")
            elif isinstance(v, tir.Call) and v.op == ALLREDUCE_OP:
                self.allreduce(v)
            elif isinstance(v, tir.Call) and v.op == CHECK_RANGE:
                self.check_range(v)
            else:
                self.line(f"{self.expr(v)};")
        else:
            raise GPULoweringError(f"the CUDA backend cannot print a {type(s).__name__}")

    def block(self, s) -> None:
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def store_target(self, s: tir.BufferStore) -> str:
        target = f"{self.name(s.buffer.data)}[{self.expr(s.indices[0])}]"
        return self.traced(target, self.buffer_space(s.buffer), store=True)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        t = ctype(buf.dtype)
        name = self.name(buf.data)
        size = buf.shape[0]
        if buf.scope in ("local", "warp"):
            if not isinstance(size, tir.IntImm):
                raise GPULoweringError(f"local buffer '{buf.name}' has no constant size")
            align = "__align__(16) " if buf.data in self.register_arrays else ""
            self.line(f"{align}{t} {name}[{size.value}];")
        elif buf.scope in FRAGMENT_SCOPES:
            self.fragments[buf.data] = buf
            ftype, count = fragment_declaration(buf, s.body)
            self.line(f"{ftype} {name}[{count}];")
        elif is_shared(buf):
            if buf.data in self.shared_offsets:
                self.line(f"{t}* {name} = ({t}*)(tvms_dynamic_smem + {self.shared_offsets[buf.data]});")
            else:
                self.line(f"__shared__ __align__({self.shared_align}) {t} {name}[{size.value}];")
        else:
            raise GPULoweringError(
                f"buffer '{buf.name}' (scope {buf.scope!r}) is allocated inside a kernel: only 'local' and "
                "'shared' memory can be")
        self.stmt(s.body)

    def loop(self, s: tir.For) -> None:
        if s.kind == "vectorized" and self.vector_loop(s):
            return
        v = self.name(s.loop_var)
        t = ctype(s.loop_var.dtype)
        lo = self.expr(s.min)
        end = self.expr(s.extent) if is_zero(s.min) else f"{lo} + {self.expr(s.extent)}"
        if s.kind in ("unroll", "unrolled", "vectorized"):   # "unroll": `sch.unroll`
            self.line("#pragma unroll")
        self.ranges[s.loop_var] = (s.min, s.extent)
        self.line(f"for ({t} {v} = {lo}; {v} < {end}; ++{v}) {{")
        self.block(s.body)
        self.line("}")


class _SharedUse(TIRVisitor):
    """A kernel's shared allocations, the data variables of its per-thread arrays and the
    shared memory its all-reduces need."""

    def __init__(self, gen: "KernelGen") -> None:
        self.gen = gen
        self.allocs: list = []
        self.local_data: set = set()
        self.allreduce_bytes = 0

    def visit_Allocate(self, node) -> None:
        if is_shared(node.buffer):
            self.allocs.append(node.buffer)
        elif node.buffer.scope in ("local", "warp"):
            self.local_data.add(node.buffer.data)
        self.generic_visit(node)

    def visit_Evaluate(self, node) -> None:
        if isinstance(node.value, tir.Call) and node.value.op == ALLREDUCE_OP:
            self.allreduce_bytes += self.gen.allreduce_smem_bytes(node.value)
