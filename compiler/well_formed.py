"""Well-formedness of IR: the rules every module must keep, whoever built it.

The parser already refuses programs that break these rules; this check is for IR built or
rewritten in Python (BlockBuilder, passes) and backs ``tvms check``. It verifies that every
variable is defined before it is used and in scope (dataflow variables only inside their
block), that global functions called exist and are of the right kind, and that every buffer a
TensorIR function touches is a parameter or allocated in an enclosing block.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.diagnostics import TVMScriptError
from tvmscript.ir import relax, tir
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in


def check_well_formed(node) -> None:
    """Raise TVMScriptError naming the first problem found."""
    errors = well_formed_errors(node, max_errors=1)
    if errors:
        raise errors[0]


def well_formed_errors(node, max_errors: int | None = None) -> list[TVMScriptError]:
    """The problems found, the first of each function (a function's later problems often follow
    from its first, while each function's first is independent of the others'), in source order,
    at most ``max_errors`` of them."""
    if isinstance(node, ir.IRModule):
        funcs = [(gv.name_hint, func, node) for gv, func in node.functions.items()]
    else:
        funcs = [("main", node, None)]
    errors = []
    for name, func, mod in funcs:
        try:
            _check_function(func, name, mod)
        except TVMScriptError as err:
            errors.append(err)
    errors.sort(key=_position)
    return errors if max_errors is None else errors[:max_errors]


def _position(err: TVMScriptError) -> tuple:
    span = err.span
    return (0, span.line, span.col) if span is not None else (1, 0, 0)


def _check_function(func, name: str, mod) -> None:
    _check_linkage(func, name)
    if isinstance(func, tir.PrimFunc):
        _PrimFuncChecker(func, name).run()
    elif isinstance(func, relax.Function):
        _RelaxChecker(func, name, mod).run()


def _check_linkage(func, name: str) -> None:
    """A private function is not visible outside its module, so it may not name the symbol it
    would be exported under (TVM refuses the pair as contradictory)."""
    attrs = getattr(func, "attrs", None) or {}
    if getattr(func, "private", False) and "global_symbol" in attrs:
        raise _fail(f"function '{name}' is private but sets global_symbol to {str(attrs['global_symbol'])!r}: "
                    "a private function has no global symbol; drop private=True or the attribute", func)


def return_annotation_problem(func: relax.Function) -> str | None:
    """Why ``func``'s declared return cannot describe what its body returns (None if it can).
    The parser takes a return annotation as written, as TVM does; `tvms check` and the build
    report a contradiction, so a wrong annotation is never silently trusted."""
    from tvmscript.parser.relax_sinfo import sinfo_conflict
    from tvmscript.printer import sinfo_text

    ret, body = func.ret_struct_info, relax.struct_info_of(func.body.body)
    problem = sinfo_conflict(ret, body) if ret is not None and body is not None else None
    if not problem:
        return None
    return (f"the return annotation {sinfo_text(ret)} contradicts the struct info of the value returned, "
            f"{sinfo_text(body)}: {problem}")


def _fail(message: str, func) -> TVMScriptError:
    return TVMScriptError(message, getattr(func, "span", None))


class _RelaxChecker:
    def __init__(self, func: relax.Function, name: str, mod) -> None:
        self.func, self.name, self.mod = func, name, mod
        self.defined: set = set()
        self.closed: set = set()  # dataflow variables of blocks already ended

    def run(self) -> None:
        self.defined.update(self.func.params)
        self.seq(self.func.body)
        self.return_annotation()

    def return_annotation(self) -> None:
        problem = return_annotation_problem(self.func)
        if problem:
            raise _fail(f"in '{self.name}': {problem}", self.func)

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
                        self.closed.add(v)
        self.expr(seq.body)

    def expr(self, e) -> None:
        if isinstance(e, relax.Var):
            if e in self.closed:  # TVM's "DataflowVar lv is used outside DataflowBlock"
                raise _fail(f"in '{self.name}': dataflow variable '{e.name_hint}' is used outside its dataflow "
                            "block; use the variable R.output (bb.emit_output) made of it", self.func)
            if e not in self.defined:
                what = "dataflow variable" if isinstance(e, relax.DataflowVar) else "variable"
                raise _fail(f"in '{self.name}': {what} '{e.name_hint}' is used where it is not defined", self.func)
        elif isinstance(e, ir.GlobalVar):
            if self.mod is not None and e.name_hint not in self.mod:
                raise _fail(f"in '{self.name}': call to missing function '{e.name_hint}'", self.func)
        elif isinstance(e, relax.Call):
            if isinstance(e.op, relax.Op) and e.op.name in _CALL_TIR_OPS and self.mod is not None:
                callee = e.args[0]
                if isinstance(callee, ir.GlobalVar):
                    if callee.name_hint not in self.mod:
                        raise _fail(f"in '{self.name}': call_tir to missing function '{callee.name_hint}'", self.func)
                    if not isinstance(self.mod[callee.name_hint], tir.PrimFunc):
                        raise _fail(f"in '{self.name}': call_tir to '{callee.name_hint}', which is not a T.prim_func", self.func)
                    self.call_tir_args(e, callee.name_hint, self.mod[callee.name_hint])
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


    def call_tir_args(self, call: relax.Call, kname: str, prim: tir.PrimFunc) -> None:
        """The tensors a call_tir passes against the PrimFunc's buffers: first what contradicts
        its signature (`ir.op.call_tir.call_tir_mismatch`: kinds, dtypes, ranks and
        dimensions, with the PrimFunc's symbolic sizes solved from the arguments), then the
        rules the build applies (`compiler.kernel_args.plan_kernel_args`), so that `tvms check`
        finds what `tvms run` would refuse or stop at."""
        from tvmscript.ir.op.call_tir import call_tir_mismatch, describe_arg

        from .kernel_args import plan_kernel_args
        from .kernel_params import kernel_signature

        args = call.args[1] if len(call.args) > 1 else None
        if not isinstance(args, relax.Tuple):
            return  # arguments in a variable: their shapes are checked at run time
        tir_vars = call.args[2].values if len(call.args) > 2 and isinstance(call.args[2], relax.ShapeExpr) else []
        inplace = call.attrs.get("inplace_indices") if isinstance(call.attrs, dict) else None
        span = call.span or getattr(self.func, "span", None)
        passed = [(getattr(a, "struct_info", None), describe_arg(a)) for a in args.fields]
        op = "R." + call.op.name[len("relax."):]
        mismatch = call_tir_mismatch(kname, prim, passed, list(call.sinfo_args), list(tir_vars or []), inplace, op)
        if mismatch is not None:
            raise TVMScriptError(f"in '{self.name}': {mismatch}", span)
        specs, sym_names, *_ = kernel_signature(kname, prim)
        kernel = _KernelSignature(specs, sym_names)
        tensors = [(None, sinfo, what) for sinfo, what in passed]
        tensors += [(None, s, f"output {k}") for k, s in enumerate(call.sinfo_args)
                    if inplace is None or inplace[k] < 0]  # an output written in place is an argument
        plan_kernel_args(kname, kernel, tensors, list(tir_vars or []),
                          lambda message: TVMScriptError(f"in '{self.name}': {message}", span))


# The calls of a PrimFunc in destination-passing style, checked against its signature.
_CALL_TIR_OPS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad")


class _KernelSignature:
    """What `plan_kernel_args` reads of a compiled kernel, taken from the PrimFunc itself."""

    def __init__(self, params: list, sym_vars: list) -> None:
        self.params = params
        self.sym_vars = sym_vars


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
                if b.data is not None:
                    self.vars.add(b.data)  # ``B.data``, an allocation's pointer
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
        elif isinstance(s, tir.AttrStmt):
            if isinstance(s.node, tir.IterVar):  # T.launch_thread: the thread index is defined
                self.vars.add(s.node.var)
            if isinstance(s.value, tir.PrimExpr):
                self.expr(s.value)
            self.stmt(s.body)
        elif isinstance(s, tir.DeclBuffer):
            self.expr(s.buffer.data)
            self.buffers.add(s.buffer)
            self.stmt(s.body)

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

    def visit_Let(self, e) -> None:
        self.visit(e.value)
        self.checker.vars.add(e.var)
        self.visit(e.body)

    def _division(self, e) -> None:
        if isinstance(e.b, tir.IntImm) and e.b.value == 0:
            raise _fail(f"in '{self.checker.name}': integer division by zero (a constant 0 divisor)", self.checker.func)
        self.generic_visit(e)

    visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = _division


def _free_vars(exprs) -> set:
    return set(vars_in(exprs))
