"""Rewriting op calls in place, binding by binding: the walk LegalizeOps and
DecomposeOpsForInference share.

Why one walk: both passes replace a call of some op by what a rule builds with a BlockBuilder
positioned at the binding being rewritten, so the rule can emit helper bindings before it
(named ``lv``, ``lv1``... fresh in the function, as TVM's normalizer names them) and add
PrimFuncs. The walk rebuilds blocks, branches and functions around the rewritten bindings,
gives what a call became the call's span (errors about it point at the op in the file), and
returns a function unchanged (the same object) when no rule applied.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax

from ..block_builder import BlockBuilder, _BlockFrame, _FunctionFrame


class CallRewriter:
    """Rewrites the op calls of one function at a time. Subclasses say which calls a rule
    rewrites (`rule`) and which calls nested in another call's arguments are first bound to a
    variable of their own and rewritten (`flattens`)."""

    def __init__(self, bb: BlockBuilder) -> None:
        self.bb = bb
        self.changed = False

    def rule(self, call: relax.Call):
        """``rewrite(bb, call) -> expr or None`` for ``call``, or None to keep it."""
        raise NotImplementedError

    def flattens(self, arg) -> bool:
        """Whether a call nested as an argument is bound to a variable first and rewritten."""
        return isinstance(arg, relax.Call) and self.rule(arg) is not None

    def function(self, func: relax.Function, params=None) -> relax.Function:
        """``func`` with its calls rewritten (the same object when nothing was); ``params``:
        new parameters replacing its own (a pass that changes the signature)."""
        new_params = list(func.params) if params is None else list(params)
        frame = _FunctionFrame("", new_params, {}, func.private, func.is_pure)
        frame.names = {n: 0 for n in _names_in(func)}
        self.bb._func = frame
        try:
            body = self.seq(func.body)
        finally:
            self.bb._func = None
            self.bb._block = None
        if not self.changed:
            return func
        same_signature = all(a is b for a, b in zip(new_params, func.params))
        return relax.Function(new_params, body, func.ret_struct_info, func.attrs, func.is_pure, func.private,
                              func.struct_info if same_signature else None, func.span, func.comments)

    def seq(self, seq: relax.SeqExpr) -> relax.SeqExpr:
        blocks = [self.block(b) for b in seq.blocks]
        body = seq.body
        if isinstance(body, relax.If):
            body = self.if_(body)
        return relax.SeqExpr(blocks, body, seq.struct_info)

    def if_(self, e: relax.If) -> relax.If:
        return relax.If(e.cond, self.seq(e.true_branch), self.seq(e.false_branch), e.struct_info)

    def block(self, block: relax.BindingBlock) -> relax.BindingBlock:
        dataflow = isinstance(block, relax.DataflowBlock)
        frame = _BlockFrame(dataflow)
        self.bb._block = frame
        for binding in block.bindings:
            self.binding(binding)
        self.bb._block = None
        if dataflow:
            return relax.DataflowBlock(frame.bindings, list(block.outputs))
        return relax.BindingBlock(frame.bindings)

    def binding(self, binding) -> None:
        """Append ``binding`` to the current block, its calls rewritten (after the helper
        bindings a rule emits)."""
        frame = self.bb._block
        value = binding.value
        if isinstance(value, relax.If):
            value = self.if_(value)
            self.bb._block = frame  # the branches' blocks were current meanwhile
        else:
            value = self.expr(value)
        if value is not binding.value:
            binding = (relax.VarBinding(binding.var, value) if isinstance(binding, relax.VarBinding)
                       else relax.MatchCast(binding.var, value, binding.struct_info))
        frame.bindings.append(binding)

    def expr(self, e):
        """``e`` with its calls rewritten (nested ones first, emitted as bindings of their own)."""
        if not isinstance(e, relax.Call):
            return e
        args = list(e.args)
        new_args = [self.bb.emit(self.expr(a)) if self.flattens(a) else a for a in args]
        if any(a is not b for a, b in zip(args, new_args)):
            e = relax.Call(e.op, new_args, e.attrs, e.sinfo_args, e.struct_info, e.span)
            self.changed = True
        fn = self.rule(e)
        if fn is None:
            return e
        emitted = len(self.bb._block.bindings)
        out = fn(self.bb, e)
        if out is None:
            return e
        self.changed = True
        out = self.bb.normalize(out)
        # What the op became has no place of its own in the file: it is the op's.
        for b in self.bb._block.bindings[emitted:]:
            _give_span(b.value, e.span)
        _give_span(out, e.span)
        return out


def rewrite_functions(mod: ir.IRModule, make_rewriter, func_names=None) -> ir.IRModule:
    """A copy of ``mod`` whose Relax functions (those named in ``func_names``, or all) are
    rewritten by ``make_rewriter(bb)``; functions no rule touched are kept as they are."""
    bb = BlockBuilder(mod)  # works on a copy, printed with the canonical header
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function) and (func_names is None or gv.name_hint in func_names):
            new = make_rewriter(bb).function(func)
            if new is not func:
                bb.update_func(gv, new)
    return bb.get()


def _give_span(value, span) -> None:
    """A call a rule made (``R.call_tir`` of its PrimFunc, a helper binding) takes the span of
    the op call it replaces, so errors about it point at the op in the file."""
    if isinstance(value, relax.Call) and value.span is None:
        value.span = span


def _names_in(func: relax.Function) -> set:
    """Names of all variables of a function, so emitted bindings get fresh ones."""
    names = {p.name_hint for p in func.params}

    def seq(s):
        for b in s.blocks:
            for binding in b.bindings:
                names.add(binding.var.name_hint)
                if isinstance(binding.value, relax.If):
                    seq(binding.value.true_branch)
                    seq(binding.value.false_branch)

    seq(func.body)
    return names
