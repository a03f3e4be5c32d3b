"""Accuracy predictors (fit/predict over encoded features) and zero-cost proxies."""
