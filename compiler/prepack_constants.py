"""Bound weights packed once, at compile time (the build's half of `schedule_cpu.prepack`).

With weights bound as constants (``BindParams``, ``tvms run --bind``), a kernel's weight
parameter receives the same constant on every call, so the copy a register tile makes of it
into panels can be made once, by the build, as TVM's ``layout_free_buffers`` +
RewriteLayout + FoldConstant do:

1. `mark_layout_free`: a PrimFunc parameter that every call of the kernel (``R.call_tir``)
   passes a ``relax.Constant`` gets listed in the PrimFunc's `LAYOUT_FREE_ATTR`;
2. the CPU default schedule may give such a parameter the layout of its panels, and records
   it in the scheduled function (`PACKED_LAYOUTS_ATTR`, kept by the build and its disk cache);
3. `pack_constants`: each constant passed there is rearranged into that layout with NumPy
   (one copy per constant and layout), and the call passes it instead. The VM runs as
   before; each element multiplies as before, so results do not change.
"""

from __future__ import annotations

import hashlib

import numpy as np

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.tir_numpy import evaluate_on_arrays

from .schedule_cpu.prepack import LAYOUT_FREE_ATTR, PackedLayout
from .schedule_cpu.winograd import TRANSFORMS, WinogradWeights
from .transform._common import call_tir_args, copy_module, is_call_tir, replace_fields, walk_relax

__all__ = ["mark_layout_free", "pack_constants", "pack_array", "gather_index"]


def mark_layout_free(mod: ir.IRModule) -> ir.IRModule:
    """``mod`` with each PrimFunc's parameters that every one of its calls passes a constant
    listed in its `LAYOUT_FREE_ATTR` (``mod`` itself unchanged). A kernel referenced other
    than by ``R.call_tir`` keeps its layouts, and a list written in the source is replaced:
    the build packs only the constants it passes."""
    calls: dict = {}  # GlobalVar -> (call, its function's constant bindings) for each call_tir
    refs: dict = {}  # GlobalVar -> references of any kind

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            bound = constant_bindings(func)

            def visit(n, bound=bound):
                if isinstance(n, ir.GlobalVar):
                    refs[n] = refs.get(n, 0) + 1
                elif is_call_tir(n):
                    calls.setdefault(n.args[0], []).append((n, bound))

            walk_relax(func, visit)
    out = None
    for gv, func in mod.functions.items():
        if not isinstance(func, tir.PrimFunc):
            continue
        sites = calls.get(gv, [])
        free = []
        if sites and refs.get(gv, 0) == len(sites):
            free = [i for i, p in enumerate(func.params) if p in func.buffer_map and all(
                i < len(call_tir_args(c)) and _constant(call_tir_args(c)[i], bound) is not None for c, bound in sites)]
        if free or LAYOUT_FREE_ATTR in func.attrs:  # the build's finding replaces one written in the source
            attrs = {k: v for k, v in func.attrs.items() if k != LAYOUT_FREE_ATTR}
            out = out or copy_module(mod)
            out[gv] = replace_fields(func, attrs={**attrs, LAYOUT_FREE_ATTR: free} if free else attrs)
    return out if out is not None else mod


def constant_bindings(func: relax.Function) -> dict:
    """Var -> Constant for each binding of a constant to a variable in ``func`` (FoldConstant
    binds a folded weight so: ``lv = metadata["relax.expr.Constant"][0]``)."""
    bound = {}

    def walk(seq: relax.SeqExpr):
        for block in seq.blocks:
            for b in block.bindings:
                value = getattr(b, "value", None)
                if isinstance(value, relax.Constant):
                    bound[b.var] = value
                elif isinstance(value, relax.If):
                    walk(value.true_branch)
                    walk(value.false_branch)

    walk(func.body)
    return bound


def _constant(arg, bound: dict):
    """The constant ``arg`` is, directly or through a variable bound to it; else None."""
    return arg if isinstance(arg, relax.Constant) else bound.get(arg) if isinstance(arg, relax.Var) else None


def pack_constants(relax_funcs: dict, layouts: dict) -> dict:
    """``relax_funcs`` (name -> Function) with each constant passed to a kernel parameter
    given a layout (``layouts``: kernel name -> {parameter index: `PackedLayout`}) packed
    into it; functions without such calls are returned as they were."""
    if not layouts:
        return relax_funcs
    packer = _Packer(layouts)
    return {name: packer.function(func) for name, func in relax_funcs.items()}


class _Packer:
    """Rewrites calls, packing each (constant, layout) pair once."""

    def __init__(self, layouts: dict) -> None:
        self.layouts = layouts
        self.packed: dict = {}  # (id(constant), layout key) -> packed Constant
        self.keep: list = []  # the constants keyed by id, kept alive while ids are compared
        self.bound: dict = {}  # the function's variables bound to constants

    def function(self, func: relax.Function) -> relax.Function:
        self.bound = constant_bindings(func)
        body = self.seq(func.body)
        return func if body is func.body else replace_fields(func, body=body)

    def seq(self, seq: relax.SeqExpr) -> relax.SeqExpr:
        blocks, changed = [], False
        for block in seq.blocks:
            bindings = [b if getattr(b, "value", None) is None else self.binding(b) for b in block.bindings]
            changed |= any(x is not y for x, y in zip(bindings, block.bindings))
            blocks.append(replace_fields(block, bindings=bindings))
        return replace_fields(seq, blocks=blocks) if changed else seq

    def binding(self, b):
        value = b.value
        if isinstance(value, relax.If):
            t, f = self.seq(value.true_branch), self.seq(value.false_branch)
            new = value if t is value.true_branch and f is value.false_branch else \
                replace_fields(value, true_branch=t, false_branch=f)
        elif is_call_tir(value):
            new = self.call(value)
        else:
            new = value
        return b if new is value else replace_fields(b, value=new)

    def call(self, call: relax.Call) -> relax.Call:
        layouts = self.layouts.get(call.args[0].name_hint)
        if not layouts:
            return call
        args = call_tir_args(call)
        new = [self.constant(_constant(a, self.bound), layouts[i])
               if i in layouts and _constant(a, self.bound) is not None else a for i, a in enumerate(args)]
        if all(x is y for x, y in zip(new, args)):
            return call
        tuple_arg = call.args[1]
        if isinstance(tuple_arg, relax.Tuple):
            sinfo = relax.TupleStructInfo([relax.struct_info_of(a) for a in new])
            new_tuple = replace_fields(tuple_arg, fields=new, struct_info=sinfo)
        else:
            new_tuple = new[0]
        return replace_fields(call, args=[call.args[0], new_tuple] + list(call.args[2:]))

    def constant(self, const: relax.Constant, layout) -> relax.Constant:
        key = (id(const), layout_key(layout))
        if key not in self.packed:
            data = pack_array(layout, const.data)
            self.packed[key] = relax.Constant(data, relax.tensor_sinfo(list(data.shape), str(data.dtype)))
            self.keep.append(const)
        return self.packed[key]


def pack_array(layout, array) -> np.ndarray:
    """``array`` in ``layout``: a `PackedLayout`'s elements gathered (`gather_index`), or a
    Winograd convolution's weights transformed (`schedule_cpu.winograd.WinogradWeights`)."""
    array = np.asarray(array)
    if isinstance(layout, WinogradWeights):
        return winograd_weights(array, layout)
    return np.ascontiguousarray(array[gather_index(layout)])


def layout_key(layout) -> tuple:
    """What tells two layouts apart, for packing a constant once per layout."""
    if isinstance(layout, WinogradWeights):
        return ("winograd", layout.m, tuple(layout.shape))
    index = gather_index(layout)
    return (tuple(layout.shape), hashlib.sha1(b"".join(np.ascontiguousarray(i).tobytes() for i in index)).hexdigest())


def winograd_weights(weight: np.ndarray, layout: WinogradWeights) -> np.ndarray:
    """``U[e, f, c, k] = (G w[k, c] G^T)[e, f]``: a Winograd convolution's weight transform
    (`schedule_cpu.winograd`), done once on the constant, in float64, instead of on every call."""
    g = np.array([[float(v) for v in row] for row in TRANSFORMS[layout.m][1]])
    axes = layout.weight_axes.replace("y", "a").replace("x", "b")   # (kcyx -> kcab, yxck -> abck)
    u = np.einsum(f"ea,{axes},fb->efck", g, weight.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(weight.dtype))


def gather_index(layout: PackedLayout) -> tuple:
    """For each axis of the original tensor, the index of the element each packed element
    holds (NumPy arrays of the packed shape): ``original[gather_index(layout)]`` packs it."""
    coords = np.indices(layout.shape, dtype=np.int64)
    env = dict(zip(layout.source.initial_indices, coords))
    return tuple(np.broadcast_to(_evaluate(e, env), layout.shape) for e in layout.source.final_indices)


def _evaluate(e, env: dict):
    """The integer expression ``e`` of the packed indices, over arrays of them."""
    value = evaluate_on_arrays(e, env)
    if value is None:
        raise NotImplementedError(f"packing a constant: {type(e).__name__} in a layout")
    return value
