"""``linear``: Bayesian linear regression over the features (scikit-learn's ``BayesianRidge``), saved as JSON.

The weights' prior and the noise are fitted by evidence maximisation (MacKay), so the model has no regularisation
strength to tune; the predictive standard deviation is the posterior's, noise included (``sqrt(1 / alpha + x' Sigma
x)``, ``x`` centred on the training rows' mean). Where a metric is a sum of per-gene contributions (a latency lookup
table, FLOPs and parameters over one-hot features), the model is exact once it has seen about as many architectures
as features; where it is not (accuracy), it is a smooth first-order baseline that extrapolates, which trees cannot.
The fitted state is the weights, the intercept, the posterior covariance and the noise precision, and a loaded
predictor predicts exactly as the fitted one did (tested equal to scikit-learn's own ``predict``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from hwnas.predictors.base import (
    JSONPredictor,
    RankTargetParams,
    as_feature_matrix,
    check_fit_data,
    pack_array,
    unpack_array,
)

#: Rows needed before a fit: the evidence maximisation needs a few residual degrees to estimate the noise.
MIN_SAMPLES = 4


class LinearParams(RankTargetParams):
    """Parameters of the ``linear`` predictor (scikit-learn's BayesianRidge)."""

    target: Literal["rank", "raw"] = Field(
        "raw", description="raw: the values (keeps a sum of per-gene contributions exact); rank: their quantiles")
    max_iter: int = Field(300, ge=1, le=100_000, description="evidence maximisation iterations at most")


class LinearPredictor(JSONPredictor):
    """Bayesian linear regression (scikit-learn's BayesianRidge); predict_std is its posterior predictive spread."""

    name = "linear"
    Params = LinearParams
    params: LinearParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        self._coef = np.zeros(0)
        self._intercept = 0.0
        self._sigma = np.zeros((0, 0))
        self._offset = np.zeros(0)  # the training rows' mean (the spread is about it)
        self._noise_precision = 1.0

    def fit(self, X: np.ndarray, y: np.ndarray) -> LinearPredictor:
        from sklearn.linear_model import BayesianRidge

        X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        target = self._fit_targets(y)
        model = BayesianRidge(max_iter=self.params.max_iter).fit(X, target)
        self._coef = np.asarray(model.coef_, dtype=float)
        self._intercept = float(model.intercept_)
        self._sigma = np.asarray(model.sigma_, dtype=float)
        self._offset = np.asarray(model.X_offset_, dtype=float)
        self._noise_precision = float(model.alpha_)
        self.n_features = X.shape[1]
        return self

    def _mean(self, X: np.ndarray) -> np.ndarray:
        out: np.ndarray = X @ self._coef + self._intercept
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        return self._to_target_units(self._mean(X))

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        Xc = X - self._offset
        std = np.sqrt(np.maximum(((Xc @ self._sigma) * Xc).sum(axis=1), 0.0) + 1.0 / self._noise_precision)
        return self._std_to_target_units(self._mean(X), std)

    def _state(self) -> dict[str, object]:
        return {"coef": pack_array(self._coef), "intercept": self._intercept, "sigma": pack_array(self._sigma),
                "offset": pack_array(self._offset), "noise_precision": self._noise_precision}

    def _from_state(self, state: dict[str, Any]) -> None:
        coef = unpack_array(state["coef"], what="linear weights").astype(float)
        sigma = unpack_array(state["sigma"], what="linear posterior covariance").astype(float)
        offset = unpack_array(state["offset"], what="linear training mean").astype(float)
        width = self.n_features
        if coef.shape != (width,) or offset.shape != (width,) or sigma.shape != (width, width):
            raise ValueError(f"linear weights {coef.shape} / mean {offset.shape} / covariance {sigma.shape} do not "
                             f"match {width} features")
        precision = float(state["noise_precision"])
        if not (np.isfinite(precision) and precision > 0):
            raise ValueError(f"linear noise precision {precision!r} is not a positive number")
        self._coef, self._sigma, self._offset, self._noise_precision = coef, sigma, offset, precision
        self._intercept = float(state["intercept"])
