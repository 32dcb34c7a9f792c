"""Well-formedness of IR: the rules every module must keep, whoever built it.

The parser already refuses programs that break these rules; this check is for IR built or
rewritten in Python (BlockBuilder, passes) and backs ``tvms check``. It verifies that every
variable is defined before it is used and in scope (dataflow variables only inside their
block), that global functions called exist and are of the right kind, and that every buffer a
TensorIR function touches is a parameter or allocated in an enclosing block.
"""

from __future__ import annotations

from . import ir, relax, tir
from .diagnostics import TVMScriptError
from .tir_visitor import TIRVisitor, vars_in


def check_well_formed(node) -> None:
    """Raise TVMScriptError naming the first problem found."""
    if isinstance(node, ir.IRModule):
        for gv, func in node.functions.items():
            _check_function(func, gv.name_hint, node)
    else:
        _check_function(node, "main", None)


def _check_function(func, name: str, mod) -> None:
    if isinstance(func, tir.PrimFunc):
        _PrimFuncChecker(func, name).run()
    elif isinstance(func, relax.Function):
        _RelaxChecker(func, name, mod).run()


def _fail(message: str, func) -> TVMScriptError:
    return TVMScriptError(message, getattr(func, "span", None))


class _RelaxChecker:
    def __init__(self, func: relax.Function, name: str, mod) -> None:
        self.func, self.name, self.mod = func, name, mod
        self.defined: set = set()

    def run(self) -> None:
        self.defined.update(self.func.params)
        self.seq(self.func.body)

    def seq(self, seq: relax.SeqExpr) -> None:
        for block in seq.blocks:
            local = []
            for b in block.bindings:
                self.expr(b.value)
                if isinstance(b.var, relax.DataflowVar) and not isinstance(block, relax.DataflowBlock):
                    raise _fail(f"in '{self.name}': dataflow variable '{b.var.name_hint}' bound outside a dataflow block", self.func)
                self.defined.add(b.var)
                local.append(b.var)
            if isinstance(block, relax.DataflowBlock):
                for v in local:
                    if isinstance(v, relax.DataflowVar):
                        self.defined.discard(v)
        self.expr(seq.body)

    def expr(self, e) -> None:
        if isinstance(e, relax.Var):
            if e not in self.defined:
                what = "dataflow variable" if isinstance(e, relax.DataflowVar) else "variable"
                raise _fail(f"in '{self.name}': {what} '{e.name_hint}' is used where it is not defined", self.func)
        elif isinstance(e, ir.GlobalVar):
            if self.mod is not None and e.name_hint not in self.mod:
                raise _fail(f"in '{self.name}': call to missing function '{e.name_hint}'", self.func)
        elif isinstance(e, relax.Call):
            if isinstance(e.op, relax.Op) and e.op.name == "relax.call_tir" and self.mod is not None:
                callee = e.args[0]
                if isinstance(callee, ir.GlobalVar):
                    if callee.name_hint not in self.mod:
                        raise _fail(f"in '{self.name}': call_tir to missing function '{callee.name_hint}'", self.func)
                    if not isinstance(self.mod[callee.name_hint], tir.PrimFunc):
                        raise _fail(f"in '{self.name}': call_tir to '{callee.name_hint}', which is not a T.prim_func", self.func)
            if not isinstance(e.op, relax.Op):
                self.expr(e.op)
            for a in e.args:
                self.expr(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                self.expr(f)
        elif isinstance(e, relax.TupleGetItem):
            self.expr(e.tuple_value)
        elif isinstance(e, relax.If):
            self.expr(e.cond)
            saved = set(self.defined)
            self.seq(e.true_branch)
            self.defined = set(saved)
            self.seq(e.false_branch)
            self.defined = saved


class _PrimFuncChecker:
    def __init__(self, func: tir.PrimFunc, name: str) -> None:
        self.func, self.name = func, name
        self.buffers: set = set(func.buffer_map.values())
        self.vars: set = set(func.params)
        for buf in func.buffer_map.values():
            self.vars.update(_free_vars(buf.shape))

    def run(self) -> None:
        self.stmt(self.func.body)

    def stmt(self, s) -> None:
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, tir.BufferStore):
            self.buffer(s.buffer)
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif isinstance(s, tir.For):
            self.expr(s.min)
            self.expr(s.extent)
            self.vars.add(s.loop_var)
            self.stmt(s.body)
            self.vars.discard(s.loop_var)
        elif isinstance(s, tir.BlockRealize):
            for v in s.iter_values:
                self.expr(v)
            block = s.block
            added_vars = [iv.var for iv in block.iter_vars]
            self.vars.update(added_vars)
            added = [b for b in block.alloc_buffers if b not in self.buffers]
            for b in added:
                self.vars.update(_free_vars(b.shape))
            self.buffers.update(added)
            for r in list(block.reads) + list(block.writes):
                self.buffer(r.buffer)
            if block.init is not None:
                self.stmt(block.init)
            self.stmt(block.body)
            self.buffers.difference_update(added)
            self.vars.difference_update(added_vars)
        elif isinstance(s, tir.IfThenElse):
            self.expr(s.condition)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, tir.LetStmt):
            self.expr(s.value)
            self.vars.add(s.var)
            self.stmt(s.body)
        elif isinstance(s, (tir.While,)):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.AssertStmt):
            self.expr(s.condition)
            self.stmt(s.body)
        elif isinstance(s, tir.Evaluate):
            self.expr(s.value)

    def buffer(self, buf) -> None:
        if buf not in self.buffers:
            raise _fail(f"in '{self.name}': buffer '{buf.name}' is used outside the scope that defines it", self.func)

    def expr(self, e) -> None:
        _UseChecker(self).visit(e)


class _UseChecker(TIRVisitor):
    """Every variable an expression uses is defined, every buffer it loads is in scope."""

    def __init__(self, checker: _PrimFuncChecker) -> None:
        self.checker = checker

    def visit_Var(self, v) -> None:
        if v not in self.checker.vars:
            raise _fail(f"in '{self.checker.name}': variable '{v.name}' is used where it is not defined", self.checker.func)

    def visit_BufferLoad(self, e) -> None:
        self.checker.buffer(e.buffer)
        self.generic_visit(e)


def _free_vars(exprs) -> set:
    return set(vars_in(exprs))
