"""Learned whole-architecture latency predictors, and few-shot transfer to a new device.

Two predictors, both sklearn-shaped (``fit(X, y)``, ``predict(X)``) over encoded architectures
(``X``: one row per architecture, e.g. ``space.encode(arch)``; ``y``: latency in ms), both saved as
JSON (never pickle):

- :class:`LatencyRidgePredictor`: ridge regression of log-latency on the encoding, the ridge
  strength chosen per fit by exact leave-one-out error. Needs many measured architectures.
- :class:`FewShotLatencyPredictor`: a new device from 10-100 measurements. Step one
  (:meth:`~FewShotLatencyPredictor.fit_sources`) learns, once, an encoding -> log-latency model of
  every *known* device from its full latency table; step two (:meth:`~FewShotLatencyPredictor.fit`)
  explains the new device's few log-latencies as a non-negative combination (plus an offset) of
  the known devices' standardised model outputs. Smoothing the known devices through the encoding
  removes their measurement noise, and the non-negativity keeps ten samples from over-fitting
  twenty weights. Models of the target's own samples (of the mix's residual, and on their own,
  blended in by cross-validation) cover a device that ranks networks unlike every known one.

Only numpy and scipy are used; nothing here is stochastic (seeds matter only where samples are
drawn, see HELP's protocol in ``benchmarks/help_protocol.py``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MIN_FIT_SAMPLES = 3
#: Fewest target samples the residual model is tried on (leave-one-out needs a few to mean anything).
MIN_RESIDUAL_SAMPLES = 8
#: Folds of the cross-validation that weighs the transfer against the target's own model (fewer with fewer samples).
BLEND_FOLDS = 10
FALLBACK_WEIGHT = 1e-3  # relative slope of the no-evidence fallback of FewShotLatencyPredictor.fit
DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-3, 3, 13))


# --------------------------------------------------------------------------------------------
# input checking


def _as_features(X: object, *, name: str = "X") -> np.ndarray:
    """``X`` as a finite 2-D float array, or one clear ValueError."""
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (architectures x features), got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(f"{name} contains NaN or inf in {rows.size} row(s) (first row {int(rows[0])})")
    return arr


def _as_latency(y: object, *, name: str = "y") -> np.ndarray:
    """Latencies (ms) as a 1-D array of finite positive floats, or one clear ValueError."""
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric latencies in ms: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one latency per architecture), got shape {arr.shape}")
    nan = np.isnan(arr)
    if nan.any():
        first = int(np.nonzero(nan)[0][0])
        raise ValueError(f"{name} contains NaN at {int(nan.sum())} position(s) (first index {first})")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        first = int(np.nonzero(bad)[0][0])
        raise ValueError(f"{name} must be finite positive latencies in ms; index {first} is {arr[first]!r}")
    return arr


def _check_fit_inputs(X: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    X_arr = _as_features(X)
    y_arr = _as_latency(y)
    if X_arr.shape[0] != y_arr.shape[0]:
        raise ValueError(f"X has {X_arr.shape[0]} rows but y has {y_arr.shape[0]} values")
    if y_arr.shape[0] < MIN_FIT_SAMPLES:
        raise ValueError(f"need at least {MIN_FIT_SAMPLES} measured architectures to fit, got {y_arr.shape[0]}")
    return X_arr, y_arr


def _check_width(X: np.ndarray, n_features: int, owner: str) -> None:
    if X.shape[1] != n_features:
        raise ValueError(f"{owner} was fitted on {n_features} features but X has {X.shape[1]}")


# --------------------------------------------------------------------------------------------
# numerical building blocks


def ridge_fit(X: np.ndarray, Y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge regression with an unpenalised intercept, for one or many targets.

    Args:
        X: Features, shape (n, d).
        Y: Targets, shape (n,) or (n, m).
        alpha: Ridge strength (> 0).

    Returns:
        ``(coef, intercept)``: coef of shape (d,) or (d, m), intercept a scalar array or shape (m,).
    """
    x_mean = X.mean(axis=0)
    y_mean = Y.mean(axis=0)
    Xc = X - x_mean
    gram = Xc.T @ Xc + alpha * np.eye(X.shape[1])
    coef = np.linalg.solve(gram, Xc.T @ (Y - y_mean))
    return coef, y_mean - x_mean @ coef


def ridge_loo(X: np.ndarray, y: np.ndarray, alphas: Sequence[float]) -> tuple[float, np.ndarray, float, float]:
    """The alpha of least exact leave-one-out error for intercept + ridge, its fit (one decomposition), and that error.

    With fewer samples than features (a few-shot fit on unit counts: tens of networks, a thousand columns)
    the decomposition is of the n x n Gram matrix, not an SVD of X: the same fit, a fraction of the time.

    Args:
        X: Features, shape (n, d).
        y: Target, shape (n,).
        alphas: Ridge strengths to try.

    Returns:
        ``(alpha, coef, intercept, leave-one-out mean squared error)``.
    """
    n = y.shape[0]
    x_mean = X.mean(axis=0)
    y_mean = float(y.mean())
    Xc = X - x_mean
    if n < Xc.shape[1]:  # Xc = U diag(s) Vt with U, s from the eigendecomposition of Xc Xc^T
        eigvals, U = np.linalg.eigh(Xc @ Xc.T)
        s2 = np.clip(eigvals, 0.0, None)
    else:
        U, s, _ = np.linalg.svd(Xc, full_matrices=False)
        s2 = s**2
    Uty = U.T @ (y - y_mean)
    U2 = U**2
    best_err, best_alpha = math.inf, float(alphas[0])
    for alpha in alphas:
        shrink = s2 / (s2 + alpha)
        fitted = U @ (shrink * Uty) + y_mean
        leverage = U2 @ shrink + 1.0 / n
        resid = (y - fitted) / np.clip(1.0 - leverage, 1e-12, None)
        err = float(np.mean(resid**2))
        if err < best_err:
            best_err, best_alpha = err, float(alpha)
    coef = Xc.T @ (U @ (Uty / (s2 + best_alpha)))  # = V diag(s / (s^2 + alpha)) U^T y
    return best_alpha, coef, y_mean - float(x_mean @ coef), best_err


def nonnegative_combination(F: np.ndarray, t: np.ndarray, *, warn: bool = True) -> tuple[np.ndarray, float]:
    """Least squares ``t ~ F @ w + b`` with ``w >= 0`` and a free intercept ``b``.

    When no column of ``F`` rises with ``t`` (every weight would be 0), there is no evidence to
    rank by: the result then predicts (almost exactly) the mean of ``t``, ordered by the average
    of the columns, and a warning is logged.

    Args:
        F: Features (e.g. standardised known-device log-latencies), shape (n, m).
        t: Target, shape (n,).
        warn: Log the fallback (off inside cross-validation folds).

    Returns:
        ``(w, b)``.
    """
    from scipy.optimize import nnls

    n, m = F.shape
    # A free intercept is the difference of two non-negative ones.
    design = np.column_stack([F, np.ones(n), -np.ones(n)])
    solution, _ = nnls(design, t)
    weights, intercept = solution[:-2], float(solution[-2] - solution[-1])
    if not np.any(weights > 0):
        log = logger.warning if warn else logger.debug
        log(
            "no known device's latency rises with the new device's on these %d samples: "
            "predicting their mean, ranked by the known devices' average", n
        )
        weights = np.full(m, FALLBACK_WEIGHT * (float(t.std()) or 1.0) / m)
        intercept = float(t.mean() - (F @ weights).mean())
    return weights, intercept


def _standardize_stats(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = A.mean(axis=0)
    std = A.std(axis=0)
    return mean, np.where(std > 0, std, 1.0)


# --------------------------------------------------------------------------------------------
# JSON persistence


def _write_json(path: str | Path, payload: Mapping[str, object]) -> None:
    Path(path).write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")


def _read_json(path: str | Path, kind: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON predictor file ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected a {kind} file, found {found!r}")
    if data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format version {data.get('format_version')!r} is not {FORMAT_VERSION}")
    return data


# --------------------------------------------------------------------------------------------
# predictors


class LatencyRidgePredictor:
    """Whole-architecture latency from its encoding: ridge regression on log-latency.

    The ridge strength is chosen at each :meth:`fit` among ``alphas`` by exact leave-one-out error,
    so the same object serves 30 and 3,000 measured architectures.

    Args:
        alphas: Candidate ridge strengths (all > 0).
    """

    kind = "LatencyRidgePredictor"

    def __init__(self, *, alphas: Sequence[float] = DEFAULT_ALPHAS) -> None:
        alphas = tuple(float(a) for a in alphas)
        if not alphas or any(not (a > 0 and math.isfinite(a)) for a in alphas):
            raise ValueError(f"alphas must be a non-empty sequence of positive numbers, got {alphas!r}")
        self.alphas = alphas
        self.alpha_: float | None = None
        self.coef_: np.ndarray | None = None
        self.intercept_: float | None = None

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` (or :meth:`load`) has run."""
        return self.coef_ is not None

    def fit(self, X: object, y: object) -> LatencyRidgePredictor:
        """Fit on measured architectures.

        Args:
            X: Encoded architectures, shape (n, d).
            y: Their measured latencies in ms, shape (n,).

        Returns:
            self.
        """
        X_arr, y_arr = _check_fit_inputs(X, y)
        self.alpha_, self.coef_, self.intercept_, _ = ridge_loo(X_arr, np.log(y_arr), self.alphas)
        logger.debug("ridge latency predictor: n=%d d=%d alpha=%g", *X_arr.shape, self.alpha_)
        return self

    def predict(self, X: object) -> np.ndarray:
        """Predicted latencies in ms, shape (n,)."""
        if self.coef_ is None or self.intercept_ is None:
            raise ValueError("LatencyRidgePredictor is not fitted: call fit() or load() first")
        X_arr = _as_features(X)
        _check_width(X_arr, self.coef_.shape[0], "LatencyRidgePredictor")
        return np.exp(X_arr @ self.coef_ + self.intercept_)

    def to_dict(self) -> dict[str, object]:
        """JSON-serialisable state (floats round-trip exactly)."""
        if self.coef_ is None:
            raise ValueError("LatencyRidgePredictor is not fitted: nothing to save")
        return {
            "kind": self.kind,
            "format_version": FORMAT_VERSION,
            "alphas": list(self.alphas),
            "alpha": self.alpha_,
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyRidgePredictor:
        """Inverse of :meth:`to_dict`."""
        obj = cls(alphas=data["alphas"])
        obj.alpha_ = float(data["alpha"])
        obj.coef_ = np.asarray(data["coef"], dtype=float)
        obj.intercept_ = float(data["intercept"])
        return obj

    def save(self, path: str | Path) -> None:
        """Write the fitted predictor as JSON."""
        _write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LatencyRidgePredictor:
        """Read a predictor written by :meth:`save`."""
        return cls.from_dict(_read_json(path, cls.kind))


class FewShotLatencyPredictor:
    """Latency on a new device from a few measurements, transferred from known devices.

    Usage: ``fit_sources(X_all, known_latency_ms, names)`` once (the known devices' tables), then
    ``fit(X_k, y_k)`` with the new device's k measured architectures, then ``predict(X)``.

    Each known device d gets a ridge model ``s_d(x)`` of its log-latency on the encoding ``x``,
    standardised over the architectures given to :meth:`fit_sources`. The new device's
    log-latency is modelled as ``b + sum_d w_d * s_d(x)`` with ``w_d >= 0``, fitted by
    non-negative least squares on the k samples.

    With ``residual`` (the default), what the mix leaves unexplained on the k samples is then modelled
    from the target's own samples: a ridge model of the residual log-latency on the encoding, its strength
    chosen by exact leave-one-out error, kept only where its leave-one-out error is below the residual's
    own mean square (a device unlike every known one gains most; with few samples it is usually dropped).

    With ``own`` (the default), a third model ignores the known devices: ridge on the target's own
    samples alone. The prediction is ``w * transfer + (1 - w) * own`` in log-latency, ``w`` in [0, 1]
    chosen by least squares on out-of-fold predictions of both (:data:`BLEND_FOLDS`-fold
    cross-validation over the k samples, both models refitted in every fold), so each is weighted by
    how well it explains samples it did not see; the own model is used only where its out-of-fold
    squared error is lower than the transfer's by more than one standard error (of the per-sample
    differences). Where the new device ranks networks like a known one, the own model is left out;
    where it ranks them unlike every known device (HW-NAS-Bench's edge GPU among its FBNet devices),
    the transfer explains little and ``w`` falls towards 0.

    Args:
        source_alpha: Ridge strength of the per-device encoding models.
        residual: Model the target's residual from its own samples.
        own: Blend in a model of the target's own samples, weighted by cross-validation.
    """

    kind = "FewShotLatencyPredictor"

    def __init__(self, *, source_alpha: float = 1.0, residual: bool = True, own: bool = True) -> None:
        if not (source_alpha > 0 and math.isfinite(source_alpha)):
            raise ValueError(f"source_alpha must be a positive number, got {source_alpha!r}")
        self.source_alpha = float(source_alpha)
        self.residual = bool(residual)
        self.own = bool(own)
        self.residual_coef_: np.ndarray | None = None
        self.residual_intercept_: float = 0.0
        self.own_coef_: np.ndarray | None = None
        self.own_intercept_: float = 0.0
        #: Weight of the transfer in the blend with the own model (1: transfer alone).
        self.blend_: float = 1.0
        self.source_names_: tuple[str, ...] | None = None
        self.source_coef_: np.ndarray | None = None
        self.source_intercept_: np.ndarray | None = None
        self.source_mean_: np.ndarray | None = None
        self.source_std_: np.ndarray | None = None
        self.weights_: np.ndarray | None = None
        self.intercept_: float | None = None

    # -- step 1: the known devices --------------------------------------------------------------

    def fit_sources(
        self, X: object, source_latency_ms: object, source_names: Sequence[str] | None = None
    ) -> FewShotLatencyPredictor:
        """Learn the known devices' encoding -> log-latency models (clears any target fit).

        Args:
            X: Encoded architectures measured on every known device, shape (n, d).
            source_latency_ms: Their latencies, shape (n, m): one column per known device.
            source_names: The m device names (default ``source0``...).

        Returns:
            self.
        """
        X_arr = _as_features(X)
        L = np.asarray(source_latency_ms, dtype=float)
        if L.ndim != 2:
            raise ValueError(f"source_latency_ms must be 2-D (architectures x devices), got shape {L.shape}")
        if L.shape[0] != X_arr.shape[0]:
            raise ValueError(f"X has {X_arr.shape[0]} rows but source_latency_ms has {L.shape[0]}")
        if L.shape[1] < 1:
            raise ValueError("source_latency_ms has no device columns")
        if X_arr.shape[0] < MIN_FIT_SAMPLES:
            raise ValueError(
                f"need at least {MIN_FIT_SAMPLES} architectures measured on the known devices, got {X_arr.shape[0]}"
            )
        for j in range(L.shape[1]):
            _as_latency(L[:, j], name=f"source_latency_ms column {j}")
        names = tuple(source_names) if source_names is not None else tuple(f"source{j}" for j in range(L.shape[1]))
        if len(names) != L.shape[1]:
            raise ValueError(f"{len(names)} source names for {L.shape[1]} device columns")
        if len(set(names)) != len(names):
            raise ValueError(f"source names must be unique, got {names!r}")
        coef, intercept = ridge_fit(X_arr, np.log(L), self.source_alpha)
        smoothed = X_arr @ coef + intercept
        self.source_mean_, self.source_std_ = _standardize_stats(smoothed)
        self.source_names_ = names
        self.source_coef_, self.source_intercept_ = coef, np.asarray(intercept, dtype=float)
        self.weights_, self.intercept_ = None, None
        self.residual_coef_, self.own_coef_, self.blend_ = None, None, 1.0
        logger.debug("few-shot predictor: %d source devices from %d architectures", len(names), X_arr.shape[0])
        return self

    def source_features(self, X: object) -> np.ndarray:
        """Standardised known-device model outputs for encoded architectures, shape (n, m)."""
        if self.source_coef_ is None or self.source_intercept_ is None:
            raise ValueError("FewShotLatencyPredictor has no source devices: call fit_sources() or load() first")
        assert self.source_mean_ is not None and self.source_std_ is not None
        X_arr = _as_features(X)
        _check_width(X_arr, self.source_coef_.shape[0], "FewShotLatencyPredictor")
        return (X_arr @ self.source_coef_ + self.source_intercept_ - self.source_mean_) / self.source_std_

    # -- step 2: the new device -----------------------------------------------------------------

    def fit(self, X: object, y: object) -> FewShotLatencyPredictor:
        """Fit the new device from its k measured architectures.

        Args:
            X: Encoded architectures measured on the new device, shape (k, d).
            y: Their latencies in ms, shape (k,).

        Returns:
            self.
        """
        X_arr, y_arr = _check_fit_inputs(X, y)
        t = np.log(y_arr)
        self.weights_, self.intercept_, self.residual_coef_, self.residual_intercept_ = self._fit_transfer(X_arr, t)
        self.own_coef_, self.own_intercept_, self.blend_ = None, 0.0, 1.0
        n = len(t)
        if self.own and n >= MIN_RESIDUAL_SAMPLES:
            folds = np.arange(n) % min(n, BLEND_FOLDS)
            transfer_oof, own_oof = np.empty(n), np.empty(n)
            for fold in np.unique(folds):
                test, train = folds == fold, folds != fold
                fitted = self._fit_transfer(X_arr[train], t[train], warn=False)
                transfer_oof[test] = self._transfer_log(X_arr[test], *fitted)
                _, coef, intercept, _ = ridge_loo(X_arr[train], t[train], DEFAULT_ALPHAS)
                own_oof[test] = X_arr[test] @ coef + intercept
            gap = transfer_oof - own_oof
            spread = float(gap @ gap)
            blend = float(np.clip((t - own_oof) @ gap / spread, 0.0, 1.0)) if spread > 0 else 1.0
            worse = (t - own_oof) ** 2 - (t - transfer_oof) ** 2  # per sample: how much worse the own model is
            if blend < 1.0 and worse.mean() + worse.std(ddof=1) / math.sqrt(n) < 0:
                _, self.own_coef_, self.own_intercept_, _ = ridge_loo(X_arr, t, DEFAULT_ALPHAS)
                self.blend_ = blend
        return self

    def _fit_transfer(
        self, X: np.ndarray, t: np.ndarray, *, warn: bool = True
    ) -> tuple[np.ndarray, float, np.ndarray | None, float]:
        """The mix of known devices (and its residual model) on log-latencies ``t``."""
        F = self.source_features(X)
        weights, intercept = nonnegative_combination(F, t, warn=warn)
        if self.residual and len(t) >= MIN_RESIDUAL_SAMPLES:
            r = t - (F @ weights + intercept)
            _, coef, r_intercept, loo_mse = ridge_loo(X, r, DEFAULT_ALPHAS)
            if loo_mse < float(np.mean(r**2)):
                return weights, intercept, coef, r_intercept
        return weights, intercept, None, 0.0

    def _transfer_log(self, X: np.ndarray, weights: np.ndarray, intercept: float,
                      residual_coef: np.ndarray | None, residual_intercept: float) -> np.ndarray:
        log_ms = self.source_features(X) @ weights + intercept
        if residual_coef is not None:
            log_ms = log_ms + X @ residual_coef + residual_intercept
        return log_ms

    def predict(self, X: object) -> np.ndarray:
        """Predicted latencies in ms on the new device, shape (n,)."""
        if self.weights_ is None or self.intercept_ is None:
            raise ValueError("FewShotLatencyPredictor is not fitted to a target device: call fit() first")
        X_arr = _as_features(X)
        log_ms = self._transfer_log(X_arr, self.weights_, self.intercept_, self.residual_coef_,
                                    self.residual_intercept_)
        if self.own_coef_ is not None:
            log_ms = self.blend_ * log_ms + (1.0 - self.blend_) * (X_arr @ self.own_coef_ + self.own_intercept_)
        return np.exp(log_ms)

    @property
    def source_weights(self) -> dict[str, float]:
        """The new device as a mix of known devices: name -> non-negative weight (non-zero only)."""
        if self.weights_ is None or self.source_names_ is None:
            raise ValueError("FewShotLatencyPredictor is not fitted to a target device: call fit() first")
        return {n: float(w) for n, w in zip(self.source_names_, self.weights_) if w > 0}

    # -- persistence ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, object]:
        """JSON-serialisable state (floats round-trip exactly)."""
        if self.source_coef_ is None:
            raise ValueError("FewShotLatencyPredictor has no source devices: nothing to save")
        assert self.source_intercept_ is not None and self.source_mean_ is not None
        assert self.source_std_ is not None and self.source_names_ is not None
        return {
            "kind": self.kind,
            "format_version": FORMAT_VERSION,
            "source_alpha": self.source_alpha,
            "source_names": list(self.source_names_),
            "source_coef": self.source_coef_.tolist(),
            "source_intercept": self.source_intercept_.tolist(),
            "source_mean": self.source_mean_.tolist(),
            "source_std": self.source_std_.tolist(),
            "weights": None if self.weights_ is None else self.weights_.tolist(),
            "intercept": self.intercept_,
            "residual": self.residual,
            "residual_coef": None if self.residual_coef_ is None else self.residual_coef_.tolist(),
            "residual_intercept": self.residual_intercept_,
            "own": self.own,
            "own_coef": None if self.own_coef_ is None else self.own_coef_.tolist(),
            "own_intercept": self.own_intercept_,
            "blend": self.blend_,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FewShotLatencyPredictor:
        """Inverse of :meth:`to_dict`."""
        obj = cls(source_alpha=data["source_alpha"], residual=bool(data.get("residual", False)),
                  own=bool(data.get("own", False)))
        obj.source_names_ = tuple(str(n) for n in data["source_names"])
        obj.source_coef_ = np.asarray(data["source_coef"], dtype=float)
        obj.source_intercept_ = np.asarray(data["source_intercept"], dtype=float)
        obj.source_mean_ = np.asarray(data["source_mean"], dtype=float)
        obj.source_std_ = np.asarray(data["source_std"], dtype=float)
        if data.get("weights") is not None:
            obj.weights_ = np.asarray(data["weights"], dtype=float)
            obj.intercept_ = float(data["intercept"])
        if data.get("residual_coef") is not None:
            obj.residual_coef_ = np.asarray(data["residual_coef"], dtype=float)
            obj.residual_intercept_ = float(data.get("residual_intercept", 0.0))
        if data.get("own_coef") is not None:  # files written before the own model have none: transfer alone
            obj.own_coef_ = np.asarray(data["own_coef"], dtype=float)
            obj.own_intercept_ = float(data.get("own_intercept", 0.0))
            obj.blend_ = float(data["blend"])
        return obj

    def save(self, path: str | Path) -> None:
        """Write the predictor (known-device models, and the target fit if any) as JSON."""
        _write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> FewShotLatencyPredictor:
        """Read a predictor written by :meth:`save`."""
        return cls.from_dict(_read_json(path, cls.kind))
