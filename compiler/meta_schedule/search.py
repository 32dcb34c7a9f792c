"""Evolutionary search over traces (TVM's ``EvolutionarySearch``): which candidates of a task
to measure next.

Each round builds a population of candidates: the best ones measured so far (their traces from
the database) and fresh random samples of the design spaces. For a few generations the cost
model scores the population, parents are drawn in proportion to their scores, and each is
mutated (`mutators`: one sampling decision changed, or the parallel extent) or kept; every
child is replayed, finished by the postprocessors and deduplicated by the structural hash of
the function it makes. The round proposes the unmeasured candidates the model likes best, and
a few random ones (``eps_greedy``) so that a wrong model cannot starve the search.

Everything random draws from one seeded generator, so a search is deterministic under a seed
(given the same measurements).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..schedule.trace import Instruction, Trace

__all__ = ["EvolutionarySearch", "SearchConfig", "mutate"]


@dataclasses.dataclass
class SearchConfig:
    """TVM's knobs of the evolutionary search, scaled to a Python tuner."""

    population_size: int = 48
    init_measured_ratio: float = 0.2
    genetic_num_iters: int = 3
    genetic_mutate_prob: float = 0.85
    genetic_max_fail_count: int = 10
    eps_greedy: float = 0.05


class EvolutionarySearch:
    """Proposes candidates for one task (`tune.TuneTask`: its design spaces, how a trace
    becomes a finished candidate, the candidates measured so far) with ``cost_model``."""

    def __init__(self, task, cost_model, seed: int = 0, config: SearchConfig = None) -> None:
        self.task, self.cost_model = task, cost_model
        self.config = config or SearchConfig()
        self.rng = np.random.default_rng(seed)

    def _seed(self) -> int:
        return int(self.rng.integers(1 << 31))

    def _random_samples(self, count: int) -> list:
        out, tries = [], 0
        while len(out) < count and tries < count * 4:
            tries += 1
            space = self.task.spaces[int(self.rng.integers(len(self.task.spaces)))]
            cand = self.task.candidate(space, resample=True, seed=self._seed())
            if cand is not None:
                out.append(cand)
        return out

    def propose(self, count: int) -> list:
        """Up to ``count`` candidates not measured yet, best-predicted first."""
        cfg = self.config
        measured = self.task.measured.keys() | self.task.pending   # measured or being measured
        best = self.task.best_traces(max(1, int(cfg.population_size * cfg.init_measured_ratio)))
        population = [c for c in (self.task.candidate(t, resample=False, seed=self._seed()) for t in best)
                      if c is not None]
        randoms = self._random_samples(cfg.population_size - len(population))
        population += randoms
        pool: dict = {}                         # structural hash -> (score, candidate), unmeasured
        for _ in range(cfg.genetic_num_iters):
            if not population:
                break
            scores = self._scores(population)
            for c, s in zip(population, scores):
                if c.shash not in measured:
                    pool[c.shash] = (float(s), c)
            population = self._next_generation(population, scores)
        if population:
            for c, s in zip(population, self._scores(population)):
                if c.shash not in measured:
                    pool[c.shash] = (float(s), c)
        ranked = [c for _, c in sorted(pool.values(), key=lambda sc: -sc[0])]
        n_random = min(len(randoms), int(math.ceil(count * cfg.eps_greedy)))
        picks, seen = [], set()
        for c in ranked[:count - n_random] + [randoms[i] for i in self.rng.permutation(len(randoms))]:
            if len(picks) >= count:
                break
            if c.shash not in measured and c.shash not in seen:
                seen.add(c.shash)
                picks.append(c)
        return picks

    def _scores(self, population: list) -> np.ndarray:
        scores = np.asarray(self.cost_model.predict(self.task.key, [c.features for c in population]), dtype=float)
        return np.nan_to_num(scores, nan=0.0)

    def _next_generation(self, population: list, scores: np.ndarray) -> list:
        cfg = self.config
        weights = np.clip(scores, 0.0, None) + 1e-6
        weights = weights / weights.sum()
        children, seen, fails = [], set(), 0
        while len(children) < len(population) and fails < cfg.genetic_max_fail_count * len(population):
            parent = population[int(self.rng.choice(len(population), p=weights))]
            if self.rng.random() < cfg.genetic_mutate_prob:
                trace = mutate(parent.trace, self.rng, self.task)
                child = None if trace is None else self.task.candidate(trace, resample=False, seed=self._seed())
            else:
                child = parent
            if child is None or child.shash in seen:
                fails += 1
                continue
            seen.add(child.shash)
            children.append(child)
        return children


# ----------------------------------------------------------------------------- mutators


def mutate(trace: Trace, rng, task=None):
    """``trace`` with one thing changed, drawn among what it has: a tile size, an unroll (or
    other categorical) choice, a compute location, or the parallel extent (TVM's
    MutateTileSize, MutateUnroll, MutateComputeLocation, MutateParallel); None when the trace
    offers nothing to change."""
    options = []
    for i, inst in enumerate(trace.insts):
        if inst.kind == "sample_perfect_tile" and len(inst.decision or []) > 1:
            options.append((_mutate_tile, i))
        elif inst.kind == "sample_categorical" and len(inst.arg("candidates") or []) > 1:
            options.append((_mutate_categorical, i))
        elif inst.kind == "sample_compute_location" and task is not None:
            options.append((_mutate_compute_location, i))
        elif inst.kind == "annotate" and inst.arg("ann_key") == "meta_schedule.parallel":
            options.append((_mutate_parallel, i))
    order = rng.permutation(len(options))
    for k in order:
        fn, i = options[int(k)]
        out = fn(trace, i, rng, task)
        if out is not None:
            return out
    return None


def _mutate_tile(trace: Trace, i: int, rng, task):
    """Move a prime factor of one tile level to another, keeping the product and the bound on
    the innermost factor."""
    inst = trace.insts[i]
    factors = [int(f) for f in inst.decision]
    max_inner = int(inst.arg("max_innermost_factor") or 16)
    movable = [k for k, f in enumerate(factors) if f > 1]
    for _ in range(8):
        src = movable[int(rng.integers(len(movable)))] if movable else None
        if src is None:
            return None
        dst = int(rng.integers(len(factors) - 1))
        dst = dst + 1 if dst >= src else dst
        primes = _prime_factors(factors[src])
        prime = primes[int(rng.integers(len(primes)))]
        new = list(factors)
        new[src] //= prime
        new[dst] *= prime
        if new[-1] <= max_inner or len(new) == 1:
            return trace.with_decision(i, new)
    return None


def _mutate_categorical(trace: Trace, i: int, rng, task):
    inst = trace.insts[i]
    probs = [float(p) for p in inst.arg("probs")]
    choices = [k for k, p in enumerate(probs) if p > 0 and k != inst.decision]
    if not choices:
        return None
    return trace.with_decision(i, choices[int(rng.integers(len(choices)))])


def _mutate_compute_location(trace: Trace, i: int, rng, task):
    """Another of the loops the block can go under (or the root): the candidates are counted
    by replaying the trace up to the sample."""
    count = task.compute_location_count(trace, i)
    if count is None:
        return None
    choices = [d for d in range(-1, count) if d != trace.insts[i].decision]
    if not choices:
        return None
    return trace.with_decision(i, choices[int(rng.integers(len(choices)))])


def _mutate_parallel(trace: Trace, i: int, rng, task):
    """The most iterations fused into the parallel loop, halved or doubled."""
    inst = trace.insts[i]
    value = int(inst.arg("ann_val"))
    new = max(1, value // 2) if rng.random() < 0.5 else value * 2
    if new == value:
        return None
    args = [(k, new if k == "ann_val" else v) for k, v in inst.args]
    out = trace.copy()
    out.insts[i] = Instruction(inst.kind, args, inst.outputs)
    return out


def _prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out
