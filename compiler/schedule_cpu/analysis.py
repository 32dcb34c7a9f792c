"""What the default CPU schedule's rules read off a loop nest's expressions: affine indices
and the element stride of each access along each iterator, the loads in an expression, whether
it has side effects, the reduction's combined operand, whether LLVM can vectorize it; and the
tile sizes that divide a loop.

Shared by every rule (as `dlight.analysis` is by the GPU rules), so it lives apart from them."""

from __future__ import annotations

from typing import Optional

from tvmscript.ir import tir
from tvmscript.ir.mutator import IRMutator
from tvmscript.ir.tir_visitor import vars_in

from ..schedule.common import blocks_under


_BIG = 1 << 30  # the stride of an access through a symbolic dimension: assume it is large


def affine(e, atoms: frozenset = frozenset()) -> Optional[dict]:
    """``e`` as {Var: coefficient, None: constant} if it is affine in its Vars, else None.
    A ``min`` of only the Vars in ``atoms`` (a shifted tile's start, `shifted_start`) is one
    more term, with itself as key, and so is a load at constant indices (a scalar buffer)."""
    if isinstance(e, tir.IntImm):
        return {None: e.value}
    if isinstance(e, tir.Var):
        return {e: 1, None: 0}
    if isinstance(e, tir.Cast) and tir.is_int(e.dtype) and tir.is_int(e.value.dtype):
        return affine(e.value, atoms)
    if isinstance(e, (tir.Add, tir.Sub)):
        a, b = affine(e.a, atoms), affine(e.b, atoms)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, tir.Add) else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, tir.Min) and atoms and set(vars_in([e])) <= atoms:
        return {e: 1, None: 0}
    if isinstance(e, tir.BufferLoad) and not vars_in(list(e.indices)):
        return {e: 1, None: 0}  # a scalar read (a ``take``'s index): the same at every iteration
    if isinstance(e, tir.Mul):
        a, b = affine(e.a, atoms), affine(e.b, atoms)
        if a is None or b is None:
            return None
        if len(a) == 1:
            a, b = b, a
        if len(b) != 1:
            return None
        c = b[None]
        return {k: v * c for k, v in a.items()}
    return None


def buffer_strides(buf: tir.Buffer) -> list:
    """A buffer's element stride along each dimension (`_BIG` through a symbolic one)."""
    if buf.strides:
        return [s.value if isinstance(s, tir.IntImm) else _BIG for s in buf.strides]
    out, acc = [], 1
    for dim in reversed(buf.shape):
        out.append(acc)
        acc = acc * dim.value if isinstance(dim, tir.IntImm) else _BIG
    return list(reversed(out))


def access_strides(buf: tir.Buffer, indices: list, atoms: frozenset = frozenset()) -> Optional[dict]:
    """Element stride of a buffer access along each Var, or None if not affine (`affine`)."""
    total: dict = {}
    for idx, stride in zip(indices, buffer_strides(buf)):
        aff = affine(idx, atoms)
        if aff is None:
            return None
        for k, v in aff.items():
            if k is not None:
                total[k] = total.get(k, 0) + v * stride
    return total


def buffer_loads(e, out: list) -> list:
    """``out`` with every load in ``e`` appended (loads inside indices too), in order."""
    if isinstance(e, tir.BufferLoad):
        out.append(e)
        for i in e.indices:
            buffer_loads(i, out)
    elif isinstance(e, tir.BinaryOp):
        buffer_loads(e.a, out)
        buffer_loads(e.b, out)
    elif isinstance(e, tir.Cast):
        buffer_loads(e.value, out)
    elif isinstance(e, tir.Not):
        buffer_loads(e.a, out)
    elif isinstance(e, tir.Select):
        buffer_loads(e.condition, out)
        buffer_loads(e.true_value, out)
        buffer_loads(e.false_value, out)
    elif isinstance(e, tir.Call):
        for a in e.args:
            if isinstance(a, tir.PrimExpr):
                buffer_loads(a, out)
    elif isinstance(e, tir.Let):
        buffer_loads(e.value, out)
        buffer_loads(e.body, out)
    return out


def block_accesses(block: tir.Block) -> list:
    """``(buffer, indices)`` of every store and load in a block's store statements (init
    first, loads inside indices included)."""
    out = []
    for stmt in (block.init, block.body):
        if stmt is None:
            continue
        out.append((stmt.buffer, stmt.indices))
        for ld in buffer_loads(stmt.value, []) + [x for i in stmt.indices for x in buffer_loads(i, [])]:
            out.append((ld.buffer, ld.indices))
    return out


def impure(e) -> bool:
    """Whether ``e`` calls out (an extern, packed or LLVM intrinsic call): it may have side
    effects, so a nest computing it must keep its order."""
    if isinstance(e, tir.Call):
        if e.op in ("tir.call_extern", "tir.call_packed", "tir.call_llvm_intrin"):
            return True
        return any(impure(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.BinaryOp):
        return impure(e.a) or impure(e.b)
    if isinstance(e, tir.Cast):
        return impure(e.value)
    if isinstance(e, tir.Not):
        return impure(e.a)
    if isinstance(e, tir.Select):
        return impure(e.condition) or impure(e.true_value) or impure(e.false_value)
    if isinstance(e, tir.Let):
        return impure(e.value) or impure(e.body)
    if isinstance(e, tir.BufferLoad):
        return any(impure(i) for i in e.indices)
    return False


def same_indices(a: list, b: list) -> bool:
    """Whether two index lists are the same iterators (the same objects) or equal constants."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, tir.IntImm) and isinstance(y, tir.IntImm) and x.value == y.value and x.dtype == y.dtype:
            continue
        return False
    return True


_COMBINERS = (tir.Add, tir.Mul, tir.Max, tir.Min)


def reduction_rhs(store: tir.BufferStore):
    """For ``C[idx] = C[idx] <op> rhs`` (either operand order) return rhs, else None."""
    v = store.value
    if not isinstance(v, _COMBINERS):
        return None
    for acc, rhs in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, tir.BufferLoad) and acc.buffer is store.buffer and same_indices(acc.indices, store.indices):
            return rhs
    return None


class _VectorizableCalls(IRMutator):
    """Walks a node; `ok` stays True while every call seen is one LLVM vectorizes. An
    ``if_then_else`` is generated as a branch, which LLVM's vectorizer if-converts into a
    masked load and a select (an inlined padding: `inline._padding_read_few_times`)."""

    def __init__(self) -> None:
        super().__init__()
        from ..codegen_llvm import vectorizable_call

        self.vectorizable_call = vectorizable_call
        self.ok = True

    def visit_expr(self, e):
        if isinstance(e, tir.Call) and e.op != "tir.if_then_else" and not self.vectorizable_call(e.op, e.dtype):
            self.ok = False
        return super().visit_expr(e)


def vectorizable(node) -> bool:
    """Whether LLVM can vectorize a loop around ``node`` (an expression or a statement of
    stores): every call in it is one `codegen_llvm.vectorizable_call` accepts. A vectorize
    annotation on a loop it cannot vectorize only makes LLVM print a warning."""
    calls = _VectorizableCalls()
    if isinstance(node, tir.PrimExpr):
        calls.visit_expr(node)
    else:
        calls.visit_stmt(node)
    return calls.ok


def count_buffer_loads(block: tir.Block, buf) -> int:
    """Loads of ``buf`` in a block's body (its init included)."""
    count = 0
    for part in (block.body, block.init):
        if isinstance(part, tir.BufferStore):
            count += sum(1 for ld in buffer_loads(part.value, []) if ld.buffer is buf)
            count += sum(1 for i in part.indices for ld in buffer_loads(i, []) if ld.buffer is buf)
        elif part is not None:
            count += 1 << 20  # a body we do not look into: never counts as a single read
    return count


def only_blocks(stmt, names: set) -> bool:
    """Whether every block in ``stmt`` (at least one) is named in ``names``."""
    realizes = ([stmt] if isinstance(stmt, tir.BlockRealize) else []) + blocks_under(stmt)
    return bool(realizes) and all(r.block.name in names for r in realizes)


def pick_tile(extent: int, target: int, allow_small: bool = False) -> Optional[int]:
    """The largest power of two <= target dividing extent (and smaller than it)."""
    t = 1
    while t * 2 <= target:
        t *= 2
    while t >= (1 if allow_small else 4):
        if extent % t == 0 and extent > t:
            return t
        t //= 2
    return None


def constant_bounds(cond) -> Optional[dict]:
    """``{iterator: (lo, hi)}`` for a conjunction of ``lo <= v``, ``v < hi`` (and ``v >= lo``,
    ``hi > v``, ``<=``/``>`` forms) with integer constants; None for anything else."""
    out: dict = {}

    def add(var, lo=None, hi=None) -> bool:
        if not isinstance(var, tir.Var):
            return False
        cur = out.get(var, (-(1 << 62), 1 << 62))
        out[var] = (max(cur[0], lo) if lo is not None else cur[0], min(cur[1], hi) if hi is not None else cur[1])
        return True

    def visit(e) -> bool:
        if isinstance(e, tir.And):
            return visit(e.a) and visit(e.b)
        a, b = getattr(e, "a", None), getattr(e, "b", None)
        if isinstance(e, (tir.LE, tir.LT, tir.GE, tir.GT)):
            if isinstance(a, tir.IntImm):  # c <= v, c < v, c >= v, c > v
                c = a.value
                return add(b, lo={tir.LE: c, tir.LT: c + 1}.get(type(e)), hi={tir.GE: c + 1, tir.GT: c}.get(type(e)))
            if isinstance(b, tir.IntImm):  # v < c, v <= c, v >= c, v > c
                c = b.value
                return add(a, lo={tir.GE: c, tir.GT: c + 1}.get(type(e)), hi={tir.LT: c, tir.LE: c + 1}.get(type(e)))
        return False

    return out if visit(cond) else None
