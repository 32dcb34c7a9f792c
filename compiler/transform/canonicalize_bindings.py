"""CanonicalizeBindings: trivial bindings removed, so every value is used through the variable
that computes it, as TVM's ``relax.transform.CanonicalizeBindings()`` does.

Why: importers and decompositions leave chains of renamings (``y = x``), reads of a field of a
tuple built just before (``bn = (out, mean, var); gv = bn[0]``) and match casts that check
nothing new. Each of them is a binding FuseOps cannot see through: a ``TupleGetItem`` between a
convolution and its ReLU stops the ReLU being fused into the convolution's kernel. Removing them
leaves the graph the later passes pattern-match on.

What it does, in TVM's two steps, planned over a whole function before anything changes:

- A binding is *trivial* when its value is a variable (``y = x``), a field of a tuple literal
  bound in scope (``y = t[0]`` with ``t = (x, w)``: the field, when it is a variable), a tuple
  rebuilt from every field of a tuple variable in order (``(t[0], t[1])``: ``t``), or a match
  cast whose struct info equals its value's. Its uses read the variable it is bound to (through
  chains of trivial bindings) and the binding goes.
- Uses of a variable bound to a constant read the constant (``n = R.const(1)``; ``return n``
  returns the constant); the binding stays for DeadCodeElimination.
- DataflowVars may not escape their dataflow block. For ``var = dataflow_var`` where ``var`` is
  used after the block, the DataflowVar's own binding is renamed to ``var`` instead.
- A non-dataflow variable defined in a dataflow block and used only inside that block becomes a
  DataflowVar (it leaves the block's ``R.output``).
- Finally, per dataflow block, an output bound to a DataflowVar that only feeds that output takes
  the DataflowVar's value directly.

Nested functions are canonicalized with their free variables counted as used outside their
block. Not done (TVM's ``CanonicalizeTIRVariables`` half): symbolic dims inferred from match
casts are not substituted, and struct info is not re-inferred when a replacement would refine it.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.structural import structural_equal

from ._common import copy_module, replace_fields, substitute_relax, walk_relax


class CanonicalizeBindings:
    """``IRModule -> IRModule``: the Relax functions with their trivial bindings removed."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        new = copy_module(mod)
        for gv, func in list(new.functions.items()):
            if isinstance(func, relax.Function):
                new[gv] = canonicalize_function(func)
        return new

    def __repr__(self) -> str:
        return "CanonicalizeBindings()"


def canonicalize_function(func: relax.Function) -> relax.Function:
    """``func`` with its bindings canonicalized (the same object when nothing changes)."""
    plan = _Planner().plan(func)
    if plan.is_empty():
        return func
    return _Applier(plan).function(func)


# ---------------------------------------------------------------- planning


class _Plan:
    def __init__(self) -> None:
        self.replace_usage: dict = {}    # var -> the var its uses read
        self.replace_binding: dict = {}  # var -> the var its binding defines instead
        self.remove: set = set()         # vars whose bindings go
        self.inline_constant: dict = {}  # var -> the constant its uses read

    def is_empty(self) -> bool:
        return not (self.replace_usage or self.replace_binding or self.remove or self.inline_constant)

    def usage(self, var):
        """What a use of ``var`` becomes: a variable, or a constant."""
        while var in self.replace_usage:
            var = self.replace_usage[var]
        return self.inline_constant.get(var, var)

    def definition(self, var):
        while var in self.replace_binding:
            var = self.replace_binding[var]
        return var


class _Planner:
    """One walk over a function: which bindings are trivial, where each variable is defined and
    whether it is used outside the dataflow block that defines it."""

    def __init__(self) -> None:
        self.block = None             # the binding block being walked
        self.def_block: dict = {}
        self.known: dict = {}         # var -> its bound value
        self.trivial: dict = {}       # var -> the var it is a trivial binding of
        self.constants: dict = {}
        self.in_dataflow: list = []   # vars defined in a dataflow block, in order
        self.escaping: set = set()    # vars used outside their home dataflow block

    def plan(self, func: relax.Function) -> _Plan:
        self.function(func, top=True)
        plan = _Plan()
        for var in self.in_dataflow:
            if not isinstance(var, relax.DataflowVar) and var not in self.escaping:
                dvar = relax.DataflowVar(var.name_hint, var.struct_info, var.span)
                plan.replace_binding[var] = dvar
                plan.replace_usage[var] = dvar
        plan.inline_constant = dict(self.constants)
        for var, to in self.trivial.items():
            while to in self.trivial:
                to = self.trivial[to]
            to = plan.definition(to)
            dataflow_to = isinstance(to, relax.DataflowVar)
            if isinstance(var, relax.DataflowVar) or not dataflow_to or var not in self.escaping:
                plan.replace_usage[var] = to
            else:  # var = dataflow_var, var used after the block: the DataflowVar becomes var
                plan.replace_binding[to] = var
                plan.replace_usage[to] = var
            plan.remove.add(var)
        return plan

    def function(self, func: relax.Function, top: bool = False) -> None:
        if not top:
            for var in _free_vars(func):
                self.escaping.add(var)
        saved, self.block = self.block, None
        self.seq(func.body)
        self.block = saved

    def seq(self, seq: relax.SeqExpr) -> None:
        saved = self.block
        for block in seq.blocks:
            self.block = block
            for binding in block.bindings:
                self.binding(binding)
        self.block = None
        self.uses(seq.body)
        self.block = saved

    def binding(self, binding) -> None:
        var, value = binding.var, binding.value
        same_sinfo = (not isinstance(binding, relax.MatchCast)
                      or structural_equal(var.struct_info, relax.struct_info_of(value)))
        value = self.rewrapped_tuple(self.unwrap_tuple_item(value))
        if isinstance(value, relax.Var) and same_sinfo:
            self.trivial[var] = value
        if isinstance(value, relax.Constant):
            self.constants[var] = value
        self.known[var] = value
        self.def_block[var] = self.block
        if isinstance(self.block, relax.DataflowBlock):
            self.in_dataflow.append(var)
        self.uses(binding.value)

    def unwrap_tuple_item(self, value):
        """The field ``t[i]`` reads when ``t`` is (bound to) a tuple literal, else ``value``."""
        if not isinstance(value, relax.TupleGetItem):
            return value
        tup = value.tuple_value
        while isinstance(tup, relax.Var) and tup in self.known:
            tup = self.known[tup]
        return tup.fields[value.index] if isinstance(tup, relax.Tuple) else value

    def rewrapped_tuple(self, value):
        """``t`` for ``(t[0], t[1], ..., t[n-1])`` built from every field of ``t`` in order
        (through the variables bound to the reads), else ``value``."""
        if not isinstance(value, relax.Tuple) or not value.fields:
            return value
        source = None
        for i, field in enumerate(value.fields):
            read = self.known.get(field) if isinstance(field, relax.Var) else field
            if not isinstance(read, relax.TupleGetItem) or read.index != i:
                return value
            if source is None:
                source = read.tuple_value
            if read.tuple_value is not source or not isinstance(source, relax.Var):
                return value
        sinfo = relax.struct_info_of(source)
        whole = isinstance(sinfo, relax.TupleStructInfo) and len(sinfo.fields) == len(value.fields)
        return source if whole else value

    def uses(self, expr) -> None:
        """Records the variables ``expr`` reads; nested functions and branches are walked too."""
        if isinstance(expr, relax.Function):
            self.function(expr)
            return
        if isinstance(expr, relax.If):
            self.uses(expr.cond)
            self.seq(expr.true_branch)
            self.seq(expr.false_branch)
            return
        if isinstance(expr, relax.SeqExpr):
            self.seq(expr)
            return

        def visit(n):
            if isinstance(n, relax.Var):
                self.use(n)

        if isinstance(expr, relax.Var):
            self.use(expr)
        else:
            _walk_shallow(expr, visit, self.uses)

    def use(self, var) -> None:
        inside = isinstance(self.block, relax.DataflowBlock)
        if not inside or (var in self.def_block and self.def_block[var] is not self.block):
            self.escaping.add(var)


def _walk_shallow(expr, visit, nested) -> None:
    """``walk_relax`` over ``expr``, handing nested functions, branches and sequences to
    ``nested`` instead of entering them (they have blocks of their own)."""
    def on(n):
        if n is not expr and isinstance(n, (relax.Function, relax.If, relax.SeqExpr)):
            nested(n)
            return False
        visit(n)
        return None

    walk_relax(expr, on)


def _free_vars(func: relax.Function) -> list:
    """Relax variables a function reads but neither takes nor binds."""
    bound = set(func.params)
    used: dict = {}

    def visit(n):
        if isinstance(n, relax.Function):
            bound.update(n.params)
        elif isinstance(n, relax.SeqExpr):
            for block in n.blocks:
                bound.update(b.var for b in block.bindings)
        elif isinstance(n, relax.Var):
            used.setdefault(n, None)

    walk_relax(func.body, visit)
    return [v for v in used if v not in bound]


# ---------------------------------------------------------------- applying


class _Applier:
    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def function(self, func: relax.Function) -> relax.Function:
        return replace_fields(func, body=self.seq(func.body))

    def seq(self, seq: relax.SeqExpr) -> relax.SeqExpr:
        blocks = [self.block(b) for b in seq.blocks]
        blocks = [b for b in blocks if b.bindings]
        return replace_fields(seq, blocks=blocks, body=self.expr(seq.body))

    def block(self, block: relax.BindingBlock) -> relax.BindingBlock:
        bindings = [self.binding(b) for b in block.bindings if b.var not in self.plan.remove]
        if not isinstance(block, relax.DataflowBlock):
            return replace_fields(block, bindings=bindings)
        bindings = _forward_output_definitions(bindings)
        defined = [b.var for b in bindings if not isinstance(b.var, relax.DataflowVar)]
        kept = [v for v in block.outputs if v in defined]  # in the order R.output gave them
        return replace_fields(block, bindings=bindings, outputs=kept + [v for v in defined if v not in kept])

    def binding(self, binding):
        return replace_fields(binding, var=self.plan.definition(binding.var), value=self.expr(binding.value))

    def expr(self, expr):
        if isinstance(expr, relax.Var):
            return self.plan.usage(expr)
        if isinstance(expr, relax.Function):
            return replace_fields(expr, body=self.seq(expr.body))
        if isinstance(expr, relax.If):
            return replace_fields(expr, cond=self.expr(expr.cond), true_branch=self.seq(expr.true_branch),
                                  false_branch=self.seq(expr.false_branch))
        if isinstance(expr, relax.SeqExpr):
            return self.seq(expr)
        var_map = {}

        def visit(n):
            if isinstance(n, relax.Var):
                new = self.plan.usage(n)
                if new is not n:
                    var_map[n] = new

        _walk_shallow(expr, visit, lambda nested: None)
        return substitute_relax(expr, var_map) if var_map else expr


def _forward_output_definitions(bindings: list) -> list:
    """TVM's last step on a dataflow block: ``lv = value; gv = lv`` where ``lv`` is read by
    nothing else becomes ``gv = value``."""
    reads: dict = {}
    for b in bindings:
        for v in _vars_read(b.value):
            reads[v] = reads.get(v, 0) + 1
    values = {b.var: b.value for b in bindings}
    forwarded = {}
    for b in bindings:
        value = b.value
        if (not isinstance(b.var, relax.DataflowVar) and isinstance(value, relax.DataflowVar)
                and reads.get(value) == 1 and value in values):
            forwarded[value] = b
    if not forwarded:
        return bindings
    out = []
    for b in bindings:
        if b.var in forwarded:
            continue
        if isinstance(b.value, relax.DataflowVar) and b.value in forwarded and forwarded[b.value] is b:
            b = replace_fields(b, value=values[b.value])
        out.append(b)
    return out


def _vars_read(expr) -> list:
    found = []
    walk_relax(expr, lambda n: found.append(n) if isinstance(n, relax.Var) else None)
    return found
