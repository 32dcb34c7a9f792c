"""The LLVM module and function being generated, and what their code shares.

`ModuleGen` holds the one `llvmlite.ir.Module` every kernel goes into (declarations, string
constants, loop metadata). `FuncGen` emits one LLVM function, a kernel or an outlined parallel
loop body: it holds the builder, the LLVM value of each TIR variable and what is known about
them, and gathers the code generator's parts, one mixin per concern: statements and loops
(`statements.StmtGen`), parallel loops (`parallel.ParallelGen`), expressions
(`expressions.ExprGen`) and calls (`calls.CallGen`).

A failed check leaves the kernel through a call of the runtime's ``tvms_assert_fail`` or
``tvms_bounds_fail`` (`FuncGen.fail_if`), then returns: the runtime raises after the call.
"""

from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from tvmscript.ir import tir
from tvmscript.runtime.host_cpu import HostTarget
from tvmscript.runtime.kernel_abi import ASSERT_FAIL_SYMBOL, BOUNDS_FAIL_SYMBOL

from ..kernel_places import with_place
from .calls import CallGen
from .dtypes import I8, I64, PTR, VOID, dtype_bits, is_signed, is_unsigned, memory_type
from .expressions import ExprGen
from .parallel import ParallelGen
from .scratch import release
from .statements import StmtGen



class ModuleGen:
    """The LLVM module being filled: its functions' declarations, string constants and loop
    metadata, shared by every kernel in it."""

    def __init__(self, target: HostTarget, parallel_runtime: str) -> None:
        self.module = ir.Module(name="tvms")
        self.module.triple = target.triple
        self.target = target
        self.parallel_runtime = parallel_runtime
        self.counter = 0
        self.strings: dict = {}
        self.scratch_sites: list = []  # (block, busy flag, bytes) of each kept allocation (`scratch`)

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

    def runtime_global(self, name: str, ty: ir.Type) -> ir.GlobalVariable:
        """The variable ``name`` of type ``ty`` the runtime provides (the thread count, the
        scratch budget: `runtime.kernel_abi`), declared once per module."""
        existing = self.module.globals.get(name)
        return existing if existing is not None else ir.GlobalVariable(self.module, ty, name=name)

    def cstring(self, text: str) -> ir.GlobalVariable:
        gv = self.strings.get(text)
        if gv is None:
            data = bytearray(text.encode("utf-8") + b"\x00")
            ty = ir.ArrayType(I8, len(data))
            gv = ir.GlobalVariable(self.module, ty, name=self.unique(".str"))
            gv.global_constant = True
            gv.linkage = "private"
            gv.initializer = ir.Constant(ty, data)
            gv.type = PTR  # opaque pointers throughout
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


class FuncGen(StmtGen, ParallelGen, ExprGen, CallGen):
    """Emits the statements of one LLVM function (a kernel or an outlined parallel body).

    The methods here are what every part uses: blocks, stack slots, the value of a variable,
    failed checks; the statements, expressions and calls come from the mixins."""

    def __init__(self, mg: ModuleGen, fn: ir.Function, kname: str, env: dict, nonneg: set,
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
        self.beside_team = False  # the kernel surely starts a thread team (`cost.starts_a_team`)
        self.heap: list = []  # heap blocks (`scratch.Scratch`) live at the current point, given back on a failed check
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
        inst.type = PTR  # opaque pointers throughout
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
            return tir.is_int(e.dtype) and tir.is_int(e.value.dtype) and dtype_bits(e.dtype) >= dtype_bits(e.value.dtype) and self.is_nonneg(e.value)
        return False

    def buffer_ptr(self, buf: tir.Buffer, index):
        base = self.var(buf.data)
        idx = self.expr(index)
        return self.b.gep(base, [idx], inbounds=True, source_etype=memory_type(buf.dtype))

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
            fail_fn = self.mg.declare(ASSERT_FAIL_SYMBOL, VOID, [PTR])
            message = with_place(f"{self.kname}: {message}", self.places, at or self.at)
            self.b.call(fail_fn, [self.mg.cstring(message)])
        else:
            fail_fn = self.mg.declare(BOUNDS_FAIL_SYMBOL, VOID, [PTR, I64, I64, I64])
            self.b.call(fail_fn, [self.mg.cstring(message)] + bounds)
        for block in reversed(self.heap):  # nothing leaks when a check stops the kernel
            release(self, block)
        self.b.ret_void()
        self.b.position_at_end(ok)

    def to_i64(self, value, dtype: str):
        if value.type.width == 64:
            return value
        return self.b.zext(value, I64) if is_unsigned(dtype) else self.b.sext(value, I64)

    def int_add(self, a, b, dtype):
        if is_signed(dtype) and dtype_bits(dtype) >= 32:
            return self.b.add(a, b, flags=["nsw"])
        return self.b.add(a, b)
