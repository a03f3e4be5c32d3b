"""The Predictor protocol: sklearn-shaped accuracy (or any metric) predictors over encoded architectures.

A predictor learns ``y`` (one metric value per architecture) from ``X`` (one row per architecture,
``space.encode(arch)``). It saves itself as JSON or safetensors, never pickle, so a saved predictor
is data another process or version can read, not code it must trust.

Registered predictors are built as ``PREDICTORS.create(name, params, rng=generator)``: keyword-only
constructors that receive their validated ``Params`` and a seeded ``np.random.Generator`` (a
predictor that draws nothing ignores it). Only numpy is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from hwnas.registry import Registry

if TYPE_CHECKING:
    from typing_extensions import Self

PREDICTORS: Registry[Any] = Registry(kind="predictor", entry_point_group="hwnas.predictors")


@runtime_checkable
class Predictor(Protocol):
    """Learns a metric from encoded architectures (``X``: architectures x features, ``y``: one value each).

    Fitting is deterministic given the generator the predictor was built with; a fitted predictor
    refuses ``X`` whose width differs from the one it was fitted on, with a ``ValueError`` that
    names the expected width.
    """

    def fit(self, X: np.ndarray, y: np.ndarray) -> Self:
        """Fit on ``X`` (2-D) and ``y`` (1-D, same length); returns the predictor itself."""
        ...

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted values, a finite 1-D array with one entry per row of ``X``."""
        ...

    def save(self, path: str | Path) -> None:
        """Write the fitted predictor to one file at ``path``: JSON or safetensors, never pickle."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """A predictor read back from :meth:`save`'s file; it predicts exactly as the saved one did."""
        ...


@runtime_checkable
class UncertainPredictor(Predictor, Protocol):
    """A predictor that also says how sure it is (ensembles, Gaussian processes, Bayesian linear models)."""

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        """Predictive standard deviation, a finite non-negative 1-D array with one entry per row of ``X``."""
        ...


class PredictorParams(BaseModel):
    """Parameters common to every predictor; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def as_feature_matrix(X: Any, *, n_features: int | None = None, owner: str = "predictor") -> np.ndarray:
    """``X`` as a finite 2-D float array of the expected width, or one ValueError that says what is wrong.

    Args:
        X: Encoded architectures, one row each.
        n_features: The width the predictor was fitted on (None before fitting).
        owner: Who is asking, for the message.
    """
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: X must be numeric: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{owner}: X must be 2-D (architectures x features), got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{owner}: expected {n_features} features per row (the fitted width), got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: X contains NaN or inf")
    return arr


def as_target_vector(y: Any, *, n_rows: int, owner: str = "predictor") -> np.ndarray:
    """``y`` as a finite 1-D float array with ``n_rows`` entries, or one ValueError.

    Args:
        y: One target value per architecture.
        n_rows: Number of rows of the matching ``X``.
        owner: Who is asking, for the message.
    """
    arr = np.asarray(y, dtype=float)
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise ValueError(f"{owner}: y must be 1-D with one value per row of X ({n_rows}), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: y contains NaN or inf")
    return arr
