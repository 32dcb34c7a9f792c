"""Loop partitioning around padding guards (`compiler.loop_partition`): which loops are split
and where, that the middle piece has no guard left, and that every partitioned kernel computes
what the guarded one does (NumPy references, and a hypothesis property over random affine
guards)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import tvmscript as tvms
from tvmscript.compiler.build_cpu import build_cpu
from tvmscript.compiler.loop_partition import MAX_COPIES, partition_guarded_loops
from tvmscript.compiler.lower_tir import convert_blocks_to_loops, lower_init
from tvmscript.ir import tir
from tvmscript.ir.tir_visitor import contains


def partitioned(src: str) -> tir.PrimFunc:
    func = tvms.parse(src)
    return partition_guarded_loops(convert_blocks_to_loops(lower_init(func)))


def loops_named(node, name: str) -> list:
    found = []
    contains(node, lambda n: isinstance(n, tir.For) and n.loop_var.name == name and found.append(n) is None and False)
    return found


def guarded(node) -> bool:
    return contains(node, lambda n: isinstance(n, tir.Call) and n.op == "tir.if_then_else")


def run(src: str, *arrays):
    kernel = build_cpu({"k": tvms.parse(src)}, use_cache=False)["k"]
    arrays = [np.array(a) for a in arrays]
    kernel(*arrays)
    return arrays


# A 3-tap window over a row padded by one on each side (the form an inlined padding stage takes).
WINDOW = '''
@T.prim_func
def window(A: T.Buffer((6, 20), "float32"), B: T.Buffer((6, 20), "float32")):
    for y in T.{kind}(6):
        for x in range(20):
            for r in range(3):
                with T.block("B"):
                    vy, vx, vr = T.axis.remap("SSR", [y, x, r])
                    with T.init():
                        B[vy, vx] = T.float32(0)
                    B[vy, vx] = B[vy, vx] + T.if_then_else(1 <= vx + vr and vx + vr < 21, A[vy, vx + vr - 1],
                                                           T.float32(0)) * T.float32(vr + 1)
'''


def window_reference(a):
    p = np.pad(a, ((0, 0), (1, 1)))
    return p[:, :-2] * 1 + p[:, 1:-1] * 2 + p[:, 2:] * 3


def test_a_serial_loop_runs_its_interior_without_the_guard():
    """The row loop splits into [0, 1), [1, 19) and [19, 20): the edges keep the guard (each
    runs at a constant, which LLVM folds), the middle has none; results match NumPy."""
    func = partitioned(WINDOW.format(kind="serial"))
    xs = loops_named(func.body, "x")
    assert [(x.min.value, x.extent.value) for x in xs] == [(0, 1), (1, 18), (19, 1)]
    assert [guarded(x) for x in xs] == [True, False, True]
    assert len({id(x.loop_var) for x in xs}) == 3  # each piece defines its own variable
    a = np.random.default_rng(0).standard_normal((6, 20)).astype("float32")
    _, b = run(WINDOW.format(kind="serial"), a, np.zeros((6, 20), "float32"))
    np.testing.assert_allclose(b, window_reference(a), rtol=1e-5, atol=1e-6)


# The guard on the rows of a parallel loop: a 3-row window down the columns.
COLUMNS = '''
@T.prim_func
def columns(A: T.Buffer((12, 16), "float32"), B: T.Buffer((12, 16), "float32")):
    for y in T.parallel(12):
        for x in range(16):
            for r in range(3):
                with T.block("B"):
                    vy, vx, vr = T.axis.remap("SSR", [y, x, r])
                    with T.init():
                        B[vy, vx] = T.float32(0)
                    B[vy, vx] = B[vy, vx] + T.if_then_else(1 <= vy + vr and vy + vr < 13, A[vy + vr - 1, vx],
                                                           T.float32(0))
'''


def test_a_parallel_loop_keeps_its_iterations_and_branches_inside():
    """A parallel loop is not split (the threads share it as before): its body branches on
    the proven range, ``1 <= y < 11``, the guard gone from that branch."""
    func = partitioned(COLUMNS)
    (y,) = loops_named(func.body, "y")
    assert y.kind == "parallel" and y.extent.value == 12
    branch = y.body
    assert isinstance(branch, tir.IfThenElse)
    assert not guarded(branch.then_case) and guarded(branch.else_case)
    a = np.random.default_rng(1).standard_normal((12, 16)).astype("float32")
    _, b = run(COLUMNS, a, np.zeros((12, 16), "float32"))
    p = np.pad(a, ((1, 1), (0, 0)))
    np.testing.assert_allclose(b, p[:-2] + p[1:-1] + p[2:], rtol=1e-6)


# The guard reads the outer loop too (``y + x``): the inner loop cannot decide it alone, and the
# outer one partitions only on the conjuncts of its own and the loops inside it.
DIAGONAL = '''
@T.prim_func
def diagonal(A: T.Buffer((40,), "float32"), B: T.Buffer((8, 8), "float32")):
    for y in range(8):
        for x in range(8):
            for r in range(2):
                with T.block("B"):
                    vy, vx, vr = T.axis.remap("SSR", [y, x, r])
                    with T.init():
                        B[vy, vx] = T.float32(0)
                    B[vy, vx] = B[vy, vx] + T.if_then_else(vy + vx + vr < 9, A[vy + vx + vr], T.float32(-1))
'''


def test_guards_of_outer_loops_are_left_to_them():
    """``y + x + r < 9`` holds for every ``x`` and ``r`` only when ``y < 1``: the loop over ``y``
    splits at 1, the loop over ``x`` (which cannot bound ``y``) is not split on its own."""
    func = partitioned(DIAGONAL)
    ys = loops_named(func.body, "y")
    assert [(y.min.value, y.extent.value) for y in ys] == [(0, 1), (1, 7)]
    assert [guarded(y) for y in ys] == [False, True]
    assert all(x.min.value == 0 and x.extent.value == 8 for x in loops_named(ys[1], "x"))
    a = np.arange(40, dtype="float32")
    _, b = run(DIAGONAL, a, np.zeros((8, 8), "float32"))
    e = np.add.outer(np.arange(8), np.arange(8))
    expected = np.where(e < 9, a[np.minimum(e, 39)], -1) + np.where(e + 1 < 9, a[np.minimum(e + 1, 39)], -1)
    np.testing.assert_allclose(b, expected)


def test_copies_are_bounded():
    """Guards on four nested loops: partitions stop before one statement has more than
    `MAX_COPIES` copies."""
    src = '''
@T.prim_func
def nest(A: T.Buffer((8, 8, 8, 8), "float32"), B: T.Buffer((8, 8, 8, 8), "float32")):
    for i, j, k, l in T.grid(8, 8, 8, 8):
        for r in range(2):
            with T.block("B"):
                vi, vj, vk, vl, vr = T.axis.remap("SSSSR", [i, j, k, l, r])
                with T.init():
                    B[vi, vj, vk, vl] = T.float32(0)
                B[vi, vj, vk, vl] = B[vi, vj, vk, vl] + T.if_then_else(
                    1 <= vi + vr and 1 <= vj + vr and 1 <= vk + vr and 1 <= vl + vr,
                    A[vi + vr - 1, vj + vr - 1, vk + vr - 1, vl + vr - 1], T.float32(0))
'''
    func = partitioned(src)
    stores = []
    contains(func.body, lambda n: isinstance(n, tir.BufferStore) and n.buffer.name == "B"
             and guarded(n) is not None and stores.append(n) is None and False)
    assert len(stores) // 2 <= MAX_COPIES  # (each copy has its init store and its update)
    a = np.random.default_rng(2).standard_normal((8, 8, 8, 8)).astype("float32")
    _, b = run(src, a, np.zeros_like(a))
    p = np.pad(a, 1)[:9, :9, :9, :9]
    np.testing.assert_allclose(b, p[:-1, :-1, :-1, :-1] + p[1:, 1:, 1:, 1:], rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(-6, 6), st.integers(0, 12), st.integers(1, 14),
       st.sampled_from(["serial", "parallel"]))
def test_any_affine_guard_computes_what_the_guarded_loop_does(scale, offset, lo, width, kind):
    """``lo <= scale * i + j + r + offset < lo + width`` over loops of 7, 5 and 3: wherever the
    partition puts its cuts (or none), each output is the NumPy sum of the taps that pass."""
    hi = lo + width
    src = f'''
@T.prim_func
def guard(A: T.Buffer(({width},), "float32"), B: T.Buffer((7, 5), "float32")):
    for i in T.{kind}(7):
        for j in range(5):
            for r in range(3):
                with T.block("B"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        B[vi, vj] = T.float32(0)
                    B[vi, vj] = B[vi, vj] + T.if_then_else(
                        {lo} <= vi * {scale} + vj + vr + {offset} and vi * {scale} + vj + vr + {offset} < {hi},
                        A[vi * {scale} + vj + vr + {offset} - {lo}], T.float32(100))
'''
    a = np.random.default_rng(scale * 100 + lo).standard_normal(width).astype("float32")
    _, b = run(src, a, np.zeros((7, 5), "float32"))
    i, j, r = np.meshgrid(np.arange(7), np.arange(5), np.arange(3), indexing="ij")
    e = i * scale + j + r + offset
    inside = (lo <= e) & (e < hi)
    taps = np.where(inside, a[np.clip(e - lo, 0, width - 1)], np.float32(100))
    expected = np.zeros((7, 5), "float32")
    for t in range(3):
        expected += taps[:, :, t]
    np.testing.assert_array_equal(b, expected)
