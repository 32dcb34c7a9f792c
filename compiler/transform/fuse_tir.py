"""FuseTIR: turn each primitive Relax function FuseOps made into one PrimFunc.

Why: a group of ``call_tir`` calls is only a promise of fusion until its PrimFuncs are merged
into a single loop nest program whose intermediate results are local ``T.alloc_buffer``\\ s;
then codegen emits one kernel and no intermediate tensor is allocated by the VM.

The fused PrimFunc ``fused_<names>`` is private and takes the group's external inputs (each
named after the first PrimFunc parameter it is passed to) followed by the output; each
intermediate and the output buffer are renamed ``<buffer>_intermediate``; the blocks are kept
in order under one root block; its attributes are the first PrimFunc's ``"tir.noalias"`` only
(the op_pattern is dropped, as in TVM). Calls of the primitive function become
``R.call_tir(cls.fused_..., args, out_sinfo=...)``, the primitive functions are removed, and
so is every PrimFunc no longer called (TVM runs DeadCodeElimination here). A module without
primitive functions is returned unchanged, so running the pass twice is the same as once.

Places: the members' TIR that has no place of its own (what LegalizeOps made) takes the span
of the member's call, and the call_tir's `FusedSpan` learns which spans are whose, so an error
in the fused kernel points at the op (or the user's own TIR) it came from.

Symbolic shapes: each fused PrimFunc's own ``n`` is bound, by matching every inner PrimFunc's
buffer shapes (and scalar parameters) against the Relax shapes of the values it is called
with, to one fresh variable per symbolic variable of the group, so the merged loop nests agree
on ``n``. A parameter whose shape is symbolic is a ``T.handle`` named after its buffer (printed
``x_handle``: TVM 0.27's parameter is the buffer itself) with a ``T.match_buffer`` that binds
``n``; variables the
group received through a ``tir_vars: R.Shape([m])`` parameter (see FuseOps) become trailing
``T.int64`` parameters, passed by the call_tir's ``tir_vars=R.shape([m])``.
"""

from __future__ import annotations

import copy
import dataclasses
import re

from tvmscript import ir
from tvmscript.diagnostics import FusedSpan, plain_span
from tvmscript.ir import relax, tir
from tvmscript.ir.mutator import substitute
from tvmscript.ir.structural import structural_equal
from tvmscript.ir.tir_visitor import TIRVisitor, vars_in

from ..block_builder import BlockBuilder
from ..kernel_places import numbered_spans
from ._common import call_tir_args, call_tir_tir_vars, copy_module, replace_fields
from .dead_code_elimination import DeadCodeElimination


def _replace_in_place(node, kind, mapping: dict, seen: set) -> None:
    """Replace, in place, every object of type ``kind`` (buffers or variables) that
    ``mapping`` has, below a freshly copied TIR tree: expressions, loads and stores, loop
    extents, block domains, read/write regions, match-buffer sources and, for variables,
    buffer shapes (a buffer's ``data`` variable is its own)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, kind):
                node[i] = mapping.get(item, item)
            else:
                _replace_in_place(item, kind, mapping, seen)
        return
    if isinstance(node, dict):
        for k, v in list(node.items()):
            if isinstance(v, kind):
                node[k] = mapping.get(v, v)
            else:
                _replace_in_place(v, kind, mapping, seen)
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, (type, kind, tir.Var, tir.IntImm, tir.FloatImm)):
        return
    if kind is tir.Buffer and isinstance(node, tir.Buffer):
        return
    if id(node) in seen:
        return
    seen.add(id(node))
    for f in dataclasses.fields(node):
        if f.name in ("span", "comments") or (isinstance(node, tir.Buffer) and f.name == "data"):
            continue
        v = getattr(node, f.name)
        if isinstance(v, kind):
            if v in mapping:
                setattr(node, f.name, mapping[v])
        else:
            _replace_in_place(v, kind, mapping, seen)


def _fresh(name, taken):
    cand, k = name, 1
    while cand in taken:
        cand = f"{name}_{k}"
        k += 1
    taken.add(cand)
    return cand


def _fresh_block_name(name: str, taken: set) -> str:
    """A block name not in ``taken``, TVM's way: a repeated name gets its trailing number raised
    (``compute``, ``compute1``, ``compute2``; ``conv2`` -> ``conv3``), so the fused function's
    blocks are named as TVM's FuseTIR names them and a schedule written for TVM's output finds
    them."""
    cand = name
    if cand in taken:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        base, k = (m.group(1), int(m.group(2)) + 1) if m else (name, 1)
        while f"{base}{k}" in taken:
            k += 1
        cand = f"{base}{k}"
    taken.add(cand)
    return cand


def _intermediate_name(buf_name: str, allocated: list) -> str:
    """``<output>_intermediate`` for a fused op's output buffer; when an earlier buffer has that
    name, ``_1``, then ``_1_2``... are appended, as TVM's FuseTIR names them."""
    taken = {b.name for b in allocated}
    name, k = buf_name + "_intermediate", 0
    while name in taken:
        k += 1
        name = f"{name}_{k}"
    return name


def _uniquify_names(buffers, stmts) -> None:
    """Rename what still collides after fusion: buffers of different PrimFuncs sharing a name get
    ``_1``, ``_2`` (as TVM's printer would show them), repeated block names a raised number."""
    taken: set = set()
    for buf in buffers:
        name = _fresh(buf.name, taken)
        if name != buf.name:
            _rename_buffer(buf, name)
    block_names: set = set()

    class _Blocks(TIRVisitor):
        def visit_Block(self, node):
            node.name = _fresh_block_name(node.name, block_names)
            self.generic_visit(node)

    for st in stmts:
        _Blocks().visit(st)


def _merge_repeated_regions(stmt) -> None:
    """One read (write) region per buffer where fusion made two the same: ``multiply(b, b)``
    reads ``A[i]`` and ``B[i]``, which both become ``b[i]``. TVM's FuseTIR keeps the first
    region of each buffer; tvms keeps a later one that differs, so the regions still cover
    every access."""

    def merged(regions):
        out = []
        for r in regions:
            if not any(o.buffer is r.buffer and structural_equal(o.region, r.region) for o in out):
                out.append(r)
        return out

    class _Blocks(TIRVisitor):
        def visit_Block(self, node):
            node.reads, node.writes = merged(node.reads), merged(node.writes)
            self.generic_visit(node)

    _Blocks().visit(stmt)


def _rename_buffer(buf, name: str) -> None:
    buf.name = name
    if isinstance(buf.data, tir.Var):
        buf.data.name = name


def _root_parts(func: tir.PrimFunc):
    """(alloc_buffers, body statement) of a PrimFunc whose body may be a root block."""
    body = func.body
    if isinstance(body, tir.BlockRealize) and body.block.name == "root" and not body.block.iter_vars:
        return list(body.block.alloc_buffers), body.block.body
    return [], body


class _GroupSyms:
    """The fused function's symbolic variables: one fresh ``tir.Var`` per symbolic variable of
    the group's Relax shapes (fresh, so no two PrimFuncs share a variable object)."""

    def __init__(self) -> None:
        self.fused: dict = {}  # Relax-level tir.Var -> the fused function's tir.Var

    def to_fused(self, expr):
        """A Relax-level dim (or ``tir_vars`` value) in terms of the fused function's variables."""
        for v in vars_in([expr]):
            if v not in self.fused:
                self.fused[v] = tir.Var(v.dtype, v.name)
        return substitute(expr, self.fused)


def _inner_sym_map(prim: tir.PrimFunc, sinfos: list, tir_vars: list, syms: _GroupSyms) -> dict:
    """Each symbolic variable of inner PrimFunc ``prim`` -> its value in the fused function:
    a buffer dim that is a plain variable takes the Relax dim of the tensor passed there
    (``sinfos``: the call's arguments then its output); a scalar parameter takes the call's
    ``tir_vars`` value."""
    mapping: dict = {}
    buf_params = [p for p in prim.params if p in prim.buffer_map]
    for p, sinfo in zip(buf_params, sinfos):
        shape = getattr(sinfo, "shape", None)
        if shape is None:
            continue
        for inner, outer in zip(prim.buffer_map[p].shape, shape):
            if isinstance(inner, tir.Var) and inner not in mapping:
                mapping[inner] = syms.to_fused(outer)
    scalars = [p for p in prim.params if p not in prim.buffer_map]
    for p, value in zip(scalars, tir_vars):
        mapping[p] = syms.to_fused(value)
    return mapping


def _bind_inner_syms(prim: tir.PrimFunc, binding, syms: _GroupSyms) -> None:
    """Rewrite a (copied) inner PrimFunc onto the fused function's symbolic variables."""
    args = call_tir_args(binding.value)
    sinfos = [a.struct_info for a in args] + [binding.var.struct_info]
    mapping = _inner_sym_map(prim, sinfos, call_tir_tir_vars(binding.value), syms)
    if mapping:
        seen: set = set()
        _replace_in_place([prim.buffer_map[p] for p in prim.params if p in prim.buffer_map], tir.Var, mapping, seen)
        _replace_in_place(prim.body, tir.Var, mapping, seen)


def _is_symbolic(buf: tir.Buffer) -> bool:
    return any(not isinstance(d, tir.IntImm) for d in buf.shape)


def _stamp_spans(stmt, span) -> None:
    """Give the loads, stores and blocks of one member's (copied) TIR that have no place of
    their own, the TIR LegalizeOps made, the span of the member's call: an error found in the
    fused kernel then points at the op it came from (through the call's `FusedSpan`)."""
    if span is None:
        return

    class _Stamp(TIRVisitor):
        def visit_BufferLoad(self, node):
            if node.span is None:
                node.span = span
            self.generic_visit(node)

        visit_BufferStore = visit_Block = visit_BufferLoad

    _Stamp().visit(stmt)


def _member_places(mod: ir.IRModule, gfunc: relax.Function) -> tuple:
    """(stamped, owned) for a group's `FusedSpan`: per member, the span `_stamp_spans` gives its
    TIR, and the spans its PrimFunc has of its own."""
    members = [b for blk in gfunc.body.blocks for b in blk.bindings]
    stamped = tuple(plain_span(b.value.span) for b in members)
    owned = tuple(frozenset(numbered_spans(mod.functions[b.value.args[0]])) for b in members)
    return stamped, owned


def _param_handle(handle: tir.Var, buf: tir.Buffer) -> tir.Var:
    """The fused parameter for ``buf``: a symbolic-shape buffer is matched from a fresh handle
    (named after the buffer once the buffers' names are final); a static one keeps its handle,
    printed as ``A: T.Buffer(...)``."""
    if _is_symbolic(buf):
        return tir.Var(handle.dtype, buf.name)
    return handle


def fuse_group(mod: ir.IRModule, gfunc: relax.Function, name: str) -> tir.PrimFunc:
    """The PrimFunc computing primitive Relax function ``gfunc`` (a dataflow block of call_tirs)."""
    bindings = [b for blk in gfunc.body.blocks for b in blk.bindings]
    value_buf: dict = {}  # relax var -> tir.Buffer holding it in the fused function
    param_handles: dict = {}  # relax param -> tir handle var
    allocs, outputs, stmts = [], [], []
    attrs = {}
    out_var = gfunc.body.body
    syms = _GroupSyms()
    for p in gfunc.params:  # the fused variables are named in the order the parameters define them
        for d in getattr(p.struct_info, "shape", None) or []:
            syms.to_fused(d)
    for n, b in enumerate(bindings):
        prim = copy.deepcopy(mod.functions[b.value.args[0]])
        if n == 0 and "tir.noalias" in prim.attrs:
            attrs["tir.noalias"] = prim.attrs["tir.noalias"]
        _bind_inner_syms(prim, b, syms)
        args = call_tir_args(b.value)
        buf_params = [p for p in prim.params if p in prim.buffer_map]
        bufs = [prim.buffer_map[p] for p in buf_params]
        bmap = {}
        for a, p, buf in zip(args, buf_params, bufs):
            if a in value_buf:
                bmap[buf] = value_buf[a]
            else:
                value_buf[a] = buf
                param_handles[a] = _param_handle(p, buf)
        inner_allocs, stmt = _root_parts(prim)
        _stamp_spans(stmt, plain_span(b.value.span))
        allocs.extend(inner_allocs)
        out_buf = bufs[len(args)]
        # Named among every buffer allocated so far, the function's output included (TVM
        # allocates it like the others and turns it into a parameter at the end).
        _rename_buffer(out_buf, _intermediate_name(out_buf.name, allocs + outputs))
        value_buf[b.var] = out_buf
        if b.var is out_var:
            param_handles[b.var] = _param_handle(buf_params[len(args)], out_buf)
            if param_handles[b.var] is buf_params[len(args)]:
                param_handles[b.var].name = out_buf.name
            outputs.append(out_buf)
        else:
            allocs.append(out_buf)
        _replace_in_place(stmt, tir.Buffer, bmap, set())
        if bmap:
            _merge_repeated_regions(stmt)
        stmts.append(stmt)
    params, buffer_map = [], {}
    tensor_params = [p for p in gfunc.params if not isinstance(p.struct_info, relax.ShapeStructInfo)]
    for p in tensor_params + [out_var]:
        h = param_handles[p]
        params.append(h)
        buffer_map[h] = value_buf[p]
    params += _scalar_params(gfunc, syms)
    _uniquify_names([buffer_map[h] for h in params if h in buffer_map] + allocs, stmts)
    for h, buf in buffer_map.items():
        if _is_symbolic(buf):
            buf.data = h  # a matched buffer's data is its handle, as the parser builds it
            h.name = buf.name  # TVM 0.27's parameter is the buffer: printed ``x_handle``
    root = tir.Block("root", [], [], [], tir.seq(stmts), alloc_buffers=allocs)
    body = tir.BlockRealize([], tir.IntImm("bool", 1), root)
    return tir.PrimFunc(params, buffer_map, body, attrs=attrs, private=True)


def _scalar_params(gfunc: relax.Function, syms: _GroupSyms) -> list:
    """The fused function's ``T.int64`` parameters: the variables of the group's
    ``R.Shape`` parameters, after the buffers (where call_tir passes its ``tir_vars``)."""
    scalars = []
    for p in gfunc.params:
        if isinstance(p.struct_info, relax.ShapeStructInfo):
            for value in p.struct_info.values or []:
                v = syms.to_fused(value)
                if isinstance(v, tir.Var) and v not in scalars:
                    scalars.append(v)
    return scalars


def _call_tir_of_group(expr: relax.Call, new_gv, ret, places: tuple) -> relax.Call:
    """``R.call_tir(fused, (tensors...), out_sinfo=ret, tir_vars=R.shape([...]))`` for a call of a
    primitive function: shape arguments become the ``tir_vars``. Its `FusedSpan` learns where
    each member's TIR is in the fused PrimFunc (``places``: `_member_places`), which are another
    group's when the two fused to the same PrimFunc."""
    tensors = [a for a in expr.args if not isinstance(a.struct_info, relax.ShapeStructInfo)]
    values = [v for a in expr.args if isinstance(a.struct_info, relax.ShapeStructInfo)
              for v in (a.values if isinstance(a, relax.ShapeExpr) else a.struct_info.values)]
    call_args = [new_gv, relax.Tuple(tensors, relax.TupleStructInfo([a.struct_info for a in tensors]))]
    if values:
        call_args.append(relax.ShapeExpr(values, relax.ShapeStructInfo(values, len(values))))
    span = expr.span
    if isinstance(span, FusedSpan):
        span = dataclasses.replace(span, stamped=places[0], owned=places[1])
    return relax.Call(relax.Op("relax.call_tir"), call_args, sinfo_args=[ret], struct_info=ret, span=span)


def _rewrite_calls(func: relax.Function, gmap: dict) -> relax.Function:
    """``func`` with calls of primitive functions replaced by call_tir of their PrimFuncs."""
    def rw(expr):
        if isinstance(expr, relax.Call) and expr.op in gmap:
            return _call_tir_of_group(expr, *gmap[expr.op])
        return expr

    changed = False
    blocks = []
    for blk in func.body.blocks:
        bs = []
        for b in blk.bindings:
            v = rw(b.value) if isinstance(b, relax.VarBinding) else b.value
            if v is not b.value:
                changed = True
                b = replace_fields(b, value=v)
            bs.append(b)
        blocks.append(replace_fields(blk, bindings=bs))
    if not changed:
        return func
    return replace_fields(func, body=replace_fields(func.body, blocks=blocks))


class FuseTIR:
    """``IRModule -> IRModule``: primitive Relax functions become fused PrimFuncs."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        groups = [(gv, f) for gv, f in mod.functions.items()
                  if isinstance(f, relax.Function) and f.attrs.get("Primitive")]
        if not groups:
            return mod
        rest = copy_module(mod)
        for gv, _ in groups:
            del rest[gv]
        # The builder's add_func names each fused PrimFunc after its group and reuses an equal
        # one already added: groups that fuse to the same computation share it, as in TVM.
        bb = BlockBuilder(rest)
        existing = set(rest.functions)
        places: dict = {}  # fused PrimFunc -> `_member_places` of the group it was made for
        gmap = {}
        for gv, f in groups:
            kernel = bb.add_func(fuse_group(mod, f, gv.name_hint), gv.name_hint)
            if kernel not in existing:
                places.setdefault(kernel, _member_places(mod, f))
            gmap[gv] = (kernel, f.ret_struct_info, places.get(kernel, ((), ())))
        new = bb.get()
        for gv, f in list(new.functions.items()):
            if isinstance(f, relax.Function):
                new[gv] = _rewrite_calls(f, gmap)
        return DeadCodeElimination(bindings=False)(new)
