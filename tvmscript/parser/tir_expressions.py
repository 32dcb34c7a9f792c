"""TensorIR expressions: names, literals, operators, comparisons, ``a if c else b`` and calls.

Python's operators build the TIR node of `tir_names.BINARY_OPS` and its siblings, after
bringing both operands to one dtype as TVM does (`_promote`: a bare literal takes the other
side's dtype, else the narrower type is cast to the wider). A call is a ``T.*`` handler of
`tir_calls.EXPR_CALLS`, a typed literal or cast (``T.float32(x)``), an intrinsic
(`tir.INTRINSICS`), a call of another prim_func of the module, or a Python helper from the scope
around TVMScript written in Python. A buffer load is read with the buffers (tir_buffers.py).
"""

from __future__ import annotations

import math

from ..ir import tir
from ..diagnostics import did_you_mean
from . import ast
from .arguments import dotted_name
from .tir_names import BINARY_OPS, BIT_OPS, COMPARE_OPS, DTYPE_NAMES


class TIRExpressions:
    """The expressions of `PrimFuncBuilder` (tir_builder.py), one method per form, with the
    typing rules they share: literals take the dtype around them (`_promote`, `_coerce`)."""

    def _condition(self, node) -> tir.PrimExpr:
        e = self.expr(node)
        if e.dtype != "bool":
            if tir.is_int(e.dtype):
                return tir.NE("bool", e, tir.IntImm(e.dtype, 0))
            raise self.error(f"a condition must be a boolean, not {e.dtype}", node)
        return e

    def _coerce(self, value: tir.PrimExpr, dtype: str, node) -> tir.PrimExpr:
        """Make ``value`` of ``dtype``: literals convert, other values must already match."""
        if value.dtype == dtype:
            return value
        if id(value) in self.literals and isinstance(value, (tir.IntImm, tir.FloatImm)):
            if tir.is_float(dtype) or dtype == "bool" or not tir.is_int(dtype):
                return tir.const(value.value, dtype)
            # Into an integer type a literal must fit, as T.int8(...) written out must: `300`
            # stored into an int8 buffer would print as T.int8(300), which does not parse.
            v = value.value
            if isinstance(v, float) and not math.isfinite(v):
                raise self.error(f"{v} cannot be stored as {dtype}", node)
            return self._typed_number(int(v), dtype, node)
        if tir.is_int(dtype) and tir.is_int(value.dtype):
            return tir.Cast(dtype, value)
        raise self.error(f"type mismatch: expected a {dtype} value, got {value.dtype}", node)

    def _unify(self, lo, hi):
        """The two ends of a range in one dtype."""
        if lo.dtype != hi.dtype:
            return self._promote(lo, hi, None)
        return lo, hi

    # ------------------------------------------------------------------ forms
    def _name(self, node: ast.Name):
        value = self.scope.lookup(node.id)
        if value is None:
            if node.id == "True":
                return tir.IntImm("bool", 1)
            if node.id == "False":
                return tir.IntImm("bool", 0)
            value = self.ctx.py_prim(node.id)
        if value is None:
            raise self.error(f"undefined name '{node.id}'", node, did_you_mean(node.id, self._visible_names()))
        if isinstance(value, tir.PrimExpr):
            return value
        if isinstance(value, tir.Buffer):
            raise self.error(f"buffer '{node.id}' used as a value; index it, e.g. {node.id}[i]", node)
        raise self.error(f"'{node.id}' cannot be used in a TIR expression", node)

    def _constant(self, node: ast.Constant):
        v = node.value
        if isinstance(v, bool):
            c = tir.IntImm("bool", int(v))
        elif isinstance(v, int):
            c = self._int_literal(v, node)
        elif isinstance(v, float):
            c = tir.FloatImm("float32", v)
        elif isinstance(v, str):
            return tir.StringImm("handle", v)
        else:
            raise self.error("unsupported constant in TIR", node)
        self.literals.add(id(c))
        return c

    def _int_literal(self, v: int, node) -> tir.IntImm:
        """An integer written in the program: int32 when it fits, else int64; wider than int64
        it has no TIR type, and wrapping it silently (a loop of 2**70 iterations that runs 0
        times) would be worse than saying so."""
        if not -(2**63) <= v < 2**63:
            raise self.error(f"integer {v} does not fit in int64, the widest integer type", node)
        return tir.IntImm("int32" if -(2**31) <= v < 2**31 else "int64", v)

    def _binop(self, node: ast.BinOp):
        a = self.expr(node.left)
        b = self.expr(node.right)
        op = node.op
        if op == "**":
            if (isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm) and id(a) in self.literals
                    and id(b) in self.literals and b.value >= 0):
                # ``2**31`` in a program is the number, as Python (and TVM's parser) computes it.
                c = self._int_literal(a.value ** b.value if b.value < 4096 else 2**64, node)
                self.literals.add(id(c))
                return c
            a, b = self._promote(a, b, node)
            return tir.Call(a.dtype, "tir.pow", [a, b])
        if op in BIT_OPS:
            a, b = self._promote(a, b, node)
            if tir.is_float(a.dtype):
                raise self.error(f"operator '{op}' needs integer operands, not {a.dtype}", node)
            return tir.Call(a.dtype, BIT_OPS[op], [a, b])
        if op == "/":
            a, b = self._promote(a, b, node)
            return tir.Div(a.dtype, a, b)
        cls = BINARY_OPS.get(op)
        if cls is None:
            raise self.error(f"operator '{op}' is not supported in TIR", node)
        a, b = self._promote(a, b, node)
        return cls(a.dtype, a, b)

    def _promote(self, a, b, node):
        """Bring two operands to one dtype, as TVM does: bare literals take the other side's
        dtype; otherwise the narrower int is cast to the wider, an int to a float."""
        if a.dtype == b.dtype:
            return a, b
        a_lit = id(a) in self.literals
        b_lit = id(b) in self.literals
        # An int value with a float literal (`i - 1.5`) is a float operation, as in TVM: the int
        # is cast (the literal cannot become an int, and an int op with a float operand is no IR).
        if b_lit and not a_lit and isinstance(b, tir.FloatImm) and not tir.is_float(a.dtype):
            return tir.Cast(b.dtype, a), b
        if a_lit and not b_lit and isinstance(a, tir.FloatImm) and not tir.is_float(b.dtype):
            return a, tir.Cast(a.dtype, b)
        if b_lit and not a_lit:
            return a, self._lit(b, a.dtype)
        if a_lit and not b_lit:
            return self._lit(a, b.dtype), b
        if a_lit and b_lit:
            wider = _wider(a.dtype, b.dtype)
            return self._lit(a, wider), self._lit(b, wider)
        if a.dtype == "bool" or b.dtype == "bool":
            raise self.error(f"cannot combine {a.dtype} and {b.dtype} values", node)
        wider = _wider(a.dtype, b.dtype)
        if a.dtype != wider:
            a = tir.Cast(wider, a)
        if b.dtype != wider:
            b = tir.Cast(wider, b)
        return a, b

    def _lit(self, c, dtype):
        if tir.is_int(dtype) and isinstance(c, tir.FloatImm):
            return c  # a float literal stays float: the caller will see the mismatch
        out = tir.const(c.value, dtype)
        self.literals.add(id(out))
        return out

    def _unary(self, node: ast.UnaryOp):
        if node.op == "not":
            return tir.Not("bool", self._condition(node.operand))
        a = self.expr(node.operand)
        if node.op == "+":
            return a
        if node.op == "~":
            return tir.Call(a.dtype, "tir.bitwise_not", [a])
        if isinstance(a, (tir.IntImm, tir.FloatImm)):
            dtype = a.dtype
            if id(a) in self.literals and dtype == "int64" and a.value == 2**31:
                dtype = "int32"  # the literal -2147483648 is the smallest int32, as printed
            c = tir.const(-a.value, dtype)
            if id(a) in self.literals:
                self.literals.add(id(c))
            return c
        return tir.Mul(a.dtype, a, tir.const(-1, a.dtype))

    def _boolop(self, node: ast.BoolOp):
        cls = tir.And if node.op == "and" else tir.Or
        values = [self._condition(v) for v in node.values]
        result = values[0]
        for v in values[1:]:
            result = cls("bool", result, v)
        return result

    def _compare(self, node: ast.Compare):
        left = self.expr(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp)
            cls = COMPARE_OPS.get(op)
            if cls is None:
                raise self.error(f"operator '{op}' is not supported in TIR", node)
            a, b = self._promote(left, right, node)
            term = cls("bool", a, b)
            result = term if result is None else tir.And("bool", result, term)
            left = right
        return result

    def _attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name):
            value = self.scope.lookup(node.value.id)
            if isinstance(value, tir.Buffer) and node.attr == "data":
                return value.data if value.data is not None else tir.Var("handle", value.name)
        raise self.error(f"unsupported attribute '{dotted_name(node) or node.attr}' in TIR", node)

    def _ifexp(self, node: ast.IfExp):
        """``a if cond else b``: TVM's parser reads it as ``T.if_then_else(cond, a, b)``."""
        cond = self._condition(node.test)
        t, f = self._promote(self.expr(node.body), self.expr(node.orelse), node)
        return tir.Call(t.dtype, "tir.if_then_else", [cond, t, f])

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call):
        from .tir_calls import EXPR_CALLS

        name = dotted_name(node.func)
        if name is None:
            raise self.error("unsupported call in TIR", node.func)
        handler = EXPR_CALLS.get(name)
        if handler is not None:
            return handler(self, node, name)
        if isinstance(node.func, ast.Attribute) and self.ctx.is_module_ref(node.func.value):
            return self._subroutine_call(node)
        if name.startswith("T.") and name[2:] in DTYPE_NAMES:
            return self._typed(node, name[2:])
        if name.startswith("T.") and name[2:] in tir.INTRINSICS:
            op, nargs = tir.INTRINSICS[name[2:]]
            # Older TVM printouts spell the result dtype: ``T.exp(x, dtype="float32")``.
            declared = [kw for kw in node.keywords if kw.arg == "dtype"]
            for kw in node.keywords:
                if kw.arg != "dtype":
                    raise self.error(f"{name}() takes no keyword arguments but dtype", kw)
            if len(node.args) != nargs:
                raise self.error(f"{name}() takes {nargs} argument{'s' if nargs != 1 else ''} but {len(node.args)} were given", node)
            args = [self.expr(a) for a in node.args]
            if nargs == 2:
                args = list(self._promote(args[0], args[1], node))
            dtype = "bool" if op in tir.BOOL_RESULT_INTRINSICS else args[0].dtype
            if declared and self._dtype(declared[0].value) != dtype:
                raise self.error(f"{name}() on a {args[0].dtype} value gives {dtype}, not "
                                 f"{self._dtype(declared[0].value)}", declared[0])
            return tir.Call(dtype, op, args)
        if name.startswith("T."):
            known = [f"T.{n}" for n in tir.INTRINSICS] + [f"T.{n}" for n in DTYPE_NAMES] + list(EXPR_CALLS)
            raise self.error(f"unknown function '{name}'", node.func, did_you_mean(name, known))
        helper = self.ctx.py_value(name) if isinstance(node.func, ast.Name) else None
        if callable(helper) and not isinstance(helper, type):
            return self._python_helper(helper, node, name)
        raise self.error(f"undefined function '{name}'", node.func)

    def _subroutine_call(self, node: ast.Call) -> tir.Call:
        """``Module.subroutine(A.data, 16)``: a call of another prim_func of this module; its
        dtype is the callee's return type (``void`` without one)."""
        callee = node.func.attr
        if self.ctx.module_kinds.get(callee) != "tir":
            known = [n for n, k in self.ctx.module_kinds.items() if k == "tir"]
            raise self.error(f"the module has no T.prim_func named '{callee}'", node.func, did_you_mean(callee, known))
        if node.keywords:
            raise self.error(f"{callee}() takes no keyword arguments", node.keywords[0])
        fdef = self.ctx.module_defs[callee]
        returns = fdef.returns
        none = returns is None or (isinstance(returns, ast.Constant) and returns.value is None) or dotted_name(returns) == "None"
        dtype = "void" if none else self._dtype(returns)
        if len(node.args) != len(fdef.args):
            raise self.error(f"{callee}() takes {len(fdef.args)} arguments but {len(node.args)} were given", node)
        return tir.Call(dtype, self.ctx.module_names[callee], [self.expr(a) for a in node.args])

    def _python_helper(self, helper, node: ast.Call, name: str) -> tir.PrimExpr:
        """``idx(i, j)`` with ``def idx(i, j): return i * 4 + j`` in the Python scope: the helper
        runs on the arguments' TIR expressions (TVM's macro-like Python helpers) and its result
        is spliced in."""
        args = [self.expr(a) for a in node.args]
        kwargs = {kw.arg: self.expr(kw.value) for kw in node.keywords}
        try:
            result = helper(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - any failure of user code, reported at the call
            raise self.error(f"the Python function '{name}' failed: {type(err).__name__}: {err}", node) from None
        value = self.ctx.py_prim_of(result)
        if not isinstance(value, tir.PrimExpr):
            raise self.error(f"the Python function '{name}' returned {result!r}, not a TIR expression", node)
        return value

    def _typed_number(self, v, dtype: str, arg) -> tir.PrimExpr:
        """The literal ``T.<dtype>(v)`` of a Python number, range-checked for integer types."""
        if tir.is_float(dtype):
            return tir.FloatImm(dtype, float(v))
        if dtype == "bool":
            return tir.IntImm("bool", int(bool(v)))
        if isinstance(v, float) and not v.is_integer():
            raise self.error(f"T.{dtype} needs an integer value, not {v!r}", arg)
        v = int(v)
        bits = int(dtype.lstrip("uint")) if dtype != "handle" else 64
        lo, hi = (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        if not lo <= v <= hi:
            raise self.error(f"{v} is out of range for T.{dtype} ({lo} to {hi})", arg)
        return tir.IntImm(dtype, v)

    def _typed(self, node: ast.Call, dtype: str):
        """``T.float32(0.5)`` is a typed literal; ``T.float32(x)`` a cast."""
        if node.keywords:
            raise self.error(f"T.{dtype}() takes no keyword arguments", node.keywords[0])
        if len(node.args) != 1:
            raise self.error(f"T.{dtype}() takes 1 argument but {len(node.args)} were given", node)
        arg = node.args[0]
        lit = arg
        sign = 1
        if isinstance(arg, ast.UnaryOp) and arg.op == "-" and isinstance(arg.operand, ast.Constant):
            lit, sign = arg.operand, -1
        if isinstance(lit, ast.Name) and self.scope.lookup(lit.id) is None:
            py = self.ctx.py_value(lit.id)
            if isinstance(py, (int, float)) and not isinstance(py, bool):
                # T.float32(scale), scale a Python number: a typed literal, as if written here
                lit = ast.Constant(py, lit.line, lit.col, lit.end_line, lit.end_col)
        if isinstance(lit, ast.Constant):
            v = lit.value
            if isinstance(v, str) and tir.is_float(dtype) and v in ("inf", "-inf", "nan"):
                return tir.FloatImm(dtype, float(v))
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return self._typed_number(sign * v, dtype, arg)
        if isinstance(lit, ast.Name) and lit.id in ("True", "False") and self.scope.lookup(lit.id) is None:
            return tir.IntImm(dtype if dtype == "bool" else dtype, int(lit.id == "True"))
        value = self.expr(arg)
        if isinstance(value, tir.IntImm) and id(value) in self.literals:
            return self._typed_number(value.value, dtype, arg)  # a folded constant: T.int64(2**40)
        if isinstance(value, tir.StringImm):
            raise self.error(f"T.{dtype}() takes a number or an expression, not a string", arg)
        if value.dtype == dtype:
            return value
        return tir.Cast(dtype, value)


_INT_RANK = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3, "int64": 4, "uint64": 4}
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _wider(a: str, b: str) -> str:
    if tir.is_float(a) and tir.is_float(b):
        return a if _FLOAT_RANK.get(a, 0) >= _FLOAT_RANK.get(b, 0) else b
    if tir.is_float(a):
        return a
    if tir.is_float(b):
        return b
    return a if _INT_RANK.get(a, 0) >= _INT_RANK.get(b, 0) else b


def folded_sub(hi, lo):
    """``hi - lo`` (a range's extent), folded: of two constants, of ``lo`` 0, and of
    ``hi`` written ``lo + n``, which is ``n``."""
    if isinstance(hi, tir.IntImm) and isinstance(lo, tir.IntImm):
        return tir.IntImm(hi.dtype, hi.value - lo.value)
    if isinstance(lo, tir.IntImm) and lo.value == 0:
        return hi
    if isinstance(hi, tir.Add) and _same_expr(hi.a, lo):
        # ``range(n, n + 10)`` (how a loop from n of extent 10 prints) has extent 10, not
        # ``n + 10 - n``: reading back what the printer wrote gives the same loop.
        return hi.b
    return tir.Sub(hi.dtype, hi, lo)


def _same_expr(a, b) -> bool:
    """The same expression over the same variables (variables compare by identity)."""
    if a is b:
        return True
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, (tir.IntImm, tir.FloatImm)):
        return a.value == b.value
    if isinstance(a, tir.BinaryOp):
        return _same_expr(a.a, b.a) and _same_expr(a.b, b.b)
    if isinstance(a, tir.Cast):
        return _same_expr(a.value, b.value)
    if isinstance(a, tir.BufferLoad):
        return a.buffer is b.buffer and len(a.indices) == len(b.indices) and all(
            _same_expr(x, y) for x, y in zip(a.indices, b.indices))
    if isinstance(a, tir.Call):
        return a.op == b.op and len(a.args) == len(b.args) and all(
            _same_expr(x, y) for x, y in zip(a.args, b.args))
    return False
