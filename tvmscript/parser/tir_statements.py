"""TensorIR statements other than loops and blocks: expression statements (``T.evaluate``, the
block declarations ``T.reads``/``T.writes``/``T.where``/``T.block_attr``, ``T.func_attr``,
``T.attr``, ``T.launch_thread``, ``T.bind``, macro calls, ``continue``/``break``), asserts,
``while``, ``return``, and assignments: buffer stores, lets (``x = e``, ``x: T.int32 = e``,
``T.let``), declarations (``n = T.int64()``, ``T.match_buffer``, ``T.alloc_buffer``,
``T.env_thread``, ``T.axis.*``, ``T.axis.remap``...).

A let or an assert takes the rest of the enclosing body as its own: it is returned as a `Scoped`,
which `PrimFuncBuilder.body` completes.
"""

from __future__ import annotations

from ..ir import tir
from . import ast
from .arguments import bind_arguments, dotted_name, split_declarations
from .comments import FUNC_ATTR, take_comments
from .tir_attrs import attr_chain, merge_attrs
from .tir_frames import Macro, Scoped
from .tir_names import AXIS_KINDS, DTYPE_NAMES, SCOPED_ALLOCS


class TIRStatements:
    """The statements of `PrimFuncBuilder` (tir_builder.py) other than loops and blocks."""

    def _expr_stmt(self, s: ast.ExprStmt, function_level: bool):
        v = s.value
        if isinstance(v, ast.Name) and v.id in ("continue", "break") and self.scope.lookup(v.id) is None:
            # Python's ``continue`` / ``break``: TVM's T.continue_loop() / T.break_loop().
            call = ast.Call(ast.Name(f"T.{v.id}_loop", v.line, v.col, v.end_line, v.end_col), [], [],
                            v.line, v.col, v.end_line, v.end_col)
            from .tir_calls import EXPR_CALLS

            return tir.Evaluate(EXPR_CALLS[f"T.{v.id}_loop"](self, call, f"T.{v.id}_loop"))
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and isinstance(self.scope.lookup(v.func.id), Macro):
            return self._expand_macro(self.scope.lookup(v.func.id).fdef, v)
        if isinstance(v, ast.Call) and dotted_name(v.func) == "T.Return":
            # ``T.Return(value)``: TVM's explicit spelling of ``return value``.
            args = bind_arguments(self.ctx, v, "T.Return", ["value"])
            return self._return(ast.Return(args["value"], v.line, v.col, v.end_line, v.end_col))
        if isinstance(v, ast.Call) and dotted_name(v.func) == "T.bind":
            # ``T.bind(value, var=j)``, j declared with ``j = T.int32()``: a let of j over the rest.
            args = bind_arguments(self.ctx, v, "T.bind", ["value", "var"], {"var": None})
            if args["var"] is None:
                raise self.error("T.bind(value) as a statement needs var=...; or write x = T.bind(value)", v)
            var = self.expr(args["var"])
            if not isinstance(var, tir.Var):
                raise self.error("T.bind: var must be a variable", args["var"])
            value = self._coerce(self.expr(args["value"]), var.dtype, args["value"])
            return Scoped(self.scope, lambda rest: tir.LetStmt(var, value, rest))
        if isinstance(v, ast.Call):
            name = dotted_name(v.func)
            frame = self.blocks[-1] if self.blocks else None
            if name == "T.func_attr":
                if not function_level:
                    raise self.error("T.func_attr must be at the top of the function body", v)
                args = bind_arguments(self.ctx, v, name, ["attrs"])
                for key, value in self._attr_dict(args["attrs"]).items():
                    # TVM 0.25+ spells the classic "tir.*" attributes "tirx.*".
                    if isinstance(key, str) and key.startswith("tirx."):
                        key = "tir." + key[len("tirx."):]
                    self.attrs[key] = value
                take_comments(self.comments, FUNC_ATTR, s)
                return None
            if name in ("T.reads", "T.writes"):
                if frame is None or frame.name == "root" and frame.node is not None and not isinstance(frame.node, ast.With):
                    raise self.error(f"{name} is only allowed inside a T.block", v)
                regions = []
                for a in v.args:
                    items = a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a]
                    regions.extend(self._region(x) for x in items)
                if v.keywords:
                    raise self.error(f"{name}() takes no keyword arguments", v.keywords[0])
                if name == "T.reads":
                    frame.reads = regions
                else:
                    frame.writes = regions
                return None
            if name == "T.where":
                if frame is None or not isinstance(frame.node, ast.With):
                    raise self.error("T.where is only allowed inside a T.block", v)
                args = bind_arguments(self.ctx, v, name, ["predicate"])
                frame.predicate = self._condition(args["predicate"])
                return None
            if name == "T.block_attr":
                if frame is None or not isinstance(frame.node, ast.With):
                    raise self.error("T.block_attr is only allowed inside a T.block", v)
                args = bind_arguments(self.ctx, v, name, ["attrs"])
                merged = merge_attrs(frame.annotations, self._attr_dict(args["attrs"]))
                if isinstance(merged, str):
                    raise self.error(f"Try to merge two annotations with different values for key '{merged}'",
                                     args["attrs"])
                frame.annotations = merged
                return None
            if name == "T.attr":
                attrs = self._attr_stmts(v)
                return Scoped(self.scope, lambda rest: attr_chain(attrs, rest))
            if name == "T.launch_thread":
                iv, extent = self._launch_thread(v)
                return Scoped(self.scope, lambda rest: tir.AttrStmt(iv, "thread_extent", extent, rest))
            if name == "T.evaluate":
                args = bind_arguments(self.ctx, v, name, ["value"])
                return tir.Evaluate(self.expr(args["value"]))
        return tir.Evaluate(self.expr(v))

    def _expand_macro(self, fdef: ast.FunctionDef, call: ast.Call) -> tir.Stmt:
        """``capture(A, B)``, ``capture`` a nested ``@T.inline`` function: its body, built
        here with its parameters bound to the arguments (buffers or expressions). Names it
        does not bind resolve at the call, not at its definition (TVM's late binding)."""
        if call.keywords or len(call.args) != len(fdef.args):
            raise self.error(f"{fdef.name}() takes {len(fdef.args)} positional arguments", call)
        values = []
        for a in call.args:
            found = self.scope.lookup(a.id) if isinstance(a, ast.Name) else None
            values.append(found if isinstance(found, tir.Buffer) else self.expr(a))
        self.scope.push()
        try:
            for param, value in zip(fdef.args, values):
                self.scope.define(param.name, value)
            return self.body(fdef.body)
        finally:
            self.scope.pop()

    def _assert_message(self, node):
        """An assert's message: an expression, or TVM 0.27's ``("ValueError", ["part", ...])``
        (an error kind and string parts). Returns (message, kind, parts)."""
        if node is None:
            return tir.StringImm("handle", ""), "", []
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            kind, parts = node.elts
            if not (isinstance(kind, ast.Constant) and isinstance(kind.value, str)):
                raise self.error("an assert's error kind must be a string such as \"ValueError\"", kind)
            if not isinstance(parts, ast.List) or not all(
                    isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts.elts):
                raise self.error("an assert's message parts must be a list of strings", parts)
            texts = [p.value for p in parts.elts]
            return tir.StringImm("handle", "".join(texts)), kind.value, texts
        return self.expr(node), "", []

    def _while(self, s: ast.While) -> tir.While:
        return tir.While(self._condition(s.test), self._nested_body(s.body))

    def _return(self, s: ast.Return) -> tir.Evaluate:
        """``return expr`` in a scalar function (``def f(M: T.int32) -> T.int32``): as in TVM, an
        evaluated ``tir.ret`` call, its value cast to the declared return dtype. Without a return
        annotation TVM takes the value as it is (``return 5`` prints back unannotated)."""
        if s.value is None:
            raise self.error("a T.prim_func return needs a value: return <expr>", s)
        if self._ret_type is None:
            value = self.expr(s.value)
            return tir.Evaluate(tir.Call(value.dtype, "tir.ret", [value]))
        value = self._coerce(self.expr(s.value), self._ret_type, s.value)
        return tir.Evaluate(tir.Call(self._ret_type, "tir.ret", [value]))

    # ------------------------------------------------------------------ assignments
    @staticmethod
    def _is_var_declaration(node) -> bool:
        """``T.int64()``: a fresh variable of a scalar type."""
        if not (isinstance(node, ast.Call) and not node.args and not node.keywords):
            return False
        callee = dotted_name(node.func)
        return bool(callee) and callee.startswith("T.") and callee[2:] in DTYPE_NAMES

    def _assign(self, s: ast.Assign, function_level: bool):
        target, value = s.target, s.value
        if isinstance(target, ast.Subscript):
            return self._store(target, value)
        if isinstance(target, ast.Tuple):
            if isinstance(value, ast.Call) and dotted_name(value.func) == "T.axis.remap":
                return self._axis_remap(target, value)
            parts = split_declarations(self.ctx, s, self._is_var_declaration)
            if parts is not None:
                for part in parts:
                    self._assign(part, function_level)
                return None
            raise self.error("tuple assignment is only supported for T.axis.remap and T.int64() declarations", s)
        if not isinstance(target, ast.Name):
            raise self.error("cannot assign to this expression", target)
        name = target.id
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "view"
                and isinstance(self.scope.lookup(dotted_name(value.func.value) or ""), tir.Buffer)):
            return self._view(name, target, value)
        if isinstance(value, ast.Call) and dotted_name(value.func) == "T.axis.remap":
            # ``vi = T.axis.remap("S", [i])``: one iterator, as the MLC course writes it.
            one = ast.Tuple([target], target.line, target.col, target.end_line, target.end_col)
            return self._axis_remap(one, value)
        if isinstance(value, ast.Call):
            callee = dotted_name(value.func)
            if callee == "T.match_buffer":
                args = value
                if not args.args:
                    raise self.error("T.match_buffer() missing the handle argument", value)
                if self._is_region(args.args[0]):
                    return self._match_region(name, target, value)
                handle = self.expr(args.args[0])
                if not isinstance(handle, tir.Var) or handle.dtype != "handle":
                    raise self.error("T.match_buffer expects a T.handle parameter", args.args[0])
                rest = ast.Call(value.func, value.args[1:], value.keywords, value.line, value.col, value.end_line, value.end_col)
                buf = self._buffer_decl(name, rest, kind="T.match_buffer")
                buf.data = handle
                if handle in self.buffer_map:
                    raise self.error(f"handle '{handle.name}' is already matched to a buffer", value)
                self.buffer_map[handle] = buf
                self.scope.define(name, buf)
                return None
            if callee == "T.meta_var":
                # ``a = T.meta_var(A[i] * 2)``: a name for an expression, substituted where it
                # is used (no let binding), as TVM's macro-like helper.
                args = bind_arguments(self.ctx, value, callee, ["value"])
                self.scope.define(name, self.expr(args["value"]))
                return None
            if callee in ("T.alloc_buffer", "T.decl_buffer", *SCOPED_ALLOCS):
                buf = self._buffer_decl(name, value, kind=callee)
                if buf.data is not None:  # T.decl_buffer(..., data=ptr): over existing memory
                    return self._decl_buffer(name, buf)
                if buf.data is None:
                    # Its data pointer, one variable for every ``name.data`` in the body.
                    buf.data = tir.Var("handle", name, self.ctx.span(target))
                self.blocks[-1].alloc_buffers.append(buf)
                self.scope.define(name, buf)
                return None
            if callee and callee.startswith("T.") and callee[2:] in DTYPE_NAMES and not value.args and not value.keywords:
                var = self._declared_dim(name, callee[2:]) or tir.Var(callee[2:], name, self.ctx.span(target))
                var.dtype = callee[2:]
                self.scope.define(name, var)
                return None
            if callee == "T.env_thread":
                # ``tx = T.env_thread("threadIdx.x")``: a thread index, launched later by
                # ``T.launch_thread(tx, extent)`` (possibly several times).
                args = bind_arguments(self.ctx, value, callee, ["thread_tag"])
                var = tir.Var("int32", name, self.ctx.span(target))
                self._env_threads[var] = self._thread_tag(args["thread_tag"])
                self.scope.define(name, var)
                return None
            if callee == "T.launch_thread":
                # ``bx = T.launch_thread("blockIdx.x", 64)``: a new thread index over the rest.
                iv, extent = self._launch_thread(value, name, target)
                self.scope.push()
                self.scope.define(name, iv.var)
                return Scoped(self.scope, lambda rest: tir.AttrStmt(iv, "thread_extent", extent, rest), push=False)
            if callee == "T.Buffer":
                # ``B = T.Buffer((1,), scope="local")``: a buffer over memory declared nowhere in
                # the function (TVM allows it with check_well_formed=False).
                buf = self._buffer_decl(name, value)
                buf.data = tir.Var("handle", name, self.ctx.span(target))
                self.scope.define(name, buf)
                return None
            if callee == "T.handle" and self._is_pointer_type(value):
                # ``ptr = T.handle("float32")``: a fresh pointer variable (TVM's declaration).
                self.scope.define(name, tir.Var("handle", name, self.ctx.span(target), self._pointer(value)))
                return None
            if callee in AXIS_KINDS:
                return self._axis(name, target, value, AXIS_KINDS[callee])
        if isinstance(value, ast.Call) and dotted_name(value.func) == "T.bind":
            value = bind_arguments(self.ctx, value, "T.bind", ["value"])["value"]  # x = T.bind(v): x = v
        expr = self.expr(value)
        var = tir.Var(expr.dtype, name, self.ctx.span(target))
        return self._let(var, expr)

    def _let(self, var, value):
        self.scope.push()
        self.scope.define(var.name, var)
        return Scoped(self.scope, lambda rest: tir.LetStmt(var, value, rest), push=False)

    def _ann_assign(self, s: ast.AnnAssign):
        if not isinstance(s.target, ast.Name):
            raise self.error("expected a variable name", s.target)
        ann = self._let_annotation(s.annotation)
        if s.value is None:
            raise self.error("a TIR variable needs a value", s)
        if self._is_pointer_type(ann):
            value = self.expr(s.value)
            if value.dtype != "handle":
                raise self.error(f"type mismatch: expected a handle value, got {value.dtype}", s.value)
            var = tir.Var("handle", s.target.id, self.ctx.span(s.target), self._pointer(ann))
            return self._let(var, value)
        dtype = self._dtype(ann)
        value = self._coerce(self.expr(s.value), dtype, s.value)
        return self._let(tir.Var(dtype, s.target.id, self.ctx.span(s.target)), value)

    @staticmethod
    def _let_annotation(node):
        """The dtype inside ``T.let[T.float32]``, TVM 0.27's spelling of an immutable scalar
        binding; a plain dtype annotation is returned as is. Both bind a LetStmt here, since
        a TIR variable in tvms is never reassigned."""
        if isinstance(node, ast.Subscript) and dotted_name(node.value) == "T.let":
            return node.index
        return node

    def _aug_assign(self, s: ast.AugAssign):
        if not isinstance(s.target, ast.Subscript):
            raise self.error("augmented assignment is only supported on buffer elements", s)
        synthetic = ast.BinOp(s.op, s.target, s.value, s.line, s.col, s.end_line, s.end_col)
        return self._store(s.target, synthetic)
