"""FuseOps: group the ``call_tir`` bindings of each dataflow block that should run as one kernel.

Why: every separate PrimFunc call materializes its output in memory; fusing a matmul with
the bias add and activation that follow it (and elementwise chains generally) lets FuseTIR
emit one loop nest per group. This is TVM's operator-fusion algorithm on the dataflow graph,
driven by the ``"op_pattern"`` attributes AnnotateTIROpPattern set. Which bindings form a
group is TVM's graph partitioner (`fusion_partition`): each node fuses into its immediate
post-dominator within the block when every node on every path there fits the phase's pattern
limit, so a diamond (a matmul's result used by ``erf(x / c) + 1`` and by the multiply that
ends GELU) is one kernel. A value seen outside the block, or used by a binding that is not a
fusable call, has no post-dominator and is not fused past. Each group of two or more calls
becomes a private Relax function ``fused_<prim names>`` with attribute
``"Primitive": 1``, called from the block; FuseTIR then turns it into one PrimFunc. Calls to
PrimFuncs without a known pattern, or with tensors of unknown shape, are left alone. Running the
pass again changes nothing: the group calls are not ``call_tir`` calls.

The group's call keeps where it came from: its span is a `FusedSpan` listing each member
binding and its call's place, and what each tensor the fused kernel takes is to them, so an
error about the kernel is told at the user's binding, in the user's names.

Symbolic shapes fuse as static ones do: dims are compared structurally (``n`` equals ``n``).
A symbolic variable the group uses (in a shape, or a member's ``tir_vars``) that no input
tensor's shape defines as a plain dim, e.g. one only in the output shape, is passed as a last
parameter ``tir_vars: R.Shape([m])`` of the primitive function, as TVM's FuseOps does, so the
function is well formed and FuseTIR can give it to the fused PrimFunc as a ``T.int64``.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import relax, tir
from tvmscript.diagnostics import FusedPart, FusedSpan, plain_span

from ._common import (call_tir_args, call_tir_tir_vars, copy_module, is_call_tir, kBroadcast,
                      kElemWise, kOpaque, known_shape, replace_fields, same_shape, sinfo_tir_vars,
                      substitute_relax, var_use_counts)
from .fusion_partition import FusionGraph, partition


def _fusable_call(value) -> bool:
    """A ``call_tir`` FuseOps may group: one tensor output and tensor arguments whose shapes are
    known (static or symbolic), with at most a ``tir_vars`` shape after the arguments."""
    if not (is_call_tir(value) and len(value.args) in (2, 3) and len(value.sinfo_args) == 1):
        return False
    if len(value.args) == 3 and not isinstance(value.args[2], relax.ShapeExpr):
        return False
    return known_shape(value.sinfo_args[0]) and all(
        isinstance(a, (relax.Var, relax.Constant)) and known_shape(a.struct_info)
        for a in call_tir_args(value))


def _binding_pattern(mod, binding) -> int:
    """The op pattern of a binding: its PrimFunc's ``"op_pattern"`` for a call FuseOps can
    group, ``kOpaque`` for anything else (which is then never fused, nor fused past)."""
    value = binding.value
    if isinstance(binding, relax.VarBinding) and _fusable_call(value):
        func = mod.functions.get(value.args[0])
        if isinstance(func, tir.PrimFunc) and "op_pattern" in func.attrs:
            return int(func.attrs["op_pattern"])
    return kOpaque


def _edge_pattern(producer, consumer, consumer_pattern: int) -> int:
    """The pattern of the edge from a producer's value to a binding using it: the consumer's
    pattern, except that a broadcast op whose argument already has the output's shape is
    elementwise to that argument (so a matmul fuses with a bias add after it)."""
    if consumer_pattern == kBroadcast and \
            same_shape(producer.var.struct_info, consumer.value.sinfo_args[0]):
        return kElemWise
    return consumer_pattern


def _fusion_graph(mod, block: relax.DataflowBlock, outside_uses: dict) -> FusionGraph:
    """The block as a `FusionGraph`: its bindings, an edge for each use of one's value by a
    later one, and which values escape the block (TVM's extern references: a variable that is
    not a DataflowVar, one of the block's outputs, or one used after the block)."""
    bindings = block.bindings
    index = {b.var: i for i, b in enumerate(bindings)}
    pattern = [_binding_pattern(mod, b) for b in bindings]
    outputs = [[] for _ in bindings]
    for j, b in enumerate(bindings):
        for v, n in var_use_counts(b).items():
            if v in index:
                i = index[v]
                outputs[i].extend([(j, _edge_pattern(bindings[i], b, pattern[j]))] * n)
    extern = [not isinstance(b.var, relax.DataflowVar) or b.var in block.outputs
              or outside_uses.get(b.var, 0) > 0 for b in bindings]
    return FusionGraph(pattern, outputs, extern)


def _partition(mod, block: relax.DataflowBlock, outside_uses: dict):
    """Group ids (union-find roots) for the bindings of ``block`` (None: not fusable)."""
    graph = _fusion_graph(mod, block, outside_uses)
    roots = partition(graph)
    return [r if graph.pattern[i] != kOpaque else None for i, r in enumerate(roots)]


def _unique_name(mod, name, taken):
    cand, k = name, 1
    while cand in mod or cand in taken:
        cand = f"{name}{k}"
        k += 1
    taken.add(cand)
    return cand


class FuseOps:
    """``IRModule -> IRModule``: fusable call_tir chains become calls of primitive functions."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        new = copy_module(mod)
        taken: set = set()
        self._lv_count = self._gv_count = 0
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function) and not func.attrs.get("Primitive"):
                new[gv] = self._fuse_function(mod, new, func, taken, gv.name_hint)
        return new

    def _fresh_lv(self) -> str:
        """``lv``, ``lv1``, ``lv2``...: the names TVM's BlockBuilder gives the fused calls, counted
        over the whole module."""
        name = "lv" if self._lv_count == 0 else f"lv{self._lv_count}"
        self._lv_count += 1
        return name

    def _fresh_gv(self) -> str:
        """``gv``, ``gv1``...: the name TVM's BlockBuilder gives a fused call whose result leaves
        the dataflow block (``R.output``), counted over the whole module as ``lv`` is."""
        name = "gv" if self._gv_count == 0 else f"gv{self._gv_count}"
        self._gv_count += 1
        return name

    def _fuse_function(self, mod, new, func, taken, fname: str):
        blocks = list(func.body.blocks)
        changed = False
        self._renamed: dict = {}  # block outputs a group call now binds under TVM's name (`_fresh_gv`)
        for bi, block in enumerate(blocks):
            if not isinstance(block, relax.DataflowBlock):
                continue
            rest = relax.SeqExpr(blocks[:bi] + blocks[bi + 1:], func.body.body)
            outside = var_use_counts(rest)
            roots = _partition(mod, block, outside)
            members: dict = {}
            for i, r in enumerate(roots):
                if r is not None:
                    members.setdefault(r, []).append(i)
            members = {r: m for r, m in members.items() if len(m) > 1}
            if not members:
                continue
            changed = True
            blocks[bi] = self._rewrite_block(mod, new, block, roots, members, taken, outside, fname)
        if not changed:
            return func
        body = replace_fields(func.body, blocks=blocks)
        if self._renamed:  # their uses after their block: later blocks, the result
            body = substitute_relax(body, self._renamed)
        return replace_fields(func, body=body)

    def _rewrite_block(self, mod, new, block, roots, members, taken, outside, fname: str):
        bindings = block.bindings
        counts = var_use_counts(relax.SeqExpr([block], relax.Tuple([])))
        replacement = {}  # index of the group's last binding -> new binding
        drop = set()
        rename = {}  # trivial `gv = lv` bindings folded into the group call
        for r, idxs in members.items():
            last = idxs[-1]
            in_group = {bindings[i].var for i in idxs}
            params, args = [], []
            pmap = {}
            body_bindings = []
            used_by = []  # per parameter: (index in the group of the call using it first, what it is)
            for i in idxs:
                b = bindings[i]
                new_args = []
                for a in call_tir_args(b.value):
                    if a in in_group:
                        new_args.append(pmap[a])
                        continue
                    if a not in pmap:
                        # Constants (weights bound with BindParams) are passed in like variables.
                        name = a.name_hint if isinstance(a, relax.Var) else f"param_{len(params)}"
                        p = relax.Var(name, a.struct_info)
                        pmap[a] = p
                        params.append(p)
                        args.append(a)
                        used_by.append((len(body_bindings), f"argument '{a.name_hint}'" if isinstance(a, relax.Var)
                                        else "a constant argument"))
                    new_args.append(pmap[a])
                call = replace_fields(b.value, args=[b.value.args[0], relax.Tuple(new_args, relax.TupleStructInfo(
                    [x.struct_info for x in new_args]))] + list(b.value.args[2:]))
                cls = relax.Var if i == last else relax.DataflowVar
                v = cls("gv" if i == last else b.var.name_hint, b.var.struct_info)
                pmap[b.var] = v
                body_bindings.append(relax.VarBinding(v, call))
            out = pmap[bindings[last].var]
            ret = bindings[last].var.struct_info
            free = _undefined_tir_vars(params, body_bindings, ret)
            if free:
                shape = relax.ShapeExpr(free, relax.ShapeStructInfo(free, len(free)))
                params.append(relax.Var("tir_vars", relax.ShapeStructInfo(free, len(free))))
                args.append(shape)
            name = _unique_name(mod, "fused_" + "_".join(bindings[i].value.args[0].name_hint for i in idxs), taken)
            gfunc = relax.Function(
                params=params,
                body=relax.SeqExpr([relax.DataflowBlock(body_bindings, outputs=[pmap[bindings[last].var]])], out, ret),
                ret_struct_info=ret, attrs={"Primitive": 1}, private=True,
                struct_info=relax.FuncStructInfo([p.struct_info for p in params], ret))
            fgv = ir.GlobalVar(name)
            new[fgv] = gfunc
            call = relax.Call(fgv, args, struct_info=ret,
                              span=_group_span(fname, [bindings[i] for i in idxs], used_by))
            old_var = bindings[last].var
            var = old_var
            # `gv = lv6` with lv6 used only there: bind the group call to gv directly.
            if isinstance(old_var, relax.DataflowVar) and counts.get(old_var, 0) == 1 \
                    and outside.get(old_var, 0) == 0:
                for k, b in enumerate(bindings):
                    if isinstance(b, relax.VarBinding) and b.value is old_var \
                            and not isinstance(b.var, relax.DataflowVar):
                        var = b.var
                        drop.add(k)
            if var is old_var:  # a fresh variable, named as TVM's BlockBuilder names what it emits
                var = relax.DataflowVar(self._fresh_lv(), ret) if isinstance(old_var, relax.DataflowVar) \
                    else relax.Var(self._fresh_gv(), ret)
            rename[old_var] = var
            if not isinstance(old_var, relax.DataflowVar) and var is not old_var:
                self._renamed[old_var] = var  # used after the block too: renamed there by `_fuse_function`
            for i in idxs[:-1]:
                drop.add(i)
            replacement[last] = relax.VarBinding(var, call)
        out_bindings = []
        for k, b in enumerate(bindings):
            if k in drop:
                continue
            b = replacement.get(k, b)
            out_bindings.append(_subst_binding(b, rename))
        return replace_fields(block, bindings=out_bindings, outputs=[rename.get(v, v) for v in block.outputs])


def _group_span(fname: str, members: list, used_by: list):
    """The `FusedSpan` of a group's call: each member binding and its call's place, and for
    each tensor the fused kernel will take (the group's arguments, then its result) the member
    that uses it first (makes it) and what it is to that member (``argument 'x'``)."""
    parts = tuple(FusedPart(fname, b.var.name_hint, plain_span(b.value.span)) for b in members)
    roles = list(used_by) + [(len(members) - 1, "the result")]
    return FusedSpan.of(parts, tuple(roles), len(members) - 1)


def _undefined_tir_vars(params, body_bindings, ret) -> list:
    """The symbolic variables a group uses (in its shapes, its members' ``tir_vars`` and its
    result) that no parameter tensor's shape defines as a plain dim, in order of first use:
    they must be passed to the primitive function explicitly."""
    defined = {d for p in params if known_shape(p.struct_info)
               for d in p.struct_info.shape if isinstance(d, tir.Var)}
    used: dict = {}
    for b in body_bindings:
        sinfo_tir_vars(b.var.struct_info, used)
        for s in b.value.sinfo_args:
            sinfo_tir_vars(s, used)
        sinfo_tir_vars(relax.ShapeStructInfo(call_tir_tir_vars(b.value)), used)
    sinfo_tir_vars(ret, used)
    return [v for v in used if v not in defined]


def _subst(expr, m):
    if isinstance(expr, relax.Var):
        return m.get(expr, expr)
    if isinstance(expr, relax.Tuple):
        fields = [_subst(f, m) for f in expr.fields]
        if all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return replace_fields(expr, fields=fields)
    if isinstance(expr, relax.Call):
        args = [_subst(a, m) for a in expr.args]
        if all(a is b for a, b in zip(args, expr.args)):
            return expr
        return replace_fields(expr, args=args)
    if isinstance(expr, relax.TupleGetItem):
        t = _subst(expr.tuple_value, m)
        return expr if t is expr.tuple_value else replace_fields(expr, tuple_value=t)
    return expr


def _subst_binding(b, m):
    if not m:
        return b
    v = _subst(b.value, m)
    return b if v is b.value else replace_fields(b, value=v)
