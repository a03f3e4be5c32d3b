"""Measurement backends behind one interface (convert, profile, connection test)."""

from hwnas.latency.backends import onnxruntime_backend as _ort  # noqa: F401
from hwnas.latency.backends.base import BACKENDS, LatencyBackend, MeasureProtocol, stats_from_ms, time_callable

__all__ = ["BACKENDS", "LatencyBackend", "MeasureProtocol", "stats_from_ms", "time_callable"]
