"""Iterator maps: is a block's binding affine, and how does it divide between two loop nests?

A block iterator's binding (``vi = i_0 * 16 + i_1``) is *affine* in TVM's sense when it is a
sum of disjoint pieces ("splits") of the loop variables, each piece a digit range of one
iterator (``i // 4``, ``i % 4``, ``(f // 8) % 2``), and together the pieces of one sum form a
mixed-radix number (scales ``1, e_0, e_0 * e_1, ...``). Reduction primitives only accept blocks
whose bindings are affine, because only then does each loop iteration map to one block instance
and reordering/splitting the reduction keeps its meaning.

`blockize` needs more: each binding written as ``outer * E + inner`` where ``inner`` uses only
the loops being wrapped into the new block and ``outer`` only the loops outside it
(`subspace_divide`). This follows the model of TVM's ``DetectIterMap`` / ``SubspaceDivide``
(not its code), for loops that start at 0; a loop of symbolic extent can only be used whole, and
only the division of constant extents is attempted. What it cannot prove returns None, and the
callers fall back to TVM's "trivial" division or reject the schedule.

The representation: a `Mark` is an iterator, either a loop variable or a fused sum of splits of
other marks (``f_0 * 8 + f_1``); a `Piece` is ``(mark // lower) % extent * scale``; a `PSum` is a
list of pieces (outermost first) plus a base.
"""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.arith import simplify
from tvmscript.ir.arith.canonical import Canonical, Sum, expr_key
from tvmscript.ir.tir_arith import all_of, conjuncts
from tvmscript.ir.tir_visitor import vars_in

from .common import const_value

__all__ = ["Mark", "Piece", "PSum", "IterMap", "detect_iter_map", "subspace_divide", "trivial_divide",
           "is_affine_binding", "to_expr", "conjuncts"]


class Mark:
    """An iterator of ``extent`` values: a loop Var, or a `PSum` (a fused iterator)."""

    __slots__ = ("source", "extent")

    def __init__(self, source, extent: int) -> None:
        self.source, self.extent = source, extent

    def __repr__(self) -> str:
        return f"Mark({self.source!r}, {self.extent})"


class Piece:
    """``(mark // lower) % extent * scale``."""

    __slots__ = ("mark", "lower", "extent", "scale")

    def __init__(self, mark: Mark, lower: int, extent: int, scale: int) -> None:
        self.mark, self.lower, self.extent, self.scale = mark, lower, extent, scale

    def with_scale(self, scale: int) -> "Piece":
        return Piece(self.mark, self.lower, self.extent, scale)

    def __repr__(self) -> str:
        return f"Piece({self.mark!r}, lower={self.lower}, extent={self.extent}, scale={self.scale})"


class PSum:
    """``sum(pieces) + base``; pieces ordered outermost (largest scale) first; ``base`` is an
    expression free of the loops (usually 0)."""

    __slots__ = ("pieces", "base")

    def __init__(self, pieces: list, base) -> None:
        self.pieces, self.base = pieces, base

    def __repr__(self) -> str:
        return f"PSum({self.pieces!r}, {self.base!r})"


def _is_zero(e) -> bool:
    return e is None or (isinstance(e, int) and e == 0) or (isinstance(e, tir.IntImm) and e.value == 0)


class IterMap:
    """What `detect_iter_map` found: one `PSum` per binding and its mark extent (the range the
    binding covers, narrowed by a predicate), plus the pieces of each mark."""

    def __init__(self, sums: list, extents: list, pieces_of: dict, dtype: str) -> None:
        self.sums, self.extents, self.pieces_of, self.dtype = sums, extents, pieces_of, dtype


class _Detector:
    def __init__(self, doms: dict, dtype: str) -> None:
        self.doms = doms            # loop Var -> extent (int); loops start at 0
        self.ranges = {v: (tir.IntImm(v.dtype, 0), tir.IntImm(v.dtype, e)) for v, e in doms.items() if e is not None}
        self.var_marks: dict = {}
        self.sum_marks: dict = {}   # expr key -> Mark
        self.pieces_of: dict = {}   # id(mark) -> [Piece]
        self.bounds: dict = {}      # expr key -> exclusive upper bound from the predicate
        self.used_bounds: set = set()
        self.visiting: set = set()
        self.dtype = dtype

    def key(self, e) -> tuple:
        return expr_key(simplify(e, self.ranges, keep_marks=True))

    def canonical(self) -> Canonical:
        return Canonical(self.ranges, keep_marks=True)

    def uses_loops(self, e) -> bool:
        return any(v in self.doms for v in vars_in([e]))

    def to_psum(self, e) -> Optional[PSum]:
        c = self.canonical()
        s = c.to_sum(e)
        pieces, rest = [], []
        for t in s.terms:
            if not self.uses_loops(t.index):
                rest.append(t)
                continue
            if t.scale <= 0:
                return None
            mark = self.mark_of(t.index)
            if mark is None:
                return None
            if mark.extent is None:  # a symbolic extent: only the whole iterator
                if t.lower != 1 or t.upper is not None:
                    return None
                ext = None
            elif t.upper is None:
                if mark.extent % t.lower:
                    return None
                ext = mark.extent // t.lower
            else:
                if t.upper % t.lower or mark.extent % t.upper:
                    return None
                ext = t.upper // t.lower
            pieces.append(Piece(mark, t.lower, ext, t.scale))
        base = c.to_expr(Sum(rest, s.base, s.dtype))
        return PSum(pieces, base)

    def mark_of(self, index) -> Optional[Mark]:
        if isinstance(index, tir.Var):
            if index not in self.doms:
                return None
            m = self.var_marks.get(index)
            if m is None:
                m = self.var_marks[index] = Mark(index, self.doms[index])
            return m
        k = self.key(index)
        m = self.sum_marks.get(k)
        if m is not None:
            return m
        if k in self.visiting:  # an expression the normal form cannot look into (``i * i``)
            return None
        self.visiting.add(k)
        s = self.to_psum(index)
        self.visiting.discard(k)
        if s is None or not _is_zero(s.base):
            return None
        ordered = fuse_order(s.pieces, require_unit_scale=True)
        if ordered is None:
            return None
        extent = _product(ordered)
        bound = self.bounds.get(k)
        if bound is not None:
            self.used_bounds.add(k)
            extent = _narrow(extent, bound)
        m = Mark(PSum(ordered, 0), extent)
        self.sum_marks[k] = m
        for p in ordered:
            self.note(p)
        return m

    def note(self, p: Piece) -> None:
        self.pieces_of.setdefault(id(p.mark), []).append(p)


def fuse_order(pieces: list, require_unit_scale: bool) -> Optional[list]:
    """``pieces`` ordered outermost first if they form a mixed-radix number (the smallest scale
    times ``1, e_0, e_0 * e_1, ...``), else None. Unit pieces (extent 1) sit below the others of
    the same scale."""
    if not pieces:
        return []
    remaining = list(pieces)
    expected = min(p.scale for p in remaining)
    if require_unit_scale and expected != 1:
        return None
    order = []
    while remaining:
        cands = [p for p in remaining if p.scale == expected]
        if not cands:
            return None
        unit = [p for p in cands if p.extent == 1]
        p = unit[0] if unit else cands[0]
        if not unit and len(cands) > 1:
            return None
        remaining.remove(p)
        order.append(p)
        if p.extent is None:  # a symbolic extent can only be the outermost piece
            if remaining:
                return None
            break
        expected *= p.extent
    return order[::-1]


def loop_doms(loops: list, symbolic: bool = False) -> Optional[dict]:
    """Var -> extent of loops that start at 0 and have constant extents (None otherwise); with
    ``symbolic``, a non-constant extent is allowed and given as None."""
    out = {}
    for lp in loops:
        lo, ext = const_value(lp.min), const_value(lp.extent)
        if lo != 0 or (ext is None and not symbolic):
            return None
        out[lp.loop_var] = ext
    return out


def _product(pieces: list):
    out = 1
    for p in pieces:
        if p.extent is None:
            return None
        out *= p.extent
    return out


def _narrow(extent, bound):
    if extent is None or bound is None:
        return bound if isinstance(bound, int) else extent
    return min(extent, bound)


def detect_iter_map(bindings: list, doms: dict, predicate=None) -> Optional[IterMap]:
    """Each binding as a `PSum` of disjoint pieces of the loop iterators in ``doms`` (Var ->
    constant extent, or None for a symbolic one, which can then only be used whole), or None
    when the bindings are not such a map. ``predicate`` (a chain of
    ``expr < c``) narrows the iterators it names; a predicate it cannot attach makes the
    map non-affine, as in TVM."""
    dtype = bindings[0].dtype if bindings else "int32"
    det = _Detector(doms, dtype)
    for cond in conjuncts(predicate):
        if isinstance(cond, (tir.LT, tir.LE)) and not det.uses_loops(cond.b):
            c = const_value(cond.b)
            det.bounds[det.key(cond.a)] = (c + (1 if isinstance(cond, tir.LE) else 0)) if c is not None else None
        else:
            return None
    sums, extents = [], []
    for b in bindings:
        if not det.uses_loops(b):
            sums.append(PSum([], b))
            extents.append(1)
            continue
        s = det.to_psum(b)
        if s is None:
            return None
        ordered = fuse_order(s.pieces, require_unit_scale=False)
        if ordered is None:
            return None
        extent = _product(ordered)
        k = det.key(b)
        if k in det.bounds:
            det.used_bounds.add(k)
            extent = _narrow(extent, det.bounds[k])
        for p in ordered:
            det.note(p)
        sums.append(PSum(ordered, s.base))
        extents.append(extent)
    if set(det.bounds) - det.used_bounds:
        return None
    # Pieces of one iterator must not overlap (one loop point -> one block point).
    for pieces in det.pieces_of.values():
        ps = sorted(pieces, key=lambda p: p.lower)
        for a, b in zip(ps, ps[1:]):
            if a.extent is None or a.lower * a.extent > b.lower:
                return None
    return IterMap(sums, extents, det.pieces_of, dtype)


def is_affine_binding(realize: tir.BlockRealize, loops: list) -> bool:
    """TVM's "affine binding" of a block under ``loops`` (those between it and its scope)."""
    values = realize.iter_values
    if not values:
        return True
    predicate = realize.predicate
    shifted = [lp for lp in loops if const_value(lp.min) != 0]
    if shifted:
        # A loop from ``m``: the same map as a loop from 0 with ``m`` added to its variable.
        from tvmscript.ir.mutator import substitute
        loop_vars = {lp.loop_var for lp in loops}
        if any(set(vars_in([lp.min])) & loop_vars for lp in shifted):
            return False
        shift = {lp.loop_var: tir.Add(lp.loop_var.dtype, lp.loop_var, lp.min) for lp in shifted}
        values = [substitute(v, shift) for v in values]
        predicate = substitute(predicate, shift)
        loops = [_FromZero(lp) if lp in shifted else lp for lp in loops]
    doms = loop_doms(loops, symbolic=True)
    if doms is None:
        return False
    return detect_iter_map(values, doms, predicate) is not None


class _FromZero:
    """A loop seen as starting at 0 (its variable shifted by the caller)."""

    def __init__(self, lp) -> None:
        self.loop_var, self.extent = lp.loop_var, lp.extent
        self.min = tir.IntImm(lp.loop_var.dtype, 0)


# ----------------------------------------------------------------------------- expressions


def to_expr(x, dtype: str):
    """The expression of a `Piece`, `PSum` or `Mark` source (TVM's NormalizeIterMapToExpr)."""
    if isinstance(x, PSum):
        e = None
        for p in x.pieces:
            t = to_expr(p, dtype)
            if const_value(t) == 0:
                continue
            e = t if e is None else tir.Add(dtype, e, t)
        base = x.base
        if isinstance(base, int):
            base = tir.IntImm(dtype, base)
        if e is None:
            return base
        if not _is_zero(base):
            e = tir.Add(dtype, e, base)
        return e
    if isinstance(x, Piece):
        m = x.mark
        if x.extent == 1 and m.extent != 1:
            return tir.IntImm(dtype, 0)
        src = m.source if isinstance(m.source, tir.Var) else to_expr(m.source, dtype)
        if x.lower == 1 and x.extent == m.extent:
            e = src
        elif m.extent == x.lower * x.extent:
            e = tir.FloorDiv(dtype, src, tir.IntImm(dtype, x.lower))
        else:
            e = tir.FloorMod(dtype, src, tir.IntImm(dtype, x.lower * x.extent))
            if x.lower != 1:
                e = tir.FloorDiv(dtype, e, tir.IntImm(dtype, x.lower))
        if x.scale != 1:
            e = tir.Mul(dtype, e, tir.IntImm(dtype, x.scale))
        return e
    raise TypeError(type(x).__name__)


# ----------------------------------------------------------------------------- subspace division


class _Div:
    """``outer * inner_extent + inner``; ``kind`` is "inner", "outer" or "mixed"."""

    __slots__ = ("outer", "outer_extent", "inner", "inner_extent", "kind")

    def __init__(self, outer, outer_extent, inner, inner_extent, kind="mixed") -> None:
        self.outer, self.outer_extent = outer, outer_extent
        self.inner, self.inner_extent = inner, inner_extent
        self.kind = kind

    @staticmethod
    def make_inner(x, extent: int) -> "_Div":
        return _Div(PSum([], 0), 1, x, extent, "inner")

    @staticmethod
    def make_outer(x, extent: int) -> "_Div":
        return _Div(x, extent, PSum([], 0), 1, "outer")


def _as_piece(x, extent: int) -> Piece:
    if isinstance(x, Piece):
        return x
    return Piece(Mark(x, extent), 1, extent, 1)


class _Divider:
    def __init__(self, imap: IterMap, inner_vars: set, dtype: str) -> None:
        self.imap = imap
        self.inner_vars = inner_vars
        self.dtype = dtype
        self.cache: dict = {}
        self.outer_preds: list = []
        self.inner_preds: list = []

    def below(self, x, extent: int):
        return tir.LT("bool", to_expr(x, self.dtype), tir.IntImm(self.dtype, extent))

    def divide_sum(self, s: PSum, mark_extent: int) -> Optional[_Div]:
        if not s.pieces:
            return _Div(PSum([], 0), 1, PSum([], s.base), 1)
        if len(s.pieces) == 1:
            p = s.pieces[0]
            if p.scale != 1:
                return None
            res = self.divide_piece(p)
            if res is None:
                return None
            if not _is_zero(s.base):
                inner = res.inner
                if isinstance(inner, Piece):
                    inner = PSum([inner], s.base)
                else:
                    inner = PSum(inner.pieces, _add(inner.base, s.base, self.dtype))
                res = _Div(res.outer, res.outer_extent, inner, res.inner_extent, res.kind)
            return res
        extent = 1
        outer_args, inner_args = [], []
        inner_phase, unit_scale = True, False
        for p in reversed(s.pieces):  # from the innermost
            if p.scale == 1:
                unit_scale = True
            d = self.divide_piece(p)
            if d is None:
                return None
            if d.kind == "inner":
                if not inner_phase:
                    return None
                arg = _as_piece(d.inner, d.inner_extent)
                inner_args.append(arg)
            elif d.kind == "outer":
                arg = _as_piece(d.outer, d.outer_extent)
                outer_args.append(arg)
                inner_phase = False
            else:
                return None
            if extent is None:  # a piece of symbolic extent must be the outermost
                return None
            extent = None if arg.extent is None else extent * arg.extent
        if not unit_scale:
            return None
        outer_src, outer_ext = _mark_from(outer_args, 0)
        inner_src, inner_ext = _mark_from(inner_args, s.base)
        if extent != mark_extent:
            if extent is None or mark_extent is None:
                return None
            if not inner_args:
                self.outer_preds.append(self.below(outer_src, mark_extent))
                return _Div.make_outer(outer_src, mark_extent)
            if not outer_args:
                self.inner_preds.append(self.below(inner_src, mark_extent))
                return _Div.make_inner(inner_src, mark_extent)
            return None
        return _Div(outer_src, outer_ext, inner_src, inner_ext)

    def divide_piece(self, p: Piece) -> Optional[_Div]:
        key = (id(p.mark), p.lower, p.extent)
        if key in self.cache:
            return self.cache[key]
        mark = p.mark
        pieces = []
        for q in self.imap.pieces_of.get(id(mark), [p]):
            if not any(r.lower == q.lower and r.extent == q.extent for r in pieces):
                pieces.append(q)
        if isinstance(mark.source, tir.Var):
            inner = mark.source in self.inner_vars
            for q in pieces:
                self.cache[(id(mark), q.lower, q.extent)] = (_Div.make_inner(q, q.extent) if inner
                                                             else _Div.make_outer(q, q.extent))
            self.cache.setdefault(key, _Div.make_inner(p, p.extent) if inner else _Div.make_outer(p, p.extent))
            return self.cache[key]
        md = self.divide_sum(mark.source, mark.extent)
        if md is None:
            return None
        if len(pieces) == 1 and p.lower == 1 and p.extent == mark.extent:
            return md  # the piece is the whole fused iterator
        outer_mark = Mark(md.outer if isinstance(md.outer, PSum) else PSum([md.outer], 0), md.outer_extent)
        inner_mark = Mark(md.inner if isinstance(md.inner, PSum) else PSum([md.inner], 0), md.inner_extent)
        boundary = md.kind == "outer"
        used = [False] * len(pieces)
        inner_ps, outer_ps = [], []
        expected = 1
        for _ in range(len(pieces)):
            j = next((j for j, q in enumerate(pieces) if not used[j] and q.lower == expected), None)
            if j is None:
                return None
            used[j] = True
            (outer_ps if boundary else inner_ps).append(pieces[j])
            expected *= pieces[j].extent
            if expected == md.inner_extent:
                boundary = True
        if not boundary:
            return None
        for q in inner_ps:
            piece = Piece(inner_mark, q.lower, q.extent, q.scale)
            self.cache[(id(mark), q.lower, q.extent)] = _Div.make_inner(piece, q.extent)
        for q in outer_ps:
            lower = q.lower // outer_ps[0].lower
            piece = Piece(outer_mark, lower, q.extent, q.scale)
            self.cache[(id(mark), q.lower, q.extent)] = _Div.make_outer(piece, q.extent)
        return self.cache.get(key)


def _add(a, b, dtype):
    if _is_zero(a):
        return b
    if _is_zero(b):
        return a
    a = tir.IntImm(dtype, a) if isinstance(a, int) else a
    b = tir.IntImm(dtype, b) if isinstance(b, int) else b
    return tir.Add(dtype, a, b)


def _mark_from(args: list, base) -> tuple:
    """``args`` (innermost first) rescaled as one mixed-radix sum: (PSum, extent)."""
    out, extent = [], 1
    for a in args:   # a symbolic extent (None) can only be the last, outermost one
        out.append(a.with_scale(extent))
        extent = None if a.extent is None else extent * a.extent
    return PSum(out[::-1], base), extent


class Division:
    """Per binding: (outer expr, outer extent, inner expr, inner extent); and the predicates
    the outer and the inner block need."""

    def __init__(self, parts: list, outer_pred, inner_pred) -> None:
        self.parts, self.outer_pred, self.inner_pred = parts, outer_pred, inner_pred


def subspace_divide(bindings: list, loops: list, inner_vars: set, predicate,
                    preserve_unit_iters: bool = True) -> Optional[Division]:
    """Write each binding as ``outer * E + inner``, ``inner`` over the loops of ``inner_vars``
    and ``outer`` over the others (``loops``: all loops between the block and its scope).
    None when the bindings do not divide."""
    doms = loop_doms(loops, symbolic=True)
    if doms is None:
        return None
    values = list(bindings)
    if not preserve_unit_iters:
        unit = {v: tir.IntImm(v.dtype, 0) for v, e in doms.items() if e == 1}
        if unit:
            from tvmscript.ir.mutator import substitute
            values = [simplify(substitute(v, unit), None, keep_marks=True) for v in values]
            predicate = simplify(substitute(predicate, unit)) if predicate is not None else None
    imap = detect_iter_map(values, doms, predicate)
    if imap is None:
        return None
    dtype = values[0].dtype if values else "int32"
    div = _Divider(imap, inner_vars, dtype)
    parts = []
    for s, extent, v in zip(imap.sums, imap.extents, values):
        if len(s.pieces) > 1:
            # TVM sees a binding over several iterators as one split of their fused mark.
            wrapped = Mark(PSum(s.pieces, 0), extent)
            res = div.divide_sum(wrapped.source, extent)
            if res is not None and not _is_zero(s.base):
                inner = PSum(_pieces(res.inner), _add(_base(res.inner), s.base, v.dtype))
                res = _Div(res.outer, res.outer_extent, inner, res.inner_extent, res.kind)
        else:
            res = div.divide_sum(s, extent)
        if res is None:
            return None
        parts.append((to_expr(res.outer, v.dtype), res.outer_extent, to_expr(res.inner, v.dtype), res.inner_extent))
    if len(div.outer_preds) + len(div.inner_preds) < len(conjuncts(predicate)):
        return None  # a condition the division could not place on either side
    return Division(parts, all_of(div.outer_preds), all_of(div.inner_preds))


def _pieces(x) -> list:
    return x.pieces if isinstance(x, PSum) else [x]


def _base(x):
    return x.base if isinstance(x, PSum) else 0


def trivial_divide(iter_vars: list, bindings: list, predicate, outer_vars: set, inner_vars: set) -> Optional[Division]:
    """TVM's fallback when the bindings are not affine: each binding must use only outer loops
    or only inner loops (then it goes whole to that side); no predicate."""
    if conjuncts(predicate):
        return None
    parts = []
    for iv, b in zip(iter_vars, bindings):
        used = set(vars_in([b]))
        o, i = bool(used & outer_vars), bool(used & inner_vars)
        ext = const_value(iv.dom.extent)
        zero = tir.IntImm(b.dtype, 0)
        if o and not i:
            parts.append((b, ext if ext is not None else iv.dom.extent, zero, 1))
        elif i and not o:
            parts.append((zero, 1, b, ext if ext is not None else iv.dom.extent))
        elif not o and not i:
            parts.append((zero, 1, b, 1))
        else:
            return None
    return Division(parts, tir.IntImm("bool", 1), tir.IntImm("bool", 1))
