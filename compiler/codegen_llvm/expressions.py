"""Expressions of lowered TIR as LLVM values: arithmetic, comparisons, logic, casts.

`ExprGen.expr` dispatches on the expression's type (`_EXPR`); calls are in `calls`. What is
decided here, and why:

A float multiply feeding an add (``a + b * c``, in one expression) becomes ``llvm.fmuladd``:
one fused multiply-add on targets with FMA, in scalar and vector code alike, so results do
not depend on which loops LLVM vectorizes. Nothing is reassociated: sums and products keep their
order. ``T.max``/``T.min`` on floats are ``llvm.maxnum``/``llvm.minnum``, which ignore a NaN
operand as C's ``fmax``/``fmin`` and the CUDA backend do (TVM's CPU backend writes ``a > b ?
a : b``, which takes the right operand when either is a NaN; see `ExprGen.e_minmax`): a max or
min of any number of values does not depend on their order, so LLVM may vectorize those
reductions (only the sign of a zero result may then differ, as LLVM leaves it unspecified).
Integer ``//`` and ``%`` round toward minus infinity, as in Python, and a division by zero or
``INT_MIN // -1`` stops the kernel with an error instead of a signal (`ExprGen.guard_division`).
``and``/``or`` whose right side reads memory short-circuit. A ``bfloat16`` value is a float
rounded to bfloat16 after each operation (`ExprGen.round_bf16`), as float16's are by LLVM, and
its 16 bits in memory (`ExprGen.bf16_from_bits`, `bf16_bits`).

`ExprGen` is mixed into `function.FuncGen`; it uses the builder ``self.b``, the variables
``self.env`` and ``self.fail_if`` from there.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ..kernel_places import at_span
from .calls import CallGen
from .dtypes import I1, I8, I16, I32, constant, dtype_bits, elem_align, is_signed, is_unsigned, memory_type, value_type

_OP_TEXT = {tir.Div: "/", tir.Mod: "%", tir.FloorDiv: "//", tir.FloorMod: "%"}


class ExprGen:
    """The expressions of a function being generated (mixed into `function.FuncGen`)."""

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
        return constant(e.dtype, e.value)

    def e_float(self, e):
        return constant(e.dtype, e.value)

    def e_string(self, e):
        return self.mg.cstring(e.value)

    def e_load(self, e):
        ptr = self.buffer_ptr(e.buffer, e.indices[0])
        v = self.b.load(ptr, typ=memory_type(e.buffer.dtype), align=elem_align(e.buffer.dtype))
        if e.buffer.dtype == "bool":
            v = self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        elif e.buffer.dtype == "bfloat16":
            v = self.bf16_from_bits(v)
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
        if e.dtype == "bfloat16":
            return self.round_bf16(self.arith(e))
        return self.arith(e)

    def arith(self, e):
        dt = e.dtype
        kind = type(e)
        if dt in ("float32", "float64") and kind in (tir.Add, tir.Sub):
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
        flags = ["nsw"] if is_signed(dt) and dtype_bits(dt) >= 32 else []
        if kind is tir.Add:
            return self.b.add(a, b, flags=flags)
        if kind is tir.Sub:
            return self.b.sub(a, b, flags=flags)
        if kind is tir.Mul:
            return self.b.mul(a, b, flags=flags)
        self.guard_division(e, a, b)
        unsigned = is_unsigned(dt) or (self.is_nonneg(e.a) and self.is_nonneg(e.b))
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
        if isinstance(e.b, tir.IntImm) and e.b.value != 0 and not (is_signed(dt) and e.b.value == -1):
            return
        zero = ir.Constant(b.type, 0)
        at = _load_span(e) or self.at  # the division's operands: the op it came from, after fusion
        self.fail_if(self.b.icmp_unsigned("==", b, zero), f"integer division by zero ({_OP_TEXT[type(e)]}, {dt})", at=at)
        if is_signed(dt) and not (isinstance(e.b, tir.IntImm) and e.b.value != -1):
            smallest = -(1 << (dtype_bits(dt) - 1))
            overflow = self.b.and_(self.b.icmp_signed("==", a, ir.Constant(a.type, smallest)),
                                   self.b.icmp_signed("==", b, ir.Constant(b.type, -1)))
            self.fail_if(overflow, f"integer overflow: {smallest} {_OP_TEXT[type(e)]} -1 ({dt})", at=at)

    def e_minmax(self, e):
        """Float ``T.max``/``T.min`` are ``llvm.maxnum``/``llvm.minnum``: C's ``fmax``/``fmin``,
        which ignore a NaN operand, as the CUDA backend's ``max``/``min`` do. A reduction's
        result then does not depend on the order of its steps (up to the sign of a zero), so
        a schedule that reorders them keeps it, NaNs or not.

        Not ``a > b ? a : b`` (TVM's CPU form): in it each step of a chain ``m = max(m, x)``
        uses ``m`` twice (compare and select), and LLVM 22's loop vectorizer, asking whether a
        chain is uniform in the loop it vectorizes (``vputils::isSingleScalar``), walks every
        path through the operands, 2^n for n steps when all of the chain is loop-invariant. A
        tuned softmax recomputed its row maximum (128 steps, unrolled) for each element of the
        row, invariant there but not hoisted (its buffers might alias): 160 s in LLVM; 24 steps
        took 10 s, 28 steps 85 s. The intrinsic uses ``m`` once.

        The cost: x86's ``maxps`` alone is ``maxnum`` only where an operand is known not to be
        a NaN (``max(x, 0)``, a clip, the first steps from a constant); elsewhere a NaN test and
        a blend come with it. Kernels bound by memory ran as fast, a softmax up to 6% and a max
        pool on data in cache 24% slower. Integer ones stay compare-and-select, which
        InstCombine turns into ``llvm.smax`` & co. before the vectorizers run."""
        a, b = self.expr(e.a), self.expr(e.b)
        op = "<" if isinstance(e, tir.Min) else ">"
        if tir.is_float(e.dtype):
            # The operands' own type: half, double, or float (bfloat16 values are floats that
            # hold a bfloat16: the larger or smaller of two is one, no rounding needed).
            name = "llvm.minnum" if isinstance(e, tir.Min) else "llvm.maxnum"
            suffix = {"half": "f16", "float": "f32", "double": "f64"}[str(a.type)]
            return self.b.call(self.intrinsic(f"{name}.{suffix}", a.type, [a.type, a.type]), [a, b])
        if is_unsigned(e.dtype):
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
        if is_unsigned(dt):
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
        phi = self.b.phi(I1)
        phi.add_incoming(ir.Constant(I1, 0 if is_and else 1), start)
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
        if dst == "bfloat16":
            return self.to_bf16(v, src)
        if src == "bfloat16":  # a float holding a bfloat16 value, converted as one
            src = "float32"
            if dst == src:
                return v
        b = self.b
        dty = value_type(dst)
        if dst == "bool":
            if tir.is_float(src):
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if tir.is_float(dst):
            if tir.is_float(src):
                if dtype_bits(src) < dtype_bits(dst):
                    return b.fpext(v, dty)
                if src == "float64" and dst == "float16":
                    return self.f64_to_f16(v)
                return b.fptrunc(v, dty)
            if is_unsigned(src):
                return b.uitofp(v, dty)
            return b.sitofp(v, dty)
        # dst is an integer
        if tir.is_float(src):
            return b.fptoui(v, dty) if is_unsigned(dst) else b.fptosi(v, dty)
        sb, db = dtype_bits(src), dtype_bits(dst)
        if sb == db:
            return v
        if sb > db:
            return b.trunc(v, dty)
        return b.zext(v, dty) if is_unsigned(src) else b.sext(v, dty)

    def f64_to_f16(self, v):
        """double -> half rounded once (to nearest even), without the libgcc helper LLVM
        would call: round to float *to odd*, then to half (float has more than 11 + 2
        significant bits, so the second rounding is exact)."""
        return self.b.fptrunc(self.f64_to_f32_odd(v), ir.HalfType())

    def f64_to_f32_odd(self, v):
        """double -> float rounded *to odd* (an inexact result gets its last bit set), which a
        second rounding to a narrower type (half, bfloat16) leaves as rounding once would."""
        b = self.b
        f32 = ir.FloatType()
        f = b.fptrunc(v, f32)
        back = b.fpext(f, ir.DoubleType())
        inexact = b.fcmp_ordered("!=", back, v)
        fabs = self.intrinsic("llvm.fabs.f64", ir.DoubleType(), [ir.DoubleType()])
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))
        bits = b.bitcast(f, I32)
        bits = b.select(b.and_(inexact, away), b.sub(bits, ir.Constant(I32, 1)), bits)
        bits = b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits)
        return b.bitcast(bits, f32)

    # ---- bfloat16: a float in registers, its top 16 bits in memory (see `dtypes`)
    def to_bf16(self, v, src: str):
        """A ``src`` value cast to bfloat16, rounded once: floats through float (a double
        rounded to odd first), integers through double (exact up to 2**53)."""
        b, f32 = self.b, ir.FloatType()
        if src == "bool":
            return b.uitofp(v, f32)
        if not tir.is_float(src):
            v = (b.uitofp if is_unsigned(src) else b.sitofp)(v, ir.DoubleType())
            src = "float64"
        if src == "float64":
            return self.round_bf16(self.f64_to_f32_odd(v))
        if src == "float16":
            v = b.fpext(v, f32)
        return self.round_bf16(v)

    def round_bf16(self, v):
        """A float rounded to the nearest bfloat16 (ties to even, NaN kept a quiet NaN), as a
        float: its bits plus ``0x7fff`` and the lowest kept bit, the low 16 bits cleared."""
        b = self.b
        bits = b.bitcast(v, I32)
        lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        rounded = b.add(b.add(bits, ir.Constant(I32, 0x7FFF)), lsb)
        quiet_nan = b.or_(bits, ir.Constant(I32, 0x00400000))
        bits = b.select(b.fcmp_unordered("uno", v, v), quiet_nan, rounded)
        return b.bitcast(b.and_(bits, ir.Constant(I32, -0x10000)), ir.FloatType())

    def bf16_from_bits(self, v):
        """The float of a bfloat16's 16 bits (exact: they are its top half)."""
        b = self.b
        return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), ir.FloatType())

    def bf16_bits(self, v):
        """The 16 bits of a float holding a bfloat16 value (its top half)."""
        b = self.b
        return b.trunc(b.lshr(b.bitcast(v, I32), ir.Constant(I32, 16)), I16)


_EXPR = {
    tir.Var: ExprGen.e_var,
    tir.IntImm: ExprGen.e_int,
    tir.FloatImm: ExprGen.e_float,
    tir.StringImm: ExprGen.e_string,
    tir.BufferLoad: ExprGen.e_load,
    tir.Cast: ExprGen.e_cast,
    tir.Not: ExprGen.e_not,
    tir.Select: ExprGen.e_select,
    tir.Call: CallGen.e_call,
    tir.Let: ExprGen.e_let,
    tir.Min: ExprGen.e_minmax,
    tir.Max: ExprGen.e_minmax,
    tir.And: ExprGen.e_logic,
    tir.Or: ExprGen.e_logic,
}
for _cls in (tir.Add, tir.Sub, tir.Mul, tir.Div, tir.Mod, tir.FloorDiv, tir.FloorMod):
    _EXPR[_cls] = ExprGen.e_arith
for _cls in tir.COMPARISONS:
    _EXPR[_cls] = ExprGen.e_compare


def _has_load(e) -> bool:
    """Whether evaluating ``e`` reads memory (a load, or an extern call that may)."""
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
