"""The Schedule itself: handles, the trace, errors, snapshots, and the MLC course's matmul
scheduled step by step (each step checked against the unscheduled result on the CPU)."""

from __future__ import annotations

import os

import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.ir import structural_equal

from support.schedule_check import assert_same_result

MM_RELU = '''
@T.prim_func
def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128), dtype="float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j)
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''


@pytest.fixture
def mm_relu():
    return tvms.parse(MM_RELU)


def test_names_tvm_users_reach_for(mm_relu):
    assert tvms.tir.Schedule is tvms.s_tir.Schedule
    assert tvms.tir.ScheduleError is tvms.s_tir.ScheduleError
    sch = tvms.tir.Schedule(mm_relu)
    assert sch.get_sblock("Y").name == sch.get_block("Y", func_name="main").name


def test_queries(mm_relu):
    sch = tvms.tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(y)] == ["i", "j", "k"]
    root = sch.get_block("root")
    assert [b.name for b in sch.get_child_blocks(root)] == ["Y", "C"]
    assert [b.name for b in sch.get_consumers(y)] == ["C"]
    assert [b.name for b in sch.get_producers(sch.get_block("C"))] == ["Y"]
    assert sch.get_producers(y) == [] and sch.get_consumers(sch.get_block("C")) == []
    assert isinstance(sch.get(y), tir.Block)


def test_input_and_earlier_snapshots_are_never_changed(mm_relu):
    text = tvms.parse(MM_RELU).script()
    sch = tvms.tir.Schedule(mm_relu)
    first = sch.mod
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, 4])
    assert mm_relu.script() == text
    assert structural_equal(first["main"], mm_relu) and not structural_equal(sch.mod["main"], mm_relu)


def test_handles_follow_their_loops_and_go_stale(mm_relu):
    sch = tvms.tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    assert sch.get(k).loop_var.name == "k"  # moved, still valid
    with pytest.raises(tvms.tir.ScheduleError, match="no longer exists"):
        sch.split(j, factors=[2, None])


def test_failed_primitive_leaves_the_schedule_unchanged(mm_relu):
    sch = tvms.tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    before, n_trace = sch.mod, len(sch.trace)
    for bad in (lambda: sch.split(j, factors=[None, None]), lambda: sch.split(j, factors=[3, 5]),
                lambda: sch.parallel(k), lambda: sch.vectorize(k), lambda: sch.bind(k, "blockIdx.x"),
                lambda: sch.reorder(i, i), lambda: sch.fuse(i, k), lambda: sch.bind(i, "threadIdx.w")):
        with pytest.raises(tvms.tir.ScheduleError):
            bad()
        assert sch.mod.script() == before.script()
    assert len(sch.trace) == n_trace


def test_error_names_the_primitive_loop_and_reason(mm_relu):
    sch = tvms.tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    with pytest.raises(tvms.tir.ScheduleError) as info:
        sch.parallel(k)
    err = info.value
    assert err.primitive == "parallel" and "'k'" in err.subject
    assert "reduction iterator of block 'Y'" in err.reason


def test_error_points_at_the_block_in_its_file(tmp_path):
    path = tmp_path / "mm.tvms"
    path.write_text(MM_RELU)
    sch = tvms.tir.Schedule(tvms.load(str(path)))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    with pytest.raises(tvms.tir.ScheduleError) as info:
        sch.vectorize(k)
    text = info.value.render()
    assert f"{path}:7:" in text and 'with T.block("Y"):' in text and "^" in text


def test_trace_replays(mm_relu):
    sch = tvms.tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.parallel(i)
    sch.annotate(j1, "pragma_unroll", 4)
    text = sch.trace.as_text()
    assert text.splitlines()[:3] == [
        "# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:",
        '  b0 = sch.get_sblock(name="Y", func_name="main")']
    assert "  sch.reorder(l4, l3, l5)" in text
    env = {"s_tir": tvms.s_tir}
    exec(text, env)
    replay = tvms.tir.Schedule(mm_relu)
    env["apply_trace"](replay)
    assert replay.mod.script() == sch.mod.script()


def test_docs_schedule_step_by_step():
    """docs/schedules.md's walk-through on samples/mm_relu.tvms, each step run on the CPU
    against the unscheduled function, and the result compiled with tvms.compile."""
    import numpy as np

    mod = tvms.load(os.path.join(os.path.dirname(__file__), "..", "..", "samples", "mm_relu.tvms"))
    sch = tvms.tir.Schedule(mod)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    steps = [
        lambda: sch.split(j, factors=[None, 4]),
        lambda: sch.reorder(sch.get_loops(block_Y)[1], k, sch.get_loops(block_Y)[2]),
        lambda: sch.reverse_compute_at(sch.get_block("C", "mm_relu"), sch.get_loops(block_Y)[1]),
        lambda: sch.decompose_reduction(block_Y, k),
        lambda: sch.parallel(i),
        lambda: sch.vectorize(sch.get_loops(sch.get_block("C", "mm_relu"))[-1]),
    ]
    for step in steps:
        step()
        assert_same_result(mod, sch.mod, name="mm_relu")
    text = sch.mod.script()
    assert "for i in T.parallel(128):" in text and "for ax0 in T.vectorized(4):" in text
    assert 'T.block("Y_init")' in text and "vj = T.axis.spatial(128, j_0 * 4 + j_1_init)" in text
    ex = tvms.compile(sch.mod)
    a, b = (np.random.default_rng(n).standard_normal((128, 128)).astype("float32") for n in (1, 2))
    c = np.empty((128, 128), "float32")
    ex["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_split_guards_what_does_not_divide():
    func = tvms.parse('''
@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = A[vi] + T.float32(1)
''')
    sch = tvms.tir.Schedule(func)
    i, = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, factors=[None, 4])
    assert "T.where(i_0 * 4 + i_1 < 10)" in sch.mod.script()
    assert_same_result(func, sch.mod)
    f = sch.fuse(i0, i1)
    sch.split(f, factors=[3, None])
    assert_same_result(func, sch.mod)
