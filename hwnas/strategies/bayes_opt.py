"""Bayesian optimisation over architectures: an uncertain surrogate per objective, expected improvement.

As BANANAS (White et al., 2021): at every ``ask`` one surrogate per objective is fitted on the trials told so
far (a predictor with ``predict_std``: by default an ensemble of five gradient-boosted tree models, each with
its own seed, whose spread is the uncertainty; or ``gp``, or ``linear``), candidates come from the same inner search as
``predictor_guided`` (a random pool plus mutants of the best evaluated and best predicted architectures), and
the batch is the candidates of highest acquisition. Two defaults differ from ``predictor_guided``'s: the ``linear``
surrogate is the challenger of the trees (per objective, whichever ranks the told trials better out of fold is fitted;
it wins where an objective is a sum of per-gene costs, as FLOPs and a lookup latency are in FBNet, and extrapolates to
the front's far end where trees cannot), and the inner evolution's depth follows the space (``generations: auto``,
one round per four genes: 3 on NAS-Bench-201, 6 on FBNet, where 3 rounds left the front's far end unreached).

- one objective: **expected improvement** over the best value told, ``E[max(f* - Y, 0)]`` with ``Y`` normal of
  the surrogate's mean and spread (minimise scale), or the upper confidence bound ``mu - kappa * sigma``;
- several objectives: **expected hypervolume improvement** of the told front, estimated by Monte Carlo
  (``samples`` joint draws per candidate, the objectives independent normals; exact in two dimensions per
  draw, by slicing in more), with the reference point just beyond the worst told value of each objective, also
  when ``reference`` is given: that one steers the inner search and, with a lookup, keeps candidates beyond it
  out (``skip_beyond_reference``, on by default here: without it the loose EHVI spends picks where the front
  cannot grow). Without a ``reference`` it derives one from what it knows before searching
  (``reference_from: sampled_median``): on an objective the lookup prices, the median of ``pool`` random
  architectures looked up (a lookup costs nothing); on a learned one, the median of its first ``initial`` (random)
  trials. The first trials' median on every objective (``initial_median``, the default before 2026-11-29) is ten
  samples: where they put the latency median well below the space's, the skip cut the front's slower part away
  (FBNet x Pixel 3, seed 4: 0.63 of the exact front's hypervolume at 300 queries; 0.93 with the sampled median).
  EHVI from the given reference, which counts no improvement outside it, was
  measured worse before candidates were kept out (NAS-Bench-201, HELP Pixel 3 and Samsung A50, 10 seeds: 0.949
  and 0.945 of the true front's hypervolume, against 0.954 and 0.979 with the looser one, 10 and 20 seeds).

The first ``initial`` trials are a balanced design (``initial_design: balanced``, the default since 2026-11-29; a
Latin-hypercube design over the genes, :meth:`~hwnas.search_spaces.base.CategoricalSpace.sample_balanced`): every value
of every gene appears among them as evenly as their number allows. Ten uniform draws left a quarter of FBNet's
(layer, op) pairs unseen (26 % on Pixel 3, seed 3), and the search rarely proposes what its surrogate has no data on:
after 150 trials 10 % were still unseen, the linear surrogate's FLOPs were 16 MFLOPs off on random architectures, and
the found front ended about 2 % short of the exact one in FLOPs all along (0.863 of its hypervolume); with the design,
0.993 on the same seed.

With one objective a batch is the ``n`` candidates of highest acquisition (as BANANAS). With several it is
chosen greedily with the *kriging believer*: after each pick its predicted mean is added to the front and the
expected improvement of the rest is computed again, so one batch spreads along the front instead of spending
itself on one region. (Believing the mean as ``f*`` with one objective was tried and measured worse: the
surrogate's optimistic means left only the spread to choose the rest of the batch by.)

Tree surrogates do not extrapolate: no tree ensemble predicts a mean beyond the best value it was fitted on,
so their expected improvement is carried by the spread and the search explores. On NAS-Bench-201 at 50 queries
that costs accuracy against ``acquisition: ucb, kappa: 0`` (the ensemble's mean alone); ``nas bench strategies``
measures both (docs/results/strategies.md). The strategy is deterministic given its generator and the tells
(the Monte Carlo draws come from it). Constraints are left to the runner, as for ``predictor_guided``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.objectives import hypervolume_improvement, non_dominated
from hwnas.strategies.predictor_guided import PredictorGuided, PredictorGuidedKwargs, PredictorGuidedParams

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from hwnas.predictors.base import StdPredictor
    from hwnas.strategies.predictor_guided import Surrogate

#: Default surrogate: five tree models (each its own seed: row subsampling and feature choice); their spread is the
#: uncertainty.
DEFAULT_SURROGATE: dict[str, Any] = {"members": ["gbt"], "n_members": 5, "bootstrap": False,
                                     "member_params": {"gbt": {"n_estimators": 200}}}
#: Candidates whose expected hypervolume improvement is estimated, taken by their chance to improve on the front.
EHVI_SHORTLIST = 300


class BayesOptParams(PredictorGuidedParams):
    """Parameters of the ``bayes_opt`` strategy."""

    predictor: str = Field("ensemble", description="surrogate with predict_std: ensemble, gp or linear")
    predictor_params: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_SURROGATE),
        description="its parameters (default: 5 gbt members of 200 trees, each its own seed)")
    acquisition: Literal["auto", "ei", "ucb", "ehvi"] = Field(
        "auto", description="auto: ei with one objective, ehvi with several; ucb: mean - kappa * std")
    xi: float = Field(0.0, ge=0, description="ei: improvement counted only beyond xi (minimise scale)")
    kappa: float = Field(1.0, ge=0, description="ucb: standard deviations of optimism")
    samples: int = Field(64, ge=4, le=4096, description="ehvi: Monte Carlo draws per candidate")
    skip_beyond_reference: bool = Field(
        True, description="with a reference and a lookup: propose no candidate whose looked-up value lies beyond the "
                          "reference (it can add no hypervolume inside it)")
    challenger: str | None = Field(
        "linear", description="a second surrogate with predict_std compared with `predictor` per objective by 3-fold "
                              "cross-validation on the told trials (Kendall tau out of fold); the better one is "
                              "fitted, chosen again each time the told trials have grown by half. null: `predictor` "
                              "always")
    generations: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="rounds of the inner evolution on the predictions; auto: one per four genes of the space, "
                            "3 to 8 (NAS-Bench-201 3, FBNet 6)")
    initial_design: Literal["random", "balanced"] = Field(
        "balanced", description="how the first `initial` are drawn: balanced (every value of every gene as evenly as "
                                "`initial` allows, a Latin-hypercube design; spaces that sample otherwise, e.g. "
                                "DARTS, get random ones) or random (uniform samples)")
    reference_from: Literal["worst", "initial_median", "sampled_median"] = Field(
        "sampled_median", description="without a reference: sampled_median (on an objective the lookup prices, the "
                                      "median of `pool` random architectures looked up; on the others, the median "
                                      "over the first `initial` evaluated architectures, the random ones; fixed "
                                      "from then on), initial_median (the first `initial` trials' median on every "
                                      "objective) or worst (no reference: nothing steered or skipped)")


class BayesOpt(PredictorGuided):
    """Bayesian optimisation: ensemble / GP surrogate per objective; EI (one objective) or EHVI (several)."""

    Params = BayesOptParams

    def __init__(self, *, predictor: str = "ensemble", predictor_params: Mapping[str, object] | None = None,
                 challenger: str | None = "linear", generations: int | str = "auto", acquisition: str = "auto",
                 xi: float = 0.0, kappa: float = 1.0, samples: int = 64,
                 skip_beyond_reference: bool = True, reference_from: str = "sampled_median",
                 initial_design: str = "balanced", **kwargs: Unpack[PredictorGuidedKwargs]) -> None:
        from hwnas.errors import ConfigError
        from hwnas.predictors import PREDICTORS, StdPredictor

        params = dict(DEFAULT_SURROGATE) if predictor_params is None else dict(predictor_params)
        super().__init__(predictor=predictor, predictor_params=params, challenger=challenger, generations=generations,
                         skip_beyond_reference=skip_beyond_reference, reference_from=reference_from,
                         initial_design=initial_design, **kwargs)
        for role, name in (("predictor", predictor), ("challenger", self.challenger)):
            surrogate = None if name is None else PREDICTORS.get(name)
            if surrogate is not None and not (isinstance(surrogate, type) and issubclass(surrogate, StdPredictor)):
                raise ConfigError(f"bayes_opt: {role} {name!r} gives no uncertainty (predict_std); "
                                  "use ensemble, gp or linear")
        if acquisition == "auto":
            acquisition = "ei" if len(self.objectives) == 1 else "ehvi"
        if acquisition in ("ei", "ucb") and len(self.objectives) > 1:
            raise ConfigError(f"bayes_opt: acquisition {acquisition!r} scores one objective; with "
                              f"{len(self.objectives)} objectives use ehvi (or auto)")
        self.acquisition = acquisition
        self.xi, self.kappa, self.samples = xi, kappa, samples

    def _propose(self, models: list[Surrogate], n: int) -> list[Architecture]:
        """At most ``n`` unevaluated architectures of highest acquisition on the fitted surrogates."""
        candidates, mean = self._inner_search(models)
        std = self._predict_std(models, candidates) if candidates else np.zeros_like(mean)
        return [candidates[i] for i in self._acquire(mean, std, n)]

    def _predict_std(self, models: list[Surrogate], archs: list[Architecture]) -> np.ndarray:
        """Per objective the surrogate's spread; 0 for a constant or a looked-up objective (known exactly)."""
        cols = [np.zeros(len(archs)) if m is None or isinstance(m, float)
                # a StdPredictor: its class was checked when the strategy was built
                else np.asarray(cast("StdPredictor", m).predict_std(self._features(self._learned_on(archs, j))))
                for j, m in enumerate(models)]
        return np.maximum(np.stack(cols, axis=1), 0.0)

    def _told(self) -> np.ndarray:
        rows = [self.objective_vector(t) for t in self.trials if t.status == "ok"]
        pts = np.stack(rows) if rows else np.zeros((0, len(self.objectives)))
        return pts[np.all(pts < 1e11, axis=1)]

    def _acquire(self, mean: np.ndarray, std: np.ndarray, n: int) -> list[int]:
        """Greedy batch (kriging believer): the best acquisition, its mean believed, again."""
        if mean.shape[0] == 0:
            return []
        told = self._told()
        chosen: list[int] = []
        free = np.ones(mean.shape[0], dtype=bool)
        if self.acquisition == "ehvi":
            ref = self._reference(told, mean)
            front = told[non_dominated(told)] if told.size else told
            draws = self.rng.standard_normal((self.samples, mean.shape[1]))  # shared across candidates
        else:
            best = float(told[:, 0].min()) if told.size else float(mean[:, 0].min())
        while len(chosen) < min(n, mean.shape[0]):
            if self.acquisition == "ucb":
                score = -(mean[:, 0] - self.kappa * std[:, 0])
            elif self.acquisition == "ei":
                score = expected_improvement(mean[:, 0], std[:, 0], best, self.xi)
            else:
                score = self._ehvi(mean, std, front, ref, draws, free)
            score = np.where(free, score, -np.inf)
            # ties (e.g. no candidate can improve): the best mean of the first objective
            i = int(np.lexsort((mean[:, 0], -score))[0])
            chosen.append(i)
            free[i] = False
            if self.acquisition != "ehvi":  # one objective: the top n by acquisition (as BANANAS)
                rest = np.lexsort((mean[:, 0], -score))
                chosen.extend(int(j) for j in rest[1 : min(n, mean.shape[0])])
                break
            front = np.vstack([front, mean[i]]) if front.size else mean[i][None, :]
            front = front[non_dominated(front)]
        return chosen

    @staticmethod
    def _reference(told: np.ndarray, mean: np.ndarray) -> np.ndarray:
        pts = told if told.shape[0] else mean
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        span = np.where(hi > lo, hi - lo, np.maximum(np.abs(hi), 1.0))
        return hi + 0.1 * span

    def _ehvi(self, mean: np.ndarray, std: np.ndarray, front: np.ndarray, ref: np.ndarray, draws: np.ndarray,
              free: np.ndarray) -> np.ndarray:
        """Monte Carlo EHVI of every free candidate on a shortlist (the rest score 0)."""
        score = np.zeros(mean.shape[0])
        # shortlist: the candidates most likely to land beyond the front (optimistic point's improvement)
        optimistic = mean - 2.0 * std
        if front.size:
            reach = hypervolume_improvement(optimistic, front, ref)
        else:
            reach = np.prod(np.maximum(ref - optimistic, 0.0), axis=1)
        order = np.argsort(-np.where(free, reach, -np.inf), kind="stable")
        short = np.array([int(i) for i in order[:EHVI_SHORTLIST] if free[i] and reach[i] > 0], dtype=int)
        if short.size:  # every shortlisted candidate's draws in one call (rows are independent: the same values)
            ys = mean[short][:, None, :] + draws[None, :, :] * std[short][:, None, :]
            gain = hypervolume_improvement(ys.reshape(-1, mean.shape[1]), front, ref)
            score[short] = gain.reshape(short.size, draws.shape[0]).mean(axis=1)
        return score


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """``E[max(best - xi - Y, 0)]`` for ``Y ~ N(mean, std)`` (minimise); ``max(best - xi - mean, 0)`` where std is 0."""
    from scipy.stats import norm

    gain = best - xi - np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    out = np.maximum(gain, 0.0)
    pos = std > 0
    z = gain[pos] / std[pos]
    out[pos] = gain[pos] * norm.cdf(z) + std[pos] * norm.pdf(z)
    return out
