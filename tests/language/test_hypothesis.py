"""Property tests: printing then parsing random valid IR gives the same IR back.

Three generators:

* TIR built directly from node classes (`tvmscript.tir`): expressions of mixed dtypes with every
  node kind the printer prints, inside a prim_func, and statements (loops of every kind, if/else,
  blocks with remapped and spatial axes, T.init, alloc_buffer, LetStmt, assert, while). Building
  the IR first tests the printer hardest: ``parse(print(ir))`` must be *structurally equal to
  ir*, so a missing parenthesis (``a - (b - c)``) or a lost cast shows up, and the print must be
  a fixed point.
* Relax source text (`R.add`, `R.multiply`, `R.permute_dims`, `R.matmul`, `R.nn.relu`, tuples,
  several dataflow blocks, symbolic dims): ``P = print(parse(X))`` is a fixed point and
  ``parse(P)`` is structurally equal to ``parse(X)``.
* Python-subset expression text: the syntax layer's operator tree must match Python's own
  ``ast.parse`` (precedence, associativity, chained comparisons, unary minus, ``not``, ``**``).

Runs derandomized (tests/conftest.py). ``TVMS_HYPOTHESIS_SCALE=20 HYPOTHESIS_PROFILE=explore``
runs 20x the examples with fresh randomness.
"""

from __future__ import annotations

import ast as pyast
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmscript as tvms
from tvmscript import relax, tir
from tvmscript.ir import structural_equal
from tvmscript.parser import ast as tast
from tvmscript.parser.syntax import parse_syntax

SCALE = int(os.environ.get("TVMS_HYPOTHESIS_SCALE", "1"))


def examples(n: int):
    return settings(max_examples=n * SCALE)


class Printed:
    """A generated IR node that shows as its TVMScript in Hypothesis' reports."""

    def __init__(self, node) -> None:
        self.node = node

    def __repr__(self) -> str:
        try:
            return "<IR printed as>\n" + self.node.script()
        except Exception as err:  # noqa: BLE001 - the report must not fail
            return f"<IR that does not print: {err!r}>"


def check_ir_round_trip(node):
    """print -> parse gives back ``node`` (structurally), and the print is a fixed point."""
    if isinstance(node, Printed):
        node = node.node
    text = node.script()
    try:
        parsed = tvms.parse(text)
    except tvms.TVMScriptError as err:
        raise AssertionError(f"printed text does not parse: {err}\n{text}") from None
    assert structural_equal(parsed, node), f"reparsed IR differs from the printed IR:\n{text}"
    again = parsed.script()
    assert again == text, f"print is not a fixed point:\n{text}\n---\n{again}"


def check_text_round_trip(source: str):
    """P = print(parse(X)); print(parse(P)) == P and parse(P) == parse(X) structurally."""
    original = tvms.parse(source)
    printed = original.script()
    try:
        reparsed = tvms.parse(printed)
    except tvms.TVMScriptError as err:
        raise AssertionError(f"printed text does not parse: {err}\n{printed}") from None
    assert reparsed.script() == printed, printed
    assert structural_equal(reparsed, original), f"{source}\n---\n{printed}"


# ============================================================================ TIR expressions

NUMERIC = ("int32", "int64", "float32", "float16")
DTYPES = NUMERIC + ("bool",)
BUFFER_NAMES = {"int32": "I", "int64": "L", "float32": "F", "float16": "H", "bool": "C"}
SCALAR_NAMES = {"int32": ("a", "b"), "int64": ("l",), "float32": ("x", "y"), "float16": ("h",), "bool": ("p",)}

INT32_VALUES = st.one_of(
    st.integers(-20, 20), st.sampled_from([2**31 - 1, -(2**31), 2**16, -(2**16)])
)
INT64_VALUES = st.one_of(
    st.integers(-20, 20), st.sampled_from([2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**40])
)
ODD_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-5, 0.1, -0.1, 3.4e38, -3.4e38, 1e17, 1e16, 123456789.0,
    1.5e-7, 0.70710678118654757, 65504.0, 2.5e-320, 1.7976931348623157e308,
    math.inf, -math.inf, math.nan,
]
FLOAT_VALUES = st.one_of(
    st.sampled_from(ODD_FLOATS),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)

FLOAT_UNARY = ("tir.exp", "tir.log", "tir.sqrt", "tir.tanh", "tir.sigmoid", "tir.fabs", "tir.floor",
               "tir.ceil", "tir.round", "tir.erf", "tir.sin", "tir.rsqrt")
FLOAT_BINARY = ("tir.pow", "tir.atan2", "tir.fmod", "tir.copysign")
INT_UNARY = ("tir.bitwise_not", "tir.abs", "tir.popcount")
INT_BINARY = ("tir.shift_left", "tir.shift_right", "tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor")
FLOAT_TESTS = ("tir.isnan", "tir.isinf", "tir.isfinite")
ARITH = (tir.Add, tir.Sub, tir.Mul, tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod, tir.Min, tir.Max)
COMPARE = (tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE)


class Env:
    """The parameters a generated prim_func offers its expressions: one scalar or two per dtype
    and one 1-D buffer per dtype."""

    def __init__(self) -> None:
        self.scalars = {dt: [tir.Var(dt, n) for n in names] for dt, names in SCALAR_NAMES.items()}
        self.buffers = {dt: tir.Buffer(BUFFER_NAMES[dt], [tir.IntImm("int32", 16)], dt) for dt in DTYPES}
        for buf in self.buffers.values():
            buf.data = tir.Var("handle", buf.name)
        # Extra integer variables visible at this point (loop variables, block iterators, lets).
        self.locals: dict[str, list] = {"int32": [], "int64": []}
        # Buffers of symbolic shape (printed as T.match_buffer), set by `with_matched`.
        self.matched: list = []

    def with_matched(self, draw) -> None:
        """Add 2-D float32 buffers whose first dimension is the scalar parameter ``a`` or a
        variable of their own (``n = T.int64()`` before the match_buffer)."""
        for name in draw(st.sampled_from([["M"], ["M", "N"]])):
            dim = draw(st.sampled_from([self.scalars["int32"][0], tir.Var("int64", "n"), tir.Var("int32", "n")]))
            buf = tir.Buffer(name, [dim, tir.IntImm(dim.dtype, 4)], "float32")
            buf.data = tir.Var("handle", name.lower())
            self.matched.append(buf)

    def prim_func(self, body) -> tir.PrimFunc:
        params, buffer_map = [], {}
        for buf in [self.buffers[dt] for dt in DTYPES] + self.matched:
            if buf.data is None:
                buf.data = tir.Var("handle", buf.name)
            params.append(buf.data)
            buffer_map[buf.data] = buf
        for dt in DTYPES:
            params.extend(self.scalars[dt])
        if _contains_block(body) or self.root_allocs:
            block = tir.Block("root", [], [], [], body, alloc_buffers=list(self.root_allocs))
            body = tir.BlockRealize([], tir.IntImm("bool", 1), block)
        return tir.PrimFunc(params, buffer_map, body, attrs={"global_symbol": "main"})

    root_allocs: list = []


def _contains_block(s) -> bool:
    if isinstance(s, tir.BlockRealize):
        return True
    if isinstance(s, tir.SeqStmt):
        return any(_contains_block(x) for x in s.seq)
    if isinstance(s, (tir.For, tir.While, tir.LetStmt, tir.AssertStmt)):
        return _contains_block(s.body)
    if isinstance(s, tir.IfThenElse):
        return _contains_block(s.then_case) or (s.else_case is not None and _contains_block(s.else_case))
    return False


def const(draw, dtype: str) -> tir.PrimExpr:
    if dtype == "bool":
        return tir.IntImm("bool", draw(st.integers(0, 1)))
    if dtype == "int32":
        return tir.IntImm("int32", draw(INT32_VALUES))
    if dtype == "int64":
        return tir.IntImm("int64", draw(INT64_VALUES))
    return tir.FloatImm(dtype, draw(FLOAT_VALUES))


def leaf(draw, env: Env, dtype: str) -> tir.PrimExpr:
    kind = draw(st.sampled_from(["var", "const", "load"]))
    if kind == "var":
        return draw(st.sampled_from(env.scalars[dtype] + env.locals.get(dtype, [])))
    if kind == "const":
        return const(draw, dtype)
    return tir.BufferLoad(dtype, env.buffers[dtype], [index(draw, env)])


def index(draw, env: Env) -> tir.PrimExpr:
    return draw(st.sampled_from([tir.IntImm("int32", draw(st.integers(0, 15)))] + env.scalars["int32"] + env.locals["int32"]))


def expr(draw, env: Env, dtype: str, depth: int) -> tir.PrimExpr:
    if depth <= 0:
        return leaf(draw, env, dtype)
    sub = lambda dt: expr(draw, env, dt, depth - 1 - draw(st.integers(0, 1)))  # noqa: E731
    if dtype == "bool":
        kind = draw(st.sampled_from(["leaf", "cmp", "cmp_bool", "and", "or", "not", "select", "test", "ite"]))
        if kind == "cmp":
            dt = draw(st.sampled_from(NUMERIC))
            return draw(st.sampled_from(COMPARE))("bool", sub(dt), sub(dt))
        if kind == "cmp_bool":  # comparisons of comparisons: (a < b) == (c < d)
            return draw(st.sampled_from([tir.EQ, tir.NE]))("bool", sub("bool"), sub("bool"))
        if kind == "and":
            return tir.And("bool", sub("bool"), sub("bool"))
        if kind == "or":
            return tir.Or("bool", sub("bool"), sub("bool"))
        if kind == "not":
            return tir.Not("bool", sub("bool"))
        if kind == "select":
            return tir.Select("bool", sub("bool"), sub("bool"), sub("bool"))
        if kind == "ite":
            return tir.Call("bool", "tir.if_then_else", [sub("bool"), sub("bool"), sub("bool")])
        if kind == "test":
            dt = draw(st.sampled_from(["float32", "float16"]))
            return tir.Call("bool", draw(st.sampled_from(FLOAT_TESTS)), [sub(dt)])
        return leaf(draw, env, dtype)
    is_float = tir.is_float(dtype)
    kind = draw(st.sampled_from(["leaf", "arith", "arith", "arith", "neg", "select", "ite", "cast", "call", "call2"]))
    if kind == "arith":
        cls = draw(st.sampled_from(ARITH))
        return cls(dtype, sub(dtype), sub(dtype))
    if kind == "neg":  # how the parser reads `-e`
        return tir.Mul(dtype, sub(dtype), tir.const(-1, dtype))
    if kind == "select":
        return tir.Select(dtype, sub("bool"), sub(dtype), sub(dtype))
    if kind == "ite":
        return tir.Call(dtype, "tir.if_then_else", [sub("bool"), sub(dtype), sub(dtype)])
    if kind == "cast":
        return tir.Cast(dtype, sub(draw(st.sampled_from(DTYPES))))
    if kind == "call":
        op = draw(st.sampled_from(FLOAT_UNARY if is_float else INT_UNARY))
        return tir.Call(dtype, op, [sub(dtype)])
    if kind == "call2":
        op = draw(st.sampled_from(FLOAT_BINARY if is_float else INT_BINARY))
        return tir.Call(dtype, op, [sub(dtype), sub(dtype)])
    return leaf(draw, env, dtype)


@st.composite
def expr_funcs(draw):
    """A prim_func storing a few random expressions, each into the buffer of its dtype."""
    env = Env()
    stores = []
    for _ in range(draw(st.integers(1, 4))):
        dtype = draw(st.sampled_from(DTYPES))
        value = expr(draw, env, dtype, draw(st.integers(0, 4)))
        stores.append(tir.BufferStore(env.buffers[dtype], value, [index(draw, env)]))
    return Printed(env.prim_func(tir.seq(stores)))


@examples(300)
@given(expr_funcs())
def test_tir_expressions_round_trip(func):
    check_ir_round_trip(func)


# Precedence cases worth having by name (the generator finds them too, but slowly).
def _v(name, dt="int32"):
    return tir.Var(dt, name)


_a, _b, _c = _v("a"), _v("b"), _v("c")
_x, _y = _v("x", "float32"), _v("y", "float32")
_p = _v("p", "bool")
PRECEDENCE_CASES = {
    "a - (b - c)": tir.Sub("int32", _a, tir.Sub("int32", _b, _c)),
    "a - b - c": tir.Sub("int32", tir.Sub("int32", _a, _b), _c),
    "(a + b) * c": tir.Mul("int32", tir.Add("int32", _a, _b), _c),
    "a * (b // c)": tir.Mul("int32", _a, tir.FloorDiv("int32", _b, _c)),
    "a // (b * c)": tir.FloorDiv("int32", _a, tir.Mul("int32", _b, _c)),
    "a % (b % c)": tir.FloorMod("int32", _a, tir.FloorMod("int32", _b, _c)),
    "x / (y / x)": tir.Div("float32", _x, tir.Div("float32", _y, _x)),
    "-(a + b)": tir.Mul("int32", tir.Add("int32", _a, _b), tir.IntImm("int32", -1)),
    "a - -3": tir.Sub("int32", _a, tir.IntImm("int32", -3)),
    "-3 * a": tir.Mul("int32", tir.IntImm("int32", -3), _a),
    "-2147483648 < a": tir.LT("bool", tir.IntImm("int32", -(2**31)), _a),
    "(a < b) == (b < c)": tir.EQ("bool", tir.LT("bool", _a, _b), tir.LT("bool", _b, _c)),
    "(a < b) < c": tir.NE("bool", tir.LT("bool", _a, _b), tir.LT("bool", _b, _c)),
    "not (p and p)": tir.Not("bool", tir.And("bool", _p, _p)),
    "(not p) == p": tir.EQ("bool", tir.Not("bool", _p), _p),
    "p and not p": tir.And("bool", _p, tir.Not("bool", _p)),
    "not not p": tir.Not("bool", tir.Not("bool", _p)),
    "p and (p or p)": tir.And("bool", _p, tir.Or("bool", _p, _p)),
    "(p or p) and p": tir.And("bool", tir.Or("bool", _p, _p), _p),
    "p or (p or p)": tir.Or("bool", _p, tir.Or("bool", _p, _p)),
    "p and (p and p)": tir.And("bool", _p, tir.And("bool", _p, _p)),
}


@pytest.mark.parametrize("name", list(PRECEDENCE_CASES))
def test_tir_precedence_cases(name):
    e = PRECEDENCE_CASES[name]
    env = Env()
    env.scalars = {"int32": [_a, _b, _c], "int64": [], "float32": [_x, _y], "float16": [], "bool": [_p]}
    store = tir.BufferStore(env.buffers[e.dtype], e, [tir.IntImm("int32", 0)])
    check_ir_round_trip(env.prim_func(store))


# ============================================================================ TIR statements

THREAD_TAGS = ["threadIdx.x", "threadIdx.y", "blockIdx.x", "vthread"]


class StmtGen:
    def __init__(self, draw, env: Env) -> None:
        self.draw = draw
        self.env = env
        self.n = 0
        self.in_block = False

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def int_expr(self, dtype="int32", depth=1):
        return expr(self.draw, self.env, dtype, depth)

    def seq(self, depth: int, tail_scoped: bool = True) -> tir.Stmt:
        """A statement sequence. A LetStmt/AssertStmt last in it scopes the rest of the body
        (``x: T.int32 = v``); anywhere else it has a body of its own (``with T.LetStmt(v) as x:``)."""
        draw = self.draw
        stmts = []
        for _ in range(draw(st.integers(1, 3))):
            if depth > 0 and draw(st.integers(0, 5)) == 0:
                stmts.append(self.scoped(depth))
            else:
                stmts.append(self.stmt(depth))
        if tail_scoped and depth > 0 and draw(st.booleans()):
            stmts.append(self.scoped(depth))
        return tir.seq(stmts)

    def scoped(self, depth: int) -> tir.Stmt:
        draw = self.draw
        if draw(st.booleans()):
            dtype = draw(st.sampled_from(["int32", "int64", "float32", "bool"]))
            value = expr(draw, self.env, dtype, 2)
            var = tir.Var(dtype, draw(st.sampled_from(["t", "a", "x", "v"])))
            if dtype in self.env.locals:
                self.env.locals[dtype].append(var)
                body = self.seq(depth - 1)
                self.env.locals[dtype].pop()
            else:
                body = self.seq(depth - 1)
            return tir.LetStmt(var, value, body)
        cond = expr(draw, self.env, "bool", 2)
        return tir.AssertStmt(cond, tir.StringImm("handle", draw(st.sampled_from(["msg", "n > 0", 'say "hi"\\']))), self.seq(depth - 1))

    def store(self) -> tir.Stmt:
        if self.env.matched and self.draw(st.integers(0, 3)) == 0:
            buf = self.draw(st.sampled_from(self.env.matched))
            dt = buf.shape[0].dtype
            ints = [v for v in self.env.scalars["int32"] + self.env.locals["int32"]]
            i = self.draw(st.sampled_from([tir.IntImm("int32", 0)] + ints))
            if dt == "int64":
                i = tir.Cast("int64", i)
            value = expr(self.draw, self.env, "float32", 2)
            return tir.BufferStore(buf, value, [i, tir.IntImm(dt, self.draw(st.integers(0, 3)))])
        dtype = self.draw(st.sampled_from(DTYPES))
        value = expr(self.draw, self.env, dtype, self.draw(st.integers(0, 2)))
        return tir.BufferStore(self.env.buffers[dtype], value, [index(self.draw, self.env)])

    def stmt(self, depth: int) -> tir.Stmt:
        draw = self.draw
        if depth <= 0:
            return self.store()
        kind = draw(st.sampled_from(["store", "for", "for", "if", "block", "evaluate", "while"]))
        if kind == "for":
            return self.loop(depth)
        if kind == "if":
            cond = expr(draw, self.env, "bool", 2)
            then = self.seq(depth - 1)
            orelse = self.seq(depth - 1) if draw(st.booleans()) else None
            return tir.IfThenElse(cond, then, orelse)
        if kind == "block":
            return self.block(depth, [])
        if kind == "evaluate":
            if draw(st.booleans()):
                bufs = [self.env.buffers[dt] for dt in DTYPES] + self.env.matched
                ptrs = [b.data for b in draw(st.lists(st.sampled_from(bufs), max_size=2))]
                name = tir.StringImm("handle", "f")
                return tir.Evaluate(tir.Call("int32", "tir.call_extern", [name] + ptrs + [self.int_expr(depth=1)]))
            return tir.Evaluate(self.int_expr(depth=2))
        if kind == "while":
            return tir.While(expr(draw, self.env, "bool", 1), self.seq(depth - 1))
        return self.store()

    def loop(self, depth: int) -> tir.Stmt:
        """One to three nested loops (perfect nests of serial loops print as T.grid)."""
        draw = self.draw
        loops = []
        for _ in range(draw(st.integers(1, 3))):
            dtype = draw(st.sampled_from(["int32", "int32", "int64"]))
            kind = draw(st.sampled_from(tir.FOR_KINDS + ("serial", "serial")))
            if draw(st.booleans()):
                lo = tir.IntImm(dtype, 0)
            elif draw(st.booleans()) or dtype == "int64":
                lo = tir.IntImm(dtype, draw(st.integers(-4, 8)))
            else:
                lo = draw(st.sampled_from(self.env.scalars["int32"] + self.env.locals["int32"]))
            if dtype == "int32" and draw(st.booleans()):
                extent = draw(st.sampled_from(self.env.scalars["int32"] + self.env.locals["int32"]))
            else:
                extent = tir.IntImm(dtype, draw(st.integers(1, 128)))
            var = tir.Var(dtype, draw(st.sampled_from(["i", "j", "k", "i0", "v"])))
            tag = draw(st.sampled_from(THREAD_TAGS)) if kind == "thread_binding" else None
            ann = {}
            if draw(st.integers(0, 4)) == 0:
                ann = {"pragma_unroll_explicit": draw(st.integers(0, 2))}
            loops.append(tir.For(var, lo, extent, kind, None, tag, ann))
            self.env.locals[dtype].append(var)
        body = self.block(depth, loops) if draw(st.booleans()) else self.seq(depth - 1)
        for l in reversed(loops):
            l.body = body
            body = l
            self.env.locals[l.loop_var.dtype].pop()
        return body

    def block(self, depth: int, loops: list) -> tir.Stmt:
        draw = self.draw
        iter_vars, values = [], []
        names = iter(["vi", "vj", "vk", "v0", "v1", "v2"])
        for loop in loops:
            if draw(st.integers(0, 3)) == 0:
                continue
            kind = draw(st.sampled_from("SSR"))
            if draw(st.booleans()):  # bound to its loop over the loop's range: T.axis.remap
                dom = tir.Range(loop.min, loop.extent)
                value = loop.loop_var
            else:
                dt = loop.loop_var.dtype
                dom = tir.Range(tir.IntImm(dt, draw(st.sampled_from([0, 0, 2]))), tir.IntImm(dt, draw(st.integers(1, 64))))
                value = draw(st.sampled_from([loop.loop_var, tir.Mul(dt, loop.loop_var, tir.IntImm(dt, 2))]))
            var = tir.Var(value.dtype, next(names))
            iter_vars.append(tir.IterVar(var, dom, kind))
            values.append(value)
        if not loops and draw(st.booleans()):
            var = tir.Var("int32", next(names))
            iter_vars.append(tir.IterVar(var, tir.Range(tir.IntImm("int32", 0), tir.IntImm("int32", 16)), "S"))
            values.append(self.int_expr(depth=1))
        for iv in iter_vars:
            self.env.locals.setdefault(iv.var.dtype, []).append(iv.var)
        allocs = []
        if draw(st.booleans()):
            dt = draw(st.sampled_from(["float32", "int32", "float16"]))
            scope = draw(st.sampled_from(["global", "shared", "local"]))
            name = draw(st.sampled_from(["S", "F", "tmp"]))
            allocs.append(tir.Buffer(name, [tir.IntImm("int32", 16)], dt, scope=scope, data=tir.Var("handle", name)))
        # Regions name buffers from outside the block (its own are not allocated yet there).
        reads = self.regions(draw(st.integers(0, 2)))
        writes = self.regions(draw(st.integers(0, 2)))
        saved = dict(self.env.buffers)
        for buf in allocs:
            self.env.buffers[buf.dtype] = buf
        body = self.seq(depth - 1, tail_scoped=False)
        init = self.seq(0) if draw(st.booleans()) else None
        self.env.buffers = saved
        for iv in iter_vars:
            self.env.locals[iv.var.dtype].pop()
        ann = {"meta_schedule.x": 1} if draw(st.integers(0, 4)) == 0 else {}
        block = tir.Block(draw(st.sampled_from(["B", "C", "compute"])), iter_vars, reads, writes, body, init, allocs, [], ann)
        predicate = tir.IntImm("bool", 1)
        if draw(st.integers(0, 3)) == 0:
            predicate = expr(draw, self.env, "bool", 1)
        return tir.BlockRealize(values, predicate, block)

    def regions(self, n: int) -> list:
        draw = self.draw
        out = []
        for _ in range(n):
            buf = self.env.buffers[draw(st.sampled_from(DTYPES))]
            if draw(st.booleans()):
                rng = tir.Range(tir.IntImm("int32", 0), tir.IntImm("int32", 16))
            else:
                i = index(draw, self.env)
                rng = tir.Range(i, tir.IntImm("int32", draw(st.sampled_from([1, 1, 4]))))
            out.append(tir.BufferRegion(buf, [rng]))
        return out


@st.composite
def stmt_funcs(draw):
    env = Env()
    if draw(st.booleans()):
        env.with_matched(draw)
    gen = StmtGen(draw, env)
    body = gen.seq(draw(st.integers(1, 3)))
    env.root_allocs = []
    if draw(st.integers(0, 3)) == 0:
        env.root_allocs = [tir.Buffer("G", [tir.IntImm("int32", 8), tir.IntImm("int32", 8)], "float32", data=tir.Var("handle", "G"))]
    return Printed(env.prim_func(body))


@examples(250)
@given(stmt_funcs())
def test_tir_statements_round_trip(func):
    check_ir_round_trip(func)


# ============================================================================ Relax functions

DIMS = st.one_of(st.integers(1, 8), st.sampled_from(["n", "m"]))


def _shape_text(shape) -> str:
    items = [f'"{d}"' if isinstance(d, str) else str(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


@st.composite
def relax_sources(draw):
    """A module with a Relax function: tensors of random rank and shape (symbolic ``n``/``m``
    too), one to three dataflow blocks of valid op calls, plain bindings between them, tuples and
    tuple indexing, some bindings annotated less precisely than inferred."""
    dtype = draw(st.sampled_from(["float32", "float16"]))
    shapes = [tuple(draw(st.lists(DIMS, min_size=1, max_size=3))) for _ in range(draw(st.integers(1, 3)))]
    # A weight fitting the first tensor for R.matmul: (k, j).
    shapes.append((shapes[0][-1], draw(DIMS)))
    params = [(f"x{i}", s) for i, s in enumerate(shapes)]
    lines = []
    # name -> ("tensor", shape or None when only the rank is known, ndim) | ("tuple", [values])
    env = {n: ("tensor", s, len(s)) for n, s in params}
    counter = [0]

    def tensors():
        return [n for n, v in env.items() if v[0] == "tensor"]

    def binding(pad: str, dataflow_vars: set | None):
        names = tensors()
        a = draw(st.sampled_from(names))
        _, sa, nda = env[a]
        kind = draw(st.sampled_from(["add", "mul", "relu", "permute", "matmul", "tuple", "getitem", "alias"]))
        counter[0] += 1
        target = f"lv{counter[0]}"
        value = ("tensor", sa, nda)
        if kind in ("add", "mul"):
            same = [n for n in names if sa is not None and env[n][1] == sa] or [a]
            b = draw(st.sampled_from(same))
            rhs = f"{'R.add' if kind == 'add' else 'R.multiply'}({a}, {b})"
        elif kind == "relu":
            rhs = f"R.nn.relu({a})"
        elif kind == "permute":
            perm = list(reversed(range(nda)))
            if draw(st.booleans()):
                rhs = f"R.permute_dims({a}, axes=None)"
            else:
                perm = draw(st.permutations(range(nda)))
                rhs = f"R.permute_dims({a}, axes={list(perm)})"
            value = ("tensor", tuple(sa[i] for i in perm) if sa is not None else None, nda)
        elif kind == "matmul":
            pairs = [
                (x, w) for x in names for w in names
                if env[x][1] is not None and env[w][1] is not None and len(env[w][1]) == 2
                and env[x][1][-1] == env[w][1][0]
            ]
            if pairs:
                x, w = draw(st.sampled_from(pairs))
                out = draw(st.sampled_from(["", ', out_dtype="void"', f', out_dtype="{dtype}"']))
                rhs = f"R.matmul({x}, {w}{out})"
                shape = env[x][1][:-1] + (env[w][1][1],)
                value = ("tensor", shape, len(shape))
            else:
                rhs = f"R.nn.relu({a})"
        elif kind == "tuple":
            items = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
            rhs = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            if draw(st.booleans()):
                rhs = rhs[1:-1]  # `t = a, b` is a tuple too
            value = ("tuple", [env[n] for n in items])
        elif kind == "getitem":
            tuples = [n for n, v in env.items() if v[0] == "tuple"]
            if tuples:
                t = draw(st.sampled_from(tuples))
                i = draw(st.integers(0, len(env[t][1]) - 1))
                rhs, value = f"{t}[{i}]", env[t][1][i]
            else:
                rhs = a
        else:
            rhs = a
        ann = ""
        if value[0] == "tensor" and draw(st.integers(0, 3)) == 0:
            # An annotation less precise than the inferred struct info is kept as written.
            choices = [f': R.Tensor(dtype="{dtype}", ndim={value[2]})', f": R.Tensor(ndim={value[2]})", ': R.Tensor']
            if value[1] is not None:
                choices.append(f': R.Tensor({_shape_text(value[1])}, dtype="{dtype}")')
            ann = draw(st.sampled_from(choices))
            if "ndim" in ann or ann == ": R.Tensor":
                value = ("tensor", None, value[2] if "ndim" in ann else -1)
        lines.append(f"{pad}{target}{ann} = {rhs}")
        env[target] = value
        if value[0] == "tensor" and value[2] < 0:
            env[target] = ("opaque",)  # rank unknown: only returned or aliased, not computed on
        if dataflow_vars is not None:
            dataflow_vars.add(target)

    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            binding("    ", None)
        lines.append("    with R.dataflow():")
        local: set = set()
        for _ in range(draw(st.integers(1, 5))):
            binding("        ", local)
        outs = draw(st.lists(st.sampled_from(sorted(local)), min_size=1, max_size=2, unique=True))
        lines.append(f"        R.output({', '.join(outs)})")
        for name in local - set(outs):
            del env[name]
    result = draw(st.lists(st.sampled_from(sorted(env)), min_size=1, max_size=2, unique=True))
    ret = result[0] if len(result) == 1 else "(" + ", ".join(result) + ")"
    lines.append(f"    return {ret}")
    sig = ", ".join(f'{n}: R.Tensor({_shape_text(s)}, dtype="{dtype}")' for n, s in params)
    func = ["@R.function", f"def main({sig}):"] + lines
    return "@I.ir_module\nclass Module:\n" + "\n".join("    " + l for l in func) + "\n"


@examples(150)
@given(relax_sources())
def test_relax_functions_round_trip(source):
    check_text_round_trip(source)


@st.composite
def relax_funcs(draw):
    """A Relax function built from node classes (struct info from the op registry's inference),
    with names chosen to collide: parameters, bindings and two *different* symbolic dims all
    reuse a few names, which the printer must make unique without changing the program."""
    from tvmscript.ir.op import get_op

    syms = [tir.Var("int64", "n"), tir.Var("int64", "n"), tir.Var("int64", "x")]
    dim = st.one_of(st.integers(1, 6).map(lambda v: tir.IntImm("int64", v)), st.sampled_from(syms))
    names = st.sampled_from(["x", "lv", "gv", "n"])
    dtype = draw(st.sampled_from(["float32", "int32"]))
    params = []
    for _ in range(draw(st.integers(1, 3))):
        shape = draw(st.lists(dim, min_size=1, max_size=3))
        params.append(relax.Var(draw(names), relax.TensorStructInfo(shape, dtype)))
    if draw(st.booleans()):  # a weight for R.matmul
        k = params[0].struct_info.shape[-1]
        params.append(relax.Var("w", relax.TensorStructInfo([k, draw(dim)], dtype)))
    visible = list(params)

    def op_call(name, args, attrs=None):
        op = get_op(name)
        attrs = attrs if attrs is not None else {a.name: a.default for a in op.attrs}
        sinfo = op.infer([relax.struct_info_of(a) for a in args], attrs)
        return relax.Call(relax.Op(op.name), list(args), attrs, [], sinfo)

    def value():
        tensors = [v for v in visible if isinstance(v.struct_info, relax.TensorStructInfo)]
        a = draw(st.sampled_from(tensors))
        kind = draw(st.sampled_from(["add", "multiply", "relu", "permute", "matmul", "tuple", "getitem"]))
        if kind in ("add", "multiply"):
            same = [t for t in tensors if tvms.ir.structural_equal(t.struct_info, a.struct_info)
                    and all(x is y for x, y in zip(t.struct_info.shape, a.struct_info.shape))]
            return op_call(f"relax.{kind}", [a, draw(st.sampled_from(same))])
        if kind == "permute":
            axes = draw(st.one_of(st.none(), st.permutations(range(a.struct_info.ndim)).map(list)))
            return op_call("relax.permute_dims", [a], {"axes": axes})
        if kind == "matmul":
            pairs = [(x, w) for x in tensors for w in tensors
                     if w.struct_info.ndim == 2 and x.struct_info.shape[-1] is w.struct_info.shape[0]
                     or (w.struct_info.ndim == 2 and isinstance(x.struct_info.shape[-1], tir.IntImm)
                         and isinstance(w.struct_info.shape[0], tir.IntImm)
                         and x.struct_info.shape[-1].value == w.struct_info.shape[0].value)]
            if pairs:
                x, w = draw(st.sampled_from(pairs))
                return op_call("relax.matmul", [x, w], {"out_dtype": draw(st.sampled_from(["void", dtype]))})
        if kind == "tuple":
            fields = draw(st.lists(st.sampled_from(tensors), min_size=1, max_size=3))
            return relax.Tuple(fields, relax.TupleStructInfo([f.struct_info for f in fields]))
        if kind == "getitem":
            tuples = [v for v in visible if isinstance(v.struct_info, relax.TupleStructInfo)]
            if tuples:
                t = draw(st.sampled_from(tuples))
                i = draw(st.integers(0, len(t.struct_info.fields) - 1))
                return relax.TupleGetItem(t, i, t.struct_info.fields[i])
        return op_call("relax.nn.relu", [a])

    blocks = []
    for _ in range(draw(st.integers(1, 3))):
        dataflow = draw(st.booleans())
        bindings, local = [], []
        for _ in range(draw(st.integers(1, 4))):
            v = value()
            var = (relax.DataflowVar if dataflow else relax.Var)(draw(names), relax.struct_info_of(v))
            bindings.append(relax.VarBinding(var, v))
            visible.append(var)
            local.append(var)
        if dataflow:
            outs = draw(st.lists(st.sampled_from(local), min_size=1, max_size=2, unique_by=id))
            for b in bindings:
                if any(b.var is o for o in outs):
                    b.var = relax.Var(b.var.name_hint, b.var.struct_info)
            # Re-point uses of the exported vars (they are plain Vars now).
            remap = {id(o): b.var for o, b in zip(local, bindings)}
            for b in bindings:
                _repoint(b.value, remap)
            outputs = [remap[id(o)] for o in outs]
            # After the block only its outputs (now plain Vars) are visible.
            visible[:] = [v for v in (remap.get(id(v), v) for v in visible) if not isinstance(v, relax.DataflowVar)]
            blocks.append(relax.DataflowBlock(bindings, outputs))
        elif blocks and type(blocks[-1]) is relax.BindingBlock:
            blocks[-1].bindings.extend(bindings)  # consecutive plain bindings form one block
        else:
            blocks.append(relax.BindingBlock(bindings))
    ret = draw(st.sampled_from(visible))
    body = relax.SeqExpr(blocks, ret, ret.struct_info)
    return Printed(relax.Function(params, body, ret.struct_info, {"global_symbol": "main"}))


def _repoint(e, remap):
    """Replace, in place, uses of vars that were re-created (DataflowVar -> Var)."""
    if isinstance(e, relax.Call):
        e.args = [remap.get(id(a), a) for a in e.args]
    elif isinstance(e, relax.Tuple):
        e.fields = [remap.get(id(a), a) for a in e.fields]
    elif isinstance(e, relax.TupleGetItem):
        e.tuple_value = remap.get(id(e.tuple_value), e.tuple_value)


@examples(150)
@given(relax_funcs())
def test_relax_ir_round_trip(func):
    check_ir_round_trip(func)


# ============================================================================ syntax layer vs Python

OPERANDS = st.sampled_from([
    "a", "b", "c", "x1", "2", "0", "3.5", "1e-5", ".5", "5.", "0x1F", "1_000", "'s'", "True", "None",
    "f(a)", "a[1]", "a.b", "T.int64(1)", "a[i, j]",
])
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@"]
COMPARES = ["<", ">", "==", "!=", "<=", ">=", "in", "not in", "is", "is not"]


@st.composite
def py_exprs(draw, depth=4):
    if depth <= 0:
        return draw(OPERANDS)
    kind = draw(st.sampled_from(["atom", "bin", "bin", "cmp", "bool", "not", "unary", "paren", "ifexp", "call"]))
    sub = lambda: draw(py_exprs(depth=depth - 1))  # noqa: E731

    def operand():
        # Python allows `not x` only where a whole test may stand: `a + not b` and `-not a` are
        # syntax errors, `a + (not b)` is fine.
        text = sub()
        return f"({text})" if text.startswith("not ") else text

    if kind == "bin":
        return f"{sub()} {draw(st.sampled_from(BINARY))} {operand()}"
    if kind == "cmp":
        parts = [sub()]
        for _ in range(draw(st.integers(1, 3))):
            parts += [draw(st.sampled_from(COMPARES)), operand()]
        return " ".join(parts)
    if kind == "bool":
        return f"{sub()} {draw(st.sampled_from(['and', 'or']))} {sub()}"
    if kind == "not":
        return f"not {sub()}"
    if kind == "unary":
        return f"{draw(st.sampled_from(['-', '+', '~']))}{operand()}"
    if kind == "paren":
        return f"({sub()})"
    if kind == "ifexp":
        # The test and the body of `x if c else y` cannot be bare conditionals themselves.
        test, body = operand(), operand()
        test, body = (f"({t})" if " if " in t else t for t in (test, body))
        return f"{body} if {test} else {sub()}"
    if kind == "call":
        return f"T.max({sub()}, {sub()})"
    return draw(OPERANDS)


_PY_BINOPS = {
    pyast.Add: "+", pyast.Sub: "-", pyast.Mult: "*", pyast.Div: "/", pyast.FloorDiv: "//",
    pyast.Mod: "%", pyast.Pow: "**", pyast.LShift: "<<", pyast.RShift: ">>", pyast.BitAnd: "&",
    pyast.BitOr: "|", pyast.BitXor: "^", pyast.MatMult: "@",
}
_PY_CMPOPS = {
    pyast.Lt: "<", pyast.Gt: ">", pyast.Eq: "==", pyast.NotEq: "!=", pyast.LtE: "<=",
    pyast.GtE: ">=", pyast.In: "in", pyast.NotIn: "not in", pyast.Is: "is", pyast.IsNot: "is not",
}
_PY_UNARY = {pyast.USub: "-", pyast.UAdd: "+", pyast.Invert: "~", pyast.Not: "not"}


def py_tree(n):
    """Python's AST as a nested tuple, in the shape `tvms_tree` gives the syntax layer's."""
    if isinstance(n, pyast.BinOp):
        return (_PY_BINOPS[type(n.op)], py_tree(n.left), py_tree(n.right))
    if isinstance(n, pyast.UnaryOp):
        return (_PY_UNARY[type(n.op)], py_tree(n.operand))
    if isinstance(n, pyast.BoolOp):
        return ("and" if isinstance(n.op, pyast.And) else "or", *[py_tree(v) for v in n.values])
    if isinstance(n, pyast.Compare):
        return ("cmp", py_tree(n.left), *[(_PY_CMPOPS[type(o)], py_tree(c)) for o, c in zip(n.ops, n.comparators)])
    if isinstance(n, pyast.Constant):
        return repr(n.value)
    if isinstance(n, pyast.Name):
        return n.id
    if isinstance(n, pyast.Attribute):
        return ("attr", py_tree(n.value), n.attr)
    if isinstance(n, pyast.Call):
        return ("call", py_tree(n.func), *[py_tree(a) for a in n.args])
    if isinstance(n, pyast.Subscript):
        return ("sub", py_tree(n.value), py_tree(n.slice))
    if isinstance(n, pyast.Tuple):
        return ("tuple", *[py_tree(e) for e in n.elts])
    if isinstance(n, pyast.IfExp):
        return ("ifexp", py_tree(n.test), py_tree(n.body), py_tree(n.orelse))
    raise TypeError(pyast.dump(n))


def tvms_tree(n):
    if isinstance(n, tast.BinOp):
        return (n.op, tvms_tree(n.left), tvms_tree(n.right))
    if isinstance(n, tast.UnaryOp):
        return (n.op, tvms_tree(n.operand))
    if isinstance(n, tast.BoolOp):
        return (n.op, *[tvms_tree(v) for v in n.values])
    if isinstance(n, tast.Compare):
        return ("cmp", tvms_tree(n.left), *[(o, tvms_tree(c)) for o, c in zip(n.ops, n.comparators)])
    if isinstance(n, tast.Constant):
        return repr(n.value)
    if isinstance(n, tast.Name):
        return n.id
    if isinstance(n, tast.Attribute):
        return ("attr", tvms_tree(n.value), n.attr)
    if isinstance(n, tast.Call):
        return ("call", tvms_tree(n.func), *[tvms_tree(a) for a in n.args])
    if isinstance(n, tast.Subscript):
        return ("sub", tvms_tree(n.value), tvms_tree(n.index))
    if isinstance(n, tast.Tuple):
        return ("tuple", *[tvms_tree(e) for e in n.elts])
    if isinstance(n, tast.IfExp):
        return ("ifexp", tvms_tree(n.test), tvms_tree(n.body), tvms_tree(n.orelse))
    if isinstance(n, tast.Name) and n.id in ("True", "False", "None"):
        return n.id
    raise TypeError(type(n).__name__)


@examples(400)
@given(py_exprs())
def test_syntax_operator_tree_matches_python(text):
    expected = py_tree(pyast.parse(text, mode="eval").body)
    stmts, _ = parse_syntax(f"r = {text}\n")
    assert len(stmts) == 1 and isinstance(stmts[0], tast.Assign)
    assert tvms_tree(stmts[0].value) == expected, text
