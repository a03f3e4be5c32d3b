"""Measurement backends behind one interface (convert, profile, connection test), registered in ``BACKENDS``."""

from hwnas.latency.backends import onnxruntime_backend as _ort  # noqa: F401
from hwnas.latency.backends import tensorrt_backend as _tensorrt  # noqa: F401
from hwnas.latency.backends import torch_backend as _torch  # noqa: F401
from hwnas.latency.backends import trtexec_backend as _trtexec  # noqa: F401
from hwnas.latency.backends.base import BACKENDS, LatencyBackend

__all__ = ["BACKENDS", "LatencyBackend"]
