"""Latency: device contexts, measurement (backends, protocol), lookup tables, the board kit, latency models.

Rooms: :mod:`~hwnas.latency.context` and :mod:`~hwnas.latency.measure` (values and timing loops, with the
stop rule and statistics of the stand-alone board runner :mod:`~hwnas.latency.kit.run_kit`),
:mod:`~hwnas.latency.onnx_export`, :mod:`~hwnas.latency.backends`, :mod:`~hwnas.latency.tables` (the table
file, profiling, validation and calibration), :mod:`~hwnas.latency.kit`, :mod:`~hwnas.latency.published`,
:mod:`~hwnas.latency.model` (the :class:`LatencyModel` protocol) and :mod:`~hwnas.latency.predictors`.
Nothing heavy (torch, onnxruntime) is imported here.
"""

from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol
from hwnas.latency.model import LatencyModel
from hwnas.latency.tables.model import TableLatencyModel

__all__ = ["DeviceContext", "LatencyModel", "LatencyStats", "MeasureProtocol", "TableLatencyModel"]
