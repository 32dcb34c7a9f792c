"""Syntax tree to Relax: builds a `relax.Function` from an ``@R.function`` definition.

`RelaxFunctionBuilder` builds the function (its parameters, its return annotation, nested
``@R.function`` closures); the rest is grouped by what it builds, one module each:

- relax_bindings.py: the body (binding blocks, ``with R.dataflow():``, ``R.output``), each
  statement (`RelaxBindings.stmt`) and the binding it makes, ``if``/``else``, and the normal form
  expressions are put in as they are bound;
- relax_sinfo.py: struct info annotations (``R.Tensor``...), their dimensions and symbolic
  variables, and whether an annotation contradicts the inferred struct info;
- relax_expressions.py: expressions (`RelaxExpressions.expr`), ops and other calls; the ``R.*``
  calls that are not ops dispatch through `RELAX_CALLS` (relax_calls.py).

Bindings get their struct info by inference (ops through the op registry in
`tvmscript.ir.op`, `call_tir` from its ``out_sinfo``); an annotation the user wrote is
checked against the inferred struct info and then kept.
"""

from __future__ import annotations

from ..ir import relax, tir
from ..diagnostics import TVMScriptError
from . import ast
from .arguments import dotted_name, literal
from .comments import comments_of, merge_comments
from .context import Context, Scope
from .relax_bindings import RelaxBindings
from .relax_expressions import RelaxExpressions
from .relax_sinfo import RelaxStructInfo


class RelaxFunctionBuilder(RelaxBindings, RelaxStructInfo, RelaxExpressions):
    """Builds one `relax.Function`: the function here, its body, struct info and
    expressions in the modules that hold them (see the module docstring)."""

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


_NESTED_HEADER = "# from tvm.script import relax as R"
