"""Cost models: rank candidates before measuring them, so that the measurements go to the
likely-fast ones.

`XGBModel` is TVM's choice and ours: gradient-boosted trees (XGBoost) regressing each
candidate's throughput relative to the best measured for its workload (``best time / time``,
in (0, 1]) on its `features`. Why XGBoost: the data are a few hundred rows of a few hundred
features with strong interactions (a tile size matters only together with the loop order and
the vector width), where boosted trees learn fast and well with no tuning of their own, and
the library is well kept, small as a wheel (``xgboost-cpu``, no CUDA) and fast to retrain after
every batch. A normalized target lets one model serve several workloads of different sizes.
It needs the ``tune`` extra (``pip install "tvms[tune]"``).

`RandomModel` scores at random: what the search uses before there is anything to learn from
(and a baseline for the model's value).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CostModel", "XGBModel", "RandomModel", "make_cost_model"]


class CostModel:
    """``update`` with measured candidates, ``predict`` a score per candidate (higher is
    faster)."""

    def update(self, workload: str, features: list, run_secs: list) -> None:
        raise NotImplementedError

    def predict(self, workload: str, features: list) -> np.ndarray:
        raise NotImplementedError


class RandomModel(CostModel):
    """Uniform random scores from a seeded generator."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def update(self, workload: str, features: list, run_secs: list) -> None:
        pass

    def predict(self, workload: str, features: list) -> np.ndarray:
        return self.rng.random(len(features))


class XGBModel(CostModel):
    """Boosted trees on (features, best time / time), retrained after each update; random
    scores until `min_samples` candidates have been measured. Failed candidates (no time)
    are learned as throughput 0."""

    def __init__(self, seed: int = 0, min_samples: int = 8, num_rounds: int = 60, max_depth: int = 6) -> None:
        try:
            import xgboost
        except ImportError as err:   # the extra is missing: say how to get it
            raise ImportError('the XGBoost cost model needs the tune extra: pip install "tvms[tune]"') from err
        self._xgb = xgboost
        self.seed, self.min_samples, self.num_rounds, self.max_depth = seed, min_samples, num_rounds, max_depth
        self.fallback = RandomModel(seed)
        self._rows: dict = {}      # workload -> ([features], [seconds or None])
        self._booster = None

    @property
    def num_samples(self) -> int:
        return sum(len(f) for f, _ in self._rows.values())

    def update(self, workload: str, features: list, run_secs: list) -> None:
        feats, secs = self._rows.setdefault(workload, ([], []))
        feats.extend(features)
        secs.extend(run_secs)
        if self.num_samples >= self.min_samples:
            self._train()

    def _train(self) -> None:
        xs, ys = [], []
        for feats, secs in self._rows.values():
            times = [s for s in secs if s]
            best = min(times) if times else None
            for f, s in zip(feats, secs):
                xs.append(f)
                ys.append(best / s if best and s else 0.0)
        data = self._xgb.DMatrix(np.asarray(xs, dtype=np.float32), label=np.asarray(ys, dtype=np.float32))
        params = {"objective": "reg:squarederror", "max_depth": self.max_depth, "eta": 0.2, "min_child_weight": 1,
                  "subsample": 1.0, "seed": self.seed, "nthread": 1, "verbosity": 0}
        self._booster = self._xgb.train(params, data, num_boost_round=self.num_rounds)

    def predict(self, workload: str, features: list) -> np.ndarray:
        if self._booster is None or not features:
            return self.fallback.predict(workload, features)
        return self._booster.predict(self._xgb.DMatrix(np.asarray(features, dtype=np.float32)))


def make_cost_model(kind, seed: int = 0) -> CostModel:
    """``"xgb"``, ``"random"``, or a `CostModel` (returned as it is)."""
    if isinstance(kind, CostModel):
        return kind
    if kind == "xgb":
        return XGBModel(seed=seed)
    if kind == "random":
        return RandomModel(seed)
    raise ValueError(f"cost_model must be 'xgb', 'random' or a CostModel, not {kind!r}")
