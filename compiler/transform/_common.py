"""Helpers shared by the Relax passes: op-pattern kinds, walking Relax expressions for the
variables and functions they use, and copying a module so a pass never mutates its input."""

from __future__ import annotations

import dataclasses

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.mutator import substitute

# TVM's OpPatternKind.
kElemWise = 0
kBroadcast = 1
kInjective = 2
kCommReduce = 3
kOutEWiseFusable = 4
kTuple = 7
kOpaque = 8

_SKIP = frozenset(("struct_info", "sinfo_args", "ret_struct_info", "span", "comments", "attrs", "var"))


def walk_relax(node, visit) -> None:
    """Calls ``visit(n)`` on every Relax expression (and GlobalVar) below ``node``, in order.
    Binding variables and function parameters (definitions) are not visited. A ``visit``
    returning False leaves out what is below that expression."""
    if isinstance(node, (relax.Var, ir.GlobalVar)):
        visit(node)
        return
    if isinstance(node, list):
        for item in node:
            walk_relax(item, visit)
        return
    if not isinstance(node, (relax.Expr, relax.Binding, relax.BindingBlock)):
        return
    if isinstance(node, relax.Expr) and visit(node) is False:
        return
    if isinstance(node, relax.Function):
        walk_relax(node.body, visit)
        return
    for f in dataclasses.fields(node):
        if f.name in _SKIP or f.name == "params":
            continue
        if isinstance(node, relax.DataflowBlock) and f.name == "outputs":
            continue
        walk_relax(getattr(node, f.name), visit)


def var_use_counts(node) -> dict:
    """How many times each relax.Var is used below ``node``."""
    counts: dict = {}

    def visit(n):
        if isinstance(n, relax.Var):
            counts[n] = counts.get(n, 0) + 1

    walk_relax(node, visit)
    return counts


def global_vars_used(func) -> list:
    """GlobalVars referenced by a Relax function, in order of first use."""
    found: dict = {}

    def visit(n):
        if isinstance(n, ir.GlobalVar):
            found.setdefault(n, None)

    walk_relax(func, visit)
    return list(found)


def op_name(expr):
    """The name of the Relax op ``expr`` calls (``"relax.nn.conv2d"``), or None when ``expr`` is
    not a call of an op."""
    if isinstance(expr, relax.Call) and isinstance(expr.op, relax.Op):
        return expr.op.name
    return None


def is_call_tir(expr) -> bool:
    return op_name(expr) == "relax.call_tir" and isinstance(expr.args[0], ir.GlobalVar)


def single_block_nest(func: tir.PrimFunc):
    """``(loops, realize)``: the loops and the one BlockRealize of a function whose body is a
    loop nest around one block (a root block with nothing else is looked through), else None.
    What a kernel that only moves elements looks like (a transpose, a reshape)."""
    s = func.body
    if isinstance(s, tir.BlockRealize) and not s.iter_values and s.block.name == "root" \
            and not s.block.alloc_buffers and not s.block.match_buffers and s.block.init is None:
        s = s.block.body
    loops = []
    while isinstance(s, tir.For):
        loops.append(s)
        s = s.body
    return (loops, s) if isinstance(s, tir.BlockRealize) else None


def call_tir_args(expr) -> list:
    args = expr.args[1]
    return list(args.fields) if isinstance(args, relax.Tuple) else [args]


def copy_module(mod: ir.IRModule) -> ir.IRModule:
    """A new module holding the same functions (same GlobalVars)."""
    return mod.copy()


def replace_fields(node, **changes):
    return dataclasses.replace(node, **changes)


def static_shape(sinfo) -> bool:
    return (isinstance(sinfo, relax.TensorStructInfo) and sinfo.shape is not None
            and all(isinstance(d, tir.IntImm) for d in sinfo.shape))


def known_shape(sinfo) -> bool:
    """A tensor struct info whose every dim is known, as an int or a symbolic expression
    (``R.Tensor(("n", 256))``); fusion needs the shape, not its values."""
    return (isinstance(sinfo, relax.TensorStructInfo) and sinfo.shape is not None
            and not isinstance(sinfo.shape, relax.Expr)
            and all(isinstance(d, tir.PrimExpr) for d in sinfo.shape))


def same_dim(a, b) -> bool:
    """Structural equality of two shape dims: equal ints, the same symbolic variable, or
    expressions whose difference simplifies to 0 (``n * 2`` and ``2 * n``)."""
    if a is b:
        return True
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value == b.value
    if isinstance(a, tir.Var) and isinstance(b, tir.Var):
        return False  # two different variables: n and m may differ
    from tvmscript.ir.arith import Analyzer

    return Analyzer().can_prove_equal(a, b)


def same_shape(a, b) -> bool:
    """Whether two tensor struct infos have known shapes that are the same, dim by dim
    (`same_dim`: equal ints, the same symbolic variable, or expressions the analyzer proves
    equal, ``n * 2`` and ``2 * n``)."""
    if not (known_shape(a) and known_shape(b)) or len(a.shape) != len(b.shape):
        return False
    return all(same_dim(x, y) for x, y in zip(a.shape, b.shape))


def call_tir_tir_vars(expr) -> list:
    """The ``tir_vars=R.shape([...])`` values of a call_tir (empty when it passes none)."""
    if len(expr.args) > 2 and isinstance(expr.args[2], relax.ShapeExpr):
        return list(expr.args[2].values)
    return []


def sinfo_tir_vars(sinfo, out: dict) -> dict:
    """Adds to ``out`` (an ordered set) the symbolic variables in a struct info's shapes, in
    order of appearance; returns ``out``."""
    from tvmscript.ir.tir_visitor import vars_in

    if isinstance(sinfo, relax.TensorStructInfo) and known_shape(sinfo):
        for v in vars_in(list(sinfo.shape)):
            out.setdefault(v, None)
    elif isinstance(sinfo, relax.ShapeStructInfo) and sinfo.values is not None:
        for v in vars_in(list(sinfo.values)):
            out.setdefault(v, None)
    elif isinstance(sinfo, relax.TupleStructInfo):
        for f in sinfo.fields:
            sinfo_tir_vars(f, out)
    return out


def substitute_relax(node, var_map: dict, tir_map: dict | None = None):
    """``node`` (any Relax expression, binding, block or struct info) with the Relax variables in
    ``var_map`` replaced by their expressions and the TIR variables in ``tir_map`` (symbolic
    dims) by theirs. Variables whose struct info mentions a substituted dim are re-created with
    the new struct info, consistently at their definition and every use. Unchanged subtrees are
    shared. (TIR alone: `tvmscript.ir.mutator.substitute`.)"""
    tir_map = tir_map or {}
    var_map = dict(var_map)

    def visit(n):
        if isinstance(n, relax.Var):
            if n in var_map:
                return var_map[n]
            if tir_map and n.struct_info is not None:
                sinfo = visit(n.struct_info)
                if sinfo is not n.struct_info:
                    new = dataclasses.replace(n, struct_info=sinfo)
                    var_map[n] = new
                    return new
            return n
        if isinstance(n, tir.PrimExpr):
            return substitute(n, tir_map)
        if isinstance(n, list):
            items = [visit(x) for x in n]
            return n if all(a is b for a, b in zip(items, n)) else items
        if isinstance(n, ir.GlobalVar) or not dataclasses.is_dataclass(n) or isinstance(n, type):
            return n
        changes = {}
        for f in dataclasses.fields(n):
            if f.name in ("span", "comments"):
                continue
            v = getattr(n, f.name)
            nv = visit(v)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(n, **changes) if changes else n

    return visit(node)
