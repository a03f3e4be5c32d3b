"""Accuracy predictors (fit/predict over encoded features) and zero-cost proxies."""

from hwnas.predictors.base import (
    PREDICTORS,
    Predictor,
    PredictorParams,
    UncertainPredictor,
    as_feature_matrix,
    as_target_vector,
)

__all__ = ["PREDICTORS", "Predictor", "PredictorParams", "UncertainPredictor", "as_feature_matrix", "as_target_vector"]
