"""LLVM code generation for lowered TensorIR, with llvmlite's IR builder.

`codegen(funcs)` lowers each `tir.PrimFunc` (`compiler.lower_tir.lower`) and emits one LLVM
function per kernel into one `llvmlite.ir.Module`, for the host CPU (its triple, CPU name and
features, from `llvmlite.binding`) or the one an ``llvm -mcpu=...`` target names
(`HostTarget`). `optimize` runs LLVM's new pass manager (its default pipeline at the level
asked, with loop and SLP vectorization); `runtime.cpu` JIT-compiles the result with MCJIT.

Kernel ABI (the contract with `runtime.kernel.Kernel`), for a function named ``name`` in the
IRModule, exported as the symbol ``tvms_<name>`` (non-identifier characters become ``_``)::

    void tvms_name(ptr buf0, ..., <scalar params>..., i64 sym0, ...)

first the data pointer of every buffer parameter in parameter order, then every scalar
(non-buffer) parameter in order with its C type (``bool`` as ``i8``; ``float16`` is passed
as a C ``float``), then one ``i64`` per symbolic shape/stride variable of the buffer
parameters that is not itself a scalar parameter, in order of first appearance. Buffer
pointers are ``noalias`` when the function has the ``tir.noalias`` attribute.

Loops: ``T.serial`` loops are plain loops, and so are ``T.thread_binding`` loops, which
`lower_tir.lower_thread_bindings` has made serial (GPU-scheduled code keeps its sequential
meaning on the CPU); ``T.unroll`` loops with a constant extent of at most
`UNROLL_LIMIT` are unrolled here (larger ones get ``llvm.loop.unroll.full``); ``T.vectorized``
loops carry ``llvm.loop.vectorize.enable`` (and their width when constant), so LLVM's loop
vectorizer treats them as vectorizable; ``T.parallel`` loops are outlined and run on libgomp.
Loop annotations (set by `compiler.schedule_cpu`, see `lower_tir.VECTORIZE_ANN`) steer LLVM
without changing results: ``"tvms.vectorize_width": n`` vectorizes a serial loop at width n
(``1``: never vectorizes it),
``"tvms.interleave": c`` with c vectors per iteration (default 1), ``"tvms.unroll": 0`` never
unrolls it and ``"tvms.unroll": n`` unrolls it n times. Below O3, LLVM unrolls and interleaves
only what the IR asks for (`optimize`): these annotations, and the full unrolling this module
asks for on small loop nests (`UNROLL_BUDGET`).

Why libgomp's ``GOMP_parallel`` for parallel loops: it is the OpenMP runtime gcc itself emits
calls to, present on every Linux machine with gcc's runtime, and it keeps a pool of worker
threads alive between calls, so a parallel loop costs a few microseconds to start instead of
the tens of microseconds of creating threads in the generated code on every call; it also
honours ``OMP_NUM_THREADS``. The loop body becomes a function taking the values it uses as
(``noalias``) arguments plus its sub-range; a small wrapper unpacks a struct of those values,
takes its static chunk of the range from ``omp_get_thread_num``/``omp_get_num_threads``, and
calls it. Only the outermost parallel loop of a nest is outlined (an inner one runs serially
inside each worker). Without libgomp (``parallel_runtime="serial"``) the body function is
called once on the whole range, and so it is when the loop is too small to gain from threads
(`_iterations_per_thread`; decided at run time for a symbolic extent), which also sizes the team.

A float multiply feeding an add (``a + b * c``, in one expression) becomes ``llvm.fmuladd``:
one fused multiply-add on targets with FMA, in scalar and vector code alike, so results do
not depend on which loops LLVM vectorizes. Nothing is reassociated: reductions keep their
order. ``T.max``/``T.min`` on floats are ``a > b ? a : b`` / ``a < b ? a : b``, as in TVM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import llvmlite.binding as llvm
import llvmlite.ir as ir

from tvmscript import tir
from tvmscript.tir_visitor import TIRVisitor, calls_extern, vars_in

from . import progress
from .bounds_check import CHECK_INDEX, CHECK_RANGE
from .kernel_places import at_span, with_place
from .lower_tir import INTERLEAVE_ANN, UNROLL_ANN, VECTORIZE_ANN, Allocate, lower

__all__ = ["codegen", "CodegenResult", "KernelInfo", "HostTarget", "host_target", "optimize", "vectorizable_call",
           "UNROLL_LIMIT", "UNROLL_BUDGET", "UNROLL_MAX_EXTENT", "symbol_name"]

UNROLL_LIMIT = 64
UNROLL_BUDGET = 384  # loop nests doing at most this many loads and stores in all are unrolled,
UNROLL_MAX_EXTENT = 16  # ... if none of their loops is longer than this (longer ones vectorize)
ASSERT_FAIL_SYMBOL = "tvms_assert_fail"
BOUNDS_FAIL_SYMBOL = "tvms_bounds_fail"  # (message, lowest index, highest index, axis size)
_OP_TEXT = {tir.Div: "/", tir.Mod: "%", tir.FloorDiv: "//", tir.FloorMod: "%"}

_I1 = ir.IntType(1)
_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_PTR = ir.PointerType()
_VOID = ir.VoidType()


# ----------------------------------------------------------------------------- target


@dataclass(frozen=True)
class HostTarget:
    """The CPU kernels are generated for: LLVM's triple, CPU name and feature string. By
    default the machine's own (`host_target`); an ``llvm -mcpu=... -mattr=...`` target names
    another (`compiler.llvm_target`). ``complete``: ``features`` lists every feature of the
    CPU, as LLVM detected them where the code was built (so another CPU with all of them runs
    it); False when the CPU was named and ``features`` holds only the ``-mattr`` given on top
    of it."""

    triple: str
    cpu: str
    features: str
    complete: bool = True

    def unrunnable_on(self, host: "HostTarget") -> Optional[str]:
        """Why code generated for this target cannot run on ``host`` (it could stop the
        process with an illegal instruction), or None when it can."""
        if self.triple.split("-")[0] != host.triple.split("-")[0]:
            return f"the code is for {self.triple}, and this machine is {host.triple}"
        if not self.complete and self.cpu != host.cpu:
            return (f"the code is for -mcpu={self.cpu}, and this machine's CPU is a {host.cpu}, which may lack "
                    f"instructions a {self.cpu} has")
        have = {f[1:] for f in host.features.split(",") if f.startswith("+")}
        need = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        missing = sorted(need - have)
        if missing:
            return (f"the code is for a CPU with {', '.join('+' + m for m in missing[:6])}"
                    f"{' ...' if len(missing) > 6 else ''}, which this one ({host.cpu}) lacks")
        return None

    def target_machine(self, opt: int = 3):
        """Position-independent code: the same machine code is JIT-loaded, kept in the disk
        cache and linked into a shared library by ``export_library`` (non-PIC code there
        would need text relocations)."""
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                            reloc="pic", codemodel="jitdefault")


_initialized = False

# LLVM's own options that keep its optimizer off code paths known to abort the process on
# valid IR, each as narrow as LLVM allows (`init_llvm` sets them; see `avoid_llvm_aborts`).
LLVM_WORKAROUND_OPTIONS = ("-slp-copyable-elements=false",)


def init_llvm() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        avoid_llvm_aborts()
        _initialized = True


def avoid_llvm_aborts() -> None:
    """Set `LLVM_WORKAROUND_OPTIONS`: a kernel must never kill the process compiling it.

    ``-slp-copyable-elements=false``: LLVM 22.1's SLP vectorizer (llvmlite 0.50) fails the
    assertion "must be scheduled at this point" in ``BoUpSLP::scheduleBlock`` and aborts when a
    bundle it vectorizes by modeling a lane as a "copyable element" (``x`` taken as ``x op
    identity`` to match its neighbours) holds an instruction using one value as two operands,
    such as ``llvm.fmuladd(d, w, d)``. Linear resizes make exactly that once their loops are
    unrolled and folded: where a point's two neighbours clamp to the same pixel, ``a * (1 - f)
    + b * f`` becomes ``fmuladd(a, f, a)``. 221 of 1225 small align_corners resize2d shapes
    aborted on a znver5, some with every linear mode and some for skylake-avx512; resize3d too.

    The option turns off only that modeling; the SLP vectorizer still runs. Of the 471 modules
    tvms's op tests compile, 461 came out the same and 10 tiny fully unrolled ones (resizes,
    norms, attention) differently but no slower; resizes, norms and attention at model sizes
    came out the same. The same abort upstream: llvm/llvm-project#164164 (on ``fshl(%x, %x,
    2)``), open when this was written. An LLVM without the option ignores it (llvmlite discards
    errors in the options it is given). LLVM keeps options per process: other llvmlite users
    in this process (numba) compile without copyable elements too."""
    for option in LLVM_WORKAROUND_OPTIONS:
        llvm.set_option("tvms", option)


@lru_cache(maxsize=None)
def host_target() -> HostTarget:
    """The machine we run on: its triple, CPU name (``znver3``, ``skylake-avx512``...) and
    feature string (``+avx2,+fma,...``), as LLVM detects them."""
    init_llvm()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some hosts cannot report features
        features = ""
    return HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)


def optimize(llmod, tm, speed_level: int = 2) -> None:
    """LLVM's new pass manager, its default pipeline at ``speed_level`` (O1 to O3) with loop
    and SLP vectorization.

    Loops are unrolled and vector loops interleaved only where the IR asks for it (loop
    metadata from the kernels' annotations, see `_FuncGen.annotation_props`), not by LLVM's
    heuristics: those unroll and interleave every loop they can, which multiplies the code LLVM
    then optimizes and selects instructions for (the seed MLP compiled in ~350 ms instead of
    ~80 ms at O3) while the kernels, memory-bound or limited by their loop order, ran no
    faster."""
    init_llvm()  # its workarounds hold for every module optimized, whoever made the target machine
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = False  # only where forced by loop metadata
    pto.loop_interleaving = False
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(llmod, pb)


# ----------------------------------------------------------------------------- types


def value_type(dtype: str) -> ir.Type:
    """The LLVM type of a value of ``dtype`` (``bool`` is ``i1``)."""
    if dtype == "bool":
        return _I1
    if dtype in ("int8", "uint8"):
        return _I8
    if dtype in ("int16", "uint16"):
        return ir.IntType(16)
    if dtype in ("int32", "uint32"):
        return _I32
    if dtype in ("int64", "uint64"):
        return _I64
    if dtype == "float16":
        return ir.HalfType()
    if dtype == "float32":
        return ir.FloatType()
    if dtype == "float64":
        return ir.DoubleType()
    if dtype == "handle":
        return _PTR
    raise NotImplementedError(f"the CPU code generator does not support dtype '{dtype}'")


def memory_type(dtype: str) -> ir.Type:
    """The LLVM type of a ``dtype`` element in memory (``bool`` is a byte, as in NumPy)."""
    return _I8 if dtype == "bool" else value_type(dtype)


def abi_type(dtype: str) -> ir.Type:
    """The LLVM type of a scalar kernel argument (``bool`` as ``i8``, ``float16`` as float)."""
    if dtype == "bool":
        return _I8
    if dtype == "float16":
        return ir.FloatType()
    return value_type(dtype)


def _is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def _is_unsigned(dtype: str) -> bool:
    return dtype.startswith("uint") or dtype == "bool"


def _bits(dtype: str) -> int:
    if dtype == "bool":
        return 1
    if dtype == "handle":
        return 64
    return int("".join(ch for ch in dtype if ch.isdigit()))


def _const(dtype: str, value) -> ir.Constant:
    ty = value_type(dtype)
    if isinstance(ty, ir.IntType):
        v = int(value)
        w = ty.width
        if w == 1:
            return ir.Constant(ty, 1 if v else 0)
        v &= (1 << w) - 1
        if v >= 1 << (w - 1):
            v -= 1 << w
        return ir.Constant(ty, v)
    return ir.Constant(ty, float(value))


def symbol_name(name: str) -> str:
    return "tvms_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


# ----------------------------------------------------------------------------- results


@dataclass
class KernelInfo:
    """One kernel's exported symbol and its argument description (`runtime.kernel.ParamSpec`)."""

    name: str
    symbol: str
    params: list
    sym_vars: list


@dataclass
class CodegenResult:
    module: ir.Module
    kernels: list = field(default_factory=list)
    parallel_runtime: str = "gomp"

    def __str__(self) -> str:
        return str(self.module)


# ----------------------------------------------------------------------------- IR scans


def _collect_free(stmt) -> list:
    """Variables a statement uses but does not define, in first-use order: scalars, loop
    variables of enclosing loops, and the data variables of the buffers it accesses."""
    used: dict = {}
    defined: set = set()

    def ex(e):
        if isinstance(e, tir.Var):
            if e not in defined:
                used.setdefault(e, None)
        elif isinstance(e, tir.BinaryOp):
            ex(e.a)
            ex(e.b)
        elif isinstance(e, tir.BufferLoad):
            if e.buffer.data not in defined:
                used.setdefault(e.buffer.data, None)
            for i in e.indices:
                ex(i)
        elif isinstance(e, tir.Cast):
            ex(e.value)
        elif isinstance(e, tir.Not):
            ex(e.a)
        elif isinstance(e, tir.Select):
            ex(e.condition)
            ex(e.true_value)
            ex(e.false_value)
        elif isinstance(e, tir.Call):
            for a in e.args:
                ex(a)
        elif isinstance(e, tir.Let):
            ex(e.value)
            defined.add(e.var)
            ex(e.body)

    def st(s):
        if isinstance(s, tir.BufferStore):
            if s.buffer.data not in defined:
                used.setdefault(s.buffer.data, None)
            ex(s.value)
            for i in s.indices:
                ex(i)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                st(x)
        elif isinstance(s, tir.For):
            ex(s.min)
            ex(s.extent)
            defined.add(s.loop_var)
            st(s.body)
        elif isinstance(s, tir.IfThenElse):
            ex(s.condition)
            st(s.then_case)
            if s.else_case is not None:
                st(s.else_case)
        elif isinstance(s, tir.LetStmt):
            ex(s.value)
            defined.add(s.var)
            st(s.body)
        elif isinstance(s, tir.AssertStmt):
            ex(s.condition)
            st(s.body)
        elif isinstance(s, tir.While):
            ex(s.condition)
            st(s.body)
        elif isinstance(s, tir.Evaluate):
            ex(s.value)
        elif isinstance(s, Allocate):
            ex(s.buffer.shape[0])
            defined.add(s.buffer.data)
            st(s.body)

    st(stmt)
    return list(used)


def _written_data_vars(stmt) -> set:
    out: set = set()

    def st(s):
        if isinstance(s, tir.BufferStore):
            out.add(s.buffer.data)
        elif isinstance(s, tir.SeqStmt):
            for x in s.seq:
                st(x)
        elif isinstance(s, (tir.For, tir.LetStmt, tir.AssertStmt, tir.While, Allocate)):
            st(s.body)
        elif isinstance(s, tir.IfThenElse):
            st(s.then_case)
            if s.else_case is not None:
                st(s.else_case)
        elif isinstance(s, tir.Evaluate):
            pass

    st(stmt)
    return out


def _has_load(e) -> bool:
    if isinstance(e, tir.BufferLoad):
        return True
    if isinstance(e, tir.BinaryOp):
        return _has_load(e.a) or _has_load(e.b)
    if isinstance(e, (tir.Cast,)):
        return _has_load(e.value)
    if isinstance(e, tir.Not):
        return _has_load(e.a)
    if isinstance(e, tir.Select):
        return _has_load(e.condition) or _has_load(e.true_value) or _has_load(e.false_value)
    if isinstance(e, tir.Call):
        return e.op == "tir.call_extern" or any(_has_load(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.Let):
        return _has_load(e.value) or _has_load(e.body)
    return False


class _NameOf(dict):
    """`_dim_text`'s names for a message: each variable by its own name."""

    def __missing__(self, v):
        return v.name


def _dim_text(e, names: dict) -> str:
    """A shape dimension as text over symbol names, for `ParamSpec` (``"n"``, ``"n * 2"``)."""
    if isinstance(e, tir.IntImm):
        return str(e.value)
    if isinstance(e, tir.Var):
        return names[e]
    if isinstance(e, tir.Cast):
        return _dim_text(e.value, names)
    ops = {tir.Add: "+", tir.Sub: "-", tir.Mul: "*", tir.FloorDiv: "//", tir.FloorMod: "%"}
    if type(e) in ops:
        return f"({_dim_text(e.a, names)} {ops[type(e)]} {_dim_text(e.b, names)})"
    if isinstance(e, (tir.Min, tir.Max)):
        return f"{type(e).__name__.lower()}({_dim_text(e.a, names)}, {_dim_text(e.b, names)})"
    raise NotImplementedError(f"unsupported shape expression {type(e).__name__}")


# ----------------------------------------------------------------------------- intrinsics tables

_LLVM_FLOAT_UNARY = {
    "tir.exp": "llvm.exp", "tir.exp2": "llvm.exp2", "tir.exp10": "llvm.exp10", "tir.log": "llvm.log",
    "tir.log2": "llvm.log2", "tir.log10": "llvm.log10", "tir.sqrt": "llvm.sqrt", "tir.fabs": "llvm.fabs",
    "tir.floor": "llvm.floor", "tir.ceil": "llvm.ceil", "tir.round": "llvm.roundeven",
    "tir.nearbyint": "llvm.nearbyint", "tir.trunc": "llvm.trunc", "tir.sin": "llvm.sin",
    "tir.cos": "llvm.cos", "tir.tan": "llvm.tan", "tir.tanh": "llvm.tanh", "tir.sinh": "llvm.sinh",
    "tir.cosh": "llvm.cosh", "tir.asin": "llvm.asin", "tir.acos": "llvm.acos", "tir.atan": "llvm.atan",
}
_LIBM_FLOAT_UNARY = {
    "tir.erf": "erf", "tir.log1p": "log1p", "tir.asinh": "asinh", "tir.acosh": "acosh", "tir.atanh": "atanh",
}
_LLVM_FLOAT_BINARY = {"tir.pow": "llvm.pow", "tir.copysign": "llvm.copysign", "tir.atan2": "llvm.atan2"}
_LIBM_FLOAT_BINARY = {"tir.hypot": "hypot", "tir.nextafter": "nextafter"}
_TYPE_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}

# float32 exp and erf are generated inline as arithmetic (`_FuncGen.exp_f32`, `erf_f32`)
# instead of calls to libm's expf/erff: LLVM cannot vectorize a loop that calls them (it has
# no vector math library here), and softmax, sigmoid, SiLU and GELU spend most of their time
# there. The same code runs in scalar and vector loops, so results do not depend on
# vectorization. Coefficients: minimax fits (iteratively reweighted least squares in float64
# against mpmath, rounded to float32), measured on dense grids against mpmath in float32
# arithmetic and in tests/compiler/test_codegen_llvm.py: exp within 1.01 ulp, erf within 2.4 ulp.
INLINE_MATH = frozenset(("tir.exp", "tir.erf"))
# Float intrinsics LLVM vectorizes (one vector instruction, or `INLINE_MATH` arithmetic).
_VECTOR_FLOAT_CALLS = frozenset(("tir.sqrt", "tir.fabs", "tir.floor", "tir.ceil", "tir.round", "tir.nearbyint",
                                 "tir.trunc", "tir.copysign", "tir.fma", "tir.rsqrt", "tir.sigmoid"))


def vectorizable_call(op: str, dtype: str) -> bool:
    """Whether a loop calling intrinsic ``op`` on ``dtype`` values can still be vectorized by
    LLVM: the calls that become vector instructions, and float32 ``exp``/``erf`` (inline
    arithmetic here; ``sigmoid`` becomes one ``exp``). Calls of the C math library cannot."""
    if op in ("tir.likely", "tir.isnan", "tir.isinf", "tir.isfinite", "tir.reinterpret"):
        return True
    if op in INLINE_MATH or op == "tir.sigmoid":
        return dtype in ("float32", "float16")
    return op in _VECTOR_FLOAT_CALLS
_EXP_LOG2E = 1.4426950216293335
_EXP_LN2_HI = 0.693145751953125  # ln 2 = _EXP_LN2_HI + _EXP_LN2_LO
_EXP_LN2_LO = 1.428606765330187e-06
_EXP_Q = (0.5, 0.166665181517601, 0.04166620597243309, 0.008368883281946182, 0.001395047060213983)
_ERF_P = (1.1283791065216064, -0.3761262595653534, 0.1128358542919159, -0.026853810995817184,
          0.00518832728266716, -0.0008010189631022513, 7.853847637306899e-05)  # erf(x) / x in x^2, |x| < 1
_ERF_H = (-1.556815266609192, -0.35268068313598633, 0.056107670068740845, -0.010854246094822884,
          0.002167085651308298, -0.00042821874376386404, 6.47623382974416e-05, -2.0287719962652773e-05,
          2.514182142476784e-07)  # log(erfc(a)) + a^2 in a - 2.5, 1 <= a <= 4


# ----------------------------------------------------------------------------- code generator


class _ModuleGen:
    def __init__(self, target: HostTarget, parallel_runtime: str) -> None:
        self.module = ir.Module(name="tvms")
        self.module.triple = target.triple
        self.target = target
        self.parallel_runtime = parallel_runtime
        self.counter = 0
        self.strings: dict = {}

    def unique(self, base: str) -> str:
        self.counter += 1
        return f"{base}.{self.counter}"

    def declare(self, name: str, ret: ir.Type, args: list, var_arg: bool = False) -> ir.Function:
        existing = self.module.globals.get(name)
        fnty = ir.FunctionType(ret, args, var_arg=var_arg)
        if existing is not None:
            if existing.function_type != fnty:
                raise TypeError(f"function '{name}' is called with two different signatures: "
                                f"{existing.function_type} and {fnty}")
            return existing
        return ir.Function(self.module, fnty, name=name)

    def cstring(self, text: str) -> ir.GlobalVariable:
        gv = self.strings.get(text)
        if gv is None:
            data = bytearray(text.encode("utf-8") + b"\x00")
            ty = ir.ArrayType(_I8, len(data))
            gv = ir.GlobalVariable(self.module, ty, name=self.unique(".str"))
            gv.global_constant = True
            gv.linkage = "private"
            gv.initializer = ir.Constant(ty, data)
            gv.type = _PTR  # opaque pointers throughout
            self.strings[text] = gv
        return gv

    def loop_metadata(self, props: list) -> ir.values.MDValue:
        """A self-referential ``!llvm.loop`` node with the given ``(name, value)`` properties."""
        m = self.module
        nodes = []
        for name, value in props:
            ops = [ir.MetaDataString(m, name)]
            if value is not None:
                ops.append(value)
            nodes.append(m.add_metadata(ops))
        loop_id = m.add_metadata([ir.MetaDataString(m, self.unique("tvms.loop"))])
        loop_id.operands = (loop_id, *nodes)
        return loop_id


class _FuncGen:
    """Emits the statements of one LLVM function (a kernel or an outlined parallel body)."""

    def __init__(self, mg: _ModuleGen, fn: ir.Function, kname: str, env: dict, nonneg: set,
                 noalias: set, in_parallel: bool, places: dict | None = None) -> None:
        self.mg = mg
        # The spans of the kernel's accesses by number (`kernel_places`), and the store being
        # emitted: a check failing in it says where it is; an error compiling it names it.
        self.places = places
        self.at = None
        self.module = mg.module
        self.fn = fn
        self.kname = kname
        self.env = env
        self.nonneg = nonneg  # Vars known to be >= 0
        self.noalias = noalias  # data Vars whose pointers may be marked noalias
        self.in_parallel = in_parallel
        self.heap: list = []  # heap allocations live at the current point, freed on a failed check
        self.entry = fn.append_basic_block("entry")
        self.entry_builder = ir.IRBuilder(self.entry)
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        self.start = start

    def finish(self) -> None:
        if not self.b.block.is_terminated:
            self.b.ret_void()
        self.entry_builder.position_at_end(self.entry)
        self.entry_builder.branch(self.start)

    # ------------------------------------------------------------------ helpers
    def new_block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def alloca(self, ty: ir.Type, count=None, align: int = 0, name: str = "") -> ir.Instruction:
        inst = self.entry_builder.alloca(ty, size=count, name=name)
        inst.type = _PTR  # opaque pointers throughout
        if align:
            inst.align = align
        return inst

    def var(self, v: tir.Var):
        val = self.env.get(v)
        if val is None:
            raise ValueError(f"kernel '{self.kname}': variable '{v.name}' is used but never defined "
                             "(a free variable that is neither a parameter nor a buffer shape)")
        return val

    def is_nonneg(self, e) -> bool:
        if isinstance(e, tir.IntImm):
            return e.value >= 0
        if isinstance(e, tir.Var):
            return e in self.nonneg
        if isinstance(e, (tir.Add, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod, tir.Max)):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, tir.Min):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, tir.Cast):
            return tir.is_int(e.dtype) and tir.is_int(e.value.dtype) and _bits(e.dtype) >= _bits(e.value.dtype) and self.is_nonneg(e.value)
        return False

    def buffer_ptr(self, buf: tir.Buffer, index):
        base = self.var(buf.data)
        idx = self.expr(index)
        return self.b.gep(base, [idx], inbounds=True, source_etype=memory_type(buf.dtype))

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:
        if self.b.block.is_terminated:
            # Code after a failed assertion's `ret`: give it a block of its own (unreachable).
            self.b.position_at_end(self.new_block("dead"))
        if isinstance(s, tir.BufferStore):
            outer, self.at = self.at, s.span or self.at
            try:
                value = self.expr(s.value)
                if s.buffer.dtype == "bool":
                    value = self.b.zext(value, _I8)
                ptr = self.buffer_ptr(s.buffer, s.indices[0])
                self.b.store(value, ptr, align=_elem_align(s.buffer.dtype))
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
            self.zero_fill(ptr, ir.Constant(_I64, max(1, size.value) * _elem_align(buf.dtype)))
            self.env[buf.data] = ptr
            self.noalias.add(buf.data)
            self.stmt(s.body)
            return
        n = self.b.sext(self.expr(size), _I64) if _bits(size.dtype) < 64 else self.expr(size)
        esize = _elem_align(buf.dtype)
        nbytes = self.b.mul(n, ir.Constant(_I64, esize))
        nbytes = self.b.and_(self.b.add(nbytes, ir.Constant(_I64, 63)), ir.Constant(_I64, ~63))
        nbytes = self.b.select(self.b.icmp_signed("==", nbytes, ir.Constant(_I64, 0)), ir.Constant(_I64, 64), nbytes)
        alloc = self.mg.declare("aligned_alloc", _PTR, [_I64, _I64])
        free = self.mg.declare("free", _VOID, [_PTR])
        ptr = self.b.call(alloc, [ir.Constant(_I64, 64), nbytes], name=buf.name)
        self.fail_if(self.b.icmp_unsigned("==", ptr, ir.Constant(_PTR, None)),
                     f"cannot allocate '{buf.name}' ({buf.dtype}, {_dim_text(size, _NameOf())} elements): out of memory")
        self.zero_fill(ptr, nbytes)
        self.env[buf.data] = ptr
        self.noalias.add(buf.data)
        self.heap.append(ptr)
        self.stmt(s.body)
        self.heap.pop()
        if not self.b.block.is_terminated:
            self.b.call(free, [ptr])

    def zero_fill(self, ptr, nbytes) -> None:
        """Zeros over a new allocation. Why: a kernel may read an element it never wrote; LLVM
        takes such a load as undefined and may then compile the kernel into anything, an
        endless loop included (found by the fuzzer). Zeros make the read defined and the result
        reproducible, and they leak nothing of earlier calls. Where every element is written
        before it is read (nearly always), LLVM deletes the fill as dead stores."""
        memset = self.mg.declare("llvm.memset.p0.i64", _VOID, [_PTR, _I8, _I64, _I1])
        self.b.call(memset, [ptr, ir.Constant(_I8, 0), nbytes, ir.Constant(_I1, 0)])

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
                self.env[s.loop_var] = _const(s.loop_var.dtype, i)
                self.stmt(s.body)
            return
        props = []
        if kind == "vectorized":
            props.append(("llvm.loop.vectorize.enable", ir.Constant(_I1, 1)))
            if isinstance(s.extent, tir.IntImm) and s.extent.value > 1:
                width = 1
                while width * 2 <= min(s.extent.value, 16):
                    width *= 2
                props.append(("llvm.loop.vectorize.width", ir.Constant(_I32, width)))
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
            if serial and _unroll_cost(s, self.in_parallel) <= UNROLL_BUDGET:
                props.append(("llvm.loop.unroll.full", None))
            return props
        width = ann.get(VECTORIZE_ANN)
        if width is not None and _int_value(width) > 1 and s.kind == "serial":
            props.append(("llvm.loop.vectorize.enable", ir.Constant(_I1, 1)))
            props.append(("llvm.loop.vectorize.width", ir.Constant(_I32, _int_value(width))))
            count = _int_value(ann.get(INTERLEAVE_ANN, 1))
            props.append(("llvm.loop.interleave.count", ir.Constant(_I32, max(1, count))))
        elif width is not None and _int_value(width) == 1:
            props.append(("llvm.loop.vectorize.enable", ir.Constant(_I1, 0)))
        unroll = ann.get(UNROLL_ANN)
        if unroll is not None and s.kind != "unroll":
            count = _int_value(unroll)
            if count == 0:
                props.append(("llvm.loop.unroll.disable", None))
            elif count > 1:
                props.append(("llvm.loop.unroll.count", ir.Constant(_I32, count)))
        return props

    def int_add(self, a, b, dtype):
        if _is_signed(dtype) and _bits(dtype) >= 32:
            return self.b.add(a, b, flags=["nsw"])
        return self.b.add(a, b)

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
        cmp = self.b.icmp_unsigned("<", phi, hi) if _is_unsigned(var.dtype) else self.b.icmp_signed("<", phi, hi)
        self.b.cbranch(cmp, body_bb, end)
        self.b.position_at_end(body_bb)
        self.env[var] = phi
        if nonneg:
            self.nonneg.add(var)
        self.stmt(body)
        if not self.b.block.is_terminated:
            nxt = self.int_add(phi, ir.Constant(ty, 1), var.dtype) if not _is_unsigned(var.dtype) else self.b.add(phi, ir.Constant(ty, 1), flags=["nuw"])
            latch = self.b.block
            br = self.b.branch(head)
            if props:
                br.set_metadata("llvm.loop", self.mg.loop_metadata(props))
            phi.add_incoming(nxt, latch)
        self.b.position_at_end(end)

    def stmt_parallel(self, s: tir.For) -> None:
        """The outermost parallel loop: its body outlined into a function of the values it
        uses and a sub-range, run either on a libgomp thread team (``GOMP_parallel``) or, when
        the loop is too small to gain from threads, on the calling thread for its whole range.

        Why decide per call: starting a team wakes the pool's workers, which costs microseconds
        when they are idle (tens of them where workers sleep instead of spinning, and
        milliseconds when other processes keep every core busy and a worker has to wait for
        one), while a kernel doing less work than that cannot gain from a second thread. The
        team size (`team_size`) follows the loop's work: its extent (a symbolic one is read at
        run time) times an estimate of one iteration's (`_work`), one thread per
        `PARALLEL_MIN_WORK_PER_THREAD`, at most ``omp_get_max_threads()``; below two threads
        the body function is called directly. A constant extent too small for two threads
        gets no team code at all."""
        free = _collect_free(s)
        captured = [(v, self.var(v)) for v in free]
        loop_ty = value_type(s.loop_var.dtype)
        base = self.mg.unique(f"{self.kname}.parallel")
        # The loop body, as a function of the captured values and a [begin, end) sub-range.
        body_args = [val.type for _, val in captured] + [loop_ty, loop_ty]
        body_fn = ir.Function(self.module, ir.FunctionType(_VOID, body_args), name=base + ".body")
        body_fn.linkage = "internal"
        env = {}
        for i, (v, _) in enumerate(captured):
            arg = body_fn.args[i]
            arg.name = v.name
            env[v] = arg
            if v in self.noalias and isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
        sub = _FuncGen(self.mg, body_fn, self.kname, env, set(self.nonneg), set(self.noalias), True, self.places)
        begin, end = body_fn.args[-2], body_fn.args[-1]
        sub.emit_loop(s.loop_var, begin, end, s.body, [], nonneg=self.is_nonneg(s.min))
        sub.finish()

        lo = self.expr(s.min)
        extent = self.expr(s.extent)
        values = [val for _, val in captured]
        iters_per_thread = _iterations_per_thread(s.body)
        # A body whose loops have symbolic extents (a sequence length): its work is computed
        # at run time from those extents, when they are known before the loop.
        runtime_work = _runtime_work(s.body) if _work(s.body) >= _UNKNOWN_WORK else None
        if runtime_work is not None and not set(vars_in([runtime_work])) <= set(free) - {s.loop_var}:
            runtime_work = None
        if self.mg.parallel_runtime != "gomp" or (
                isinstance(s.extent, tir.IntImm) and s.extent.value < 2 * iters_per_thread):
            self.b.call(body_fn, values + [lo, self.int_add(lo, extent, s.loop_var.dtype)])
            return
        # Wrapper run by every OpenMP thread: unpack the captured values, take a static chunk.
        struct_ty = ir.LiteralStructType([v.type for v in values] + [loop_ty, loop_ty])
        wrapper = ir.Function(self.module, ir.FunctionType(_VOID, [_PTR]), name=base)
        wrapper.linkage = "internal"
        wb = ir.IRBuilder(wrapper.append_basic_block("entry"))
        data = wrapper.args[0]
        loaded = []
        for i in range(len(values) + 2):
            p = wb.gep(data, [ir.Constant(_I32, 0), ir.Constant(_I32, i)], inbounds=True, source_etype=struct_ty)
            loaded.append(wb.load(p, typ=struct_ty.elements[i]))
        w_lo, w_ext = loaded[-2], loaded[-1]
        signed = not _is_unsigned(s.loop_var.dtype)

        def to64(v):
            if v.type.width == 64:
                return v
            return wb.sext(v, _I64) if signed else wb.zext(v, _I64)

        nthreads = wb.sext(wb.call(self.mg.declare("omp_get_num_threads", _I32, []), []), _I64)
        tid = wb.sext(wb.call(self.mg.declare("omp_get_thread_num", _I32, []), []), _I64)
        n = to64(w_ext)
        chunk = wb.sdiv(wb.add(n, wb.sub(nthreads, ir.Constant(_I64, 1))), nthreads)
        rel_begin = wb.mul(tid, chunk)
        rel_begin = wb.select(wb.icmp_signed("<", rel_begin, n), rel_begin, n)
        rel_end = wb.add(rel_begin, chunk)
        rel_end = wb.select(wb.icmp_signed("<", rel_end, n), rel_end, n)
        lo64 = to64(w_lo)
        b64, e64 = wb.add(lo64, rel_begin), wb.add(lo64, rel_end)
        if loop_ty.width != 64:
            b64, e64 = wb.trunc(b64, loop_ty), wb.trunc(e64, loop_ty)
        wb.call(body_fn, loaded[:-2] + [b64, e64])
        wb.ret_void()

        frame = self.alloca(struct_ty, name="parallel.args")
        work = self.to_i64(self.expr(runtime_work), runtime_work.dtype) if runtime_work is not None else None
        threads = self.team_size(extent, s.loop_var.dtype, iters_per_thread, work)
        team_bb, alone_bb, end_bb = (self.new_block(f"parallel.{n}") for n in ("team", "alone", "end"))
        self.b.cbranch(self.b.icmp_signed(">=", threads, ir.Constant(_I32, 2)), team_bb, alone_bb)
        self.b.position_at_end(team_bb)
        for i, v in enumerate(values + [lo, extent]):
            p = self.b.gep(frame, [ir.Constant(_I32, 0), ir.Constant(_I32, i)], inbounds=True, source_etype=struct_ty)
            self.b.store(v, p)
        gomp = self.mg.declare("GOMP_parallel", _VOID, [_PTR, _PTR, _I32, _I32])
        self.b.call(gomp, [wrapper, frame, threads, ir.Constant(_I32, 0)])
        self.b.branch(end_bb)
        self.b.position_at_end(alone_bb)
        self.b.call(body_fn, values + [lo, self.int_add(lo, extent, s.loop_var.dtype)])
        self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def team_size(self, extent, dtype: str, iters_per_thread: int, work=None):
        """Threads (i32) to run a parallel loop of ``extent`` iterations on: one per
        ``iters_per_thread`` iterations, at most ``omp_get_max_threads()`` (``OMP_NUM_THREADS``,
        else the CPUs); below 2, the caller runs the loop on its own thread. ``work``: one
        iteration's work computed at run time (i64, `_runtime_work`), instead: one thread per
        `PARALLEL_MIN_WORK_PER_THREAD` units of the loop's."""
        n = self.to_i64(extent, dtype)
        if work is not None:
            total = self.b.mul(n, work)
            teams = self.b.sdiv(total, ir.Constant(_I64, PARALLEL_MIN_WORK_PER_THREAD))
        elif not _is_unsigned(dtype):
            teams = self.b.sdiv(n, ir.Constant(_I64, iters_per_thread))
        else:
            teams = self.b.udiv(n, ir.Constant(_I64, iters_per_thread))
        most = self.b.sext(self.b.call(self.mg.declare("omp_get_max_threads", _I32, []), []), _I64)
        threads = self.b.select(self.b.icmp_signed("<", teams, most), teams, most)
        threads = self.b.select(self.b.icmp_signed("<", threads, ir.Constant(_I64, 0)), ir.Constant(_I64, 0), threads)
        return self.b.trunc(threads, _I32)

    # ------------------------------------------------------------------ expressions
    def expr(self, e):
        method = _EXPR.get(type(e))
        if method is None:
            raise NotImplementedError(f"codegen: unsupported expression {type(e).__name__}")
        try:
            return method(self, e)
        except (NotImplementedError, ValueError, TypeError) as err:
            raise at_span(err, _load_span(e))

    def e_var(self, e):
        return self.var(e)

    def e_int(self, e):
        return _const(e.dtype, e.value)

    def e_float(self, e):
        return _const(e.dtype, e.value)

    def e_string(self, e):
        return self.mg.cstring(e.value)

    def e_load(self, e):
        ptr = self.buffer_ptr(e.buffer, e.indices[0])
        v = self.b.load(ptr, typ=memory_type(e.buffer.dtype), align=_elem_align(e.buffer.dtype))
        if e.buffer.dtype == "bool":
            v = self.b.icmp_unsigned("!=", v, ir.Constant(_I8, 0))
        if e.dtype != e.buffer.dtype:
            raise at_span(NotImplementedError(f"load of {e.dtype} from a {e.buffer.dtype} buffer"), e.span)
        return v

    def fmuladd(self, mul, addend, negate_product: bool = False, negate_addend: bool = False):
        """``mul.a * mul.b + addend`` as ``llvm.fmuladd``: one fused multiply-add wherever the
        target has FMA, the same in scalar and vectorized code (so reordering loops never
        changes which operations fuse, unlike the ``contract`` flag)."""
        x, y, z = self.expr(mul.a), self.expr(mul.b), addend
        if negate_product:
            x = self.b.fneg(x)
        if negate_addend:
            z = self.b.fneg(z)
        return self.float_call("llvm.fmuladd", mul.dtype, [x, y, z])

    def e_arith(self, e):
        dt = e.dtype
        kind = type(e)
        if tir.is_float(dt) and dt != "float16" and kind in (tir.Add, tir.Sub):
            if isinstance(e.b, tir.Mul) and e.b.dtype == dt:
                # a + b * c, a - b * c
                return self.fmuladd(e.b, self.expr(e.a), negate_product=kind is tir.Sub)
            if isinstance(e.a, tir.Mul) and e.a.dtype == dt:
                # b * c + a, b * c - a
                return self.fmuladd(e.a, self.expr(e.b), negate_addend=kind is tir.Sub)
        a, b = self.expr(e.a), self.expr(e.b)
        if tir.is_float(dt):
            if kind is tir.Add:
                return self.b.fadd(a, b)
            if kind is tir.Sub:
                return self.b.fsub(a, b)
            if kind is tir.Mul:
                return self.b.fmul(a, b)
            if kind is tir.Div:
                return self.b.fdiv(a, b)
            if kind is tir.Mod:
                return self.b.frem(a, b)
            if kind is tir.FloorDiv:
                return self.float_call("llvm.floor", dt, [self.b.fdiv(a, b)])
            if kind is tir.FloorMod:
                q = self.float_call("llvm.floor", dt, [self.b.fdiv(a, b)])
                return self.b.fsub(a, self.b.fmul(q, b))
        flags = ["nsw"] if _is_signed(dt) and _bits(dt) >= 32 else []
        if kind is tir.Add:
            return self.b.add(a, b, flags=flags)
        if kind is tir.Sub:
            return self.b.sub(a, b, flags=flags)
        if kind is tir.Mul:
            return self.b.mul(a, b, flags=flags)
        self.guard_division(e, a, b)
        unsigned = _is_unsigned(dt) or (self.is_nonneg(e.a) and self.is_nonneg(e.b))
        if kind is tir.Div:
            return self.b.udiv(a, b) if unsigned else self.b.sdiv(a, b)
        if kind is tir.Mod:
            return self.b.urem(a, b) if unsigned else self.b.srem(a, b)
        if unsigned:
            return self.b.udiv(a, b) if kind is tir.FloorDiv else self.b.urem(a, b)
        # Python semantics: the quotient rounds toward -inf, the remainder has b's sign.
        q = self.b.sdiv(a, b)
        r = self.b.srem(a, b)
        zero = ir.Constant(a.type, 0)
        if isinstance(e.b, tir.IntImm) and e.b.value > 0:
            adjust = self.b.icmp_signed("<", r, zero)
        else:
            signs_differ = self.b.xor(self.b.icmp_signed("<", r, zero), self.b.icmp_signed("<", b, zero))
            adjust = self.b.and_(self.b.icmp_signed("!=", r, zero), signs_differ)
        if kind is tir.FloorDiv:
            return self.b.sub(q, self.b.zext(adjust, a.type))
        return self.b.add(r, self.b.select(adjust, b, zero))

    def guard_division(self, e, a, b) -> None:
        """Integer division and modulo stop the kernel with an error, not a signal: by zero
        (SIGFPE on x86, or a silent 0 for a constant), and the one quotient that overflows,
        ``INT_MIN // -1``. A divisor known to be a nonzero constant (index arithmetic, nearly
        always) needs no check; loop-invariant checks are hoisted by LLVM."""
        dt = e.dtype
        if isinstance(e.b, tir.IntImm) and e.b.value != 0 and not (_is_signed(dt) and e.b.value == -1):
            return
        zero = ir.Constant(b.type, 0)
        at = _load_span(e) or self.at  # the division's operands: the op it came from, after fusion
        self.fail_if(self.b.icmp_unsigned("==", b, zero), f"integer division by zero ({_OP_TEXT[type(e)]}, {dt})", at=at)
        if _is_signed(dt) and not (isinstance(e.b, tir.IntImm) and e.b.value != -1):
            smallest = -(1 << (_bits(dt) - 1))
            overflow = self.b.and_(self.b.icmp_signed("==", a, ir.Constant(a.type, smallest)),
                                   self.b.icmp_signed("==", b, ir.Constant(b.type, -1)))
            self.fail_if(overflow, f"integer overflow: {smallest} {_OP_TEXT[type(e)]} -1 ({dt})", at=at)

    def fail_if(self, cond, message: str, bounds: Optional[list] = None, at=None) -> None:
        """Leave the kernel through `ASSERT_FAIL_SYMBOL` (the runtime raises after the call)
        when ``cond`` holds; code generation goes on where it does not. A failed bounds check
        passes its ``bounds`` (lowest index, highest index, axis size, as i64) to
        `BOUNDS_FAIL_SYMBOL` instead, for the message. The message says where in the source
        the check is by number (`kernel_places`): ``at``, else the store being emitted."""
        fail, ok = self.new_block("check.fail"), self.new_block("check.ok")
        self.b.cbranch(cond, fail, ok)
        self.b.position_at_end(fail)
        if bounds is None:
            fail_fn = self.mg.declare(ASSERT_FAIL_SYMBOL, _VOID, [_PTR])
            message = with_place(f"{self.kname}: {message}", self.places, at or self.at)
            self.b.call(fail_fn, [self.mg.cstring(message)])
        else:
            fail_fn = self.mg.declare(BOUNDS_FAIL_SYMBOL, _VOID, [_PTR, _I64, _I64, _I64])
            self.b.call(fail_fn, [self.mg.cstring(message)] + bounds)
        free = self.mg.declare("free", _VOID, [_PTR])
        for ptr in reversed(self.heap):  # nothing leaks when a check stops the kernel
            self.b.call(free, [ptr])
        self.b.ret_void()
        self.b.position_at_end(ok)

    def check_index(self, e):
        """``CHECK_INDEX(index, extent, message)``: the index, once it is known to lie in
        ``[0, extent)`` (one unsigned comparison covers both ends)."""
        index, extent, message = e.args
        value = self.expr(index)
        i64, n64 = self.to_i64(value, index.dtype), self.to_i64(self.expr(extent), extent.dtype)
        self.fail_if(self.b.icmp_unsigned(">=", i64, n64), message.value, [i64, i64, n64])
        return value

    def check_range(self, e):
        """``CHECK_RANGE(lowest, highest, extent, message)``: a hoisted check of every index an
        access takes in a loop nest, before the nest runs."""
        lo, hi, extent, message = e.args
        lo64, hi64 = self.to_i64(self.expr(lo), lo.dtype), self.to_i64(self.expr(hi), hi.dtype)
        n64 = self.to_i64(self.expr(extent), extent.dtype)
        outside = self.b.or_(self.b.icmp_signed("<", lo64, ir.Constant(_I64, 0)), self.b.icmp_signed(">=", hi64, n64))
        self.fail_if(outside, message.value, [lo64, hi64, n64])
        return ir.Constant(_I32, 0)

    def to_i64(self, value, dtype: str):
        if value.type.width == 64:
            return value
        return self.b.zext(value, _I64) if _is_unsigned(dtype) else self.b.sext(value, _I64)

    def e_minmax(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        op = "<" if isinstance(e, tir.Min) else ">"
        if tir.is_float(e.dtype):
            cond = self.b.fcmp_ordered(op, a, b)
        elif _is_unsigned(e.dtype):
            cond = self.b.icmp_unsigned(op, a, b)
        else:
            cond = self.b.icmp_signed(op, a, b)
        return self.b.select(cond, a, b)

    def e_compare(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        op = {tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">="}[type(e)]
        dt = e.a.dtype
        if tir.is_float(dt):
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b)
            return self.b.fcmp_ordered(op, a, b)
        if _is_unsigned(dt):
            return self.b.icmp_unsigned(op, a, b)
        return self.b.icmp_signed(op, a, b)

    def e_logic(self, e):
        is_and = isinstance(e, tir.And)
        a = self.expr(e.a)
        if not _has_load(e.b):
            b = self.expr(e.b)
            return self.b.and_(a, b) if is_and else self.b.or_(a, b)
        # Short-circuit: the right side may read memory only valid when the left side allows.
        start = self.b.block
        rhs_bb = self.new_block("logic.rhs")
        end = self.new_block("logic.end")
        if is_and:
            self.b.cbranch(a, rhs_bb, end)
        else:
            self.b.cbranch(a, end, rhs_bb)
        self.b.position_at_end(rhs_bb)
        b = self.expr(e.b)
        rhs_end = self.b.block
        self.b.branch(end)
        self.b.position_at_end(end)
        phi = self.b.phi(_I1)
        phi.add_incoming(ir.Constant(_I1, 0 if is_and else 1), start)
        phi.add_incoming(b, rhs_end)
        return phi

    def e_not(self, e):
        return self.b.not_(self.expr(e.a))

    def e_select(self, e):
        c = self.expr(e.condition)
        t = self.expr(e.true_value)
        f = self.expr(e.false_value)
        return self.b.select(c, t, f)

    def e_let(self, e):
        self.env[e.var] = self.expr(e.value)
        return self.expr(e.body)

    def e_cast(self, e):
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def cast(self, v, src: str, dst: str):
        if src == dst:
            return v
        b = self.b
        dty = value_type(dst)
        if dst == "bool":
            if tir.is_float(src):
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if tir.is_float(dst):
            if tir.is_float(src):
                if _bits(src) < _bits(dst):
                    return b.fpext(v, dty)
                if src == "float64" and dst == "float16":
                    return self.f64_to_f16(v)
                return b.fptrunc(v, dty)
            if _is_unsigned(src):
                return b.uitofp(v, dty)
            return b.sitofp(v, dty)
        # dst is an integer
        if tir.is_float(src):
            return b.fptoui(v, dty) if _is_unsigned(dst) else b.fptosi(v, dty)
        sb, db = _bits(src), _bits(dst)
        if sb == db:
            return v
        if sb > db:
            return b.trunc(v, dty)
        return b.zext(v, dty) if _is_unsigned(src) else b.sext(v, dty)

    def f64_to_f16(self, v):
        """double -> half rounded once (to nearest even), without the libgcc helper LLVM
        would call: round to float *to odd*, then to half (float has more than 11 + 2
        significant bits, so the second rounding is exact)."""
        b = self.b
        f32 = ir.FloatType()
        f = b.fptrunc(v, f32)
        back = b.fpext(f, ir.DoubleType())
        inexact = b.fcmp_ordered("!=", back, v)
        fabs = self.intrinsic("llvm.fabs.f64", ir.DoubleType(), [ir.DoubleType()])
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))
        bits = b.bitcast(f, _I32)
        bits = b.select(b.and_(inexact, away), b.sub(bits, ir.Constant(_I32, 1)), bits)
        bits = b.select(inexact, b.or_(bits, ir.Constant(_I32, 1)), bits)
        return b.fptrunc(b.bitcast(bits, f32), ir.HalfType())

    # ---- calls
    def intrinsic(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        return self.mg.declare(name, ret, args)

    def float_call(self, llvm_name: str, dtype: str, args: list):
        """``llvm.<f>.<type>(args)``; float16 is computed in float32."""
        if dtype == "float16":
            f32 = ir.FloatType()
            ext = [self.b.fpext(a, f32) for a in args]
            fn = self.intrinsic(f"{llvm_name}.f32", f32, [f32] * len(args))
            return self.b.fptrunc(self.b.call(fn, ext), ir.HalfType())
        ty = value_type(dtype)
        fn = self.intrinsic(f"{llvm_name}.{_TYPE_SUFFIX[dtype]}", ty, [ty] * len(args))
        return self.b.call(fn, args)

    # ---- float32 exp and erf as arithmetic (see the constants' comment)
    def f32_fma(self, a, b, c):
        f32 = ir.FloatType()
        return self.b.call(self.intrinsic("llvm.fma.f32", f32, [f32] * 3), [a, b, c])

    def f32_poly(self, coeffs, x):
        """``coeffs[0] + coeffs[1] * x + ...`` by Horner's rule with fused multiply-adds."""
        acc = ir.Constant(ir.FloatType(), coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.f32_fma(acc, x, ir.Constant(ir.FloatType(), c))
        return acc

    def exp_f32(self, x):
        """``exp(x)`` in float32, within 1.01 ulp: ``x = n ln2 + r`` (Cody-Waite, |r| <= ln2/2),
        ``exp(r) = 1 + r + r^2 q(r)``, times ``2^n`` applied as two exact powers of two (so
        subnormal results round once and ``2^n`` never overflows early). Infinities, NaN,
        overflow to +inf and underflow to 0 come out as C's ``expf`` gives them."""
        b, f32 = self.b, ir.FloatType()
        c = lambda v: ir.Constant(f32, v)  # noqa: E731
        xc = b.select(b.fcmp_ordered("<", x, c(-104.0)), c(-104.0), x)
        xc = b.select(b.fcmp_ordered(">", xc, c(89.0)), c(89.0), xc)
        n = b.call(self.intrinsic("llvm.roundeven.f32", f32, [f32]), [b.fmul(xc, c(_EXP_LOG2E))])
        r = self.f32_fma(n, c(-_EXP_LN2_HI), xc)
        r = self.f32_fma(n, c(-_EXP_LN2_LO), r)
        p = b.fadd(self.f32_fma(b.fmul(r, r), self.f32_poly(_EXP_Q, r), r), c(1.0))
        ni = b.fptosi(n, _I32)
        n1 = b.ashr(ni, ir.Constant(_I32, 1))
        n2 = b.sub(ni, n1)

        def pow2(k):
            return b.bitcast(b.shl(b.add(k, ir.Constant(_I32, 127)), ir.Constant(_I32, 23)), f32)

        out = b.fmul(b.fmul(p, pow2(n1)), pow2(n2))
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    def erf_f32(self, x):
        """``erf(x)`` in float32, within 3 ulp: ``x P(x^2)`` for ``|x| < 1``, else
        ``sign(x) (1 - exp(-x^2 + H(|x|)))`` where ``H(a) = log(erfc(a)) + a^2`` is smooth on
        [1, 4] (beyond 4, erf is 1 in float32). Both are computed and one selected, so the
        code has no branch and vectorizes."""
        b, f32 = self.b, ir.FloatType()
        c = lambda v: ir.Constant(f32, v)  # noqa: E731
        ax = self.float_call("llvm.fabs", "float32", [x])
        small = b.fmul(x, self.f32_poly(_ERF_P, b.fmul(x, x)))
        a = b.select(b.fcmp_ordered("<", ax, c(4.0)), ax, c(4.0))
        h = self.f32_poly(_ERF_H, b.fsub(a, c(2.5)))
        big = b.fsub(c(1.0), self.exp_f32(self.f32_fma(b.fneg(a), a, h)))
        big = self.float_call("llvm.copysign", "float32", [big, x])
        out = b.select(b.fcmp_ordered("<", ax, c(1.0)), small, big)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    def f32_math(self, op: str, dtype: str, x):
        """``exp``/``erf`` of a float32 (or float16, computed in float32) value, inline."""
        fn = self.exp_f32 if op == "tir.exp" else self.erf_f32
        if dtype == "float16":
            return self.b.fptrunc(fn(self.b.fpext(x, ir.FloatType())), ir.HalfType())
        return fn(x)

    def libm_call(self, base: str, dtype: str, args: list):
        """A C math library function: ``erff`` for float32 (and float16), ``erf`` for float64."""
        if dtype == "float64":
            ty = ir.DoubleType()
            return self.b.call(self.mg.declare(base, ty, [ty] * len(args)), args)
        f32 = ir.FloatType()
        conv = [self.b.fpext(a, f32) if dtype == "float16" else a for a in args]
        r = self.b.call(self.mg.declare(base + "f", f32, [f32] * len(args)), conv)
        return self.b.fptrunc(r, ir.HalfType()) if dtype == "float16" else r

    def e_call(self, e):
        op = e.op
        dt = e.dtype
        if op == "tir.if_then_else":
            return self.if_then_else(e)
        if op == "tir.likely":
            return self.expr(e.args[0])
        if op == CHECK_INDEX:
            return self.check_index(e)
        if op == CHECK_RANGE:
            return self.check_range(e)
        if op in ("tir.call_extern", "tir.call_pure_extern"):
            return self.call_extern(e)
        if op in ("tir.max_value", "tir.min_value"):
            return _limit(dt, op == "tir.max_value")
        if op == "tir.reinterpret":
            src = self.expr(e.args[0])
            return self.b.bitcast(src, value_type(dt))
        args = [self.expr(a) for a in e.args]
        adt = e.args[0].dtype if e.args else dt
        if op in ("tir.isnan", "tir.isinf", "tir.isfinite"):
            x = args[0]
            if not tir.is_float(adt):
                return ir.Constant(_I1, 1 if op == "tir.isfinite" else 0)
            if op == "tir.isnan":
                return self.b.fcmp_unordered("uno", x, x)
            ax = self.float_call("llvm.fabs", adt, [x])
            inf = ir.Constant(x.type, float("inf"))
            return self.b.fcmp_ordered("==" if op == "tir.isinf" else "!=", ax, inf)
        if tir.is_float(dt):
            if op in INLINE_MATH and dt in ("float32", "float16") and len(args) == 1:
                return self.f32_math(op, dt, args[0])
            if op in _LLVM_FLOAT_UNARY and len(args) == 1:
                return self.float_call(_LLVM_FLOAT_UNARY[op], dt, args)
            if op in _LIBM_FLOAT_UNARY and len(args) == 1:
                return self.libm_call(_LIBM_FLOAT_UNARY[op], dt, args)
            if op in _LLVM_FLOAT_BINARY and len(args) == 2:
                return self.float_call(_LLVM_FLOAT_BINARY[op], dt, args)
            if op in _LIBM_FLOAT_BINARY and len(args) == 2:
                return self.libm_call(_LIBM_FLOAT_BINARY[op], dt, args)
            if op == "tir.fmod":
                return self.b.frem(args[0], args[1])
            if op in ("tir.sigmoid", "tir.rsqrt"):
                raise ValueError(f"{op} must be lowered first (compiler.lower_tir.lower_intrinsics)")
        if tir.is_int(dt):
            ty = value_type(dt)
            if op == "tir.pow":
                f64 = ir.DoubleType()
                conv = [self.cast(a, adt, "float64") for a in args]
                r = self.b.call(self.intrinsic("llvm.pow.f64", f64, [f64, f64]), conv)
                return self.cast(r, "float64", dt)
            if op == "tir.bitwise_and":
                return self.b.and_(args[0], args[1])
            if op == "tir.bitwise_or":
                return self.b.or_(args[0], args[1])
            if op == "tir.bitwise_xor":
                return self.b.xor(args[0], args[1])
            if op == "tir.bitwise_not":
                return self.b.not_(args[0])
            if op == "tir.shift_left":
                return self.b.shl(args[0], args[1])
            if op == "tir.shift_right":
                return self.b.lshr(args[0], args[1]) if _is_unsigned(dt) else self.b.ashr(args[0], args[1])
            if op == "tir.popcount":
                return self.b.call(self.intrinsic(f"llvm.ctpop.i{ty.width}", ty, [ty]), args)
            if op == "tir.clz":
                fn = self.intrinsic(f"llvm.ctlz.i{ty.width}", ty, [ty, _I1])
                return self.b.call(fn, [args[0], ir.Constant(_I1, 0)])
        if dt == "bool" and op in ("tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor"):
            fn = {"tir.bitwise_and": self.b.and_, "tir.bitwise_or": self.b.or_, "tir.bitwise_xor": self.b.xor}[op]
            return fn(args[0], args[1])
        raise NotImplementedError(f"kernel '{self.kname}': intrinsic {op} on {dt} is not supported by the CPU code generator")

    def if_then_else(self, e):
        cond = self.expr(e.args[0])
        then_bb = self.new_block("ite.then")
        else_bb = self.new_block("ite.else")
        end = self.new_block("ite.end")
        self.b.cbranch(cond, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        t = self.expr(e.args[1])
        t_end = self.b.block
        self.b.branch(end)
        self.b.position_at_end(else_bb)
        f = self.expr(e.args[2])
        f_end = self.b.block
        self.b.branch(end)
        self.b.position_at_end(end)
        phi = self.b.phi(t.type)
        phi.add_incoming(t, t_end)
        phi.add_incoming(f, f_end)
        return phi

    def call_extern(self, e):
        name_arg = e.args[0]
        if not isinstance(name_arg, tir.StringImm):
            raise ValueError("call_extern: the first argument must be the function name")
        args = [self.expr(a) for a in e.args[1:]]
        types = [a.type for a in args]
        ret = _VOID if e.dtype in ("void",) else value_type(e.dtype)
        fn = self.mg.declare(name_arg.value, ret, types)
        r = self.b.call(fn, args)
        return r if e.dtype != "void" else ir.Constant(_I32, 0)


def _truthy(value) -> bool:
    """An attribute value as a bool: ``True`` and ``T.bool(True)`` (an IntImm) alike."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        return bool(value.value)
    return bool(value)


_NO_UNROLL = 1 << 30


def _unroll_cost(s, in_parallel: bool = False) -> int:
    """Loads and stores a lowered statement executes, when that is a constant of loops with
    constant extents and plain statements (else a huge number): the size of its full unroll.
    ``in_parallel``: inside a parallel loop, where nested parallel loops run serially."""
    if isinstance(s, tir.For):
        kinds = ("serial", "unroll", "parallel") if in_parallel else ("serial", "unroll")
        if s.kind not in kinds or s.annotations or not isinstance(s.extent, tir.IntImm) \
                or s.extent.value > UNROLL_MAX_EXTENT:
            return _NO_UNROLL
        return min(_NO_UNROLL, max(0, s.extent.value) * _unroll_cost(s.body, in_parallel))
    if isinstance(s, tir.SeqStmt):
        return min(_NO_UNROLL, sum(_unroll_cost(x, in_parallel) for x in s.seq))
    if isinstance(s, tir.IfThenElse):
        return _unroll_cost(s.then_case, in_parallel) + (
            _unroll_cost(s.else_case, in_parallel) if s.else_case is not None else 0)
    if isinstance(s, tir.BufferStore):
        return 1 + _count_loads(s.value)
    return _NO_UNROLL


PARALLEL_MIN_WORK_PER_THREAD = 1 << 19  # work units (`_work`) each thread of a team must get
_UNKNOWN_WORK = 1 << 40  # the work of a loop nest with a symbolic extent: maybe large


def _iterations_per_thread(body) -> int:
    """Iterations of a parallel loop with this body that make one thread's share: each
    thread of a team must get at least `PARALLEL_MIN_WORK_PER_THREAD` units of `_work`.

    Why that many: waking the idle workers of a libgomp team and waiting for them costs
    ~1 us while they spin, but 10-70 us on the 2-core virtual machine measured once they
    sleep, which they do between the calls of a serving loop and after tvms's short spin
    (`runtime.cpu.TVMS_SPINCOUNT`): with sleeping workers, two threads were slower than one
    on an elementwise kernel up to ~2.6e5 elements (5e5 units, ~25 us of work), and no
    faster on the batch-1 MLP's weight transpose (4e5 units, ~110 us). A team of two thus
    needs 2 x 2^19 units (~50-250 us of work, by how well the loop vectorizes). Under load a
    team costs far more (a worker waits milliseconds for a core): the batch-1 MLP's kernels
    (4e5-8e5 units) stay on the calling thread."""
    per_iteration = max(1, _work(body))
    return max(1, -(-PARALLEL_MIN_WORK_PER_THREAD // per_iteration))


def _work(s) -> int:
    """An estimate of the work of one execution of a lowered statement: the buffer loads and
    stores it does (arithmetic rides along with them), at most `_UNKNOWN_WORK`. A loop with
    a symbolic extent, a ``while`` loop and a call to an external function (which may do any
    amount of work) count as `_UNKNOWN_WORK`: they may be large, so such a loop gets a team.
    An ``if`` counts its costlier branch. (`_runtime_work` counts; this is its constant.)"""
    w = _runtime_work(s)
    return min(_UNKNOWN_WORK, w.value) if isinstance(w, tir.IntImm) else _UNKNOWN_WORK


def _runtime_work(s):
    """The work `_work` estimates, as an int64 expression of the symbolic extents of the
    loops (evaluated before a parallel loop to size its team; an IntImm, at most
    `_UNKNOWN_WORK`, when every extent is constant), or None when some part's work is not
    such an expression (a ``while`` loop, an external call)."""
    def const(v):
        return tir.IntImm("int64", min(_UNKNOWN_WORK, v))

    def fold(op, a, b, f):
        if a is None or b is None:
            return None
        if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
            return const(f(a.value, b.value))
        return op("int64", a, b)

    def add(a, b):
        return fold(tir.Add, a, b, lambda x, y: x + y)

    def mul(a, b):
        return fold(tir.Mul, a, b, lambda x, y: x * y)

    def larger(a, b):
        return fold(tir.Max, a, b, max)

    def own(cost: int):  # the statement's own loads and stores, unless unknown
        return const(cost) if cost < _UNKNOWN_WORK else None

    if isinstance(s, tir.For):
        extent = s.extent if s.extent.dtype == "int64" else tir.Cast("int64", s.extent)
        if isinstance(s.extent, tir.IntImm):
            extent = tir.IntImm("int64", s.extent.value)
        return mul(larger(extent, const(0)), _runtime_work(s.body))
    if isinstance(s, tir.SeqStmt):
        total = const(0)
        for x in s.seq:
            total = add(total, _runtime_work(x))
        return total
    if isinstance(s, tir.While):
        return None
    if isinstance(s, tir.IfThenElse):
        other = _runtime_work(s.else_case) if s.else_case is not None else const(0)
        return add(own(_expr_work(s.condition)), larger(_runtime_work(s.then_case), other))
    if isinstance(s, (tir.BufferStore, tir.Evaluate)):
        return own(1 + _expr_work(s.value))
    if isinstance(s, tir.LetStmt):
        return add(own(_expr_work(s.value)), _runtime_work(s.body))
    if isinstance(s, tir.AssertStmt):
        return add(own(_expr_work(s.condition)), _runtime_work(s.body))
    body = getattr(s, "body", None)
    return _runtime_work(body) if body is not None else const(1)


def _expr_work(e) -> int:
    """The loads an expression does (`_work`), or `_UNKNOWN_WORK` when it calls an external
    function."""
    return _UNKNOWN_WORK if calls_extern(e) else min(_UNKNOWN_WORK, _count_loads(e))


def _count_loads(e) -> int:
    if isinstance(e, tir.BufferLoad):
        return 1
    if isinstance(e, tir.BinaryOp):
        return _count_loads(e.a) + _count_loads(e.b)
    if isinstance(e, tir.Cast):
        return _count_loads(e.value)
    if isinstance(e, tir.Not):
        return _count_loads(e.a)
    if isinstance(e, tir.Select):
        return _count_loads(e.condition) + _count_loads(e.true_value) + _count_loads(e.false_value)
    if isinstance(e, tir.Call):
        return sum(_count_loads(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.Let):
        return _count_loads(e.value) + _count_loads(e.body)
    return 0


def _int_value(value) -> int:
    """An annotation value as an int: ``8`` and ``T.int32(8)`` (an IntImm) alike."""
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        return int(value.value)
    return int(value)


def _elem_align(dtype: str) -> int:
    return 1 if dtype == "bool" else max(1, _bits(dtype) // 8)


def _limit(dtype: str, upper: bool) -> ir.Constant:
    if tir.is_float(dtype):
        import numpy as np

        fi = np.finfo(dtype)
        return _const(dtype, float(fi.max if upper else fi.min))
    bits = _bits(dtype)
    if _is_unsigned(dtype):
        return _const(dtype, (1 << bits) - 1 if upper else 0)
    return _const(dtype, (1 << (bits - 1)) - 1 if upper else -(1 << (bits - 1)))


_EXPR = {
    tir.Var: _FuncGen.e_var,
    tir.IntImm: _FuncGen.e_int,
    tir.FloatImm: _FuncGen.e_float,
    tir.StringImm: _FuncGen.e_string,
    tir.BufferLoad: _FuncGen.e_load,
    tir.Cast: _FuncGen.e_cast,
    tir.Not: _FuncGen.e_not,
    tir.Select: _FuncGen.e_select,
    tir.Call: _FuncGen.e_call,
    tir.Let: _FuncGen.e_let,
    tir.Min: _FuncGen.e_minmax,
    tir.Max: _FuncGen.e_minmax,
    tir.And: _FuncGen.e_logic,
    tir.Or: _FuncGen.e_logic,
}
for _cls in (tir.Add, tir.Sub, tir.Mul, tir.Div, tir.Mod, tir.FloorDiv, tir.FloorMod):
    _EXPR[_cls] = _FuncGen.e_arith
for _cls in tir.COMPARISONS:
    _EXPR[_cls] = _FuncGen.e_compare


# ----------------------------------------------------------------------------- kernels


def _signature(name: str, func: tir.PrimFunc):
    """The kernel's ABI: ParamSpecs, symbolic variable list and the Vars behind each argument."""
    from tvmscript.runtime.kernel import ParamSpec

    buffers, scalars = [], []
    for p in func.params:
        if p in func.buffer_map:
            buffers.append((p, func.buffer_map[p]))
        else:
            scalars.append(p)
    scalar_set = set(scalars)
    sym_vars: list = []
    for _, buf in buffers:
        for v in vars_in(list(buf.shape) + list(buf.strides or [])):
            if v not in scalar_set and v not in sym_vars:
                sym_vars.append(v)
    names: dict = {}
    taken: set = set()
    for v in scalars + sym_vars:
        base = v.name or "v"
        n, i = base, 1
        while n in taken:
            n, i = f"{base}_{i}", i + 1
        taken.add(n)
        names[v] = n
    written = _written_data_vars(func.body)
    specs = []
    for p in func.params:  # in the function's own parameter order: how callers pass them
        buf = func.buffer_map.get(p)
        if buf is None:
            specs.append(ParamSpec("scalar", names[p], p.dtype))
            continue
        shape = [d.value if isinstance(d, tir.IntImm) else _dim_text(d, names) for d in buf.shape]
        strides = None
        if buf.strides:
            strides = [d.value if isinstance(d, tir.IntImm) else _dim_text(d, names) for d in buf.strides]
        specs.append(ParamSpec("buffer", p.name, buf.dtype, shape, strides=strides,
                               written=buf.data in written, buffer_name=buf.name))
    return specs, [names[v] for v in sym_vars], buffers, scalars, sym_vars


def _load_span(e):
    """The span of the first load in ``e`` that has one: where an expression the code generator
    cannot compile comes from in the source (the op it was legalized from, after fusion)."""
    found = []

    class _First(TIRVisitor):
        def visit_BufferLoad(self, node) -> None:
            if node.span is not None and not found:
                found.append(node.span)
            self.generic_visit(node)

    _First().visit(e)
    return found[0] if found else None


def _emit_kernel(mg: _ModuleGen, name: str, symbol: str, func: tir.PrimFunc, bounds_check: bool,
                 places: dict | None = None) -> KernelInfo:
    """One kernel. An error compiling it (a form the CPU code generator does not take) leaves
    as it was raised, told which kernel (``kernel``) and, where known, which statement or load
    of the source (``span``, see `at_span`)."""
    try:
        return _emit_kernel_code(mg, name, symbol, func, bounds_check, places)
    except (NotImplementedError, ValueError, TypeError) as err:
        if getattr(err, "kernel", None) is None:
            err.kernel = name
        raise


def _emit_kernel_code(mg: _ModuleGen, name: str, symbol: str, func: tir.PrimFunc, bounds_check: bool,
                      places: dict | None) -> KernelInfo:
    func = lower(func, bounds_check=bounds_check, places=places)
    specs, sym_names, buffers, scalars, sym_vars = _signature(name, func)
    arg_types = [_PTR] * len(buffers) + [abi_type(p.dtype) for p in scalars] + [_I64] * len(sym_vars)
    fn = ir.Function(mg.module, ir.FunctionType(_VOID, arg_types), name=symbol)
    fn.attributes.add("nounwind")
    noalias_attr = _truthy(func.attrs.get("tir.noalias"))
    env: dict = {}
    nonneg: set = set()
    noalias: set = set()
    gen = _FuncGen(mg, fn, name, env, nonneg, noalias, False, places)
    args = list(fn.args)
    for (p, buf), arg in zip(buffers, args):
        arg.name = p.name
        env[p] = arg
        if buf.data is not None:
            env[buf.data] = arg
        if noalias_attr:
            arg.add_attribute("noalias")
            noalias.add(p)
            if buf.data is not None:
                noalias.add(buf.data)
    args = args[len(buffers):]
    b = gen.entry_builder
    for p, arg in zip(scalars, args):
        arg.name = p.name
        if p.dtype == "bool":
            env[p] = b.icmp_unsigned("!=", arg, ir.Constant(_I8, 0))
        elif p.dtype == "float16":
            env[p] = b.fptrunc(arg, ir.HalfType())
        else:
            env[p] = arg
    args = args[len(scalars):]
    shape_vars = set(vars_in([dim for _, buf in buffers for dim in buf.shape]))
    for v, arg in zip(sym_vars, args):
        arg.name = v.name
        ty = value_type(v.dtype)
        env[v] = arg if ty.width == 64 else b.trunc(arg, ty)
        if v in shape_vars:
            nonneg.add(v)  # a dimension (a stride may be negative)
    # Symbolic element offsets of parameters: the runtime passes pointers to the first element.
    for _, buf in buffers:
        if isinstance(buf.elem_offset, tir.Var) and buf.elem_offset not in env:
            env[buf.elem_offset] = _const(buf.elem_offset.dtype, 0)
    gen.stmt(func.body)
    gen.finish()
    return KernelInfo(name, symbol, specs, sym_names)


def codegen(funcs: dict, parallel_runtime: str = "gomp", target: Optional[HostTarget] = None,
            bounds_check: bool = True, places: dict | None = None) -> CodegenResult:
    """One LLVM module holding a kernel per PrimFunc of ``funcs`` (name -> PrimFunc).

    ``parallel_runtime`` is ``"gomp"`` (parallel loops call libgomp's ``GOMP_parallel``) or
    ``"serial"`` (they run on the calling thread). ``bounds_check``: buffer accesses not
    proven in bounds at compile time are checked when they run (`compiler.bounds_check`).
    ``places`` (name -> `kernel_places.numbered_spans` of the function before it was
    scheduled) lets a failed check say where in the source it is."""
    target = target or host_target()
    mg = _ModuleGen(target, parallel_runtime)
    result = CodegenResult(mg.module, parallel_runtime=parallel_runtime)
    used: set = set()
    for i, (name, func) in enumerate(funcs.items()):
        progress.report("generating code", i, len(funcs))
        if not isinstance(func, tir.PrimFunc):
            raise TypeError(f"codegen: '{name}' is a {type(func).__name__}, not a tir.PrimFunc")
        symbol = symbol_name(name)
        base, i = symbol, 1
        while symbol in used:
            symbol, i = f"{base}_{i}", i + 1
        used.add(symbol)
        result.kernels.append(_emit_kernel(mg, name, symbol, func, bounds_check, (places or {}).get(name)))
    return result
