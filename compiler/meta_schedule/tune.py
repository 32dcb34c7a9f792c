"""Tuning: ``tune_tir`` and the loop that measures candidates of several tasks and keeps the
results in a database (TVM's ``meta_schedule.tune_tir`` / ``tune_tasks``).

A task is one PrimFunc on one target (`TuneTask`): its design spaces (`space`), the inputs it
is measured on and the outputs it must produce (its default schedule's, computed once), and
what has been measured of it. The default schedule is measured first, as a candidate like the
others whose trace is empty (an empty trace is "the default schedule": a build schedules the
unscheduled function itself), so tuning can only improve on it.

Trials are divided among the tasks by each one's share of the time (its weight, the times it
is called, times its default schedule's time), as MetaSchedule's task scheduler does, in
rounds of ``num_trials_per_iter`` candidates: the search proposes (`search`), the builder
compiles, the runner times and checks, every result goes to the database as it comes (so an
interrupted run keeps them) and to the cost model. The next batch is searched while one is
compiled (`_InBackground`), so its search has not seen that one's times yet, and the first
while the workers start, the references are computed and the defaults are built (`_prepare`);
nothing runs while a kernel is timed. A candidate already twice as slow as the task's best after one round
is not timed further (`SLOW_FACTOR`). A second run on the same work directory continues: what
the database holds counts as measured.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter, OrderedDict
from typing import Optional

import numpy as np

from tvmscript.ir import IRModule, relax, tir
from tvmscript.ir.structural import structural_hash

from ..schedule import Schedule, ScheduleError
from ..schedule.sampling import compute_location_candidates
from ..schedule.trace import Trace, TraceError
from ..schedule_choices import CHOICES_ATTR
from .cost_model import make_cost_model
from .features import estimate_flops, extract_features
from .measure import BuildInput, RunnerInput
from .search import EvolutionarySearch, SearchConfig

__all__ = ["TuneTask", "Candidate", "tune_tasks", "tune_tir", "extract_tasks", "TuningReport"]


@dataclasses.dataclass
class Candidate:
    """A schedule to measure: ``trace`` its decisions (what the search mutates),
    ``record_trace`` the whole trace, postprocessors included (what the database keeps),
    ``mod`` the finished function as ``main``, ``shash`` its structural hash."""

    trace: Trace
    record_trace: Trace
    mod: IRModule
    shash: str
    features: np.ndarray


REPLAY_CACHE = 4096   # replayed candidates a task remembers (`TuneTask.candidate`)
SLOW_FACTOR = 2.0     # a candidate this many times the task's best so far is timed one round (`runner.time_rounds`)


class TuneTask:
    """One PrimFunc to tune for one target (see the module docstring)."""

    def __init__(self, name: str, func: tir.PrimFunc, target: str, weight: float = 1.0, rules=None,
                 postprocs=None, seed: int = 0) -> None:
        from .database import workload_module
        from .space import generate_design_space

        self.name, self.target, self.weight = name, str(target), float(weight)
        self.func = workload_module(func)["main"]   # named and public as the database keys it
        self.key = f"{structural_hash(self.func)}:{self.target}"
        self.flops = estimate_flops(self.func)
        self.postprocs = postprocs
        self.spaces = [s.trace for s in generate_design_space(self.func, self.target, rules=rules, seed=seed)]
        self.measured: dict = {}      # structural hash -> seconds (None: failed)
        self.records: list = []       # (seconds, decisions trace) of the measured ones that ran
        self.default_secs: Optional[float] = None
        self.trials = 0
        self.failures: Counter = Counter()   # why candidates were discarded (search and measurement)
        self.pending: set = set()     # structural hashes of candidates being built or measured
        self._replays: OrderedDict = OrderedDict()  # decisions (JSON) -> Candidate or None, latest last
        self._scheduled_picks: dict = {}   # the default schedule's picks -> (hash, features) of its kernel

    @property
    def best_secs(self) -> Optional[float]:
        times = [s for s, _ in self.records] + ([self.default_secs] if self.default_secs else [])
        return min(times) if times else None

    def best_traces(self, k: int) -> list:
        return [t for _, t in sorted(self.records, key=lambda r: r[0])[:k]]

    def candidate(self, trace: Trace, resample: bool, seed: int) -> Optional[Candidate]:
        """``trace`` replayed on a fresh schedule (``resample``: with new decisions), finished
        by the postprocessors; None, counted in `failures` by reason, when that fails.

        Replays of fixed decisions are remembered (the last `REPLAY_CACHE` of them): the
        evolutionary search keeps meeting the same traces (a parent kept, two mutations that
        undo each other), and a replay with its postprocessors is most of a proposal's time."""
        if resample:
            return self._replay(trace, True, seed)
        key = json.dumps(trace.as_json())
        if key in self._replays:
            self._replays.move_to_end(key)
            return self._replays[key]
        cand = self._replays[key] = self._replay(trace, False, seed)
        if len(self._replays) > REPLAY_CACHE:
            self._replays.popitem(last=False)
        return cand

    def _replay(self, trace: Trace, resample: bool, seed: int) -> Optional[Candidate]:
        from .postproc import finish

        sch = Schedule(IRModule({"main": self.func}), seed=seed)
        try:
            trace.apply_to_schedule(sch, resample=resample)
        except (ScheduleError, TraceError, ValueError) as err:
            self.failures[f"replay: {type(err).__name__}"] += 1
            return None
        decided = sch.trace.copy()
        mod = finish(sch, self.target, self.postprocs)
        if mod is None:
            self.failures["postprocessor rejected"] += 1
            return None
        func = mod["main"]
        picks = func.attrs.get(CHOICES_ATTR)
        if picks is not None:
            # The default schedule's picks: described as the build will schedule them (once
            # per picks: the same picks come back from every mutation that keeps them).
            key = repr(picks)
            if key not in self._scheduled_picks:
                built = _as_built(func, self.target)
                self._scheduled_picks[key] = (structural_hash(built), extract_features(built))
            return Candidate(decided, sch.trace, mod, *self._scheduled_picks[key])
        return Candidate(decided, sch.trace, mod, structural_hash(func), extract_features(func))

    def compute_location_count(self, trace: Trace, index: int) -> Optional[int]:
        """How many loops the block of ``trace``'s instruction ``index`` (a
        sample_compute_location) may go under, from a replay of the instructions before it."""
        prefix = Trace()
        prefix.insts = trace.insts[:index]
        sch = Schedule(IRModule({"main": self.func}))
        try:
            handles = prefix.apply_to_schedule(sch)
        except (ScheduleError, TraceError):
            return None
        block = handles.get(id(trace.insts[index].arg("block")))
        return None if block is None else len(compute_location_candidates(sch, block))


def _as_built(func: tir.PrimFunc, target: str) -> tir.PrimFunc:
    """``func``, a candidate of the default schedule's picks
    (`schedule_rules.DefaultScheduleChoices`), as the build will compile it: scheduled with
    them, so that two picks that make the same kernel are one candidate and the cost model
    sees the loops that run."""
    from ..schedule_cpu import default_schedule
    from .schedule_rules.base import cpu_scheduling

    with cpu_scheduling(target):
        return default_schedule(func)


@dataclasses.dataclass
class TuningReport:
    """What a tuning run did, per task: trials, the default's and the best time, failures."""

    tasks: list
    interrupted: bool = False
    seconds: float = 0.0

    def rows(self) -> list:
        out = []
        for t in self.tasks:
            best = t.best_secs
            out.append({"task": t.name, "trials": t.trials, "default_ms": _ms(t.default_secs), "best_ms": _ms(best),
                        "gflops": (t.flops / best / 1e9) if best else None,
                        "speedup": (t.default_secs / best) if best and t.default_secs else None,
                        "failures": dict(t.failures)})
        return out


def _ms(secs):
    return None if secs is None else secs * 1e3


def extract_tasks(mod: IRModule, target: str) -> list:
    """(name, PrimFunc, weight) of every PrimFunc ``tvms.compile`` would build of ``mod`` for
    ``target``, in the form it builds them (`build.kernels_as_built`: the pipeline, then the
    build's rewrites, weights bound as constants marked layout-free); the weight is how many
    times the Relax functions call it (1 for a module of PrimFuncs alone)."""
    from ..build import kernels_as_built
    from ..build_target import target_name_of
    from ..transform._common import is_call_tir, walk_relax

    mod = kernels_as_built(mod, target_name_of(target))
    calls: dict = {}
    relax_funcs = [f for f in mod.functions.values() if isinstance(f, relax.Function)]

    def count(expr) -> None:
        if is_call_tir(expr):
            calls[expr.args[0].name_hint] = calls.get(expr.args[0].name_hint, 0) + 1

    for func in relax_funcs:
        walk_relax(func, count)
    out = []
    for gv, func in mod.functions.items():
        if isinstance(func, tir.PrimFunc):
            weight = calls.get(gv.name_hint, 0) if relax_funcs else 1
            if weight:
                out.append((gv.name_hint, func, float(weight)))
    return out


def tune_tasks(tasks: list, database, *, max_trials_global: int, num_trials_per_iter: int = 32, builder=None,
               runner=None, cost_model="xgb", seed: int = 0, search_config: SearchConfig = None,
               on_progress=None) -> TuningReport:
    """Tune ``tasks`` (`TuneTask`s) within ``max_trials_global`` measured candidates, results in
    ``database`` (see the module docstring). ``on_progress(report)`` is called after every
    batch. Ctrl-C stops the run between two candidates: the report says so, and the database
    keeps everything measured."""
    from .builder import LocalBuilder
    from .runner import LocalRunner

    own_builder, own_runner = builder is None, runner is None
    builder = builder or LocalBuilder()
    runner = runner or LocalRunner()
    model = make_cost_model(cost_model, seed)
    report = TuningReport(tasks)
    start = time.perf_counter()
    background = None
    try:
        contexts = [_TaskContext(task, database, runner, seed) for task in tasks]
        budget = max(0, max_trials_global - sum(t.trials for t in tasks))
        shares = _first_shares(tasks, budget, num_trials_per_iter)
        searches = {id(t): EvolutionarySearch(t, model, seed=seed + i, config=search_config)
                    for i, t in enumerate(tasks)}
        batches = _batches(contexts, searches, shares, num_trials_per_iter)
        # The references computed and the default schedules built (in the workers) while the
        # first batch is searched here; then the defaults are timed, with nothing else running.
        background = _InBackground(_prepare, contexts, builder, runner)
        current = next(batches, None)
        background.result()
        for ctx in contexts:
            ctx.measure_default(runner, database)
        _share_the_rest(shares, tasks, budget, num_trials_per_iter)
        while current is not None:
            ctx, batch = current
            background = _InBackground(builder.build, [BuildInput(c.mod, ctx.task.target) for c in batch])
            current = next(batches, None)     # the next batch is searched while this one compiles
            ctx.measure(batch, background.result(), runner, database, model)
            if on_progress is not None:
                report.seconds = time.perf_counter() - start
                on_progress(report)
    except KeyboardInterrupt:
        report.interrupted = True
        if background is not None:
            background.join()         # the builder and runner are idle again before they are closed
    finally:
        if own_builder:
            builder.close()
        if own_runner:
            runner.close()
    report.seconds = time.perf_counter() - start
    return report


def _batches(contexts: list, searches: dict, shares: dict, per_iter: int):
    """The batches to measure, ``(context, candidates)``, a batch per task in turn while its
    share lasts; a task whose space is exhausted drops out. A batch's candidates are pending
    from then on: the search does not propose them again while they are measured."""
    progress = True
    while progress:
        progress = False
        for ctx in contexts:
            task = ctx.task
            left = shares[id(task)]
            if left <= 0:
                continue
            batch = searches[id(task)].propose(min(per_iter, left))
            if not batch:
                shares[id(task)] = 0      # the space is exhausted
                continue
            progress = True
            shares[id(task)] -= len(batch)
            task.pending.update(c.shash for c in batch)
            yield ctx, batch


class _InBackground:
    """``fn(*args)`` run on a thread; `result` waits for it (and raises what it raised).

    Why a thread: building a batch is waiting on the builder's processes, and the search for
    the next batch (Python, in this process) fills that wait. Measuring is never overlapped:
    a kernel is timed with nothing else of the tuner running."""

    def __init__(self, fn, *args) -> None:
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="tvms-tune-build", daemon=True)
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._value = fn(*args)
        except BaseException as err:  # noqa: BLE001 - handed to the caller by `result`
            self._error = err

    def join(self) -> None:
        self._thread.join()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _first_shares(tasks: list, budget: int, per_iter: int) -> dict:
    """Trials per task before the default schedules are timed: one batch each, while
    ``budget`` lasts (`_share_the_rest` adds the rest once they are)."""
    floor = min(per_iter, budget // max(1, len(tasks)))
    return {id(t): floor for t in tasks}


def _share_the_rest(shares: dict, tasks: list, budget: int, per_iter: int) -> None:
    """Add to ``shares`` (`_first_shares`, some perhaps proposed already) the rest of ``budget``,
    divided in proportion to weight x default time (a task whose default failed to run gets
    the mean share); the sum stays within ``budget``."""
    times = [t.weight * (t.default_secs or 0.0) for t in tasks]
    mean = (sum(times) / len([x for x in times if x])) if any(times) else 1.0
    times = [x or mean for x in times]
    total = sum(times) or 1.0
    rest = budget - min(per_iter, budget // max(1, len(tasks))) * len(tasks)
    for t, x in zip(tasks, times):
        shares[id(t)] += int(rest * x / total)


def _prepare(contexts: list, builder, runner) -> None:
    """Each task's reference outputs and default build (`_TaskContext.prepare`), the builder's
    workers started first so that they warm up together (nothing here is timed)."""
    start = getattr(builder, "start", None)   # a LocalBuilder's processes; a cluster's are running
    if start is not None:
        start()
    for ctx in contexts:
        ctx.prepare(builder, runner)


class _TaskContext:
    """A task's measuring state: its random inputs and expected outputs, the database rows
    it already has."""

    def __init__(self, task: TuneTask, database, runner, seed: int) -> None:
        from .runner import arg_infos_of, random_args

        self.task = task
        self.args = random_args(arg_infos_of(task.func), seed)
        self.expected = self.default_built = None
        self.workload = database.commit_workload(IRModule({"main": task.func}))
        for record in database.get_top_k(self.workload, 10 ** 9):
            self._resume(record)

    def _resume(self, record) -> None:
        """A record of an earlier run: measured already; its decisions seed the search."""
        task = self.task
        secs = record.best_run_secs
        if not record.trace.insts:
            task.default_secs = secs
            return
        cand = task.candidate(_decisions_of(record.trace), resample=False, seed=0)
        if cand is None:
            return
        task.measured[cand.shash] = secs
        task.trials += 1
        if secs is not None:
            task.records.append((secs, cand.trace))

    def prepare(self, builder, runner) -> None:
        """The outputs every candidate must give (the default schedule's, computed in the
        runner's worker) and, unless the database has it timed, the default schedule built."""
        from .runner import reference_outputs

        task = self.task
        self.expected = reference_outputs(task.func, task.target, self.args, runner=runner)
        if task.default_secs is None:
            (self.default_built,) = builder.build([BuildInput(IRModule({"main": task.func}), task.target)])

    def measure_default(self, runner, database) -> None:
        """Time the default schedule built by `prepare` (a record with an empty trace)."""
        from .database import TuningRecord

        task = self.task
        if task.default_secs is not None:
            return
        built = self.default_built
        result = self._run([built], runner)[0] if built.artifact is not None else None
        record = TuningRecord(Trace(), self.workload, result.run_secs if result else None, task.target)
        task.default_secs = record.best_run_secs
        database.commit_tuning_record(record)

    def _run(self, built: list, runner) -> list:
        best = self.task.best_secs
        stop = SLOW_FACTOR * best if best else None
        inputs = [RunnerInput(b.artifact, self.task.target, self.args, self.expected, stop_above_s=stop)
                  for b in built]
        return runner.run(inputs)

    def measure(self, batch: list, built: list, runner, database, model) -> None:
        """Time and check ``batch`` (its `BuildResult`s ``built``), keep the results."""
        from .database import TuningRecord

        task = self.task
        ok = [i for i, b in enumerate(built) if b.artifact is not None]
        results = dict(zip(ok, self._run([built[i] for i in ok], runner)))
        feats, secs = [], []
        for i, cand in enumerate(batch):
            result = results.get(i)
            run_secs = result.run_secs if result is not None and result.ok else None
            if result is None:
                task.failures["build"] += 1
            elif not result.ok:
                task.failures[result.error_kind] += 1
            record = TuningRecord(cand.record_trace, self.workload, run_secs, task.target)
            best = record.best_run_secs
            task.pending.discard(cand.shash)
            task.measured[cand.shash] = best
            task.trials += 1
            if best is not None:
                task.records.append((best, cand.trace))
            database.commit_tuning_record(record)
            feats.append(cand.features)
            secs.append(best)
        model.update(task.key, feats, secs)


def _decisions_of(trace: Trace) -> Trace:
    """A record's trace without its postprocessors' steps (what the search mutates)."""
    from .postproc import strip_postprocs

    return strip_postprocs(trace)


def tune_tir(mod, target, work_dir: str, max_trials_global: int, *, num_trials_per_iter: int = 32, builder=None,
             runner=None, database=None, cost_model="xgb", seed: int = 0, rules=None, postprocs=None,
             search_config: SearchConfig = None, on_progress=None):
    """Tune every PrimFunc of ``mod`` (a module, or one PrimFunc) for ``target`` (TVM's
    ``meta_schedule.tune_tir``); returns the database (a `JSONDatabase` in ``work_dir`` unless
    ``database`` is given), whose records ``tvms.compile(..., tuning_db=)`` applies."""
    from .database import JSONDatabase

    if isinstance(mod, tir.PrimFunc):
        mod = IRModule({"main": mod})
    database = database or JSONDatabase(work_dir=work_dir)
    tasks = [TuneTask(name, func, str(target), weight, rules=rules, postprocs=postprocs, seed=seed)
             for name, func, weight in extract_tasks(mod, str(target))]
    report = tune_tasks(tasks, database, max_trials_global=max_trials_global, num_trials_per_iter=num_trials_per_iter,
                        builder=builder, runner=runner, cost_model=cost_model, seed=seed,
                        search_config=search_config, on_progress=on_progress)
    database.last_report = report
    return database
