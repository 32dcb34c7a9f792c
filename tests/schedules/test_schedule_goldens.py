"""Every schedule case TVM 0.27 ran (tests/golden/schedule/, made by
tools/tvm_schedule_reference.py, read by tests/support/schedule_cases.py) replayed with tvms:

* the result prints exactly as TVM's result does once both are read by tvms (same loops,
  blocks, names, bindings, predicates, regions), and computes the same as the input on the CPU;
* the trace prints as TVM's trace does;
* where TVM raised a ScheduleError, tvms raises one too and the schedule is left unchanged.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.printer.tir_printer import TIRPrinter

from support.schedule_cases import schedule_cases
from support.schedule_check import (apply_golden, assert_prints_as_golden, assert_same_result, assert_traces_as_golden,
                                    check_golden_rejected)

CASES = schedule_cases()
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error and c.error.type_name == "ScheduleError"]


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_schedule_matches_tvm(case):
    before, sch = apply_golden(case)
    assert_prints_as_golden(case, sch, before)
    for gv, func in before.functions.items():
        if isinstance(func, tvms.tir.PrimFunc) and _same_signature(func, sch.mod[gv.name_hint]):
            assert_same_result(before, sch.mod, name=gv.name_hint)


def _same_signature(a, b) -> bool:
    """Whether two PrimFuncs take buffers of the same shapes (a transform_layout of a parameter
    changes them; tests/schedules/test_schedule_layout.py checks those results on re-laid-out inputs)."""
    def shapes(f):
        return [[TIRPrinter().expr(d) for d in f.buffer_map[p].shape] if p in f.buffer_map else p.dtype
                for p in f.params]
    return shapes(a) == shapes(b)


@pytest.mark.parametrize("case", [c for c in OK if c.trace], ids=[c.name for c in OK if c.trace])
def test_trace_matches_tvm(case):
    _, sch = apply_golden(case)
    assert_traces_as_golden(case, sch)


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_schedule_error_like_tvm(case):
    check_golden_rejected(case)
