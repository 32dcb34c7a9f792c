"""`written_first.written_before_read`: which allocations the code generator may leave
unfilled, and that kernels whose fill it leaves out still read only what they wrote."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.lower_tir import dump, lower
from tvmscript.compiler.written_first import MIN_BYTES, needs_zero_fill, written_before_read
from tvmscript.ir.tir import Allocate
from tvmscript.ir.tir_visitor import TIRVisitor


def allocations(src: str, question=written_before_read) -> dict:
    """buffer name -> the answer to ``question`` for its allocation, in the lowered kernel."""
    func = lower(tvms.parse(src))
    found = {}

    class Walk(TIRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            found[node.buffer.name] = question(node.body, node.buffer)
            self.visit(node.body)

    Walk().visit(func.body)
    return found


def kernel(src: str):
    return build_cpu({"main": tvms.parse(src)})["main"]


# X is written whole by two loops (a border and an interior, as a padded copy is), then read.
COVERED = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((10,), "float32")):
    X = T.alloc_buffer((10,))
    X[0] = T.float32(0)
    X[9] = T.float32(0)
    for i in range(8):
        X[i + 1] = A[i]
    for i in range(10):
        B[i] = X[i] * T.float32(2)
'''

# The same, one border element never written: its fill must stay.
GAP = COVERED.replace("    X[9] = T.float32(0)\n", "")

# Every element is written, but under an ``if``: the writes may not run.
CONDITIONAL = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), n: T.int32):
    X = T.alloc_buffer((8,))
    if n > 0:
        for i in range(8):
            X[i] = A[i]
    for i in range(8):
        B[i] = X[i]
'''

# A read before the last write: the walk stops at it.
READ_FIRST = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    X = T.alloc_buffer((8,))
    for i in range(4):
        X[i] = A[i]
    B[0] = X[7]
    for i in range(4):
        X[i + 4] = A[i]
    for i in range(8):
        B[i] = X[i]
'''

# Written through a 2-D tile with an index of min() and floor division, as register tiles and
# shifted tiles write their panels.
TILED = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((12, 7), "float32"), B: T.Buffer((12, 7), "float32")):
    X = T.alloc_buffer((84,))
    for f in range(6):
        for j in range(4):
            for k in range(7):
                X[T.min(f // 3 * 6 + j * 2, 10) * 7 + f % 3 * 0 + k] = A[T.min(f // 3 * 6 + j * 2, 10), k]
                X[T.min(f // 3 * 6 + j * 2, 10) * 7 + 7 + k] = A[T.min(f // 3 * 6 + j * 2, 10) + 1, k]
    for i in range(12):
        for k in range(7):
            B[i, k] = X[i * 7 + k]
'''

# A loop of symbolic extent: its stores are not enumerated.
SYMBOLIC = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), n: T.int64):
    X = T.alloc_buffer((8,))
    for i in range(n):
        X[i % 8] = A[i % 8]
    for i in range(8):
        B[i] = X[i]
'''

# A loop nest of more iterations than the walk enumerates (MAX_POINTS) that stores nothing into
# X, before the loop that writes it: skipped, not a stop (a matmul's inner loops, then its
# output written from registers).
LONG_LOOP_ELSEWHERE = '''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((1,), "float32")):
    X = T.alloc_buffer((8,))
    for i, j, k in T.grid(256, 256, 256):
        C[0] = C[0] + A[i % 8]
    for i in range(8):
        X[i] = A[i]
    for i in range(8):
        B[i] = X[i]
'''


# A loop that branches on its iterator, as a parallel loop partitioned around a padding
# guard does (`loop_partition`): the two branches write every element between them.
def branched(n: int = 10) -> str:
    return f'''# from tvm.script import tir as T
@T.prim_func
def main(A: T.Buffer(({n - 2},), "float32"), B: T.Buffer(({n},), "float32")):
    X = T.alloc_buffer(({n},))
    for i in T.parallel({n}):
        if 1 <= i and i < {n - 1}:
            X[i] = A[i - 1]
        else:
            X[i] = T.float32(0)
    for i in range({n}):
        B[i] = X[i] * T.float32(2)
'''


BRANCHED = branched()

# The same with no ``else``: the border is never written.
ONE_BRANCH = BRANCHED.replace("""        else:
            X[i] = T.float32(0)
""", "")

# A branch that reads the buffer: the walk stops there, though both branches write.
BRANCH_READS = BRANCHED.replace("X[i] = T.float32(0)", "X[i] = X[0]")


@pytest.mark.parametrize("src, expected", [(COVERED, True), (GAP, False), (CONDITIONAL, False),
                                           (READ_FIRST, False), (TILED, True), (SYMBOLIC, False),
                                           (BRANCHED, True), (ONE_BRANCH, False), (BRANCH_READS, False),
                                           (LONG_LOOP_ELSEWHERE, True)])
def test_written_before_read(src, expected):
    assert allocations(src) == {"X": expected}


def _scaled(src: str, n: int) -> str:
    """COVERED or GAP over ``n`` elements instead of 10."""
    return src.replace("(8,)", f"({n - 2},)").replace("(10,)", f"({n},)").replace("X[9]", f"X[{n - 1}]") \
        .replace("range(8)", f"range({n - 2})").replace("range(10)", f"range({n})")


def test_small_allocations_keep_their_fill():
    """Below `MIN_BYTES` the fill stays even when every element is written first (LLVM's SLP
    vectorizer broke a small unrolled max pooling without it); above, only when one may be
    read unwritten."""
    big = MIN_BYTES // 4 + 6
    assert allocations(COVERED, needs_zero_fill) == {"X": True}
    assert allocations(_scaled(COVERED, big), needs_zero_fill) == {"X": False}
    assert allocations(_scaled(GAP, big), needs_zero_fill) == {"X": True}


def test_kernels_read_what_they_wrote_and_zeros_elsewhere():
    """Filled or not, each kernel computes the same: the covered copy doubles A with zero
    borders; the one with a gap reads a zero there, never stale stack contents."""
    for n in (10, MIN_BYTES // 4 + 6):
        a = np.arange(1, n - 1, dtype="float32")
        for src in (COVERED, GAP):
            b = np.full(n, 5, "float32")
            kernel(_scaled(src, n))(a, b)
            np.testing.assert_array_equal(b, np.concatenate([[0], 2 * a, [0]]))
    a, b = np.arange(1, 9, dtype="float32"), np.full(8, 5, "float32")
    kernel(CONDITIONAL)(a, b, 0)
    np.testing.assert_array_equal(b, np.zeros(8, "float32"))
    for n in (10, MIN_BYTES // 4 + 6):
        a, b = np.arange(1, n - 1, dtype="float32"), np.full(n, 5, "float32")
        kernel(branched(n))(a, b)
        np.testing.assert_array_equal(b, np.concatenate([[0], 2 * a, [0]]))
    a2 = np.arange(84, dtype="float32").reshape(12, 7)
    b2 = np.zeros((12, 7), "float32")
    kernel(TILED)(a2, b2)
    np.testing.assert_array_equal(b2, a2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 15), st.integers(1, 6), st.integers(1, 3)), min_size=1, max_size=4))
def test_marks_exactly_the_elements_written(ranges):
    """Against a direct count: loops ``X[start + step * i] = ...`` over a buffer of 16 cover
    it exactly when the elements they write do."""
    stmts, written = [], set()
    for n, (start, count, step) in enumerate(ranges):
        stmts.append(f"    for i{n} in range({count}):\n        X[{start} + i{n} * {step}] = T.float32(1)\n")
        written |= {start + step * i for i in range(count) if start + step * i < 16}
    src = ('# from tvm.script import tir as T\n@T.prim_func\n'
           'def main(B: T.Buffer((16,), "float32")):\n    X = T.alloc_buffer((16,))\n'
           + "".join(stmts) + "    for j in range(16):\n        B[j] = X[j]\n")
    # Only analysed, never run: stores past the end count for nothing.
    assert allocations(src) == {"X": written == set(range(16))}


def test_a_partitioned_padding_is_not_filled_first():
    """The padded copy of a 3x3 convolution's input, after `loop_partition` split its parallel
    row loop into an ``if``: every element written before the convolution reads any, so no
    fill (an 861 KB memset per call of each of resnet18's 56x56 convolutions, single-threaded,
    before this was understood)."""
    from tvmscript.compiler import te
    from tvmscript.compiler.schedule_cpu.driver import default_schedule
    from tvmscript.compiler.topi.nn.conv import conv2d_nhwc

    x = te.placeholder((1, 56, 56, 64), "float32", name="x")
    w = te.placeholder((3, 3, 64, 64), "float32", name="w")
    func = default_schedule(te.create_prim_func([x, w, conv2d_nhwc(x, w, padding=(1, 1, 1, 1))]))
    found = {}

    class Walk(TIRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            found[node.buffer.name] = needs_zero_fill(node.body, node.buffer)
            self.visit(node.body)

    lowered = lower(func)
    Walk().visit(lowered.body)
    assert found.get("PaddedInput") is False, found
    assert "if " in dump(lowered)  # the branch of the partitioned parallel loop


@settings(max_examples=60, deadline=None)
@given(st.integers(-4, 4), st.integers(-4, 4), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
       st.sampled_from(["and", "or"]))
def test_conditions_evaluate_over_the_iteration_space(lo, hi, cmp, join):
    """`evaluate_on_arrays` gives an ``if``'s condition at every point at once, as Python
    evaluates it at each point (`written_before_read` marks a branch's stores by it)."""
    from tvmscript.ir import tir
    from tvmscript.ir.tir_numpy import evaluate_on_arrays

    i, j = tir.Var("i", "int64"), tir.Var("j", "int64")
    ops = {"<": tir.LT, "<=": tir.LE, ">": tir.GT, ">=": tir.GE, "==": tir.EQ, "!=": tir.NE}
    first = ops[cmp]("bool", tir.Add("int64", i, tir.IntImm("int64", lo)), j)
    second = tir.Not("bool", tir.LT("bool", j, tir.IntImm("int64", hi)))
    cond = (tir.And if join == "and" else tir.Or)("bool", first, second)
    env = {i: np.arange(-3, 4).reshape(7, 1), j: np.arange(-3, 4).reshape(1, 7)}
    got = evaluate_on_arrays(cond, env)
    pyop = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
            "==": lambda a, b: a == b, "!=": lambda a, b: a != b}[cmp]
    want = [[(pyop(a + lo, b) and not b < hi) if join == "and" else (pyop(a + lo, b) or not b < hi)
             for b in range(-3, 4)] for a in range(-3, 4)]
    np.testing.assert_array_equal(got, np.array(want))
