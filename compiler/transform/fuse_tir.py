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
"""

from __future__ import annotations

import copy
import dataclasses
import re

from tvmscript import ir, relax, tir

from tvmscript.tir_visitor import TIRVisitor

from ..block_builder import BlockBuilder
from ._common import call_tir_args, copy_module, replace_fields
from .dead_code_elimination import DeadCodeElimination


def _replace_buffers(node, bmap, seen=None):
    """Replace, in place, every reference to a buffer in ``bmap`` below a freshly copied
    TIR tree (loads, stores, read/write regions, match-buffer sources)."""
    if seen is None:
        seen = set()
    if isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, tir.Buffer):
                if item in bmap:
                    node[i] = bmap[item]
            else:
                _replace_buffers(item, bmap, seen)
        return
    if isinstance(node, dict):
        for v in node.values():
            _replace_buffers(v, bmap, seen)
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, (tir.Buffer, tir.Var, tir.IntImm, tir.FloatImm)):
        return
    if id(node) in seen:
        return
    seen.add(id(node))
    for f in dataclasses.fields(node):
        if f.name in ("span", "comments"):
            continue
        v = getattr(node, f.name)
        if isinstance(v, tir.Buffer):
            if v in bmap:
                setattr(node, f.name, bmap[v])
        else:
            _replace_buffers(v, bmap, seen)


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


def fuse_group(mod: ir.IRModule, gfunc: relax.Function, name: str) -> tir.PrimFunc:
    """The PrimFunc computing primitive Relax function ``gfunc`` (a dataflow block of call_tirs)."""
    bindings = [b for blk in gfunc.body.blocks for b in blk.bindings]
    value_buf: dict = {}  # relax var -> tir.Buffer holding it in the fused function
    param_handles: dict = {}  # relax param -> tir handle var
    allocs, outputs, stmts = [], [], []
    attrs = {}
    out_var = gfunc.body.body
    for n, b in enumerate(bindings):
        prim = copy.deepcopy(mod.functions[b.value.args[0]])
        if n == 0 and "tir.noalias" in prim.attrs:
            attrs["tir.noalias"] = prim.attrs["tir.noalias"]
        args = call_tir_args(b.value)
        bufs = [prim.buffer_map[p] for p in prim.params]
        bmap = {}
        for a, p, buf in zip(args, prim.params, bufs):
            if a in value_buf:
                bmap[buf] = value_buf[a]
            else:
                value_buf[a] = buf
                param_handles[a] = p
        inner_allocs, stmt = _root_parts(prim)
        allocs.extend(inner_allocs)
        out_buf = bufs[len(args)]
        # Named among every buffer allocated so far, the function's output included (TVM
        # allocates it like the others and turns it into a parameter at the end).
        _rename_buffer(out_buf, _intermediate_name(out_buf.name, allocs + outputs))
        value_buf[b.var] = out_buf
        if b.var is out_var:
            param_handles[b.var] = prim.params[len(args)]
            param_handles[b.var].name = out_buf.name
            outputs.append(out_buf)
        else:
            allocs.append(out_buf)
        _replace_buffers(stmt, bmap)
        stmts.append(stmt)
    params, buffer_map = [], {}
    for p in list(gfunc.params) + [out_var]:
        h = param_handles[p]
        params.append(h)
        buffer_map[h] = value_buf[p]
    _uniquify_names([buffer_map[h] for h in params] + allocs, stmts)
    root = tir.Block("root", [], [], [], tir.seq(stmts), alloc_buffers=allocs)
    body = tir.BlockRealize([], tir.IntImm("bool", 1), root)
    return tir.PrimFunc(params, buffer_map, body, attrs=attrs, private=True)


def _rewrite_calls(func: relax.Function, gmap: dict) -> relax.Function:
    """``func`` with calls of primitive functions replaced by call_tir of their PrimFuncs."""
    def rw(expr):
        if isinstance(expr, relax.Call) and expr.op in gmap:
            new_gv, ret = gmap[expr.op]
            args = list(expr.args)
            return relax.Call(relax.Op("relax.call_tir"),
                              [new_gv, relax.Tuple(args, relax.TupleStructInfo([a.struct_info for a in args]))],
                              sinfo_args=[ret], struct_info=ret, span=expr.span)
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
        gmap = {gv: (bb.add_func(fuse_group(mod, f, gv.name_hint), gv.name_hint), f.ret_struct_info)
                for gv, f in groups}
        new = bb.get()
        for gv, f in list(new.functions.items()):
            if isinstance(f, relax.Function):
                new[gv] = _rewrite_calls(f, gmap)
        return DeadCodeElimination(bindings=False)(new)
