"""Accuracy predictors (fit/predict over encoded features) and zero-cost proxies."""

from hwnas.predictors.base import (
    PREDICTORS,
    JSONPredictor,
    Predictor,
    PredictorParams,
    StdPredictor,
    UncertainPredictor,
    as_feature_matrix,
    as_target_vector,
    load_predictor,
)
from hwnas.predictors.features import FEATURES, featurize, metric_features, parse_features

__all__ = [
    "FEATURES", "PREDICTORS", "JSONPredictor", "Predictor", "PredictorParams", "StdPredictor", "UncertainPredictor",
    "as_feature_matrix", "as_target_vector", "check_pairing", "featurize", "load_predictor", "metric_features",
    "parse_features",
]


def check_pairing(name: str, features: str) -> None:
    """Refuse a predictor paired with a feature set it cannot read (``gin`` reads ``graph`` alone), naming both."""
    from hwnas.errors import ConfigError

    parse_features(features)
    needs = getattr(PREDICTORS.get(name), "features", None)
    if isinstance(needs, str) and features != needs:
        raise ConfigError(f"{name} reads the {needs!r} feature set only, not {features!r}")
