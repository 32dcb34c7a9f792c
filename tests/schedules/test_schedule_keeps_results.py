"""Every rule of the default CPU schedule keeps results: a corpus of real kernels (legalized,
fused Relax ops through the zero pipeline; the seed programs' prim_funcs; a few hand-written
forms no op produces) built with and without `compiler.schedule_cpu.default_schedule`, run on
the same random inputs.

Results must be the same bits (NaN where NaN, zeros of the same sign), except in kernels the
schedule turns into dot-product nests (`schedule_cpu.dot_product.DotProduct`): they add the
terms of a float sum in another order, so each case of those says which sum is reordered and
why, and its results may differ by twice the rounding-error bound of that sum
(``gamma_K * sum |terms|`` for each order, K the reduction length, carried to the output as
the case derives; see `schedule_corpus.SumBound`), as tests/schedules/test_schedule_dot.py checks
matrix-vector products against float64.

Each case also names the rules its schedule must show (`schedule_corpus.RULES`, read from the
scheduled PrimFunc by `applied_rules`), and `test_every_rule_has_a_case` checks that every
rule of the package has a case, so no rule escapes the comparison. The schedule depends on the
thread count (`parallel_threads`: which loop runs in parallel, whether an operand is packed up
front): each case runs under ``OMP_NUM_THREADS`` 1 and 2 where the schedules differ.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tvmscript.compiler.schedule_cpu import default_schedule
from tvmscript.ir import structural_equal

from support import schedule_corpus as sc

CASES = sc.corpus()
SEEDS = sc.seed_kernels()
# Seed kernels whose schedule reorders a float sum (the bound of `linear_sums` holds: each is
# x @ W.T + b at batch 1, linear in the terms of its sum, one rounding after it).
SEED_SUMS = {
    "e2e_mlp:linear0": "x @ W.T + b at batch 1: the matrix in rows, a dot-product nest",
    "e2e_mlp:linear1": "x @ W.T + b at batch 1: the matrix in rows, a dot-product nest",
}


def _param(case: sc.Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


def _schedules(case: sc.Case, monkeypatch) -> list:
    """(threads, scheduled PrimFunc) for each of the case's thread counts giving a schedule of
    its own."""
    out = []
    for threads in case.threads:
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        scheduled = default_schedule(case.func)
        if not any(structural_equal(scheduled, other) for _, other in out):
            out.append((threads, scheduled))
    return out


def _check(case: sc.Case, monkeypatch) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))  # the same inputs every run
    inputs = sc.make_inputs(case, rng)
    out0 = sc.initial_output(case, rng)
    plain = sc.run(case, inputs, out0, schedule=False)
    for threads, scheduled in _schedules(case, monkeypatch):
        shown = sc.applied_rules(case.func, scheduled)
        assert case.rules <= shown, f"threads={threads}: rules {sorted(case.rules - shown)} not applied"
        if case.untouched:
            assert structural_equal(scheduled.body, case.func.body), "a nest the schedule must leave alone changed"
        if case.sums is None:
            assert "dot_product" not in shown, "the schedule reorders a sum: give the case a SumBound"
        else:
            assert "dot_product" in shown, "no reordered sum: the case should compare bits"
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        fast = sc.run(case, inputs, out0, schedule=True)
        if case.sums is None:
            diff = np.abs(fast.astype("float64") - plain.astype("float64")) if fast.dtype.kind == "f" else None
            assert sc.same_bits(fast, plain), (
                f"threads={threads}: not the same bits; max |difference| "
                f"{np.nanmax(diff) if diff is not None and diff.size else 'n/a'}")
        else:
            assert np.isfinite(plain).all()
            bound = sc.sum_bound(case, inputs, plain)
            err = np.abs(fast.astype("float64") - plain.astype("float64"))
            assert (err <= bound).all(), (
                f"threads={threads}: beyond the bound of a {case.sums.terms}-term sum "
                f"({case.sums.reason}): worst error/bound {np.max(err / np.maximum(bound, 1e-300)):.3g}")


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_scheduled_kernel_keeps_results(case, monkeypatch):
    _check(case, monkeypatch)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_kernel_keeps_results(name, monkeypatch):
    func = SEEDS[name]
    case = sc.Case(name, func)
    if name in SEED_SUMS:
        case.sums = sc.linear_sums(func, SEED_SUMS[name], slack_ulps=1)
    _check(case, monkeypatch)


def test_every_rule_has_a_case():
    """Each rule of `RULES` is asserted by some case (and so compared)."""
    covered = set().union(*(c.rules for c in CASES))
    assert set(sc.RULES) - covered == set()
    assert covered <= set(sc.RULES)


def test_the_corpus_is_broad():
    """Float32, float64, float16 and integer kernels; odd sizes; batch 1 and more."""
    dtypes = {c.func.buffer_map[c.func.params[-1]].dtype for c in CASES}
    assert {"float32", "float64", "float16", "int32", "int64", "int8"} <= dtypes
    assert len(CASES) + len(SEEDS) >= 80


SCHEDULE_RULE_NONE = '''
@T.prim_func
def f(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tir.noalias": True})
    for i, k in T.grid(64, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.block_attr({"schedule_rule": "None"})
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
'''


def test_a_block_asking_for_no_schedule_is_left_alone():
    """``schedule_rule: "None"`` asks for no schedule (a MetaSchedule rule's name is only a
    description, and is scheduled)."""
    import tvmscript as tvms

    func = tvms.parse(SCHEDULE_RULE_NONE)
    assert structural_equal(default_schedule(func).body, func.body)
