"""The tuning loop (compiler/meta_schedule/tune.py) and ``tvms tune``: deterministic under a seed,
resumable, interruptible with the database kept, every measured candidate checked, and the
result applied by ``tvms.compile(tuning_db=)`` and ``tvms run --tuned``.

The determinism, resume and interrupt tests measure with a fake builder and runner (a made-up
time per candidate, from its structural hash), so that they are exact and fast; the others
build and time real kernels."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

import tvmscript as tvms
from support.cli import ok, tvms as run_tvms
from support.sampled_schedules import MATMUL, func
from tvmscript.compiler.meta_schedule.database import JSONDatabase
from tvmscript.compiler.meta_schedule.measure import BuildResult, RunnerResult
from tvmscript.compiler.meta_schedule.search import SearchConfig
from tvmscript.compiler.meta_schedule.tune import extract_tasks, tune_tir
from tvmscript.ir.structural import structural_hash

SMALL = SearchConfig(population_size=16, genetic_num_iters=2)


class FakeBuilder:
    """Builds nothing: the artifact is the function itself."""

    def build(self, inputs):
        return [BuildResult(artifact=inp.mod["main"]) for inp in inputs]

    def close(self):
        pass


class FakeRunner:
    """A time per function made up from its structural hash (the default schedule's, an
    unscheduled function, 1 ms); ``interrupt_after`` raises Ctrl-C's KeyboardInterrupt at that
    call of ``run``."""

    def __init__(self, interrupt_after=None):
        self.calls, self.interrupt_after, self.timed, self.stops = 0, interrupt_after, [], []

    def run(self, inputs):
        self.calls += 1
        if self.interrupt_after is not None and self.calls > self.interrupt_after:
            raise KeyboardInterrupt
        out = []
        for inp in inputs:
            digest = hashlib.sha256(structural_hash(inp.artifact).encode()).digest()
            secs = 1e-3 if not inp.artifact.attrs.get("tvms.no_default_schedule") else 2e-4 + digest[0] * 1e-5
            self.timed.append(structural_hash(inp.artifact))
            self.stops.append(inp.stop_above_s)
            out.append(RunnerResult(run_secs=[secs] * 3))
        return out

    def reference(self, *args, **kwargs):
        return {2: np.zeros((128, 96), "float32")}

    def close(self):
        pass


def fake_tune(work_dir, trials, seed=0, runner=None):
    runner = runner or FakeRunner()
    db = tune_tir(func(), "llvm", str(work_dir), trials, num_trials_per_iter=8, seed=seed, builder=FakeBuilder(),
                  runner=runner, search_config=SMALL)
    return db, runner


def records_of(work_dir) -> list:
    with open(os.path.join(work_dir, "database_tuning_record.json")) as f:
        return [json.loads(line) for line in f]


def test_the_search_is_deterministic_under_a_seed(tmp_path):
    _, runner = fake_tune(tmp_path / "a", 24, seed=3)
    fake_tune(tmp_path / "b", 24, seed=3)
    fake_tune(tmp_path / "c", 24, seed=4)
    a, b, c = (records_of(tmp_path / d) for d in "abc")
    assert len(a) == 25                    # the default schedule, then 24 candidates
    assert len(set(runner.timed)) == 25    # none timed twice (a batch is searched while the last builds)
    assert a == b
    assert [r[1]["trace"] for r in a] != [r[1]["trace"] for r in c]
    assert a[0][1]["trace"]["insts"] == []  # the default schedule is measured first


def test_a_second_run_continues_from_the_database_without_measuring_again(tmp_path):
    _, first = fake_tune(tmp_path, 16)
    db, second = fake_tune(tmp_path, 32)
    assert len(first.timed) == 17 and len(second.timed) == 16      # the default is not timed again
    assert not set(first.timed) & set(second.timed)
    (task,) = db.last_report.tasks
    assert task.trials == 32 and len(records_of(tmp_path)) == 33
    best = min(r[1]["run_secs"][0] for r in records_of(tmp_path) if r[1]["trace"]["insts"])
    assert task.best_secs == pytest.approx(best)


def test_candidates_far_behind_the_best_are_timed_once(tmp_path):
    _, runner = fake_tune(tmp_path, 16)
    assert runner.stops[0] is None                        # the default: nothing to compare with yet
    assert runner.stops[1:9] == [pytest.approx(2e-3)] * 8  # twice the default's 1 ms
    assert max(runner.stops[9:]) < 2e-3                     # twice the best of the first batch


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    db, _ = fake_tune(tmp_path, 40, runner=FakeRunner(interrupt_after=2))   # the default, one batch, then ^C
    assert db.last_report.interrupted
    assert len(records_of(tmp_path)) == 1 + 8
    reopened = JSONDatabase(str(tmp_path))
    assert len(reopened) == 9


def test_a_real_run_improves_on_nothing_it_has_not_checked(tmp_path):
    """Real kernels: every candidate's output was compared with the default schedule's (none
    wrong), and the tuned module compiles to NumPy's result whatever the best record is."""
    db = tune_tir(func(), "llvm", str(tmp_path), 16, num_trials_per_iter=8, seed=0, search_config=SMALL)
    (row,) = db.last_report.rows()
    assert row["trials"] == 16 and row["default_ms"] > 0 and row["best_ms"] <= row["default_ms"]
    assert "wrong" not in row["failures"], row["failures"]
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64)).astype("float32"), rng.standard_normal((64, 96)).astype("float32")
    c = tvms.nd.array(np.zeros((128, 96), "float32"))
    kernel = tvms.compile(tvms.IRModule({"main": func()}), tuning_db=str(tmp_path))["main"]
    kernel(tvms.nd.array(a), tvms.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


RELAX_MODEL = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((64, 128), "float32"), w: R.Tensor((128, 32), "float32"),
             b: R.Tensor((32,), "float32")) -> R.Tensor((64, 128), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(R.add(y, b))
            u = R.matmul(z, R.permute_dims(w))
            R.output(u)
        return u
'''


def test_tasks_are_the_kernels_a_compile_builds_weighted_by_calls():
    tasks = extract_tasks(tvms.parse(RELAX_MODEL), "llvm")
    names = [name for name, _, _ in tasks]
    assert any("matmul" in n for n in names) and all(w >= 1 for _, _, w in tasks)
    only = extract_tasks(tvms.IRModule({"mm": func()}), "llvm")
    assert [(n, w) for n, _, w in only] == [("mm", 1.0)]


def test_tvms_tune_then_run_with_the_database(tmp_path):
    src = tmp_path / "model.tvms"
    src.write_text(RELAX_MODEL)
    work = tmp_path / "tuning"
    tuned = ok("tune", src, "--trials", "8", "--per-iter", "4", "--work-dir", work, "--no-live")
    assert "best GFLOP/s" in tuned.out and "speedup" in tuned.out
    assert os.path.exists(work / "database_tuning_record.json")
    out = tmp_path / "out.npz"
    ran = ok("run", src, "--tuned", work, "--out", out)
    assert "tuned schedules for" in ran.err and "it holds" not in ran.err   # every kernel run builds was tuned
    again = ok("tune", src, "--trials", "8", "--per-iter", "4", "--work-dir", work, "--no-live")   # resumes
    assert "tuning" in again.out


def test_tvms_tune_refuses_what_it_cannot_tune(tmp_path):
    src = tmp_path / "mm.tvms"
    src.write_text(MATMUL)
    bad = run_tvms("tune", src, "--work-dir", tmp_path / "w", "--func", "nope")
    assert bad.returncode == 1 and "no function named 'nope'" in bad.err
    missing = run_tvms("tune", src)
    assert missing.returncode == 2 and "--work-dir" in missing.err


def test_tvms_names_as_tvm_spells_them(tmp_path):
    """The tutorial's spelling: ``ms.tune_tir(mod, target, work_dir=, max_trials_global=)``, then
    ``relax.transform.MetaScheduleApplyDatabase`` under the target."""
    from tvmscript import meta_schedule as ms, relax

    mod = tvms.IRModule({"main": func()})
    db = ms.tune_tir(mod, "llvm", work_dir=str(tmp_path), max_trials_global=8, num_trials_per_iter=8,
                     builder=FakeBuilder(), runner=FakeRunner(), search_config=SMALL)
    assert isinstance(db, ms.JSONDatabase) and ms.schedule_rule.MultiLevelTiling("SSRSRS").structure == "SSRSRS"
    with tvms.target.Target("llvm"):
        tuned = relax.transform.MetaScheduleApplyDatabase(str(tmp_path))(mod)
    assert tuned["main"].attrs.get("tvms.no_default_schedule")      # the fake runner made a candidate best


def test_trials_are_shared_by_time_within_the_budget():
    """Each task one batch, the rest by weight x default time; never more than the budget
    (`tvms tune --trials 48` on a 2-kernel model measured 68 before)."""
    from types import SimpleNamespace

    from tvmscript.compiler.meta_schedule.tune import _first_shares, _share_the_rest

    def shares_of(budget, per_iter):
        shares = _first_shares(tasks, budget, per_iter)
        _share_the_rest(shares, tasks, budget, per_iter)
        return [shares[id(t)] for t in tasks]

    tasks = [SimpleNamespace(weight=1.0, default_secs=8e-3), SimpleNamespace(weight=2.0, default_secs=1e-3),
             SimpleNamespace(weight=1.0, default_secs=None)]
    for budget, per_iter in ((48, 32), (1000, 32), (5, 32), (0, 8)):
        shares = shares_of(budget, per_iter)
        assert sum(shares) <= budget and min(shares) >= min(per_iter, budget // 3)
        assert _first_shares(tasks, budget, per_iter)[id(tasks[0])] == min(per_iter, budget // 3)
    shares = shares_of(1000, 32)
    assert shares[0] > shares[2] > shares[1]     # 8 ms, then the mean of the others (5 ms), then 2 ms
