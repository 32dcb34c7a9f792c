"""The schedule and DLight golden cases, read from ``tests/golden/schedule/`` and
``tests/golden/dlight/`` (made from real Apache TVM by ``tools/tvm_schedule_reference.py``; TVM
is not imported here or anywhere in the tests).

    from support.schedule_cases import schedule_cases, dlight_cases

    @pytest.mark.parametrize("case", schedule_cases(), ids=lambda c: c.name)
    def test_schedule(case):
        sch = tvms.tir.Schedule(tvms.parse(case.input_text))
        if case.error:
            with pytest.raises(Exception) as info:    # TVM raised case.error.type_name
                case.run_steps(sch)
        else:
            case.run_steps(sch)
            ... compare sch.mod with tvms.parse(case.expected); sch.trace with case.trace ...

The texts are TVM 0.27's prints, in its modern dialect (``tirx``, ``T.sblock``,
``@T.prim_func(s_tir=True)``, ``T.sblock_alloc_buffer``); tvms reads that dialect and prints
the classic one, so compare parsed modules (or tvms's prints of both), not raw text.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any, Optional

GOLDEN = pathlib.Path(__file__).parents[1] / "golden"
SCHEDULE_DIR = GOLDEN / "schedule"
DLIGHT_DIR = GOLDEN / "dlight"
# Made by the other tools/tvm_*_reference.py scripts, in the same layout as SCHEDULE_DIR.
SCHEDULE_PARAMS_DIR = GOLDEN / "schedule_params"
REDUCTION_DIR = GOLDEN / "schedule_reduction"
COMPUTE_LOCATION_DIR = GOLDEN / "compute_location"


@dataclass(frozen=True)
class ExpectedError:
    """What TVM raised: the exception class name (e.g. ``ScheduleError``) and its message (for a
    ScheduleError: "An error occurred in the schedule primitive 'split'." and the reason)."""

    type_name: str
    message: str


@dataclass(frozen=True)
class ScheduleCase:
    name: str
    input_text: str                  # <name>.input.tvms
    steps: str                       # <name>.steps.py: Python using only `sch`
    expected: Optional[str] = None   # <name>.tvms: TVM's sch.mod.script() after the steps
    trace: Optional[str] = None      # <name>.trace.py: TVM's sch.trace.show() output
    error: Optional[ExpectedError] = None  # <name>.error.txt when TVM rejects a step
    files: dict = field(default_factory=dict, compare=False, repr=False)  # kind -> path

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def run_steps(self, sch: Any, **extra: Any) -> dict:
        """Run the steps with ``sch`` bound; returns the namespace they ran in (their names)."""
        namespace = {"sch": sch, **extra}
        exec(compile(self.steps, str(self.files.get("steps", f"<{self.name}.steps.py>")), "exec"), namespace)
        return namespace


@dataclass(frozen=True)
class DLightCase:
    name: str
    input_text: str                  # <name>.input.tvms: the IRModule TVM scheduled
    rules: tuple                     # rule class names in tvm.s_tir.dlight.gpu, in order
    target: str                      # the JSON text TVM's Target was made from
    expected: str                    # <name>.tvms: ApplyDefaultSchedule(*rules)(mod).script()
    applied: dict                    # function name -> name of the rule that scheduled it ("none")
    files: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def target_attrs(self) -> dict:
        """The target as a dict, e.g. {"kind": "cuda", "arch": "sm_90", ...}."""
        return json.loads(self.target)


def _read_error(path: pathlib.Path) -> ExpectedError:
    type_name, _, message = path.read_text().partition("\n")
    return ExpectedError(type_name.strip(), message.rstrip("\n"))


def _opt(path: pathlib.Path) -> Optional[str]:
    return path.read_text() if path.exists() else None


def schedule_cases(directory: pathlib.Path = SCHEDULE_DIR) -> list:
    """Every schedule case, sorted by name."""
    out = []
    for inp in sorted(directory.glob("*.input.tvms")):
        name = inp.name[: -len(".input.tvms")]
        paths = {
            "input": inp,
            "steps": directory / f"{name}.steps.py",
            "expected": directory / f"{name}.tvms",
            "trace": directory / f"{name}.trace.py",
            "error": directory / f"{name}.error.txt",
        }
        error = _read_error(paths["error"]) if paths["error"].exists() else None
        case = ScheduleCase(
            name=name,
            input_text=inp.read_text(),
            steps=paths["steps"].read_text(),
            expected=_opt(paths["expected"]),
            trace=_opt(paths["trace"]),
            error=error,
            files={k: p for k, p in paths.items() if p.exists()},
        )
        if (case.expected is None) == (case.error is None):
            raise ValueError(f"schedule case {name}: needs exactly one of {name}.tvms and {name}.error.txt")
        out.append(case)
    return out


def schedule_case(name: str, *directories: pathlib.Path) -> ScheduleCase:
    """The case ``name`` of the first of ``directories`` (default: SCHEDULE_DIR) that has it."""
    for directory in directories or (SCHEDULE_DIR,):
        for case in schedule_cases(directory):
            if case.name == name:
                return case
    raise KeyError(name)


def cases_named(prefixes, directory: pathlib.Path = SCHEDULE_DIR) -> list:
    """The cases of ``directory`` whose names start with one of ``prefixes``."""
    return [c for c in schedule_cases(directory) if c.name.startswith(tuple(prefixes))]


def cases_calling(calls, directory: pathlib.Path = SCHEDULE_DIR) -> list:
    """The cases of ``directory`` whose steps contain one of ``calls`` (e.g. ``"sch.compute_at("``)."""
    return [c for c in schedule_cases(directory) if any(call in c.steps for call in calls)]


def dlight_cases(directory: pathlib.Path = DLIGHT_DIR) -> list:
    """Every DLight case, sorted by name."""
    out = []
    for inp in sorted(directory.glob("*.input.tvms")):
        name = inp.name[: -len(".input.tvms")]
        paths = {
            "input": inp,
            "rules": directory / f"{name}.rules.txt",
            "expected": directory / f"{name}.tvms",
            "applied": directory / f"{name}.applied.txt",
        }
        rules_line, target_line = paths["rules"].read_text().splitlines()[:2]
        applied = {}
        if paths["applied"].exists():
            for line in paths["applied"].read_text().splitlines():
                func, _, rule = line.partition(" ")
                applied[func] = rule
        out.append(DLightCase(
            name=name,
            input_text=inp.read_text(),
            rules=tuple(r.strip() for r in rules_line.split(",") if r.strip()),
            target=target_line.strip(),
            expected=paths["expected"].read_text(),
            applied=applied,
            files={k: p for k, p in paths.items() if p.exists()},
        ))
    return out


def location_cases(calls, prefixes) -> list:
    """The compute_at / inline cases: those of COMPUTE_LOCATION_DIR whose names start with one of
    ``prefixes``, and those of SCHEDULE_DIR whose steps contain one of ``calls``."""
    return cases_named(prefixes, COMPUTE_LOCATION_DIR) + cases_calling(calls)
