"""The zero pipeline prints what Apache TVM 0.27 prints (issue 32), on the models of
tools/tvm_zero_pipeline_reference.py: tests/golden/zero_pipeline/<name>.input.tvms through
``relax.get_pipeline("zero")``, against TVM's own output (<name>.tvms). TVM 0.27 prints its
modern dialect (``tirx``, ``T.sblock``), so both are compared as tvms prints them: TVM's text
read by tvms and printed again, tvms's result printed.

`KNOWN_DIFFERENT` lists the models whose print still differs, each with the first difference;
they are strict xfails, so a fix that makes one identical fails here until it leaves the list.
Every difference is a correct program printed differently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tvmscript as tvms
from tvmscript import relax

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "zero_pipeline"
MODELS = sorted(p.name[: -len(".input.tvms")] for p in GOLDEN.glob("*.input.tvms"))

# Rule numbers are issue 32's.
KNOWN_DIFFERENT = {
}


def zero(text: str) -> str:
    return relax.get_pipeline("zero")(tvms.parse(text)).script()


def _param(name):
    reason = KNOWN_DIFFERENT.get(name)
    return pytest.param(name, id=name, marks=[pytest.mark.xfail(reason=reason, strict=True)] if reason else [])


def test_every_model_has_tvms_output_or_a_reason():
    assert len(MODELS) >= 40
    assert set(KNOWN_DIFFERENT) <= set(MODELS)
    assert all((GOLDEN / f"{m}.tvms").exists() for m in MODELS), "TVM rejected none of them"


@pytest.mark.parametrize("name", [_param(m) for m in MODELS])
def test_the_zero_pipeline_prints_what_tvm_prints(name):
    mine = zero((GOLDEN / f"{name}.input.tvms").read_text())
    theirs = tvms.parse((GOLDEN / f"{name}.tvms").read_text()).script()
    assert mine == theirs
