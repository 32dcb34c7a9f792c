"""Relax to TVMScript text, in the classic dialect TVM prints.

Every binding is annotated with its struct info, except a ``call_tir``/``call_dps_packed`` whose
variable has exactly the struct info its ``out_sinfo`` gives (TVM's rule). Symbolic dimensions
are written as strings in the signature (``R.Tensor(("n", 784), ...)``) and declared in the body
(``n = T.int64()``); ``cls = Module`` is written when the function refers to module functions.
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from ..metadata import Tables, is_inline
from ..runtime.tensor_base import TensorBase
from .doc import Doc
from .tir_printer import Names, TIRPrinter, format_float, format_string, printed_attrs, same_node

_OP_PREFIX = "relax."


class RelaxPrinter:
    def __init__(self, module_functions: set | None = None, comments: dict | None = None,
                 metadata: Tables | None = None) -> None:
        self.names = Names()
        # Large constants and attribute tensors printed by reference, for the file's metadata
        # section (None: constants inline; see tvmscript/metadata.py).
        self.metadata = metadata
        self.tir = TIRPrinter(self.names)
        self.module_functions = module_functions  # names of the module's functions, if in one
        self.comments = comments or {}
        self.quote_sym = False
        self.uses_cls = False
        self.uses_tir = False
        self.pending_sym: list = []
        self.func_frame = 0  # the Names frame of the function being printed

    # ------------------------------------------------------------------ struct info
    def sinfo(self, s) -> str:
        t = type(s)
        if t is relax.TensorStructInfo:
            parts = []
            if s.shape is not None:
                parts.append(self.shape_tuple(s.shape))
            if s.dtype:
                parts.append(f'dtype="{s.dtype}"')
            if s.vdevice:
                parts.append(f'vdevice="{s.vdevice}"')
            if s.shape is None and s.ndim >= 0:
                parts.append(f"ndim={s.ndim}")
            return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"
        if t is relax.TupleStructInfo:
            if not s.fields:
                return "R.Tuple"
            return f"R.Tuple({', '.join(self.sinfo(f) for f in s.fields)})"
        if t is relax.ShapeStructInfo:
            if s.values is not None:
                return f"R.Shape([{', '.join(self.dim(v) for v in s.values)}])"
            if s.ndim >= 0:
                return f"R.Shape(ndim={s.ndim})"
            return "R.Shape"
        if t is relax.PrimStructInfo:
            if s.value is not None:
                v = s.value
                if isinstance(v, tir.IntImm) and v.dtype not in ("int64", "bool"):
                    # As R.prim_value prints it: a bare number would read back as an int64.
                    return f"R.Prim(value=T.{v.dtype}({v.value}))"
                return f"R.Prim(value={self.dim(v)})"
            return f'R.Prim("{s.dtype}")'
        if t is relax.FuncStructInfo:
            if s.params is None and isinstance(s.ret, (relax.ObjectStructInfo, type(None))) and s.purity:
                return "R.Callable"
            params = "None" if s.params is None else _tuple([self.sinfo(p) for p in s.params])
            ret = self.sinfo(s.ret) if s.ret is not None else "R.Object"
            return f"R.Callable({params}, {ret}, {bool(s.purity)})"  # as TVM 0.27 writes it
        return "R.Object"

    def dim(self, d) -> str:
        if isinstance(d, tir.IntImm):
            return str(d.value)
        if isinstance(d, tir.Var):
            name = self.names.get(d)
            if name is None:
                # Declared at the top of the function, so it is defined in the function's frame
                # even when first seen inside an if branch.
                name = self.names.define(d, d.name, frame=self.func_frame)
                self.pending_sym.append(d)
            return f'"{name}"' if self.quote_sym else name
        saved, self.tir.default_int = self.tir.default_int, "int64"  # Relax dims are int64
        try:
            text = self.tir.expr(d)
        finally:
            self.tir.default_int = saved
        return format_string(text) if self.quote_sym else text

    def shape_tuple(self, shape) -> str:
        inner = ", ".join(self.dim(d) for d in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        t = type(e)
        if t is relax.Var or t is relax.DataflowVar:
            name = self.names.get(e)
            return name if name is not None else e.name_hint
        if t is ir.GlobalVar:
            if self.module_functions is not None and e.name_hint in self.module_functions:
                self.uses_cls = True
                return f"cls.{e.name_hint}"
            return e.name_hint
        if t is relax.Call:
            return self.call(e)
        if t is relax.Tuple:
            if not e.fields:
                return "R.tuple()"  # as TVM prints the empty tuple
            inner = ", ".join(self.expr(f) for f in e.fields)
            return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
        if t is relax.TupleGetItem:
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if t is relax.Constant:
            return self.constant(e)
        if t is relax.ShapeExpr:
            return f"R.shape([{', '.join(self.dim(v) for v in e.values)}])"
        if t is relax.PrimValue:
            v = e.value
            if isinstance(v, tir.IntImm):
                # The parser reads a bare number as int64; other dtypes say theirs.
                if v.dtype == "bool":
                    return f"R.prim_value({bool(v.value)})"
                return f"R.prim_value({v.value if v.dtype == 'int64' else f'T.{v.dtype}({v.value})'})"
            # An int64 expression of symbolic dims (``a // 2 - 1``) prints as a dim does.
            return f"R.prim_value({self.dim(v) if v.dtype == 'int64' and not self.quote_sym else self.tir.expr(v)})"
        if t is relax.StringImm:
            return f"R.str({format_string(e.value)})"
        if t is relax.DataTypeImm:
            return f'R.dtype("{e.value}")'
        if t is relax.ExternFunc:
            return format_string(e.global_symbol)
        raise TypeError(f"cannot print Relax expression {e!r}")

    def constant(self, c: relax.Constant) -> str:
        data = c.data
        if not is_inline(data) and self.metadata is not None:
            # Large: referenced as TVM does; the values go in the file's metadata section.
            return self.metadata.constant(data)
        return f'R.const({_py_value(data)}, "{data.dtype}")'

    def call(self, e: relax.Call) -> str:
        op = e.op
        if isinstance(op, relax.Op):
            name = op.name
            if name in relax.DPS_CALL_OPS:  # callee, args tuple, out_sinfo, attributes, tir_vars
                callee, args = e.args[0], e.args[1]
                parts = [self.expr(callee), self.expr(args)]
                out = e.sinfo_args
                if len(out) == 1:
                    parts.append(f"out_sinfo={self.sinfo(out[0])}")
                else:
                    parts.append(f"out_sinfo=[{', '.join(self.sinfo(s) for s in out)}]")
                # call_tir_inplace's inplace_indices, call_tir_with_grad's te_grad_name/kwargs
                parts += [f"{k}={self.attr_value(v)}" for k, v in e.attrs.items()]
                if len(e.args) > 2:
                    parts.append(f"tir_vars={self.expr(e.args[2])}")
                return f"R.{name[len(_OP_PREFIX):]}({', '.join(parts)})"
            if name in _FORMAT_AT:  # R.print / R.assert_op: the format goes last, as a keyword
                at = _FORMAT_AT[name]
                parts = [self.expr(a) for i, a in enumerate(e.args) if i != at]
                parts.append(f"format={self.expr(e.args[at])}")
                return f"R.{name[len(_OP_PREFIX):]}({', '.join(parts)})"
            if name == "relax.hint_on_device":  # the device as TVM writes it, R.device(...)
                a = e.attrs
                return (f"R.hint_on_device({self.expr(e.args[0])}, R.device(device_type={a['device_type']}, "
                        f"index={a['index']}), {format_string(a['memory_scope'])})")
            if name == "relax.call_pure_packed":
                parts = [self.expr(a) for a in e.args]
                if e.sinfo_args:
                    parts.append(f"sinfo_args={_tuple([self.sinfo(s) for s in e.sinfo_args])}")
                return f"R.call_pure_packed({', '.join(parts)})"
            parts = [self.expr(a) for a in e.args]
            for k, v in e.attrs.items():
                parts.append(f"{k}={self.attr_value(v)}")
            return f"R.{name[len(_OP_PREFIX):]}({', '.join(parts)})"
        if isinstance(op, relax.ExternFunc):
            parts = [format_string(op.global_symbol)] + [self.expr(a) for a in e.args]
            if e.sinfo_args:
                parts.append(f"sinfo_args={_tuple([self.sinfo(s) for s in e.sinfo_args])}")
            return f"R.call_packed({', '.join(parts)})"
        return f"{self.expr(op)}({', '.join(self.expr(a) for a in e.args)})"

    def attr_value(self, v) -> str:
        if v is None:
            return "None"
        if isinstance(v, bool):
            return repr(v)
        if isinstance(v, str):
            return format_string(v)
        if isinstance(v, float):
            return format_float(v)  # full precision, as TVM: epsilon=1.0000000000000001e-05
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(self.attr_value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self.attr_value(k)}: {self.attr_value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, tir.PrimExpr):
            return self.tir.expr(v)
        if _is_tensor(v):
            return self.tensor_attr(v)
        text = repr(v)  # an attribute object that prints itself (layout_transform's T.index_map)
        if text.startswith("T."):
            self.uses_tir = True
        return text

    def tensor_attr(self, t) -> str:
        """A tensor in an attribute (the importers' weights): it has no literal form, so it is
        referenced as TVM does, ``metadata["ffi.Tensor"][i]``, its values in the section."""
        if self.metadata is None:
            raise ValueError(
                "a tensor in an attribute prints as a metadata reference: print the whole "
                "function or module (its metadata section holds the values)"
            )
        return self.metadata.tensor(t)

    # ------------------------------------------------------------------ functions
    def function(self, doc: Doc, func: relax.Function, name: str) -> None:
        fc = self.comments.get(func)
        if fc is not None:
            for c in fc.before:
                doc.comment(c)
        opts = []
        if func.private:
            opts.append("private=True")
        if not func.is_pure:
            opts.append("pure=False")
        doc.line("@R.function" + (f"({', '.join(opts)})" if opts else ""))
        self.names.push()
        self.func_frame = len(self.names.frames) - 1
        self.pending_sym = []
        self.quote_sym = True
        params = []
        for p in func.params:
            pname = self.names.define(p, p.name_hint)
            params.append(f"{pname}: {self.sinfo(p.struct_info)}")
        ret = self.sinfo(func.ret_struct_info) if func.ret_struct_info is not None else None
        self.quote_sym = False
        header = f"def {name}({', '.join(params)})" + (f" -> {ret}" if ret else "") + ":"
        body = Doc()
        body.depth = doc.depth + 1
        self.uses_cls = False
        self.body_doc = body
        # As in TVM, every symbolic dimension is declared at the top of the function: those of
        # the signature first, then R.func_attr, then those first seen in the body (e.g. in an
        # R.match_cast), then ``cls = Module``.
        sym_defs = self._take_sym_defs()
        self.seq_expr(body, func.body, ("return", func))
        body_sym_defs = self._take_sym_defs()
        doc.line(header, _trailing_only(fc))
        with doc.indent():
            for line in sym_defs:
                doc.line(line)
            attrs = printed_attrs(func.attrs, name)
            if attrs:
                doc.line(f"R.func_attr({self.func_attrs(attrs)})", self.comments.get("func_attr"))
            for line in body_sym_defs:
                doc.line(line)
            if self.uses_cls:
                doc.line(f"cls = {self.class_name}")
        doc.lines.extend(body.lines)
        if fc is not None:
            doc.after(fc)
        if sym_defs or body_sym_defs:
            self.uses_tir = True
        self.names.pop()

    class_name = "Module"

    def func_attrs(self, attrs: dict) -> str:
        items = sorted(attrs.items(), key=lambda kv: str(kv[0]))
        return "{" + ", ".join(f"{self.attr_value(k)}: {self.attr_value(v)}" for k, v in items) + "}"

    def seq_expr(self, doc: Doc, seq: relax.SeqExpr, return_key) -> None:
        for block in seq.blocks:
            if isinstance(block, relax.DataflowBlock):
                c = self.comments.get(block)
                doc.line("with R.dataflow():", c)
                with doc.indent():
                    for b in block.bindings:
                        self.binding(doc, b)
                    outputs = block.outputs or [b.var for b in block.bindings if not isinstance(b.var, relax.DataflowVar)]
                    doc.line(f"R.output({', '.join(self.expr(v) for v in outputs)})", self.comments.get(("output", block)))
                doc.after(c)
            else:
                for b in block.bindings:
                    self.binding(doc, b)
        doc.line(f"return {self.return_value(seq.body)}", self.comments.get(return_key))

    def return_value(self, e) -> str:
        return self.expr(e)

    def binding(self, doc: Doc, b) -> None:
        c = self.comments.get(b)
        var = b.var
        if isinstance(b, relax.MatchCast):
            value = f"R.match_cast({self.expr(b.value)}, {self.sinfo(b.struct_info)})"
            ann = self.sinfo(var.struct_info)
            name = self.names.define(var, var.name_hint)
            doc.line(f"{name}: {ann} = {value}", c)
            return
        value = b.value
        if isinstance(value, relax.If):
            self.if_binding(doc, b, c)
            return
        if isinstance(value, relax.Function):
            self.nested_function(doc, b)
            return
        rhs = self.binding_value(value)
        if var.name_hint == "_" and _is_void(var.struct_info):
            doc.line(rhs, c)  # TVM's form of a call made for its effect: R.print(...)
            return
        ann = None if self._hide_annotation(var, value) else self.sinfo(var.struct_info)
        name = self.names.define(var, var.name_hint) if var.name_hint != "_" else "_"
        doc.line(f"{name}: {ann} = {rhs}" if ann else f"{name} = {rhs}", c)

    def _take_sym_defs(self) -> list[str]:
        """The ``n = T.int64()`` lines of the symbolic dims seen since the last call."""
        lines = [f"{self.names.get(v)} = T.{v.dtype}()" for v in self.pending_sym]
        self.pending_sym = []
        return lines

    def binding_value(self, value) -> str:
        if isinstance(value, relax.ExternFunc):
            return f"R.ExternFunc({format_string(value.global_symbol)})"
        # TVM drops the parentheses of a tuple bound to a variable, except for one field: (x,).
        if isinstance(value, relax.Tuple) and len(value.fields) > 1:
            return ", ".join(self.expr(f) for f in value.fields)
        return self.expr(value)

    def _hide_annotation(self, var, value) -> bool:
        if isinstance(value, relax.Call) and isinstance(value.op, relax.Op) and value.op.name in (
            "relax.call_tir", "relax.call_dps_packed"
        ):
            out = value.sinfo_args
            implied = out[0] if len(out) == 1 else relax.TupleStructInfo(list(out))
            return same_node(implied, var.struct_info)
        return False

    def nested_function(self, doc: Doc, b: relax.VarBinding) -> None:
        """A closure bound in a function body: a nested ``@R.function`` def headed, as TVM
        prints it, by the import line and a blank line, and followed by a blank line."""
        name = self.names.define(b.var, b.var.name_hint)
        doc.comment(_NESTED_HEADER)
        doc.line("")
        saved = (self.func_frame, self.pending_sym, self.quote_sym, self.uses_cls, self.body_doc)
        self.function(doc, b.value, name)
        inner_uses_cls = self.uses_cls
        self.func_frame, self.pending_sym, self.quote_sym, self.uses_cls, self.body_doc = saved
        self.uses_cls = self.uses_cls or inner_uses_cls
        doc.blank()

    def if_binding(self, doc: Doc, b: relax.VarBinding, c) -> None:
        e: relax.If = b.value
        doc.line(f"if {self.expr(e.cond)}:", c)
        name = None
        for i, branch in enumerate((e.true_branch, e.false_branch)):
            if i == 1:
                doc.line("else:")
            with doc.indent():
                self.names.push()
                for block in branch.blocks:
                    for x in block.bindings:
                        self.binding(doc, x)
                rhs = self.binding_value(branch.body)  # may name the branch's own variables
                self.names.pop()
                if name is None:
                    name = self.names.define(b.var, b.var.name_hint)
                doc.line(f"{name}: {self.sinfo(b.var.struct_info)} = {rhs}", self.comments.get(("result", branch)))
        doc.after(c)


_NESTED_HEADER = "# from tvm.script import relax as R"

# Where the format string sits in the arguments of the calls printing it as ``format=``.
_FORMAT_AT = {"relax.print": 0, "relax.assert_op": 1}


def _is_void(sinfo) -> bool:
    """The empty tuple's struct info: what a call made only for its effect returns."""
    return isinstance(sinfo, relax.TupleStructInfo) and not sinfo.fields


def _py_value(data) -> str:
    """The value of ``R.const(value, dtype)`` (``data`` is a numpy array): a float as TVM writes
    float literals (full precision, ``"nan"``/``"inf"`` quoted), nested lists for a tensor."""

    def text(v) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(text(x) for x in v) + "]"
        if isinstance(v, float):
            return format_float(v)
        return repr(v)

    return text(data.tolist())


def _is_tensor(v) -> bool:
    """Whether `v` is a `tvms.nd` tensor (known without loading NumPy)."""
    return isinstance(v, TensorBase)


def _tuple(items: list) -> str:
    """A Python tuple display: ``(a,)`` for one item, ``(a, b)`` for more."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _trailing_only(comments):
    if comments is None or not comments.trailing:
        return None
    return ir.Comments([], comments.trailing)
