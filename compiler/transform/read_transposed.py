"""ReadTransposedInPlace: a kernel that reads a transposed tensor reads the original instead.

The zero pipeline (as TVM prints it) computes ``x @ w.T`` as two kernels: ``transpose(w)``
into a new tensor, then ``matmul`` of ``x`` by it. With the weights as parameters, the
transpose copies every weight on every call: for the seed MLP at batch 1, a 800 KB copy that
takes longer than the matrix-vector products themselves. This pass, part of `tvms.compile`'s
own pipeline for the CPU (not of ``get_pipeline("zero")``, whose printout stays TVM's), finds
each ``lv = R.call_tir(transpose, (w,))`` whose every use is an argument of other kernels,
gives each such kernel a variant that takes ``w`` and reads ``lv[i, j]`` as ``w[j, i]`` (any
permutation of any rank), and drops the transpose. The matmul then reads ``w`` row by row,
the layout a matrix-vector product wants, as TVM's FuseTransposeMatmul arranges.

A kernel is a transpose when its only statement is ``out[v0, ..., vn] = in[vp0, ..., vpn]``
over the whole output (`permutation_of`); results are unchanged, element for element.
"""

from __future__ import annotations

from typing import Optional

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.ir.tir_visitor import TIRVisitor, contains

from ._common import call_tir_args, copy_module, is_call_tir, replace_fields, single_block_nest, var_use_counts
from .dead_code_elimination import remove_unused_bindings

__all__ = ["ReadTransposedInPlace", "read_transposed_in_place", "permutation_of"]


def permutation_of(func: tir.PrimFunc) -> Optional[tuple]:
    """``p`` when ``func(in, out)`` computes ``out[v0, ..., vn] = in[v_p0, ..., v_pn]`` over
    the whole of ``out`` (so ``in``'s axis ``a`` is ``out``'s axis ``p[a]``), else None."""
    if len(func.params) != 2 or any(p not in func.buffer_map for p in func.params):
        return None
    src, dst = (func.buffer_map[p] for p in func.params)
    if src.dtype != dst.dtype or len(src.shape) != len(dst.shape) or src.strides or dst.strides:
        return None
    found = single_block_nest(func)
    if found is None:
        return None
    loops, realize = found
    block = realize.block
    store = block.body
    if block.init is not None or block.alloc_buffers or block.match_buffers or not _is_true(realize.predicate):
        return None
    if not (isinstance(store, tir.BufferStore) and store.buffer is dst and isinstance(store.value, tir.BufferLoad)
            and store.value.buffer is src):
        return None
    ivars = [iv.var for iv in block.iter_vars]
    if list(store.indices) != ivars or len(ivars) != len(dst.shape) or len(set(ivars)) != len(ivars):
        return None
    # Each iterator sweeps its output axis: bound to its own loop, whose range is the axis.
    if len(loops) != len(ivars):
        return None
    for iv, value, loop, dim in zip(block.iter_vars, realize.iter_values, loops, dst.shape):
        if value is not loop.loop_var or loop.step is not None or not _same_int(loop.min, 0) \
                or not _same_int(loop.extent, dim) or not _same_int(iv.dom.min, 0) or not _same_int(iv.dom.extent, dim):
            return None
    load = store.value.indices
    if not all(isinstance(i, tir.Var) and i in ivars for i in load) or len(set(load)) != len(load):
        return None
    perm = tuple(ivars.index(i) for i in load)
    if any(not _same_int(src.shape[a], dst.shape[perm[a]]) for a in range(len(perm))):
        return None
    return perm


def _is_true(e) -> bool:
    return e is None or isinstance(e, tir.IntImm) and e.value == 1


def _same_int(e, value) -> bool:
    if isinstance(value, tir.IntImm):
        value = value.value
    return isinstance(e, tir.IntImm) and isinstance(value, int) and e.value == value


# ----------------------------------------------------------------------------- the consumer


def reading_source(func: tir.PrimFunc, param: tir.Var, perm: tuple) -> Optional[tir.PrimFunc]:
    """``func`` taking, instead of buffer parameter ``param`` (a transpose's output ``B``),
    the transpose's input ``W``, whose axis ``a`` is ``B``'s axis ``perm[a]``: every
    ``B[i0, ..., in]`` read becomes ``W[i_p0, ..., i_pn]``. That is the schedule primitive
    ``transform_layout`` with the map ``lambda *i: (i[p0], ..., i[pn])`` on a block that
    reads ``B``; None where ``B`` is written (the kernel would then write the caller's ``W``),
    no block reads it, or the primitive refuses it."""
    from ..schedule import Schedule, ScheduleError

    old = func.buffer_map[param]
    if contains(func.body, lambda n: isinstance(n, tir.BufferStore) and n.buffer is old):
        return None
    finder = _FirstReader(old)
    finder.visit(func.body)
    reader = finder.block
    if reader is None:
        return None
    sch = Schedule(func)
    try:
        sch.transform_layout(reader.name, old, lambda *i: tuple(i[p] for p in perm))
    except (ScheduleError, ValueError, TypeError):
        return None
    return sch.mod["main"]


class _FirstReader(TIRVisitor):
    """The first block (in program order) that declares a read of ``buffer``."""

    def __init__(self, buffer: tir.Buffer) -> None:
        self.buffer, self.block = buffer, None

    def visit_Block(self, block) -> None:
        if self.block is None and any(r.buffer is self.buffer for r in block.reads):
            self.block = block
        self.generic_visit(block)


# ----------------------------------------------------------------------------- the module


def read_transposed_in_place(mod: ir.IRModule) -> ir.IRModule:
    """The pass (see the module docstring); ``mod`` itself is not changed."""
    perms = {gv: permutation_of(f) for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}
    perms = {gv: p for gv, p in perms.items() if p is not None}
    if not perms:
        return mod
    out = copy_module(mod)
    changed = False
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            new = _rewrite_function(func, perms, out)
            if new is not None:
                out[gv] = remove_unused_bindings(new)
                changed = True
    if not changed:
        return mod
    from .dead_code_elimination import DeadCodeElimination

    return DeadCodeElimination()(out)


def _rewrite_function(func: relax.Function, perms: dict, target: ir.IRModule) -> Optional[relax.Function]:
    """``func`` with its transposes read in place (their readers' variants added to
    ``target``), or None if it has none that can be."""
    uses = var_use_counts(func)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    transposed = {}  # Var -> (source expression, perm)
    for b in bindings:
        value = getattr(b, "value", None)
        if is_call_tir(value) and value.args[0] in perms and len(call_tir_args(value)) == 1:
            transposed[b.var] = (call_tir_args(value)[0], perms[value.args[0]])
    if not transposed:
        return None
    # Only a transpose used solely as kernel arguments goes: count those uses.
    as_args: dict = {}
    for b in bindings:
        value = getattr(b, "value", None)
        if is_call_tir(value) and value.args[0] not in perms:
            for arg in call_tir_args(value):
                if arg in transposed:
                    as_args[arg] = as_args.get(arg, 0) + 1
    movable = {v for v in transposed if as_args.get(v) == uses.get(v, 0) and uses.get(v, 0) > 0}
    if not movable:
        return None
    variants: dict = {}  # (callee, arg positions and perms) -> GlobalVar
    changed = False
    new_blocks = []
    for block in func.body.blocks:
        new_bindings = []
        for b in block.bindings:
            value = getattr(b, "value", None)
            if is_call_tir(value) and value.args[0] not in perms:
                call = _rewrite_call(value, movable, transposed, target, variants)
                if call is not value:
                    b = replace_fields(b, value=call)
                    changed = True
            new_bindings.append(b)
        new_blocks.append(replace_fields(block, bindings=new_bindings))
    if not changed:
        return None
    return replace_fields(func, body=replace_fields(func.body, blocks=new_blocks))


def _rewrite_call(call, movable: set, transposed: dict, target: ir.IRModule, variants: dict):
    callee = call.args[0]
    args = call_tir_args(call)
    positions = [(i, a) for i, a in enumerate(args) if a in movable]
    if not positions:
        return call
    kernel = target[callee]
    key = (callee, tuple((i, transposed[a][1]) for i, a in positions))
    gv = variants.get(key)
    if gv is None:
        func = kernel
        for i, a in positions:
            perm = transposed[a][1]
            if i >= len(func.params) or func.params[i] not in func.buffer_map:
                return call
            rewritten = reading_source(func, func.params[i], perm)
            if rewritten is None:
                return call
            func = rewritten
        name = _fresh_name(f"{callee.name_hint}_transposed_read", target)
        gv = ir.GlobalVar(name)
        target[gv] = func
        variants[key] = gv
    new_args = [transposed[a][0] if a in movable else a for a in args]
    tuple_arg = call.args[1]
    new_tuple = replace_fields(tuple_arg, fields=new_args) if isinstance(tuple_arg, relax.Tuple) else new_args[0]
    return replace_fields(call, args=[gv, new_tuple] + list(call.args[2:]))


def _fresh_name(base: str, mod: ir.IRModule) -> str:
    taken = {gv.name_hint for gv in mod.functions}
    name, i = base, 1
    while name in taken:
        name, i = f"{base}{i}", i + 1
    return name


class ReadTransposedInPlace:
    """Module pass form (``ReadTransposedInPlace()(mod)``) of `read_transposed_in_place`."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        return read_transposed_in_place(mod)
