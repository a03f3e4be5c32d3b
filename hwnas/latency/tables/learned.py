"""A learned whole-network correction of a latency table, for spaces where summing units falls short.

Summing units misses what happens between them: the sums of a cell's parallel branches, attention's
memory traffic, the fusions a runtime makes across unit boundaries. Trained on the whole networks that
``nas latency validate`` (or a kit's networks) measured, a gradient-boosted tree model (hwnas's ``gbt``
predictor, stored as JSON node arrays, never a pickle) predicts the log-ratio of the measured latency to
the table's calibrated sum, from the space's encoding of the architecture plus the log of the table sum
and the unit count. The prediction is then ``calibrated sum * exp(correction)``.

It is judged on the same held-out networks as the calibration, and the table answers with whichever of
the two did better there (``table.answers``: ``"calibration"`` or ``"learned"``). With too few
networks to judge it (fewer than :data:`MIN_TRAIN` to fit), no model is fitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture

if TYPE_CHECKING:
    from hwnas.latency.tables.table import Calibration, LatencyTable
    from hwnas.search_spaces import SearchSpace

#: Fewest networks the correction is fitted on (the gbt predictor's own minimum).
MIN_TRAIN = 8
#: The features, named in the table so that a reader knows what the model sees.
FEATURES = "encode+log_sum+units"
#: Shallow, heavily shrunk trees: tens of networks, and the correction should stay small where unsure.
GBT_PARAMS: dict[str, Any] = {"target": "raw", "n_estimators": 300, "max_depth": 3, "learning_rate": 0.05,
                              "subsample": 0.8, "min_samples_leaf": 3, "max_features": 0.5}


def features(space: SearchSpace, archs: Sequence[Architecture], sums: np.ndarray, units: np.ndarray) -> np.ndarray:
    """The model's input: the space's encoding, log of the table sum, unit count."""
    enc = np.stack([np.asarray(space.encode(a), dtype=float).ravel() for a in archs])
    return np.column_stack([enc, np.log(np.maximum(sums, 1e-9)), units.astype(float)])


def _base(calibration: Calibration, sums: np.ndarray, units: np.ndarray) -> np.ndarray:
    return np.maximum(np.array([calibration.apply(s, u) for s, u in zip(sums, units)]), 1e-9)


def fit_correction(space: SearchSpace, archs: Sequence[Architecture], sums: np.ndarray, units: np.ndarray,
                   measured: np.ndarray, calibration: Calibration, *, seed: int) -> Any:
    """The gbt model of ``log(measured / calibrated sum)`` on these networks (a fitted ``GBTPredictor``)."""
    from hwnas.predictors.gbt import GBTPredictor

    X = features(space, archs, sums, units)
    y = np.log(measured) - np.log(_base(calibration, sums, units))
    return GBTPredictor(rng=np.random.default_rng(seed), **GBT_PARAMS).fit(X, y)


def predict(model: Any, calibration: Calibration, space: SearchSpace, archs: Sequence[Architecture],
            sums: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Whole-network latency: the calibrated sum times the learned correction."""
    corr = model.predict(features(space, archs, sums, units))
    return np.asarray(_base(calibration, sums, units) * np.exp(corr))


def load_model(table: LatencyTable) -> Any:
    """The table's stored correction model (raises ValueError, naming the table, for a malformed one)."""
    from hwnas.predictors.gbt import GBTPredictor

    learned = table.learned or {}
    return GBTPredictor.from_dict(learned.get("model"), source=f"{table.source or 'latency table'} learned model")
