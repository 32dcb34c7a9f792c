"""Packing: a read copied into a compact panel (``reduce extents x tile``, contiguous along
the tile) that the reduction then reads with unit stride, instead of strided rows that compete
for a few cache sets.

How much a panel would be reused (`pack_reuse`), which the register tile and the loop tile
both plan by; and the panel itself (`packed_panel`) with the nest that fills it
(`_fill_nest`), built directly because ``cache_read`` + ``compute_at`` would copy into a
buffer of the operand's full shape and layout, allocated once outside the parallel loop."""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.mutator import substitute

from ..lower_tir import VECTORIZE_ANN, dtype_bytes
from .host import BLOCK_TILE_BYTES
from .nest import extent_product
from .plan import Plan
from .symbolic import shifted_start, symbolic_extents_small

# The largest stride along the tile a panel is filled along as vectors (`_fill_nest`): LLVM
# loads a stride-2 row as two vectors and a shuffle; the first convolutions of resnet18 (7x7,
# stride 2) and mobilenet_v2 (3x3) took 0.83x and 0.79x the time filled so, against a
# transposing scalar copy, the later stride-2 convolutions the same.
STRIDED_FILL_MAX = 2
SMALL_SYMBOLIC_REUSE = 1  # what `pack_reuse` counts a symbolic extent as, in a small nest


def pack_reuse(ld, st, inner, nontrivial, rhs_loads) -> int:
    """How often a panel of ``ld`` would be reused with ``inner`` tiled: the iterations of the
    spatial loops it does not depend on; 0 when it cannot be packed (it must depend on the
    reduce loops and vary along ``inner``, and be the only read of its buffer)."""
    if not st.get(inner.iv.var, 0) or not any(st.get(lp.iv.var, 0) for lp in nontrivial if lp.kind == "R"):
        return 0
    if sum(1 for other in rhs_loads if other.buffer is ld.buffer) != 1:
        return 0
    symbolic_reuse = SMALL_SYMBOLIC_REUSE if symbolic_extents_small.get() else 1 << 20
    return extent_product([lp for lp in nontrivial if lp.kind == "S" and lp is not inner
                           and not st.get(lp.iv.var, 0)], symbolic_reuse)


def packed_panel(plan: Plan, binding, base):
    """A function wrapping a statement into a block that allocates and fills a contiguous
    panel first, and ``(buffer, load)``: the planned load's buffer and the read of the panel
    that replaces it (see `block_edits.load_swapper`)."""
    ld, inner, others_r = plan.pack, plan.inner, plan.others_r
    dims = []  # (iterator var, extent, origin expression or None) per panel axis
    for lp in others_r:
        if plan.ksplit and lp is others_r[0]:
            dims.append((lp.iv.var, tir.IntImm(lp.dtype, plan.ksplit), base[lp.iv.var]))
        else:
            dims.append((lp.iv.var, lp.extent, lp.min if not tir.is_const_int(lp.min, 0) else None))
    dims.append((inner.iv.var, tir.IntImm(inner.dtype, plan.tile), base.get(inner.iv.var)))
    strides = [plan.pack_strides.get(d[0], 0) for d in dims]
    # Packed up front, the panel holds every tile: leading axes for the loops above it (the
    # spatial loops it depends on, the vector loop's tiles), indexed by those loops.
    lead = []  # (update-block index, extent, source stride, iterator -> value given the axis)
    if plan.pack_upfront:
        for lp in plan.outer_s:
            lead.append((lp.iv.var if tir.is_const_int(lp.min, 0) else tir.Sub(lp.dtype, lp.iv.var, lp.min),
                         lp.extent, plan.pack_strides.get(lp.iv.var, 0), lp))
        if plan.vec_outer is not None:
            lead.append((plan.vec_outer, tir.IntImm(inner.dtype, -(-inner.const_extent // plan.tile)),
                         plan.pack_strides.get(inner.iv.var, 0) * plan.tile, inner))
    panel = tir.Buffer(ld.buffer.name + "_panel", [x[1] for x in lead] + [d[1] for d in dims], ld.buffer.dtype)
    panel.data = tir.Var("handle", panel.name)
    # In the update block: panel[leading loops..., iterator - origin, ...].
    idx = [x[0] for x in lead] + [v if origin is None else tir.Sub(v.dtype, v, origin) for v, _, origin in dims]
    new_load = tir.BufferLoad(ld.dtype, panel, idx)
    # The filling nest: panel[p0, ..., pj] = load with each iterator = origin + p.
    lead_vars = [tir.Var(x[3].dtype, f"p{i}") for i, x in enumerate(lead)]
    pvars = [tir.Var(v.dtype, f"p{i + len(lead)}") for i, (v, _, _) in enumerate(dims)]
    mapping = dict(binding)
    for (v, _, origin), pv in zip(dims, pvars):
        mapping[v] = pv if origin is None else tir.Add(v.dtype, origin, pv)
    for x, pv in zip(lead, lead_vars):
        lp = x[3]
        if lp is inner:  # vector iterator = tile index * tile (the last shifted back) + position in the tile
            start = tir.Mul(lp.dtype, pv, tir.IntImm(lp.dtype, plan.tile))
            if id(lp) in plan.shifted:
                start = shifted_start(start, lp.extent, plan.tile)
            mapping[lp.iv.var] = tir.Add(lp.dtype, start, pvars[-1])
        else:
            mapping[lp.iv.var] = pv if tir.is_const_int(lp.min, 0) else tir.Add(lp.dtype, lp.min, pv)
    src = substitute(ld, mapping)
    fill = _fill_nest(plan, panel, src, lead_vars + pvars, [x[1] for x in lead] + [d[1] for d in dims],
                      [x[2] for x in lead] + strides)

    def wrap(stmt):
        pack_block = tir.Block(plan.block_name + "_pack", [], [], [], tir.seq([fill, stmt]), alloc_buffers=[panel])
        return tir.BlockRealize([], tir.IntImm("bool", 1), pack_block)

    return wrap, (ld.buffer, new_load)


def _fill_nest(plan: Plan, panel, src, pvars: list, extents: list, strides: list):
    """The loops filling a panel: ``panel[p0, ..., pj] = src``, the panel's last axis (the
    tile) contiguous. When the source is contiguous along the tile too, or read with a stride
    of at most `STRIDED_FILL_MAX` (a convolution of stride 2), the tile's loop is innermost
    and LLVM vectorizes it (a plain copy of rows; a strided one as whole vectors shuffled
    apart). Otherwise the copy transposes: the axes along which the
    source is most contiguous go innermost, as a block of about one cache line
    (`BLOCK_TILE_BYTES`, an axis split to fit), with the tile's loop just outside it; a block
    then reads one line of each of ``tile`` source rows and writes whole lines of the panel,
    and its element copies are scalar: vectorizing either loop would gather or scatter, which
    is several times slower."""
    n = len(pvars)
    tile_axis = n - 1
    order = sorted(range(n), key=lambda i: -abs(strides[i]))  # outermost first
    if 1 <= abs(strides[tile_axis]) <= STRIDED_FILL_MAX:
        order = [i for i in order if i != tile_axis] + [tile_axis]
        loops = [(i, None) for i in order]
        scalar = False
    else:
        line = max(1, BLOCK_TILE_BYTES // dtype_bytes(panel.dtype))
        inner, split, covered = [], None, 1
        for i in reversed(order):
            ext = extents[i].value if isinstance(extents[i], tir.IntImm) else None
            if i == tile_axis or ext is None:
                break
            if covered * ext <= line:
                inner.insert(0, i)
                covered *= ext
                continue
            factor = max(f for f in range(1, ext + 1) if ext % f == 0 and covered * f <= line)
            if factor > 1:
                split = (i, factor)
            break
        outer = [i for i in order if i != tile_axis and i not in inner and (split is None or i != split[0])]
        loops = [(i, None) for i in outer]
        if split is not None:
            loops.append((split[0], "outer"))
        loops.append((tile_axis, None))
        if split is not None:
            loops.append((split[0], "inner"))
        loops += [(i, None) for i in inner]
        scalar = True
    # Loop variables: one per (axis, part); a split axis's index is outer * factor + inner.
    loop_vars, index = [], list(pvars)
    for i, part in loops:
        if part is None:
            loop_vars.append(pvars[i])
        else:
            loop_vars.append(tir.Var(pvars[i].dtype, f"{pvars[i].name}_{0 if part == 'outer' else 1}"))
    for i, factor in ([split] if scalar and split is not None else []):
        o = next(v for (a, part), v in zip(loops, loop_vars) if a == i and part == "outer")
        in_ = next(v for (a, part), v in zip(loops, loop_vars) if a == i and part == "inner")
        index[i] = tir.Add(o.dtype, tir.Mul(o.dtype, o, tir.IntImm(o.dtype, factor)), in_)
    stmt = tir.BufferStore(panel, substitute(src, dict(zip(pvars, index))) if index != pvars else src, index)
    for k in range(len(loops) - 1, -1, -1):
        i, part = loops[k]
        if part is None:
            ext = extents[i]
        else:
            f = split[1]
            ext = tir.IntImm(pvars[i].dtype, extents[i].value // f if part == "outer" else f)
        kind = "parallel" if k == 0 and plan.pack_upfront else "serial"
        ann = {VECTORIZE_ANN: 1} if scalar and i == tile_axis else {}
        stmt = tir.For(loop_vars[k], tir.IntImm(pvars[i].dtype, 0), ext, kind, stmt, annotations=ann)
    return stmt
