"""AnnotateTIROpPattern: tag every PrimFunc with the fusion pattern its loop nest has.

Why: FuseOps decides what may be fused from these kinds alone (TVM's OpPatternKind ints,
stored as the ``"op_pattern"`` attribute), so the analysis runs once on the TensorIR that
legalization produced instead of on the high-level op names, which are gone by then.

The rules are TVM's (its ``AnalyzeOpPatternKind``), so a legalized module gets the tags TVM
gives it and fuses the same way. Each block (the root block aside) is read as one store and
the loads in its body:

- every load is classified against the store: indexed exactly like it is elementwise; its
  indices the store's in order, some left out (or a unit dimension read at 0), is broadcast;
  using no variable the store's indices do not is injective; anything else (a load inside an
  index, as ``take`` reads ``x[i[j], k]``) fails. The block's kind is the largest, except
  that one elementwise load makes broadcast loads elementwise (``x[i, j] + b[j]``).
- a block whose loads all pass joins the function's kind, or, when it writes a parameter
  after a reduction, makes the function out-ewise-fusable (softmax: reduce, then an output).
- otherwise a block with reduce iterators is out-ewise-fusable when its body is a multiply
  add whose both operands reuse data (each misses one of the store's variables: matmul,
  convolution) or when a load mixes a reduce variable into an index (pooling windows), and
  comm-reduce when not (a sum, a matrix-vector product); without reduce iterators it is
  kOpaque.
- a block with no store, or with two stores to different indices, is kOpaque.

The function's kind is the largest over its blocks, starting from kElemWise. One rule is
tvms's own: a block with a scan (``T.axis.scan``) or opaque (``T.axis.opaque``) iterator is
kOpaque, since its instances depend on each other in order (a prefix sum reads its own
previous output), which its loads alone do not show. TVM builds its scans (``topi.cumsum``)
with the IR builder, as opaque code, so they are kOpaque there too; tvms writes them as blocks
with a scan iterator (compiler/topi/scan.py), and this rule gives them TVM's answer. A
function already tagged keeps its tag, so the pass is idempotent.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ._common import kBroadcast, kCommReduce, kElemWise, kInjective, kOpaque, kOutEWiseFusable


# Iterator kinds (tvmscript.tir.ITER_KINDS) whose instances must run in order: scan, opaque.
_ORDERED_KINDS = ("C", "O")


def _same(a, b) -> bool:
    """The same index expressions, node for node (TVM's ``same_as``; equal constants count)."""
    return len(a) == len(b) and all(x is y or (isinstance(x, tir.IntImm) and isinstance(y, tir.IntImm)
                                               and x.value == y.value) for x, y in zip(a, b))


def _is_const(e, value) -> bool:
    return isinstance(e, tir.IntImm) and e.value == value


def _is_broadcast(store: tir.BufferStore, load: tir.BufferLoad) -> bool:
    j = 0
    for extent, index in zip(load.buffer.shape, load.indices):
        if _is_const(extent, 1) and _is_const(index, 0):
            continue  # a unit dimension
        while j < len(store.indices) and store.indices[j] is not index:
            j += 1
        if j == len(store.indices):
            return False
    return True


class _Uses(TIRVisitor):
    """The variables an expression reads, a nested load's buffer counting as one."""

    def __init__(self):
        self.vars = set()

    def visit_Var(self, node):
        self.vars.add(id(node))

    def visit_BufferLoad(self, node):
        self.vars.add(id(node.buffer))
        self.generic_visit(node)


def _uses(exprs) -> set:
    u = _Uses()
    for e in exprs:
        u.visit(e)
    return u.vars


def _store_vars(store: tir.BufferStore):
    """ids of the store's index variables, or None when an index is not a plain variable."""
    if not all(isinstance(i, tir.Var) for i in store.indices):
        return None
    return {id(i) for i in store.indices}


def _is_injective(store: tir.BufferStore, load: tir.BufferLoad) -> bool:
    own = _store_vars(store)
    return own is not None and _uses(load.indices) <= own


def _reuses_data(store: tir.BufferStore, load: tir.BufferLoad) -> bool:
    """Whether some store variable is absent from the load's indices (each loaded element
    serves several outputs)."""
    own = _store_vars(store)
    return own is not None and bool(own - _uses(load.indices))


def _strip_casts(e):
    while isinstance(e, tir.Cast):
        e = e.value
    return e


def _is_fma(body) -> bool:
    """``C[...] = C[...] + A[...] * B[...]`` (casts allowed) with A and B both reused."""
    if not isinstance(body, tir.BufferStore):
        return False
    add = _strip_casts(body.value)
    if not isinstance(add, tir.Add):
        return False
    acc, mul = _strip_casts(add.a), _strip_casts(add.b)
    if not (isinstance(mul, tir.Mul) and isinstance(acc, tir.BufferLoad) and acc.buffer is body.buffer
            and _same(acc.indices, body.indices)):
        return False
    lhs, rhs = _strip_casts(mul.a), _strip_casts(mul.b)
    return (isinstance(lhs, tir.BufferLoad) and isinstance(rhs, tir.BufferLoad)
            and _reuses_data(body, lhs) and _reuses_data(body, rhs))


def _is_pure_reduce(reduce_vars: list, indices) -> bool:
    """Whether every index that uses a reduce variable is that variable itself (``B[i, k]``,
    not ``B[i * 2 + k]`` as pooling reads)."""
    ids = {id(v): v for v in reduce_vars}
    for index in indices:
        used = _uses([index]) & ids.keys()
        if used and not (isinstance(index, tir.Var) and id(index) in ids):
            return False
    return True


def _load_kind(store: tir.BufferStore, loads: list) -> int:
    """The kind the loads of a block give it, kOpaque when one is none of the three."""
    kind, elementwise = kElemWise, False
    for load in loads:
        if _same(store.indices, load.indices):
            elementwise = True
        elif _is_broadcast(store, load):
            kind = max(kind, kBroadcast)
        elif _is_injective(store, load):
            kind = max(kind, kInjective)
        else:
            return kOpaque
    return kElemWise if kind == kBroadcast and elementwise else kind


class _Analyzer(TIRVisitor):
    def __init__(self, params):
        self.kind = kElemWise
        self.params = params  # ids of the function's parameter buffers
        self.store = None
        self.loads = []

    def visit_BufferStore(self, node):
        if self.store is not None and not _same(node.indices, self.store.indices):
            self.kind = kOpaque
            return
        self.store = node
        self.generic_visit(node)

    def visit_BufferLoad(self, node):
        self.loads.append(node)
        self.generic_visit(node)

    def visit_Block(self, block: tir.Block):
        if block.name == "root":
            self.visit(block.body)
            return
        if any(iv.kind in _ORDERED_KINDS for iv in block.iter_vars):
            self.kind = kOpaque  # a scan: see the module's docstring
            return
        self.store, self.loads = None, []
        self.visit(block.body)
        if self.store is None:
            self.kind = kOpaque
            return
        kind = _load_kind(self.store, self.loads)
        if kind != kOpaque:
            writes_param = any(id(region.buffer) in self.params for region in block.writes)
            self.kind = kOutEWiseFusable if writes_param and self.kind == kCommReduce else max(self.kind, kind)
            return
        reduce_vars = [iv.var for iv in block.iter_vars if iv.kind == "R"]
        if not reduce_vars:
            self.kind = kOpaque
        elif _is_fma(block.body) or not all(_is_pure_reduce(reduce_vars, ld.indices) for ld in self.loads):
            self.kind = max(self.kind, kOutEWiseFusable)
        else:
            self.kind = max(self.kind, kCommReduce)


def analyze_op_pattern(func: tir.PrimFunc) -> int:
    """The OpPatternKind of a PrimFunc's body."""
    analyzer = _Analyzer({id(b) for b in func.buffer_map.values()})
    analyzer.visit(func.body)
    return analyzer.kind


class AnnotateTIROpPattern:
    """``IRModule -> IRModule``: sets ``"op_pattern"`` on each PrimFunc that lacks one."""

    def __call__(self, mod: ir.IRModule) -> ir.IRModule:
        from ._common import copy_module, replace_fields

        new = copy_module(mod)
        for gv, func in list(mod.functions.items()):
            if isinstance(func, tir.PrimFunc) and "op_pattern" not in func.attrs:
                attrs = {"op_pattern": analyze_op_pattern(func)}
                attrs.update(func.attrs)
                new[gv] = replace_fields(func, attrs=attrs)
        return new
