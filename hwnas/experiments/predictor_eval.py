"""The ``predictor`` evaluator: a metric predicted by a saved accuracy predictor (``nas predictor fit``).

.. code-block:: yaml

    evaluators:
      - name: predictor
        params:
          file: predictors/nb201_c10_gbt.json     # relative to the working directory
          metric: top1_pred                       # default: the metric the predictor was fitted on

Cheap (microseconds per architecture, batched), so it runs with the other cheap evaluators before any
constraint filters. The file must have been fitted on the experiment's space with features of the same
width; otherwise the experiment does not build, and the message says which.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.evaluation import EVALUATORS, EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint


class PredictorEvalParams(EvaluatorParams):
    """Parameters of the ``predictor`` evaluator."""

    file: ResolvedPath = Field(description="a predictor saved by `nas predictor fit` (JSON)")
    metric: str | None = Field(None, min_length=1,
                               description="metric name it provides (default: the target it was fitted on)")
    cheap: bool = Field(True, description="runs before constraints filter (it costs microseconds)")


@EVALUATORS.register("predictor")
class PredictorEvaluator:
    """A metric from a saved accuracy predictor (gbt, mlp, gp, ensemble), on the space's features."""

    Params = PredictorEvalParams

    def __init__(self, *, context: EvalContext, file: str, metric: str | None = None, cheap: bool = True) -> None:
        from hwnas.experiments.predictor_fit import check_compatible
        from hwnas.predictors import load_predictor

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
        self.metric = metric or (target if isinstance(target, str) and target else None)
        if not self.metric:
            raise ConfigError(f"predictor: {self.path} records no target metric; set params.metric")
        self.provides: tuple[str, ...] = (self.metric,)
        self.cheap = bool(cheap)
        self._sha = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    def fingerprint(self) -> str:
        """Changes with the predictor file's content and the metric name."""
        return stable_fingerprint("predictor", {"file_sha256": self._sha, "metric": self.metric})

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics]:
        from hwnas.predictors import featurize

        if not archs:
            return []
        X = featurize(self.space, list(archs), self.features)
        pred = np.asarray(self.predictor.predict(X), dtype=float)
        return [{self.metric: float(v)} for v in pred]

    def describe(self) -> dict[str, Any]:
        """What the predictor was judged by (for reports)."""
        return {"file": str(self.path), "metric": self.metric, "validation": self.predictor.meta.get("validation")}
