"""The search's parts that need no measurement (compiler/meta_schedule/features.py,
cost_model.py, search.py's mutators): features tell schedules apart, the model learns a ranking
from examples, and a mutation changes one decision and keeps every constraint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tvmscript.compiler.meta_schedule.cost_model import RandomModel, XGBModel, make_cost_model
from tvmscript.compiler.meta_schedule.features import estimate_flops, extract_features, feature_length
from tvmscript.compiler.meta_schedule.search import mutate
from tvmscript.compiler.schedule import Schedule

from support.sampled_schedules import func, tiled


def test_features_have_one_length_and_tell_tilings_apart():
    f = func()
    vectors = [extract_features(tiled(Schedule(f, seed=s)).mod["main"]) for s in range(16)]
    assert all(v.shape == (feature_length(),) and np.isfinite(v).all() for v in vectors)
    assert len({v.tobytes() for v in vectors}) == 16
    # the unscheduled function too, and its arithmetic: 2 flops per multiply-add
    assert extract_features(f).shape == (feature_length(),)
    assert estimate_flops(f) == 2 * 128 * 96 * 64


def test_xgboost_learns_to_rank_what_it_was_shown():
    """Synthetic costs that depend on the tiling (the time falls with the vector width and
    rises with the innermost I tile): ranked on held-out schedules far better than chance."""
    f = func()
    rows, costs = [], []
    for s in range(80):
        sch = tiled(Schedule(f, seed=s))
        d = sch.trace.decisions
        i_tile, j_tile = (d[k] for k in sorted(d)[:2])
        rows.append(extract_features(sch.mod["main"]))
        costs.append(1.0 / j_tile[-1] + 0.05 * i_tile[-1])
    model = XGBModel(seed=0)
    model.update("mm", rows[:60], costs[:60])
    pred = model.predict("mm", rows[60:])
    truth = -np.asarray(costs[60:])
    rank = lambda x: np.argsort(np.argsort(x))  # noqa: E731
    rho = np.corrcoef(rank(pred), rank(truth))[0, 1]
    assert rho > 0.6, rho


def test_before_enough_samples_the_model_scores_at_random_but_reproducibly():
    a, b = XGBModel(seed=3, min_samples=10), XGBModel(seed=3, min_samples=10)
    feats = [np.ones(feature_length(), "float32") * k for k in range(5)]
    a.update("w", feats[:2], [1.0, 2.0])
    assert np.array_equal(a.predict("w", feats), b.predict("w", feats))
    assert isinstance(make_cost_model("random"), RandomModel)
    with pytest.raises(ValueError, match="cost_model must be"):
        make_cost_model("svm")


def test_a_mutation_changes_one_decision_and_keeps_the_tile_product():
    f = func()
    trace = tiled(Schedule(f, seed=5)).trace
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        child = mutate(trace, rng)
        changed = [i for i, d in trace.decisions.items() if child.decisions[i] != d]
        assert len(changed) == 1
        i = changed[0]
        inst = child.insts[i]
        if inst.kind == "sample_perfect_tile":
            assert np.prod(inst.decision) == np.prod(trace.insts[i].decision)
            assert inst.decision[-1] <= 16
        seen.add(inst.kind)
        replayed = Schedule(f)
        child.apply_to_schedule(replayed)          # every mutant replays
        assert json.dumps(replayed.trace.decisions, sort_keys=True) == json.dumps(child.decisions, sort_keys=True)
    assert seen == {"sample_perfect_tile", "sample_categorical"}


def test_the_search_proposes_nothing_already_pending_or_measured():
    """A batch is searched while the one before it is built (tune.tune_tasks): that one's
    candidates are pending, and the same search, seeded alike, then proposes others."""
    from tvmscript.compiler.meta_schedule.search import EvolutionarySearch, SearchConfig
    from tvmscript.compiler.meta_schedule.tune import TuneTask

    task = TuneTask("main", func(), "llvm")
    config = SearchConfig(population_size=16, genetic_num_iters=2)
    first = EvolutionarySearch(task, RandomModel(seed=0), seed=5, config=config).propose(8)
    again = EvolutionarySearch(task, RandomModel(seed=0), seed=5, config=config).propose(8)
    assert [c.shash for c in again] == [c.shash for c in first]      # deterministic, so:
    task.pending.update(c.shash for c in first)
    later = EvolutionarySearch(task, RandomModel(seed=0), seed=5, config=config).propose(8)
    assert later and not {c.shash for c in later} & task.pending
