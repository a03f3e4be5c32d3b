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
  blended in by cross-validation) cover a device that ranks networks unlike every known one. By default
  (``correction="evidence"``) the mix's residual is a Gaussian process whose prior variances are
  chosen by marginal likelihood (:func:`evidence_residual`), not by cross-validation on the k samples.

Only numpy and scipy are used; nothing here is stochastic (seeds matter only where samples are
drawn, see HELP's protocol in ``benchmarks/help_protocol.py``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
#: 2: the evidence correction (``correction``, ``deviation_coef``, ``feature_mean``); 1 still loads.
FEWSHOT_FORMAT_VERSION = 2
MIN_FIT_SAMPLES = 3
#: Fewest target samples the residual model is tried on (leave-one-out needs a few to mean anything).
MIN_RESIDUAL_SAMPLES = 8
#: Folds of the cross-validation that weighs the transfer against the target's own model (fewer with fewer samples).
BLEND_FOLDS = 10
FALLBACK_WEIGHT = 1e-3  # relative slope of the no-evidence fallback of FewShotLatencyPredictor.fit
DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-3, 3, 13))
#: Prior-to-noise variance ratios :func:`evidence_residual` tries for each of its two kernels (0: the kernel off).
EVIDENCE_RATIOS: tuple[float, ...] = (0.0, *(float(a) for a in np.logspace(-2, 8, 21)))
#: The scales :class:`FewShotLatencyPredictor` models latency on: its logarithm, or ms (a sum of unit costs).
SCALES: tuple[str, ...] = ("log", "ms")
#: Floor of a prediction on the ms scale, where a linear model extrapolates below zero.
MIN_PREDICTED_MS = 1e-6
#: How :class:`FewShotLatencyPredictor` corrects the mix of known devices with the new device's own samples (before
#: the model of its samples alone is blended in, where the ``own`` flag and cross-validation say so).
CORRECTIONS: dict[str, str] = {
    "evidence": "a Gaussian-process residual over the known devices' deviations and the features, its prior "
                "variances chosen by restricted marginal likelihood (zero allowed: the mix alone)",
    "cv": "a ridge residual kept where its leave-one-out error wins (the residual flag)",

}


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


def evidence_residual(
    A: np.ndarray, B: np.ndarray, r: np.ndarray, ratios: Sequence[float] = EVIDENCE_RATIOS
) -> tuple[float, float, float, np.ndarray, float]:
    """A Gaussian process for ``r`` with kernel ``l1 A A^T + l2 B B^T + I`` (times a noise variance) and a free mean.

    ``(l1, l2)`` is the pair of ``ratios`` of greatest restricted (REML) marginal likelihood, the noise
    variance and the mean profiled out; ``(0, 0)`` (no correction, the residual is noise) is a candidate, so a
    kernel is used only where the samples give evidence for it. With ten samples this is steadier than a
    cross-validated choice, which splits the same ten points into folds of one.

    Args:
        A: First kernel's features, shape (n, a).
        B: Second kernel's features, shape (n, b).
        r: Targets (the mix's residual, on the predictor's scale), shape (n,).
        ratios: Prior-to-noise variance ratios tried for each kernel.

    Returns:
        ``(l1, l2, mean, alpha, loglik)``: the predictive mean at new rows ``A*, B*`` is
        ``mean + (l1 A* A^T + l2 B* B^T) @ alpha``; ``loglik`` is twice the restricted log-likelihood (up to a
        constant) of the chosen pair.
    """
    n = r.shape[0]
    KA, KB, ones = A @ A.T, B @ B.T, np.ones(n)
    best: tuple[float, float, float, float] = (-math.inf, 0.0, 0.0, float(r.mean()))
    for l1 in ratios:
        for l2 in ratios:
            try:
                chol = np.linalg.cholesky(l1 * KA + l2 * KB + np.eye(n))
            except np.linalg.LinAlgError:
                continue
            Li_1, Li_r = np.linalg.solve(chol, ones), np.linalg.solve(chol, r)
            g = float(Li_1 @ Li_1)
            mean = float(Li_1 @ Li_r) / g
            resid = Li_r - mean * Li_1
            q = float(resid @ resid)
            if q <= 0.0:
                continue
            loglik = -2.0 * float(np.log(np.diag(chol)).sum()) - math.log(g) - (n - 1) * math.log(q)
            if loglik > best[0] + 1e-9:  # ties go to the smaller ratios (tried first)
                best = (loglik, float(l1), float(l2), mean)
    loglik, l1, l2, mean = best
    alpha = np.linalg.solve(l1 * KA + l2 * KB + np.eye(n), r - mean)
    return l1, l2, mean, alpha, loglik


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


def _rows_times(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` computed row by row, so a row's result does not depend on the batch it is in (BLAS's may, in the
    last bits: an evaluator must give the same number for a network alone and in a batch)."""
    return np.einsum("ij,j...->i...", A, B)


def _standardize_stats(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = A.mean(axis=0)
    std = A.std(axis=0)
    return mean, np.where(std > 0, std, 1.0)


# --------------------------------------------------------------------------------------------
# JSON persistence


def _write_json(path: str | Path, payload: Mapping[str, object]) -> None:
    Path(path).write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")


def _read_json(path: str | Path, kind: str, versions: Sequence[int] = (FORMAT_VERSION,)) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON predictor file ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected a {kind} file, found {found!r}")
    if data.get("format_version") not in versions:
        readable = " or ".join(map(str, versions))
        raise ValueError(f"{path}: format version {data.get('format_version')!r} is not {readable}")
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


@dataclass
class _EvidenceFit:
    """The terms of one evidence-corrected fit (see :meth:`FewShotLatencyPredictor._fit_evidence`)."""

    weights: np.ndarray
    intercept: float
    evidence: tuple[float, float] | None = None
    deviation_coef: np.ndarray | None = None
    residual_coef: np.ndarray | None = None
    residual_intercept: float = 0.0


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

    That is ``correction="cv"``, on log-latency (``scale="log"``). The default, ``correction="evidence"`` on latency
    in ms (``scale="ms"``: a network's latency is a sum of its layers' costs), replaces the residual step: after the
    mix, the residual is a Gaussian process (:func:`evidence_residual`) with two kernels, one over the known
    devices' deviations from their average (the new device may lean further towards some known devices than a
    non-negative mix allows) and one over the features, centred (what no known device shows), their prior
    variances chosen by restricted marginal likelihood, zero included (then the mix alone). Chosen over "cv" by
    leave-one-device-out on half of HELP's NB201 and FBNet device columns
    (``docs/results/fewshot-latency.md``). The own model is then blended in as with "cv".

    Args:
        source_alpha: Ridge strength of the per-device encoding models.
        residual: With ``correction="cv"``: model the target's residual from its own samples.
        own: Blend in a model of the target's own samples, weighted by cross-validation.
        correction: ``"evidence"`` or ``"cv"`` (:data:`CORRECTIONS`).
        scale: ``"ms"`` or ``"log"`` (:data:`SCALES`): what the models are linear in.
    """

    kind = "FewShotLatencyPredictor"

    def __init__(self, *, source_alpha: float = 1.0, residual: bool = True, own: bool = True,
                 correction: str = "evidence", scale: str = "ms") -> None:
        if not (source_alpha > 0 and math.isfinite(source_alpha)):
            raise ValueError(f"source_alpha must be a positive number, got {source_alpha!r}")
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
        if correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
        self.source_alpha = float(source_alpha)
        self.residual = bool(residual)
        self.own = bool(own)
        self.correction = correction
        self.scale = scale
        #: With ``correction="evidence"``: per known device, what the residual adds to its mix weight (sums to 0).
        self.deviation_coef_: np.ndarray | None = None
        #: With ``correction="evidence"``: the chosen prior-to-noise ratios of the device and feature kernels.
        self.evidence_: tuple[float, float] | None = None
        #: The features' mean over the known devices' architectures (the feature kernel's centre).
        self.feature_mean_: np.ndarray | None = None
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
        coef, intercept = ridge_fit(X_arr, self._to_scale(L), self.source_alpha)
        smoothed = X_arr @ coef + intercept
        self.source_mean_, self.source_std_ = _standardize_stats(smoothed)
        self.feature_mean_ = X_arr.mean(axis=0)
        self.source_names_ = names
        self.source_coef_, self.source_intercept_ = coef, np.asarray(intercept, dtype=float)
        self.weights_, self.intercept_ = None, None
        self.residual_coef_, self.own_coef_, self.blend_ = None, None, 1.0
        self.deviation_coef_, self.evidence_ = None, None
        logger.debug("few-shot predictor: %d source devices from %d architectures", len(names), X_arr.shape[0])
        return self

    def source_features(self, X: object) -> np.ndarray:
        """Standardised known-device model outputs for encoded architectures, shape (n, m)."""
        if self.source_coef_ is None or self.source_intercept_ is None:
            raise ValueError("FewShotLatencyPredictor has no source devices: call fit_sources() or load() first")
        assert self.source_mean_ is not None and self.source_std_ is not None
        X_arr = _as_features(X)
        _check_width(X_arr, self.source_coef_.shape[0], "FewShotLatencyPredictor")
        return (_rows_times(X_arr, self.source_coef_) + self.source_intercept_ - self.source_mean_) / self.source_std_

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
        t = self._to_scale(y_arr)
        self.own_coef_, self.own_intercept_, self.blend_ = None, 0.0, 1.0
        self.deviation_coef_, self.evidence_ = None, None
        if self.correction == "evidence":
            fit = self._fit_evidence(X_arr, t)
            self.weights_, self.intercept_, self.evidence_ = fit.weights, fit.intercept, fit.evidence
            self.deviation_coef_, self.residual_coef_, self.residual_intercept_ = (
                fit.deviation_coef, fit.residual_coef, fit.residual_intercept)
            if self.own and len(t) >= MIN_RESIDUAL_SAMPLES:
                def evidence_fold(X_train: np.ndarray, t_train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
                    fitted = self._fit_evidence(X_train, t_train, warn=False)
                    return lambda X_test: self._evidence_scale(X_test, fitted)

                self._blend_own(X_arr, t, evidence_fold)
            return self
        self.weights_, self.intercept_, self.residual_coef_, self.residual_intercept_ = self._fit_transfer(X_arr, t)
        if self.own and len(t) >= MIN_RESIDUAL_SAMPLES:
            def transfer_fold(X_train: np.ndarray, t_train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
                fitted = self._fit_transfer(X_train, t_train, warn=False)
                return lambda X_test: self._transfer_scaled(X_test, *fitted)

            self._blend_own(X_arr, t, transfer_fold)
        return self

    def _blend_own(self, X: np.ndarray, t: np.ndarray,
                   transfer: Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]) -> None:
        """Blend in ridge on the samples alone where its out-of-fold error beats the transfer's by one standard error.

        ``transfer(X_train, t_train)`` fits the transfer on a fold's training samples and returns its predictor.
        """
        n = len(t)
        folds = np.arange(n) % min(n, BLEND_FOLDS)
        transfer_oof, own_oof = np.empty(n), np.empty(n)
        for fold in np.unique(folds):
            test, train = folds == fold, folds != fold
            transfer_oof[test] = transfer(X[train], t[train])(X[test])
            _, coef, intercept, _ = ridge_loo(X[train], t[train], DEFAULT_ALPHAS)
            own_oof[test] = X[test] @ coef + intercept
        gap = transfer_oof - own_oof
        spread = float(gap @ gap)
        blend = float(np.clip((t - own_oof) @ gap / spread, 0.0, 1.0)) if spread > 0 else 1.0
        worse = (t - own_oof) ** 2 - (t - transfer_oof) ** 2  # per sample: how much worse the own model is
        if blend < 1.0 and worse.mean() + worse.std(ddof=1) / math.sqrt(n) < 0:
            _, self.own_coef_, self.own_intercept_, _ = ridge_loo(X, t, DEFAULT_ALPHAS)
            self.blend_ = blend

    def _fit_evidence(self, X: np.ndarray, t: np.ndarray, *, warn: bool = True) -> _EvidenceFit:
        """The mix, then its residual as a Gaussian process (:func:`evidence_residual`), folded into linear terms."""
        F = self.source_features(X)
        weights, intercept = nonnegative_combination(F, t, warn=warn)
        fit = _EvidenceFit(weights, intercept)
        if len(t) < MIN_RESIDUAL_SAMPLES:
            return fit
        if self.feature_mean_ is None:
            raise ValueError("FewShotLatencyPredictor has no feature statistics (a file written before the evidence "
                             "correction): refit its sources, or use correction='cv'")
        m, p = F.shape[1], X.shape[1]
        A = (F - F.mean(axis=1, keepdims=True)) / math.sqrt(m)
        B = (X - self.feature_mean_) / math.sqrt(p)
        l1, l2, mean, alpha, _ = evidence_residual(A, B, t - (F @ weights + intercept))
        fit.evidence, fit.intercept = (l1, l2), intercept + mean
        if l1 > 0:  # l1 A* A^T alpha = (F* - rowmean F*) @ g / sqrt(m) with g = l1 A^T alpha
            g = l1 * (A.T @ alpha) / math.sqrt(m)
            fit.deviation_coef = g - g.sum() / m
        if l2 > 0:
            h = l2 * (B.T @ alpha) / math.sqrt(p)
            fit.residual_coef, fit.residual_intercept = h, -float(self.feature_mean_ @ h)
        return fit

    def _evidence_scale(self, X: np.ndarray, fit: _EvidenceFit) -> np.ndarray:
        """An evidence fit's prediction, on the model's scale."""
        weights = fit.weights if fit.deviation_coef is None else fit.weights + fit.deviation_coef
        return self._transfer_scaled(X, weights, fit.intercept, fit.residual_coef, fit.residual_intercept)

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

    def _transfer_scaled(self, X: np.ndarray, weights: np.ndarray, intercept: float,
                      residual_coef: np.ndarray | None, residual_intercept: float) -> np.ndarray:
        scaled = _rows_times(self.source_features(X), weights) + intercept
        if residual_coef is not None:
            scaled = scaled + _rows_times(X, residual_coef) + residual_intercept
        return scaled

    def predict(self, X: object) -> np.ndarray:
        """Predicted latencies in ms on the new device, shape (n,)."""
        if self.weights_ is None or self.intercept_ is None:
            raise ValueError("FewShotLatencyPredictor is not fitted to a target device: call fit() first")
        X_arr = _as_features(X)
        weights = self.weights_ if self.deviation_coef_ is None else self.weights_ + self.deviation_coef_
        scaled = self._transfer_scaled(X_arr, weights, self.intercept_, self.residual_coef_, self.residual_intercept_)
        if self.own_coef_ is not None:
            own = _rows_times(X_arr, self.own_coef_) + self.own_intercept_
            scaled = self.blend_ * scaled + (1.0 - self.blend_) * own
        return self._from_scale(scaled)

    def _to_scale(self, ms: np.ndarray) -> np.ndarray:
        """Latency in ms on the scale the models work on (log, or ms itself)."""
        return np.log(ms) if self.scale == "log" else np.asarray(ms, dtype=float)

    def _from_scale(self, t: np.ndarray) -> np.ndarray:
        if self.scale == "log":
            return np.exp(t)
        return np.maximum(t, MIN_PREDICTED_MS)  # a linear model may extrapolate below zero

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
            "format_version": FEWSHOT_FORMAT_VERSION,
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
            "correction": self.correction,
            "scale": self.scale,
            "feature_mean": None if self.feature_mean_ is None else self.feature_mean_.tolist(),
            "deviation_coef": None if self.deviation_coef_ is None else self.deviation_coef_.tolist(),
            "evidence": None if self.evidence_ is None else list(self.evidence_),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FewShotLatencyPredictor:
        """Inverse of :meth:`to_dict`."""
        obj = cls(source_alpha=data["source_alpha"], residual=bool(data.get("residual", False)),
                  own=bool(data.get("own", False)), correction=str(data.get("correction", "cv")),
                  scale=str(data.get("scale", "log")))
        if data.get("feature_mean") is not None:  # files written before the evidence correction have none
            obj.feature_mean_ = np.asarray(data["feature_mean"], dtype=float)
        if data.get("deviation_coef") is not None:
            obj.deviation_coef_ = np.asarray(data["deviation_coef"], dtype=float)
        if data.get("evidence") is not None:
            l1, l2 = data["evidence"]
            obj.evidence_ = (float(l1), float(l2))
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
        return cls.from_dict(_read_json(path, cls.kind, (FORMAT_VERSION, FEWSHOT_FORMAT_VERSION)))
