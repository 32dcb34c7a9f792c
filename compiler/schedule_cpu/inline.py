"""The first step of the default CPU schedule: intermediate elementwise and injective stages
inlined into the stages that read them (`inline_elementwise`: a fused GELU's six passes over
memory become one), before any nest is planned.

A rewrite of the whole function with `compute_inline`, not a rule of one nest, so it lives
apart from the rules; the nests it leaves are what the rules see. A convolution's padding
(``if_then_else`` of comparisons) is inlined only into a reduction that reads each padded
element a few times, along a loop the register tile vectorizes (a depthwise convolution with
stride 1): LLVM if-converts the branch into masked loads (`analysis.vectorizable` lets it)."""

from __future__ import annotations

import dataclasses

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator

from ..schedule import Schedule, ScheduleError
from ..schedule.common import blocks_under
from .analysis import access_strides, buffer_loads, count_buffer_loads, impure


# Intrinsics costing far more than a load: a producer computing one is inlined only where
# that does not compute it more often (see `inline_elementwise`).
EXPENSIVE_CALLS = frozenset((
    "tir.exp", "tir.exp2", "tir.exp10", "tir.log", "tir.log2", "tir.log10", "tir.log1p", "tir.erf", "tir.tanh",
    "tir.sigmoid", "tir.sin", "tir.cos", "tir.tan", "tir.asin", "tir.acos", "tir.atan", "tir.atan2", "tir.sinh",
    "tir.cosh", "tir.asinh", "tir.acosh", "tir.atanh", "tir.pow", "tir.fmod", "tir.hypot", "tir.sqrt", "tir.rsqrt",
))


def inline_elementwise(func: tir.PrimFunc, body):
    """``body`` with each intermediate elementwise or injective stage (no reduction; it
    stores each element of a buffer allocated in the function once) inlined into the stages
    that read it, when none of them is a reduction: a chain such as GELU's six stages (add,
    multiply, erf, multiply, add, multiply) becomes one loop nest that reads its inputs and
    writes its output once, instead of six passes over memory through five full-size
    buffers. Each element is computed by the same expression as before, so results do not
    change. A stage computing an expensive intrinsic (`EXPENSIVE_CALLS`) is inlined only
    into a single read by a stage of as many elements (it would otherwise be computed several
    times per element); a stage read by a reduction (a convolution's padding, softmax's
    exponentials) stays, since the reduction would recompute it for each of its steps,
    unless it is a plain copy (`_plain_copy`: a convolution's padding by zero, which TVM's
    legalization emits too), which costs the reduction nothing and saves a pass over memory,
    or a padding a depthwise convolution reads contiguously (`_padding_read_few_times`: its
    comparisons, computed per read, cost less than the pass that wrote the padded copy).
    `compute_inline` checks the rest (and refuses what it cannot prove)."""
    root = body.block if isinstance(body, tir.BlockRealize) else None
    if root is None or not root.alloc_buffers:
        return body
    intermediates = set(root.alloc_buffers)
    body = _RoundedProducts(intermediates).visit_stmt(body)
    sch = Schedule(tir.PrimFunc(func.params, func.buffer_map, body, func.ret_type, dict(func.attrs),
                                func.private, func.span))
    for realize in blocks_under(body):
        block = realize.block
        store = block.body
        if not isinstance(store, tir.BufferStore) or store.buffer not in intermediates or block.init is not None:
            continue
        if any(iv.kind != "S" for iv in block.iter_vars) or impure(store.value):
            continue
        current = sch.func("main").body
        readers = [(r, n) for r in blocks_under(current) if r.block.name != block.name
                   for n in [count_buffer_loads(r.block, store.buffer)] if n]
        if not readers or not (_plain_copy(block) or _padding_read_few_times(block, readers)) and any(
                r.block.init is not None or any(iv.kind != "S" for iv in r.block.iter_vars) for r, _ in readers):
            continue
        if has_expensive_call(store.value):
            if len(readers) != 1 or readers[0][1] != 1 or _domain_size(readers[0][0].block) != _domain_size(block):
                continue
        try:
            sch.compute_inline(sch.get_block(block.name))
        except ScheduleError:
            continue
    return sch.func("main").body


class _RoundedProducts(IRMutator):
    """Marks each float product stored into an intermediate buffer as rounded (a cast to its
    own type, which generates no code): inlined into an add (``x + y * z`` from a multiply
    stage and an add stage), it would otherwise become one fused multiply-add
    (`codegen_llvm`'s ``llvm.fmuladd``), rounded once where the unscheduled kernel rounds the
    product when it stores it; results would differ in the last bits."""

    def __init__(self, intermediates: set) -> None:
        super().__init__()
        self.intermediates = intermediates

    def visit_stmt(self, s):
        if isinstance(s, tir.BufferStore) and s.buffer in self.intermediates and isinstance(s.value, tir.Mul) \
                and tir.is_float(s.value.dtype):
            return dataclasses.replace(s, value=tir.Cast(s.value.dtype, s.value))
        return super().visit_stmt(s)


def _plain_copy(block: tir.Block) -> bool:
    """Whether a stage copies a buffer of its own shape element for element (``P[i, j] =
    X[i, j]``, its iterators in order): read in its place, the readers' indices stay as they
    were."""
    store = block.body
    load = store.value
    ivars = [iv.var for iv in block.iter_vars]
    return (isinstance(load, tir.BufferLoad) and load.dtype == store.buffer.dtype and list(load.indices) == ivars
            and list(store.indices) == ivars and len(load.buffer.shape) == len(ivars))


# Reads of each padded element by a reduction, at most, for its padding to be inlined into it
# (`_padding_read_few_times`): a depthwise 3x3 convolution reads each element of its padded
# input up to 9 times; an ordinary convolution reads it once per output channel.
PADDING_MAX_READS = 9


def _padding_read_few_times(block: tir.Block, readers: list) -> bool:
    """Whether a stage pads a buffer (``P[i] = if_then_else(cond, X[i - lo], 0)``, ``cond`` of
    comparisons of the iterators, no load) read by one reduction that reads each of its
    elements at most `PADDING_MAX_READS` times on average (a depthwise convolution). Inlined,
    each read computes the comparisons instead of loading a padded copy that one more pass
    over memory wrote: a depthwise convolution does little work per element it reads, and
    that pass took about as long as the convolution (mobilenet_v2)."""
    if not is_padding(block):
        return False
    if len(readers) != 1 or readers[0][1] != 1:
        return False
    reader, own = readers[0][0].block, _domain_size(block)
    reads = _domain_size(reader)
    return (own is not None and reads is not None and reads <= PADDING_MAX_READS * own
            and _read_contiguously(reader, block.body.buffer))


def is_padding(block: tir.Block) -> bool:
    """Whether a stage pads a buffer: ``P[i] = if_then_else(cond, X[i - lo], c)``, ``cond`` of
    comparisons of the iterators (no load, nothing expensive), ``c`` a constant."""
    value = block.body.value if isinstance(block.body, tir.BufferStore) else None
    if not (isinstance(value, tir.Call) and value.op == "tir.if_then_else"):
        return False
    cond, then, other = value.args
    if not isinstance(then, tir.BufferLoad) or not isinstance(other, (tir.FloatImm, tir.IntImm)):
        return False
    return not buffer_loads(cond, []) and not has_expensive_call(cond)


def _read_contiguously(reader: tir.Block, buf) -> bool:
    """Whether ``reader`` reads ``buf`` contiguously along one of its spatial iterators: the
    register tile then vectorizes along it, LLVM turning the inlined padding's condition into
    masked loads. Read with a stride (a convolution with stride 2), the tile takes scalar
    accumulators, and a branch per scalar read measured slower than the padding's own pass."""
    (load,) = [ld for ld in buffer_loads(reader.body.value, []) if ld.buffer is buf]
    strides = access_strides(buf, list(load.indices))
    return strides is not None and any(strides.get(iv.var) == 1 for iv in reader.iter_vars if iv.kind == "S")


def has_expensive_call(e) -> bool:
    """Whether ``e`` calls one of `EXPENSIVE_CALLS` (anywhere, loads' indices included)."""
    if isinstance(e, tir.Call):
        if e.op in EXPENSIVE_CALLS:
            return True
        return any(has_expensive_call(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.BinaryOp):
        return has_expensive_call(e.a) or has_expensive_call(e.b)
    if isinstance(e, (tir.Cast,)):
        return has_expensive_call(e.value)
    if isinstance(e, tir.Not):
        return has_expensive_call(e.a)
    if isinstance(e, tir.Select):
        return any(has_expensive_call(x) for x in (e.condition, e.true_value, e.false_value))
    if isinstance(e, tir.Let):
        return has_expensive_call(e.value) or has_expensive_call(e.body)
    if isinstance(e, tir.BufferLoad):
        return any(has_expensive_call(i) for i in e.indices)
    return False


def _domain_size(block: tir.Block):
    """Points in a block's iteration domain (None if symbolic)."""
    size = 1
    for iv in block.iter_vars:
        if not isinstance(iv.dom.extent, tir.IntImm):
            return None
        size *= iv.dom.extent.value
    return size
