"""Latency: device context, measurement backends (onnxruntime today), lookup tables, predictors."""
