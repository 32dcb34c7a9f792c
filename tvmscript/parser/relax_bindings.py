"""Relax bodies: a function's sequence of binding blocks, dataflow blocks (``with R.dataflow():``
and ``R.output``), statements and the bindings they make (``x = ...``, ``x: ann = ...``,
``R.match_cast``, ``if``/``else``), and the normal form expressions are put in as they are bound.

Dataflow blocks are scoped: a variable bound inside ``with R.dataflow():`` and not listed in
``R.output`` does not exist after it (`Expired`). A nested call becomes a binding of its own,
named as TVM names it (see "normalization" below), so that a file prints back as TVM prints it.
"""

from __future__ import annotations

from .. import ir
from ..ir import relax, tir
from . import ast
from .arguments import bind_arguments, dotted_name, split_declarations
from .comments import FUNC_ATTR, comments_of, loose_comments, merge_comments, take_comments
from .relax_sinfo import unify_sinfo
from .tir_names import DTYPE_NAMES


class Expired:
    """Marks a dataflow variable whose block has ended."""

    __slots__ = ("var",)

    def __init__(self, var) -> None:
        self.var = var


class ClassRef:
    """The value of ``cls = Module``: lets ``cls.f`` name module functions."""


class RelaxBindings:
    """The bodies, bindings and dataflow blocks of `RelaxFunctionBuilder` (relax_builder.py)."""

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
                self.scope.define(name, Expired(value))
            else:
                self.scope.define(name, value)
        block = relax.DataflowBlock(bindings, outputs)
        # The printer looks the R.output line's comments up by the block.
        merge_comments(self.comments, ("output", block), self.comments.pop(output_key, None))
        return block

    # ------------------------------------------------------------------ statements
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
                self.scope.define("cls", ClassRef())
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


def _is_sym_declaration(node) -> bool:
    """``T.int64()``: a symbolic variable declaration."""
    if not (isinstance(node, ast.Call) and not node.args and not node.keywords):
        return False
    callee = dotted_name(node.func)
    return bool(callee) and callee.startswith("T.") and callee[2:] in DTYPE_NAMES


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


def _is_number(node) -> bool:
    """A bare number (possibly negated), whose dtype an annotation may choose."""
    if isinstance(node, ast.UnaryOp) and node.op == "-":
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _is_void(sinfo) -> bool:
    """The struct info of a call made for its effect (``R.print``): an empty tuple."""
    return isinstance(sinfo, relax.TupleStructInfo) and not sinfo.fields
