"""Hypothesis strategies that write whole .tvms files as text, following grammar/tvmscript.lark.

Used by tests/language/test_fuzz.py. Generating *text* (rather than IR, as tests/language/test_hypothesis.py does)
exercises the parser's whole front end: the forms the printer never writes (``T.Buffer[...]``,
``range``, ``T.sblock``, ``elif``, ``T.axis.spatial``, un-annotated bindings, nested calls), the
comments and blank lines a person puts anywhere, and the builder's checks.

Every strategy returns a `Program`: the text, and whether it is meant to be accepted
(``expect == "valid"``) or rejected (``"invalid"``, with the planted ``flaw`` named). Valid
programs are built to be semantically valid, so a rejection of one is a bug (in the generator or
in tvms); invalid ones carry exactly one well-defined mistake (an undefined name, a dtype or shape
mismatch, an index of the wrong arity, a call to a missing function, an unknown dtype) that must
be rejected with a located diagnostic.

Sizes stay small (a few functions, shapes of at most 3 dims of extent <= 8) so one example takes
milliseconds to check, print and parse again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

# ============================================================================ the result


@dataclass
class Program:
    """A generated .tvms file; ``repr`` is its text, so Hypothesis' failure reports read well."""

    text: str
    form: str  # "module", "tir" (a lone prim_func) or "relax" (a lone Relax function)
    expect: str  # "valid" or "invalid"
    flaw: str = ""

    def __repr__(self) -> str:
        return f"<{self.form} program, {self.expect}{' (' + self.flaw + ')' if self.flaw else ''}>\n{self.text}"


# What a deliberately broken program gets wrong. "relax_*" flaws need a Relax function, "tir_*"
# a prim_func, "call_missing" a module (so `cls.<missing>` is a lookup in it).
TIR_FLAWS = ("tir_undefined_buffer", "tir_undefined_var", "tir_index_arity", "tir_bad_dtype")
RELAX_FLAWS = ("relax_undefined", "relax_dtype_mismatch", "relax_reshape_size", "relax_output_undefined")
MODULE_FLAWS = ("call_missing",)

COMMENTS = (
    "# a comment", "#", "# TODO: check the bounds", "#   indented words  ", "# ünïcödé ✓ ﬁ",
    "# with T.block(\"root\"):", "# T.reads(A[0])", "## double", "# 'quoted' \"text\"", "#\ttab",
)

# ============================================================================ text layout


class Lines:
    """Lines of a function body under construction, with comments and blank lines sprinkled in
    where a person might put them (before statements, and trailing on their lines)."""

    def __init__(self, draw, decor: bool = True) -> None:
        self.draw = draw
        self.out: list[str] = []
        self.decor = decor

    def add(self, depth: int, text: str) -> None:
        pad = "    " * depth
        if self.decor:
            noise = self.draw(st.integers(0, 11))
            if noise == 0:
                self.out.append(pad + self.draw(st.sampled_from(COMMENTS)))
            elif noise == 1:
                self.out.append(self.draw(st.sampled_from(["", "    ", "\t"])))  # blank, maybe with spaces
            elif noise == 2:
                text += "  " + self.draw(st.sampled_from(COMMENTS))
        self.out.append(pad + text)


def _is_number(text: str) -> bool:
    """Whether ``text`` is a bare number, maybe in parentheses (``(-0.25)``)."""
    try:
        float(text.replace("(", "").replace(")", ""))
    except ValueError:
        return False
    return True


def _dim_value(d):
    """The integer extent of a dimension written as text, or None when symbolic."""
    try:
        return int(d)
    except ValueError:
        return None


# ============================================================================ TIR

BUFFER_DTYPES = ("float32", "float32", "float16", "float64", "int32", "int64", "int8", "uint8")
FLOAT_DTYPES = ("float16", "float32", "float64")
FLOAT_UNARY = ("T.exp", "T.sqrt", "T.tanh", "T.sigmoid", "T.fabs", "T.floor", "T.ceil", "T.log", "T.round")


@dataclass
class Buf:
    name: str
    shape: list  # dims as text: "8", or a symbolic variable's name
    dtype: str


@dataclass
class IndexVar:
    """A loop variable or block iterator: an int that ranges over ``[0, extent)``."""

    name: str
    extent: str  # text of the extent, as a buffer dimension writes it
    dtype: str = "int32"


@dataclass
class TirScope:
    buffers: list
    scalars: dict  # dtype -> names of scalar parameters / lets usable anywhere
    index_vars: list = field(default_factory=list)
    lets: dict = field(default_factory=dict)  # dtype -> names of lets visible here


class TirGen:
    """Writes one prim_func. ``static`` keeps every buffer shape constant and adds no scalar
    parameters, so a Relax function can R.call_tir it with tensors of the same shapes."""

    def __init__(self, draw, name: str, static: bool, shape_pool: list, lines: Lines) -> None:
        self.draw = draw
        self.name = name
        self.static = static
        self.shape_pool = shape_pool
        self.lines = lines
        self.counter = 0
        self.params: list = []  # Buf of each buffer parameter, in order (for call_tir)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ------------------------------------------------------------------ expressions

    def index(self, scope: TirScope, dim: str) -> str:
        """An in-bounds index into a dimension of extent ``dim``."""
        draw = self.draw
        same = [v.name for v in scope.index_vars if v.extent == dim]
        value = _dim_value(dim)
        choices = ["const"] if value is not None else []
        if same:
            choices += ["var", "var"]
        ints = [v for v in scope.index_vars if v.dtype == "int32"] + [
            IndexVar(n, "?") for n in scope.scalars.get("int32", []) + scope.lets.get("int32", [])]
        if ints and value is not None:
            choices.append("mod")
        if not choices:
            return "0" if value is None else str(value - 1)
        kind = draw(st.sampled_from(choices))
        if kind == "var":
            return draw(st.sampled_from(same))
        if kind == "const":
            return str(draw(st.integers(0, value - 1)))
        v = draw(st.sampled_from(ints)).name
        offset = draw(st.integers(0, 3))
        return f"({v} + {offset}) % {dim}" if offset else f"{v} % {dim}"

    def load(self, scope: TirScope, dtype: str, accesses: list):
        bufs = [b for b in scope.buffers if b.dtype == dtype]
        if not bufs:
            return None
        b = self.draw(st.sampled_from(bufs))
        text = f"{b.name}[{', '.join(self.index(scope, d) for d in b.shape)}]"
        accesses.append(text)
        return text

    def const(self, dtype: str) -> str:
        draw = self.draw
        if dtype.startswith("float"):
            v = draw(st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.5, 1e-3, 3.0, 100.0, -0.25]))
            if dtype == "float32" and draw(st.booleans()):
                return repr(v)  # a bare literal is a float32 in TIR
            return f"T.{dtype}({v})"
        lo, hi = (0, 100) if dtype.startswith("uint") else (-100, 100)
        v = draw(st.integers(lo, hi))
        if dtype == "int32" and draw(st.booleans()) and v >= 0:
            return str(v)  # a bare integer literal is an int32
        return f"T.{dtype}({v})"

    def leaf(self, scope: TirScope, dtype: str, accesses: list) -> str:
        draw = self.draw
        options = ["const", "load", "load"]
        names = scope.scalars.get(dtype, []) + scope.lets.get(dtype, [])
        names += [v.name for v in scope.index_vars if v.dtype == dtype]
        if names:
            options += ["name", "name"]
        kind = draw(st.sampled_from(options))
        if kind == "name":
            return draw(st.sampled_from(names))
        if kind == "load":
            text = self.load(scope, dtype, accesses)
            if text is not None:
                return text
        return self.const(dtype)

    def cond(self, scope: TirScope, accesses: list, depth: int) -> str:
        draw = self.draw
        kind = draw(st.sampled_from(["cmp", "cmp", "and", "or", "not"] if depth > 0 else ["cmp"]))
        if kind == "cmp":
            dt = draw(st.sampled_from(["int32", "int32", "float32"]))
            op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
            return f"{self.expr(scope, dt, accesses, depth - 1)} {op} {self.expr(scope, dt, accesses, depth - 1)}"
        if kind == "not":
            return f"not ({self.cond(scope, accesses, depth - 1)})"
        op = "and" if kind == "and" else "or"
        return f"({self.cond(scope, accesses, depth - 1)}) {op} ({self.cond(scope, accesses, depth - 1)})"

    def expr(self, scope: TirScope, dtype: str, accesses: list, depth: int) -> str:
        """An expression of ``dtype`` (operands of other dtypes only under a cast)."""
        draw = self.draw
        if depth <= 0:
            return self.leaf(scope, dtype, accesses)
        is_float = dtype.startswith("float")
        kinds = ["leaf", "bin", "bin", "minmax", "neg", "cast", "ite", "select", "paren"]
        if is_float:
            kinds.append("unary")
        kind = draw(st.sampled_from(kinds))
        sub = lambda: self.expr(scope, dtype, accesses, depth - 1 - draw(st.integers(0, 1)))  # noqa: E731
        if kind == "bin":
            ops = ["+", "-", "*"] + (["/"] if is_float else ["//", "%"])
            op = draw(st.sampled_from(ops))
            if op in ("//", "%", "/"):
                divisor = self.const(dtype) if is_float else f"T.{dtype}({draw(st.integers(1, 7))})"
                if is_float:
                    divisor = f"T.{dtype}({draw(st.sampled_from([2.0, 4.0, 0.5, 3.0]))})"
                return f"{sub()} {op} {divisor}"
            return f"{sub()} {op} {sub()}"
        if kind == "minmax":
            return f"{draw(st.sampled_from(['T.max', 'T.min']))}({sub()}, {sub()})"
        if kind == "neg" and not dtype.startswith("uint"):
            return f"-{self.leaf(scope, dtype, accesses)}"
        if kind == "cast":
            src = draw(st.sampled_from(["int32", "float32", "int64", "float16"]))
            inner = self.expr(scope, src, accesses, depth - 1)
            # T.int32(0.5) is a literal (and an error), not a cast: a bare number takes T.Cast.
            if draw(st.booleans()) or _is_number(inner):
                return f'T.Cast("{dtype}", {inner})'
            return f"T.{dtype}({inner})"
        if kind == "ite":
            return f"T.if_then_else({self.cond(scope, accesses, depth - 1)}, {sub()}, {sub()})"
        if kind == "select":
            return f"T.Select({self.cond(scope, accesses, depth - 1)}, {sub()}, {sub()})"
        if kind == "paren":
            return f"({sub()})"
        if kind == "unary":
            return f"{draw(st.sampled_from(FLOAT_UNARY))}({sub()})"
        return self.leaf(scope, dtype, accesses)

    # ------------------------------------------------------------------ statements

    def store(self, scope: TirScope, depth: int, target: Buf | None = None) -> list:
        """``B[...] = expr``; returns the accesses the value reads."""
        target = target or self.draw(st.sampled_from(scope.buffers))
        accesses: list = []
        idx = ", ".join(self.index(scope, d) for d in target.shape)
        value = self.expr(scope, target.dtype, accesses, self.draw(st.integers(0, 3)))
        self.lines.add(depth, f"{target.name}[{idx}] = {value}")
        return accesses

    def loop_header(self, var: IndexVar, scope: TirScope) -> str:
        draw = self.draw
        e = var.extent
        static = _dim_value(e) is not None
        kinds = ["range", "serial", "parallel", "unroll", "serial2"]
        if static:
            kinds.append("vectorized")
        kind = draw(st.sampled_from(kinds))
        if kind == "range":
            return f"for {var.name} in range({e}):"
        if kind == "serial2":  # T.serial(begin, end) with begin 0 keeps the extent
            return f"for {var.name} in T.serial(0, {e}):"
        if kind == "vectorized":
            return f"for {var.name} in T.vectorized({e}):"
        return f"for {var.name} in T.{kind}({e}):"

    def statements(self, scope: TirScope, depth: int, budget: int) -> None:
        """One to three statements at ``depth``; ``budget`` bounds the nesting below."""
        draw = self.draw
        for _ in range(draw(st.integers(1, 3))):
            kinds = ["store", "store", "evaluate"]
            if budget > 0:
                kinds += ["loop", "loop", "if", "let", "block"]
            kind = draw(st.sampled_from(kinds))
            if kind == "store":
                self.store(scope, depth)
            elif kind == "evaluate":
                self.lines.add(depth, f"T.evaluate({self.expr(scope, 'int32', [], draw(st.integers(0, 2)))})")
            elif kind == "loop":
                self.loop_nest(scope, depth, budget)
            elif kind == "if":
                self.if_stmt(scope, depth, budget)
            elif kind == "let":
                self.let(scope, depth, budget)
            else:
                self.block_nest(scope, depth)

    def loop_nest(self, scope: TirScope, depth: int, budget: int) -> None:
        """Loops over the dims of one buffer (T.grid or nested loops of random kinds), storing into it."""
        draw = self.draw
        target = draw(st.sampled_from(scope.buffers))
        dims = target.shape[: draw(st.integers(1, len(target.shape)))]
        loop_vars = [IndexVar(self.fresh("i"), d) for d in dims]
        inner = TirScope(scope.buffers, scope.scalars, scope.index_vars + loop_vars, dict(scope.lets))
        if len(dims) > 1 and draw(st.booleans()):
            self.lines.add(depth, f"for {', '.join(v.name for v in loop_vars)} in T.grid({', '.join(dims)}):")
            depth += 1
        else:
            for v in loop_vars:
                self.lines.add(depth, self.loop_header(v, inner))
                depth += 1
        self.store(inner, depth, target)
        if draw(st.booleans()):
            self.statements(inner, depth, budget - 1)

    def if_stmt(self, scope: TirScope, depth: int, budget: int) -> None:
        draw = self.draw
        self.lines.add(depth, f"if {self.cond(scope, [], draw(st.integers(0, 2)))}:")
        self.statements(scope, depth + 1, budget - 1)
        branch = draw(st.sampled_from(["none", "else", "elif"]))
        if branch == "elif":
            self.lines.add(depth, f"elif {self.cond(scope, [], 1)}:")
            self.statements(scope, depth + 1, budget - 1)
            branch = draw(st.sampled_from(["none", "else"]))
        if branch == "else":
            self.lines.add(depth, "else:")
            self.statements(scope, depth + 1, budget - 1)

    def let(self, scope: TirScope, depth: int, budget: int) -> None:
        """``v: T.int32 = e`` (or ``v = e``): a LetStmt over the statements after it."""
        draw = self.draw
        dtype = draw(st.sampled_from(["int32", "int32", "float32"]))
        name = self.fresh("v")
        value = self.expr(scope, dtype, [], draw(st.integers(0, 2)))
        if draw(st.booleans()):
            self.lines.add(depth, f"{name}: T.{dtype} = {value}")
        else:
            self.lines.add(depth, f"{name} = T.{dtype}({value})")
        lets = {k: list(v) for k, v in scope.lets.items()}
        lets.setdefault(dtype, []).append(name)
        self.statements(TirScope(scope.buffers, scope.scalars, scope.index_vars, lets), depth, budget - 1)

    def block_nest(self, scope: TirScope, depth: int) -> None:
        """Loops, then a block whose iterators bind them (spatial, or spatial + one reduction)."""
        draw = self.draw
        target = draw(st.sampled_from(scope.buffers))
        reduce = draw(st.booleans())
        dims = list(target.shape)
        extents = dims + ([str(draw(st.integers(1, 4)))] if reduce else [])
        loops = [self.fresh("i") for _ in extents]
        if len(loops) > 1 and draw(st.booleans()):
            self.lines.add(depth, f"for {', '.join(loops)} in T.grid({', '.join(extents)}):")
            depth += 1
        else:
            for v, e in zip(loops, extents):
                self.lines.add(depth, self.loop_header(IndexVar(v, e), scope))
                depth += 1
        name = self.fresh("b")
        self.lines.add(depth, f'with T.{draw(st.sampled_from(["block", "sblock"]))}("{name}"):')
        depth += 1
        iters = [IndexVar(self.fresh("v"), e) for e in extents]
        kinds = "S" * len(dims) + ("R" if reduce else "")
        if draw(st.booleans()):
            self.lines.add(depth, f'{", ".join(v.name for v in iters)} = T.axis.remap("{kinds}", [{", ".join(loops)}])')
        else:
            for v, k, loop in zip(iters, kinds, loops):
                axis = "spatial" if k == "S" else "reduce"
                self.lines.add(depth, f"{v.name} = T.axis.{axis}({v.extent}, {loop})")
        # Inside a block only its iterators (and the function's scalars) are visible.
        inner = TirScope(scope.buffers, scope.scalars, iters, {})
        out_idx = ", ".join(v.name for v in iters[: len(dims)])
        written = f"{target.name}[{out_idx}]"
        accesses: list = []
        value = self.expr(inner, target.dtype, accesses, draw(st.integers(0, 2)))
        if reduce:
            value = f"{written} + {value}" if draw(st.booleans()) else f"T.max({written}, {value})"
            accesses.insert(0, written)
        if draw(st.booleans()):
            reads = list(dict.fromkeys(accesses))
            self.lines.add(depth, f"T.reads({', '.join(reads)})" if reads else "T.reads()")
            self.lines.add(depth, f"T.writes({written})")
        if reduce:
            self.lines.add(depth, "with T.init():")
            self.lines.add(depth + 1, f"{written} = {self.const(target.dtype)}")
        self.lines.add(depth, f"{written} = {value}")

    # ------------------------------------------------------------------ the function

    def shape(self, symbols: list) -> list:
        draw = self.draw
        if self.shape_pool and draw(st.integers(0, 2)) > 0:
            return list(draw(st.sampled_from(self.shape_pool)))
        dims = [str(draw(st.integers(1, 8))) for _ in range(draw(st.integers(1, 3)))]
        if symbols and draw(st.booleans()):
            dims[draw(st.integers(0, len(dims) - 1))] = draw(st.sampled_from(symbols))
        return dims

    def function(self, depth: int, flaw: str = "") -> None:
        """The whole prim_func at ``depth`` (1 inside a class, 0 alone)."""
        draw = self.draw
        name = self.name
        scalars: dict = {}
        params: list = []
        body_decls: list = []
        symbols: list = []
        if not self.static:
            for _ in range(draw(st.integers(0, 2))):
                dt = draw(st.sampled_from(["int32", "int32", "float32", "int64"]))
                n = self.fresh("n" if dt.startswith("int") else "x")
                params.append(f"{n}: T.{dt}")
                scalars.setdefault(dt, []).append(n)
                if dt == "int32":
                    symbols.append(n)
            if draw(st.booleans()):
                m = self.fresh("m")
                body_decls.append(f"{m} = T.int32()")
                symbols.append(m)
        buffers: list = []
        for _ in range(draw(st.integers(1, 3))):
            b = Buf(self.fresh("A"), self.shape(symbols if not self.static else []), draw(st.sampled_from(BUFFER_DTYPES)))
            buffers.append(b)
            self.params.append(b)
            symbolic = any(_dim_value(d) is None for d in b.shape)
            if symbolic or (not self.static and draw(st.integers(0, 4)) == 0):
                handle = b.name.lower()
                params.append(f"{handle}: T.handle")
                body_decls.append(f'{b.name} = T.match_buffer({handle}, ({", ".join(b.shape)},), "{b.dtype}")')
            else:
                params.append(f"{b.name}: {self.buffer_annotation(b)}")
        if not self.static:
            order = list(range(len(params)))
            params = [params[i] for i in draw(st.permutations(order))]
        lines = self.lines
        decorator = "@T.prim_func"
        if draw(st.integers(0, 5)) == 0:
            decorator = draw(st.sampled_from(["@T.prim_func(private=True)", "@T.prim_func()"]))
        lines.add(depth, decorator)
        if len(params) > 1 and draw(st.integers(0, 3)) == 0:  # one parameter a line, as people write
            pad = " " * (len(f"def {name}("))
            lines.out.append("    " * depth + f"def {name}(" + params[0] + ",")
            for p in params[1:-1]:
                lines.out.append("    " * depth + pad + p + ",")
            lines.out.append("    " * depth + pad + params[-1] + "):")
        else:
            ret = " -> None" if draw(st.integers(0, 4)) == 0 else ""
            lines.add(depth, f"def {name}({', '.join(params)}){ret}:")
        body = depth + 1
        if draw(st.booleans()):
            attrs = ['{"tir.noalias": True}', '{"tir.noalias": T.bool(True)}']
            if "private" not in decorator:  # a private function has no global symbol
                attrs.append(f'{{"global_symbol": "{name}", "tir.noalias": True}}')
            attrs = draw(st.sampled_from(attrs))
            lines.add(body, f"T.func_attr({attrs})")
        for decl in body_decls:
            lines.add(body, decl)
        for _ in range(draw(st.integers(0, 2))):
            b = Buf(self.fresh("X"), self.shape([]), draw(st.sampled_from(BUFFER_DTYPES)))
            shape = f"({', '.join(b.shape)},)"
            if b.dtype == "float32" and draw(st.booleans()):
                lines.add(body, f"{b.name} = T.alloc_buffer({shape})")
            else:
                lines.add(body, f'{b.name} = T.alloc_buffer({shape}, "{b.dtype}")')
            buffers.append(b)
        scope = TirScope(buffers, scalars)
        self.statements(scope, body, 2)
        if flaw:
            self.plant(scope, body, flaw)

    def buffer_annotation(self, b: Buf) -> str:
        draw = self.draw
        dims = ", ".join(b.shape)
        tup = f"({dims},)" if len(b.shape) == 1 else f"({dims})"
        form = draw(st.integers(0, 5))
        if form == 0:
            return f'T.Buffer[{tup}, "{b.dtype}"]'
        if form == 1 and len(b.shape) == 1:
            return f'T.Buffer({dims}, "{b.dtype}")'
        if form == 2:
            return f'T.Buffer({tup}, dtype="{b.dtype}")'
        if form == 3 and b.dtype == "float32":
            return f"T.Buffer({tup})"
        return f'T.Buffer({tup}, "{b.dtype}")'

    def plant(self, scope: TirScope, depth: int, flaw: str) -> None:
        """One statement that is wrong in the way ``flaw`` names."""
        b = scope.buffers[0]
        idx = ", ".join("0" for _ in b.shape)
        if flaw == "tir_undefined_buffer":
            self.lines.add(depth, f"{b.name}[{idx}] = Ghost[{idx}]")
        elif flaw == "tir_undefined_var":
            self.lines.add(depth, f"{b.name}[{idx}] = {b.name}[{idx}] + ghost_value")
        elif flaw == "tir_index_arity":
            self.lines.add(depth, f"{b.name}[{idx}, 0] = {b.name}[{idx}]")
        elif flaw == "tir_bad_dtype":
            self.lines.add(depth, 'Bad = T.alloc_buffer((4,), "float33")')
            self.lines.add(depth, "Bad[0] = T.float32(1.0)")
        else:
            raise ValueError(flaw)


# ============================================================================ Relax

RELAX_DTYPES = ("float32", "float32", "float16", "int32")


@dataclass
class TensorInfo:
    shape: tuple  # dims as text: "4" or a symbolic name
    dtype: str

    def annotation(self) -> str:
        dims = ", ".join(d if _dim_value(d) is not None else f'"{d}"' for d in self.shape)
        tup = f"({dims},)" if len(self.shape) == 1 else f"({dims})"
        return f'R.Tensor({tup}, dtype="{self.dtype}")'

    @property
    def static(self) -> bool:
        return all(_dim_value(d) is not None for d in self.shape)


class RelaxGen:
    """Writes one Relax function. ``prims`` are (name, [Buf]) of static prim_funcs in the module
    that R.call_tir may call (their last buffer is the output)."""

    def __init__(self, draw, lines: Lines, shape_pool: list, prims: list, module_name: str | None) -> None:
        self.draw = draw
        self.lines = lines
        self.shape_pool = shape_pool
        self.prims = prims
        self.module_name = module_name
        self.counter = 0
        self.env: dict = {}  # name -> TensorInfo, ("tuple", [TensorInfo]) or "shape"
        self.dataflow_locals: set | None = None
        self.used_cls = False

    def fresh(self, prefix: str = "lv") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tensors(self, pred=lambda t: True) -> list:
        """Tensors in scope (boolean masks are kept for R.where only)."""
        return [n for n, v in self.env.items() if isinstance(v, TensorInfo) and v.dtype != "bool" and pred(v)]

    # ------------------------------------------------------------------ values

    def value(self):
        """(text, info) of a random op applied to the tensors in scope."""
        draw = self.draw
        names = self.tensors()
        a = draw(st.sampled_from(names))
        ta: TensorInfo = self.env[a]
        floats = ta.dtype.startswith("float")
        kinds = ["binary", "binary", "unary", "astype", "permute", "const_bin", "tuple",
                 "getitem", "compare_where", "expand", "alias"]
        if ta.shape:
            kinds += ["reduce"]
        if floats:
            kinds += ["float_unary"] + (["softmax"] if ta.shape else [])
        if ta.static:
            kinds += ["reshape", "zeros"] + (["concat"] if ta.shape else [])
        if self.prims:
            kinds += ["call_tir"] * 4
        if len(ta.shape) == 2:
            kinds.append("matmul")
        kind = draw(st.sampled_from(kinds))
        if kind == "binary":
            same = self.tensors(lambda t: t.dtype == ta.dtype and t.shape == ta.shape)
            b = draw(st.sampled_from(same))
            op = draw(st.sampled_from(["R.add", "R.subtract", "R.multiply", "R.maximum", "R.minimum"]
                                      + (["R.divide"] if floats else [])))
            if draw(st.booleans()):
                a, b = b, a
            return f"{op}({a}, {b})", ta
        if kind == "const_bin":
            low = 0 if ta.dtype.startswith("u") else -5  # R.const(-4, "uint8") is an error
            number = draw(st.sampled_from(["1.5", "-2.0", "0.0"])) if floats else str(draw(st.integers(low, 5)))
            c = f'R.const({number}, "{ta.dtype}")'
            op = draw(st.sampled_from(["R.add", "R.multiply", "R.subtract"]))
            return f"{op}({a}, {c})", ta
        if kind == "unary":
            op = draw(st.sampled_from(["R.negative", "R.abs", "R.nn.relu"]))
            return f"{op}({a})", ta
        if kind == "float_unary":
            op = draw(st.sampled_from(["R.exp", "R.sqrt", "R.tanh", "R.sigmoid", "R.nn.silu", "R.nn.gelu"]))
            return f"{op}({a})", ta
        if kind == "softmax":
            return f"R.nn.softmax({a}, axis=-1)", ta
        if kind == "astype":
            dt = draw(st.sampled_from(RELAX_DTYPES))
            form = f'R.astype({a}, "{dt}")' if draw(st.booleans()) else f'R.astype({a}, dtype="{dt}")'
            return form, TensorInfo(ta.shape, dt)
        if kind == "reduce":
            axis = draw(st.integers(0, len(ta.shape) - 1))
            keep = draw(st.booleans())
            op = draw(st.sampled_from(["R.sum", "R.max", "R.min"] + (["R.mean"] if floats else [])))
            shape = tuple("1" if i == axis else d for i, d in enumerate(ta.shape)) if keep else \
                tuple(d for i, d in enumerate(ta.shape) if i != axis)
            return f"{op}({a}, axis=[{axis}], keepdims={keep})", TensorInfo(shape, ta.dtype)
        if kind == "permute":
            if draw(st.booleans()):
                return f"R.permute_dims({a}, axes=None)", TensorInfo(tuple(reversed(ta.shape)), ta.dtype)
            perm = draw(st.permutations(range(len(ta.shape))))
            return f"R.permute_dims({a}, axes={list(perm)})", TensorInfo(tuple(ta.shape[i] for i in perm), ta.dtype)
        if kind == "expand":
            return f"R.expand_dims({a}, axis=[0])", TensorInfo(("1",) + tuple(ta.shape), ta.dtype)
        if kind == "compare_where":
            op = draw(st.sampled_from(["R.greater", "R.less", "R.equal", "R.not_equal"]))
            cond = self.fresh("c")
            self.bind(cond, f"{op}({a}, {a})", TensorInfo(ta.shape, "bool"))
            return f"R.where({cond}, {a}, {a})", ta
        if kind == "reshape":
            size = math.prod(int(d) for d in ta.shape)
            shape = (str(size),) if draw(st.booleans()) or size == 1 else ("1", str(size))
            form = draw(st.integers(0, 2))
            if form == 0:
                return f"R.reshape({a}, R.shape([{', '.join(shape)}]))", TensorInfo(shape, ta.dtype)
            if form == 1:  # the shape bound to a variable first
                s = self.fresh("s")
                self.lines.add(self.depth, f"{s} = R.shape([{', '.join(shape)}])")
                self.env[s] = "shape"
                if self.dataflow_locals is not None:
                    self.dataflow_locals.add(s)
                return f"R.reshape({a}, {s})", TensorInfo(shape, ta.dtype)
            return f"R.reshape({a}, ({', '.join(shape)}{',' if len(shape) == 1 else ''}))", TensorInfo(shape, ta.dtype)
        if kind == "concat":
            same = self.tensors(lambda t: t.dtype == ta.dtype and len(t.shape) == len(ta.shape)
                                and t.shape[1:] == ta.shape[1:] and t.static)
            b = draw(st.sampled_from(same))
            first = str(int(ta.shape[0]) + int(self.env[b].shape[0]))
            return f"R.concat(({a}, {b}), axis=0)", TensorInfo((first,) + tuple(ta.shape[1:]), ta.dtype)
        if kind == "zeros":
            dims = ", ".join(ta.shape)
            op = draw(st.sampled_from(["R.zeros", "R.ones"]))
            return f'{op}(R.shape([{dims}]), "{ta.dtype}")', ta
        if kind == "matmul":
            pairs = [(x, w) for x in self.tensors(lambda t: len(t.shape) >= 1)
                     for w in self.tensors(lambda t: len(t.shape) == 2)
                     if self.env[x].dtype == self.env[w].dtype and self.env[x].shape[-1] == self.env[w].shape[0]]
            if pairs:
                x, w = draw(st.sampled_from(pairs))
                shape = tuple(self.env[x].shape[:-1]) + (self.env[w].shape[1],)
                return f"R.matmul({x}, {w})", TensorInfo(shape, self.env[x].dtype)
            t = self.fresh("t")
            self.bind(t, f"R.permute_dims({a}, axes=None)", TensorInfo(tuple(reversed(ta.shape)), ta.dtype))
            return f"R.matmul({a}, {t})", TensorInfo((ta.shape[0], ta.shape[0]), ta.dtype)
        if kind == "tuple":
            items = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
            text = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            return text, ("tuple", [self.env[n] for n in items])
        if kind == "getitem":
            tuples = [n for n, v in self.env.items() if isinstance(v, tuple) and v[0] == "tuple"]
            if tuples:
                t = draw(st.sampled_from(tuples))
                i = draw(st.integers(0, len(self.env[t][1]) - 1))
                return f"{t}[{i}]", self.env[t][1][i]
        if kind == "call_tir":
            return self.call_tir()
        return a, ta

    def call_tir(self):
        """R.call_tir of a static prim_func whose input buffers match tensors in scope; else the
        inputs are made with R.zeros."""
        draw = self.draw
        name, bufs = draw(st.sampled_from(self.prims))
        ins, out = bufs[:-1], bufs[-1]
        args = []
        for b in ins:
            info = TensorInfo(tuple(b.shape), b.dtype)
            match = self.tensors(lambda t: t == info)
            if match and draw(st.integers(0, 3)) > 0:
                args.append(draw(st.sampled_from(match)))
            else:
                z = self.fresh("z")
                self.bind(z, f'R.zeros(R.shape([{", ".join(b.shape)}]), "{b.dtype}")', info)
                args.append(z)
        out_info = TensorInfo(tuple(out.shape), out.dtype)
        args_text = "(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"
        if self.module_name and draw(st.booleans()):
            self.used_cls = True
            callee = f"cls.{name}"
        else:
            callee = name
        return f"R.call_tir({callee}, {args_text}, out_sinfo={out_info.annotation()})", out_info

    def bind(self, name: str, rhs: str, info, depth: int | None = None) -> None:
        draw = self.draw
        ann = ""
        if isinstance(info, TensorInfo) and draw(st.integers(0, 3)) == 0:
            ann = ": " + info.annotation()
        self.lines.add(self.depth if depth is None else depth, f"{name}{ann} = {rhs}")
        self.env[name] = info
        if self.dataflow_locals is not None:
            self.dataflow_locals.add(name)

    def binding(self) -> None:
        rhs, info = self.value()
        self.bind(self.fresh(), rhs, info)

    def dataflow(self) -> None:
        draw = self.draw
        self.lines.add(self.depth, "with R.dataflow():")
        self.depth += 1
        self.dataflow_locals = set()
        for _ in range(draw(st.integers(1, 4))):
            self.binding()
        local = sorted(self.dataflow_locals)
        outs = draw(st.lists(st.sampled_from(local), min_size=1, max_size=2, unique=True))
        self.lines.add(self.depth, f"R.output({', '.join(outs)})")
        for n in set(local) - set(outs):
            del self.env[n]
        self.dataflow_locals = None
        self.depth -= 1

    def if_else(self, cond: str) -> None:
        """``if cond:`` with both branches binding the same name to the same kind of tensor."""
        draw = self.draw
        a = draw(st.sampled_from(self.tensors()))
        target = self.fresh("r")
        self.lines.add(self.depth, f"if {cond}:")
        for branch in ("then", "else"):
            if branch == "else":
                self.lines.add(self.depth, "else:")
            op = draw(st.sampled_from(["R.negative", "R.abs", "R.nn.relu", "R.add"]))
            rhs = f"R.add({a}, {a})" if op == "R.add" else f"{op}({a})"
            if draw(st.booleans()):
                tmp = self.fresh("w")
                self.lines.add(self.depth + 1, f"{tmp} = {rhs}")
                rhs = tmp
            self.lines.add(self.depth + 1, f"{target} = {rhs}")
        self.env[target] = self.env[a]

    def function(self, depth: int, name: str, flaw: str = "") -> None:
        draw = self.draw
        self.depth = depth + 1
        params = []
        n_params = draw(st.integers(1, 3))
        for _ in range(n_params):
            shape = tuple(draw(st.sampled_from(self.shape_pool)))
            if draw(st.integers(0, 3)) == 0:  # a symbolic dimension
                shape = (draw(st.sampled_from(["n", "m"])),) + shape[1:]
            p = self.fresh("x")
            info = TensorInfo(shape, draw(st.sampled_from(RELAX_DTYPES)))
            params.append((p, info))
            self.env[p] = info
        cond = None
        if draw(st.integers(0, 3)) == 0:
            cond = "flag"
            params.append((cond, None))
        sig = ", ".join(f"{p}: {info.annotation()}" if info else f'{p}: R.Tensor((), dtype="bool")'
                        for p, info in params)
        self.lines.add(depth, "@R.function" if draw(st.integers(0, 4)) else "@R.function(pure=True)")
        self.lines.add(depth, f"def {name}({sig}):")
        header_index = len(self.lines.out) - 1
        if draw(st.integers(0, 3)) == 0:
            self.lines.add(self.depth, f'R.func_attr({{"num_input": {n_params}}})')
        cls_at = len(self.lines.out)
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                self.binding()
            else:
                self.dataflow()
        if cond is not None:
            self.if_else(cond)
        if flaw:
            self.plant(flaw)
        if self.used_cls:
            self.lines.out.insert(cls_at, "    " * self.depth + f"cls = {self.module_name}")
        visible = sorted(self.env)
        result = draw(st.lists(st.sampled_from(visible), min_size=1, max_size=2, unique=True))
        info = self.env[result[0]]
        if len(result) == 1 and isinstance(info, TensorInfo) and draw(st.booleans()):
            # the return annotation, when it can be written exactly
            line = self.lines.out[header_index]
            self.lines.out[header_index] = line.replace("):", f") -> {info.annotation()}:", 1) \
                if line.rstrip().endswith("):") else line
        ret = result[0] if len(result) == 1 else "(" + ", ".join(result) + ")"
        self.lines.add(self.depth, f"return {ret}")

    def plant(self, flaw: str) -> None:
        a = self.tensors()[0]
        ta = self.env[a]
        if flaw == "relax_undefined":
            self.lines.add(self.depth, "bad = R.nn.relu(ghost)")
        elif flaw == "relax_dtype_mismatch":
            other = "int32" if ta.dtype.startswith("float") else "float32"
            self.lines.add(self.depth, f'bad = R.add({a}, R.const(1, "{other}"))')
        elif flaw == "relax_reshape_size" and ta.static:
            self.lines.add(self.depth, f"bad = R.reshape({a}, R.shape([{', '.join(ta.shape)}, 7]))")
        elif flaw == "relax_reshape_size":  # symbolic: the mismatch may not be provable
            self.plant("relax_dtype_mismatch")
        elif flaw == "relax_output_undefined":
            self.lines.add(self.depth, "with R.dataflow():")
            self.lines.add(self.depth + 1, f"bad = R.nn.relu({a})")
            self.lines.add(self.depth + 1, "R.output(ghost)")
        elif flaw == "call_missing":
            self.used_cls = True
            self.lines.add(self.depth, f'bad = R.call_tir(cls.missing_func, ({a},), out_sinfo=R.Tensor((1,), dtype="float32"))')
        else:
            raise ValueError(flaw)


# ============================================================================ whole files

HEADERS = {
    "module": ["# from tvm.script import ir as I", "# from tvm.script import tir as T",
               "# from tvm.script import relax as R"],
    "tir": ["# from tvm.script import tir as T"],
    "relax": ["# from tvm.script import relax as R"],
}


def _header(draw, form: str) -> list:
    lines = HEADERS[form] if draw(st.booleans()) else []
    if draw(st.integers(0, 3)) == 0:
        lines = [draw(st.sampled_from(COMMENTS))] + lines
    return lines + [""] * draw(st.integers(0, 2))


def _shape_pool(draw) -> list:
    return [tuple(str(draw(st.integers(1, 6))) for _ in range(draw(st.integers(1, 3))))
            for _ in range(draw(st.integers(1, 3)))]


def _flaw(draw, choices: tuple, flaw: str | None) -> str:
    """The flaw asked for, or (``flaw`` None) mostly none: about one program in six is
    deliberately wrong."""
    if flaw is not None:
        return flaw
    if not choices or draw(st.integers(0, 5)) > 0:
        return ""
    return draw(st.sampled_from(choices))


@st.composite
def modules(draw, flaw: str | None = None) -> Program:
    """``@I.ir_module class Module:`` with prim_funcs and Relax functions that call them;
    ``flaw`` plants that mistake ("" none, None: sometimes one at random)."""
    pool = _shape_pool(draw)
    n_prims = draw(st.integers(1 if flaw and flaw.startswith("tir") else 0, 3))
    n_relax = draw(st.integers(0 if n_prims and not (flaw and not flaw.startswith("tir")) else 1, 2))
    flaws = TIR_FLAWS * bool(n_prims) + (RELAX_FLAWS + MODULE_FLAWS) * bool(n_relax)
    flaw = _flaw(draw, flaws, flaw)
    flaw_target = None
    if flaw:
        candidates = [("tir", i) for i in range(n_prims)] if flaw.startswith("tir") else \
            [("relax", i) for i in range(n_relax)]
        flaw_target = draw(st.sampled_from(candidates))
    class_name = "Module" if draw(st.integers(0, 4)) else draw(st.sampled_from(["MyModule", "Mod2"]))
    lines = Lines(draw)
    out = _header(draw, "module")
    decorator = "@I.ir_module" if draw(st.integers(0, 4)) else "@tvm.script.ir_module"
    lines.out += out + [decorator, f"class {class_name}:"]
    prims = []
    funcs = []
    for i in range(n_prims):
        static = draw(st.integers(0, 2)) > 0  # a static one can be called with R.call_tir
        gen = TirGen(draw, f"prim{i}", static, pool, lines)
        gen.function(1, flaw if flaw_target == ("tir", i) else "")
        if static:
            prims.append((gen.name, gen.params))
        funcs.append(gen.name)
        lines.out += [""] * draw(st.integers(0 if i == n_prims - 1 and not n_relax else 1, 2))
    for i in range(n_relax):
        name = "main" if i == 0 else f"fn{i}"
        gen = RelaxGen(draw, lines, pool, prims, class_name)
        gen.function(1, name, flaw if flaw_target == ("relax", i) else "")
        lines.out += [""] * draw(st.integers(0 if i == n_relax - 1 else 1, 2))
    return Program("\n".join(lines.out) + "\n", "module", "invalid" if flaw else "valid", flaw)


@st.composite
def prim_funcs(draw, flaw: str | None = None) -> Program:
    """A file holding one ``@T.prim_func``, as the CLI accepts it."""
    flaw = _flaw(draw, TIR_FLAWS, flaw)
    lines = Lines(draw)
    lines.out += _header(draw, "tir")
    gen = TirGen(draw, draw(st.sampled_from(["main", "func", "kernel"])), draw(st.booleans()), [], lines)
    gen.function(0, flaw)
    return Program("\n".join(lines.out) + "\n", "tir", "invalid" if flaw else "valid", flaw)


@st.composite
def relax_funcs(draw, flaw: str | None = None) -> Program:
    """A file holding one ``@R.function`` (no prim_funcs to call)."""
    flaw = _flaw(draw, RELAX_FLAWS, flaw)
    lines = Lines(draw)
    lines.out += _header(draw, "relax")
    gen = RelaxGen(draw, lines, _shape_pool(draw), [], None)
    gen.function(0, "main", flaw)
    return Program("\n".join(lines.out) + "\n", "relax", "invalid" if flaw else "valid", flaw)


def programs():
    """Modules most of the time, single functions otherwise."""
    return st.one_of(modules(), modules(), prim_funcs(), relax_funcs())
