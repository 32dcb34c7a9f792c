"""Every schedule case TVM 0.27 ran (tests/golden/schedule/, made by
tools/tvm_schedule_reference.py, read by tests/schedule_cases.py) replayed with tvms:

* the result prints exactly as TVM's result does once both are read by tvms (same loops,
  blocks, names, bindings, predicates, regions), and computes the same as the input on the CPU;
* the trace prints as TVM's trace does;
* where TVM raised a ScheduleError, tvms raises one too and the schedule is left unchanged.
"""

from __future__ import annotations

import pytest

import tvmscript as tvms
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.printer.tir_printer import TIRPrinter

from schedule_cases import schedule_cases
from schedule_check import assert_same_result

CASES = schedule_cases()
OK = [c for c in CASES if not c.is_error]
ERRORS = [c for c in CASES if c.is_error and c.error.type_name == "ScheduleError"]


def _module(text: str):
    node = tvms.parse(text)
    return node if isinstance(node, tvms.IRModule) else tvms.IRModule({"main": node})


def _same_param_names(expected, before) -> None:
    """TVM 0.27 prints handle parameters under names of its own choosing (``A_handle`` for
    ``a``); give the expected functions the input's parameter names, the rest is compared."""
    for gv, func in expected.functions.items():
        if isinstance(func, tvms.tir.PrimFunc) and gv.name_hint in before:
            for p, q in zip(func.params, before[gv.name_hint].params):
                p.name = q.name


@pytest.mark.parametrize("case", OK, ids=[c.name for c in OK])
def test_schedule_matches_tvm(case):
    before = _module(case.input_text)
    sch = Schedule(before)
    case.run_steps(sch)
    expected = _module(case.expected)
    _same_param_names(expected, before)
    assert sch.mod.script() == expected.script()
    for gv, func in before.functions.items():
        if isinstance(func, tvms.tir.PrimFunc) and _same_signature(func, sch.mod[gv.name_hint]):
            assert_same_result(before, sch.mod, name=gv.name_hint)


def _same_signature(a, b) -> bool:
    """Whether two PrimFuncs take buffers of the same shapes (a transform_layout of a parameter
    changes them; tests/test_schedule_layout.py checks those results on re-laid-out inputs)."""
    def shapes(f):
        return [[TIRPrinter().expr(d) for d in f.buffer_map[p].shape] if p in f.buffer_map else p.dtype
                for p in f.params]
    return shapes(a) == shapes(b)


@pytest.mark.parametrize("case", [c for c in OK if c.trace], ids=[c.name for c in OK if c.trace])
def test_trace_matches_tvm(case):
    sch = Schedule(_module(case.input_text))
    case.run_steps(sch)
    assert sch.trace.as_text().strip() == case.trace.strip()


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_schedule_error_like_tvm(case):
    sch = Schedule(_module(case.input_text))
    lines = case.steps.rstrip().splitlines()
    env = {"sch": sch}
    exec("\n".join(lines[:-1]), env)  # every step but the last succeeds in TVM
    def steps():  # the trace without lookups (the failing line may look its block up first)
        return [i.kind for i in sch.trace.insts if i.kind != "get_sblock"]

    snapshot, trace = sch.mod.script(), steps()
    with pytest.raises(ScheduleError):
        exec(lines[-1], env)
    assert sch.mod.script() == snapshot and steps() == trace
