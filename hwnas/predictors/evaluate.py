"""Judging a saved predictor on measured architectures (``nas predictor evaluate``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwnas.errors import ConfigError
from hwnas.predictors.fit import TrainingData

if TYPE_CHECKING:
    from hwnas.predictors.base import Predictor


@dataclass(frozen=True)
class PredictorEvaluation:
    """A saved predictor's figures on measured architectures.

    Args:
        source: The predictor's file.
        predictor: Its registered kind.
        features: Its feature set.
        target: The measured metric or column it was judged on.
        n: Architectures judged.
        figures: Kendall tau, Spearman rho, top-5 % precision, MAE, R² and the count
            (:func:`hwnas.predictors.metrics.figures`).
    """

    source: str
    predictor: str
    features: str
    target: str
    n: int
    figures: Mapping[str, float]


def load_saved_predictor(path: str | Path) -> Predictor:
    """A predictor saved by ``nas predictor fit``.

    Raises:
        ConfigError: No such file, or not a predictor file this hwnas reads (one line naming it).
    """
    from hwnas.predictors import load_predictor

    try:
        return load_predictor(path)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from None


def evaluate_saved_predictor(path: str | Path, data_for: Callable[[str], TrainingData], *,
                             target: str | None = None) -> PredictorEvaluation:
    """Predict every architecture of ``data_for(target)`` with the predictor saved at ``path`` and compare with
    what was measured.

    Args:
        path: The predictor's file.
        data_for: The measured architectures of a target (read once the target is known).
        target: The measured metric or column (default: the one the predictor was fitted on).

    Raises:
        ConfigError: An unreadable file, no target, or a predictor of another space or feature width.
    """
    from hwnas.predictors import featurize
    from hwnas.predictors.fit import check_compatible
    from hwnas.predictors.metrics import check_predictions, figures

    model = load_saved_predictor(path)
    target = target or model.meta.get("target")
    if not target:
        raise ConfigError(f"{path} records no target; give --target")
    data = data_for(target)
    features, _ = check_compatible(model, data.space, source=str(path))
    pred = np.asarray(model.predict(featurize(data.space, data.archs, features, data.metrics)), dtype=float)
    check_predictions(pred, source=str(path), cause="its file is corrupt or it was fitted on broken data")
    return PredictorEvaluation(source=str(path), predictor=str(model.name), features=features, target=target,
                               n=int(data.y.size), figures=figures(pred, data.y))
