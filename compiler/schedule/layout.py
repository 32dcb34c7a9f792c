"""Layout primitives: `storage_align` and `transform_layout`.

Why they exist: where a buffer's elements sit decides how fast they are read. `storage_align`
pads the stride of one dimension of an intermediate buffer (``stride[axis] = k * factor +
offset``) so that the threads of a GPU warp reading a shared-memory tile down a column hit
different banks; it is only an annotation (``buffer_dim_align``) that lowering turns into
strides, so it never changes what a function computes (the CPU backend ignores it).
`transform_layout` re-indexes a buffer through an index map (``lambda i, j: (i // 4, j, i %
4)`` packs rows four by four, as the MLC course does for a matmul's output): its shape becomes
the range of the map's outputs, and every load, store and access region of the buffer goes
through the map. A buffer that is a function parameter changes the function's signature.

The map must be a bijection from the old index space onto the new one: a map that sends two
elements to one place would make a function compute something else, and one that leaves holes
("padding") would need a value to fill them. Each primitive checks its preconditions first and
commits once, so a failed call leaves the schedule unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.arith import eval_range, simplify
from tvmscript.ir.mutator import substitute
from tvmscript.ir.tir_arith import make_cast
from tvmscript.ir.tir_numpy import evaluate_on_arrays
from tvmscript.ir.tir_visitor import vars_in

from ...ir.tir_analysis import collect_accesses
from .cache import buffer_defining_site, check_allocated, nth_access_buffer, normalize_block
from .common import LoopRangeMutator, const_value, record_call
from .state import Schedule, primitive
from .tree import replace, stmt_children

__all__ = ["storage_align", "transform_layout"]

# Largest buffer whose layout map is checked point by point (larger ones are checked symbolically).
_NUMERIC_CHECK_LIMIT = 1 << 22


class _Text:
    """A trace argument that prints as given (an index map as TVM prints it: a lambda)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# ----------------------------------------------------------------------------- storage_align


@primitive(record=False)
def storage_align(sch: Schedule, block, buffer_index: int, axis: int, factor: int, offset: int) -> None:
    """Ask lowering to pad dimension ``axis`` of the ``buffer_index``-th buffer ``block`` writes
    so that its stride is ``k * factor + offset`` (TVM's remedy for shared-memory bank
    conflicts). Recorded as the block annotation ``buffer_dim_align`` (one ``[buffer_index,
    axis, factor, offset]`` per aligned dimension; a second call for the same dimension
    replaces the first). Only a buffer a block allocates can be aligned."""
    prim = "storage_align"
    block = normalize_block(sch, block)
    idx, realize = sch.resolve_block(block, prim)
    buffer, buffer_index = nth_access_buffer(sch, prim, realize, buffer_index, "write")
    for name, v in (("axis", axis), ("factor", factor), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"storage_align: {name} must be an int, not {type(v).__name__}")
    if factor <= 0:
        raise sch.error(prim, f"block '{realize.block.name}'",
                        "The input `factor` of storage_align is expected to be a positive number. However, the "
                        f"input `factor` is {factor}, which is out of the expected range.", realize)
    ndim = len(buffer.shape)
    if not -ndim <= axis < ndim:
        raise sch.error(prim, f"buffer {buffer.name}",
                        f"The buffer to set storage alignment of, {buffer.name}, has {ndim} dimension(s), so `axis` "
                        f"is required to be in [{-ndim}, {ndim}) for storage_align. However, the input `axis` is "
                        f"{axis}, which is out of the expected range.", realize)
    norm_axis = axis + ndim if axis < 0 else axis
    check_allocated(sch, prim, idx, realize, buffer)
    anns = dict(realize.block.annotations)
    entries = [list(e) for e in anns.get("buffer_dim_align", [])]
    entry = [buffer_index, norm_axis, factor, offset]
    for n, e in enumerate(entries):
        if _int(e[0]) == buffer_index and _int(e[1]) == norm_axis:
            entries[n] = entry
            break
    else:
        entries.append(entry)
    anns["buffer_dim_align"] = entries
    new_block = dataclasses.replace(realize.block, annotations=anns)
    sch.commit(block.func_name, replace(idx, realize.block, new_block))
    record_call(sch, "storage_align", [("block", block), ("buffer_index", buffer_index), ("axis", axis),
                                   ("factor", factor), ("offset", offset)])


def _int(v):
    return v.value if isinstance(v, tir.IntImm) else v


# ----------------------------------------------------------------------------- index maps


class _Map:
    """An index map: ``initial`` Vars -> ``final`` expressions, from a Python function (called
    on fresh Vars, TVM style) or an object with ``initial_indices`` / ``final_indices``."""

    def __init__(self, initial: list, final: list) -> None:
        self.initial, self.final = initial, final

    @staticmethod
    def build(index_map, ndim: int, dtype: str) -> "_Map":
        if hasattr(index_map, "initial_indices") and hasattr(index_map, "final_indices"):
            initial = list(index_map.initial_indices)
            final = [_as_expr(x, dtype) for x in index_map.final_indices]
            if any(v.dtype != dtype for v in initial):  # TVM's LegalizeIndexMapDType
                fresh = {v: tir.Var(dtype, v.name) for v in initial}
                initial = [fresh[v] for v in initial]
                final = [_retype(f, fresh, dtype) for f in final]
            return _Map(initial, final)
        if not callable(index_map):
            raise TypeError(f"transform_layout: index_map must be a function or an IndexMap, not "
                            f"{type(index_map).__name__}")
        names = []
        for p in inspect.signature(index_map).parameters.values():
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                names.extend(f"{p.name}_{n}" for n in range(len(names), ndim))
            elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
        initial = [tir.Var(dtype, n) for n in names]
        out = index_map(*initial)
        if isinstance(out, (tir.PrimExpr, int)):
            out = [out]
        if not isinstance(out, (list, tuple)):
            raise TypeError(f"transform_layout: the index map must return an expression or a tuple of them, not "
                            f"{type(out).__name__}")
        return _Map(initial, [_as_expr(x, dtype) for x in out])

    def apply(self, indices: list) -> list:
        mapping = {v: make_cast(e, v.dtype) for v, e in zip(self.initial, indices)}
        return [substitute(f, mapping) for f in self.final]

    def text(self) -> str:
        """The map as TVM's trace prints it: ``lambda i, j: (i // 4, j, i % 4,)``."""
        from tvmscript.printer.tir_printer import TIRPrinter

        p = TIRPrinter()
        outs = "".join(p.expr(f) + ", " for f in self.final).rstrip(" ")
        return f"lambda {', '.join(v.name for v in self.initial)}: ({outs})"


def _retype(e, mapping: dict, dtype: str):
    """An integer index expression over ``mapping``'s Vars, rebuilt in ``dtype``."""
    if isinstance(e, tir.Var):
        return mapping.get(e, e)
    if isinstance(e, tir.IntImm) and e.dtype != "bool":
        return tir.IntImm(dtype, e.value)
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype):
        inner = _retype(e.value, mapping, dtype)
        return inner if inner.dtype == dtype else tir.Cast(dtype, inner)
    if isinstance(e, tir.BinaryOp):
        out = "bool" if e.dtype == "bool" else dtype
        return type(e)(out, _retype(e.a, mapping, dtype), _retype(e.b, mapping, dtype))
    if isinstance(e, tir.Select):
        return tir.Select(dtype, _retype(e.condition, mapping, dtype), _retype(e.true_value, mapping, dtype),
                          _retype(e.false_value, mapping, dtype))
    return e


def _as_expr(x, dtype):
    if isinstance(x, tir.PrimExpr):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return tir.IntImm(dtype, x)
    raise TypeError(f"transform_layout: the index map returned {x!r} ({type(x).__name__}), not an index expression")


# ----------------------------------------------------------------------------- bijectivity


def _is_permutation(m: _Map, dims: list, new_dims: list) -> bool:
    """Whether ``m`` only reorders the axes (a transpose), each new axis as long as the old
    axis it takes: a bijection, decided without enumerating the elements."""
    if len(m.final) != len(m.initial) or len(new_dims) != len(dims):
        return False
    position = {v: i for i, v in enumerate(m.initial)}
    taken = [position.get(f) if isinstance(f, tir.Var) else None for f in m.final]
    if None in taken or sorted(taken) != list(range(len(dims))):
        return False
    return all(dims[i] is not None and dims[i] == nd for i, nd in zip(taken, new_dims))


def _check_bijective(m: _Map, old_shape: list, new_shape: list) -> Optional[str]:
    """Why ``m`` is not a bijection from ``old_shape`` onto ``new_shape`` (None when it is, or
    when that cannot be decided): "overlap" (two elements to one place) or "padding"."""
    import numpy as np

    dims = [const_value(simplify(d)) for d in old_shape]
    new_dims = [const_value(simplify(d)) for d in new_shape]
    if _is_permutation(m, dims, new_dims):
        return None
    if all(d is not None for d in dims) and all(d is not None for d in new_dims):
        total = 1
        for d in dims:
            total *= d
        if total <= _NUMERIC_CHECK_LIMIT:
            grids = np.meshgrid(*[np.arange(d, dtype=np.int64) for d in dims], indexing="ij") if dims else []
            env = {v: g.ravel() for v, g in zip(m.initial, grids)}
            flat = np.zeros(total, dtype=np.int64)
            ok = True
            for f, nd in zip(m.final, new_dims):
                val = evaluate_on_arrays(f, env)
                if val is None:
                    ok = False
                    break
                val = np.broadcast_to(np.asarray(val, dtype=np.int64), (total,))
                if val.size and (val.min() < 0 or val.max() >= nd):
                    return "out of range"
                flat = flat * nd + val
            if ok:
                new_total = 1
                for d in new_dims:
                    new_total *= d
                seen = np.zeros(new_total, dtype=bool)  # linear time, unlike np.unique's sort
                seen[flat] = True
                distinct = int(np.count_nonzero(seen))
                if distinct < total:
                    return "overlap"
                return "padding" if distinct < new_total else None
    # Symbolic (or too large to enumerate): every input must reach an output, and the element
    # counts must provably agree.
    used = set(vars_in(m.final))
    for v, d in zip(m.initial, dims):
        if v not in used and d != 1:
            return "overlap"
    dtype = old_shape[0].dtype if old_shape else "int32"
    old_n, new_n = tir.IntImm(dtype, 1), tir.IntImm(dtype, 1)
    for d in old_shape:
        old_n = tir.Mul(dtype, old_n, make_cast(d, dtype))
    for d in new_shape:
        new_n = tir.Mul(dtype, new_n, make_cast(d, dtype))
    if const_value(simplify(tir.Sub(dtype, new_n, old_n))) != 0:
        return "padding"
    return None


# ----------------------------------------------------------------------------- the rewrite


class _LayoutRewriter(LoopRangeMutator):
    """Sends every access of ``old`` through the map (indices simplified with the loop and
    block-iterator ranges in scope), swaps the buffer in allocations and match sources, and
    re-infers the regions blocks declare for it."""

    def __init__(self, old, new, m: _Map) -> None:
        self.old, self.new, self.m = old, new, m
        self.ranges: dict = {}

    def _indices(self, indices):
        return [simplify(e, self.ranges) for e in self.m.apply(indices)]

    def visit_expr(self, e):
        if isinstance(e, tir.BufferLoad) and e.buffer is self.old:
            idx = [self.visit_expr(i) for i in e.indices]
            return tir.BufferLoad(e.dtype, self.new, self._indices(idx), e.span)
        return super().visit_expr(e)

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer is self.old:
            idx = [self.visit_expr(i) for i in s.indices]
            return tir.BufferStore(self.new, self.visit_expr(s.value), self._indices(idx), s.span)
        if isinstance(s, tir.Block):
            saved = {iv.var: self.ranges.get(iv.var) for iv in s.iter_vars}
            for iv in s.iter_vars:
                self.ranges[iv.var] = (iv.dom.min, iv.dom.extent)
            new = super().visit_stmt(s)
            for v, r in saved.items():
                self._restore(v, r)
            return self._block(s, new)
        return super().visit_stmt(s)

    def _block(self, old: tir.Block, new: tir.Block) -> tir.Block:
        touches = any(r.buffer is self.old for r in list(old.reads) + list(old.writes))
        changes = {}
        if touches:
            inferred_reads, inferred_writes = collect_accesses(new.body, new.init)
            inner = _bound_inside(new)
            changes["reads"] = self._regions(old.reads, inferred_reads, inner)
            changes["writes"] = self._regions(old.writes, inferred_writes, inner)
        if any(b is self.old for b in old.alloc_buffers):
            changes["alloc_buffers"] = [self.new if b is self.old else b for b in old.alloc_buffers]
        if any(mb.source.buffer is self.old for mb in old.match_buffers):
            changes["match_buffers"] = [
                tir.MatchBufferRegion(mb.buffer, tir.BufferRegion(self.new, mb.source.region))
                if mb.source.buffer is self.old else mb for mb in old.match_buffers]
        return dataclasses.replace(new, **changes) if changes else new

    def _regions(self, regions: list, inferred: list, inner_vars: set) -> list:
        out = []
        for r in regions:
            if r.buffer is not self.old:
                out.append(r)
                continue
            got = next((x for x in inferred if x.buffer is self.new), None)
            if got is not None and any(v in inner_vars for x in got.region for v in vars_in([x.min, x.extent])):
                got = None  # the inference left a variable of the block's own loops in the region
            out.append(got if got is not None else self._mapped_region(r))
        return out

    def _mapped_region(self, r: tir.BufferRegion) -> tir.BufferRegion:
        """The old region pushed through the map (widened over its extents), for a block whose
        body does not show the access (it sits in a nested block or is opaque)."""
        fresh = [tir.Var(x.min.dtype, f"r{n}") for n, x in enumerate(r.region)]
        dom = {v: tir.Range(x.min, x.extent) for v, x in zip(fresh, r.region)}
        out = []
        for f, dim in zip(self.m.apply(fresh), self.new.shape):
            got = eval_range(f, dom, self.ranges)
            out.append(tir.Range(got[0], got[1]) if got is not None else tir.Range(tir.IntImm(dim.dtype, 0), dim))
        return tir.BufferRegion(self.new, out)


def _bound_inside(block: tir.Block) -> set:
    """Variables a block's body binds: its loops' and its nested blocks' iterators."""
    out = set()

    def walk(x):
        if isinstance(x, tir.For):
            out.add(x.loop_var)
        elif isinstance(x, tir.Block):
            out.update(iv.var for iv in x.iter_vars)
        elif isinstance(x, tir.LetStmt):
            out.add(x.var)
        for c in stmt_children(x):
            walk(c)

    for c in stmt_children(block):
        walk(c)
    return out


def _resolve_buffer(sch: Schedule, prim: str, realize, buffer) -> tuple:
    """``(kind, index, Buffer)`` from TVM's three spellings: ``("read"|"write", index)``, a
    buffer name, or a Buffer, looked up in the block's reads, then its writes."""
    blk = realize.block
    if isinstance(buffer, tuple) and len(buffer) == 2:
        kind, index = buffer
        if kind not in ("read", "write"):
            raise ValueError(f"transform_layout: expected 'read' or 'write', got {kind!r}")
        buf, index = nth_access_buffer(sch, prim, realize, index, kind)
        return kind, index, buf
    if isinstance(buffer, (str, tir.Buffer)):
        hits = {}  # buffer -> its last (kind, index): a buffer read and written counts as written, as in TVM
        for kind, regions in (("read", blk.reads), ("write", blk.writes)):
            for n, r in enumerate(regions):
                if (r.buffer is buffer) if isinstance(buffer, tir.Buffer) else (r.buffer.name == buffer):
                    hits[id(r.buffer)] = (kind, n, r.buffer)
        name = buffer if isinstance(buffer, str) else buffer.name
        if not hits:
            raise sch.error(prim, f"block '{blk.name}'", f"does not access a buffer named '{name}'", realize)
        if len(hits) > 1:
            raise sch.error(prim, f"block '{blk.name}'", f"accesses several buffers named '{name}'", realize)
        return next(iter(hits.values()))
    raise TypeError(f"transform_layout: buffer must be ('read'|'write', index), a buffer name or a Buffer, not "
                    f"{type(buffer).__name__}")


@primitive(record=False)
def transform_layout(sch: Schedule, block, buffer, index_map, pad_value=None, *,
                     assume_injective_transform: bool = False) -> None:
    """Re-index a buffer ``block`` accesses through ``index_map`` (a function of the old
    indices returning the new ones, TVM style: ``lambda i, j: (i // 4, j, i % 4)``). The new
    shape is the range of each output while the old indices sweep the old shape; every
    load, store, allocation and declared region of the buffer, in every block, follows. A
    parameter buffer changes the function's signature.

    The map must send the old elements one to one onto the new shape: a map with two elements
    landing on one place, or with outputs not starting at 0, is refused (unless
    ``assume_injective_transform``, which skips the check as TVM does); one that leaves unused
    places (padding) is refused too -- TVM accepts it with a ``pad_value``, which this
    implementation does not support."""
    prim = "transform_layout"
    block = normalize_block(sch, block)
    idx, realize = sch.resolve_block(block, prim)
    kind, index, old = _resolve_buffer(sch, prim, realize, buffer)
    ndim = len(old.shape)
    dtype = old.shape[0].dtype if old.shape else "int32"
    m = _Map.build(index_map, ndim, dtype)
    subject = f"buffer {old.name}"
    if len(m.initial) != ndim:
        raise sch.error(prim, subject, f"the index map takes {len(m.initial)} indices but the buffer has {ndim} "
                        "dimensions", realize)
    site, allocated = buffer_defining_site(idx, realize, old)
    func = sch.func(block.func_name)
    if site is not None and not allocated:
        raise sch.error(prim, subject, f"The input buffer {old.name} is defined in `match_buffer` of a block, it is "
                        "expected to be a function parameter or allocated by a block.", realize)
    if site is None and not any(b is old for b in func.buffer_map.values()):
        raise sch.error(prim, subject, "the buffer is neither allocated by a block nor a function parameter", realize)
    # The new shape: the range of each output over the old index space.
    dom = {v: tir.Range(tir.IntImm(v.dtype, 0), make_cast(d, v.dtype)) for v, d in zip(m.initial, old.shape)}
    new_shape = []
    for n, f in enumerate(m.final):
        got = eval_range(f, dom)
        if got is None:
            raise sch.error(prim, subject, f"cannot bound output {n} of the index map ({f})", realize)
        lo, ext = got
        if const_value(lo) != 0:
            raise sch.error(prim, subject, f"output {n} of the index map does not start at 0 (its minimum is "
                            f"{_show(lo)}); a layout's indices must", realize)
        new_shape.append(ext)
    if not assume_injective_transform:
        why = _check_bijective(m, old.shape, new_shape)
        shape_text = "(" + ", ".join(_show(d) for d in new_shape) + ")"
        if why == "overlap":
            raise sch.error(prim, subject, f"the index map {m.text()} is not injective on the buffer's shape: it "
                            "sends several elements to one place", realize)
        if why == "out of range":
            raise sch.error(prim, subject, f"the index map {m.text()} leaves the new shape {shape_text}", realize)
        if why == "padding":
            extra = " (a pad_value is not supported by this implementation)" if pad_value is not None else ""
            raise sch.error(prim, subject, f"The transformation {m.text()} applied on buffer {old.name} would result "
                            f"in shape {shape_text}, which would introduce padding{extra}.", realize)
    new = dataclasses.replace(old, shape=new_shape, strides=[], axis_separators=[])
    rewriter = _LayoutRewriter(old, new, m)
    new_body = rewriter.visit_stmt(func.body)
    buffer_map = {k: (new if b is old else b) for k, b in func.buffer_map.items()}
    sch.replace_func(block.func_name, tir.PrimFunc(func.params, buffer_map, new_body, func.ret_type, dict(func.attrs),
                                                   func.private, func.span, func.comments))
    pad_text = None if pad_value is None else _Text(repr(pad_value))
    record_call(sch, "transform_layout", [("block", block), ("buffer", _Text(f'("{kind}", {index})')),
                                      ("index_map", _Text(m.text())), ("pad_value", pad_text),
                                      ("assume_injective_transform", assume_injective_transform)])


def _show(e) -> str:
    from tvmscript.printer.tir_printer import TIRPrinter

    return TIRPrinter().expr(e)
