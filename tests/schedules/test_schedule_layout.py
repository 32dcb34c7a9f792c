"""storage_align and transform_layout (compiler/schedule/layout.py).

* every golden case of these primitives (tests/golden/schedule/ and, for the schedules that
  change a function's signature, tests/golden/schedule_params/; made from TVM 0.27 by
  tools/tvm_schedule_reference.py and tools/tvm_cache_layout_reference.py) prints as TVM's
  result and traces as TVM's trace; it computes what the input computes on the CPU (a
  parameter whose layout changed gets its input re-laid out by NumPy here);
* the calls TVM rejects are rejected with a ScheduleError that leaves the schedule unchanged;
* what differs from TVM is pinned down: a map that is not injective on the buffer (TVM accepts
  ``lambda i, j: (i // 2, j)``) is refused, a ``pad_value`` for a map that pads is not
  supported, and bijective maps TVM's affine analysis cannot read (``(i + j) % n``) are
  accepted.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript.compiler.schedule import Schedule

from support.schedule_cases import SCHEDULE_PARAMS_DIR, cases_named
from support.schedule_check import (assert_same_result, check_golden_case, check_golden_rejected, failing, first_func_name,
                                    module, producer_consumer, random_args, run)

_PREFIXES = ("storage_align", "transform_layout", "mlc_mm_relu_transform", "cl_storage_align", "cl_transform_layout",
             "err_storage_align", "err_transform_layout", "cl_err_storage_align", "cl_err_transform_layout",
             "cl_gpu_matmul_shared_storage_align")
# Cases whose schedule re-lays a parameter out: NumPy functions giving the new layout of an
# input (by parameter position) and the old layout of an output back from the new one.
_RELAYOUT = {
    "transform_layout_read_param": {0: (lambda a: a.reshape(8, 16, 8, 16).transpose(0, 2, 1, 3), None)},
    "cl_transform_layout_int64_param": {0: (lambda a: a.reshape(32, 4, 64).transpose(0, 2, 1), None)},
    "cl_transform_layout_write_param": {1: (lambda b: b.T.copy(), lambda b: b.T)},
}
CASES = cases_named(_PREFIXES) + cases_named(_PREFIXES, SCHEDULE_PARAMS_DIR)
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error]


def _same_with_relayout(before, after, relayout: dict, name: str = "main") -> None:
    """Run ``before`` on random inputs and ``after`` on the same inputs laid out anew; compare
    every buffer (outputs laid back out)."""
    f0, f1 = before[name], after[name]
    args = random_args(f0)
    out0 = run(f0, args)
    new_args = [relayout[n][0](a) if n in relayout else a for n, a in enumerate(args)]
    out1 = run(f1, [np.ascontiguousarray(a) for a in new_args])
    for n, (a, b) in enumerate(zip(out0, out1)):
        if n in relayout:
            back = relayout[n][1]
            if back is None:  # a re-laid-out input: nothing to compare
                continue
            b = back(b)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5, err_msg=f"buffer argument {n} differs")


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_matches_tvm(case):
    before, sch = check_golden_case(case, numeric=case.name not in _RELAYOUT)
    if case.name in _RELAYOUT:
        _same_with_relayout(before, sch.mod, _RELAYOUT[case.name], first_func_name(before))


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_rejected_like_tvm(case):
    """TVM raises a ScheduleError, or (for maps its analysis cannot invert) an InternalError:
    here both are ScheduleErrors, and the schedule is left as it was."""
    check_golden_rejected(case)


# ----------------------------------------------------------------------------- inputs

PRODUCER_CONSUMER = producer_consumer(128)

SYMBOLIC = '''
@T.prim_func
def main(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 128))
    C = T.match_buffer(c, (n, 128))
    B = T.alloc_buffer((n, 128))
    for i, j in T.grid(n, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(n, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


# ----------------------------------------------------------------------------- storage_align


def test_storage_align_annotates_and_cpu_still_runs():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    sch.storage_align(b, 0, axis=0, factor=32, offset=1)
    sch.storage_align(b, 0, axis=-1, factor=16, offset=4)
    assert sch.get(b).annotations["buffer_dim_align"] == [[0, 0, 32, 1], [0, 1, 16, 4]]
    assert 'T.block_attr({"buffer_dim_align": [[0, 0, 32, 1], [0, 1, 16, 4]]})' in sch.mod.script()
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)
    assert sch.trace.as_python()[-1] == "sch.storage_align(block=b0, buffer_index=0, axis=-1, factor=16, offset=4)"


def test_storage_align_failures_leave_the_schedule_unchanged():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b, c = sch.get_block("B"), sch.get_block("C")
    assert "positive" in failing(sch, lambda: sch.storage_align(b, 0, axis=0, factor=-2, offset=0))
    assert "[-2, 2)" in failing(sch, lambda: sch.storage_align(b, 0, axis=2, factor=8, offset=0))
    assert "[0, 1)" in failing(sch, lambda: sch.storage_align(b, 1, axis=0, factor=8, offset=0))
    assert "not allocated by a block" in failing(sch, lambda: sch.storage_align(c, 0, axis=0, factor=8, offset=0))


# ----------------------------------------------------------------------------- transform_layout


def test_transform_layout_rewrites_every_access():
    sch = Schedule(module(PRODUCER_CONSUMER))
    sch.transform_layout(sch.get_block("C"), ("read", 0), lambda i, j: (i // 4, j, i % 4))
    text = sch.mod.script()
    assert "B = T.alloc_buffer((32, 128, 4))" in text
    assert "T.writes(B[vi // 4, vj, vi % 4])" in text and "T.reads(B[vi // 4, vj, vi % 4])" in text
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)
    assert sch.trace.as_python()[-1] == (
        'sch.transform_layout(block=b0, buffer=("read", 0), index_map=lambda i, j: (i // 4, j, i % 4,), '
        'pad_value=None, assume_injective_transform=False)')


def test_transform_layout_accepts_varargs_ints_and_index_map_objects():
    sch = Schedule(module(PRODUCER_CONSUMER))
    sch.transform_layout("B", "B", lambda *idx: (idx[1], idx[0], 0))
    assert "B = T.alloc_buffer((128, 128, 1))" in sch.mod.script()
    assert "B[vj, vi, 0] = A[vi, vj] * T.float32(2.0)" in sch.mod.script()
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)
    assert "index_map=lambda idx_0, idx_1: (idx_1, idx_0, 0,)" in sch.trace.as_python()[-1]

    class Map:  # anything with TVM IndexMap's two fields
        def __init__(self):
            i, j = tvms.tir.Var("int32", "i"), tvms.tir.Var("int32", "j")
            self.initial_indices, self.final_indices = [i, j], [j, i]

    sch2 = Schedule(module(PRODUCER_CONSUMER))
    sch2.transform_layout(sch2.get_block("B"), ("write", 0), Map())
    assert "B[vj, vi] = A[vi, vj]" in sch2.mod.script()


def test_transform_layout_bijection_tvm_cannot_analyse_is_accepted():
    """TVM 0.27 fails on ``(i + j) % 128`` (its affine analysis cannot invert it); it is a
    bijection of the 128x128 square, so it is accepted here."""
    sch = Schedule(module(PRODUCER_CONSUMER))
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: ((i + j) % 128, j))
    assert "B = T.alloc_buffer((128, 128))" in sch.mod.script()
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)


def test_transform_layout_not_injective_is_refused():
    """TVM 0.27 accepts ``(i // 2, j)`` and then two rows share one: a schedule that changes
    what the function computes. Refused here, unless the caller vouches for it."""
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    assert "not injective" in failing(sch, lambda: sch.transform_layout(b, ("write", 0), lambda i, j: (i // 2, j)))
    assert "not injective" in failing(sch, lambda: sch.transform_layout(b, ("write", 0), lambda i, j: (j,)))
    sch.transform_layout(b, ("write", 0), lambda i, j: (i // 2, j), assume_injective_transform=True)
    assert "B = T.alloc_buffer((64, 128))" in sch.mod.script()


def test_transform_layout_padding_is_refused():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    msg = failing(sch, lambda: sch.transform_layout(b, ("write", 0), lambda i, j: (i // 3, j, i % 3)))
    assert "(43, 128, 3)" in msg and "padding" in msg
    msg = failing(sch, lambda: sch.transform_layout(b, ("write", 0), lambda i, j: (i // 3, j, i % 3),
                                                     pad_value=0.0))
    assert "pad_value is not supported" in msg
    # A pad_value with a map that does not pad is fine (nothing to fill).
    sch.transform_layout(b, ("write", 0), lambda i, j: (i // 4, j, i % 4), pad_value=0.0)
    assert_same_result(module(PRODUCER_CONSUMER), sch.mod)


def test_transform_layout_failures_leave_the_schedule_unchanged():
    sch = Schedule(module(PRODUCER_CONSUMER))
    b = sch.get_block("B")
    assert "takes 1 indices" in failing(sch, lambda: sch.transform_layout(b, ("write", 0), lambda i: (i,)))
    assert "does not start at 0" in failing(sch, lambda: sch.transform_layout(b, ("write", 0),
                                                                               lambda i, j: (i + 1, j)))
    assert "[0, 1)" in failing(sch, lambda: sch.transform_layout(b, ("read", 1), lambda i, j: (j, i)))
    failing(sch, lambda: sch.transform_layout(b, "C", lambda i, j: (j, i)))  # B does not access C
    with pytest.raises(TypeError):
        sch.transform_layout(b, 0, lambda i, j: (j, i))
    with pytest.raises(ValueError):
        sch.transform_layout(b, ("both", 0), lambda i, j: (j, i))


def test_transform_layout_symbolic_shape():
    sch = Schedule(module(SYMBOLIC))
    b = sch.get_block("B")
    sch.transform_layout(b, ("write", 0), lambda i, j: (i, j // 4, j % 4))
    assert "B = T.alloc_buffer((n, 32, 4))" in sch.mod.script()
    # n rows need not split by 4: padding, as TVM says.
    assert "padding" in failing(sch, lambda: sch.transform_layout(b, ("write", 0),
                                                                   lambda i, j, k: (i // 4, j, k, i % 4)))


def test_transform_layout_after_tiling_keeps_indices_simple():
    """Indices are simplified with the block iterators' ranges: ``(vi * 4 + vj) // 4`` with
    ``vj < 4`` becomes ``vi``."""
    src = '''
@T.prim_func
def main(A: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    B = T.alloc_buffer((128,))
    for i, j in T.grid(32, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi * 4 + vj] = A[vi * 4 + vj] * T.float32(2)
    for i in range(128):
        with T.block("C"):
            vi = T.axis.spatial(128, i)
            C[vi] = B[vi] + T.float32(1)
'''
    sch = Schedule(module(src))
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (i // 4, i % 4))
    text = sch.mod.script()
    assert "B[vi, vj] = A[vi * 4 + vj] * T.float32(2.0)" in text
    assert "C[vi] = B[vi // 4, vi % 4] + T.float32(1.0)" in text
    assert_same_result(module(src), sch.mod)


def test_eval_range_of_expressions_kept_whole():
    """tvmscript/ir/arith: a modulo of a sum or a min/max stays an atom of the normal form;
    eval_range bounds its operands (it recursed forever before)."""
    from tvmscript.ir.arith import eval_range
    from tvmscript.printer.tir_printer import TIRPrinter

    i, j = tvms.tir.Var("int32", "i"), tvms.tir.Var("int32", "j")
    zero = tvms.tir.IntImm("int32", 0)
    dom = {i: tvms.tir.Range(zero, tvms.tir.IntImm("int32", 128)), j: tvms.tir.Range(zero, tvms.tir.IntImm("int32", 8))}
    show = lambda r: tuple(TIRPrinter().expr(x) for x in r)  # noqa: E731
    assert show(eval_range((i + j) % 128, dom)) == ("0", "128")
    assert show(eval_range((i + j) % 256, dom)) == ("0", "135")
    assert show(eval_range((i + j) // 4, dom)) == ("0", "34")
    assert show(eval_range(tvms.tir.Min("int32", i, j + 4), dom)) == ("0", "12")
