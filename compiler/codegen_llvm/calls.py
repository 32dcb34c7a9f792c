"""Calls in lowered TIR as LLVM code: intrinsics, the C math library, bounds checks, extern calls.

`CallGen.e_call` dispatches on the call's op. Float intrinsics become LLVM's own
(``llvm.sqrt.f32``), which it vectorizes, or calls of the C math library (``erff``), which it
cannot (`vectorizable_call` tells the CPU schedules which is which); float16 and bfloat16
are computed in float32 and rounded. float32 ``exp`` and ``erf`` are generated inline as
arithmetic instead (`INLINE_MATH`, why at the constants). ``CHECK_INDEX``/``CHECK_RANGE``
(`compiler.bounds_check`) become a comparison and a call of the runtime's failure handler.

`CallGen` is mixed into `function.FuncGen`; it uses the builder ``self.b``, ``self.expr``
and ``self.fail_if`` from there.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tvmscript.ir import tir

from ..bounds_check import CHECK_INDEX, CHECK_RANGE
from .dtypes import I1, I32, I64, PTR, VOID, dtype_limit, is_unsigned, value_type

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

# float32 exp and erf are generated inline as arithmetic (`CallGen.exp_f32`, `erf_f32`)
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


def _int_power_function(mg, dtype: str) -> ir.Function:
    """The module's ``base ** exp`` for integers of ``dtype``, defined on first use.

    Repeated squaring in the integer type, wrapping on overflow as NumPy's integer power does:
    a double's ``pow`` cannot hold int64's results and turns an overflow into poison. A negative
    exponent gives ``1 / base ** -exp`` truncated, what a float power cast back gives: 1 for a
    base of 1, -1 or 1 for -1 by the exponent's parity, 0 otherwise."""
    ty = value_type(dtype)
    signed = not is_unsigned(dtype)
    name = f"tvms.ipow.{'i' if signed else 'u'}{ty.width}"
    fn = mg.module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(mg.module, ir.FunctionType(ty, [ty, ty]), name=name)
    fn.linkage = "internal"
    base, exp = fn.args
    entry, negative, head, step, done = (fn.append_basic_block(n) for n in
                                         ("entry", "negative", "head", "step", "done"))
    one, zero = ir.Constant(ty, 1), ir.Constant(ty, 0)
    b = ir.IRBuilder(entry)
    if signed:
        b.cbranch(b.icmp_signed("<", exp, zero), negative, head)
    else:
        b.branch(head)
    b.position_at_end(negative)
    minus_one = ir.Constant(ty, -1)
    odd = b.icmp_unsigned("!=", b.and_(exp, one), zero)
    b.ret(b.select(b.icmp_signed("==", base, one), one,
                   b.select(b.icmp_signed("==", base, minus_one), b.select(odd, minus_one, one), zero)))
    b.position_at_end(head)
    result, square, rest = b.phi(ty), b.phi(ty), b.phi(ty)
    b.cbranch(b.icmp_unsigned("==", rest, zero), done, step)
    b.position_at_end(step)
    odd = b.icmp_unsigned("!=", b.and_(rest, one), zero)
    next_result = b.select(odd, b.mul(result, square), result)
    next_square = b.mul(square, square)
    next_rest = b.lshr(rest, one)
    b.branch(head)
    for phi, first, again in ((result, one, next_result), (square, base, next_square), (rest, exp, next_rest)):
        phi.add_incoming(first, entry)
        phi.add_incoming(again, step)
    b.position_at_end(done)
    b.ret(result)
    return fn


def vectorizable_call(op: str, dtype: str) -> bool:
    """Whether a loop calling intrinsic ``op`` on ``dtype`` values can still be vectorized by
    LLVM: the calls that become vector instructions, and float32 ``exp``/``erf`` (inline
    arithmetic here; ``sigmoid`` becomes one ``exp``). Calls of the C math library cannot."""
    if op in ("tir.likely", "tir.isnan", "tir.isinf", "tir.isfinite", "tir.reinterpret"):
        return True
    if op in INLINE_MATH or op == "tir.sigmoid":
        return dtype in ("float32", "float16", "bfloat16")
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


class CallGen:
    """The calls of a function being generated (mixed into `function.FuncGen`)."""

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
            return dtype_limit(dt, op == "tir.max_value")
        if op == "tir.address_of":
            load = e.args[0]
            return self.buffer_ptr(load.buffer, load.indices[0])
        if op == "tir.call_llvm_intrin":
            return self.call_llvm_intrin(e)
        if op == "tir.reinterpret":
            return self.reinterpret(self.expr(e.args[0]), e.args[0].dtype, dt)
        args = [self.expr(a) for a in e.args]
        adt = e.args[0].dtype if e.args else dt
        if op in ("tir.isnan", "tir.isinf", "tir.isfinite"):
            x = args[0]
            if not tir.is_float(adt):
                return ir.Constant(I1, 1 if op == "tir.isfinite" else 0)
            if op == "tir.isnan":
                return self.b.fcmp_unordered("uno", x, x)
            ax = self.float_call("llvm.fabs", adt, [x])
            inf = ir.Constant(x.type, float("inf"))
            return self.b.fcmp_ordered("==" if op == "tir.isinf" else "!=", ax, inf)
        if tir.is_float(dt):
            if op in INLINE_MATH and dt in ("float32", "float16", "bfloat16") and len(args) == 1:
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
                rem = self.b.frem(args[0], args[1])
                return self.round_bf16(rem) if dt == "bfloat16" else rem
            if op in ("tir.sigmoid", "tir.rsqrt"):
                raise ValueError(f"{op} must be lowered first (compiler.lower_tir.lower_intrinsics)")
        if tir.is_int(dt):
            ty = value_type(dt)
            if op == "tir.pow":
                return self.b.call(_int_power_function(self.mg, dt), args)
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
                return self.b.lshr(args[0], args[1]) if is_unsigned(dt) else self.b.ashr(args[0], args[1])
            if op == "tir.popcount":
                return self.b.call(self.intrinsic(f"llvm.ctpop.i{ty.width}", ty, [ty]), args)
            if op == "tir.clz":
                fn = self.intrinsic(f"llvm.ctlz.i{ty.width}", ty, [ty, I1])
                return self.b.call(fn, [args[0], ir.Constant(I1, 0)])
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
        ret = VOID if e.dtype in ("void",) else value_type(e.dtype)
        fn = self.mg.declare(name_arg.value, ret, types)
        r = self.b.call(fn, args)
        return r if e.dtype != "void" else ir.Constant(I32, 0)

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
        outside = self.b.or_(self.b.icmp_signed("<", lo64, ir.Constant(I64, 0)), self.b.icmp_signed(">=", hi64, n64))
        self.fail_if(outside, message.value, [lo64, hi64, n64])
        return ir.Constant(I32, 0)

    def call_llvm_intrin(self, e):
        """``T.call_llvm_intrin("void", "llvm.prefetch", T.address_of(A[i]), rw, locality,
        cache)``: a hint that never faults (`schedule_cpu.prefetch` emits it). The only LLVM
        intrinsic taken by name: the others have a ``T.`` operation of their own."""
        name = e.args[0].value if e.args and isinstance(e.args[0], tir.StringImm) else None
        if name != "llvm.prefetch" or len(e.args) != 5:
            raise NotImplementedError(f"codegen: T.call_llvm_intrin of {name!r} is not supported (only "
                                      "llvm.prefetch with an address, rw, locality and cache type)")
        flags = []
        for a in e.args[2:]:
            if not isinstance(a, tir.IntImm):
                raise ValueError("llvm.prefetch: rw, locality and cache type must be constants")
            flags.append(ir.Constant(I32, a.value))
        prefetch = self.intrinsic("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        self.b.call(prefetch, [self.expr(e.args[1]), *flags])
        return ir.Constant(I32, 0)

    # ---- intrinsics and the C math library
    def intrinsic(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        return self.mg.declare(name, ret, args)

    def reinterpret(self, v, src: str, dst: str):
        """``T.reinterpret``: the same bits as another dtype (a bfloat16's are its 16 in memory)."""
        if src == "bfloat16":
            v = self.bf16_bits(v)
        if dst == "bfloat16":
            return self.bf16_from_bits(self.b.bitcast(v, ir.IntType(16)))
        return self.b.bitcast(v, value_type(dst))

    def float_call(self, llvm_name: str, dtype: str, args: list):
        """``llvm.<f>.<type>(args)``; float16 is computed in float32, bfloat16 (a float
        already) rounded after."""
        if dtype == "bfloat16":
            return self.round_bf16(self.float_call(llvm_name, "float32", args))
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
        ni = b.fptosi(n, I32)
        n1 = b.ashr(ni, ir.Constant(I32, 1))
        n2 = b.sub(ni, n1)

        def pow2(k):
            return b.bitcast(b.shl(b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23)), f32)

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
        if dtype == "bfloat16":
            return self.round_bf16(fn(x))
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
        if dtype == "bfloat16":
            return self.round_bf16(r)
        return self.b.fptrunc(r, ir.HalfType()) if dtype == "float16" else r
