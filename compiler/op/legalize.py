"""Attaching legalizations to the ops the IR declares (`register_legalize`), and the helpers
most legalizations share: whether a call's shapes are known (`shapes_known`), the common
``bb.call_te`` legalizer (`te_legalizer`), a tuple's fields as separate TE operands
(`tuple_tensors`).

Why separate from the declarations: an op's struct info, attributes and fusion pattern are
the IR's (``tvmscript/ir/op``, read by the parser and the checks); how it becomes TensorIR is
the compiler's, through TE and ``compiler/topi``. Each family module here attaches its
legalizations to the registered `OpDef`s once, when ``compiler.op`` is imported, which
LegalizeOps does before it reads them.
"""

from __future__ import annotations

from typing import Callable

from tvmscript.ir import relax
from tvmscript.ir.op import find_op

__all__ = ["register_legalize", "shapes_known", "te_shape_arg", "te_legalizer", "tuple_tensors"]


def register_legalize(name: str, legalize: Callable) -> None:
    """Attach ``legalize(bb, call)`` to the registered op ``name`` (``relax.add``, ``R.add`` or
    ``add``). ValueError for an op nobody declared, or one that has a legalization already: each
    op has one, in one place."""
    op = find_op(name)
    if op is None:
        raise ValueError(f"register_legalize: no op {name!r} is declared (tvmscript/ir/op)")
    if op.legalize is not None:
        raise ValueError(f"register_legalize: op {op.name} has a legalization already ({op.legalize.__name__})")
    op.legalize = legalize


def shapes_known(call) -> bool:
    """Whether every tensor argument and the result of ``call`` have a known shape (static or
    symbolic): what TE needs to build the op's loops."""
    def known(sinfo) -> bool:
        if isinstance(sinfo, relax.TensorStructInfo):
            return sinfo.shape is not None
        if isinstance(sinfo, relax.TupleStructInfo):
            return all(known(f) for f in sinfo.fields)
        return True

    return all(known(relax.struct_info_of(a)) for a in call.args) and known(call.struct_info)


def te_shape_arg(arg):
    """A shape argument (``R.shape([2, 3])``) as the list of its int64 dims, so that TE builds
    ``T.Buffer((T.int64(2), T.int64(3)))`` and ``T.grid(T.int64(2), ...)`` as TVM's
    legalization does (Relax shapes are int64), rather than int32 loops from Python ints.
    Other arguments are returned as they are."""
    return list(arg.values) if isinstance(arg, relax.ShapeExpr) else arg


def te_legalizer(topi_fn, name_hint: str, attrs=()):
    """The common legalizer: ``bb.call_te(topi_fn, *call.args, **call's attrs named in attrs)``,
    its PrimFunc named ``name_hint`` (``add``, ``add1``, ... as TVM names them)."""

    def legalize(bb, call):
        if not shapes_known(call):
            return None
        kwargs = {a: call.attrs[a] for a in attrs}
        return bb.call_te(topi_fn, *[te_shape_arg(a) for a in call.args], primfunc_name_hint=name_hint, **kwargs)

    legalize.__name__ = f"legalize_{name_hint}"
    return legalize


def tuple_tensors(bb, tup) -> list:
    """The fields of a tuple expression (a ``relax.Tuple`` as they are, else ``TupleGetItem``s
    bound to variables) to pass to TE as separate tensors."""
    if isinstance(tup, relax.Tuple):
        return list(tup.fields)
    n = len(relax.struct_info_of(tup).fields)
    return [bb.emit(relax.TupleGetItem(tup, i)) for i in range(n)]
