"""Predictor-guided search: an inner evolution on fitted predictors picks what is really evaluated.

As once-for-all's search and DyNAS-T's LINAS: after ``initial`` random architectures, every ``ask`` fits one
predictor per objective (``hwnas.predictors``, default gradient-boosted trees) on the trials told so far, runs
an evolution on the predictions alone (a pool of random samples and mutants of the best evaluated
architectures; ``generations`` rounds that mutate the predicted best), and proposes the predicted best
architectures not yet evaluated: by predicted value with one objective, by non-dominated rank of the
predicted objective vectors (then spread along the first objective) with several. The runner evaluates
them like any other proposals, and the next ``ask`` refits on what they scored.

The strategy only sees Architectures and finished Trials (its predictors learn from the trials' metrics);
it is deterministic given its generator and the tells. The defaults (400 trees, a pool of 3,000) were the
best of six settings tried with ``nas bench strategies`` on NAS-Bench-201 CIFAR-10 at 50 queries (50 seeds;
README). Constraints are left to the runner: an infeasible candidate is told as such and teaches the
predictors nothing about its objectives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.objectives import Trial, non_dominated
from hwnas.search_spaces.base import CellGraphSpace, sample_batch
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, StrategyParams


class PredictorGuidedParams(StrategyParams):
    """Parameters of the ``predictor_guided`` strategy."""

    predictor: str = Field("gbt", description="registered predictor fitted per objective (gbt, mlp, gp, ensemble)")
    predictor_params: dict[str, Any] = Field(
        default_factory=lambda: {"n_estimators": 400},
        description="its parameters (default: 400 trees, refitted at every ask)")
    features: str = Field("auto", description="feature set: auto (cell for cell spaces, else encode), encode, path, "
                                              "cell, or several joined with +")
    initial: int = Field(10, ge=1, description="random architectures evaluated before the first fit (at least 8)")
    pool: int = Field(3000, ge=10, description="random samples scored by the predictors at every ask")
    parents: int = Field(10, ge=1, description="best evaluated (and, later, best predicted) architectures mutated")
    mutants: int = Field(20, ge=1, description="mutants per parent per generation")
    generations: int = Field(3, ge=0, description="rounds of the inner evolution on the predictions")


@STRATEGIES.register("predictor_guided")
class PredictorGuided(BlackBoxStrategy):
    """Fits a predictor per objective each ask; an inner evolution on the predictions proposes (OFA, LINAS)."""

    Params = PredictorGuidedParams

    def __init__(self, *, predictor: str = "gbt", predictor_params: dict[str, Any] | None = None,
                 features: str = "auto", initial: int = 10, pool: int = 3000, parents: int = 10, mutants: int = 20,
                 generations: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from hwnas.predictors import PREDICTORS, metric_features

        self.predictor = predictor
        self.predictor_params = dict(predictor_params) if predictor_params is not None else {"n_estimators": 400}
        PREDICTORS.validate_params(predictor, self.predictor_params)
        if features == "auto":
            features = "cell" if isinstance(self.space, CellGraphSpace) else "encode"
        if metric_features(features):
            from hwnas.errors import ConfigError

            raise ConfigError(f"{type(self).__name__}: features {features!r} read measured metrics; the candidates "
                              "it scores are not measured yet (use encode, path, cell or graph)")
        self.features = features
        self.initial = max(initial, 8)  # the shipped predictors fit on 8 rows or more
        self.pool = pool
        self.parents = parents
        self.mutants = mutants
        self.generations = generations
        self.trials: list[Trial] = []

    def tell(self, trials: Sequence[Trial]) -> None:
        self.remember(trials)
        self.trials.extend(trials)

    # -- ask -------------------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Architecture]:
        n = max(1, n)
        fitted = self._fit()
        out = [] if fitted is None else self._propose(fitted, n)  # too few evaluated yet: random ones
        taken = {a.arch_id for a in out}
        while len(out) < n:  # the inner search found fewer new architectures than asked: fill up
            out.append(self.novel(lambda _attempt: self.space.sample(self.rng), taken))
        return out

    def _propose(self, models: list[Any], n: int) -> list[Architecture]:
        """At most ``n`` unevaluated architectures chosen on the fitted predictors: the predicted best."""
        candidates, predicted = self._inner_search(models)
        return [candidates[i] for i in self._select(predicted, n)]

    def _fit(self) -> list[Any] | None:
        """One fitted predictor per objective (on the minimise scale), or None while there are too few trials."""
        from hwnas.predictors import PREDICTORS, featurize

        rows = [(t, self.objective_vector(t)) for t in self.trials if t.status == "ok"]
        rows = [(t, v) for t, v in rows if np.all(v < 1e11)]
        if len(rows) < self.initial:
            return None
        X = featurize(self.space, [t.arch for t, _ in rows], self.features)
        Y = np.stack([v for _, v in rows])
        models = []
        for j in range(Y.shape[1]):
            if np.ptp(Y[:, j]) == 0:  # nothing to learn yet on this objective: predict the constant
                models.append(float(Y[0, j]))
                continue
            seed = np.random.default_rng(int(self.rng.integers(2**63 - 1)))
            models.append(PREDICTORS.create(self.predictor, self.predictor_params, rng=seed).fit(X, Y[:, j]))
        return models

    def _predict(self, models: list[Any], archs: list[Architecture]) -> np.ndarray:
        from hwnas.predictors import featurize

        X = featurize(self.space, archs, self.features)
        cols = [np.full(len(archs), m) if isinstance(m, float) else np.asarray(m.predict(X)) for m in models]
        return np.stack(cols, axis=1)

    def _add(self, arch: Architecture, found: dict[str, Architecture]) -> None:
        arch = self.space.canonicalize(arch)
        if arch.arch_id not in self.seen and arch.arch_id not in found:
            found[arch.arch_id] = arch

    def _inner_search(self, models: list[Any]) -> tuple[list[Architecture], np.ndarray]:
        """Unevaluated candidates and their predicted objective vectors (minimise scale)."""
        found: dict[str, Architecture] = {}
        for arch in sample_batch(self.space, self.rng, self.pool):
            self._add(arch, found)
        ok = [t for t in self.trials if t.status == "ok"]
        ranked = sorted(ok, key=lambda t: self._scalar(self.objective_vector(t)))
        parents = [t.arch for t in ranked[: self.parents]]
        for generation in range(self.generations + 1):
            for parent in parents:
                for k in range(self.mutants):
                    self._add(self.mutate_steps(parent, 1 + k % 2), found)
            if generation == self.generations or not found:
                break
            cands = list(found.values())
            pred = self._predict(models, cands)
            order = np.argsort([self._scalar(p) for p in pred], kind="stable")
            parents = [cands[int(i)] for i in order[: self.parents]]
        cands = list(found.values())
        if not cands:
            return [], np.zeros((0, len(models)))
        return cands, self._predict(models, cands)

    @staticmethod
    def _scalar(v: np.ndarray) -> float:
        """Order for choosing parents: the first objective (minimise scale), a tie broken by the sum of the rest."""
        return float(v[0]) + 1e-9 * float(np.sum(v[1:]))

    def _select(self, predicted: np.ndarray, n: int) -> list[int]:
        """The ``n`` best by predicted non-dominated rank; within the last rank, spread along objective 0."""
        if predicted.shape[0] == 0:
            return []
        if predicted.shape[1] == 1:
            return [int(i) for i in np.argsort(predicted[:, 0], kind="stable")[:n]]
        remaining = np.arange(predicted.shape[0])
        chosen: list[int] = []
        while remaining.size and len(chosen) < n:
            front = remaining[non_dominated(predicted[remaining])]
            need = n - len(chosen)
            if front.size <= need:
                chosen.extend(int(i) for i in front)
            else:  # evenly spaced along the first objective, ends included
                front = front[np.argsort(predicted[front, 0], kind="stable")]
                picks = np.unique(np.round(np.linspace(0, front.size - 1, need)).astype(int))
                chosen.extend(int(front[i]) for i in picks)
            remaining = np.setdiff1d(remaining, front, assume_unique=True)
        return chosen[:n]
