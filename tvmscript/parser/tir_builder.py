"""Syntax tree to TensorIR: builds a `tir.PrimFunc` from a ``@T.prim_func`` definition.

`PrimFuncBuilder` builds the function (its parameters, the implicit root block) and dispatches:
each statement through `PrimFuncBuilder.stmt`, each expression through `PrimFuncBuilder.expr`,
to the method that builds that form. The methods are grouped by what they build, one module each:

- tir_statements.py: expression statements, asserts, ``while``, ``return``, assignments (stores,
  lets, declarations of variables and buffers);
- tir_blocks.py: loops (``T.grid``, ``range``, ``T.serial``...) and with-scopes (``T.block`` and
  its axes and declarations, ``T.init``, ``T.attr``, ``T.launch_thread``);
- tir_buffers.py: buffer declarations (shapes, dtypes, pointer types) and accesses (loads,
  stores, regions);
- tir_attrs.py: attribute dicts and ``T.attr``, targets, comm reducers, thread launches;
- tir_expressions.py: operators, literals and their dtypes, calls; calls of ``T.*`` functions
  go through `EXPR_CALLS` (tir_calls.py), the table a new intrinsic is added to;
- tir_names.py: the tables of ``T.*`` names (dtypes, loop kinds, axis kinds, thread tags);
- tir_frames.py: what a body being built keeps (the block's declarations, lets over the rest).

Lower-level forms TVM's own tests write are read too: thread launches (``T.launch_thread`` /
``T.env_thread``, a ``"thread_extent"`` AttrStmt over a thread IterVar), buffers over existing
memory (``T.decl_buffer(..., data=ptr)``, ``A.view(n)``: `tir.DeclBuffer`), typed pointers
(``T.handle("float32", "shared")``: `tir.Var.pointer`), reducers (``T.comm_reducer``), runtime
builtins (`tir.BUILTINS`), calls between a module's prim_funcs and nested ``@T.inline`` macros,
expanded where they are called.
"""

from __future__ import annotations

from .. import ir
from ..ir import tir
from ..ir.tir_analysis import contains_block
from . import ast
from .arguments import dotted_name, literal
from .comments import comments_of, loose_comments, merge_comments
from .context import Context, Scope
from .tir_attrs import TIRAttrs
from .tir_blocks import TIRBlocks
from .tir_buffers import TIRBuffers
from .tir_expressions import TIRExpressions
from .tir_frames import BlockFrame, Macro, Scoped
from .tir_names import DTYPE_ALIASES, DTYPE_NAMES, MACRO_DECORATORS
from .tir_statements import TIRStatements


class PrimFuncBuilder(TIRStatements, TIRBlocks, TIRBuffers, TIRAttrs, TIRExpressions):
    """Builds one `tir.PrimFunc`: the function and its body here, each statement and
    expression form in the module that holds it (see the module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.scope = Scope()
        self.blocks: list[BlockFrame] = []
        self.loop_ranges: dict[tir.Var, tuple] = {}
        self.literals: set[int] = set()  # ids of constants written as bare Python literals
        self.comments: dict = {}
        self.attrs: dict = {}
        self.buffer_map: dict = {}
        self._pending: list = []  # statements without IR of their own whose comments still wait
        self._loop_depth = 0  # loops around the statement being built
        self._env_threads: dict = {}  # T.env_thread variables -> their thread tags
        self._named_dims: set = set()  # variables introduced by a string dimension, not yet declared
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
        root = BlockFrame("root", fdef)
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
        name = DTYPE_ALIASES.get(dotted_name(ann), dotted_name(ann))
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
            if isinstance(result, Scoped):
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
            return Scoped(self.scope, lambda rest: tir.AssertStmt(cond, msg, rest, kind, parts))
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.Return):
            return self._return(s)
        if isinstance(s, ast.FunctionDef):
            if any(dotted_name(d) in MACRO_DECORATORS for d in s.decorators):
                self.scope.define(s.name, Macro(s))
                return None
            raise self.error("nested function definitions are not allowed in a T.prim_func, "
                             "except macros (@T.inline / @T.macro)", s)
        raise self.error("unsupported statement in a T.prim_func", s)

    def _nested_body(self, stmts) -> tir.Stmt:
        self.scope.push()
        try:
            return self.body(stmts)
        finally:
            self.scope.pop()

    # ------------------------------------------------------------------ expressions
    def expr(self, node) -> tir.PrimExpr:
        method = _EXPR_DISPATCH.get(type(node))
        if method is None:
            raise self.error("unsupported expression in TIR", node)
        return method(self, node)


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
