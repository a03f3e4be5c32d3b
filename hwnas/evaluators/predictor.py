"""The ``predictor`` evaluator: a metric predicted by a saved accuracy predictor (``nas predictor fit``).

.. code-block:: yaml

    evaluators:
      - name: predictor
        params:
          file: predictors/nb201_c10_gbt.json     # relative to the working directory
          metric: top1_pred                       # default: the metric the predictor was fitted on
          refit_every: 20                         # optional: refit on the run's own trials every 20
          refit_on: top1                          # ... of their top1 (default: the file's target)

Cheap (microseconds per architecture, batched), so it runs with the other cheap evaluators before any
constraint filters. The file must have been fitted on the experiment's space with features of the same
width; otherwise the experiment does not build, and the message says which.

With ``refit_every: k`` the evaluator is an :class:`~hwnas.evaluation.Observer`: the runner hands it every
finished batch, and each time ``k`` more trials carry a finite ``refit_on`` value (measured by another
evaluator, e.g. ``train``), a predictor of the file's kind and parameters is fitted anew on all of them (the
run's own trials only; the file's training data is not kept in the file) with the experiment's seed. Until the
first refit the file answers. A resumed run replays its journal through it, so it answers as before the stop.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint

if TYPE_CHECKING:
    from hwnas.evaluators.zero_cost import ZeroCostEvaluator
    from hwnas.objectives import Trial

log = logging.getLogger(__name__)


class PredictorEvalParams(EvaluatorParams):
    """Parameters of the ``predictor`` evaluator."""

    file: ResolvedPath = Field(description="a predictor saved by `nas predictor fit` (JSON)")
    metric: str | None = Field(None, min_length=1,
                               description="metric name it provides (default: the target it was fitted on)")
    cheap: bool = Field(True, description="runs before constraints filter (it costs microseconds)")
    refit_every: int | None = Field(None, ge=1, description="refit on the run's trials every k new targets "
                                                            "(default: never; the file answers throughout)")
    refit_on: str | None = Field(None, min_length=1,
                                 description="refit target metric (default: the target the file was fitted on)")


class PredictorEvaluator:
    """A metric from a saved accuracy predictor (gbt, mlp, gp, linear, ensemble), on the space's features."""

    Params = PredictorEvalParams

    def __init__(self, *, context: EvalContext, file: str, metric: str | None = None, cheap: bool = True,
                 refit_every: int | None = None, refit_on: str | None = None) -> None:
        from hwnas.predictors import load_predictor
        from hwnas.predictors.fit import check_compatible

        self.space = context.space
        self.path = Path(file)
        if not self.path.is_file():
            raise ConfigError(f"predictor: file {self.path} does not exist (a relative path is taken from the "
                              f"working directory, {Path.cwd()})")
        try:
            self.predictor = load_predictor(self.path)
        except ValueError as exc:
            raise ConfigError(f"predictor: {exc}") from None
        self.features, _ = check_compatible(self.predictor, self.space, source=f"predictor: {self.path}")
        target = self.predictor.meta.get("target")
        named = metric or (target if isinstance(target, str) and target else None)
        if not named:
            raise ConfigError(f"predictor: {self.path} records no target metric; set params.metric")
        self.metric: str = named
        self.provides: tuple[str, ...] = (self.metric,)
        self.cheap = bool(cheap)
        self._zc = self._zero_cost(context)
        self._sha = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]
        self._file_validation = self.predictor.meta.get("validation")
        self.refit_every = refit_every
        self.refit_on = refit_on or (target if isinstance(target, str) and target else None)
        self.seed = context.seed
        if refit_every is not None:
            if not self.cheap:
                raise ConfigError("predictor: refit_every needs cheap: true (it learns in the driver, from the "
                                  "journal's trials)")
            if not self.refit_on:
                raise ConfigError(f"predictor: {self.path} records no target metric; set params.refit_on")
            if self.refit_on == self.metric:
                raise ConfigError(f"predictor: refit_on and metric are both {self.metric!r}; the prediction needs a "
                                  "name of its own (e.g. metric: top1_pred) beside the measured target")
        # arch id -> (arch, refit target, the metrics its features read), in trial order
        self._rows: dict[str, tuple[Architecture, float, Metrics]] = {}
        self._scored: dict[str, Metrics] = {}  # features' metrics computed by evaluate(), until observed
        self._fitted_at = 0
        self.refits = 0

    def _zero_cost(self, context: EvalContext) -> ZeroCostEvaluator | None:
        """The zero-cost evaluator that computes the file's ``metric:zc_*`` features (None without such parts)."""
        from typing import get_args

        from hwnas.evaluators.zero_cost import Proxy, ZeroCostEvaluator
        from hwnas.predictors import metric_features

        names = metric_features(self.features)
        if not names:
            return None
        known = get_args(Proxy)
        bad = [m for m in names if not (m.startswith("zc_") and m[3:] in known)]
        if bad:
            raise ConfigError(f"predictor: {self.path} reads measured metric(s) {', '.join(bad)} as features; in a run "
                              f"it can compute only zero-cost proxies ({', '.join('zc_' + p for p in known)})")
        return ZeroCostEvaluator(context=context, proxies=[m[3:] for m in names])

    def _measured(self, archs: Sequence[Architecture],
                  given: Sequence[Mapping[str, float]] | None = None) -> list[Metrics | BaseException]:
        """The metrics the features read, per architecture (taken from ``given`` where there, else computed)."""
        if self._zc is None:
            return [{} for _ in archs]
        out: list[Metrics | BaseException] = []
        for i, arch in enumerate(archs):
            have = given[i] if given is not None else {}
            if all(m in have for m in self._zc.provides):
                out.append(dict(have))
                continue
            try:
                out.append(self._zc.score_one(arch))
            except Exception as exc:  # reported for this architecture
                out.append(exc)
        return out

    def fingerprint(self) -> str:
        """Changes with the predictor file's content and the metric name."""
        zc = self._zc.fingerprint() if self._zc is not None else None
        return stable_fingerprint("predictor", {"file_sha256": self._sha, "metric": self.metric, "zero_cost": zc,
                                                "refit_every": self.refit_every, "refit_on": self.refit_on,
                                                "seed": self.seed if self.refit_every else None})

    def observe(self, trials: Sequence[Trial]) -> None:
        """Collect finite ``refit_on`` values; refit once ``refit_every`` more have come in."""
        refit_on = self.refit_on
        if self.refit_every is None or refit_on is None:  # refit_every is refused without a refit_on
            return
        for t in trials:
            v = t.metrics.get(refit_on) if t.status != "failed" else None
            if v is None or not np.isfinite(v) or t.arch.arch_id in self._rows:
                continue
            # the features' metrics: computed once here (or by evaluate() just before), never again at a refit
            cached = self._scored.pop(t.arch.arch_id, None)
            m = cached if cached is not None else self._measured([t.arch], [t.metrics])[0]
            if isinstance(m, dict):
                self._rows[t.arch.arch_id] = (t.arch, float(v), m)
        self._scored.clear()  # what was scored and not told (over budget) is not kept
        if len(self._rows) - self._fitted_at >= self.refit_every:
            self._refit()

    def _refit(self) -> None:
        from hwnas.predictors import PREDICTORS, featurize

        rows = list(self._rows.values())
        archs = [a for a, _, _ in rows]
        y = np.array([v for _, v, _ in rows])
        self._fitted_at = len(self._rows)
        if y.size == 0 or np.ptp(y) == 0:
            log.info("predictor: %d %s value(s), none differing; keeping the current predictor", y.size, self.refit_on)
            return
        kind = type(self.predictor).name
        rng = np.random.default_rng([self.seed, self.refits])
        try:
            fresh = PREDICTORS.create(kind, self.predictor.params.model_dump(), rng=rng)
            fresh.fit(featurize(self.space, archs, self.features, [m for _, _, m in rows]), y)
        except ValueError as exc:  # too few rows for this kind yet: keep the current one, try at the next k
            log.info("predictor: refit on %d trials postponed: %s", y.size, exc)
            return
        fresh.meta = {**self.predictor.meta, "refit_on": self.refit_on, "n_train": int(y.size), "validation": None}
        self.predictor = fresh
        self.refits += 1
        log.info("predictor: refitted %s on %d trials' %s (refit %d)", kind, y.size, self.refit_on, self.refits)

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        from hwnas.predictors import featurize

        if not archs:
            return []
        measured = self._measured(archs)
        ok = [i for i, m in enumerate(measured) if isinstance(m, dict)]
        if self.refit_every is not None and self._zc is not None:
            self._scored.update((archs[i].arch_id, measured[i]) for i in ok)  # type: ignore[misc]
        out: list[Metrics | BaseException] = list(measured)
        if ok:
            X = featurize(self.space, [archs[i] for i in ok], self.features, [measured[i] for i in ok])  # type: ignore[misc]
            for i, v in zip(ok, np.asarray(self.predictor.predict(X), dtype=float)):
                out[i] = {self.metric: float(v)}
        return out

    def describe(self) -> dict[str, object]:
        """What the predictor was judged by (for reports)."""
        return {"file": str(self.path), "metric": self.metric, "file_validation": self._file_validation,
                "refit_every": self.refit_every, "refit_on": self.refit_on, "refits": self.refits}
