"""``compute_inline`` / ``reverse_compute_inline`` against TVM 0.27.

Expected results are TVM's prints (tests/golden/compute_location/, made by
tools/tvm_compute_location_reference.py, and the cases of tests/golden/schedule/ that inline):
each successful case prints exactly as TVM's result and computes the same as its input on the
CPU; each case TVM rejects raises a ScheduleError and changes nothing.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.ir import structural_equal

from support.schedule_cases import COMPUTE_LOCATION_DIR, SCHEDULE_DIR, location_cases, schedule_case
from support.schedule_check import (apply_golden, assert_same_result, assert_traces_as_golden, check_golden_rejected,
                                    check_location_case, module)

PRIMITIVES = ("sch.compute_inline(", "sch.reverse_compute_inline(")
ALL = location_cases(PRIMITIVES, ("compute_inline", "reverse_compute_inline", "err_compute_inline",
                                  "err_reverse_compute_inline"))
OK = [c for c in ALL if not c.is_error]
ERR = [c for c in ALL if c.is_error and any(p in c.steps.rstrip().splitlines()[-1] for p in PRIMITIVES)]


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_matches_tvm_and_computes_the_same(case):
    check_location_case(case)


TRACED = [c for c in OK if c.trace and c.files["input"].parent == COMPUTE_LOCATION_DIR]


@pytest.mark.parametrize("case", TRACED, ids=[c.name for c in TRACED])
def test_trace_matches_tvm(case):
    _, sch = apply_golden(case)
    assert_traces_as_golden(case, sch)


@pytest.mark.parametrize("case", ERR, ids=[c.name for c in ERR])
def test_rejected_like_tvm_and_unchanged(case):
    check_golden_rejected(case, ("compute_inline", "reverse_compute_inline"))


def test_the_cases_are_there():
    names = {c.name for c in ALL}
    for expected in ("compute_inline", "reverse_compute_inline", "compute_inline_transposed_store",
                     "reverse_compute_inline_producer_larger", "err_compute_inline_only_leaf",
                     "err_reverse_compute_inline_into_reduction"):
        assert expected in names


def _case(name):
    return schedule_case(name, COMPUTE_LOCATION_DIR, SCHEDULE_DIR)


# ----------------------------------------------------------------------------- by hand


def test_compute_inline_removes_block_loops_and_buffer():
    case = _case("compute_inline")
    before = module(case.input_text)
    sch = Schedule(before)
    sch.compute_inline(sch.get_block("B"))
    assert sch.trace.as_text().strip() == case.trace.strip()
    func = sch.mod["main"]
    root = func.body.block
    assert root.alloc_buffers == []
    assert [sch.get(b).name for b in sch.get_child_blocks(sch.get_block("root"))] == ["C"]
    c = sch.get(sch.get_block("C"))
    assert [r.buffer.name for r in c.reads] == ["A"]
    assert_same_result(before, sch.mod)


def test_reverse_compute_inline_into_producer_with_predicate():
    """B covers 16 rows, C only 8: B now stores C's value and runs only where C did."""
    case = _case("reverse_compute_inline_producer_larger")
    before = module(case.input_text)
    sch = Schedule(before)
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = sch.index("main").blocks["B"]
    assert tvms.printer.to_script(realize.predicate) == "i < 8"
    assert sch.mod.script() == module(case.expected).script()
    assert_same_result(before, sch.mod)


def test_reverse_compute_inline_with_a_second_reader_is_rejected():
    """TVM 0.27 inlines C into B here and leaves D reading a buffer that no block writes any
    more (its own message says the producer must have a single consumer); tvms refuses."""
    case = _case("err_compute_at_not_all_consumers")  # B feeds C and D
    sch = Schedule(module(case.input_text))
    before = sch.mod
    with pytest.raises(ScheduleError) as info:
        sch.reverse_compute_inline(sch.get_block("C"))
    assert "single consumer" in str(info.value)
    assert structural_equal(sch.mod, before)


def test_inline_everything_but_the_last_block_in_child_order():
    case = _case("get_child_blocks_inline_all_but_last")
    before = module(case.input_text)
    sch = Schedule(before)
    blocks = sch.get_child_blocks(sch.get_block("root"))
    for b in blocks[:-1]:
        sch.compute_inline(b)
    assert sch.mod.script() == module(case.expected).script()
    assert_same_result(before, sch.mod)


def test_inlined_block_handle_goes_stale():
    case = _case("compute_inline")
    sch = Schedule(module(case.input_text))
    b = sch.get_block("B")
    sch.compute_inline(b)
    with pytest.raises(ScheduleError):
        sch.compute_inline(b)


def test_reverse_inline_keeps_an_existing_producer_predicate():
    """A producer that already has a predicate (a split that does not divide) keeps it when a
    smaller consumer adds its own bound (TVM would replace it; conjoining is what keeps the
    computation the same)."""
    text = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((10,), "float32"), C: T.Buffer((6,), "float32")):
    B = T.sblock_alloc_buffer((10,), "float32")
    for i_0, i_1 in T.grid(3, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            T.where(i_0 * 4 + i_1 < 10)
            B[vi] = A[vi] * T.float32(2)
    for i in range(6):
        with T.sblock("C"):
            vi = T.axis.spatial(6, i)
            C[vi] = B[vi] + T.float32(1)
'''
    before = module(text)
    sch = Schedule(before)
    sch.reverse_compute_inline(sch.get_block("C"))
    pred = tvms.printer.to_script(sch.index("main").blocks["B"].predicate)
    assert "< 10" in pred and "< 6" in pred
    assert_same_result(before, sch.mod)


FUSED_PRODUCER = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((3, 5, 4), "float32"), C: T.Buffer((15, 4), "float32")):
    B = T.sblock_alloc_buffer((15, 4), "float32")
    for b, i, k in T.grid(3, 5, 4):
        with T.sblock("B"):
            vb, vi, vk = T.axis.remap("SSS", [b, i, k])
            B[vb * 5 + vi, vk] = A[vb, vi, vk] * T.float32(2)
    for r, k in T.grid(15, 4):
        with T.sblock("C"):
            vr, vk = T.axis.remap("SS", [r, k])
            C[vr, vk] = B[vr, vk] + T.float32(1)
'''


def test_compute_inline_a_producer_storing_at_fused_indices():
    """A store at ``b * 5 + i`` is a bijective affine map of the iterators (TVM inverts such
    maps): the consumer reads ``A[r // 5, r % 5, k]``. How DLight's reindexed operands with a
    batch fused into the rows (or a 1-D convolution's ``c * 3 + k``) reach their loads."""
    before = module(FUSED_PRODUCER)
    sch = Schedule(before)
    sch.compute_inline(sch.get_block("B"))
    c = sch.get(sch.get_block("C"))
    assert [r.buffer.name for r in c.reads] == ["A"]
    assert "A[vr // 5, vr % 5, vk]" in sch.mod.script()
    assert_same_result(before, sch.mod)


FUSED_CONSUMER = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 4), "float32"), C: T.Buffer((3, 5, 4), "float32")):
    B = T.sblock_alloc_buffer((16, 4), "float32")
    for r, k in T.grid(16, 4):
        with T.sblock("B"):
            vr, vk = T.axis.remap("SS", [r, k])
            B[vr, vk] = A[vr, vk] * T.float32(2)
    for b, i, k in T.grid(3, 5, 4):
        with T.sblock("C"):
            vb, vi, vk = T.axis.remap("SSS", [b, i, k])
            C[vb, vi, vk] = B[vb * 5 + vi, vk] + T.float32(1)
'''


def test_reverse_compute_inline_a_consumer_loading_at_fused_indices():
    """The consumer loads ``B[b * 5 + i, k]``: inlined into B's producer it stores
    ``C[r // 5, r % 5, k]``, and B's 16th row (past 3 x 5) gets a predicate."""
    before = module(FUSED_CONSUMER)
    sch = Schedule(before)
    sch.reverse_compute_inline(sch.get_block("C"))
    text = sch.mod.script()
    assert "C[vr // 5, vr % 5, vk] = A[vr, vk] * T.float32(2.0) + T.float32(1.0)" in text, text
    assert tvms.printer.to_script(sch.index("main").blocks["B"].predicate) == "r // 5 < 3"
    assert_same_result(before, sch.mod)


@pytest.mark.parametrize("index", ["vb * 4 + vi", "vb * 5 + vi * 2", "vb * 5 + vb"])
def test_indices_that_are_not_a_fusion_are_still_refused(index):
    """``b * 4 + i`` with i in [0, 5) sends two (b, i) to one row; ``i * 2`` leaves holes; a
    repeated iterator is no fusion: neither primitive inverts those."""
    for text, inline, block in (
            (FUSED_PRODUCER.replace("B[vb * 5 + vi, vk] =", f"B[{index}, vk] ="), Schedule.compute_inline, "B"),
            (FUSED_CONSUMER.replace("B[vb * 5 + vi, vk] +", f"B[{index}, vk] +"), Schedule.reverse_compute_inline, "C")):
        sch = Schedule(module(text))
        before = sch.mod
        with pytest.raises(ScheduleError):
            inline(sch, sch.get_block(block))
        assert structural_equal(sch.mod, before)
