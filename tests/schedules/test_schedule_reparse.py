"""Every schedule primitive's result is structurally equal to its own printout read back: what
``sch.mod.script()`` shows is all there is (issue 32, rule 6). Checked on every golden schedule
case that TVM accepted (tests/golden/schedule*/, compute_location/: every primitive tvms has),
after the case's steps."""

from __future__ import annotations

import pytest

import tvmscript as tvms
from support.schedule_cases import (COMPUTE_LOCATION_DIR, REDUCTION_DIR, SCHEDULE_DIR, SCHEDULE_PARAMS_DIR,
                                    schedule_cases)
from support.schedule_check import apply_golden
from tvmscript.ir import structural_equal

CASES = [(d.name, c) for d in (SCHEDULE_DIR, SCHEDULE_PARAMS_DIR, REDUCTION_DIR, COMPUTE_LOCATION_DIR)
         for c in schedule_cases(d) if not c.is_error]


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[f"{d}/{c.name}" for d, c in CASES])
def test_a_schedules_result_equals_its_reparsed_printout(case):
    _, sch = apply_golden(case)
    printed = sch.mod.script()
    back = tvms.parse(printed)
    assert structural_equal(sch.mod, back), f"{case.name}: the result differs from its printout read back"
    assert back.script() == printed
