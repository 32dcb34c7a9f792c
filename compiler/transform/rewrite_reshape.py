"""RewriteDataflowReshape: a kernel that only reshapes becomes ``R.reshape``, which the VM runs
as a view of its input instead of a copy.

Why: LegalizeOps turns every ``R.reshape`` (and ``flatten``, ``expand_dims``, ``squeeze``)
into a PrimFunc that copies its input element by element, and the ones FuseOps leaves on their
own (between two matmuls of a transformer: heads split and merged) are whole passes over
memory and kernel launches that do nothing a new shape cannot: 8 of the 24 kernel calls of
the dynamic GPT block at 7 tokens. As TVM's pass of that name, this runs in the build after
fusion, on the calls inside dataflow blocks; the VM gives the reshape's result the memory of
its input (`runtime.vm_helpers`' ``_reshape``), and memory planning treats the two as one
tensor (`compiler.memory_plan`).

A PrimFunc is a reshape (`is_reshape`) when its one block stores, at every point of the output,
the input element of the same row-major position: the input's row-major position simplifies to
the output's (``expand_dims``: ``Y[i, 0, j] = X[i, j]``), or its indices are the "unravel" of
one linear index ``G`` (``G // c0, G // c1 % n1, ..., G % nk``, ``c`` the input's row-major
strides and ``n`` its dimensions), ``G`` is the output's row-major position, and both hold the
same number of elements. Divisions by a symbolic dimension are resolved with the iterators'
ranges first (`arith.symbolic_divmod`). Each of these is proved with the arithmetic simplifier, symbolic
dimensions included, or the call is left alone.

Not rewritten: a reshape of a function parameter (its result would share the caller's
memory), and any call in a function with ``R.call_tir_inplace`` (a kernel writing one of the
two names of a tensor while the other is still read).
"""

from __future__ import annotations

from typing import Optional

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.arith.analyzer import Analyzer
from tvmscript.ir.arith.symbolic_divmod import simplify_divmod
from tvmscript.ir.mutator import substitute

from ._common import call_tir_args, global_vars_used, is_call_tir, op_name, single_block_nest, walk_relax

__all__ = ["RewriteDataflowReshape", "is_reshape"]


class RewriteDataflowReshape:
    """``RewriteDataflowReshape()(mod)``: reshape kernels called in dataflow blocks become
    ``R.reshape``; PrimFuncs nothing calls any more are dropped."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        reshapes = {gv.name_hint for gv, f in mod.functions.items()
                    if isinstance(f, tir.PrimFunc) and is_reshape(f)}
        if not reshapes:
            return mod
        out = mod.copy()
        changed = False
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function) and not _has_inplace_call(func):
                new = _rewrite_function(func, reshapes)
                if new is not func:
                    out[gv] = new
                    changed = True
        if not changed:
            return mod
        called = {g.name_hint for f in out.functions.values() if isinstance(f, relax.Function)
                  for g in global_vars_used(f)}
        for gv in list(out.functions):
            if gv.name_hint in reshapes and gv.name_hint not in called:
                del out[gv]
        return out


def _rewrite_function(func: relax.Function, reshapes: set) -> relax.Function:
    params = set(func.params)
    blocks = []
    changed = False
    for block in func.body.blocks:
        if isinstance(block, relax.DataflowBlock):
            bindings = []
            for b in block.bindings:
                view = _as_reshape(b.value, reshapes, params) if isinstance(b, relax.VarBinding) else None
                if view is not None:
                    b = relax.VarBinding(b.var, view)
                    changed = True
                bindings.append(b)
            block = relax.DataflowBlock(bindings, list(block.outputs))
        blocks.append(block)
    if not changed:
        return func
    body = relax.SeqExpr(blocks, func.body.body, func.body.struct_info)
    return relax.Function(func.params, body, func.ret_struct_info, func.attrs, func.is_pure,
                          func.private, func.struct_info, func.span, func.comments)


def _as_reshape(value, reshapes: set, params: set) -> Optional[relax.Call]:
    """``R.reshape(x, shape)`` for ``R.call_tir(<a reshape>, (x,), out_sinfo)``, else None."""
    if not is_call_tir(value) or value.args[0].name_hint not in reshapes or len(value.args) > 2:
        return None
    fields = call_tir_args(value)
    if len(fields) != 1 or len(value.sinfo_args) != 1:
        return None
    x, out = fields[0], value.sinfo_args[0]
    if not isinstance(x, relax.Var) or x in params:
        return None
    if not isinstance(out, relax.TensorStructInfo) or out.shape is None:
        return None
    xs = relax.struct_info_of(x)
    if not isinstance(xs, relax.TensorStructInfo) or xs.dtype != out.dtype:
        return None
    return relax.Call(relax.Op("relax.reshape"), [x, _shape_expr(out.shape)], struct_info=out, span=value.span)


def _shape_expr(shape):
    return shape if isinstance(shape, relax.ShapeExpr) else relax.ShapeExpr(list(shape))


# ----------------------------------------------------------------------------- the pattern


def is_reshape(func: tir.PrimFunc) -> bool:
    """Whether ``func`` copies its one input to its one output in row-major order (see the
    module docstring): ``Y[i0, ..., im] = X[unravel(ravel(i, Y.shape), X.shape)]``."""
    if len(func.params) != 2 or len(func.buffer_map) != 2:
        return False
    x, y = (func.buffer_map[p] for p in func.params)
    found = single_block_nest(func)
    if found is None:
        return False
    loops, realize = found
    block = realize.block
    if not isinstance(block.body, tir.BufferStore) or block.alloc_buffers or block.match_buffers \
            or not (isinstance(realize.predicate, tir.IntImm) and realize.predicate.value == 1):
        return False
    store = block.body
    load = store.value
    if store.buffer is not y or not isinstance(load, tir.BufferLoad) or load.buffer is not x:
        return False
    if x.dtype != y.dtype or block.init is not None:
        return False
    ivars = [iv.var for iv in block.iter_vars]
    if [i for i in store.indices] != ivars or len(ivars) != len(y.shape):
        return False
    if len(loops) != len(ivars):
        return False
    an = Analyzer()
    unit = {}
    # Each iterator sweeps its output axis, bound to a loop of its own over the axis.
    for iv, value, loop, dim in zip(block.iter_vars, realize.iter_values, loops, y.shape):
        if iv.kind != "S" or not (tir.is_const_int(iv.dom.min, 0) and an.can_prove_equal(iv.dom.extent, dim)):
            return False
        if value is not loop.loop_var or loop.step is not None or not tir.is_const_int(loop.min, 0) \
                or not an.can_prove_equal(loop.extent, dim):
            return False
        an.bind(iv.var, iv.dom)
        if tir.is_const_int(iv.dom.extent, 1):
            unit[iv.var] = tir.IntImm(iv.var.dtype, 0)
    if not an.can_prove_equal(_product(x.shape), _product(y.shape)):
        return False
    position = substitute(_ravel(ivars, list(y.shape)), unit)
    indices = [substitute(i, unit) for i in load.indices]
    # TVM's form of a symbolic reshape, ``((v1 * 32 + v2) // 256 + v0) % n``, is ``v0`` once
    # the ranges resolve the division by ``n``.
    resolved = [simplify_divmod(i, an.ranges) for i in indices]
    if an.can_prove_equal(_ravel(resolved, list(x.shape)), position):
        return True  # each index an iterator (expand_dims, squeeze) or a product of a few
    linear = _unraveled(indices, list(x.shape), an)
    return linear is not None and an.can_prove_equal(linear, position)


def _unraveled(indices: list, shape: list, an: Analyzer):
    """``G`` when ``indices`` are ``unravel(G, shape)`` (each ``G // stride % dim``, the mod
    left out for the outermost dimension and the division for the innermost, a dimension of
    extent 1 indexed by 0 or by ``G // stride``); None otherwise."""
    common = None
    for k, (index, dim) in enumerate(zip(indices, shape)):
        stride = _product(shape[k + 1:])
        if tir.is_const_int(dim, 1) and tir.is_const_int(index, 0):
            continue
        g = _strip(index, stride, dim, outermost=k == 0, an=an)
        if g is None:
            return None
        if common is None:
            common = g
        elif not an.can_prove_equal(common, g):
            return None
    return common if common is not None else tir.IntImm("int64", 0)


def _strip(index, stride, dim, outermost: bool, an: Analyzer):
    """``G`` for ``index`` = ``G // stride % dim`` (the forms `_unraveled` allows), else None."""
    e = index
    if isinstance(e, tir.FloorMod):
        if not an.can_prove_equal(e.b, dim):
            return None
        e = e.a
    elif not (outermost or tir.is_const_int(dim, 1)):
        return None
    if isinstance(e, tir.FloorDiv):
        return e.a if an.can_prove_equal(e.b, stride) else None
    return e if an.can_prove_equal(stride, tir.IntImm(stride.dtype, 1)) else None


def _product(dims: list):
    out = tir.IntImm(dims[0].dtype if dims else "int64", 1)
    for d in dims:
        out = tir.Mul(out.dtype, out, d) if not tir.is_const_int(out, 1) else d
    return out


def _ravel(ivars: list, shape: list):
    out = None
    for v, d in zip(ivars, shape):
        out = v if out is None else tir.Add(v.dtype, tir.Mul(v.dtype, out, d), v)
    return out


# ----------------------------------------------------------------------------- module walks


def _has_inplace_call(func: relax.Function) -> bool:
    found = []

    def visit(x):
        if op_name(x) == "relax.call_tir_inplace":
            found.append(x)
    walk_relax(func, visit)
    return bool(found)
