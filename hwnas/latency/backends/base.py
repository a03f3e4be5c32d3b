"""The measurement-backend interface: convert a module, profile the artifact, test the connection."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hwnas.latency.context import DeviceContext
from hwnas.latency.onnx_runtime import LatencyStats
from hwnas.registry import Registry

BACKENDS: Registry[Any] = Registry(kind="latency backend", entry_point_group="hwnas.latency_backends")


@dataclass(frozen=True)
class MeasureProtocol:
    """How one artifact is timed: ``warmup`` untimed runs, then at least ``repeats`` timed runs and at least
    ``min_time_s`` seconds of them (whichever is more, up to ``max_repeats``); the median and spread are kept.
    """

    warmup: int = 10
    repeats: int = 50
    min_time_s: float = 0.0
    max_repeats: int = 100_000
    statistic: str = "median"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stats_from_ms(samples_ms: Sequence[float]) -> LatencyStats:
    """Median, p10/p90 and IQR of timings in ms."""
    ms = np.asarray(samples_ms, dtype=float)
    if ms.size == 0:
        raise ValueError("no timings")
    q10, q25, q50, q75, q90 = np.percentile(ms, [10, 25, 50, 75, 90])
    return LatencyStats(median_ms=float(q50), p10_ms=float(q10), p90_ms=float(q90), iqr_ms=float(q75 - q25),
                        count=int(ms.size))


def time_callable(run: Callable[[], Any], protocol: MeasureProtocol, *, sync: Callable[[], Any] | None = None) -> tuple[LatencyStats, float]:
    """Time ``run`` per the protocol with ``perf_counter``; returns the stats and the seconds spent timing.

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called after every run, inside the timed span.
    """
    for _ in range(protocol.warmup):
        run()
        if sync:
            sync()
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        run()
        if sync:
            sync()
        samples.append((time.perf_counter() - t0) * 1e3)
        n = len(samples)
        if n >= protocol.max_repeats:
            break
        if n >= protocol.repeats and time.perf_counter() - start >= protocol.min_time_s:
            break
    return stats_from_ms(samples), time.perf_counter() - start


@runtime_checkable
class LatencyBackend(Protocol):
    """One way of measuring: onnxruntime (a provider), TensorRT's Python API, ``trtexec``, torch.

    Attributes:
        name: Registry name.
    """

    name: str

    def check(self) -> str:
        """Connection test: raises :class:`hwnas.errors.BackendUnavailable` naming what to install; else a
        one-line description of what will measure (runtime, version, device)."""
        ...

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        """The :class:`DeviceContext` this backend's numbers belong to."""
        ...

    def convert(self, model: Any, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        """Turn a torch module into this backend's artifact (an ONNX file, an engine) under ``workdir``."""
        ...

    def profile(self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol) -> tuple[LatencyStats, float]:
        """Time an artifact; returns its stats and the seconds spent in timed runs (the bare measurement time)."""
        ...
