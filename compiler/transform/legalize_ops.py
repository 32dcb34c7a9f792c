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

from ._rewrite_calls import CallRewriter, rewrite_functions
from .. import op as _legalizations  # noqa: F401  (attaches every op's legalization)


class LegalizeOps:
    """``IRModule -> IRModule``. ``customize_legalize_map`` maps op names (``"relax.add"``) to
    ``legalize(bb, call)`` functions used instead of the op table's."""

    def __init__(self, customize_legalize_map: dict | None = None, enable_warning: bool = False) -> None:
        self.custom = dict(customize_legalize_map or {})

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return rewrite_functions(mod, lambda bb: _Legalizer(bb, self.custom))

    def __repr__(self) -> str:
        return "LegalizeOps()"


class _Legalizer(CallRewriter):
    """Each op call by its legalization; every op call nested in an argument is bound first."""

    def __init__(self, bb, custom: dict) -> None:
        super().__init__(bb)
        self.custom = custom

    def rule(self, call):
        if not (isinstance(call, relax.Call) and isinstance(call.op, relax.Op)):
            return None
        fn = self.custom.get(call.op.name)
        if fn is not None:
            return fn
        op = find_op(call.op.name)
        return op.legalize if op is not None else None

    def flattens(self, arg) -> bool:
        """A call of a registered op (not call_tir & co., which stay nested as they are)."""
        return isinstance(arg, relax.Call) and isinstance(arg.op, relax.Op) and find_op(arg.op.name) is not None
