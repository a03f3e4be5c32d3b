"""Measurement backends behind one interface (convert, profile, connection test), registered in ``BACKENDS``."""

from hwnas.latency.backends.base import BACKENDS, LatencyBackend

__all__ = ["BACKENDS", "LatencyBackend"]
