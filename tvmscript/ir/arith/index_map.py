"""Index arithmetic on an `IndexMap` (tvmscript/ir/index_map.py): the indices and the shape a
map gives, which inputs each output fuses, and the inverse of the maps schedules build (each
output a fusion ``(a * n_b + b) * n_c + c`` of some inputs, or a constant 0 for a new unit
dimension; inputs of extent 1 may be dropped).

The map itself is IR (the parser reads one, an op keeps one as an attribute); these need the
simplifier and the range analysis of this package, so they live beside them.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tvmscript.ir import tir
from tvmscript.ir.index_map import IndexMap
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import const_int, make_cast

from .canonical import simplify
from .int_set import eval_range

__all__ = ["map_indices", "map_shape", "fusion_groups", "inverse_indices"]


def map_indices(index_map: IndexMap, indices: Sequence[tir.PrimExpr], ranges: Optional[dict] = None) -> list:
    if len(indices) != len(index_map.initial_indices):
        raise ValueError(f"the index map takes {len(index_map.initial_indices)} indices, got {len(indices)}")
    mapping = {}
    for v, e in zip(index_map.initial_indices, indices):
        mapping[v] = make_cast(e, v.dtype)
    return [simplify(substitute(f, mapping), ranges or {}) for f in index_map.final_indices]


def map_shape(index_map: IndexMap, shape: Sequence[tir.PrimExpr], ranges: Optional[dict] = None) -> list:
    """The extent each output covers while the inputs sweep ``[0, shape)``."""
    dom = {v: tir.Range(tir.IntImm(v.dtype, 0), make_cast(n, v.dtype)) for v, n in zip(index_map.initial_indices, shape)}
    out = []
    for f in index_map.final_indices:
        r = eval_range(f, dom, ranges or {})
        if r is None:
            raise ValueError(f"cannot bound the index map output {f}")
        lo, ext = r
        ext = simplify(tir.Add(ext.dtype, lo, ext), ranges or {}) if const_int(lo) != 0 else ext
        out.append(ext)
    return out


def fusion_groups(index_map: IndexMap, shape: Sequence[tir.PrimExpr], ranges: Optional[dict] = None) -> Optional[list]:
    """For each output, the inputs it fuses, outermost first, as (position, stride); None
    when the map is not such a fusion (each input used at most once, strides the products
    of the inner extents)."""
    ext_of = {v: make_cast(n, v.dtype) for v, n in zip(index_map.initial_indices, shape)}
    pos = {v: n for n, v in enumerate(index_map.initial_indices)}
    used: set = set()
    groups = []
    for f in index_map.final_indices:
        terms = _linear_terms(simplify(f, ranges or {}))
        if terms is None:
            return None
        base, pairs = terms
        if base != 0:
            return None
        # innermost first: stride 1, then the product of the extents inside
        pairs.sort(key=lambda p: p[1])
        stride = 1
        group = []
        for var, scale in pairs:
            if var not in pos or var in used:
                return None
            if scale != stride:
                return None
            used.add(var)
            group.append((pos[var], scale))
            e = const_int(simplify(ext_of[var]))
            if e is None:
                if var is not pairs[-1][0]:
                    return None  # only the outermost fused input may be symbolic
                e = 1
            stride *= e
        groups.append(group[::-1])
    for v in index_map.initial_indices:
        if v not in used and const_int(simplify(ext_of[v])) != 1:
            return None
    return groups


def inverse_indices(index_map: IndexMap, new_vars: Sequence[tir.Var], shape: Sequence[tir.PrimExpr],
                    ranges: Optional[dict] = None) -> Optional[list]:
    """The inputs written in terms of the outputs ``new_vars`` (each with its extent from
    `map_shape`), or None when the map is not invertible this simple way."""
    groups = fusion_groups(index_map, shape, ranges)
    if groups is None:
        return None
    out: list = [None] * len(index_map.initial_indices)
    for nv, group in zip(new_vars, groups):
        for n, (p, stride) in enumerate(group):
            v = index_map.initial_indices[p]
            e = make_cast(nv, v.dtype)
            if stride != 1:
                e = tir.FloorDiv(v.dtype, e, tir.IntImm(v.dtype, stride))
            if n > 0:
                e = tir.FloorMod(v.dtype, e, make_cast(shape[p], v.dtype))
            out[p] = e
    for p, v in enumerate(index_map.initial_indices):
        if out[p] is None:
            out[p] = tir.IntImm(v.dtype, 0)
    return out


def _linear_terms(e) -> Optional[tuple]:
    """``(base, [(var, scale)])`` of ``base + sum(var * scale)``; None otherwise."""
    if isinstance(e, tir.IntImm):
        return e.value, []
    if isinstance(e, tir.Var):
        return 0, [(e, 1)]
    if isinstance(e, tir.Cast):
        return _linear_terms(e.value)
    if isinstance(e, tir.Add):
        a, b = _linear_terms(e.a), _linear_terms(e.b)
        if a is None or b is None:
            return None
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, tir.Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = const_int(y)
            if c is not None:
                t = _linear_terms(x)
                if t is None:
                    return None
                return t[0] * c, [(v, s * c) for v, s in t[1]]
    return None
