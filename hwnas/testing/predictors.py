"""Conformance checks for a Predictor."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwnas.predictors.base import Predictor, UncertainPredictor
from hwnas.predictors.metrics import spearman_rho

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace

log = logging.getLogger(__name__)


def synthetic_target(X: np.ndarray, *, seed: int = 321) -> np.ndarray:
    """A simple learnable signal of encoded architectures: a fixed random linear score plus a mild square term."""
    w = np.random.default_rng(seed).standard_normal(X.shape[1])
    s = X @ w
    return s + 0.1 * s**2


def _saved_format(data: bytes) -> str | None:
    """``"json"`` or ``"safetensors"`` when the bytes are one of those, else None."""
    try:
        json.loads(data.decode("utf-8"))
        return "json"
    except (UnicodeDecodeError, ValueError):
        pass
    if len(data) >= 10:
        header_len = int.from_bytes(data[:8], "little")
        if 2 <= header_len <= len(data) - 8 and data[8:9] == b"{":
            try:
                json.loads(data[8 : 8 + header_len].decode("utf-8"))
                return "safetensors"
            except (UnicodeDecodeError, ValueError):
                return None
    return None


def check_predictor(
    factory: Callable[[np.random.Generator], Predictor],
    space: SearchSpace,
    rng: np.random.Generator,
    *,
    n_train: int = 120,
    n_test: int = 60,
    seed: int = 0,
    min_spearman: float = 0.5,
    min_r2: float = 0.0,
    filename: str = "predictor.json",
    directory: str | Path | None = None,
) -> None:
    """Fit, predict, determinism, save/load (never pickle), learning a simple signal, and width checks.

    Raises AssertionError naming the first broken rule.

    Args:
        factory: Builds an unfitted predictor from a seeded generator (e.g.
            ``lambda g: PREDICTORS.create(name, None, rng=g)``).
        space: The search space whose ``encode`` gives the features.
        rng: Draws the architectures.
        n_train: Architectures to fit on.
        n_test: Held-out architectures to score on.
        seed: Seed of the generators handed to ``factory``.
        min_spearman: Held-out Spearman correlation the predictor must exceed on the synthetic signal.
        min_r2: Held-out R² it must exceed (0 is what predicting the training mean scores, about).
        filename: Name of the file ``save`` writes (its suffix may matter to the predictor).
        directory: Where to write it (a temporary directory when None).
    """
    archs = [space.sample(rng) for _ in range(n_train + n_test)]
    X = np.stack([space.encode(a) for a in archs]).astype(float)
    y = synthetic_target(X)
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    width = X.shape[1]

    predictor = factory(np.random.default_rng(seed))
    assert isinstance(predictor, Predictor), "the predictor does not implement the Predictor protocol"
    assert predictor.fit(X_train, y_train) is predictor, "fit() must return the predictor itself"
    pred = np.asarray(predictor.predict(X_test))
    assert pred.shape == (n_test,), f"predict() returned shape {pred.shape}, expected ({n_test},)"
    assert np.all(np.isfinite(pred)), "predict() returned NaN or inf"
    one = np.asarray(predictor.predict(X_test[:1]))
    assert one.shape == (1,), f"predict() on one row returned shape {one.shape}, expected (1,)"
    assert np.allclose(one, pred[:1]), "predict() of one row differs from the same row in a batch"

    other = factory(np.random.default_rng(seed)).fit(X_train, y_train)
    assert np.array_equal(np.asarray(other.predict(X_test)), pred), (
        "the predictor is not deterministic under the same seed"
    )

    uncertain: UncertainPredictor | None = predictor if isinstance(predictor, UncertainPredictor) else None
    if uncertain is not None:
        std = np.asarray(uncertain.predict_std(X_test))
        assert std.shape == (n_test,), f"predict_std() returned shape {std.shape}, expected ({n_test},)"
        assert np.all(np.isfinite(std)) and np.all(std >= 0), "predict_std() must be finite and non-negative"

    rho = spearman_rho(pred, y_test)
    r2 = 1.0 - float(np.sum((y_test - pred) ** 2)) / float(np.sum((y_test - y_test.mean()) ** 2))
    log.info("held-out Spearman %.3f, R² %.3f", rho, r2)
    assert rho > min_spearman, f"held-out Spearman {rho:.3f} <= {min_spearman} on a simple signal"
    assert r2 > min_r2, f"held-out R² {r2:.3f} <= {min_r2}: no better than a constant"

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(directory if directory is not None else tmp) / filename
        predictor.save(path)
        assert path.is_file(), f"save() did not write {path}"
        data = path.read_bytes()
        assert data, "save() wrote an empty file"
        assert data[:1] != b"\x80", "save() wrote a pickle (it must write JSON or safetensors)"
        assert _saved_format(data) is not None, "save() wrote neither JSON nor safetensors"
        loaded = type(predictor).load(path)
        again = np.asarray(loaded.predict(X_test))
        assert again.shape == pred.shape and np.allclose(again, pred, rtol=1e-7, atol=1e-10), (
            "the loaded predictor predicts differently from the saved one"
        )
        if uncertain is not None:
            assert isinstance(loaded, UncertainPredictor), "the loaded predictor lost predict_std"
            assert np.allclose(np.asarray(loaded.predict_std(X_test)), std, rtol=1e-7, atol=1e-10), (
                "the loaded predictor's predict_std differs from the saved one's"
            )

    for bad_width in (width + 1, width - 1):
        if bad_width < 1:
            continue
        X_bad = np.zeros((3, bad_width))
        try:
            predictor.predict(X_bad)
        except ValueError as exc:
            assert str(width) in str(exc), (
                f"the error for X of width {bad_width} does not name the expected width {width}: {exc}"
            )
        else:
            raise AssertionError(f"predict() accepted X of width {bad_width} (fitted on width {width})")

    fresh = factory(np.random.default_rng(seed))
    try:
        fresh.fit(X_train, y_train[:-1])
    except ValueError:
        pass
    else:
        raise AssertionError("fit() accepted y whose length differs from X's")
