"""Syntax tree to Relax: builds a `relax.Function` from an ``@R.function`` definition.

Bindings get their struct info by inference (ops through the op registry in
`tvmscript.ir.op`, `call_tir` from its ``out_sinfo``); an annotation the user wrote is
checked against the inferred struct info and then kept. Dataflow blocks are scoped: a variable
bound inside ``with R.dataflow():`` and not listed in ``R.output`` does not exist after it.
Expressions are put in TVM's normal form as they are bound (see "normalization" below): a
nested call becomes a binding of its own, named as TVM names it, so that a file prints back as
TVM prints it.
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from ..diagnostics import TVMScriptError, did_you_mean
from . import ast
from ..metadata import CONSTANT_KEY, TENSOR_ALIASES, TENSOR_KEY
from .builder import (
    FUNC_ATTR, Context, Scope, bind_arguments, comments_of, dotted_name, literal, loose_comments,
    merge_comments, split_declarations, take_comments,
)

SINFO_NAMES = ("R.Tensor", "R.Tuple", "R.Shape", "R.Object", "R.Prim", "R.Callable")
DTYPES = set(tir.SCALAR_DTYPES)


class _Expired:
    """Marks a dataflow variable whose block has ended."""

    __slots__ = ("var",)

    def __init__(self, var) -> None:
        self.var = var


def _py_to_relax(value):
    """A Python value (from the scope around TVMScript in Python) as a Relax expression, or
    None if it has no Relax meaning."""
    if isinstance(value, (relax.Constant, ir.GlobalVar)):
        return value
    if isinstance(value, bool):
        e = tir.IntImm("bool", int(value))
    elif isinstance(value, int):
        e = tir.IntImm("int64", value)
    elif isinstance(value, float):
        e = tir.FloatImm("float64", value)
    elif isinstance(value, tir.PrimExpr):
        e = value
    elif isinstance(value, str):
        return relax.StringImm(value, relax.ObjectStructInfo())
    elif isinstance(value, tuple):
        fields = [_py_to_relax(v) for v in value]
        if any(f is None for f in fields):
            return None
        return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
    else:
        return None
    return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))


def _is_sym_declaration(node) -> bool:
    """``T.int64()``: a symbolic variable declaration."""
    if not (isinstance(node, ast.Call) and not node.args and not node.keywords):
        return False
    callee = dotted_name(node.func)
    return bool(callee) and callee.startswith("T.") and callee[2:] in DTYPES


class RelaxFunctionBuilder:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.scope = Scope()
        # Module-level TypeVars: fresh per function, as in the TIR builder.
        self.sym_vars: dict[str, tir.Var] = {n: tir.Var(v.dtype, n) for n, v in ctx.type_vars.items()}
        self.attrs: dict = {}
        self.comments: dict = {}
        self.pending: list = []
        self.is_pure = True
        self.in_dataflow = False
        # Normalization (see `_leaf`): the bindings a nested call was lifted into, waiting to
        # be placed before the binding that uses them, and how many bindings each of TVM's
        # two name supplies ("gv" outside dataflow blocks, "lv" inside) has handed out.
        self.lifted: list = []
        self.emitted = {"gv": 0, "lv": 0}
        self.implicit_outputs: dict = {}  # dataflow blocks ended by a return: the names returned
        # Per output name of the dataflow block being built, how many of its bindings are still
        # to come: only the last one binds the output (an earlier one is a DataflowVar).
        self.output_bindings_left: dict = {}
        self.name = ""  # of the function being built
        # The call_tirs that contradict their prim_func (`relax_calls._note_contradiction`).
        self.contradictions: list[TVMScriptError] = []

    def error(self, message, node, notes=None):
        return self.ctx.error(message, node, notes)

    # ------------------------------------------------------------------ function
    def build(self, fdef: ast.FunctionDef) -> relax.Function:
        self.name = fdef.name
        try:
            return self._build(fdef)
        except TVMScriptError as err:
            raise self.first_cause(err) from None

    def first_cause(self, err: TVMScriptError) -> TVMScriptError:
        """The error to report for the function: the first call_tir before ``err`` that
        contradicts its prim_func, if there is one, else ``err``. A call_tir whose output is
        declared with the wrong shape makes the op consuming it fail; the fault is the call's,
        and that is where the function's first error is. ``err`` is kept as a note."""
        line = err.span.line if err.span is not None else None
        earlier = [c for c in self.contradictions if line is None or c.span is None or c.span.line <= line]
        if not earlier:
            return err
        cause = earlier[0]
        where = f"line {line}" if line is not None else "later"
        cause.notes.append(f"{where} fails too, maybe because of this: {err.message}")
        return cause

    def _build(self, fdef: ast.FunctionDef) -> relax.Function:
        private = False
        for dec in fdef.decorators:
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "private":
                        private = bool(literal(self.ctx, kw.value))
                    elif kw.arg == "pure":
                        self.is_pure = bool(literal(self.ctx, kw.value))
                    else:
                        raise self.error(f"R.function() got an unexpected keyword argument '{kw.arg}'", kw)
        _inline_meta_vars(fdef.body)
        params = []
        seen: set = set()
        for arg in fdef.args:
            if arg.annotation is None:
                raise self.error(f"parameter '{arg.name}' needs a struct info annotation such as R.Tensor(...)", arg)
            if arg.name in seen:
                raise self.error(f"duplicate parameter '{arg.name}' in function '{fdef.name}'", arg)
            seen.add(arg.name)
            sinfo = self.sinfo(arg.annotation, defining=True)
            var = relax.Var(arg.name, sinfo, self.ctx.span(arg))
            self.scope.define(arg.name, var)
            params.append(var)
        ret_sinfo = self.sinfo(fdef.returns, defining=True) if fdef.returns is not None else None
        body = self.seq_body(fdef.body, fdef, function_body=True)
        # A return annotation is taken as written, as TVM takes it (TVM's own tests annotate
        # `-> R.Tensor(ndim=2)` over a scalar); `tvms check` reports one the body contradicts.
        if ret_sinfo is None:
            ret_sinfo = relax.struct_info_of(body.body)
        attrs = dict(self.attrs)
        if not private:
            attrs.setdefault("global_symbol", fdef.name)
        func = relax.Function(
            params, body, ret_sinfo, attrs, self.is_pure, private, span=self.ctx.span(fdef),
        )
        func.comments = self.comments
        merge_comments(self.comments, func, comments_of(fdef))
        # The printer looks the return statement's comments up by the function.
        ret_comments = self.comments.pop(("return", fdef), None)
        merge_comments(self.comments, ("return", func), ret_comments)
        return func

    # ------------------------------------------------------------------ bodies
    def seq_body(self, stmts: list, owner, function_body: bool = False) -> relax.SeqExpr:
        blocks: list = []
        bindings: list = []
        ret = None
        stmts = self._hoist_dataflow_return(stmts)
        for i, s in enumerate(stmts):
            if ret is not None:
                raise self.error("unreachable statement after return", s)
            if isinstance(s, ast.Return):
                if s.value is None:
                    raise self.error("a Relax function must return a value", s)
                ret = self._return_value(self.expr(s.value))
                bindings.extend(self._take_lifted())
                self._comment_node(("return", owner), s)
                continue
            if isinstance(s, ast.With):
                name = dotted_name(s.item.func) if isinstance(s.item, ast.Call) else dotted_name(s.item)
                if name != "R.dataflow":
                    raise self.error(f"unknown scope '{name}': expected R.dataflow()", s.item)
                if self.in_dataflow:
                    raise self.error("dataflow blocks cannot be nested", s)
                if bindings:
                    blocks.append(relax.BindingBlock(bindings))
                    bindings = []
                before, self.pending = self.pending, []
                block = self.dataflow_block(s)
                inner, self.pending = self.pending, before
                self._comment_node(block, s)
                for p in inner:
                    merge_comments(self.comments, block, ir.Comments(after=loose_comments(p).before))
                blocks.append(block)
                continue
            # R.func_attr is allowed only before the first binding (function_body says "at the top").
            binding = self.stmt(s, function_body and not blocks and not bindings)
            if binding is not None:
                self._place(bindings, binding, s)
            elif s.comments or s.trailing or getattr(s, "after", None):
                self.pending.append(s)
        if bindings:
            blocks.append(relax.BindingBlock(bindings))
        if ret is None:
            raise self.error("a Relax function body must end with a return statement", owner)
        return relax.SeqExpr(blocks, ret, relax.struct_info_of(ret))

    def _hoist_dataflow_return(self, stmts: list) -> list:
        """TVM reads a ``return`` ending a dataflow block as the block's end: the variables
        it returns become the block's outputs, and the function returns after the block."""
        out = []
        for s in stmts:
            out.append(s)
            if isinstance(s, ast.With) and s.body and isinstance(s.body[-1], ast.Return) \
                    and not any(_is_call_stmt(st, "R.output") for st in s.body):
                ret = s.body[-1]
                s.body = s.body[:-1]
                self.implicit_outputs[id(s)] = [n.id for n in ast.walk(ret.value) if isinstance(n, ast.Name)] \
                    if ret.value is not None else []
                out.append(ret)
        return out

    def _place(self, bindings: list, binding, s) -> None:
        """Append the binding of statement ``s`` after the bindings its nested calls were lifted
        into; the comments above ``s`` go above the first of them, the rest stay on ``s``'s."""
        lifted = self._take_lifted()
        comments = comments_of(s)
        if lifted:
            self._comment_node(lifted[0], None)
            if comments is not None:
                merge_comments(self.comments, lifted[0], ir.Comments(list(comments.before)))
                comments = ir.Comments([], comments.trailing, comments.after)
            bindings.extend(lifted)
        bindings.append(binding)
        self._comment_node(binding, None)
        merge_comments(self.comments, binding, comments)

    def _comment_node(self, key, s) -> None:
        for p in self.pending:
            merge_comments(self.comments, key, loose_comments(p))
        self.pending = []
        if s is not None:
            merge_comments(self.comments, key, comments_of(s))

    def dataflow_block(self, s: ast.With) -> relax.DataflowBlock:
        outputs_stmt = None
        for st in s.body:
            if _is_call_stmt(st, "R.output"):
                outputs_stmt = st
        output_names = set()
        if outputs_stmt is not None:
            for a in outputs_stmt.value.args:
                if not isinstance(a, ast.Name):
                    raise self.error("R.output takes variable names", a)
                output_names.add(a.id)
        implicit = self.implicit_outputs.get(id(s))
        if implicit is not None:
            output_names.update(implicit)
        self.in_dataflow = True
        self.dataflow_outputs = output_names
        self.output_bindings_left = _binding_counts(s.body, output_names)
        self.scope.push()
        bindings = []
        outputs = []
        seen_output = False
        output_key = ("output", s)
        for st in s.body:
            if _is_call_stmt(st, "R.output"):
                if seen_output:
                    raise self.error("a dataflow block has one R.output", st)
                seen_output = True
                self._comment_node(output_key, st)
                for a in st.value.args:
                    v = self.scope.frames[-1].get(a.id)
                    if v is None:
                        raise self.error(f"R.output names '{a.id}', which is not bound in this dataflow block", a)
                    outputs.append(v)
                if st.value.keywords:
                    raise self.error("R.output takes no keyword arguments", st.value.keywords[0])
                continue
            if seen_output:
                raise self.error("R.output must be the last statement of a dataflow block", st)
            if isinstance(st, ast.Return):
                raise self.error("return is not allowed inside a dataflow block", st)
            binding = self.stmt(st, False)
            if binding is not None:
                self._place(bindings, binding, st)
            elif st.comments or st.trailing or getattr(st, "after", None):
                self.pending.append(st)
        frame = self.scope.pop()
        if implicit is not None:
            outputs = [frame[n] for n in dict.fromkeys(implicit) if isinstance(frame.get(n), relax.Var)]
        self.in_dataflow = False
        for name, value in frame.items():
            if isinstance(value, relax.DataflowVar):
                self.scope.define(name, _Expired(value))
            else:
                self.scope.define(name, value)
        block = relax.DataflowBlock(bindings, outputs)
        # The printer looks the R.output line's comments up by the block.
        merge_comments(self.comments, ("output", block), self.comments.pop(output_key, None))
        return block

    def stmt(self, s, function_body: bool):
        if isinstance(s, ast.ExprStmt):
            v = s.value
            name = dotted_name(v.func) if isinstance(v, ast.Call) else None
            if name == "R.func_attr":
                if not function_body or self.in_dataflow:
                    raise self.error("R.func_attr must be at the top of the function body, before any binding", v)
                args = bind_arguments(self.ctx, v, name, ["attrs"])
                value = self._func_attr_value(args["attrs"])
                if not isinstance(value, dict):
                    raise self.error("R.func_attr takes a dict", args["attrs"])
                self.attrs.update(value)
                take_comments(self.comments, FUNC_ATTR, s)
                return None
            if name == "R.output":
                raise self.error("R.output is only allowed at the end of a dataflow block", v)
            value = self._normalize(self.expr(v))
            if not _is_void(relax.struct_info_of(value)):
                raise self.error(
                    "Non-void relax expressions must be bound to a variable, e.g. 'y = R.add(x, x)'", v
                )
            return self._bind("_", value, None, s)
        if isinstance(s, ast.Assign):
            parts = split_declarations(self.ctx, s, _is_sym_declaration)
            if parts is not None:
                for part in parts:
                    self._declare_sym(part.target.id, dotted_name(part.value.func)[2:], part.value)
                return None
            target, value = s.target, s.value
            if not isinstance(target, ast.Name):
                raise self.error("expected a variable name on the left of '='", target)
            if isinstance(value, ast.Name) and value.id == getattr(self.ctx, "class_name", None) and target.id == "cls":
                self.scope.define("cls", _ClassRef())
                return None
            if isinstance(value, ast.Call):
                callee = dotted_name(value.func)
                if _is_sym_declaration(value):
                    self._declare_sym(target.id, callee[2:], value)
                    return None
            return self._binding(target, None, value, s)
        if isinstance(s, ast.AnnAssign):
            if not isinstance(s.target, ast.Name):
                raise self.error("expected a variable name", s.target)
            if s.value is None:
                raise self.error("a binding needs a value", s)
            if _is_sym_declaration(s.value):  # N: R.Prim("int64") = T.int64()
                dtype = dotted_name(s.value.func)[2:]
                ann = self.sinfo(s.annotation)
                if not isinstance(ann, relax.PrimStructInfo) or ann.dtype != dtype:
                    raise self.error(f"the symbolic variable '{s.target.id}' is a T.{dtype}(); its annotation "
                                     f"must say R.Prim(\"{dtype}\")", s.annotation)
                self._declare_sym(s.target.id, dtype, s.value)
                return None
            ann = self.sinfo(s.annotation, defining=True)
            return self._binding(s.target, ann, s.value, s, s.annotation)
        if isinstance(s, ast.If):
            return self._if(s)
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.With):
            raise self.error("dataflow blocks cannot be nested", s)
        if isinstance(s, ast.FunctionDef):
            return self._nested_function(s)
        raise self.error("unsupported statement in an R.function", s)

    def _nested_function(self, fdef: ast.FunctionDef) -> relax.VarBinding:
        """An ``@R.function`` defined inside another: a closure (it sees the variables and
        symbolic dims around it), bound to a variable of its name, as TVM reads it."""
        names = [dotted_name(d.func if isinstance(d, ast.Call) else d) for d in fdef.decorators]
        if names != ["R.function"]:
            raise self.error("a function defined inside an R.function must be an @R.function", fdef)
        # TVM's printer heads a nested function with its import line; that line is not the user's.
        fdef.comments = [c for c in fdef.comments if c.strip() != _NESTED_HEADER]
        inner = RelaxFunctionBuilder(self.ctx)
        inner.scope.frames = list(self.scope.frames)
        inner.scope.push()
        inner.sym_vars = self.sym_vars
        func = inner.build(fdef)
        func.attrs.pop("global_symbol", None)  # a closure has no symbol of its own
        params = [relax.struct_info_of(p) for p in func.params]
        func.struct_info = relax.FuncStructInfo(params, func.ret_struct_info, func.is_pure)
        self.comments.update(func.comments)
        return relax.VarBinding(self._new_var(fdef, func.struct_info, fdef.name), func)

    def _binding(self, target: ast.Name, ann, value_node, stmt, ann_node=None):
        if isinstance(value_node, ast.Call) and dotted_name(value_node.func) == "R.match_cast":
            args = bind_arguments(self.ctx, value_node, "R.match_cast", ["value", "struct_info"])
            value = self._normalize(self.expr(args["value"]))
            sinfo = self.sinfo(args["struct_info"], defining=True)
            if ann is not None:
                self.check_annotation(ann, sinfo, ann_node, target.id)
            var = self._new_var(target, ann or sinfo)
            return relax.MatchCast(var, value, sinfo)
        flag = self.bool_value(value_node) if isinstance(ann, relax.PrimStructInfo) else None
        value = flag if flag is not None else self._normalize(self.expr(value_node))  # b: R.Prim("bool") = True
        if isinstance(ann, relax.PrimStructInfo) and _is_number(value_node):
            value = self._typed_literal(value, ann.dtype, value_node)
        return self._bind(target.id, value, ann, stmt, target, ann_node)

    def _typed_literal(self, value: relax.PrimValue, dtype: str, node) -> relax.PrimValue:
        """``x: R.Prim("int32") = 2``: a bare number takes the dtype its annotation gives."""
        v = value.value.value
        if tir.is_float(dtype):
            e = tir.FloatImm(dtype, float(v))
        elif isinstance(v, float) and not v.is_integer():
            raise self.error(f"{v!r} is not a value of the annotated dtype {dtype}", node)
        else:
            e = tir.IntImm(dtype, int(v))
        return relax.PrimValue(e, relax.PrimStructInfo(dtype, e))

    def _bind(self, name, value, ann, stmt, target=None, ann_node=None):
        inferred = relax.struct_info_of(value)
        if ann is not None:
            self.check_annotation(ann, inferred, ann_node, name)
        var = self._new_var(target or stmt, ann if ann is not None else inferred, name)
        return relax.VarBinding(var, value)

    def _new_var(self, target, sinfo, name=None):
        name = name or target.id
        self._count_binding()
        is_output = self.in_dataflow and name in self.dataflow_outputs
        if is_output:
            left = self.output_bindings_left.get(name, 1) - 1
            self.output_bindings_left[name] = left
            is_output = left <= 0
        is_dataflow = self.in_dataflow and not is_output
        cls = relax.DataflowVar if is_dataflow else relax.Var
        var = cls(name, sinfo, self.ctx.span(target))
        if name != "_":
            self.scope.define(name, var)
        return var

    def _if(self, s: ast.If):
        cond = self._leaf(self.expr(s.test))
        if not s.orelse:
            raise self.error("an if statement in an R.function needs an else branch", s)
        branches = []
        names = []
        before, self.pending = self.pending, []
        lifted_before, self.lifted = self.lifted, []
        for body in (s.body, s.orelse):
            last = body[-1]
            if isinstance(last, ast.ExprStmt):
                # A branch run for its effect (``R.print(...)``): TVM gives it the value R.tuple()
                # bound to ``_``.
                at = (last.line, last.col, last.end_line, last.end_col)
                body = body + [ast.Assign(ast.Name("_", *at), ast.Call(ast.Attribute(ast.Name("R", *at), "tuple", *at),
                                                                        [], [], *at), *at)]
                last = body[-1]
            if not isinstance(last, (ast.Assign, ast.AnnAssign)) or not isinstance(last.target, ast.Name):
                raise self.error("each branch of an if must end by assigning the result variable", last)
            names.append(last.target.id)
            self.scope.push()
            bindings = []
            for st in body[:-1]:
                b = self.stmt(st, False)
                if b is not None:
                    self._place(bindings, b, st)
            if isinstance(last, ast.AnnAssign):
                ann = self.sinfo(last.annotation, defining=True)
            else:
                ann = None
            # As TVM, a branch's value is a variable: a computed one is bound first, to x_then
            # (x_else), and the if's x takes it.
            t = last.target
            result = ast.Name(t.id + ("_else" if branches else "_then"), t.line, t.col, t.end_line, t.end_col)
            if isinstance(last.value, ast.Call) and dotted_name(last.value.func) == "R.match_cast":
                cast = self._binding(result, ann, last.value, last, getattr(last, "annotation", None))
                bindings.extend(self._take_lifted())
                bindings.append(cast)
                value = cast.var
            else:
                value = self._normalize(self.expr(last.value))
                bindings.extend(self._take_lifted())
                if ann is not None:
                    self.check_annotation(ann, relax.struct_info_of(value), last.annotation, t.id)
                if relax.is_leaf(value):
                    self._count_binding()
                else:
                    var = self._new_var(result, ann or relax.struct_info_of(value))
                    bindings.append(relax.VarBinding(var, value))
                    value = var
            self.scope.pop()
            blocks = [relax.BindingBlock(bindings)] if bindings else []
            seq = relax.SeqExpr(blocks, value, ann or relax.struct_info_of(value))
            # The printer looks the comments of the branch's result line up by the branch.
            self._comment_node(("result", seq), last)
            branches.append((seq, ann))
        self.pending = before + self.pending
        self.lifted = lifted_before
        if names[0] != names[1]:
            raise self.error(
                f"both branches of an if must assign the same variable ('{names[0]}' vs '{names[1]}')", s.orelse[-1]
            )
        (t, t_ann), (f, f_ann) = branches
        sinfo = t_ann or f_ann or unify_sinfo(t.struct_info, f.struct_info)
        if_expr = relax.If(cond, t, f, sinfo)
        self._count_binding()
        var = relax.Var(names[0], sinfo, self.ctx.span(s.body[-1]))
        self.scope.define(names[0], var)
        return relax.VarBinding(var, if_expr)

    # ------------------------------------------------------------------ normalization
    # TVM's parser emits every binding through its BlockBuilder, which puts expressions in
    # normal form: an argument of a call (or the tuple of a tuple index, the condition of an
    # if, the value returned) must be a leaf (a variable, a constant, a shape, a primitive
    # value, ...) or a tuple of those, so a nested call ``R.rsqrt(R.add(a, c))`` is bound to a
    # fresh variable first. Fresh variables are named as TVM names them: one name supply per
    # function for each kind of block, "gv", "gv1", ... outside dataflow blocks and "lv",
    # "lv1", ... inside, where every binding (the user's too) takes the next number.

    def _count_binding(self) -> str:
        """Take the next name of the current block's supply (for a binding of any kind)."""
        base = "lv" if self.in_dataflow else "gv"
        n = self.emitted[base]
        self.emitted[base] = n + 1
        return base if n == 0 else f"{base}{n}"

    def _take_lifted(self) -> list:
        lifted, self.lifted = self.lifted, []
        return lifted

    def _normalize(self, e):
        """``e`` with its operands made leaves; the lifted bindings go to ``self.lifted``."""
        if isinstance(e, relax.Call):
            args = [self._leaf(a) for a in e.args]
            if any(a is not b for a, b in zip(args, e.args)):
                e = relax.Call(e.op, args, e.attrs, e.sinfo_args, e.struct_info, e.span)
            return e
        if isinstance(e, relax.Tuple):
            fields = [self._leaf(f) for f in e.fields]
            if any(a is not b for a, b in zip(fields, e.fields)):
                e = relax.Tuple(fields, e.struct_info)
            return e
        if isinstance(e, relax.TupleGetItem):
            base = self._leaf(e.tuple_value)
            return e if base is e.tuple_value else relax.TupleGetItem(base, e.index, e.struct_info)
        return e

    def _leaf(self, e):
        """``e`` itself if it is a leaf (or a tuple of leaves), else a fresh variable bound
        to it, as TVM's normalizer does with an operand."""
        if isinstance(e, relax.Tuple):
            return self._normalize(e)
        if relax.is_leaf(e):
            return e
        value = self._normalize(e)
        sinfo = relax.struct_info_of(value)
        name = self._count_binding()
        cls = relax.DataflowVar if self.in_dataflow else relax.Var
        var = cls(name, sinfo)
        self.lifted.append(relax.VarBinding(var, value))
        return var

    def _return_value(self, e):
        """The value a function returns, as TVM keeps it: a leaf or a tuple of leaves."""
        return self._leaf(e)

    # ------------------------------------------------------------------ struct info
    def sinfo(self, node, defining: bool = False) -> relax.StructInfo:
        name = dotted_name(node.func) if isinstance(node, ast.Call) else dotted_name(node)
        if name == "R.Tensor":
            if not isinstance(node, ast.Call):
                return relax.TensorStructInfo(None, "", -1)
            # TVM's order: R.Tensor(shape, dtype, vdevice, ndim); an int third argument is the
            # ndim of older TVMScript.
            args = bind_arguments(self.ctx, node, "R.Tensor", ["shape", "dtype", "vdevice", "ndim"],
                                  {"shape": None, "dtype": None, "ndim": None, "vdevice": None})
            if isinstance(args["shape"], ast.Constant) and isinstance(args["shape"].value, str) \
                    and args["dtype"] is None:
                args["shape"], args["dtype"] = None, args["shape"]  # R.Tensor("float32", ndim=2)
            third = args["vdevice"]
            if isinstance(third, ast.Constant) and isinstance(third.value, int) and args["ndim"] is None:
                args["vdevice"], args["ndim"] = None, third
            shape = None
            if args["shape"] is not None and not (isinstance(args["shape"], ast.Name) and args["shape"].id == "None"):
                shape_node = args["shape"]
                py_shape = self.ctx.py_value(shape_node.id) if isinstance(shape_node, ast.Name) else None
                if isinstance(py_shape, (tuple, list)):
                    shape = self._py_shape(shape_node, py_shape)
                elif not isinstance(shape_node, (ast.Tuple, ast.List)):
                    raise self.error("R.Tensor shape must be a tuple such as (1, 784)", shape_node)
                else:
                    shape = [self._shape_dim(e, defining) for e in shape_node.elts]
            dtype = ""
            if args["dtype"] is not None:
                d = literal(self.ctx, args["dtype"])
                if d is not None:
                    if not isinstance(d, str) or not (tir.is_valid_dtype(d)):
                        raise self.error(f"unknown dtype '{d}'", args["dtype"], did_you_mean(str(d), tir.SCALAR_DTYPES))
                    dtype = "" if d == "void" else d
            ndim = -1
            if args["ndim"] is not None:
                ndim = literal(self.ctx, args["ndim"])
                if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
                    raise self.error("ndim must be a non-negative integer", args["ndim"])
                if shape is not None and ndim != len(shape):
                    raise self.error(f"ndim={ndim} does not match the shape's {len(shape)} dimensions", args["ndim"])
            vdevice = self._vdevice(args["vdevice"]) if args["vdevice"] is not None else None
            return relax.TensorStructInfo(shape, dtype, ndim if shape is None else len(shape), vdevice)
        if name == "R.Tuple":
            if not isinstance(node, ast.Call):
                return relax.TupleStructInfo([])
            if node.keywords:
                raise self.error("R.Tuple() takes no keyword arguments", node.keywords[0])
            fields = node.args
            if len(fields) == 1 and isinstance(fields[0], ast.List):
                fields = fields[0].elts  # R.Tuple([R.Tensor(...), ...]), TVM's list form
            return relax.TupleStructInfo([self.sinfo(a, defining) for a in fields])
        if name == "R.Shape":
            if not isinstance(node, ast.Call):
                return relax.ShapeStructInfo(None, -1)
            args = bind_arguments(self.ctx, node, "R.Shape", ["values", "ndim"], {"values": None, "ndim": None})
            if args["values"] is not None:
                vals = args["values"]
                if not isinstance(vals, (ast.List, ast.Tuple)):
                    raise self.error("R.Shape values must be a list", vals)
                return relax.ShapeStructInfo([self.dim(e, defining) for e in vals.elts])
            ndim = literal(self.ctx, args["ndim"]) if args["ndim"] is not None else -1
            if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
                raise self.error("ndim must be a non-negative integer", args["ndim"])
            return relax.ShapeStructInfo(None, ndim)
        if isinstance(node, ast.Name) and node.id == "None":
            return relax.TupleStructInfo([])  # -> None: nothing, as TVM reads it (R.Tuple)
        if name in ("R.Object", "R.Any"):
            return relax.ObjectStructInfo()
        if name == "R.Callable":
            return self._callable_sinfo(node, defining)
        if isinstance(node, ast.Attribute) and node.attr in ("ty", "struct_info") and isinstance(node.value, ast.Name):
            var = self.scope.lookup(node.value.id)  # x.ty, x.struct_info: the struct info of x
            if isinstance(var, relax.Var):
                return relax.struct_info_of(var)
        if name and name.startswith("T.") and name[2:] in DTYPES and not isinstance(node, ast.Call):
            # TVM 0.25+ writes a primitive value's struct info as its TIR type: `n: T.int64`.
            return relax.PrimStructInfo(name[2:])
        if name == "R.Prim":
            if not isinstance(node, ast.Call):
                raise self.error("R.Prim needs a dtype, e.g. R.Prim(\"int64\")", node)
            args = bind_arguments(self.ctx, node, "R.Prim", ["dtype", "value"], {"dtype": None, "value": None})
            if args["value"] is not None:
                value = _typed_int_constant(self.ctx, args["value"]) or self.dim(args["value"], defining)
                return relax.PrimStructInfo(value.dtype, value)
            dtype = literal(self.ctx, args["dtype"]) if args["dtype"] is not None else "int64"
            if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype):
                raise self.error(f"unknown dtype '{dtype}'", args["dtype"])
            return relax.PrimStructInfo(dtype)
        raise self.error("expected a struct info annotation such as R.Tensor((1, 784), \"float32\")", node)

    def _shape_dim(self, node, defining: bool) -> tir.PrimExpr:
        """A dimension of a tensor's shape: an int64 value, as TVM requires of Relax shapes
        (``n = T.int32()`` used as one is an error there too)."""
        d = self.dim(node, defining)
        if d.dtype != "int64":
            raise self.error(f"a tensor's dimensions are int64 values; this one is {d.dtype}", node)
        return d

    def _callable_sinfo(self, node, defining: bool) -> relax.FuncStructInfo:
        """``R.Callable`` (an opaque function) or ``R.Callable((params...), ret, purity)``."""
        if not isinstance(node, ast.Call):
            return relax.FuncStructInfo(None, relax.ObjectStructInfo(), True)
        args = bind_arguments(self.ctx, node, "R.Callable", ["params", "ret", "purity", "derive_func"],
                              {"params": None, "ret": None, "purity": None, "derive_func": None})
        params = None
        if args["params"] is not None:
            if not isinstance(args["params"], (ast.Tuple, ast.List)):
                raise self.error("R.Callable's parameters are a tuple of struct infos", args["params"])
            params = [self.sinfo(p, defining) for p in args["params"].elts]
        ret = self.sinfo(args["ret"], defining) if args["ret"] is not None else relax.ObjectStructInfo()
        purity = literal(self.ctx, args["purity"]) if args["purity"] is not None else True
        if not isinstance(purity, bool):
            raise self.error("R.Callable's purity is True or False", args["purity"])
        return relax.FuncStructInfo(params, ret, purity)

    def dim(self, node, defining: bool) -> tir.PrimExpr:
        """A dimension in an annotation: an int, a symbolic name ("n" or n), or an expression."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return tir.IntImm("int64", node.value)
        if isinstance(node, ast.UnaryOp) and node.op in ("-", "+") and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, int) and not isinstance(node.operand.value, bool):
            # `+1` too: read as TIR it would be an int32, which prints as T.int32(1).
            v = node.operand.value
            return tir.IntImm("int64", -v if node.op == "-" else v)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not node.value.isidentifier():
            return self._quoted_dim_expr(node, defining)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            var = self.sym_vars.get(node.value)
            if var is None:
                var = tir.Var("int64", node.value, self.ctx.span(node))
                self.sym_vars[node.value] = var
            return var
        if isinstance(node, ast.Name):
            var = self.sym_vars.get(node.id)
            if var is None:
                var = self._py_dim(node.id)
            if var is None:
                raise self.error(f"undefined symbolic dimension '{node.id}' (declare it with {node.id} = T.int64() or write \"{node.id}\")", node)
            return var
        if isinstance(node, ast.Call) and dotted_name(node.func) in ("T.int64", "T.int32") and len(node.args) == 1:
            v = literal(self.ctx, node.args[0])
            if not isinstance(v, int) or isinstance(v, bool):
                raise self.error(f"{dotted_name(node.func)}() in a shape takes an integer", node.args[0])
            return tir.IntImm("int64", v)
        if isinstance(node, ast.BinOp) and node.op in ("+", "-", "*", "//", "%"):
            a, b = self.dim(node.left, defining), self.dim(node.right, defining)
            cls = {"+": tir.Add, "-": tir.Sub, "*": tir.Mul, "//": tir.FloorDiv, "%": tir.FloorMod}[node.op]
            return cls("int64", _int64_constant(a), _int64_constant(b))
        if isinstance(node, (ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.IfExp)):
            return _int64_constant(self._tir_dim(node))
        raise self.error("expected a dimension: an integer or a symbolic name", node)

    def _tir_dim(self, node) -> tir.PrimExpr:
        """Any other expression of symbolic dims (``T.max(m, 20)``, ``N % 16 == 0``, a cast):
        read as TIR, with this function's symbolic variables in scope, by the TIR builder."""
        from .tir_builder import PrimFuncBuilder

        tb = PrimFuncBuilder(self.ctx)
        tb.scope.push()
        for name, var in self.sym_vars.items():
            tb.scope.define(name, var)
        return tb.expr(node)

    def _vdevice(self, node) -> str:
        """A tensor's virtual device in TVM's printed form ``"kind:index:scope"``: from
        ``"cuda"``, ``"cuda:1"`` (the second cuda vdevice), ``"cuda:1:global"``, or
        ``"vdevice:3"`` (the fourth entry of I.module_global_infos' "vdevice" list, named by its
        kind and its index among that kind's vdevices)."""
        text = literal(self.ctx, node)
        if not isinstance(text, str) or not text:
            raise self.error('vdevice must be a string such as "cuda:0" or "vdevice:1"', node)
        parts = text.split(":")
        if len(parts) > 3 or not all(parts) or (len(parts) > 1 and not parts[1].isdigit()):
            raise self.error(f"vdevice {text!r} is not of the form \"kind[:index[:scope]]\"", node)
        kind, index = parts[0], int(parts[1]) if len(parts) > 1 else 0
        scope = parts[2] if len(parts) > 2 else None
        if kind == "vdevice":
            devices = getattr(self.ctx, "global_infos", {}).get("vdevice", [])
            if index >= len(devices):
                raise self.error(f"vdevice {text!r}: the module's global infos have {len(devices)} vdevice(s)", node)
            dev = devices[index]
            kind = ir.vdevice_kind(dev)
            index = sum(1 for d in devices[:index] if ir.vdevice_kind(d) == kind)
            scope = scope or dev.memory_scope
        return f"{kind}:{index}:{scope or 'global'}"

    def _quoted_dim_expr(self, node, defining: bool) -> tir.PrimExpr:
        """``"n // 2 + 1"``: an expression of symbolic dims in quotes, as printers write it in a
        signature (where the names are not declared yet). Names in it are quoted names."""
        from .syntax import parse_syntax

        try:
            (stmt,), _ = parse_syntax(node.value + "\n", "<dimension>")
        except Exception:  # noqa: BLE001 - reported below at the string's place
            stmt = None
        if not isinstance(stmt, ast.ExprStmt):
            raise self.error(f"expected a dimension: {node.value!r} is neither a name nor an expression", node)
        expr = stmt.value
        for sub in ast.walk(expr):
            # Errors inside the string point at the string; a name in it is a symbolic dim,
            # introduced here if it is new (the quotes say so).
            sub.line, sub.col, sub.end_line, sub.end_col = node.line, node.col, node.end_line, node.end_col
            if isinstance(sub, ast.Name) and sub.id not in self.sym_vars and not _is_callee(sub, expr):
                self.sym_vars[sub.id] = tir.Var("int64", sub.id, self.ctx.span(node))
        return self.dim(expr, defining)

    def check_annotation(self, ann, inferred, node, what: str) -> None:
        problem = sinfo_conflict(ann, inferred)
        if problem:
            from ..printer import sinfo_text

            raise self.error(
                f"annotation of '{what}' contradicts its inferred struct info: {problem}",
                node,
                [f"inferred: {sinfo_text(inferred)}", f"annotated: {sinfo_text(ann)}"],
            )

    # ------------------------------------------------------------------ expressions
    def _declare_sym(self, name: str, dtype: str, node) -> None:
        """``n = T.int64()``: a symbolic variable (the one a quoted "n" already introduced,
        which is an int64 shape dimension: declaring it with another dtype is an error, as in
        TVM)."""
        known = self.sym_vars.get(name)
        if known is not None and known.dtype != dtype:
            raise self.error(f"'{name}' is a {known.dtype} dimension of the signature; it cannot be declared "
                             f"T.{dtype}()", node)
        self.sym_vars[name] = known or tir.Var(dtype, name)

    def bool_value(self, node):
        """``True``/``False`` (or ``T.bool(True)``-free spellings) as a bool primitive value,
        as TVM reads them in a Relax expression; None for any other node."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            flag = node.value
        elif isinstance(node, ast.Name) and node.id in ("True", "False") and self.scope.lookup(node.id) is None:
            flag = node.id == "True"
        else:
            return None
        e = tir.IntImm("bool", int(flag))
        return relax.PrimValue(e, relax.PrimStructInfo("bool", e))

    def expr(self, node) -> relax.Expr:
        flag = self.bool_value(node)
        if flag is not None:
            # A bare True/False in a Relax expression is a bool tensor constant, as TVM reads
            # it (R.prim_value(True) is the primitive value).
            import numpy as np

            array = np.array(bool(flag.value.value))
            return relax.Constant(array, const_sinfo(array))
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.List):
            # ``R.strided_slice(x, axes=[0, 1], ...)``: a list where a tuple of values is meant.
            node = ast.Tuple(node.elts, node.line, node.col, node.end_line, node.end_col)
        if isinstance(node, ast.Tuple):
            fields = [self.expr(e) for e in node.elts]
            return relax.Tuple(fields, relax.TupleStructInfo([relax.struct_info_of(f) for f in fields]))
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return relax.StringImm(node.value, relax.ObjectStructInfo())
        if isinstance(node, ast.UnaryOp) and node.op in ("-", "+") and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            # A negative number (the -1 of R.reshape(x, (3, -1))): a primitive value too.
            node = ast.Constant(literal(self.ctx, node), node.line, node.col, node.end_line, node.end_col)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            # A bare number is a primitive value, as R.prim_value(...) writes it.
            v = node.value
            e = tir.IntImm("int64", v) if isinstance(v, int) else tir.FloatImm("float64", v)
            return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return self._sym_arithmetic(node)
        raise self.error("unsupported expression in an R.function", node)

    def _sym_arithmetic(self, node) -> relax.Expr:
        """``a // 2`` of symbolic dims where a Relax value is meant (``R.reshape(x, (a // 2, b))``,
        ``if N % 16 == 0:``): the primitive value of that expression, as TVM reads it. On Relax
        values, an operator is the op TVM's Python operators call (``x + y`` is ``R.add(x, y)``)."""
        try:
            e = self.dim(node, False)
        except TVMScriptError as err:
            call = _operator_call(node)
            if call is not None:
                return self._call(call)
            raise self.error("unsupported expression in an R.function: arithmetic here may only use "
                             "symbolic dims (T.int64()) and numbers", node) from err
        return relax.PrimValue(e, relax.PrimStructInfo(e.dtype, e))

    def _name(self, node: ast.Name):
        value = self.scope.lookup(node.id)
        if isinstance(value, _Expired):
            raise self.error(
                f"dataflow variable '{node.id}' is used outside its dataflow block",
                node,
                [f"list it in R.output(...) at the end of the block to use it afterwards"],
            )
        if isinstance(value, relax.Var):
            return value
        if value is None and node.id in self.ctx.module_names:
            return self.ctx.module_names[node.id]
        if value is None and node.id in self.sym_vars:
            v = self.sym_vars[node.id]
            return relax.PrimValue(v, relax.PrimStructInfo(v.dtype, v))
        if value is None:
            found = self._py_expr(node.id)
            if found is not None:
                return found
        if node.id in ("meta", "metadata"):
            raise self.error(f"'{node.id}[...]' refers to a metadata section, which this file does not have", node)
        visible = [n for frame in self.scope.frames for n, v in frame.items() if isinstance(v, relax.Var)]
        raise self.error(f"undefined name '{node.id}'", node, did_you_mean(node.id, visible))

    def _py_dim(self, name: str):
        """A dimension named from the enclosing Python scope: an int, or a PrimExpr."""
        value = self.ctx.py_value(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return tir.IntImm("int64", value)
        if isinstance(value, tir.PrimExpr):
            return value
        return None

    def _py_shape(self, node, values) -> list:
        """``R.Tensor(shape, ...)`` with ``shape`` a tuple of the Python scope."""
        dims = []
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool):
                dims.append(tir.IntImm("int64", v))
            elif isinstance(v, tir.PrimExpr):
                dims.append(v)
            else:
                raise self.error(f"'{node.id}' is not a shape: it holds {v!r}", node)
        return dims

    def _py_expr(self, name: str):
        """A Relax value named from the enclosing Python scope: a number or PrimExpr as a
        primitive value, a GlobalVar as itself, a tuple of those as a tuple; None otherwise."""
        value = self.ctx.py_value(name)
        return _py_to_relax(value)

    def _attribute(self, node: ast.Attribute):
        if self.ctx.is_module_ref(node.value):
            if not isinstance(self.scope.lookup("cls"), _ClassRef) and "cls" not in self.ctx.module_names:
                if self.scope.lookup("cls") is None and not self.ctx.module_names:
                    raise self.error("'cls' refers to the module, but this function is not in an @I.ir_module", node.value)
            gv = self.ctx.module_names.get(node.attr)
            if gv is None:
                raise self.error(f"module has no function named '{node.attr}'", node)
            return gv
        raise self.error(f"unsupported expression '{dotted_name(node) or node.attr}'", node)

    def _subscript(self, node: ast.Subscript):
        inner = node.value
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id in ("meta", "metadata"):
            return self._metadata_constant(inner.value.id, inner.index, node)
        if isinstance(node.value, ast.Name) and node.value.id in ("meta", "metadata"):
            raise self.error(f"{node.value.id}[...] needs a kind and an index: metadata[\"{CONSTANT_KEY}\"][0]", node)
        return self.tuple_item(self.expr(node.value), node.index, node.value)

    def tuple_item(self, base, index_node, base_node):
        """``base[index]`` of a tuple value."""
        node = ast.Subscript(base_node, index_node, base_node.line, base_node.col,
                             index_node.end_line, index_node.end_col)
        index = literal(self.ctx, index_node)
        if not isinstance(index, int):
            raise self.error("a tuple index must be an integer", node.index)
        sinfo = relax.struct_info_of(base)
        if isinstance(sinfo, relax.TupleStructInfo):
            if not -len(sinfo.fields) <= index < len(sinfo.fields):
                raise self.error(f"tuple index {index} is out of range for a tuple of {len(sinfo.fields)}", node.index)
            if index < 0:
                index += len(sinfo.fields)
            return relax.TupleGetItem(base, index, sinfo.fields[index])
        if isinstance(sinfo, relax.ObjectStructInfo):
            return relax.TupleGetItem(base, index, relax.ObjectStructInfo())
        raise self.error("only tuples can be indexed in Relax", node.value)

    def _call(self, node: ast.Call):
        from .relax_calls import RELAX_CALLS

        name = dotted_name(node.func)
        handler = RELAX_CALLS.get(name) if name else None
        if handler is not None:
            return handler(self, node, name)
        number = typed_number(self.ctx, node)
        if number is not None:
            # ``T.float32(1.0)`` where a Relax value is expected: a primitive value, as TVM
            # prints one (``R.clip(x, T.float64(-1.5), T.float64(2.5))``, one_hot's values).
            return relax.PrimValue(number, relax.PrimStructInfo(number.dtype, number))
        if name and name.startswith("R."):
            from ..ir.op import find_op

            op = find_op(name)
            if op is None:
                from ..ir.op import all_ops
                from ..ir.op.api import HELPERS
                from .relax_calls import RELAX_CALLS, python_helper

                if name[2:] in HELPERS:
                    return python_helper(self, node, name, HELPERS[name[2:]])
                known = [o.script_name for o in all_ops().values()] + list(RELAX_CALLS) + [f"R.{h}" for h in HELPERS]
                raise self.error(f"unknown Relax function '{name}'", node.func, did_you_mean(name, known))
            return self._op_call(op, node, name)
        method = self._method_call(node)
        if method is not None:
            return self._call(method)
        callee = self.expr(node.func)
        args = [self.expr(a) for a in node.args]
        if node.keywords:
            raise self.error("calls of Relax functions take no keyword arguments", node.keywords[0])
        sinfo = relax.ObjectStructInfo()
        callee_sinfo = relax.struct_info_of(callee)
        if isinstance(callee_sinfo, relax.FuncStructInfo) and callee_sinfo.ret is not None:
            sinfo = callee_sinfo.ret  # a call of a closure or of a function-typed value
        if isinstance(callee, ir.GlobalVar):
            kind = self.ctx.module_kinds.get(callee.name_hint)
            if kind == "tir":
                sinfo = self._prim_func_result(callee.name_hint)
            ret = getattr(self.ctx, "relax_signatures", {}).get(callee.name_hint)
            if ret is not None:
                sinfo = ret
        return relax.Call(callee, args, {}, [], sinfo, self.ctx.span(node))

    def _method_call(self, node: ast.Call):
        """``A.astype("float16")``: a method of TVM's Relax values, as the syntax of the op
        call it makes (``R.astype(A, "float16")``); None for any other call."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _METHOD_OPS and isinstance(func.value, ast.Name)
                and isinstance(self.scope.lookup(func.value.id), relax.Var)):
            return None
        at = (func.line, func.col, func.end_line, func.end_col)
        op = ast.Attribute(ast.Name("R", *at), _METHOD_OPS[func.attr], *at)
        return ast.Call(op, [func.value] + list(node.args), node.keywords, node.line, node.col,
                        node.end_line, node.end_col)

    def _prim_func_result(self, name: str) -> relax.StructInfo:
        """What a direct call of a T.prim_func gives, as TVM types it: the primitive value its
        ``-> T.int64`` annotation names, else nothing (a void call, made for its effect on
        the buffers passed in)."""
        fdef = self.ctx.module_defs.get(name)
        ret = dotted_name(fdef.returns) if fdef is not None and fdef.returns is not None else None
        if ret and ret.startswith("T.") and ret[2:] in DTYPES:
            return relax.PrimStructInfo(ret[2:])
        return relax.TupleStructInfo([])

    def _metadata_constant(self, name: str, key_node, node: ast.Subscript):
        """``metadata["relax.expr.Constant"][i]`` (and older TVM's ``meta[relay.Constant][i]``):
        the i-th constant of the file's metadata section (see tvmscript/metadata.py)."""
        key, array = self._metadata_entry(name, key_node, node)
        if key == TENSOR_KEY:
            raise self.error(
                f'metadata["{TENSOR_KEY}"] holds the tensors of function attributes; a constant in '
                f'the body is metadata["{CONSTANT_KEY}"][i]',
                key_node,
            )
        return relax.Constant(array, const_sinfo(array))

    def _metadata_entry(self, name: str, key_node, node: ast.Subscript):
        """``(table name, entry)`` for a reference ``name[key][i]`` into the metadata section,
        with older TVM's names of the tables read as today's."""
        key = key_node.value if isinstance(key_node, ast.Constant) else dotted_name(key_node)
        if key in ("relay.Constant", "R.expr.Constant", "ir.GenericConst"):
            key = CONSTANT_KEY  # older and newer TVM's names for the same table
        elif key in TENSOR_ALIASES:
            key = TENSOR_KEY
        index = literal(self.ctx, node.index)
        table = self.ctx.metadata.get(key)
        if table is None:
            if not self.ctx.metadata:
                raise self.error(
                    f"{name}[...] refers to a metadata section (arrays stored at the end of the file), "
                    "which this file does not have",
                    node,
                )
            raise self.error(f"the metadata section has no '{key}' table", key_node)
        if not isinstance(index, int) or not 0 <= index < len(table):
            raise self.error(f"metadata['{key}'] has {len(table)} entries; there is no [{index}]", node.index)
        return key, table[index]

    def _func_attr_value(self, node):
        """The dict of ``R.func_attr({...})``: Python literals, where ``metadata["ffi.Tensor"][i]``
        stands for a tensor of the metadata section (the importers' ``"params"``)."""
        return literal(self.ctx, node, self._attr_tensor)

    def _attr_tensor(self, node):
        """A `tvms.nd` tensor of the metadata section, referenced in a function attribute."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.value, ast.Name) and node.value.value.id in ("meta", "metadata")):
            raise self.error("expected a literal value or a metadata[\"ffi.Tensor\"][i] reference", node)
        key, entry = self._metadata_entry(node.value.value.id, node.value.index, node)
        if key != TENSOR_KEY:
            raise self.error(
                f'a tensor in a function attribute is metadata["{TENSOR_KEY}"][i], not an entry of '
                f"the '{key}' table",
                node.value.index,
            )
        return entry

    def _attr_value(self, node):
        """An op attribute's value: a literal (`attr_literal`), or an index map written as
        ``lambda i: (i // 4, i % 4)`` or, as TVM prints it, ``T.index_map(lambda i: ...)``
        (``R.layout_transform``): an `IndexMap` of int64 variables whose body the TIR builder
        reads."""
        if isinstance(node, ast.Call) and dotted_name(node.func) == "T.index_map" and len(node.args) == 1:
            node = node.args[0]
        if not isinstance(node, ast.Lambda):
            return attr_literal(self.ctx, node)
        from ..ir.index_map import IndexMap
        from .tir_builder import PrimFuncBuilder

        tb = PrimFuncBuilder(self.ctx)
        tb.scope.push()
        params = [tir.Var("int64", p, self.ctx.span(node)) for p in node.params]
        for p in params:
            tb.scope.define(p.name, p)
        body = node.body.elts if isinstance(node.body, ast.Tuple) else [node.body]
        return IndexMap(params, [tb.expr(e) for e in body])

    def _op_call(self, op, node: ast.Call, name: str):
        from ..ir.op import OpError
        from ..ir.op.api import arg_sinfos, canonicalize_call, coerce_arg

        # Positional arguments bind in the order of TVM's Python function (what TVM's parser
        # calls): ``R.nn.pad(x, [1, 1], "reflect")`` gives pad_mode, printed after pad_value.
        params = list(op.py_signature or (list(op.args) + [a.name for a in op.attrs]))
        defaults = {a.name: _DEFAULT for a in op.params if a.optional}
        defaults.update({a.name: _DEFAULT for a in op.attrs})
        bound = bind_arguments(self.ctx, node, name, params, defaults)
        args = []
        skipped = None
        for spec in op.params:
            raw = bound[spec.name]
            if raw is _DEFAULT:
                skipped = spec
                continue
            if skipped is not None:
                raise self.error(f"{name}: '{spec.name}' is given but the optional '{skipped.name}' before it is not", raw)
            try:
                args.append(coerce_arg(spec, self.expr(raw), f"{name}: {spec.name}"))
            except OpError as err:
                raise self.error(err.message, raw) from None
        attrs = {}
        for a in op.attrs:
            raw = bound[a.name]
            value = a.default if raw is _DEFAULT else self._attr_value(raw)
            if a.convert is not None:
                try:
                    value = a.convert(value)
                except OpError as err:
                    raise self.error(f"{name}: {err.message}", raw if raw is not _DEFAULT else node) from None
            attrs[a.name] = value
        try:
            args, attrs = canonicalize_call(op, args, attrs)
            sinfo = op.infer(arg_sinfos(op, args), attrs)
        except OpError as err:
            where = bound.get(err.arg) if err.arg in bound and bound[err.arg] is not _DEFAULT else node
            raise self.error(f"{name}: {err.message}", where) from None
        return relax.Call(relax.Op(op.name), args, attrs, [], sinfo, self.ctx.span(node))


_DEFAULT = object()

_NESTED_HEADER = "# from tvm.script import relax as R"

# Methods of TVM's Relax values (relax/expr.py) and the ops they call.
_METHOD_OPS = {"astype": "astype"}

_SPECIAL_FLOATS = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def typed_number(ctx: Context, node):
    """The `tir.IntImm`/`tir.FloatImm` a typed literal ``T.float32(0.5)``, ``T.int64(3)`` or
    ``T.float64("-inf")`` stands for, as TVM prints numbers of a given dtype; None when
    ``node`` is not one. A number of the wrong kind (``T.int32(0.5)``) is an error."""
    if not isinstance(node, ast.Call) or node.keywords or len(node.args) not in (1, 2):
        return None
    name = dotted_name(node.func)
    if name in ("T.FloatImm", "T.IntImm", "tir.FloatImm", "tir.IntImm") and len(node.args) == 2 and not node.keywords:
        dtype, value = literal(ctx, node.args[0]), literal(ctx, node.args[1])  # T.FloatImm("float32", 0.1)
        if not isinstance(dtype, str) or not tir.is_valid_dtype(dtype) or not isinstance(value, (int, float)):
            raise ctx.error(f"{name} takes a dtype and a number", node)
        return tir.FloatImm(dtype, float(value)) if name.endswith("FloatImm") else tir.IntImm(dtype, int(value))
    if not name or not name.startswith("T.") or not tir.is_valid_dtype(name[2:]) or name[2:] == "bool" \
            or len(node.args) != 1:
        return None
    arg = node.args[0]
    literal_like = (isinstance(arg, ast.Constant) or (isinstance(arg, ast.Name) and arg.id in ("True", "False", "None"))
                    or (isinstance(arg, ast.UnaryOp) and isinstance(arg.operand, ast.Constant)))
    if not literal_like:
        return None  # T.int64(n): a cast of a symbolic value, not a typed literal
    dtype = name[2:]
    value = literal(ctx, arg)
    if isinstance(value, str) and tir.is_float(dtype) and value in _SPECIAL_FLOATS:
        value = _SPECIAL_FLOATS[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.error(f"{name}() takes a number here, not {value!r}", node.args[0])
    if tir.is_float(dtype):
        return tir.FloatImm(dtype, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise ctx.error(f"{name}() takes an integer, not {value!r}", node.args[0])
    return tir.IntImm(dtype, int(value))


def attr_literal(ctx: Context, node):
    """An op attribute's value: a Python literal, where TVM's typed numbers
    (``scale=T.float32(0.5)``, as TVM 0.27 prints float attributes) stand for their value."""
    number = typed_number(ctx, node)
    if number is not None:
        return number.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [attr_literal(ctx, e) for e in node.elts]
    return literal(ctx, node)


class _ClassRef:
    """The value of ``cls = Module``: lets ``cls.f`` name module functions."""


def _typed_int_constant(ctx, node):
    """``T.int32(5)`` as an ``R.Prim(value=...)`` keeps its dtype (a dimension would make it an
    int64): the struct info of ``R.prim_value(T.int32(5))``, as the printer writes it. None when
    ``node`` is not such a constant."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    name = dotted_name(node.func) or ""
    dtype = name[2:] if name.startswith("T.") else ""
    if dtype in ("int64", "bool") or dtype not in DTYPES or not tir.is_int(dtype):
        return None
    v = literal(ctx, node.args[0], lambda n: None)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return tir.IntImm(dtype, v)


def _int64_constant(e: tir.PrimExpr) -> tir.PrimExpr:
    """A dimension's integer constant as int64. Read as TIR (``- -1``, ``2**3``) a constant is
    an int32, which prints as ``T.int32(1)``, and that, in a dimension, reads back as an int64:
    the text would not round-trip."""
    if isinstance(e, tir.IntImm) and e.dtype in ("int8", "int16", "int32"):
        return tir.IntImm("int64", e.value)
    return e


def _binding_counts(stmts: list, names: set) -> dict:
    """How many statements of a dataflow block bind each of ``names`` (``x = ...``,
    ``x: ann = ...``, ``x, y = ...``), so that a name bound twice exports only its last value."""
    counts: dict = {}
    for st in stmts:
        if not isinstance(st, (ast.Assign, ast.AnnAssign)):
            continue
        targets = st.target.elts if isinstance(st.target, ast.Tuple) else [st.target]
        for t in targets:
            if isinstance(t, ast.Name) and t.id in names:
                counts[t.id] = counts.get(t.id, 0) + 1
    return counts


def _is_call_stmt(s, name: str) -> bool:
    return isinstance(s, ast.ExprStmt) and isinstance(s.value, ast.Call) and dotted_name(s.value.func) == name


# ----------------------------------------------------------------------------- struct info relations


def sinfo_conflict(ann, inferred) -> str | None:
    """Why an annotation cannot describe a value of the inferred struct info (None if it can)."""
    from ..ir.op.common import dim_equal

    if isinstance(inferred, relax.ObjectStructInfo) or isinstance(ann, relax.ObjectStructInfo):
        return None
    if type(ann) is not type(inferred):
        return f"{_kind(ann)} vs {_kind(inferred)}"
    if isinstance(ann, relax.TensorStructInfo):
        if ann.dtype and inferred.dtype and ann.dtype != inferred.dtype:
            return f"dtype {ann.dtype} vs {inferred.dtype}"
        if ann.ndim >= 0 and inferred.ndim >= 0 and ann.ndim != inferred.ndim:
            return f"rank {ann.ndim} vs {inferred.ndim}"
        if ann.shape is not None and inferred.shape is not None:
            for i, (a, b) in enumerate(zip(ann.shape, inferred.shape)):
                if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm) and a.value != b.value:
                    return f"dimension {i} is {a.value} vs {b.value}"
        return None
    if isinstance(ann, relax.TupleStructInfo):
        if len(ann.fields) != len(inferred.fields):
            return f"a tuple of {len(ann.fields)} vs a tuple of {len(inferred.fields)}"
        for a, b in zip(ann.fields, inferred.fields):
            p = sinfo_conflict(a, b)
            if p:
                return p
        return None
    if isinstance(ann, relax.ShapeStructInfo):
        if ann.ndim >= 0 and inferred.ndim >= 0 and ann.ndim != inferred.ndim:
            return f"rank {ann.ndim} vs {inferred.ndim}"
        return None
    if isinstance(ann, relax.PrimStructInfo):
        if ann.dtype != inferred.dtype:
            return f"dtype {ann.dtype} vs {inferred.dtype}"
    return None


# TVM's Relax expressions overload Python's operators with these ops (relax/expr.py).
_BINARY_OPS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "//": "floor_divide",
               "**": "power", "%": "floor_mod", ">": "greater", "<": "less", ">=": "greater_equal",
               "<=": "less_equal"}
_UNARY_OPS = {"-": "negative"}


def _operator_call(node):
    """``x + y`` as the syntax of the call ``R.add(x, y)`` it stands for; None if the
    operator has no Relax op."""
    if isinstance(node, ast.BinOp):
        op, args = _BINARY_OPS.get(node.op), [node.left, node.right]
    elif isinstance(node, ast.UnaryOp):
        op, args = _UNARY_OPS.get(node.op), [node.operand]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, args = _BINARY_OPS.get(node.ops[0]), [node.left, node.comparators[0]]
    else:
        return None
    if op is None:
        return None
    at = (node.line, node.col, node.end_line, node.end_col)
    func = ast.Attribute(ast.Name("R", *at), op, *at)
    return ast.Call(func, args, [], *at)


_META_VARS = ("I.meta_var", "T.meta_var", "R.meta_var")


def _is_meta_var(s) -> bool:
    return (isinstance(s, ast.Assign) and isinstance(s.target, ast.Name) and isinstance(s.value, ast.Call)
            and dotted_name(s.value.func) in _META_VARS and len(s.value.args) == 1)


def _inline_meta_vars(body: list) -> None:
    """``scale = I.meta_var(T.FloatImm("float32", 0.1))`` names a value at parse time, not a
    Relax variable (TVM's meta_var): its uses below read the expression itself, and the
    statement goes away."""
    metas: dict = {}
    kept = []
    for s in body:
        for node in ast.walk(s):
            for cls in type(node).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    value = getattr(node, slot, None)
                    if isinstance(value, ast.Name) and value.id in metas:
                        setattr(node, slot, metas[value.id])
                    elif isinstance(value, list):
                        value[:] = [metas[v.id] if isinstance(v, ast.Name) and v.id in metas else v for v in value]
        if _is_meta_var(s):
            metas[s.target.id] = s.value.args[0]
        else:
            kept.append(s)
    body[:] = kept


def _is_number(node) -> bool:
    """A bare number (possibly negated), whose dtype an annotation may choose."""
    if isinstance(node, ast.UnaryOp) and node.op == "-":
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _is_callee(name: ast.Name, root) -> bool:
    """Whether ``name`` is the ``T`` of a called ``T.max`` (not a dimension) in ``root``."""
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(root))


def _is_void(sinfo) -> bool:
    """The struct info of a call made for its effect (``R.print``): an empty tuple."""
    return isinstance(sinfo, relax.TupleStructInfo) and not sinfo.fields


def _kind(s) -> str:
    return {
        relax.TensorStructInfo: "a tensor", relax.TupleStructInfo: "a tuple", relax.ShapeStructInfo: "a shape",
        relax.PrimStructInfo: "a prim value", relax.FuncStructInfo: "a function",
    }.get(type(s), "an object")


def unify_sinfo(a, b):
    """The most specific struct info describing both ``a`` and ``b``."""
    from ..ir.structural import StructuralEqual

    if StructuralEqual().equal(a, b):
        return a
    if isinstance(a, relax.TensorStructInfo) and isinstance(b, relax.TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else ""
        ndim = a.ndim if a.ndim == b.ndim else -1
        return relax.TensorStructInfo(None, dtype, ndim)
    return relax.ObjectStructInfo()


def const_sinfo(array) -> relax.TensorStructInfo:
    return relax.TensorStructInfo([tir.IntImm("int64", d) for d in array.shape], str(array.dtype))
