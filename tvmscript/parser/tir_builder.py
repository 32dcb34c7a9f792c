"""Syntax tree to TensorIR: builds a `tir.PrimFunc` from a ``@T.prim_func`` definition.

Statements are handled by `PrimFuncBuilder.stmt` (one method per statement form), expressions by
`PrimFuncBuilder.expr`; calls of ``T.*`` functions in expressions are dispatched through
`EXPR_CALLS`, the table a new intrinsic is added to. Blocks collect their declarations
(``T.axis.*``, ``T.reads``, ``T.writes``, ``T.where``, ``T.block_attr``, ``T.alloc_buffer``,
``T.init``) in a `_BlockFrame`; reads and writes a block does not declare are inferred from its
body, as TVM's parser does.
"""

from __future__ import annotations

from typing import Any

from .. import ir, tir
from ..diagnostics import did_you_mean
from . import ast
from .builder import (
    Context,
    Scope,
    bind_arguments,
    split_declarations,
    comments_of,
    dotted_name,
    literal,
    loose_comments,
    merge_comments,
    FUNC_ATTR,
    take_comments,
)

DTYPE_NAMES = set(tir.SCALAR_DTYPES)

# TIR intrinsics written `T.name(args)`: name -> (TIR op name, number of args or None if any).
INTRINSICS = {
    name: (f"tir.{name}", 1)
    for name in (
        "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh",
        "sigmoid", "erf", "fabs", "floor", "ceil", "round", "trunc", "nearbyint", "sin", "cos",
        "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "isnan",
        "isinf", "isfinite", "popcount", "clz", "bitwise_not",
    )
}
INTRINSICS.update({
    "pow": ("tir.pow", 2), "atan2": ("tir.atan2", 2), "fmod": ("tir.fmod", 2),
    "hypot": ("tir.hypot", 2), "copysign": ("tir.copysign", 2), "nextafter": ("tir.nextafter", 2),
    "shift_left": ("tir.shift_left", 2), "shift_right": ("tir.shift_right", 2),
    "bitwise_and": ("tir.bitwise_and", 2), "bitwise_or": ("tir.bitwise_or", 2),
    "bitwise_xor": ("tir.bitwise_xor", 2),
})
BOOL_RESULT_INTRINSICS = {"tir.isnan", "tir.isinf", "tir.isfinite"}

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
        for arg in fdef.args:
            if any(a.name == arg.name for a in fdef.args[: fdef.args.index(arg)]):
                raise self.error(f"duplicate parameter '{arg.name}' in function '{fdef.name}'", arg)
            params.append(self._param(arg))
        root = _BlockFrame("root", fdef)
        self.blocks.append(root)
        body = self.body(fdef.body, function_level=True)
        left_over, self._pending = self._pending, []
        self.blocks.pop()
        if _contains_block(body) or root.alloc_buffers:
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
        name = dotted_name(ann)
        if name == "T.handle":
            var = tir.Var("handle", arg.name, self.ctx.span(arg))
            self.scope.define(arg.name, var)
            return var
        if name and name.startswith("T.") and name[2:] in DTYPE_NAMES:
            var = self._declared_dim(arg.name) or tir.Var(name[2:], arg.name, self.ctx.span(arg))
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
             "buffer_type", "axis_separators"],
            defaults={"dtype": None, "data": None, "strides": None, "elem_offset": None, "scope": None,
                      "align": None, "offset_factor": None, "buffer_type": None, "axis_separators": None},
        )
        shape = self._shape(args["shape"])
        dtype = default_dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        buf = tir.Buffer(name, shape, dtype, span=self.ctx.span(node))
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

    def _typed_literal(self, node, typ, what: str, expected: str):
        value = literal(self.ctx, node)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise self.error(f"{what} must be {expected}", node)
        return value

    def _shape(self, node) -> list:
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

    def _declared_dim(self, name: str):
        """The variable a string dimension (``T.Buffer(("n", 4))``) already introduced under
        ``name``, which a later ``n: T.int64`` parameter or ``n = T.int32()`` declares (TVM
        writes both forms); None if there is none."""
        var = self.scope.lookup(name)
        if isinstance(var, tir.Var) and var in self._named_dims:
            self._named_dims.discard(var)
            return var
        return None

    def _dtype(self, node) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            dtype = node.value
        else:
            name = dotted_name(node)
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
            raise self.error("nested function definitions are not allowed in a T.prim_func", s)
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
        evaluated ``tir.ret`` call, its value cast to the declared return dtype."""
        if s.value is None:
            raise self.error("a T.prim_func return needs a value: return <expr>", s)
        if self._ret_type is None:
            raise self.error("a T.prim_func does not return a value unless it has a return annotation "
                             "(def f(...) -> T.int32:); write results into a buffer", s)
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
                frame.annotations.update(self._attr_dict(args["attrs"]))
                return None
            if name == "T.attr":
                node, key, value = self._attr_stmt_args(v)
                return _Scoped(self.scope, lambda rest: tir.AttrStmt(node, key, value, rest))
            if name == "T.evaluate":
                args = bind_arguments(self.ctx, v, name, ["value"])
                return tir.Evaluate(self.expr(args["value"]))
        return tir.Evaluate(self.expr(v))

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
        """Attribute values stay Python literals unless written with a TIR type (T.bool(True))."""
        if isinstance(node, ast.Call):
            return self.expr(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._attr_value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return self._attr_dict(node)
        return literal(self.ctx, node)

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
            if callee in ("T.alloc_buffer", "T.decl_buffer"):
                buf = self._buffer_decl(name, value, kind=callee)
                if buf.data is None:
                    # Its data pointer, one variable for every ``name.data`` in the body.
                    buf.data = tir.Var("handle", name, self.ctx.span(target))
                self.blocks[-1].alloc_buffers.append(buf)
                self.scope.define(name, buf)
                return None
            if callee and callee.startswith("T.") and callee[2:] in DTYPE_NAMES and not value.args and not value.keywords:
                var = self._declared_dim(name) or tir.Var(callee[2:], name, self.ctx.span(target))
                var.dtype = callee[2:]
                self.scope.define(name, var)
                return None
            if callee in AXIS_KINDS:
                return self._axis(name, target, value, AXIS_KINDS[callee])
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
        buf = self._buffer_decl(name, rest, kind="T.match_buffer")
        if buf.data is None:
            buf.data = tir.Var("handle", name, self.ctx.span(target))
        self.blocks[-1].match_buffers.append(tir.MatchBufferRegion(buf, source))
        self.scope.define(name, buf)
        return None

    def _let(self, var, value):
        self.scope.push()
        self.scope.define(var.name, var)
        return _Scoped(self.scope, lambda rest: tir.LetStmt(var, value, rest), push=False)

    def _ann_assign(self, s: ast.AnnAssign):
        if not isinstance(s.target, ast.Name):
            raise self.error("expected a variable name", s.target)
        dtype = self._dtype(self._let_annotation(s.annotation))
        if s.value is None:
            raise self.error("a TIR variable needs a value", s)
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
        value = self._coerce(self.expr(value_node), _access_dtype(buf, indices), value_node)
        return tir.BufferStore(buf, value, indices)

    def _indices(self, buf: tir.Buffer, node: ast.Subscript) -> list:
        idx = node.index
        items = idx.elts if isinstance(idx, ast.Tuple) and not idx.parenthesized else [idx]
        if len(items) != len(buf.shape):
            raise self.error(
                f"buffer '{buf.name}' has {len(buf.shape)} dimension{'s' if len(buf.shape) != 1 else ''} "
                f"but is indexed with {len(items)} ind{'ices' if len(items) != 1 else 'ex'}",
                node,
            )
        out = []
        for it in items:
            if isinstance(it, ast.Slice):
                raise self.error("slices are only allowed in buffer regions (T.reads, T.writes, T.match_buffer)", it)
            e = self.expr(it)
            if not tir.is_int(e.dtype):
                raise self.error(f"buffer index must be an integer, not {e.dtype}", it)
            out.append(e)
        return out

    def _region(self, node) -> tir.BufferRegion:
        if isinstance(node, ast.Name):
            buf = self._lookup_buffer(node)
            return tir.BufferRegion(buf, [tir.Range(_zero_like(d), d) for d in buf.shape])
        if not isinstance(node, ast.Subscript):
            raise self.error("expected a buffer region such as A[i, 0:16]", node)
        buf = self._lookup_buffer(node.value)
        idx = node.index
        items = idx.elts if isinstance(idx, ast.Tuple) and not idx.parenthesized else [idx]
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
                region.append(tir.Range(lo, _sub(hi, lo)))
            else:
                e = self.expr(it)
                region.append(tir.Range(e, tir.IntImm(e.dtype, 1)))
        return tir.BufferRegion(buf, region)

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
            if len(extents) != len(targets):
                raise self.error(
                    f"T.grid has {len(extents)} extent{'s' if len(extents) != 1 else ''} but the loop "
                    f"binds {len(targets)} variable{'s' if len(targets) != 1 else ''}", it
                )
            ranges = [(None, e) for e in extents]
            kind, tag, annotations = "serial", None, {}
        elif name in LOOP_KINDS:
            if len(targets) != 1:
                raise self.error(f"{name} binds one loop variable, not {len(targets)}", s.target)
            kind = LOOP_KINDS[name]
            params = ["start", "stop"]
            defaults = {"stop": None, "annotations": None}
            if kind == "thread_binding":
                params += ["thread", "annotations"]
                defaults["thread"] = None
            elif name != "range":
                params += ["annotations"]
            else:
                params += ["step"]
                defaults["step"] = None
            args = bind_arguments(self.ctx, it, name, params, defaults)
            if args.get("step") is not None:
                raise self.error("range() with a step is not supported in TIR", args["step"])
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
        body = self.body(s.body)
        self.scope.pop()
        for var, (lo, extent) in reversed(list(zip(loop_vars, ranges))):
            body = tir.For(var, lo if lo is not None else tir.IntImm(extent.dtype, 0), extent, kind, body, tag, annotations)
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
            node, key, value = self._attr_stmt_args(item)
            return tir.AttrStmt(node, key, value, self._nested_body(s.body))
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
        dtype = value.dtype
        if args["dtype"] is not None:
            dtype = self._dtype(args["dtype"])
        dom = _range_as(dom, dtype)
        var = tir.Var(dtype, name, self.ctx.span(target))
        frame.iter_vars.append(tir.IterVar(var, dom, kind))
        frame.iter_values.append(self._coerce(value, dtype, args["binding"]))
        self.scope.define(name, var)
        return None

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
            return tir.const(value.value, dtype)
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
            c = tir.IntImm("int32" if -(2**31) <= v < 2**31 else "int64", v)
        elif isinstance(v, float):
            c = tir.FloatImm("float32", v)
        elif isinstance(v, str):
            return tir.StringImm("handle", v)
        else:
            raise self.error("unsupported constant in TIR", node)
        self.literals.add(id(c))
        return c

    def _binop(self, node: ast.BinOp):
        a = self.expr(node.left)
        b = self.expr(node.right)
        op = node.op
        if op == "**":
            a, b = self._promote(a, b, node)
            return tir.Call(a.dtype, "tir.pow", [a, b])
        if op in BIT_OPS:
            a, b = self._promote(a, b, node)
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
        return tir.BufferLoad(_access_dtype(buf, indices), buf, indices)

    def _attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name):
            value = self.scope.lookup(node.value.id)
            if isinstance(value, tir.Buffer) and node.attr == "data":
                return value.data if value.data is not None else tir.Var("handle", value.name)
        raise self.error(f"unsupported attribute '{dotted_name(node) or node.attr}' in TIR", node)

    def _ifexp(self, node: ast.IfExp):
        raise self.error("use T.if_then_else(cond, a, b) or T.Select(cond, a, b) in TIR", node)

    def _call(self, node: ast.Call):
        name = dotted_name(node.func)
        if name is None:
            raise self.error("unsupported call in TIR", node.func)
        handler = EXPR_CALLS.get(name)
        if handler is not None:
            return handler(self, node, name)
        if name.startswith("T.") and name[2:] in DTYPE_NAMES:
            return self._typed(node, name[2:])
        if name.startswith("T.") and name[2:] in INTRINSICS:
            op, nargs = INTRINSICS[name[2:]]
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
            dtype = "bool" if op in BOOL_RESULT_INTRINSICS else args[0].dtype
            if declared and self._dtype(declared[0].value) != dtype:
                raise self.error(f"{name}() on a {args[0].dtype} value gives {dtype}, not "
                                 f"{self._dtype(declared[0].value)}", declared[0])
            return tir.Call(dtype, op, args)
        if name.startswith("T."):
            known = [f"T.{n}" for n in INTRINSICS] + [f"T.{n}" for n in DTYPE_NAMES] + list(EXPR_CALLS)
            raise self.error(f"unknown function '{name}'", node.func, did_you_mean(name, known))
        helper = self.ctx.py_value(name) if isinstance(node.func, ast.Name) else None
        if callable(helper) and not isinstance(helper, type):
            return self._python_helper(helper, node, name)
        raise self.error(f"undefined function '{name}'", node.func)

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
                v = sign * v
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
        if isinstance(lit, ast.Name) and lit.id in ("True", "False") and self.scope.lookup(lit.id) is None:
            return tir.IntImm(dtype if dtype == "bool" else dtype, int(lit.id == "True"))
        value = self.expr(arg)
        if isinstance(value, tir.StringImm):
            raise self.error(f"T.{dtype}() takes a number or an expression, not a string", arg)
        if value.dtype == dtype:
            return value
        return tir.Cast(dtype, value)


ITER_KIND_LETTERS = set("SRCO")


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


# ----------------------------------------------------------------------------- T.* calls


def _call_args(b: PrimFuncBuilder, node, name, params, defaults=None):
    return bind_arguments(b.ctx, node, name, params, defaults)


def _if_then_else(b, node, name):
    a = _call_args(b, node, name, ["cond", "t", "f"])
    cond = b._condition(a["cond"])
    t, f = b._promote(b.expr(a["t"]), b.expr(a["f"]), node)
    return tir.Call(t.dtype, "tir.if_then_else", [cond, t, f])


def _select(b, node, name):
    a = _call_args(b, node, name, ["condition", "true_value", "false_value"])
    cond = b._condition(a["condition"])
    t, f = b._promote(b.expr(a["true_value"]), b.expr(a["false_value"]), node)
    return tir.Select(t.dtype, cond, t, f)


def _cast(b, node, name):
    if name == "T.cast":
        a = _call_args(b, node, name, ["value", "dtype"])
    else:
        a = _call_args(b, node, name, ["dtype", "value"])
    dtype = b._dtype(a["dtype"])
    value = b.expr(a["value"])
    return tir.Cast(dtype, value)


def _minmax(cls):
    def handler(b, node, name):
        a = _call_args(b, node, name, ["a", "b"])
        x, y = b._promote(b.expr(a["a"]), b.expr(a["b"]), node)
        return cls(x.dtype, x, y)
    return handler


def _int_binary(cls):
    def handler(b, node, name):
        a = _call_args(b, node, name, ["a", "b"])
        x, y = b._promote(b.expr(a["a"]), b.expr(a["b"]), node)
        return cls(x.dtype, x, y)
    return handler


def _abs(b, node, name):
    a = _call_args(b, node, name, ["x"])
    x = b.expr(a["x"])
    return tir.Call(x.dtype, "tir.fabs" if tir.is_float(x.dtype) else "tir.abs", [x])


def _call_extern(b, node, name):
    if len(node.args) < 2:
        raise b.error(f"{name}(dtype, func_name, *args) needs a dtype and a function name", node)
    dtype = b._dtype(node.args[0])
    func = literal(b.ctx, node.args[1])
    if not isinstance(func, str):
        raise b.error(f"{name}: the function name must be a string", node.args[1])
    args = [b.expr(a) for a in node.args[2:]]
    return tir.Call(dtype, "tir.call_extern", [tir.StringImm("handle", func)] + args)


def _reinterpret(b, node, name):
    a = _call_args(b, node, name, ["dtype", "value"])
    return tir.Call(b._dtype(a["dtype"]), "tir.reinterpret", [b.expr(a["value"])])


# Storage scopes a ``T.tvm_storage_sync`` barrier can name.
SYNC_SCOPES = ("shared", "shared.dyn", "warp", "global")


def _storage_sync(b, node, name):
    """``T.tvm_storage_sync("shared")``: a barrier among the threads of a GPU block (TVM's
    ``__syncthreads``). Parsed as TVM writes it; the CPU backend drops it (see
    `compiler.lower_tir.lower_thread_bindings`)."""
    a = _call_args(b, node, name, ["storage_scope"])
    scope = literal(b.ctx, a["storage_scope"])
    if scope not in SYNC_SCOPES:
        raise b.error(f"{name}: the storage scope must be one of {', '.join(repr(s) for s in SYNC_SCOPES)}",
                      a["storage_scope"])
    return tir.Call("int32", "tir.tvm_storage_sync", [tir.StringImm("handle", scope)])


def _limit(op):
    def handler(b, node, name):
        a = _call_args(b, node, name, ["dtype"])
        dtype = b._dtype(a["dtype"])
        return tir.Call(dtype, op, [])
    return handler


def _lanes(b, node, name) -> int:
    """The lane count of a vector expression: a literal integer above 1."""
    lanes = literal(b.ctx, node)
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 2:
        raise b.error(f"{name}: lanes must be an integer literal of at least 2", node)
    return lanes


def _ramp(b, node, name):
    """``T.Ramp(base, stride, lanes)``: the vector base, base + stride, ... (lanes elements)."""
    a = _call_args(b, node, name, ["base", "stride", "lanes"])
    base, stride = b._promote(b.expr(a["base"]), b.expr(a["stride"]), node)
    if not tir.is_int(base.dtype):
        raise b.error(f"{name}: base and stride must be integers, not {base.dtype}", a["base"])
    lanes = _lanes(b, a["lanes"], name)
    return tir.Ramp(f"{base.dtype}x{lanes}", base, stride, lanes)


def _broadcast(b, node, name):
    """``T.Broadcast(value, lanes)``: a vector of ``lanes`` copies of a scalar."""
    a = _call_args(b, node, name, ["value", "lanes"])
    value = b.expr(a["value"])
    if "x" in value.dtype:
        raise b.error(f"{name}: the value must be a scalar, not {value.dtype}", a["value"])
    lanes = _lanes(b, a["lanes"], name)
    return tir.Broadcast(f"{value.dtype}x{lanes}", value, lanes)


def _assume(b, node, name):
    """``T.assume(cond)``: a fact the simplifier may rely on; evaluates to nothing."""
    a = _call_args(b, node, name, ["cond"])
    return tir.Call("bool", "tir.assume", [b._condition(a["cond"])])


def _address_of(b, node, name):
    """``T.address_of(A[i])``: the address of one buffer element, a handle."""
    a = _call_args(b, node, name, ["buffer_load"])
    load = b.expr(a["buffer_load"])
    if not isinstance(load, tir.BufferLoad):
        raise b.error(f"{name} takes a buffer element such as A[i]", a["buffer_load"])
    return tir.Call("handle", "tir.address_of", [load])


def _loop_control(b, node, name):
    """``T.continue_loop()`` / ``T.break_loop()``: leave this iteration or the whole loop, as
    TVM writes them (an evaluated intrinsic, no value)."""
    _call_args(b, node, name, [])
    if not b._loop_depth:
        raise b.error(f"{name}() is only allowed inside a loop", node)
    return tir.Call("void", f"tir.{name[2:]}", [])


EXPR_CALLS = {
    "T.continue_loop": _loop_control,
    "T.break_loop": _loop_control,
    "T.Ramp": _ramp,
    "T.Broadcast": _broadcast,
    "T.assume": _assume,
    "T.address_of": _address_of,
    "T.if_then_else": _if_then_else,
    "T.Select": _select,
    "T.Cast": _cast,
    "T.cast": _cast,
    "T.max": _minmax(tir.Max),
    "T.min": _minmax(tir.Min),
    "T.floordiv": _int_binary(tir.FloorDiv),
    "T.floormod": _int_binary(tir.FloorMod),
    "T.truncdiv": _int_binary(tir.Div),
    "T.truncmod": _int_binary(tir.Mod),
    "T.Div": _int_binary(tir.Div),
    "T.Mod": _int_binary(tir.Mod),
    "T.abs": _abs,
    "T.call_extern": _call_extern,
    "T.reinterpret": _reinterpret,
    "T.max_value": _limit("tir.max_value"),
    "T.min_value": _limit("tir.min_value"),
    "T.tvm_storage_sync": _storage_sync,
}


# ----------------------------------------------------------------------------- helpers


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
    return False


def _range_as(r: tir.Range, dtype: str) -> tir.Range:
    def conv(e):
        if e.dtype == dtype:
            return e
        if isinstance(e, tir.IntImm):
            return tir.IntImm(dtype, e.value)
        return tir.Cast(dtype, e)
    return tir.Range(conv(r.min), conv(r.extent))


def _contains_block(stmt) -> bool:
    if isinstance(stmt, tir.BlockRealize):
        return True
    if isinstance(stmt, tir.SeqStmt):
        return any(_contains_block(s) for s in stmt.seq)
    if isinstance(stmt, (tir.For, tir.While, tir.LetStmt, tir.AssertStmt, tir.AttrStmt)):
        return _contains_block(stmt.body)
    if isinstance(stmt, tir.IfThenElse):
        return _contains_block(stmt.then_case) or (stmt.else_case is not None and _contains_block(stmt.else_case))
    return False


def infer_access_regions(body, init, alloc_buffers) -> tuple[list, list]:
    """The regions a block reads and writes, as TVM infers them when a block does not say:
    each access is a point; several accesses to one buffer widen to cover them all; buffers
    allocated in the block are not listed; in a reduction (a block with ``init``) the written
    buffers are not listed as reads."""
    from ..compiler.tir_analysis import collect_accesses

    reads, writes = collect_accesses(body, init)
    local = set(alloc_buffers)
    writes = [r for r in writes if r.buffer not in local]
    written = {r.buffer for r in writes}
    reads = [r for r in reads if r.buffer not in local and not (init is not None and r.buffer in written)]
    return reads, writes
