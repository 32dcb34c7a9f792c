"""Test helpers for schedules: run a PrimFunc on the CPU before and after scheduling and compare;
replay a golden case (tests/support/schedule_cases.py) and check a rejected primitive changed nothing.

`assert_same_result(before, after)` builds both functions (without the CPU default schedule, so
the loops run as written), calls them on the same random inputs and compares every buffer they
may write. A GPU-scheduled function runs too: the CPU backend treats thread bindings as loops.

`apply_golden(case)` runs a golden case's steps on tvms's Schedule, `assert_prints_as_golden`
compares the result with TVM's, `check_golden_rejected(case)` runs every step but the last and
checks that the last is rejected as `assert_rejected` says: a ScheduleError, nothing changed.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmscript as tvms
from tvmscript import tir
from tvmscript.compiler.schedule import Schedule, ScheduleError
from tvmscript.ir import IRModule, structural_equal
from tvmscript.compiler.build_cpu import build_cpu

from .schedule_cases import COMPUTE_LOCATION_DIR


def _func(f, name: str = "main") -> tir.PrimFunc:
    if isinstance(f, IRModule):
        return f[name]
    return f


def run(func: tir.PrimFunc, args: list) -> list:
    """Call ``func`` in destination-passing style on copies of ``args``; returns the copies."""
    kernel = build_cpu({"f": func}, schedule=False)["f"]
    copies = [a.copy() for a in args]
    kernel(*copies)
    return copies


SYMBOLIC_DIM = 37  # the value given to every symbolic dimension (odd: predicates matter)


def _dim(d) -> int:
    try:
        return int(d)
    except (TypeError, ValueError):
        return SYMBOLIC_DIM


def random_args(func: tir.PrimFunc, seed: int = 0) -> list:
    """One array per buffer parameter, random in [-1, 1) (ints in [0, 10)); symbolic
    dimensions are `SYMBOLIC_DIM`."""
    kernel = build_cpu({"f": func}, schedule=False)["f"]
    rng = np.random.default_rng(seed)
    out = []
    for p in kernel.params:
        shape = tuple(_dim(d) for d in p.shape)
        if p.dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, shape).astype(p.dtype))
        elif p.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 10, shape).astype(p.dtype))
    return out


def assert_same_result(before, after, name: str = "main", rtol: float = 1e-5, atol: float = 1e-5, seed: int = 0):
    """``before`` and ``after`` (PrimFuncs or modules holding ``name``) compute the same."""
    f0, f1 = _func(before, name), _func(after, name)
    args = random_args(f0, seed)
    out0, out1 = run(f0, args), run(f1, args)
    for n, (a, b) in enumerate(zip(out0, out1)):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"buffer argument {n} differs")
    return out1


# ----------------------------------------------------------------------------- modules


def module(text: str) -> IRModule:
    """``text`` parsed; a lone PrimFunc becomes the module's ``main``."""
    node = tvms.parse(text)
    return node if isinstance(node, IRModule) else IRModule({"main": node})


def producer_consumer(n: int) -> str:
    """An n x n intermediate ``B = A * 2`` read by ``C = B + 1``."""
    return f'''
@T.prim_func
def main(A: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
    B = T.alloc_buffer(({n}, {n}))
    for i, j in T.grid({n}, {n}):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid({n}, {n}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def first_func_name(mod: IRModule) -> str:
    return next(gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tir.PrimFunc))


def same_param_names(expected: IRModule, before: IRModule) -> None:
    """TVM 0.27 prints handle parameters under names of its own choosing (``A_handle`` for
    ``a``); give the expected functions the input's parameter names, the rest is compared."""
    for gv, func in expected.functions.items():
        if isinstance(func, tir.PrimFunc) and gv.name_hint in before:
            for p, q in zip(func.params, before[gv.name_hint].params):
                p.name = q.name


# ----------------------------------------------------------------------------- golden cases


def apply_golden(case) -> tuple:
    """The case's input module and a tvms Schedule of it after the case's steps."""
    before = module(case.input_text)
    sch = Schedule(before)
    case.run_steps(sch)
    return before, sch


def assert_prints_as_golden(case, sch, before: IRModule) -> None:
    """The scheduled module prints as TVM's result does once both are read by tvms."""
    expected = module(case.expected)
    same_param_names(expected, before)
    assert sch.mod.script() == expected.script()


def assert_traces_as_golden(case, sch) -> None:
    assert case.trace is not None, f"{case.name}: no trace from TVM"
    assert sch.trace.as_text().strip() == case.trace.strip()


def check_golden_case(case, numeric: bool = True, rtol: float = 1e-5) -> tuple:
    """The case's steps on tvms: the result prints as TVM's, the trace as TVM's trace, and (with
    ``numeric``) the first function computes what the input's computes. Returns ``before, sch``."""
    before, sch = apply_golden(case)
    assert_prints_as_golden(case, sch, before)
    assert_traces_as_golden(case, sch)
    if numeric:
        assert_same_result(before, sch.mod, name=first_func_name(before), rtol=rtol)
    return before, sch


def assert_rejected(sch, call, primitives=(), lookups: bool = False) -> ScheduleError:
    """``call()`` raises a ScheduleError (of one of ``primitives`` when given) and leaves the
    schedule as it was: the same module (structurally and printed) and the same trace (with
    ``lookups``, the block lookups ``call`` makes before failing may be added to it)."""
    snapshot, trace = sch.mod, list(sch.trace.insts)
    with pytest.raises(ScheduleError) as info:
        call()
    if primitives:
        assert info.value.primitive in primitives
    assert structural_equal(sch.mod, snapshot) and sch.mod.script() == snapshot.script()
    after = list(sch.trace.insts)
    assert all(a is b for a, b in zip(after, trace)) and len(after) >= len(trace)
    added = [i.kind for i in after[len(trace):]]
    assert added == (["get_sblock"] * len(added) if lookups else []), f"the failed call left {added} in the trace"
    return info.value


def failing(sch, call) -> str:
    """``call()`` is rejected and changes nothing (`assert_rejected`); its message."""
    return str(assert_rejected(sch, call))


def check_golden_rejected(case, primitives=()) -> ScheduleError:
    """Every step but the last runs (as in TVM); the last is rejected and changes nothing."""
    sch = Schedule(module(case.input_text))
    lines = case.steps.rstrip().splitlines()
    env = {"sch": sch}
    exec("\n".join(lines[:-1]), env)
    # The failing line may look its block up first: lookups (only) may enter the trace.
    return assert_rejected(sch, lambda: exec(lines[-1], env), primitives, lookups="get_block(" in lines[-1])


# ----------------------------------------------------------------------------- compute location


def runs_on_random_inputs(func: tir.PrimFunc) -> bool:
    """Whether `random_args` can make inputs for ``func``: buffers of constant shape only."""
    return all(isinstance(p.dtype, str) and p.dtype == "handle" for p in func.params) and all(
        isinstance(d, tir.IntImm) for b in func.buffer_map.values() for d in b.shape)


def check_location_case(case, no_numeric=()) -> None:
    """A compute_at / inline golden case prints as TVM's result; and, for the cases of
    tests/golden/compute_location/ (not in ``no_numeric``), computes the same as its input
    (test_schedule_goldens.py runs tests/golden/schedule/'s cases on the CPU already)."""
    before, sch = apply_golden(case)
    assert_prints_as_golden(case, sch, before)
    name = first_func_name(before)
    if (case.files["input"].parent == COMPUTE_LOCATION_DIR and case.name not in no_numeric
            and runs_on_random_inputs(before[name])):
        assert_same_result(before, sch.mod, name=name)
