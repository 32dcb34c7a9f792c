"""TensorIR to TVMScript text, in the classic dialect TVM prints.

`TIRPrinter.expr` prints expressions with Python precedence (parentheses only where needed);
`TIRPrinter.stmt` prints statements into a `Doc`, applying TVM's sugar: perfectly nested serial
loops become ``T.grid``, block iterators bound to loop variables become ``T.axis.remap``, the
implicit root block becomes the ``# with T.block("root"):`` comment.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re

from .. import ir
from ..ir import relax, tir
from ..target import Target
from ..ir.tir_visitor import vars_in
from .doc import Doc

# Python operator precedence, for parenthesization.
PREC_OR, PREC_AND, PREC_NOT, PREC_CMP = 1, 2, 3, 4
PREC_ADD, PREC_MUL, PREC_UNARY, PREC_ATOM = 9, 10, 11, 13

INFIX = {
    tir.Add: ("+", PREC_ADD), tir.Sub: ("-", PREC_ADD), tir.Mul: ("*", PREC_MUL),
    tir.FloorDiv: ("//", PREC_MUL), tir.FloorMod: ("%", PREC_MUL),
    tir.EQ: ("==", PREC_CMP), tir.NE: ("!=", PREC_CMP), tir.LT: ("<", PREC_CMP),
    tir.LE: ("<=", PREC_CMP), tir.GT: (">", PREC_CMP), tir.GE: (">=", PREC_CMP),
    tir.And: ("and", PREC_AND), tir.Or: ("or", PREC_OR),
}
FUNCTION_FORM = {tir.Min: "T.min", tir.Max: "T.max", tir.Mod: "T.truncmod"}
LOOP_PREFIX = {"parallel": "T.parallel", "vectorized": "T.vectorized", "unroll": "T.unroll",
               "serial": "T.serial", "thread_binding": "T.thread_binding"}
AXIS_NAMES = {"S": "spatial", "R": "reduce", "C": "scan", "O": "opaque"}


def format_float(value: float) -> str:
    """TVM's float literal text: a float with an integral value in fixed notation with one
    decimal (``100000000000000000.0``, never ``1e+17``), any other at 17 significant digits
    (``0.10000000000000001``, ``1.0000000000000001e-05``); inf and nan as quoted strings."""
    if math.isnan(value):
        return '"nan"'
    if math.isinf(value):
        return '"inf"' if value > 0 else '"-inf"'
    if value == math.floor(value):
        return "%.1f" % value
    return "%.17g" % value


_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def format_string(value: str) -> str:
    """A double-quoted Python string literal that reads back as ``value``: a control character
    is escaped (``\\t``, ``\\r``, ``\\x1b``), as a raw one would change the line or be invisible; so
    is a lone surrogate (``"\\ud800"`` in the source), which no UTF-8 file or terminal can hold."""
    out = []
    for ch in value:
        esc = _STRING_ESCAPES.get(ch)
        if esc is None and (ord(ch) < 0x20 or ord(ch) == 0x7F):
            esc = f"\\x{ord(ch):02x}"
        elif esc is None and 0xD800 <= ord(ch) <= 0xDFFF:
            esc = f"\\u{ord(ch):04x}"
        out.append(esc or ch)
    return '"' + "".join(out) + '"'


def identifier(hint: str | None) -> str:
    """``hint`` made a Python identifier, since a printed name is assigned to: a name a parser
    took from a quoted dimension (``"m * n"``) becomes ``m_n``; an empty one ``v``."""
    if not hint:
        return "v"
    if hint.isidentifier():
        return hint
    name = re.sub(r"\W+", "_", hint).strip("_") or "v"
    return f"v_{name}" if name[0].isdigit() else name


class Names:
    """Printed names of variables and buffers: the name the user gave, made unique among the
    names visible at the point of definition (``lv`` then ``lv_1``), as TVM's printer does."""

    def __init__(self) -> None:
        self.frames: list[dict] = [{}]
        self.used: list[set] = [set()]
        self.names: dict[int, str] = {}

    def push(self) -> None:
        self.frames.append({})
        self.used.append(set())

    def pop(self) -> None:
        frame = self.frames.pop()
        self.used.pop()
        for key in frame:
            self.names.pop(key, None)

    def define(self, obj, hint: str, frame: int = -1) -> str:
        """Name ``obj`` in the innermost frame (or in ``frame``, an index into the frames)."""
        name = identifier(hint)
        if self._taken(name):
            i = 1
            while self._taken(f"{name}_{i}"):
                i += 1
            name = f"{name}_{i}"
        self.frames[frame][id(obj)] = obj
        self.used[frame].add(name)
        self.names[id(obj)] = name
        return name

    def alias(self, obj, text: str) -> None:
        """Print ``obj`` as ``text`` (e.g. a buffer's data pointer as ``A.data``) while the
        current frame lasts."""
        self.frames[-1][id(obj)] = obj
        self.names[id(obj)] = text

    def _taken(self, name: str) -> bool:
        return any(name in u for u in self.used)

    def get(self, obj) -> str | None:
        return self.names.get(id(obj))

    def is_defined(self, obj) -> bool:
        return id(obj) in self.names


class TIRPrinter:
    def __init__(self, names: Names | None = None, comments: dict | None = None) -> None:
        self.names = names or Names()
        self.comments = comments or {}
        self.loop_ranges: dict[int, tir.For] = {}
        # The integer dtype written as a bare literal: int32 in TIR, int64 in Relax shapes.
        self.default_int = "int32"
        # While a function body prints: the free variables met so far and the Names frame to
        # declare them in (None: an expression printed alone keeps its free variables' names).
        self.free_vars: list | None = None
        self.func_frame = 0
        # Thread indices: how often each is launched in the function being printed, and the
        # tags of those declared with T.env_thread.
        self.launches: dict = {}
        self.env_threads: dict = {}
        # The module's class name, for calls between its prim_funcs (TVM prints ``Module``).
        self.class_name = "Module"

    # ------------------------------------------------------------------ expressions
    def name_of(self, obj) -> str:
        name = self.names.get(obj)
        if name is None:
            if self.free_vars is not None and isinstance(obj, (tir.Var, tir.Buffer)):
                # Used but bound nowhere in the function (``a = T.int32()`` or ``B =
                # T.Buffer(...)`` in the source): declared at the top of the function so that
                # the text reads back.
                self.free_vars.append(obj)
                name = self.names.define(obj, obj.name, frame=self.func_frame)
                if isinstance(obj, tir.Buffer) and obj.data is not None and not self.names.is_defined(obj.data):
                    self.names.alias(obj.data, f"{name}.data")
                return name
            # A free variable (e.g. printing an expression alone): use its own name.
            name = getattr(obj, "name", "v")
        return name

    def expr(self, e, prec: int = 0) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def _expr(self, e) -> tuple[str, int]:
        t = type(e)
        if t is tir.Var:
            return self.name_of(e), PREC_ATOM
        if t is tir.IntImm:
            return self.int_literal(e), PREC_ATOM if e.value >= 0 or e.dtype != self.default_int else PREC_UNARY
        if t is tir.FloatImm:
            return f"T.{e.dtype}({format_float(e.value)})", PREC_ATOM
        if t is tir.BufferLoad:
            return self.buffer_access(e.buffer, e.indices), PREC_ATOM
        info = INFIX.get(t)
        if info is not None:
            op, prec = info
            # Comparisons don't chain in TIR: both sides bind tighter.
            left = self.expr(e.a, prec + (1 if prec == PREC_CMP else 0))
            right = self.expr(e.b, prec + 1)
            return f"{left} {op} {right}", prec
        if t is tir.Div:
            if tir.is_float(e.dtype):
                return f"{self.expr(e.a, PREC_MUL)} / {self.expr(e.b, PREC_MUL + 1)}", PREC_MUL
            return f"T.Div({self.expr(e.a)}, {self.expr(e.b)})", PREC_ATOM
        if t in FUNCTION_FORM:
            return f"{FUNCTION_FORM[t]}({self.expr(e.a)}, {self.expr(e.b)})", PREC_ATOM
        if t is tir.Not:
            return f"not {self.expr(e.a, PREC_NOT)}", PREC_NOT
        if t is tir.Cast:
            return f'T.Cast("{e.dtype}", {self.expr(e.value)})', PREC_ATOM
        if t is tir.Select:
            return (f"T.Select({self.expr(e.condition)}, {self.expr(e.true_value)}, "
                    f"{self.expr(e.false_value)})"), PREC_ATOM
        if t is tir.Call:
            return self.call(e), PREC_ATOM
        if t is tir.StringImm:
            return format_string(e.value), PREC_ATOM
        if t is tir.Ramp:
            return f"T.Ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", PREC_ATOM
        if t is tir.Broadcast:
            return f"T.Broadcast({self.expr(e.value)}, {e.lanes})", PREC_ATOM
        if t is tir.Let:
            return f"T.Let({self.expr(e.body)}, where={{{self.name_of(e.var)}: {self.expr(e.value)}}})", PREC_ATOM
        raise TypeError(f"cannot print TIR expression {e!r}")

    def int_literal(self, e: tir.IntImm) -> str:
        if e.dtype == self.default_int:
            return str(e.value)
        if e.dtype == "bool":
            return f"T.bool({bool(e.value)})"
        return f"T.{e.dtype}({e.value})"

    def call(self, e: tir.Call) -> str:
        op = e.op
        if isinstance(op, ir.GlobalVar):  # a call of another prim_func of the module
            return f"{self.class_name}.{op.name_hint}({', '.join(self.expr(a) for a in e.args)})"
        if op in ("tir.call_extern", "tir.call_pure_extern", "tir.call_llvm_intrin", "tir.call_llvm_pure_intrin"):
            args = ", ".join(self.expr(a) for a in e.args)
            return f'T.{op[4:]}("{e.dtype}", {args})'
        if op in tir.BUILTIN_NAMES:
            name, dtype = tir.BUILTIN_NAMES[op]
            args = [self.expr(a) for a in e.args]
            if op in tir.DTYPE_FIRST_BUILTINS:
                args.insert(0, format_string(e.dtype))
            elif e.dtype != dtype:
                args.append(f"dtype={format_string(e.dtype)}")
            return f"T.{name}({', '.join(args)})"
        if op == "tir.reinterpret":
            return f'T.reinterpret("{e.dtype}", {self.expr(e.args[0])})'
        if op == "tir.tvm_struct_get":
            return f"T.tvm_struct_get({', '.join(self.expr(a) for a in e.args)}, T.{e.dtype}().ty)"
        if op == "tir.type_annotation":
            return f'T.type_annotation("{e.dtype}")'
        if op in ("tir.max_value", "tir.min_value"):
            return f'T.{op[4:]}("{e.dtype}")'
        name = op[4:] if op.startswith("tir.") else op
        return f"T.{name}({', '.join(self.expr(a) for a in e.args)})"

    def buffer_access(self, buf: tir.Buffer, indices) -> str:
        inner = ", ".join(self.expr(i) for i in indices) if indices else "()"  # rank 0: x[()]
        return f"{self.name_of(buf)}[{inner}]"

    def dim(self, e) -> str:
        return self.expr(e)

    def shape(self, shape: list) -> str:
        inner = ", ".join(self.dim(d) for d in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"

    def attr_value(self, v) -> str:
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, str):
            return format_string(v)
        if isinstance(v, float) and math.isinf(v):
            # `inf` is no literal: a number too large for a float reads back as one.
            return "1e309" if v > 0 else "-1e309"
        if isinstance(v, (int, float)):
            return repr(v)
        if v is None:
            return "None"
        if isinstance(v, dict):
            return self.attr_dict(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(self.attr_value(x) for x in v) + "]"
        if isinstance(v, tir.PrimExpr):
            return self.expr(v)
        if isinstance(v, tir.Buffer):
            return self.name_of(v)
        if isinstance(v, Target):
            # TVM's form: the whole configuration, defaults included, as one sorted dict.
            return f"T.target({self.attr_dict(v.export())})"
        return repr(v)

    def attr_dict(self, d: dict) -> str:
        items = sorted(d.items(), key=lambda kv: str(kv[0]))
        return "{" + ", ".join(f"{self.attr_value(k)}: {self.attr_value(v)}" for k, v in items) + "}"

    # ------------------------------------------------------------------ functions
    def prim_func(self, doc: Doc, func: tir.PrimFunc, name: str, decorator: str = "T.prim_func") -> None:
        names = self.names
        fc = self.comments.get(func)
        deco = f"@{decorator}(private=True)" if func.private else f"@{decorator}"
        if fc is not None:
            for c in fc.before:
                doc.comment(c)
        doc.line(deco)
        names.push()
        params = []
        prelude: list[str] = []
        # As TVM: first the parameters (a simple buffer inline as ``A: T.Buffer(...)``, any other
        # as its ``T.handle``), then a ``T.match_buffer`` for each buffer not inlined, preceded
        # by the declarations of the symbolic variables its shape introduces.
        matched = []
        for p in func.params:
            buf = func.buffer_map.get(p)
            if buf is not None and _is_simple_buffer(buf):
                bname = names.define(buf, buf.name)
                names.alias(p, f"{bname}.data")
                params.append(f"{bname}: {self.buffer_decl(buf, 'T.Buffer', keep_dtype=True)}")
                continue
            # `A: T.Buffer((n, 784))` whose shape needs a match_buffer prints as a handle plus
            # T.match_buffer: the buffer keeps the name, the handle gets one of its own. The
            # buffer is named here, in parameter order, as TVM's buffers are (of two parameters
            # both named ``T_add``, batch_norm's outputs, the first keeps the name even when it
            # is the matched one), and its handle after it (``T_add_1_handle``).
            bname = names.define(buf, buf.name) if buf is not None else None
            hint = f"{bname}_handle" if buf is not None and p.name == buf.name else p.name
            pname = names.define(p, hint)
            params.append(f"{pname}: {self.var_type(p)}")
            if buf is not None:
                matched.append((pname, buf, bname))
        for pname, buf, bname in matched:
            for v in vars_in(buf.shape + list(buf.strides) + [buf.elem_offset]):
                if not names.is_defined(v):
                    vname = names.define(v, v.name)
                    prelude.append(f"{vname} = T.{v.dtype}()")
            prelude.append(f"{bname} = T.match_buffer({pname}, {self.buffer_args(buf, keep_dtype=False)})")
        returns = f" -> T.{func.ret_type}" if func.ret_type else ""
        header = f"def {name}({', '.join(params)}){returns}:"
        doc.line(header, _trailing_only(fc))
        with doc.indent():
            attrs = printed_attrs(func.attrs, name)
            if attrs:
                doc.line(f"T.func_attr({self.attr_dict(attrs)})", self.comments.get("func_attr"))
            for line in prelude:
                doc.line(line)
            body, free = self._body_and_free_vars(doc, func.body)
            for v in free:
                if isinstance(v, tir.Buffer):
                    doc.line(f"{names.get(v)} = {self.buffer_decl(v, 'T.Buffer', keep_dtype=False)}")
                elif v in self.env_threads:
                    doc.line(f"{names.get(v)} = T.env_thread({format_string(self.env_threads[v])})")
                else:
                    doc.line(f"{names.get(v)} = {self.var_type(v, declare=True)}")
            doc.lines.extend(body.lines)
        if fc is not None:
            doc.after(fc)
        names.pop()

    @staticmethod
    def var_type(v: tir.Var, declare: bool = False) -> str:
        """A variable's type as an annotation (``T.int32``, ``T.handle("float32", "global")``)
        or, with ``declare``, as the call that declares a fresh one (``T.int32()``)."""
        if v.pointer is None:
            return f"T.{v.dtype}()" if declare else f"T.{v.dtype}"
        dtype, scope = v.pointer
        if dtype == "void":
            return f"T.handle(storage_scope={format_string(scope)})"
        return f"T.handle({format_string(dtype)}, {format_string(scope)})"

    def buffer_args(self, buf: tir.Buffer, keep_dtype: bool) -> str:
        parts = [self.shape(buf.shape)]
        if keep_dtype or buf.dtype != "float32":
            parts.append(f'"{buf.dtype}"')
        if buf.strides:
            parts.append(f"strides={self.shape(buf.strides)}")
        if buf.elem_offset is not None:
            parts.append(f"elem_offset={self.expr(buf.elem_offset)}")
        if buf.scope != "global":
            parts.append(f'scope="{buf.scope}"')
        if buf.align != 64:
            parts.append(f"align={buf.align}")
        if buf.offset_factor != 1:
            parts.append(f"offset_factor={buf.offset_factor}")
        if buf.axis_separators:
            parts.append(f"axis_separators={list(buf.axis_separators)}")
        if buf.annotations:
            parts.append(f"annotations={self.attr_dict(buf.annotations)}")
        return ", ".join(parts)

    def buffer_decl(self, buf: tir.Buffer, kind: str, keep_dtype: bool) -> str:
        return f"{kind}({self.buffer_args(buf, keep_dtype)})"

    def _body_and_free_vars(self, doc: Doc, body) -> tuple[Doc, list]:
        """The function body printed apart (at ``doc``'s depth), and the variables it uses
        that nothing in the function binds, which the caller declares before it."""
        out = Doc()
        out.depth = doc.depth
        self.launches = _count_launches(body)
        saved = self.free_vars, self.func_frame
        self.free_vars, self.func_frame = [], len(self.names.frames) - 1
        try:
            self.function_body(out, body)
            return out, self.free_vars
        finally:
            self.free_vars, self.func_frame = saved

    def function_body(self, doc: Doc, body) -> None:
        # The root block prints as a comment only where the parser puts it back: when it holds
        # a block or allocates (the parser's rule, shared so the two cannot drift apart).
        from ..ir.tir_analysis import contains_block

        if (
            isinstance(body, tir.BlockRealize)
            and body.block.name == "root"
            and not body.block.iter_vars
            and not body.block.annotations
            and not body.block.match_buffers
            and body.block.init is None
            and not body.block.reads and not body.block.writes  # else it prints as written
            and (body.block.alloc_buffers or contains_block(body.block.body))
        ):
            block = body.block
            doc.comment('# with T.block("root"):')
            for buf in block.alloc_buffers:
                self.alloc(doc, buf)
            self.stmt(doc, block.body)
            return
        self.stmt(doc, body)

    def alloc(self, doc: Doc, buf: tir.Buffer) -> None:
        name = self.names.define(buf, buf.name)
        if buf.data is not None and not self.names.is_defined(buf.data):
            self.names.alias(buf.data, f"{name}.data")
        doc.line(f"{name} = T.alloc_buffer({self.buffer_args(buf, keep_dtype=False)})", self.comments.get(buf))

    def scoped(self, doc: Doc, s, c, tail: bool, flat: str, context: str) -> None:
        """A statement scoping its body: written flat (``assert c, m`` then the body at the same
        level) when the body is the rest of the block, else as ``with <context>:``."""
        if tail:
            doc.line(flat, c)
            self.stmt(doc, s.body)
        else:
            doc.line(f"with {context}:", c)
            with doc.indent():
                self.stmt(doc, s.body)
            doc.after(c)

    def attr_stmt(self, s: tir.AttrStmt) -> str:
        """``T.attr(node, "key", value)``; about the constant 0, TVM 0.27's ``T.attr({"key": value})``."""
        key, value = format_string(s.attr_key), self.expr(s.value)
        if tir.is_const_int(s.node, 0) and s.node.dtype == "int32":
            return f"T.attr({{{key}: {value}}})"
        if isinstance(s.node, tir.Buffer):
            node = self.name_of(s.node)
        elif isinstance(s.node, tir.CommReducer):
            node = self.comm_reducer(s.node)
        else:
            node = self.expr(s.node)
        return f"T.attr({node}, {key}, {value})"

    def comm_reducer(self, r: tir.CommReducer) -> str:
        """``T.comm_reducer(lambda x, y: x + y, [T.float32(0.0)])``, a tuple for several values."""
        self.names.push()
        try:
            params = ", ".join(self.names.define(v, v.name) for v in r.lhs + r.rhs)
            results = [self.expr(e) for e in r.result]
        finally:
            self.names.pop()
        body = results[0] if len(results) == 1 else f"({', '.join(results)})"
        ids = ", ".join(self.expr(e) for e in r.identity_element)
        return f"T.comm_reducer(lambda {params}: {body}, [{ids}])"

    def launch_thread(self, doc: Doc, s: tir.AttrStmt, c, tail: bool) -> None:
        """A thread launch, as TVM prints it: ``bx = T.launch_thread("blockIdx.x", 64)`` over
        the rest of the body when the index is launched once (``with T.launch_thread(...) as
        bx:`` when more statements follow); otherwise the index is declared
        at the top of the function (``tx = T.env_thread("threadIdx.x")``) and each launch is
        ``T.launch_thread(tx, 32)`` (flat, or ``with`` when more statements follow)."""
        iv, extent = s.node, self.expr(s.value)
        if not self.names.is_defined(iv.var) and self.launches.get(iv.var, 0) <= 1:
            call = f"T.launch_thread({format_string(iv.thread_tag)}, {extent})"
            if tail:
                doc.line(f"{self.names.define(iv.var, iv.var.name)} = {call}", c)
                self.stmt(doc, s.body)
                return
            self.names.push()
            doc.line(f"with {call} as {self.names.define(iv.var, iv.var.name)}:", c)
            with doc.indent():
                self.stmt(doc, s.body)
            doc.after(c)
            self.names.pop()
            return
        self.env_threads[iv.var] = iv.thread_tag
        call = f"T.launch_thread({self.name_of(iv.var)}, {extent})"
        self.scoped(doc, s, c, tail, call, call)

    def assert_message(self, s: tir.AssertStmt) -> str:
        """The message as written: an expression, or ``("Kind", ["part", ...])``."""
        if s.kind:
            parts = ", ".join(format_string(p) for p in s.message_parts)
            return f"({format_string(s.kind)}, [{parts}])"
        return self.expr(s.message)

    def match_region(self, doc: Doc, match: tir.MatchBufferRegion) -> None:
        """A block's ``name = T.match_buffer(A[i, 0:16], shape)`` (a buffer over a region)."""
        source = self.region(match.source)
        buf = match.buffer
        name = self.names.define(buf, buf.name)
        if buf.data is not None and not self.names.is_defined(buf.data):
            self.names.alias(buf.data, f"{name}.data")
        doc.line(f"{name} = T.match_buffer({source}, {self.buffer_args(buf, keep_dtype=False)})",
                 self.comments.get(buf))

    # ------------------------------------------------------------------ statements
    def stmt(self, doc: Doc, s, tail: bool = True) -> None:
        """Print statement ``s``. ``tail``: nothing follows it in its body, so a LetStmt or an
        AssertStmt can scope the rest of the body without a block of its own (TVM's concise
        scoping); elsewhere they print as ``with T.LetStmt(...) as x:`` / ``with T.Assert(...):``."""
        t = type(s)
        if t is tir.SeqStmt:
            last = len(s.seq) - 1
            for i, x in enumerate(s.seq):
                self.stmt(doc, x, tail and i == last)
            return
        c = self.comments.get(s)
        if t is tir.BufferStore:
            doc.line(f"{self.buffer_access(s.buffer, s.indices)} = {self.expr(s.value)}", c)
        elif t is tir.For:
            self.for_loop(doc, s, c)
        elif t is tir.BlockRealize:
            self.block(doc, s, c)
        elif t is tir.IfThenElse:
            doc.line(f"if {self.expr(s.condition)}:", c)
            with doc.indent():
                self.stmt(doc, s.then_case)
            if s.else_case is not None:
                doc.line("else:")
                with doc.indent():
                    self.stmt(doc, s.else_case)
            doc.after(c)
        elif t is tir.Evaluate:
            v = s.value
            if isinstance(v, tir.Call) and v.op == "tir.ret" and len(v.args) == 1:
                doc.line(f"return {self.expr(v.args[0])}", c)
            elif isinstance(v, tir.Call):
                doc.line(self.expr(v), c)
            else:
                doc.line(f"T.evaluate({self.expr(v)})", c)
        elif t is tir.LetStmt:
            value = self.expr(s.value)
            if tail:
                name = self.names.define(s.var, s.var.name)
                doc.line(f"{name}: {self.var_type(s.var)} = {value}", c)
                self.stmt(doc, s.body)
            else:
                self.names.push()
                name = self.names.define(s.var, s.var.name)
                doc.line(f"with T.LetStmt({value}) as {name}:", c)
                with doc.indent():
                    self.stmt(doc, s.body)
                doc.after(c)
                self.names.pop()
        elif t is tir.DeclBuffer:
            buf = s.buffer
            data = self.expr(buf.data)
            name = self.names.define(buf, buf.name)
            doc.line(f"{name} = T.decl_buffer({self.buffer_args(buf, keep_dtype=False)}, data={data})", c)
            self.stmt(doc, s.body)
        elif t is tir.AttrStmt and isinstance(s.node, tir.IterVar) and s.attr_key == "thread_extent":
            self.launch_thread(doc, s, c, tail)
        elif t is tir.AttrStmt:
            call = self.attr_stmt(s)
            self.scoped(doc, s, c, tail, call, call)
        elif t is tir.AssertStmt:
            cond, message = self.expr(s.condition), self.assert_message(s)
            self.scoped(doc, s, c, tail, f"assert {cond}, {message}", f"T.Assert({cond}, {message})")
        elif t is tir.While:
            doc.line(f"while {self.expr(s.condition)}:", c)
            with doc.indent():
                self.stmt(doc, s.body)
            doc.after(c)
        else:
            raise TypeError(f"cannot print TIR statement {s!r}")

    def for_loop(self, doc: Doc, loop: tir.For, c) -> None:
        grid = []
        grid_vars = set()
        node = loop
        while isinstance(node, tir.For):
            if (node.kind != "serial" or not tir.is_const_int(node.min, 0) or node.annotations
                    or node.step is not None or _uses_any(node.extent, grid_vars) or (grid and self.comments.get(node) is not None)):
                break
            grid.append(node)
            grid_vars.add(node.loop_var)
            node = node.body
        self.names.push()
        if len(grid) > 1:
            names = [self.names.define(l.loop_var, l.loop_var.name) for l in grid]
            for l in grid:
                self.loop_ranges[id(l.loop_var)] = l
            extents = ", ".join(self.expr(l.extent) for l in grid)
            doc.line(f"for {', '.join(names)} in T.grid({extents}):", c)
            body = grid[-1].body
        else:
            name = self.names.define(loop.loop_var, loop.loop_var.name)
            self.loop_ranges[id(loop.loop_var)] = loop
            if tir.is_const_int(loop.min, 0) and loop.step is None:
                args = [self.expr(loop.extent)]
            else:
                args = [self.expr(loop.min), self.expr(_add(loop.min, loop.extent))]
            if loop.kind == "serial" and not loop.annotations:
                prefix = "range"
                if loop.step is not None:
                    args.append(self.expr(loop.step))
            else:
                prefix = LOOP_PREFIX[loop.kind]
                if loop.step is not None:
                    args.append(f"step={self.expr(loop.step)}")
            if loop.kind == "thread_binding":
                args.append(f'thread="{loop.thread_tag}"')
            if loop.annotations:
                args.append(f"annotations={self.attr_dict(loop.annotations)}")
            doc.line(f"for {name} in {prefix}({', '.join(args)}):", c)
            body = loop.body
        with doc.indent():
            self.stmt(doc, body)
        doc.after(c)
        self.names.pop()

    def block(self, doc: Doc, realize: tir.BlockRealize, c) -> None:
        block = realize.block
        doc.line(f"with T.block({format_string(block.name)}):", c)
        self.names.push()
        with doc.indent():
            self.block_iters(doc, realize)
            if not tir.is_const_int(realize.predicate, 1) or realize.predicate.dtype != "bool":
                doc.line(f"T.where({self.expr(realize.predicate)})")
            doc.line(f"T.reads({', '.join(self.region(r) for r in block.reads)})")
            doc.line(f"T.writes({', '.join(self.region(r) for r in block.writes)})")
            if block.annotations:
                doc.line(f"T.block_attr({self.attr_dict(block.annotations)})")
            for match in block.match_buffers:
                self.match_region(doc, match)
            for buf in block.alloc_buffers:
                self.alloc(doc, buf)
            if block.init is not None:
                doc.line("with T.init():")
                with doc.indent():
                    self.stmt(doc, block.init)
            self.stmt(doc, block.body)
        doc.after(c)
        self.names.pop()

    def block_iters(self, doc: Doc, realize: tir.BlockRealize) -> None:
        block = realize.block
        group: list[int] = []

        def remappable(i: int) -> bool:
            iv, value = block.iter_vars[i], realize.iter_values[i]
            if iv.kind not in ("S", "R") or not isinstance(value, tir.Var):
                return False
            loop = self.loop_ranges.get(id(value))
            if loop is None or not self.names.is_defined(value):
                return False
            return same_node(loop.min, iv.dom.min) and same_node(loop.extent, iv.dom.extent)

        def single(i: int) -> None:
            iv, value = block.iter_vars[i], realize.iter_values[i]
            value_text = self.expr(value)
            name = self.names.define(iv.var, iv.var.name)
            if tir.is_const_int(iv.dom.min, 0):
                dom = self.expr(iv.dom.extent)
            else:
                dom = f"({self.expr(iv.dom.min)}, {self.expr(_add(iv.dom.min, iv.dom.extent))})"
            doc.line(f"{name} = T.axis.{AXIS_NAMES[iv.kind]}({dom}, {value_text})")

        def flush() -> None:
            if not group:
                return
            if len(group) == 1:
                single(group[0])
            else:
                values = [self.expr(realize.iter_values[i]) for i in group]
                names = [self.names.define(block.iter_vars[i].var, block.iter_vars[i].var.name) for i in group]
                kinds = "".join(block.iter_vars[i].kind for i in group)
                doc.line(f'{", ".join(names)} = T.axis.remap("{kinds}", [{", ".join(values)}])')
            group.clear()

        for i in range(len(block.iter_vars)):
            if remappable(i):
                group.append(i)
            else:
                flush()
                single(i)
        flush()

    def region(self, r: tir.BufferRegion) -> str:
        parts = []
        for rng in r.region:
            if tir.is_const_int(rng.extent, 1):
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self.expr(_add(rng.min, rng.extent))}")
        return f"{self.name_of(r.buffer)}[{', '.join(parts) if parts else '()'}]"


def _count_launches(body) -> dict:
    """How many ``T.launch_thread`` scopes launch each thread index variable."""
    from ..ir.tir_visitor import TIRVisitor

    counts: dict = {}

    class _Counter(TIRVisitor):
        def visit_AttrStmt(self, node) -> None:
            if isinstance(node.node, tir.IterVar) and node.attr_key == "thread_extent":
                counts[node.node.var] = counts.get(node.node.var, 0) + 1
            self.generic_visit(node)

    _Counter().visit(body)
    return counts


def printed_attrs(attrs: dict, name: str) -> dict:
    """Function attributes as printed: ``global_symbol`` is implied by the name it is printed
    under, so it is written only when it differs."""
    if attrs.get("global_symbol") == name:
        attrs = {k: v for k, v in attrs.items() if k != "global_symbol"}
    return attrs


def print_name(func, default: str = "main") -> str:
    """The name a function printed on its own goes by: its global symbol, else ``main``. A
    symbol that is no Python name (``"ma:in"``) cannot be a ``def``'s name: it stays in the
    function's attributes and the function prints as ``main``."""
    symbol = func.attrs.get("global_symbol")
    if isinstance(symbol, str) and symbol.isidentifier() and not keyword.iskeyword(symbol):
        return symbol
    return default


def _add(a, b):
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return tir.IntImm(a.dtype, a.value + b.value)
    if tir.is_const_int(a, 0):
        return b
    return tir.Add(a.dtype, a, b)


def same_node(a, b) -> bool:
    """Whether two IR values are the same, field by field, with variables and buffers compared
    by identity (unlike structural equality, which maps a variable to any other one)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tir.Var, tir.Buffer, relax.Var, ir.GlobalVar)):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_node(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_node(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(
            same_node(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)
            if f.name not in ("span", "comments")
        )
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def _is_simple_buffer(buf: tir.Buffer) -> bool:
    """TVM's test for printing a parameter's buffer inline as ``A: T.Buffer(...)``: a constant
    shape and every other field at its default; any other buffer gets a ``T.match_buffer``."""
    return (
        not vars_in(buf.shape)
        and not buf.strides
        and buf.elem_offset is None
        and buf.scope == "global"
        and buf.align == 64
        and buf.offset_factor == 1
        and not buf.axis_separators
    )


def _uses_any(e, vars_: set) -> bool:
    return any(v in vars_ for v in vars_in([e]))


def _trailing_only(comments):
    if comments is None or not comments.trailing:
        return None
    from ..ir import Comments

    return Comments([], comments.trailing)
