"""AnnotateTIROpPattern: tag every PrimFunc with the fusion pattern its loop nest has.

Why: FuseOps decides what may be fused from these kinds alone (TVM's OpPatternKind ints,
stored as the ``"op_pattern"`` attribute), so the analysis runs once on the TensorIR that
legalization produced instead of on the high-level op names, which are gone by then.

Per block that stores to a buffer: every load indexed exactly like the store is elementwise,
a load whose indices are the store's variables in order with some left out is broadcast, any
other load makes it injective; a reduction block (one with ``T.init`` or a reduce iterator) is
out-ewise-fusable when its update is ``C = C + A * B`` (matmul-like) or a load's index mixes
a reduce variable into an expression (pooling windows), and comm-reduce otherwise. The
function's kind is the largest over its blocks, except that (TVM's rule for softmax) a
non-reduction block writing an output after reductions makes it out-ewise-fusable; anything
else (no blocks, opaque statements) is kOpaque. A function already tagged keeps its tag, so
the pass is idempotent.

A block with a scan (``T.axis.scan``) or opaque (``T.axis.opaque``) iterator is kOpaque too:
its instances depend on each other in order (a prefix sum reads its own previous output), which
its loads alone do not show (they look elementwise, the block's own buffer being skipped).
TVM 0.27's analysis does not read iterator kinds, but TVM builds its scans (``topi.cumsum``)
with the IR builder, as opaque code without blocks, so they are kOpaque there; tvms writes them
as blocks with a scan iterator (compiler/topi/scan.py), and this rule gives them TVM's answer.
"""

from __future__ import annotations

from tvmscript import ir
from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import TIRVisitor

from ._common import kBroadcast, kCommReduce, kElemWise, kInjective, kOpaque, kOutEWiseFusable


# Iterator kinds (tvmscript.tir.ITER_KINDS) whose instances must run in order: scan, opaque.
_ORDERED_KINDS = ("C", "O")


class _Loads(TIRVisitor):
    def __init__(self):
        self.loads = []

    def visit_BufferLoad(self, node):
        self.loads.append(node)
        self.generic_visit(node)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x is y or (isinstance(x, tir.IntImm) and isinstance(y, tir.IntImm)
                                               and x.value == y.value) for x, y in zip(a, b))


def _is_broadcast(store_idx, load_idx) -> bool:
    if not all(isinstance(i, tir.Var) for i in store_idx):
        return False
    pos = 0
    for i in load_idx:
        if isinstance(i, tir.IntImm):  # a size-1 broadcast dimension
            continue
        while pos < len(store_idx) and store_idx[pos] is not i:
            pos += 1
        if pos == len(store_idx):
            return False
        pos += 1
    return True


def _store_kind(store: tir.BufferStore) -> int:
    finder = _Loads()
    finder.visit(store.value)
    kind = kElemWise
    for load in finder.loads:
        if load.buffer is store.buffer:
            continue
        if _same(store.indices, load.indices):
            continue
        if _is_broadcast(store.indices, load.indices):
            kind = max(kind, kBroadcast)
        else:
            kind = max(kind, kInjective)
    return kind


def _is_matmul_like(store: tir.BufferStore) -> bool:
    v = store.value
    if not isinstance(v, tir.Add):
        return False
    a, b = v.a, v.b
    if isinstance(b, tir.BufferLoad) and b.buffer is store.buffer:
        a, b = b, a
    if not (isinstance(a, tir.BufferLoad) and a.buffer is store.buffer):
        return False
    while isinstance(b, tir.Cast):
        b = b.value
    return isinstance(b, tir.Mul)


def _is_pure_reduce(block: tir.Block, store: tir.BufferStore) -> bool:
    """Whether every load index using a reduce variable is that variable itself (``B[i, k]``,
    not ``B[i * 2 + k]`` as pooling reads)."""
    from tvmscript.ir.tir_visitor import vars_in

    reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.kind in ("R", "reduce")}
    finder = _Loads()
    finder.visit(store.value)
    for load in finder.loads:
        for index in load.indices:
            if any(id(v) in reduce_vars for v in vars_in([index])) and not (
                    isinstance(index, tir.Var) and id(index) in reduce_vars):
                return False
    return True


class _Analyzer(TIRVisitor):
    def __init__(self, params=()):
        self.kind = None
        self.opaque = False
        self.params = params  # ids of the function's parameter buffers

    def _join(self, k):
        self.kind = k if self.kind is None else max(self.kind, k)

    def visit_Block(self, block: tir.Block):
        if any(iv.kind in _ORDERED_KINDS for iv in block.iter_vars):
            self.opaque = True  # a scan: see the module's docstring
            return
        stores = [s for s in _direct_stores(block.body)]
        if block.name == "root" and not block.iter_vars and not stores:
            self.generic_visit(block)
            return
        if not stores:
            self.generic_visit(block)
            return
        reduction = block.init is not None or any(iv.kind == "reduce" for iv in block.iter_vars)
        for store in stores:
            if reduction:
                fusable = _is_matmul_like(store) or not _is_pure_reduce(block, store)
                self._join(kOutEWiseFusable if fusable else kCommReduce)
            elif self.kind == kCommReduce and id(store.buffer) in self.params:
                self._join(kOutEWiseFusable)  # reduce, then an output stage: softmax, mean
            else:
                self._join(_store_kind(store))
        self.generic_visit(block)

    def visit_Evaluate(self, node):
        self.opaque = True

    def visit_While(self, node):
        self.opaque = True


def _direct_stores(stmt) -> list:
    """BufferStores in ``stmt`` not nested in another block."""
    out = []

    class _S(TIRVisitor):
        def visit_BufferStore(self, node):
            out.append(node)

        def visit_Block(self, node):
            pass

    _S().visit(stmt)
    return out


def analyze_op_pattern(func: tir.PrimFunc) -> int:
    """The OpPatternKind of a PrimFunc's body."""
    a = _Analyzer({id(b) for b in func.buffer_map.values()})
    a.visit(func.body)
    if a.opaque or a.kind is None:
        return kOpaque
    return a.kind


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
