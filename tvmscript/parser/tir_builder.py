"""Syntax tree to TensorIR: builds a `tir.PrimFunc` from a ``@T.prim_func`` definition.

Statements are handled by `PrimFuncBuilder.stmt` (one method per statement form), expressions by
`PrimFuncBuilder.expr`; calls of ``T.*`` functions in expressions are dispatched through
`EXPR_CALLS` (tir_calls.py), the table a new intrinsic is added to. Blocks collect their declarations
(``T.axis.*``, ``T.reads``, ``T.writes``, ``T.where``, ``T.block_attr``, ``T.alloc_buffer``,
``T.init``) in a `_BlockFrame`; reads and writes a block does not declare are inferred from its
body, as TVM's parser does (`infer_access_regions`, compiler/tir_analysis.py).

Lower-level forms TVM's own tests write are read too: thread launches (``T.launch_thread`` /
``T.env_thread``, a ``"thread_extent"`` AttrStmt over a thread IterVar), buffers over existing
memory (``T.decl_buffer(..., data=ptr)``, ``A.view(n)``: `tir.DeclBuffer`), typed pointers
(``T.handle("float32", "shared")``: `tir.Var.pointer`), reducers (``T.comm_reducer``), runtime
builtins (`tir.BUILTINS`), calls between a module's prim_funcs and nested ``@T.inline`` macros,
expanded where they are called.
"""

from __future__ import annotations

import math

from .. import ir
from ..ir import tir
from ..ir.tir_analysis import contains_block, infer_access_regions
from ..diagnostics import did_you_mean
from ..ir.tir_visitor import vars_in
from . import ast
from .arguments import bind_arguments, dotted_name, literal, split_declarations
from .comments import FUNC_ATTR, comments_of, loose_comments, merge_comments, take_comments
from .context import Context, Scope

DTYPE_NAMES = set(tir.SCALAR_DTYPES)


# Python operators on PrimExprs and the node each builds.
BINARY_OPS = {
    "+": tir.Add, "-": tir.Sub, "*": tir.Mul, "//": tir.FloorDiv, "%": tir.FloorMod,
}
COMPARE_OPS = {"==": tir.EQ, "!=": tir.NE, "<": tir.LT, "<=": tir.LE, ">": tir.GT, ">=": tir.GE}
BIT_OPS = {"<<": "tir.shift_left", ">>": "tir.shift_right", "&": "tir.bitwise_and",
           "|": "tir.bitwise_or", "^": "tir.bitwise_xor"}

LOOP_KINDS = {
    "range": "serial", "T.serial": "serial", "T.parallel": "parallel",
    "T.vectorized": "vectorized", "T.unroll": "unroll", "T.thread_binding": "thread_binding",
}
AXIS_KINDS = {
    "T.axis.spatial": "S", "T.axis.S": "S", "T.axis.reduce": "R", "T.axis.R": "R",
    "T.axis.scan": "C", "T.axis.opaque": "O",
}
THREAD_TAGS = {
    f"{a}.{b}" for a in ("threadIdx", "blockIdx", "vthread") for b in "xyz"
} | {"vthread"}


class _BlockFrame:
    """Declarations collected while building one ``with T.block(...)`` body."""

    def __init__(self, name: str, node) -> None:
        self.name = name
        self.node = node
        self.iter_vars: list[tir.IterVar] = []
        self.iter_values: list = []
        self.reads: list | None = None
        self.writes: list | None = None
        self.predicate = None
        self.annotations: dict = {}
        self.alloc_buffers: list[tir.Buffer] = []
        self.match_buffers: list = []
        self.init = None


class PrimFuncBuilder:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.scope = Scope()
        self.blocks: list[_BlockFrame] = []
        self.loop_ranges: dict[tir.Var, tuple] = {}
        self.literals: set[int] = set()  # ids of constants written as bare Python literals
        self.comments: dict = {}
        self.attrs: dict = {}
        self.buffer_map: dict = {}
        self._pending: list = []
        self._loop_depth = 0  # loops around the statement being built
        self._env_threads: dict = {}  # T.env_thread variables -> their thread tags
        self._named_dims: set = set()  # variables introduced by a string dimension, not yet declared  # statements without IR of their own whose comments still wait
        # A module-level TypeVar is a name each function binds for itself (TVM's printer writes
        # `m = T.int64()` per function): a fresh variable here, so that printing and parsing
        # again gives the same module.
        for name, var in ctx.type_vars.items():
            self.scope.define(name, tir.Var(var.dtype, name))

    def error(self, message, node, notes=None):
        return self.ctx.error(message, node, notes)

    def _visible_names(self) -> list[str]:
        return [n for frame in self.scope.frames for n in frame]

    # ------------------------------------------------------------------ function
    def build(self, fdef: ast.FunctionDef) -> tir.PrimFunc:
        private = False
        for dec in fdef.decorators:
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "private":
                        private = bool(literal(self.ctx, kw.value))
                    elif kw.arg in ("s_tir", "check_well_formed"):
                        pass
                    else:
                        raise self.error(f"T.prim_func() got an unexpected keyword argument '{kw.arg}'", kw)
        returns = fdef.returns
        if (isinstance(returns, ast.Constant) and returns.value is None) or dotted_name(returns) == "None":
            returns = None  # ``-> None``: no value returned, as without an annotation
        self._ret_type = self._dtype(returns) if returns is not None else None
        self.scope.push()
        params = []
        seen: set = set()
        for arg in fdef.args:
            if arg.name in seen:
                raise self.error(f"duplicate parameter '{arg.name}' in function '{fdef.name}'", arg)
            seen.add(arg.name)
            params.append(self._param(arg))
        root = _BlockFrame("root", fdef)
        self.blocks.append(root)
        body = self.body(fdef.body, function_level=True)
        left_over, self._pending = self._pending, []
        self.blocks.pop()
        if contains_block(body) or root.alloc_buffers:
            if not (isinstance(body, tir.BlockRealize) and body.block.name == "root" and not root.alloc_buffers):
                block = tir.Block("root", [], [], [], body, alloc_buffers=root.alloc_buffers)
                body = tir.BlockRealize([], tir.IntImm("bool", 1), block)
        self.scope.pop()
        attrs = dict(self.attrs)
        if not private:
            # As in TVM, a public function is exported under its own name unless it says otherwise.
            attrs.setdefault("global_symbol", fdef.name)
        func = tir.PrimFunc(
            params, self.buffer_map, body, ret_type=self._ret_type, attrs=attrs, private=private,
            span=self.ctx.span(fdef),
        )
        func.comments = self.comments
        merge_comments(self.comments, func, comments_of(fdef))
        for p in left_over:
            merge_comments(self.comments, func, ir.Comments(after=loose_comments(p).before))
        return func

    def _param(self, arg: ast.Arg):
        ann = arg.annotation
        if ann is None:
            raise self.error(f"parameter '{arg.name}' needs a type annotation (T.Buffer, T.handle, T.int32, ...)", arg)
        if self._is_pointer_type(ann):
            var = tir.Var("handle", arg.name, self.ctx.span(arg), self._pointer(ann))
            self.scope.define(arg.name, var)
            return var
        name = _DTYPE_ALIASES.get(dotted_name(ann), dotted_name(ann))
        if name and name.startswith("T.") and name[2:] in DTYPE_NAMES:
            var = self._declared_dim(arg.name, name[2:]) or tir.Var(name[2:], arg.name, self.ctx.span(arg))
            var.dtype = name[2:]
            self.scope.define(arg.name, var)
            return var
        if (isinstance(ann, ast.Call) and dotted_name(ann.func) == "T.Buffer") or (
            isinstance(ann, ast.Subscript) and dotted_name(ann.value) == "T.Buffer"
        ):
            buf = self._buffer_decl(arg.name, ann)
            handle = tir.Var("handle", arg.name, self.ctx.span(arg))
            buf.data = handle
            self.buffer_map[handle] = buf
            self.scope.define(arg.name, buf)
            return handle
        raise self.error("expected T.Buffer(...), T.handle or a scalar type such as T.int32", ann)

    # ------------------------------------------------------------------ buffers
    def _buffer_decl(self, name: str, node, default_dtype: str = "float32", kind: str = "T.Buffer") -> tir.Buffer:
        """``T.Buffer(shape, dtype, ...)``, ``T.Buffer[shape, dtype]`` (older TVM) and the
        arguments of ``T.match_buffer`` / ``T.alloc_buffer`` (after the handle)."""
        if isinstance(node, ast.Subscript):
            idx = node.index
            items = idx.elts if isinstance(idx, ast.Tuple) and not idx.parenthesized else [idx]
            fake = ast.Call(node.value, items, [], node.line, node.col, node.end_line, node.end_col)
            node = fake
        args = bind_arguments(
            self.ctx, node, kind,
            ["shape", "dtype", "data", "strides", "elem_offset", "scope", "align", "offset_factor",
             "buffer_type", "axis_separators", "annotations"],
            defaults={"dtype": None, "data": None, "strides": None, "elem_offset": None, "scope": None,
                      "align": None, "offset_factor": None, "buffer_type": None, "axis_separators": None,
                      "annotations": None},
        )
        shape = self._shape(args["shape"])
        dtype = default_dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        buf = tir.Buffer(name, shape, dtype, span=self.ctx.span(node))
        if kind in _SCOPED_ALLOCS:
            buf.scope = _SCOPED_ALLOCS[kind]
        if args["annotations"] is not None:
            if kind not in ("T.alloc_buffer", *_SCOPED_ALLOCS):
                raise self.error(f"{kind}() got an unexpected keyword argument 'annotations'", args["annotations"])
            buf.annotations = self._attr_dict(args["annotations"])
        if args["data"] is not None:
            if kind != "T.decl_buffer":
                raise self.error(f"{kind}() takes no data pointer; T.decl_buffer(..., data=ptr) does", args["data"])
            data = self.expr(args["data"])
            if not isinstance(data, tir.Var) or data.dtype != "handle":
                raise self.error("data must be a handle variable or a buffer's .data", args["data"])
            buf.data = data
        if args["strides"] is not None:
            strides = args["strides"]
            elts = strides.elts if isinstance(strides, (ast.Tuple, ast.List)) else [strides]
            buf.strides = [self._dim(e) for e in elts]
        if args["elem_offset"] is not None:
            buf.elem_offset = self._dim(args["elem_offset"])
        if args["scope"] is not None:
            buf.scope = self._typed_literal(args["scope"], str, "scope", "a string such as \"global\"")
        if args["align"] is not None:
            buf.align = self._typed_literal(args["align"], int, "align", "an integer")
        if args["offset_factor"] is not None:
            buf.offset_factor = self._typed_literal(args["offset_factor"], int, "offset_factor", "an integer")
        if args["axis_separators"] is not None:
            buf.axis_separators = self._typed_literal(args["axis_separators"], list, "axis_separators", "a list of integers")
            if not all(isinstance(a, int) and not isinstance(a, bool) for a in buf.axis_separators):
                raise self.error(f"{kind}(): axis_separators must be a list of integers", args["axis_separators"])
        return buf

    @staticmethod
    def _is_pointer_type(node) -> bool:
        """``T.handle``, ``T.handle("float32", "shared")`` or ``T.Ptr(T.float32)`` used as a
        type (a parameter's or a let's annotation)."""
        if dotted_name(node) == "T.handle":
            return True
        if not isinstance(node, ast.Call) or dotted_name(node.func) not in ("T.handle", "T.Ptr"):
            return False
        if dotted_name(node.func) == "T.Ptr" or not node.args:
            return True
        # T.handle("float32", ...) or T.handle(T.float32): a type; T.handle(x) would be a cast.
        first = node.args[0]
        if isinstance(first, ast.Constant):
            return isinstance(first.value, str)
        name = _DTYPE_ALIASES.get(dotted_name(first), dotted_name(first)) or ""
        return name.startswith("T.") and name[2:] in DTYPE_NAMES

    def _pointer(self, node) -> tuple | None:
        """The pointee of a handle type: ``(element dtype, storage scope)``, or None for an
        untyped pointer (``T.handle``, ``T.handle("void")``) as TVM treats them alike."""
        if not isinstance(node, ast.Call):
            return None
        name = dotted_name(node.func)
        args = bind_arguments(self.ctx, node, name, ["dtype", "storage_scope"],
                              {"dtype": None, "storage_scope": None})
        dtype = "void"
        if args["dtype"] is not None:
            d = args["dtype"]
            dtype = "void" if isinstance(d, ast.Constant) and d.value in ("void", "") else self._dtype(d)
        scope = "global"
        if args["storage_scope"] is not None:
            scope = self._typed_literal(args["storage_scope"], str, "storage_scope", 'a string such as "shared"')
        return None if (dtype, scope) == ("void", "global") else (dtype, scope)

    def _typed_literal(self, node, typ, what: str, expected: str):
        value = literal(self.ctx, node)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise self.error(f"{what} must be {expected}", node)
        return value

    def _shape(self, node) -> list:
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) \
                and isinstance(self.scope.lookup(node.value.id), tir.Buffer):
            return list(self.scope.lookup(node.value.id).shape)  # ``T.alloc_buffer(X.shape)``
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self._dim(e) for e in node.elts]
        if isinstance(node, ast.Name) and isinstance(self.ctx.py_value(node.id), (tuple, list)):
            return self._py_shape(node)
        return [self._dim(node)]

    def _py_shape(self, node: ast.Name) -> list:
        """A shape given as a tuple from the Python scope (``shape = (2, 5)`` above)."""
        dims = [self.ctx.py_prim_of(d) for d in self.ctx.py_value(node.id)]
        if any(d is None or not isinstance(d, tir.PrimExpr) or not tir.is_int(d.dtype) for d in dims):
            raise self.error(f"'{node.id}' is not a shape: expected a tuple of integers", node)
        return dims

    def _dim(self, node) -> tir.PrimExpr:
        """A shape dimension: an int, ``T.int64(n)``, a symbolic var, or a string naming one."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # A string names a variable of this function (module-level TypeVars are not it).
            var = next((f[node.value] for f in reversed(self.scope.frames[1:]) if node.value in f), None)
            if var is None:
                var = tir.Var("int64", node.value, self.ctx.span(node))
                self.scope.frames[1 if len(self.scope.frames) > 1 else 0][node.value] = var
                self._named_dims.add(var)
            return var
        value = self.expr(node)
        if not tir.is_int(value.dtype):
            raise self.error(f"a shape dimension must be an integer, not {value.dtype}", node)
        return value

    def _declared_dim(self, name: str, dtype: str):
        """The variable a string dimension (``T.Buffer(("n", 4))``) already introduced under
        ``name``, which a later ``n: T.int32`` parameter or ``n = T.int32()`` declares (TVM
        writes both forms), now of ``dtype``; None if there is none. Shapes of the buffers
        declared so far that computed with it (``(n + 1,)``) are rebuilt in that dtype."""
        var = self.scope.lookup(name)
        if not (isinstance(var, tir.Var) and var in self._named_dims):
            return None
        self._named_dims.discard(var)
        if var.dtype != dtype:
            var.dtype = dtype
            for buf in self.buffer_map.values():
                buf.shape = [_retyped(d) for d in buf.shape]
        return var

    def _dtype(self, node) -> str:
        if isinstance(node, ast.Attribute) and node.attr == "ty" and isinstance(node.value, ast.Call):
            # ``T.int32().ty`` / ``T.handle("float32").ty``: TVM 0.27's spelling of a type.
            callee = dotted_name(node.value.func)
            if callee == "T.handle":
                self._pointer(node.value)  # checked, though only the dtype is kept
                return "handle"
            if callee and callee.startswith("T.") and callee[2:] in DTYPE_NAMES and not node.value.args:
                return callee[2:]
            raise self.error("expected a type such as T.int32().ty or T.handle(\"float32\").ty", node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            dtype = node.value
        else:
            name = _DTYPE_ALIASES.get(dotted_name(node), dotted_name(node))
            if name and name.startswith("T.") and name[2:] in DTYPE_NAMES:
                dtype = name[2:]
            elif isinstance(node, ast.Name) and isinstance(self.ctx.py_value(node.id), str):
                dtype = self.ctx.py_value(node.id)  # a dtype string from the Python scope
            else:
                raise self.error("expected a dtype string such as \"float32\"", node)
        if not tir.is_valid_dtype(dtype):
            raise self.error(f"unknown dtype '{dtype}'", node, did_you_mean(dtype, tir.SCALAR_DTYPES))
        return dtype

    def _lookup_buffer(self, node) -> tir.Buffer:
        if isinstance(node, ast.Name):
            value = self.scope.lookup(node.id)
            if value is None:
                value = self.ctx.py_prim(node.id)
            if value is None:
                raise self.error(f"undefined name '{node.id}'", node, did_you_mean(node.id, self._visible_names()))
            if isinstance(value, tir.Buffer):
                return value
            raise self.error(f"'{node.id}' is not a buffer", node)
        raise self.error("expected a buffer", node)

    # ------------------------------------------------------------------ statements
    def body(self, stmts: list, function_level: bool = False) -> tir.Stmt:
        out: list = []
        i = 0
        while i < len(stmts):
            s = stmts[i]
            # Comments waiting from before this statement belong to it, not to whatever its
            # nested body builds first; comments its body leaves over close it.
            outer, self._pending = self._pending, []
            result = self.stmt(s, function_level)
            if isinstance(result, _Scoped):
                # LetStmt / AssertStmt take the rest of the body as their body.
                self._pending = []
                rest = self.body(stmts[i + 1:], function_level) if i + 1 < len(stmts) else tir.Evaluate(tir.IntImm("int32", 0))
                node = result.make(rest)
                inner, self._pending = self._pending, outer
                self._note(node, s, inner)
                out.append(node)
                self.scope.pop()
                break
            inner, self._pending = self._pending, outer
            if result is not None:
                self._note(result, s, inner)
                out.append(result)
            else:
                if s.comments or s.trailing or getattr(s, "after", None):
                    self._pending.append(s)
                self._pending.extend(inner)
            i += 1
        if not out:
            return tir.Evaluate(tir.IntImm("int32", 0))
        return tir.seq(out)

    def _note(self, node, s, inner=()) -> None:
        """Keep the comments of statement ``s`` (and of declarations before it) for ``node``;
        ``inner`` are statements of its body whose comments found no node there."""
        if self._pending:
            for p in self._pending:
                merge_comments(self.comments, node, loose_comments(p))
            self._pending = []
        merge_comments(self.comments, node, comments_of(s))
        for p in inner:
            merge_comments(self.comments, node, ir.Comments(after=loose_comments(p).before))

    def stmt(self, s, function_level: bool):
        if isinstance(s, ast.ExprStmt):
            return self._expr_stmt(s, function_level)
        if isinstance(s, ast.Assign):
            return self._assign(s, function_level)
        if isinstance(s, ast.AnnAssign):
            return self._ann_assign(s)
        if isinstance(s, ast.AugAssign):
            return self._aug_assign(s)
        if isinstance(s, (ast.For, ast.While)):
            self._loop_depth += 1  # T.continue_loop / T.break_loop need an enclosing loop
            try:
                return self._for(s) if isinstance(s, ast.For) else self._while(s)
            finally:
                self._loop_depth -= 1
        if isinstance(s, ast.With):
            return self._with(s, function_level)
        if isinstance(s, ast.If):
            cond = self._condition(s.test)
            then = self._nested_body(s.body)
            orelse = self._nested_body(s.orelse) if s.orelse else None
            return tir.IfThenElse(cond, then, orelse)
        if isinstance(s, ast.Assert):
            cond = self._condition(s.test)
            msg, kind, parts = self._assert_message(s.msg)
            return _Scoped(self.scope, lambda rest: tir.AssertStmt(cond, msg, rest, kind, parts))
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.Return):
            return self._return(s)
        if isinstance(s, ast.FunctionDef):
            if any(dotted_name(d) in _MACRO_DECORATORS for d in s.decorators):
                self.scope.define(s.name, _Macro(s))
                return None
            raise self.error("nested function definitions are not allowed in a T.prim_func, "
                             "except macros (@T.inline / @T.macro)", s)
        raise self.error("unsupported statement in a T.prim_func", s)

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

    def _nested_body(self, stmts) -> tir.Stmt:
        self.scope.push()
        try:
            return self.body(stmts)
        finally:
            self.scope.pop()

    def _expr_stmt(self, s: ast.ExprStmt, function_level: bool):
        v = s.value
        if isinstance(v, ast.Name) and v.id in ("continue", "break") and self.scope.lookup(v.id) is None:
            # Python's ``continue`` / ``break``: TVM's T.continue_loop() / T.break_loop().
            call = ast.Call(ast.Name(f"T.{v.id}_loop", v.line, v.col, v.end_line, v.end_col), [], [],
                            v.line, v.col, v.end_line, v.end_col)
            from .tir_calls import EXPR_CALLS

            return tir.Evaluate(EXPR_CALLS[f"T.{v.id}_loop"](self, call, f"T.{v.id}_loop"))
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and isinstance(self.scope.lookup(v.func.id), _Macro):
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
            return _Scoped(self.scope, lambda rest: tir.LetStmt(var, value, rest))
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
                merged = _merge_attrs(frame.annotations, self._attr_dict(args["attrs"]))
                if isinstance(merged, str):
                    raise self.error(f"Try to merge two annotations with different values for key '{merged}'",
                                     args["attrs"])
                frame.annotations = merged
                return None
            if name == "T.attr":
                attrs = self._attr_stmts(v)
                return _Scoped(self.scope, lambda rest: _attr_chain(attrs, rest))
            if name == "T.launch_thread":
                iv, extent = self._launch_thread(v)
                return _Scoped(self.scope, lambda rest: tir.AttrStmt(iv, "thread_extent", extent, rest))
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

    def _thread_tag(self, node) -> str:
        tag = literal(self.ctx, node)
        if not isinstance(tag, str) or tag not in THREAD_TAGS:
            raise self.error(f"unknown thread tag {tag!r}: expected one of {', '.join(sorted(THREAD_TAGS))}",
                             node, did_you_mean(str(tag), sorted(THREAD_TAGS)))
        return tag

    def _launch_thread(self, call: ast.Call, name: str | None = None, target=None):
        """``T.launch_thread(thread, extent)``, ``thread`` a tag ("threadIdx.x": a new index
        variable, named ``name``) or a variable from ``T.env_thread``: the thread IterVar and
        the extent of the ``"thread_extent"`` AttrStmt TVM builds for it."""
        args = bind_arguments(self.ctx, call, "T.launch_thread", ["thread", "extent"])
        thread = args["thread"]
        if isinstance(thread, ast.Constant) and isinstance(thread.value, str):
            tag = self._thread_tag(thread)
            var = tir.Var("int32", name or tag.replace(".", "_"), self.ctx.span(target or thread))
        else:
            var = self.expr(thread)
            tag = self._env_threads.get(var)
            if tag is None:
                raise self.error("T.launch_thread takes a thread tag such as \"threadIdx.x\" or a "
                                 "variable from T.env_thread", thread)
        extent = self._extent(args["extent"])
        if extent.dtype != var.dtype:
            extent = self._coerce(extent, var.dtype, args["extent"])
        iv = tir.IterVar(var, tir.Range(tir.IntImm(var.dtype, 0), extent), "thread", tag)
        return iv, extent

    def _comm_reducer(self, call: ast.Call) -> tir.CommReducer:
        """``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])``; for n values reduced
        together, the lambda takes n left then n right operands and returns an n-tuple. Each
        operand has the dtype of its identity element."""
        args = bind_arguments(self.ctx, call, "T.comm_reducer", ["combiner", "identity_element"])
        fn, ids_node = args["combiner"], args["identity_element"]
        if not isinstance(ids_node, (ast.List, ast.Tuple)) or not ids_node.elts:
            raise self.error("T.comm_reducer: the identity elements must be a list such as [T.float32(0)]", ids_node)
        ids = [self.expr(e) for e in ids_node.elts]
        if not isinstance(fn, ast.Lambda) or len(fn.params) != 2 * len(ids):
            raise self.error(f"T.comm_reducer: the combiner must be a lambda of {2 * len(ids)} parameters "
                             f"(x, y for each of the {len(ids)} reduced values)", fn)
        self.scope.push()
        try:
            params = [tir.Var(ids[i % len(ids)].dtype, p, self.ctx.span(fn)) for i, p in enumerate(fn.params)]
            for p in params:
                self.scope.define(p.name, p)
            body = fn.body.elts if isinstance(fn.body, ast.Tuple) else [fn.body]
            if len(body) != len(ids):
                raise self.error(f"T.comm_reducer: the combiner returns {len(body)} values, not {len(ids)}", fn.body)
            results = [self._coerce(self.expr(e), i.dtype, e) for e, i in zip(body, ids)]
        finally:
            self.scope.pop()
        return tir.CommReducer(params[:len(ids)], params[len(ids):], results, ids)

    def _attr_stmts(self, call: ast.Call) -> list:
        """The (node, key, value) of each AttrStmt a ``T.attr`` makes: one, or with TVM 0.27's
        ``T.attr({"device_id": 0, "device_type": 0})`` one per key, nested in that order."""
        if len(call.args) == 1 and isinstance(call.args[0], ast.Dict) and len(call.args[0].keys) > 1 and not call.keywords:
            d = call.args[0]
            return [self._attr_stmt_args(ast.Call(call.func, [ast.Dict([k], [v], d.line, d.col, d.end_line, d.end_col)],
                                                  [], call.line, call.col, call.end_line, call.end_col))
                    for k, v in zip(d.keys, d.values)]
        return [self._attr_stmt_args(call)]

    def _attr_stmt_args(self, call: ast.Call):
        """``T.attr(node, "key", value)`` or TVM 0.27's ``T.attr({"key": value})`` (node 0):
        the (node, key, value) of an AttrStmt. ``node`` is a buffer or an expression."""
        if call.keywords:
            raise self.error("T.attr() takes no keyword arguments", call.keywords[0])
        if len(call.args) == 1 and isinstance(call.args[0], ast.Dict) and len(call.args[0].keys) == 1:
            node, key_node, value_node = tir.IntImm("int32", 0), call.args[0].keys[0], call.args[0].values[0]
        elif len(call.args) == 3:
            target, key_node, value_node = call.args
            found = self.scope.lookup(target.id) if isinstance(target, ast.Name) else None
            if isinstance(target, ast.Call) and dotted_name(target.func) == "T.comm_reducer":
                node = self._comm_reducer(target)
            else:
                node = found if isinstance(found, tir.Buffer) else self.expr(target)
        else:
            raise self.error('T.attr takes (node, "key", value) or ({"key": value})', call)
        if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
            raise self.error("T.attr: the attribute key must be a string", key_node)
        if isinstance(value_node, ast.Constant) and isinstance(value_node.value, str):
            value = tir.StringImm("handle", value_node.value)
        else:
            value = self.expr(value_node)
        return node, key_node.value, value

    def _attr_dict(self, node) -> dict:
        if not isinstance(node, ast.Dict):
            raise self.error("expected a dict of attributes", node)
        out = {}
        for k, val in zip(node.keys, node.values):
            key = literal(self.ctx, k)
            if isinstance(key, (list, dict)):
                raise self.error("an attribute name must be a string", k)
            out[key] = self._attr_value(val)
        return out

    def _attr_value(self, node):
        """Attribute values stay Python literals unless written with a TIR type (T.bool(True))
        or as a compilation target (``T.target("cuda")``)."""
        if isinstance(node, ast.Call):
            if dotted_name(node.func) == "T.target":
                return self._target(node)
            return self.expr(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._attr_value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return self._attr_dict(node)
        if isinstance(node, ast.Name) and isinstance(self.scope.lookup(node.id), tir.Buffer):
            return self.scope.lookup(node.id)  # ``{"layout_free_placeholders": [B]}``
        return literal(self.ctx, node)

    def _target(self, call: ast.Call):
        """``T.target("cuda", host="llvm")`` or ``T.target({"kind": "cuda", ...})`` in an
        attribute (a function's ``"target"``): a `tvms.target.Target`, checked as one, so that
        an unknown kind or attribute is a located error rather than text kept blindly."""
        from ..target import Target

        args = bind_arguments(self.ctx, call, "T.target", ["target", "host"], {"host": None})

        def nested(node):  # a host written as T.target(...) inside the config dict
            if isinstance(node, ast.Call) and dotted_name(node.func) == "T.target":
                return self._target(node)
            raise self.error("expected a literal value or T.target(...)", node)

        config = literal(self.ctx, args["target"], nested)
        host = literal(self.ctx, args["host"], nested) if args["host"] is not None else None
        try:
            return Target(config, host=host)
        except ValueError as err:
            raise self.error(str(err), call) from None

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
            if callee in ("T.alloc_buffer", "T.decl_buffer", *_SCOPED_ALLOCS):
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
                return _Scoped(self.scope, lambda rest: tir.AttrStmt(iv, "thread_extent", extent, rest), push=False)
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

    def _is_region(self, node) -> bool:
        """Whether a ``T.match_buffer`` source is a buffer region (``A[i, 0:16]`` or a whole
        buffer ``A``) rather than a function's handle parameter."""
        if isinstance(node, ast.Subscript):
            return True
        return isinstance(node, ast.Name) and isinstance(self.scope.lookup(node.id), tir.Buffer)

    def _match_region(self, name: str, target, call: ast.Call):
        """``A0 = T.match_buffer(A[i, 0:16], (16,))`` inside a block: a new buffer viewing a
        region of another, recorded on the enclosing block (TVM's MatchBufferRegion)."""
        if len(self.blocks) < 2:
            raise self.error("T.match_buffer of a buffer region is only allowed inside a T.block", call)
        source = self._region(call.args[0])
        rest = ast.Call(call.func, call.args[1:], call.keywords, call.line, call.col, call.end_line, call.end_col)
        if len(call.args) == 1 and not any(kw.arg == "shape" for kw in call.keywords):
            # No shape: the region's own (its extents), and the source's dtype unless given.
            buf = tir.Buffer(name, [r.extent for r in source.region], source.buffer.dtype, span=self.ctx.span(call))
            dtype = next((kw.value for kw in call.keywords if kw.arg == "dtype"), None)
            if dtype is not None:
                buf.dtype = self._dtype(dtype)
            if any(kw.arg not in ("dtype",) for kw in call.keywords):
                raise self.error("T.match_buffer of a region without a shape takes only dtype=", call)
        else:
            buf = self._buffer_decl(name, rest, kind="T.match_buffer")
        if buf.data is None:
            buf.data = tir.Var("handle", name, self.ctx.span(target))
        self.blocks[-1].match_buffers.append(tir.MatchBufferRegion(buf, source))
        self.scope.define(name, buf)
        return None

    def _decl_buffer(self, name: str, buf: tir.Buffer):
        self.scope.push()
        self.scope.define(name, buf)
        return _Scoped(self.scope, lambda rest: tir.DeclBuffer(buf, rest), push=False)

    def _view(self, name: str, target, call: ast.Call):
        """``B = A.view(256)`` (TVM 0.27's printout): a buffer of another shape (and dtype)
        over ``A``'s memory, i.e. ``T.decl_buffer((256,), data=A.data)``."""
        source = self._lookup_buffer(call.func.value)
        args = bind_arguments(self.ctx, call, f"{source.name}.view", ["shape*", "dtype"], {"dtype": None})
        dims = args["shape"]
        if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
            dims = dims[0].elts
        shape = [self._dim(d) for d in dims]
        dtype = self._dtype(args["dtype"]) if args["dtype"] is not None else source.dtype
        buf = tir.Buffer(name, shape, dtype, scope=source.scope, data=source.data, span=self.ctx.span(call))
        return self._decl_buffer(name, buf)

    def _let(self, var, value):
        self.scope.push()
        self.scope.define(var.name, var)
        return _Scoped(self.scope, lambda rest: tir.LetStmt(var, value, rest), push=False)

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

    def _store(self, target: ast.Subscript, value_node) -> tir.BufferStore:
        buf = self._lookup_buffer(target.value)
        indices = self._indices(buf, target)
        dtype = _access_dtype(buf, indices)
        value = self.expr(value_node)
        if value.dtype != dtype and id(value) not in self.literals and tir.lanes_of(value.dtype) == tir.lanes_of(dtype) \
                and "handle" not in (value.dtype, dtype):
            # As TVM's parser: a value stored into a buffer of another dtype is cast to it.
            return tir.BufferStore(buf, tir.Cast(dtype, value), indices, self.ctx.span(target))
        return tir.BufferStore(buf, self._coerce(value, dtype, value_node), indices, self.ctx.span(target))

    def _indices(self, buf: tir.Buffer, node: ast.Subscript) -> list:
        idx = node.index
        items = _index_items(idx, buf)
        if len(items) != len(buf.shape):
            raise self.error(
                f"buffer '{buf.name}' has {len(buf.shape)} dimension{'s' if len(buf.shape) != 1 else ''} "
                f"but is indexed with {len(items)} ind{'ices' if len(items) != 1 else 'ex'}",
                node,
            )
        out = []
        for it in items:
            if isinstance(it, ast.Slice) and len(items) == 1 and it.lower is not None and it.upper is not None:
                out.append(self._slice_ramp(it))
                continue
            if isinstance(it, ast.Slice):
                raise self.error("slices are only allowed in buffer regions (T.reads, T.writes, T.match_buffer) "
                                 "and as the one index of a vector access, A[i:i + 4]", it)
            e = self.expr(it)
            if not tir.is_int(e.dtype):
                raise self.error(f"buffer index must be an integer, not {e.dtype}", it)
            out.append(e)
        return out

    def _slice_ramp(self, it) -> tir.Ramp:
        """``A[i:i + 4]``, how TVM prints a vector access ``A[T.Ramp(i, 1, 4)]``: the lanes
        are the slice's constant length."""
        if getattr(it, "step", None) is not None:
            raise self.error("a vector access slice takes no step; write T.Ramp(base, stride, lanes)", it)
        lo, hi = _unify(self, self.expr(it.lower), self.expr(it.upper))
        lanes = _sub(hi, lo)
        if not isinstance(lanes, tir.IntImm) or lanes.value < 2:
            raise self.error("a vector access slice needs a constant length of at least 2, as in A[i:i + 4]", it)
        return tir.Ramp(f"{lo.dtype}x{lanes.value}", lo, tir.IntImm(lo.dtype, 1), lanes.value)

    def _region(self, node) -> tir.BufferRegion:
        if isinstance(node, ast.Name):
            buf = self._lookup_buffer(node)
            return tir.BufferRegion(buf, [tir.Range(_zero_like(d), d) for d in buf.shape])
        if not isinstance(node, ast.Subscript):
            raise self.error("expected a buffer region such as A[i, 0:16]", node)
        buf = self._lookup_buffer(node.value)
        idx = node.index
        items = _index_items(idx, buf)
        if len(items) != len(buf.shape):
            raise self.error(
                f"buffer '{buf.name}' has {len(buf.shape)} dimensions but the region has {len(items)}", node
            )
        region = []
        for it, dim in zip(items, buf.shape):
            if isinstance(it, ast.Slice):
                lo = self.expr(it.lower) if it.lower is not None else _zero_like(dim)
                hi = self.expr(it.upper) if it.upper is not None else dim
                lo, hi = _unify(self, lo, hi)
                self._check_region_bound(lo, it.lower or it)
                region.append(tir.Range(lo, _sub(hi, lo)))
            else:
                e = self.expr(it)
                self._check_region_bound(e, it)
                region.append(tir.Range(e, tir.IntImm(e.dtype, 1)))
        return tir.BufferRegion(buf, region)

    def _check_region_bound(self, e: tir.PrimExpr, node) -> None:
        """A region's bounds are indices, so integers (as in `_indices`): a float bound would
        print as a cast the parser then reads as another region."""
        if not tir.is_int(e.dtype):
            raise self.error(f"buffer region bound must be an integer, not {e.dtype}", node)

    # ------------------------------------------------------------------ loops
    def _for(self, s: ast.For):
        it = s.iter
        if not isinstance(it, ast.Call):
            raise self.error("expected T.grid(...), range(...), T.serial(...), T.parallel(...), ...", it)
        name = dotted_name(it.func)
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.error("a loop variable must be a name", t)
        if name == "T.grid":
            if it.keywords:
                raise self.error("T.grid() takes no keyword arguments", it.keywords[0])
            extents = self._grid_extents(it.args)
            if len(targets) == 1 and len(extents) > 1 and not isinstance(s.target, ast.Tuple):
                # ``for iters in T.grid(m, n)``: one name for the tuple of loop variables,
                # which are ``iters_0``, ``iters_1``, ... (as TVM names them).
                group = targets[0]
                targets = [ast.Name(f"{group.id}_{k}", group.line, group.col, group.end_line, group.end_col)
                           for k in range(len(extents))]
            else:
                group = None
            if len(extents) != len(targets):
                raise self.error(
                    f"T.grid has {len(extents)} extent{'s' if len(extents) != 1 else ''} but the loop "
                    f"binds {len(targets)} variable{'s' if len(targets) != 1 else ''}", it
                )
            ranges = [(None, e) for e in extents]
            kind, tag, annotations, step = "serial", None, {}, None
        elif name in LOOP_KINDS:
            group = None
            if len(targets) != 1:
                raise self.error(f"{name} binds one loop variable, not {len(targets)}", s.target)
            kind = LOOP_KINDS[name]
            params = ["start", "stop"]
            defaults = {"stop": None, "annotations": None, "step": None}
            if kind == "thread_binding":
                params += ["thread", "annotations"]
                defaults["thread"] = None
            elif name != "range":
                params += ["annotations", "step"]
            else:
                params += ["step"]
            args = bind_arguments(self.ctx, it, name, params, defaults)
            if kind == "thread_binding" and isinstance(args["stop"], ast.Constant) and isinstance(args["stop"].value, str):
                # ``T.thread_binding(128, "threadIdx.x")``: the thread given second, positionally.
                if args["thread"] is not None:
                    raise self.error("T.thread_binding() got two thread tags", args["thread"])
                args["thread"], args["stop"] = args["stop"], None
            step = self._extent(args["step"]) if args.get("step") is not None else None
            start, stop = args["start"], args["stop"]
            if stop is None:
                lo, extent = None, self._extent(start)
            else:
                lo, hi = self._extent(start), self._extent(stop)
                lo, hi = _unify(self, lo, hi)
                extent = _sub(hi, lo)
            ranges = [(lo, extent)]
            tag = None
            if kind == "thread_binding":
                if args.get("thread") is None:
                    raise self.error("T.thread_binding() needs thread=\"threadIdx.x\" (or another thread tag)", it)
                tag = literal(self.ctx, args["thread"])
                if not isinstance(tag, str) or tag not in THREAD_TAGS:
                    raise self.error(f"unknown thread tag '{tag}'", args["thread"])
            annotations = self._attr_dict(args["annotations"]) if args.get("annotations") is not None else {}
            if step is not None:
                step = self._coerce(step, extent.dtype, args["step"])
        else:
            raise self.error(
                f"unknown loop kind '{name}': expected T.grid, range, T.serial, T.parallel, "
                "T.vectorized, T.unroll or T.thread_binding", it.func
            )
        self.scope.push()
        loop_vars = []
        for t, (lo, extent) in zip(targets, ranges):
            var = tir.Var(extent.dtype, t.id, self.ctx.span(t))
            self.scope.define(t.id, var)
            self.loop_ranges[var] = (lo if lo is not None else tir.IntImm(extent.dtype, 0), extent)
            loop_vars.append(var)
        if group is not None:
            self.scope.define(group.id, tuple(loop_vars))
        body = self.body(s.body)
        self.scope.pop()
        for var, (lo, extent) in reversed(list(zip(loop_vars, ranges))):
            body = tir.For(var, lo if lo is not None else tir.IntImm(extent.dtype, 0), extent, kind, body, tag,
                           annotations, step)
        return body

    def _grid_extents(self, args: list) -> list[tir.PrimExpr]:
        """The extents of ``T.grid(...)``, with ``*A.shape`` (a buffer's dimensions) or
        ``*shape`` (a tuple from the Python scope) spread into several."""
        out = []
        for a in args:
            if not isinstance(a, ast.Starred):
                out.append(self._extent(a))
                continue
            v = a.value
            if isinstance(v, ast.Attribute) and v.attr == "shape":
                out.extend(self._lookup_buffer(v.value).shape)
            elif isinstance(v, (ast.Tuple, ast.List)):
                out.extend(self._extent(e) for e in v.elts)
            elif isinstance(v, ast.Name) and isinstance(self.ctx.py_value(v.id), (tuple, list)):
                out.extend(self._py_shape(v))
            else:
                raise self.error("T.grid(*...) spreads a buffer's shape (*A.shape) or a tuple", a)
        return out

    def _extent(self, node) -> tir.PrimExpr:
        e = self.expr(node)
        if not tir.is_int(e.dtype):
            raise self.error(f"a loop extent must be an integer, not {e.dtype}", node)
        return e

    # ------------------------------------------------------------------ blocks
    def _with(self, s: ast.With, function_level: bool):
        item = s.item
        name = dotted_name(item.func) if isinstance(item, ast.Call) else dotted_name(item)
        if name == "T.block":
            return self._block(s)
        if name == "T.init":
            frame = self.blocks[-1] if self.blocks else None
            if frame is None or not isinstance(frame.node, ast.With):
                raise self.error("T.init() is only allowed inside a T.block", item)
            if frame.init is not None:
                raise self.error("a block has one T.init()", item)
            frame.init = self._nested_body(s.body)
            return None
        if name == "T.attr" and isinstance(item, ast.Call):
            attrs = self._attr_stmts(item)
            return _attr_chain(attrs, self._nested_body(s.body))
        if name == "T.launch_thread" and isinstance(item, ast.Call):
            # ``with T.launch_thread(tx, 32):`` or ``with T.launch_thread("blockIdx.z", 196) as bz:``
            var_name = s.target.id if isinstance(s.target, ast.Name) else None
            iv, extent = self._launch_thread(item, var_name, s.target)
            self.scope.push()
            try:
                if var_name is not None:
                    self.scope.define(var_name, iv.var)
                body = self.body(s.body)
            finally:
                self.scope.pop()
            return tir.AttrStmt(iv, "thread_extent", extent, body)
        if name in ("T.LetStmt", "T.Assert") and isinstance(item, ast.Call):
            # How TVM prints a let or an assert that is not the last statement of its body.
            return self._scoped_with(s, name)
        raise self.error(f"unknown scope '{name}': expected T.block(...) or T.init()", item)

    def _scoped_with(self, s: ast.With, name: str):
        item = s.item
        if name == "T.Assert":
            args = bind_arguments(self.ctx, item, name, ["condition", "message"])
            cond = self._condition(args["condition"])
            msg, kind, parts = self._assert_message(args["message"])
            return tir.AssertStmt(cond, msg, self._nested_body(s.body), kind, parts)
        args = bind_arguments(self.ctx, item, name, ["value", "type_annotation"], {"type_annotation": None})
        if not isinstance(s.target, ast.Name):
            raise self.error("T.LetStmt binds a variable: with T.LetStmt(value) as x:", item)
        value = self.expr(args["value"])
        if args["type_annotation"] is not None:
            value = self._coerce(value, self._dtype(args["type_annotation"]), args["value"])
        var = tir.Var(value.dtype, s.target.id, self.ctx.span(s.target))
        self.scope.push()
        self.scope.define(var.name, var)
        try:
            body = self.body(s.body)
        finally:
            self.scope.pop()
        return tir.LetStmt(var, value, body)

    def _block(self, s: ast.With):
        call = s.item
        args = bind_arguments(self.ctx, call, "T.block", ["name", "no_realize"], {"name": None, "no_realize": None}) if isinstance(call, ast.Call) else {"name": None}
        block_name = literal(self.ctx, args["name"]) if args["name"] is not None else ""
        if not isinstance(block_name, str):
            raise self.error("a block name must be a string", args["name"])
        frame = _BlockFrame(block_name, s)
        self.blocks.append(frame)
        self.scope.push()
        saved_pending, self._pending = self._pending, []
        body = self.body(s.body)
        self._pending = saved_pending + self._pending
        self.scope.pop()
        self.blocks.pop()
        reads, writes = frame.reads, frame.writes
        if reads is None or writes is None:
            inferred_reads, inferred_writes = infer_access_regions(body, frame.init, frame.alloc_buffers)
            # A buffer matched in this block is a view of its source region: what the block
            # touches through it, it touches in the source (as TVM completes it).
            sources = {m.buffer: m.source for m in frame.match_buffers}
            inferred_reads = _dedup_regions([sources.get(r.buffer, r) for r in inferred_reads])
            inferred_writes = _dedup_regions([sources.get(r.buffer, r) for r in inferred_writes])
            if reads is None:
                reads = inferred_reads
            if writes is None:
                writes = inferred_writes
        block = tir.Block(
            block_name, frame.iter_vars, reads, writes, body, frame.init, frame.alloc_buffers,
            frame.match_buffers, frame.annotations, span=self.ctx.span(s.item),
        )
        predicate = frame.predicate if frame.predicate is not None else tir.IntImm("bool", 1)
        return tir.BlockRealize(frame.iter_values, predicate, block)

    def _axis(self, name: str, target, call: ast.Call, kind: str):
        frame = self.blocks[-1] if self.blocks else None
        if frame is None or not isinstance(frame.node, ast.With):
            raise self.error("block axes (T.axis.*) are only allowed inside a T.block", call)
        args = bind_arguments(self.ctx, call, dotted_name(call.func), ["dom", "binding", "dtype"], {"dtype": None})
        dom_node = args["dom"]
        if isinstance(dom_node, ast.Tuple) and len(dom_node.elts) == 2:
            lo, hi = (self.expr(e) for e in dom_node.elts)
            lo, hi = _unify(self, lo, hi)
            dom = tir.Range(lo, _sub(hi, lo))
        else:
            extent = self._extent(dom_node)
            dom = tir.Range(tir.IntImm(extent.dtype, 0), extent)
        value = self.expr(args["binding"])
        self._check_not_own_axes(frame, name, [value], args["binding"])
        self._check_not_own_axes(frame, name, [dom.min, dom.extent], dom_node)
        dtype = value.dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        dom = _range_as(dom, dtype)
        var = tir.Var(dtype, name, self.ctx.span(target))
        frame.iter_vars.append(tir.IterVar(var, dom, kind))
        frame.iter_values.append(self._coerce(value, dtype, args["binding"]))
        self.scope.define(name, var)
        return None

    def _check_not_own_axes(self, frame, name: str, exprs: list, node) -> None:
        """A block axis is bound to (and ranges over) values from outside the block: one that
        used an axis of the same block would be bound to itself, which no printer can write
        back (the value is printed before the axis it names is defined)."""
        own = {id(iv.var) for iv in frame.iter_vars}
        used = [v for v in vars_in(exprs) if id(v) in own]
        if used:
            raise self.error(f"block axis '{name}' is defined by '{used[0].name}', an axis of the same block; "
                             "block axes are bound to loop variables (or values from outside the block)", node)

    def _axis_remap(self, target: ast.Tuple, call: ast.Call):
        frame = self.blocks[-1] if self.blocks else None
        if frame is None or not isinstance(frame.node, ast.With):
            raise self.error("T.axis.remap is only allowed inside a T.block", call)
        if len(call.args) > 2:
            raise self.error(
                f"T.axis.remap() takes 2 positional arguments (kinds, [loop variables]) but {len(call.args)} were given",
                call.args[2],
            )
        args = bind_arguments(self.ctx, call, "T.axis.remap", ["kinds", "bindings", "dtype"], {"dtype": None})
        if args["dtype"] is not None:
            self._dtype(args["dtype"])
        kinds = literal(self.ctx, args["kinds"])
        if not isinstance(kinds, str):
            raise self.error("T.axis.remap kinds must be a string such as \"SSR\"", args["kinds"])
        bindings_node = args["bindings"]
        if isinstance(bindings_node, ast.Name) and isinstance(self.scope.lookup(bindings_node.id), tuple):
            # ``T.axis.remap("SS", iters)``, iters bound by ``for iters in T.grid(m, n)``.
            n = bindings_node
            bindings_node = ast.List([ast.Name(v.name, n.line, n.col, n.end_line, n.end_col)
                                      for v in self.scope.lookup(n.id)], n.line, n.col, n.end_line, n.end_col)
        if not isinstance(bindings_node, (ast.List, ast.Tuple)):
            raise self.error("T.axis.remap expects a list of loop variables", bindings_node)
        names = target.elts
        if len(kinds) != len(bindings_node.elts) or len(kinds) != len(names):
            raise self.error(
                f"T.axis.remap kinds \"{kinds}\" ({len(kinds)}) do not match the {len(names)} variables "
                f"and {len(bindings_node.elts)} bindings",
                args["kinds"],
            )
        for k, n, b in zip(kinds, names, bindings_node.elts):
            if k not in ITER_KIND_LETTERS:
                raise self.error(f"unknown axis kind '{k}' in T.axis.remap (expected S or R)", args["kinds"])
            if not isinstance(n, ast.Name):
                raise self.error("expected a variable name", n)
            value = self.expr(b)
            if not isinstance(value, tir.Var) or value not in self.loop_ranges:
                raise self.error("T.axis.remap binds loop variables; use T.axis.spatial/reduce for expressions", b)
            lo, extent = self.loop_ranges[value]
            var = tir.Var(value.dtype, n.id, self.ctx.span(n))
            frame.iter_vars.append(tir.IterVar(var, tir.Range(lo, extent), k))
            frame.iter_values.append(value)
            self.scope.define(n.id, var)
        return None

    # ------------------------------------------------------------------ expressions
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

    def expr(self, node) -> tir.PrimExpr:
        method = _EXPR_DISPATCH.get(type(node))
        if method is None:
            raise self.error("unsupported expression in TIR", node)
        return method(self, node)

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

    def _subscript(self, node: ast.Subscript):
        buf = self._lookup_buffer(node.value)
        indices = self._indices(buf, node)
        return tir.BufferLoad(_access_dtype(buf, indices), buf, indices, self.ctx.span(node))

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


ITER_KIND_LETTERS = set("SRCO")

class _Macro:
    """A nested ``@T.inline`` function of a prim_func, expanded where it is called."""

    def __init__(self, fdef) -> None:
        self.fdef = fdef


_MACRO_DECORATORS = ("T.inline", "T.macro")

# TVM 0.27's shorthands for an allocation in one storage scope.
_SCOPED_ALLOCS = {"T.alloc_local": "local", "T.alloc_shared": "shared"}

# Other spellings TVM accepts for a scalar type.
_DTYPE_ALIASES = {"T.boolean": "T.bool"}


class _Scoped:
    """A statement whose body is the rest of the enclosing body (LetStmt, AssertStmt)."""

    def __init__(self, scope: Scope, make, push: bool = True) -> None:
        if push:
            scope.push()
        self.make = make


_EXPR_DISPATCH = {
    ast.Name: PrimFuncBuilder._name,
    ast.Constant: PrimFuncBuilder._constant,
    ast.BinOp: PrimFuncBuilder._binop,
    ast.UnaryOp: PrimFuncBuilder._unary,
    ast.BoolOp: PrimFuncBuilder._boolop,
    ast.Compare: PrimFuncBuilder._compare,
    ast.Subscript: PrimFuncBuilder._subscript,
    ast.Call: PrimFuncBuilder._call,
    ast.Attribute: PrimFuncBuilder._attribute,
    ast.IfExp: PrimFuncBuilder._ifexp,
}


# ----------------------------------------------------------------------------- helpers


def _merge_attrs(old: dict, new: dict):
    """Annotations of one block given in several T.block_attr, merged as TVM merges them:
    a key may repeat with the same value, dict values merge key by key; any other change of
    a value is a conflict. Returns the merged dict, or the conflicting key."""
    out = dict(old)
    for key, value in new.items():
        if key not in out:
            out[key] = value
        elif isinstance(out[key], dict) and isinstance(value, dict):
            inner = _merge_attrs(out[key], value)
            if isinstance(inner, str):
                return inner
            out[key] = inner
        elif not _same_attr(out[key], value):
            return key
    return out


def _same_attr(a, b) -> bool:
    """Whether two annotation values are the same (expressions structurally)."""
    from ..ir import structural_equal

    if isinstance(a, (tir.PrimExpr, tir.Buffer)) or isinstance(b, (tir.PrimExpr, tir.Buffer)):
        return a is b or (type(a) is type(b) and structural_equal(a, b))
    return type(a) is type(b) and a == b


def _retyped(e):
    """``e`` rebuilt after one of its variables changed dtype: integer operators take their
    operands' dtype again, a constant operand that of the other side (as a literal would)."""
    if isinstance(e, tir.BinaryOp) and not isinstance(e, (tir.And, tir.Or)):
        a, b = _retyped(e.a), _retyped(e.b)
        if a.dtype != b.dtype and isinstance(b, tir.IntImm):
            b = tir.IntImm(a.dtype, b.value)
        elif a.dtype != b.dtype and isinstance(a, tir.IntImm):
            a = tir.IntImm(b.dtype, a.value)
        if a is e.a and b is e.b and a.dtype == e.dtype:
            return e
        dtype = "bool" if isinstance(e, tuple(tir.COMPARISONS)) else a.dtype
        return type(e)(dtype, a, b)
    return e


def _attr_chain(attrs: list, body) -> tir.AttrStmt:
    """Nested AttrStmts, the first outermost, around ``body``."""
    for node, key, value in reversed(attrs):
        body = tir.AttrStmt(node, key, value, body)
    return body


def _dedup_regions(regions: list) -> list:
    out: list = []
    for r in regions:
        if not any(o is r for o in out):
            out.append(r)
    return out


def _index_items(idx, buf: tir.Buffer) -> list:
    """The indices of ``A[i, j]``; ``A[(i, j)]`` (a parenthesized tuple, as older TVM tests
    write) is the same access when the buffer has that many dimensions."""
    if isinstance(idx, ast.Tuple) and (not idx.parenthesized or (len(idx.elts) == len(buf.shape) != 1)):
        return idx.elts
    return [idx]


def _access_dtype(buf: tir.Buffer, indices: list) -> str:
    """The dtype a buffer access reads or writes: the element dtype, as a vector of as many
    lanes as a vector index (``A[T.Ramp(0, 1, 4)]`` is ``float32x4``) has."""
    for index in indices:
        base, sep, lanes = index.dtype.rpartition("x")
        if sep and lanes.isdigit():
            return f"{buf.dtype}x{lanes}"
    return buf.dtype

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


def _zero_like(e: tir.PrimExpr) -> tir.IntImm:
    return tir.IntImm(e.dtype, 0)


def _unify(b: PrimFuncBuilder, lo, hi):
    if lo.dtype != hi.dtype:
        return b._promote(lo, hi, None)
    return lo, hi


def _sub(hi, lo):
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


def _range_as(r: tir.Range, dtype: str) -> tir.Range:
    def conv(e):
        if e.dtype == dtype:
            return e
        if isinstance(e, tir.IntImm):
            return tir.IntImm(dtype, e.value)
        return tir.Cast(dtype, e)
    return tir.Range(conv(r.min), conv(r.extent))
