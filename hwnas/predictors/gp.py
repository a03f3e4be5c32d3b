"""``gp``: a Gaussian process (scikit-learn's) with its predictive uncertainty.

Kernel: constant x RBF (one length scale, or one per feature with ``ard``) + white noise, targets
normalised; hyperparameters by maximum marginal likelihood with ``restarts`` extra starts drawn from
the predictor's generator. Saved as JSON: the training rows and the fitted kernel hyperparameters;
loading refits with the optimiser off, which reproduces the saved predictor exactly. Cost grows as the
cube of the training rows: for thousands of rows prefer ``gbt`` or ``ensemble``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Kernel

MIN_SAMPLES = 3


class GPParams(RankTargetParams):
    """Parameters of the ``gp`` predictor (with ``target: rank``, predict_std goes through the map's slope)."""

    ard: bool = Field(False, description="one RBF length scale per feature (slower; over-fits small sets)")
    restarts: int = Field(2, ge=0, le=50, description="extra random starts of the hyperparameter search")


class GPPredictor(JSONPredictor):
    """A Gaussian process (constant x RBF + noise); predict_std is its predictive standard deviation."""

    name = "gp"
    Params = GPParams
    params: GPParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        self._model: Any = None
        self._theta = np.zeros(0)
        self._X = np.zeros((0, 0))
        self._y = np.zeros(0)  # what the GP is fitted on (quantiles with target: rank)

    def _kernel(self, width: int) -> Kernel:
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

        scale = np.ones(width) if self.params.ard else 1.0
        return ConstantKernel(1.0, (1e-3, 1e3)) * RBF(scale, (1e-2, 1e3)) + WhiteKernel(1e-2, (1e-6, 1e1))

    def _build(self, theta: np.ndarray | None) -> GaussianProcessRegressor:
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor

        kernel = self._kernel(self._X.shape[1])
        if theta is not None:
            kernel = kernel.clone_with_theta(theta)
        gp = GaussianProcessRegressor(
            kernel, normalize_y=True, optimizer="fmin_l_bfgs_b" if theta is None else None,
            n_restarts_optimizer=self.params.restarts, random_state=self.seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached is a fit, not an error
            return gp.fit(self._X, self._y)

    def fit(self, X: np.ndarray, y: np.ndarray) -> GPPredictor:
        self._X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        self._y = self._fit_targets(y)
        self._model = self._build(None)
        self._theta = np.asarray(self._model.kernel_.theta, dtype=float)
        self.n_features = self._X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        mean = np.asarray(self._model.predict(X), dtype=float)
        return self._to_target_units(mean)

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        mean, std = self._model.predict(X, return_std=True)
        return self._std_to_target_units(np.asarray(mean, dtype=float), std)

    def _state(self) -> dict[str, object]:
        return {"X": pack_array(self._X), "y": pack_array(self._y), "theta": pack_array(self._theta)}

    def _from_state(self, state: dict[str, Any]) -> None:
        self._X = unpack_array(state["X"], what="gp training rows").astype(float)
        self._y = unpack_array(state["y"], what="gp training targets").astype(float)
        theta = unpack_array(state["theta"], what="gp kernel hyperparameters").astype(float)
        if self._X.ndim != 2 or self._X.shape[1] != self.n_features or self._y.shape != (self._X.shape[0],):
            raise ValueError(f"gp training rows {self._X.shape} / targets {self._y.shape} do not match "
                             f"{self.n_features} features")
        expected = self._kernel(self._X.shape[1]).theta.shape
        if theta.shape != expected:
            raise ValueError(f"gp kernel has {theta.shape} hyperparameters, this kernel needs {expected}")
        self._theta = theta
        self._model = self._build(theta)
