"""LegalizeOps: replace each call of a high-level Relax op by a ``R.call_tir`` of the TensorIR the
op's ``legalize`` builds (through TE and ``compiler/topi``), as TVM's pass does.

Why: everything after this point (fusion, the CPU backend) works on PrimFuncs. The op table
(declared in ``tvmscript/ir/op``, the legalizations attached by ``compiler/op``, which this
module imports) says how each op legalizes; this pass only walks the Relax functions, gives
each legalizer a BlockBuilder positioned at the binding being rewritten (so it can emit helper
bindings and add PrimFuncs, deduplicated by structure and named ``add``, ``add1``...), and
rebuilds the blocks. Calls the op table cannot legalize (no legalizer, or shapes it cannot
handle) are left as they are; running the pass twice changes nothing more. The calls an op
becomes keep its span: errors about them (and, through them, about the TIR made for them, which
has no place of its own) point at the op in the file.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax
from tvmscript.ir.op import find_op

from ..block_builder import BlockBuilder, _BlockFrame, _FunctionFrame
from .. import op as _legalizations  # noqa: F401  (attaches every op's legalization)


class LegalizeOps:
    """``IRModule -> IRModule``. ``customize_legalize_map`` maps op names (``"relax.add"``) to
    ``legalize(bb, call)`` functions used instead of the op table's."""

    def __init__(self, customize_legalize_map: dict | None = None, enable_warning: bool = False) -> None:
        self.custom = dict(customize_legalize_map or {})

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        bb = BlockBuilder(mod)  # works on a copy, printed with the canonical header
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function):
                new = _FunctionLegalizer(bb, self.custom).function(func)
                if new is not func:
                    bb.update_func(gv, new)
        return bb.get()

    def __repr__(self) -> str:
        return "LegalizeOps()"


class _FunctionLegalizer:
    def __init__(self, bb: BlockBuilder, custom: dict) -> None:
        self.bb = bb
        self.custom = custom
        self.changed = False

    def legalizer(self, call):
        if not (isinstance(call, relax.Call) and isinstance(call.op, relax.Op)):
            return None
        fn = self.custom.get(call.op.name)
        if fn is not None:
            return fn
        op = find_op(call.op.name)
        return op.legalize if op is not None else None

    def function(self, func: relax.Function) -> relax.Function:
        names = _names_in(func)
        frame = _FunctionFrame("", list(func.params), {}, func.private, func.is_pure)
        frame.names = {n: 0 for n in names}
        self.bb._func = frame
        try:
            body = self.seq(func.body)
        finally:
            self.bb._func = None
            self.bb._block = None
        if not self.changed:
            return func
        return relax.Function(func.params, body, func.ret_struct_info, func.attrs, func.is_pure,
                              func.private, func.struct_info, func.span, func.comments)

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
            value = binding.value
            if isinstance(value, relax.If):
                value = self.if_(value)
            else:
                value = self.expr(value)
            if value is not binding.value:
                binding = (relax.VarBinding(binding.var, value) if isinstance(binding, relax.VarBinding)
                           else relax.MatchCast(binding.var, value, binding.struct_info))
            frame.bindings.append(binding)
        self.bb._block = None
        if dataflow:
            return relax.DataflowBlock(frame.bindings, list(block.outputs))
        return relax.BindingBlock(frame.bindings)

    def expr(self, e):
        """``e`` with its op calls legalized (nested ones first, emitted as bindings of their own)."""
        if not isinstance(e, relax.Call):
            return e
        args = list(e.args)
        new_args = [self.bb.emit(self.expr(a)) if _is_op_call(a) else a for a in args]
        if any(a is not b for a, b in zip(args, new_args)):
            e = relax.Call(e.op, new_args, e.attrs, e.sinfo_args, e.struct_info, e.span)
            self.changed = True
        fn = self.legalizer(e)
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


def _give_span(value, span) -> None:
    """A call the legalizer made (``R.call_tir`` of its PrimFunc, a helper binding) takes the
    span of the op call it replaces, so errors about it point at the op in the file."""
    if isinstance(value, relax.Call) and value.span is None:
        value.span = span


def _is_op_call(e) -> bool:
    """A call of a registered op (not call_tir & co., which stay nested as they are)."""
    return isinstance(e, relax.Call) and isinstance(e.op, relax.Op) and find_op(e.op.name) is not None


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
