"""Expressions of lowered TIR as CUDA C text.

Operations are parenthesized; arithmetic on 8- and 16-bit integers happens in ``int``
and is cast back (`ExprGen.narrow`); ``float16``/``bfloat16`` math goes through ``float``
(CUDA's half-precision functions are fewer and less precise), and CUDA's precise functions
(``expf``, not ``__expf``) are used throughout. ``//`` and ``%`` round toward minus infinity
(the prelude's ``tvms_floordiv``/``tvms_floormod``) unless both sides are known non-negative,
as C's are then the same. A thread index reads the hardware register (``(int)threadIdx.x``).

`ExprGen` is mixed into `kernel.KernelGen`; it uses ``self.name`` and the loop ranges
``self.ranges`` from there, `combine_text` from `allreduce.AllreduceGen`, `wmma` from
`wmma.WmmaGen`, `ptx` from `ptx.PtxGen`, `traced` from `trace.TraceGen` (a global or shared
load in trace mode), and ``lane_override``/``lane_subst``, which `vectorize.VectorGen` sets
while it prints one lane of a vector.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute

from ...ir.arith import const_int_bound
from ..bounds_check import CHECK_INDEX
from ..lower_gpu import THREAD_VARS, GPULoweringError
from ..lower_tir import dtype_bytes
from .literals import CTYPES, HALF_TYPES, NARROW_INTS, ctype, float_literal, int_literal, limit_literal
from .ptx import PTX_OPS
from .wmma import WMMA_OPS

_FLOAT_UNARY = {
    "tir.exp": "exp", "tir.exp2": "exp2", "tir.exp10": "exp10", "tir.log": "log", "tir.log2": "log2",
    "tir.log10": "log10", "tir.log1p": "log1p", "tir.sqrt": "sqrt", "tir.fabs": "fabs", "tir.floor": "floor",
    "tir.ceil": "ceil", "tir.round": "rint", "tir.nearbyint": "nearbyint", "tir.trunc": "trunc", "tir.sin": "sin",
    "tir.cos": "cos", "tir.tan": "tan", "tir.tanh": "tanh", "tir.sinh": "sinh", "tir.cosh": "cosh",
    "tir.asin": "asin", "tir.acos": "acos", "tir.atan": "atan", "tir.asinh": "asinh", "tir.acosh": "acosh",
    "tir.atanh": "atanh", "tir.erf": "erf",
}
_FLOAT_BINARY = {"tir.pow": "pow", "tir.fmod": "fmod", "tir.atan2": "atan2", "tir.hypot": "hypot",
                 "tir.copysign": "copysign", "tir.nextafter": "nextafter"}
_FLOAT_PREDICATES = {"tir.isnan": "isnan", "tir.isinf": "isinf", "tir.isfinite": "isfinite"}
_BITWISE = {"tir.bitwise_and": "&", "tir.bitwise_or": "|", "tir.bitwise_xor": "^", "tir.shift_left": "<<",
            "tir.shift_right": ">>"}
_COMPARE = {tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">="}
_ARITH = {tir.Add: "+", tir.Sub: "-", tir.Mul: "*"}

class ExprGen:
    """The expressions of a kernel being printed (mixed into `kernel.KernelGen`)."""

    def expr(self, e) -> str:
        if self.lane_override is not None:
            text = self.lane_override(e)
            if text is not None:
                return text
        if isinstance(e, tir.Var):
            if self.lane_subst and e in self.lane_subst:
                return self.expr(self.lane_subst[e])
            for tag, var in THREAD_VARS.items():
                if e is var:
                    return f"((int){tag})"
            return self.name(e)
        if isinstance(e, tir.IntImm):
            return int_literal(e.dtype, e.value)
        if isinstance(e, tir.FloatImm):
            return float_literal(e.dtype, e.value)
        if isinstance(e, tir.BufferLoad):
            return self.traced(f"{self.name(e.buffer.data)}[{self.expr(e.indices[0])}]", self.buffer_space(e.buffer))
        if isinstance(e, tir.Cast):
            return self.cast(e.dtype, e.value)
        op = _ARITH.get(type(e))
        if op is not None:
            return self.narrow(e.dtype, f"({self.expr(e.a)} {op} {self.expr(e.b)})")
        op = _COMPARE.get(type(e))
        if op is not None:
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if isinstance(e, tir.And):
            return f"({self.expr(e.a)} && {self.expr(e.b)})"
        if isinstance(e, tir.Or):
            return f"({self.expr(e.a)} || {self.expr(e.b)})"
        if isinstance(e, tir.Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, tir.Div):
            return self.narrow(e.dtype, f"({self.expr(e.a)} / {self.expr(e.b)})")
        if isinstance(e, tir.Mod):
            if tir.is_float(e.dtype):
                return self.float_call("fmod", e.dtype, [e.a, e.b])
            return self.narrow(e.dtype, f"({self.expr(e.a)} % {self.expr(e.b)})")
        if isinstance(e, (tir.FloorDiv, tir.FloorMod)):
            return self.floor_divmod(e)
        if isinstance(e, (tir.Min, tir.Max)):
            return self.combine_text("max" if isinstance(e, tir.Max) else "min", e.dtype, self.expr(e.a),
                                      self.expr(e.b))
        if isinstance(e, tir.Select):
            return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if isinstance(e, tir.Let):
            return self.expr(substitute(e.body, {e.var: e.value}))
        if isinstance(e, tir.Call):
            return self.call(e)
        raise GPULoweringError(f"the CUDA backend cannot print a {type(e).__name__}")

    def narrow(self, dtype: str, text: str) -> str:
        """Arithmetic on 8- and 16-bit integers happens in int; wrap it back."""
        return f"(({ctype(dtype)}){text})" if dtype in NARROW_INTS else text

    def cast(self, dtype: str, value) -> str:
        src = value.dtype
        x = self.expr(value)
        if src == dtype:
            return x
        if dtype in HALF_TYPES:
            to_half = HALF_TYPES[dtype][0]
            if src in HALF_TYPES:
                x = f"{HALF_TYPES[src][1]}({x})"
            return f"{to_half}((float)({x}))"
        if src in HALF_TYPES:
            f = f"{HALF_TYPES[src][1]}({x})"
            return f"({f} != 0.0f)" if dtype == "bool" else f"(({ctype(dtype)}){f})"
        if dtype == "bool":
            return f"({x} != 0)"
        return f"(({ctype(dtype)}){x})"

    def floor_divmod(self, e) -> str:
        div = isinstance(e, tir.FloorDiv)
        if tir.is_float(e.dtype):
            q = self.float_call("floor", e.dtype, [tir.Div(e.dtype, e.a, e.b)])
            if div:
                return q
            return f"({self.expr(e.a)} - {q} * {self.expr(e.b)})"
        a, b = self.expr(e.a), self.expr(e.b)
        if self.nonneg(e.a) and self.nonneg(e.b):
            return self.narrow(e.dtype, f"({a} {'/' if div else '%'} {b})")
        fn = "tvms_floordiv" if div else "tvms_floormod"
        return f"{fn}<{ctype(e.dtype)}>({a}, {b})"

    def nonneg(self, e) -> bool:
        if e.dtype.startswith("uint"):
            return True
        lo, _ = const_int_bound(e, {k: (v[0], v[1]) for k, v in self.ranges.items()})
        return isinstance(lo, int) and lo >= 0

    def float_call(self, fn: str, dtype: str, args: list) -> str:
        """``fn`` from CUDA's math library at ``dtype``: ``expf`` for float32, ``exp`` for
        float64, through float for float16/bfloat16."""
        if dtype == "float64":
            return f"{fn}({', '.join(self.expr(a) for a in args)})"
        if dtype == "float32":
            return f"{fn}f({', '.join(self.expr(a) for a in args)})"
        if dtype in HALF_TYPES:
            to_half, to_float = HALF_TYPES[dtype]
            inner = ", ".join(f"{to_float}({self.expr(a)})" if a.dtype == dtype else f"(float)({self.expr(a)})"
                              for a in args)
            return f"{to_half}({fn}f({inner}))"
        raise GPULoweringError(f"'{fn}' is not defined for dtype {dtype}")

    def call(self, e: tir.Call) -> str:
        op, args = e.op, e.args
        if op in _FLOAT_UNARY and tir.is_float(e.dtype):
            return self.float_call(_FLOAT_UNARY[op], e.dtype, args)
        if op in _FLOAT_BINARY and tir.is_float(e.dtype):
            return self.float_call(_FLOAT_BINARY[op], e.dtype, args)
        if op == "tir.pow" and tir.is_int(e.dtype):
            # By repeated squaring, not through a double: CUDA's pow is within 2 ulp, not exact
            # (an H200 gave pow(3.0, 1.0) = 2.999..., which truncates to 2).
            t = ctype(e.dtype)
            return f"tvms_ipow<{t}>(({t}){self.expr(args[0])}, ({t}){self.expr(args[1])})"
        if op in _FLOAT_PREDICATES:
            x = args[0]
            if tir.is_int(x.dtype):
                return "false" if op != "tir.isfinite" else "true"
            text = f"{HALF_TYPES[x.dtype][1]}({self.expr(x)})" if x.dtype in HALF_TYPES else self.expr(x)
            return f"{_FLOAT_PREDICATES[op]}({text})"
        if op in ("tir.if_then_else",):
            return f"({self.expr(args[0])} ? {self.expr(args[1])} : {self.expr(args[2])})"
        if op == "tir.likely":
            return self.expr(args[0])
        if op == CHECK_INDEX:
            return self.check_index(e)
        if op in _BITWISE:
            return self.narrow(e.dtype, f"({self.expr(args[0])} {_BITWISE[op]} {self.expr(args[1])})")
        if op == "tir.bitwise_not":
            return self.narrow(e.dtype, f"(~{self.expr(args[0])})")
        if op == "tir.popcount":
            fn = "__popcll" if dtype_bytes(args[0].dtype) == 8 else "__popc"
            return f"(({ctype(e.dtype)}){fn}({self.expr(args[0])}))"
        if op == "tir.clz":
            fn = "__clzll" if dtype_bytes(args[0].dtype) == 8 else "__clz"
            return f"(({ctype(e.dtype)}){fn}({self.expr(args[0])}))"
        if op in ("tir.max_value", "tir.min_value"):
            return limit_literal(e.dtype, op == "tir.max_value")
        if op == "tir.reinterpret":
            return self.reinterpret(e.dtype, args[0])
        if op == "tir.fabs" or op == "tir.abs":
            return self.float_call("fabs", e.dtype, args)
        if op in ("tir.call_extern", "tir.call_pure_extern"):
            fname = args[0].value if isinstance(args[0], tir.StringImm) else str(args[0])
            return f"{fname}({', '.join(self.expr(a) for a in args[1:])})"
        if op in WMMA_OPS:
            return self.wmma(op, args)
        if op in PTX_OPS:
            return self.ptx(e)
        if op == "tir.address_of":  # the element's address: no access of it (untraced)
            load = args[0]
            if not isinstance(load, tir.BufferLoad):
                raise GPULoweringError("T.address_of takes a buffer element")
            return f"(&{self.name(load.buffer.data)}[{self.expr(load.indices[0])}])"
        if op == "tir.tvm_access_ptr":  # (type annotation, data, offset, extent, access mask)
            t = ctype(args[0].dtype)
            return f"(({t}*){self.expr(args[1])} + {self.expr(args[2])})"
        raise GPULoweringError(f"the CUDA backend does not know the intrinsic {op}")
    def reinterpret(self, dtype: str, x) -> str:
        pairs = {("float32", "int32"): "__int_as_float", ("int32", "float32"): "__float_as_int",
                 ("float32", "uint32"): "__uint_as_float", ("uint32", "float32"): "__float_as_uint",
                 ("float64", "int64"): "__longlong_as_double", ("int64", "float64"): "__double_as_longlong"}
        fn = pairs.get((dtype, x.dtype))
        if fn is None:
            if dtype_bytes(dtype) == dtype_bytes(x.dtype) and dtype in CTYPES and x.dtype in CTYPES:
                return f"(*({ctype(dtype)}*)&({self.expr(x)}))"
            raise GPULoweringError(f"cannot reinterpret {x.dtype} as {dtype}")
        return f"{fn}({self.expr(x)})"
