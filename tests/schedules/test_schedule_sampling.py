"""The sampling primitives and traces as data (compiler/schedule/sampling.py, trace.py): what a
tuner's search space is made of. A seeded schedule samples the same decisions every time, a
trace replays to the identical module (from JSON too), and a changed decision flows into every
instruction that used the sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tvmscript as tvms
from support.sampled_schedules import func, run, tiled
from tvmscript.compiler.schedule import ExprRV, Schedule, ScheduleError
from tvmscript.compiler.schedule.trace import Trace, TraceError
from tvmscript.ir.structural import structural_equal

PRODUCER_CONSUMER = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_a_seed_fixes_every_decision_and_the_trace_records_them():
    f = func()
    first, again = tiled(Schedule(f, seed=7)), tiled(Schedule(f, seed=7))
    assert structural_equal(first.mod, again.mod) and first.trace.decisions == again.trace.decisions
    others = {json.dumps(tiled(Schedule(f, seed=s)).trace.decisions) for s in range(8)}
    assert len(others) > 1, "eight seeds drew one schedule"
    text = first.trace.as_text()
    assert "sch.sample_perfect_tile(loop=l1, n=3, max_innermost_factor=16, decision=[" in text
    assert "sch.split(loop=l1, factors=[v" in text and "sch.sample_categorical(candidates=[0, 16, 64]" in text
    # the samples are plain numbers in the IR (the handles stay in the trace)
    assert "ExprRV" not in first.mod.script()
    run(first.mod)


def test_a_trace_replays_to_the_same_module_and_through_json():
    f = func()
    sch = tiled(Schedule(f, seed=1))
    replayed = Schedule(f)
    sch.trace.apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, sch.mod)
    data = json.loads(json.dumps(sch.trace.as_json()))
    from_json = Schedule(f)
    Trace.from_json(data).apply_to_schedule(from_json)
    assert structural_equal(from_json.mod, sch.mod)
    assert from_json.trace.as_json() == data


def test_a_changed_decision_flows_into_the_splits_that_used_it():
    f = func()
    sch = tiled(Schedule(f, seed=1))
    first_tile = min(sch.trace.decisions)
    mutated = Trace.from_json(sch.trace.as_json()).with_decision(first_tile, [1, 8, 16])
    out = Schedule(f)
    mutated.apply_to_schedule(out)
    loops = [lp for lp in out.get_loops(out.get_block("C"))]
    extents = [out.get(lp).extent.value for lp in loops]
    assert extents[0] == 1 and extents[2] == 8 and extents[5] == 16, extents
    assert out.trace.decisions[first_tile] == [1, 8, 16]
    run(out.mod)
    with pytest.raises(TraceError, match="makes no decision"):
        mutated.with_decision(0, 1)


@settings(max_examples=60, deadline=None)
@given(extent=st.integers(1, 720), n=st.integers(1, 4), max_inner=st.sampled_from([1, 4, 16, 64]),
       seed=st.integers(0, 10 ** 6))
def test_a_perfect_tile_multiplies_to_the_extent_with_a_bounded_innermost(extent, n, max_inner, seed):
    src = f'''
@T.prim_func
def main(A: T.Buffer(({extent},), "float32")):
    for i in range({extent}):
        with T.block("A"):
            vi = T.axis.spatial({extent}, i)
            A[vi] = T.float32(1)
'''
    sch = Schedule(func(src), seed=seed)
    (loop,) = sch.get_loops(sch.get_block("A"))
    factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=max_inner)
    assert len(factors) == n and all(isinstance(f, ExprRV) for f in factors)
    assert int(np.prod([int(f) for f in factors])) == extent
    assert factors[-1] <= max(1, max_inner) or n == 1


def test_a_decision_that_does_not_fit_is_an_error():
    sch = Schedule(func(), seed=0)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"decision \[3, 5\] is not 2 positive factors of the extent 128"):
        sch.sample_perfect_tile(i, n=2, decision=[3, 5])
    with pytest.raises(ScheduleError, match="not an index"):
        sch.sample_categorical([1, 2], [0.5, 0.5], decision=2)
    assert sch.sample_perfect_tile(i, n=2, decision=[4, 32]) == [4, 32]


def test_categorical_never_draws_what_has_no_probability():
    sch = Schedule(func(), seed=0)
    draws = [int(sch.sample_categorical([1, 2, 3], [0.5, 0.0, 0.5])) for _ in range(200)]
    assert set(draws) == {1, 3}


def test_a_compute_location_is_a_loop_of_the_consumer_or_the_root():
    f = func(PRODUCER_CONSUMER)
    seen = set()
    for seed in range(12):
        sch = Schedule(f, seed=seed)
        block = sch.get_block("B")
        loc = sch.sample_compute_location(block)
        sch.compute_at(block, loc, preserve_unit_loops=True)
        decision = sch.trace.decisions[1]
        seen.add(decision)
        if decision == -1:
            assert loc.is_root and structural_equal(sch.mod["main"], f)
        replayed = Schedule(f)
        sch.trace.apply_to_schedule(replayed)
        assert structural_equal(replayed.mod, sch.mod)
        rng = np.random.default_rng(0)
        a = rng.standard_normal((64, 64)).astype("float32")
        c = tvms.nd.array(np.zeros((64, 64), "float32"))
        tvms.compile(sch.mod)["main"](tvms.nd.array(a), c)
        np.testing.assert_allclose(c.numpy(), a * 2 + 1, rtol=1e-6)
    assert seen == {-1, 0, 1}, seen


def test_json_that_is_not_a_trace_is_refused():
    for bad in ({}, {"version": 99, "insts": []}, {"version": 1, "insts": [["split", [["loop", {"rv": "l9"}]], None]]},
                {"version": 1, "insts": [["not a name!", [], None]]}):
        with pytest.raises(TraceError):
            Trace.from_json(bad)


def test_an_index_map_written_as_a_lambda_is_not_json():
    sch = Schedule(func(), seed=0)
    sch.transform_layout(sch.get_block("C"), ("write", 0), lambda i, j: (j, i))
    with pytest.raises(TraceError, match="cannot be written as JSON"):
        sch.trace.as_json()


def test_a_design_space_resampled_draws_new_decisions_from_the_schedules_seed():
    f = func()
    space = tiled(Schedule(f, seed=0)).trace
    drawn = []
    for seed in range(6):
        sch = Schedule(f, seed=seed)
        space.apply_to_schedule(sch, resample=True)
        again = Schedule(f, seed=seed)
        space.apply_to_schedule(again, resample=True)
        assert again.trace.decisions == sch.trace.decisions
        drawn.append(json.dumps(sch.trace.decisions))
    assert len(set(drawn)) > 1


def test_enter_postproc_is_a_traced_no_op_that_replays_from_json():
    """A tuner's records hold the marker between the sampled steps and its postprocessors'
    (compiler/meta_schedule/postproc.py); any process that replays traces must know it."""
    f = func()
    sch = tiled(Schedule(f, seed=2))
    before = sch.mod
    sch.enter_postproc()
    assert structural_equal(sch.mod, before)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    data = json.loads(json.dumps(sch.trace.as_json()))
    assert [inst[0] for inst in data["insts"]].count("enter_postproc") == 1
    replayed = Schedule(f)
    Trace.from_json(data).apply_to_schedule(replayed)
    assert structural_equal(replayed.mod, sch.mod)
    assert "sch.enter_postproc()" in sch.trace.as_text()
