"""How much a loop nest of lowered TIR does, estimated before any code exists.

Two decisions of the CPU code generator follow these estimates: whether a small serial loop
nest is unrolled in full (`unroll_cost`: its loads and stores once unrolled, at most
`UNROLL_BUDGET`, as LLVM's own heuristics would at O3), and how many threads a parallel loop
starts (`estimated_work` and `runtime_work_expr`: the loads and stores of one iteration, one
thread per `PARALLEL_MIN_WORK_PER_THREAD`; `iterations_per_thread` says why that many; fewer
in a kernel that `starts_a_team` anyway). They
are pure functions of the IR, kept apart from the code that emits LLVM so that they can be
read, and tested, on their own.
"""

from __future__ import annotations

from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import calls_extern

UNROLL_BUDGET = 384  # loop nests doing at most this many loads and stores in all are unrolled,
UNROLL_MAX_EXTENT = 16  # ... if none of their loops is longer than this (longer ones vectorize)
_NO_UNROLL = 1 << 30


def unroll_cost(s, in_parallel: bool = False) -> int:
    """Loads and stores a lowered statement executes, when that is a constant of loops with
    constant extents and plain statements (else a huge number): the size of its full unroll.
    ``in_parallel``: inside a parallel loop, where nested parallel loops run serially."""
    if isinstance(s, tir.For):
        kinds = ("serial", "unroll", "parallel") if in_parallel else ("serial", "unroll")
        if s.kind not in kinds or s.annotations or not isinstance(s.extent, tir.IntImm) \
                or s.extent.value > UNROLL_MAX_EXTENT:
            return _NO_UNROLL
        return min(_NO_UNROLL, max(0, s.extent.value) * unroll_cost(s.body, in_parallel))
    if isinstance(s, tir.SeqStmt):
        return min(_NO_UNROLL, sum(unroll_cost(x, in_parallel) for x in s.seq))
    if isinstance(s, tir.IfThenElse):
        return unroll_cost(s.then_case, in_parallel) + (
            unroll_cost(s.else_case, in_parallel) if s.else_case is not None else 0)
    if isinstance(s, tir.BufferStore):
        return 1 + _count_loads(s.value)
    return _NO_UNROLL


PARALLEL_MIN_WORK_PER_THREAD = 1 << 19  # work units (`estimated_work`) each thread of a team must get
UNKNOWN_WORK = 1 << 40  # the work of a loop nest with a symbolic extent: maybe large


# Work units each thread must get in a kernel that starts a team anyway (`starts_a_team`).
# Why smaller: the idle workers are woken once per kernel, by whichever parallel loop comes
# first; the kernel's other parallel loops then find them spinning, and a team costs about a
# microsecond. resnet18's 3x3 convolutions copy their input into a padded buffer (4e5 units,
# ~25 us on one thread) before their big loop: with this, both threads copy it.
PARALLEL_MIN_WORK_BESIDE_TEAM = 1 << 15


def starts_a_team(body) -> bool:
    """Whether a kernel of this lowered body surely starts a thread team: one of its outermost
    parallel loops has a constant extent of at least two threads' iterations
    (`iterations_per_thread`)."""
    if isinstance(body, tir.For) and body.kind == "parallel":
        return isinstance(body.extent, tir.IntImm) and body.extent.value >= 2 * iterations_per_thread(body.body)
    if isinstance(body, tir.SeqStmt):
        return any(starts_a_team(x) for x in body.seq)
    if isinstance(body, tir.IfThenElse):
        return starts_a_team(body.then_case) or (body.else_case is not None and starts_a_team(body.else_case))
    inner = getattr(body, "body", None)
    return isinstance(inner, tir.Stmt) and starts_a_team(inner)


def iterations_per_thread(body, min_work: int = PARALLEL_MIN_WORK_PER_THREAD) -> int:
    """Iterations of a parallel loop with this body that make one thread's share: each
    thread of a team must get at least `PARALLEL_MIN_WORK_PER_THREAD` units of `estimated_work`.

    Why that many: waking the idle workers of a libgomp team and waiting for them costs
    ~1 us while they spin, but 10-70 us on the 2-core virtual machine measured once they
    sleep, which they do between the calls of a serving loop and after tvms's short spin
    (`runtime.cpu.TVMS_SPINCOUNT`): with sleeping workers, two threads were slower than one
    on an elementwise kernel up to ~2.6e5 elements (5e5 units, ~25 us of work), and no
    faster on the batch-1 MLP's weight transpose (4e5 units, ~110 us). A team of two thus
    needs 2 x 2^19 units (~50-250 us of work, by how well the loop vectorizes). Under load a
    team costs far more (a worker waits milliseconds for a core): the batch-1 MLP's kernels
    (4e5-8e5 units) stay on the calling thread. ``min_work``: that minimum, smaller in a
    kernel that starts a team anyway (`PARALLEL_MIN_WORK_BESIDE_TEAM`)."""
    per_iteration = max(1, estimated_work(body))
    return max(1, -(-min_work // per_iteration))


def estimated_work(s) -> int:
    """An estimate of the work of one execution of a lowered statement: the buffer loads and
    stores it does (arithmetic rides along with them), at most `UNKNOWN_WORK`. A loop with
    a symbolic extent, a ``while`` loop and a call to an external function (which may do any
    amount of work) count as `UNKNOWN_WORK`: they may be large, so such a loop gets a team.
    An ``if`` counts its costlier branch. (`runtime_work_expr` counts; this is its constant.)"""
    w = runtime_work_expr(s)
    return min(UNKNOWN_WORK, w.value) if isinstance(w, tir.IntImm) else UNKNOWN_WORK


def runtime_work_expr(s):
    """The work `estimated_work` estimates, as an int64 expression of the symbolic extents of the
    loops (evaluated before a parallel loop to size its team; an IntImm, at most
    `UNKNOWN_WORK`, when every extent is constant), or None when some part's work is not
    such an expression (a ``while`` loop, an external call)."""
    def const(v):
        return tir.IntImm("int64", min(UNKNOWN_WORK, v))

    def fold(op, a, b, f):
        if a is None or b is None:
            return None
        if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
            return const(f(a.value, b.value))
        return op("int64", a, b)

    def add(a, b):
        return fold(tir.Add, a, b, lambda x, y: x + y)

    def mul(a, b):
        return fold(tir.Mul, a, b, lambda x, y: x * y)

    def larger(a, b):
        return fold(tir.Max, a, b, max)

    def own(cost: int):  # the statement's own loads and stores, unless unknown
        return const(cost) if cost < UNKNOWN_WORK else None

    if isinstance(s, tir.For):
        extent = s.extent if s.extent.dtype == "int64" else tir.Cast("int64", s.extent)
        if isinstance(s.extent, tir.IntImm):
            extent = tir.IntImm("int64", s.extent.value)
        return mul(larger(extent, const(0)), runtime_work_expr(s.body))
    if isinstance(s, tir.SeqStmt):
        total = const(0)
        for x in s.seq:
            total = add(total, runtime_work_expr(x))
        return total
    if isinstance(s, tir.While):
        return None
    if isinstance(s, tir.IfThenElse):
        other = runtime_work_expr(s.else_case) if s.else_case is not None else const(0)
        return add(own(_expr_work(s.condition)), larger(runtime_work_expr(s.then_case), other))
    if isinstance(s, (tir.BufferStore, tir.Evaluate)):
        return own(1 + _expr_work(s.value))
    if isinstance(s, tir.LetStmt):
        return add(own(_expr_work(s.value)), runtime_work_expr(s.body))
    if isinstance(s, tir.AssertStmt):
        return add(own(_expr_work(s.condition)), runtime_work_expr(s.body))
    body = getattr(s, "body", None)
    return runtime_work_expr(body) if body is not None else const(1)


def _expr_work(e) -> int:
    """The loads an expression does (`estimated_work`), or `UNKNOWN_WORK` when it calls an external
    function."""
    return UNKNOWN_WORK if calls_extern(e) else min(UNKNOWN_WORK, _count_loads(e))


def _count_loads(e) -> int:
    if isinstance(e, tir.BufferLoad):
        return 1
    if isinstance(e, tir.BinaryOp):
        return _count_loads(e.a) + _count_loads(e.b)
    if isinstance(e, tir.Cast):
        return _count_loads(e.value)
    if isinstance(e, tir.Not):
        return _count_loads(e.a)
    if isinstance(e, tir.Select):
        return _count_loads(e.condition) + _count_loads(e.true_value) + _count_loads(e.false_value)
    if isinstance(e, tir.Call):
        return sum(_count_loads(a) for a in e.args if isinstance(a, tir.PrimExpr))
    if isinstance(e, tir.Let):
        return _count_loads(e.value) + _count_loads(e.body)
    return 0
