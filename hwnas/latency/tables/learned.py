"""A learned whole-network correction of a latency table, for spaces where summing units falls short.

Summing units misses what happens between them: the sums of a cell's parallel branches, attention's
memory traffic, the fusions a runtime makes across unit boundaries. Trained on the whole networks that
``nas latency validate`` (or a kit's networks) measured, a gradient-boosted tree model (hwnas's ``gbt``
predictor, stored as JSON node arrays, never a pickle) predicts the log-ratio of the measured latency to
the table's calibrated sum, from the space's encoding of the architecture, the log of the table sum, the
unit count and, where the space lists its units, how often the network uses each unit and each unit
attribute (:class:`~hwnas.latency.features.UnitFeatures`, its vocabularies stored with the model). The
prediction is then ``calibrated sum * exp(correction)``. Tables validated before the unit counts
(features ``encode+log_sum+units``) keep pricing with the features they were fitted on.

It is judged on the same held-out networks as the calibration, and the table answers with whichever of
the two did better there (``table.answers``: ``"calibration"`` or ``"learned"``). With too few
networks to judge it (fewer than :data:`MIN_TRAIN` to fit), no model is fitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.features import UnitFeatures

if TYPE_CHECKING:
    from hwnas.latency.tables.table import Calibration, LatencyTable
    from hwnas.search_spaces import SearchSpace

#: Fewest networks the correction is fitted on (the gbt predictor's own minimum).
MIN_TRAIN = 8
#: The features, named in the table so that a reader knows what the model sees.
FEATURES = "encode+log_sum+units+unit_counts"
#: The features of models fitted before the unit counts (still read).
LEGACY_FEATURES = "encode+log_sum+units"
#: Shallow, heavily shrunk trees: tens of networks, and the correction should stay small where unsure.
GBT_PARAMS: dict[str, Any] = {"target": "raw", "n_estimators": 300, "max_depth": 3, "learning_rate": 0.05,
                              "subsample": 0.8, "min_samples_leaf": 3, "max_features": 0.5}


@dataclass
class Correction:
    """A fitted correction: the gbt model and, for :data:`FEATURES`, the unit-count vocabularies it was fitted on."""

    model: Any
    unit_features: UnitFeatures | None

    @property
    def features(self) -> str:
        return FEATURES if self.unit_features is not None else LEGACY_FEATURES

    def to_table(self) -> dict[str, object]:
        """The table's ``learned`` entries that describe this model."""
        out: dict[str, object] = {"features": self.features, "model": self.model.to_dict()}
        if self.unit_features is not None:
            out["unit_features"] = self.unit_features.to_dict()
        return out


def features(space: SearchSpace, archs: Sequence[Architecture], sums: np.ndarray, units: np.ndarray,
             unit_features: UnitFeatures | None = None) -> np.ndarray:
    """The model's input: the space's encoding, log of the table sum, unit count (and unit-attribute counts)."""
    enc = np.stack([np.asarray(space.encode(a), dtype=float).ravel() for a in archs])
    cols = [enc, np.log(np.maximum(sums, 1e-9))[:, None], units.astype(float)[:, None]]
    if unit_features is not None:
        cols.append(unit_features.counts(space, archs))
    return np.hstack(cols)


def _base(calibration: Calibration, sums: np.ndarray, units: np.ndarray) -> np.ndarray:
    return np.maximum(np.array([calibration.apply(s, u) for s, u in zip(sums, units)]), 1e-9)


def fit_correction(space: SearchSpace, archs: Sequence[Architecture], sums: np.ndarray, units: np.ndarray,
                   measured: np.ndarray, calibration: Calibration, *, seed: int) -> Correction:
    """The gbt model of ``log(measured / calibrated sum)`` on these networks."""
    from hwnas.predictors.gbt import GBTPredictor

    unit_features = UnitFeatures.of_space(space)
    X = features(space, archs, sums, units, unit_features)
    y = np.log(measured) - np.log(_base(calibration, sums, units))
    return Correction(GBTPredictor(rng=np.random.default_rng(seed), **GBT_PARAMS).fit(X, y), unit_features)


def predict(correction: Correction, calibration: Calibration, space: SearchSpace, archs: Sequence[Architecture],
            sums: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Whole-network latency: the calibrated sum times the learned correction."""
    corr = correction.model.predict(features(space, archs, sums, units, correction.unit_features))
    return np.asarray(_base(calibration, sums, units) * np.exp(corr))


def load_model(table: LatencyTable) -> Correction:
    """The table's stored correction (raises ValueError, naming the table, for a malformed one)."""
    from hwnas.predictors.gbt import GBTPredictor

    learned = table.learned or {}
    where = f"{table.source or 'latency table'} learned model"
    model = GBTPredictor.from_dict(learned.get("model"), source=where)
    kind = learned.get("features", LEGACY_FEATURES)
    if kind == LEGACY_FEATURES:
        return Correction(model, None)
    if kind != FEATURES:
        raise ValueError(f"{where}: features {kind!r} are not known (this hwnas reads {FEATURES!r} and "
                         f"{LEGACY_FEATURES!r})")
    try:
        return Correction(model, UnitFeatures.from_dict(learned.get("unit_features")))
    except ValueError as exc:
        raise ValueError(f"{where}: unit_features: {exc}") from None
