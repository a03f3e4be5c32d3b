"""ONNX export of torch modules and latency measurement with onnxruntime."""

from __future__ import annotations

import logging
import os
import platform
import statistics
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import BackendUnavailable

log = logging.getLogger(__name__)


def export_onnx(model: Any, input_shape: Sequence[int], path: str | Path, *, opset: int = 17, batch_size: int = 1) -> Path:
    """Export ``model`` (put in eval mode) to ONNX at a fixed batch size; returns the path.

    Uses torch's TorchScript-based exporter (fast, single file); falls back to the dynamo exporter
    where the former is unavailable.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    dummy = torch.zeros(batch_size, *input_shape)
    tmp = path.with_name(path.name + ".part")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, (dummy,), str(tmp), dynamo=False, opset_version=opset,
                              input_names=["input"], output_names=["output"])
        except TypeError:  # a torch without the TorchScript exporter
            torch.onnx.export(model, (dummy,), str(tmp), opset_version=max(opset, 18),
                              input_names=["input"], output_names=["output"], external_data=False)
    os.replace(tmp, path)
    return path


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - onnxruntime is a dependency
        raise BackendUnavailable("onnxruntime is not installed: pip install onnxruntime") from exc
    return onnxruntime


@dataclass(frozen=True)
class OrtSettings:
    """How a session is made and timed."""

    provider: str = "CPUExecutionProvider"
    threads: int = 1
    warmup: int = 10
    repeats: int = 50

    def session(self, model_path: str | Path) -> Any:
        """An inference session with pinned thread counts on the configured provider."""
        ort = _ort()
        available = ort.get_available_providers()
        if self.provider not in available:
            raise BackendUnavailable(
                f"onnxruntime execution provider {self.provider!r} is not available here "
                f"(available: {', '.join(available)})"
            )
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        return ort.InferenceSession(str(model_path), so, providers=[self.provider])


@dataclass(frozen=True)
class LatencyStats:
    """Summary of repeated timings of one model, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    iqr_ms: float
    count: int

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def time_session(session: Any, inputs: dict[str, np.ndarray], *, warmup: int, repeats: int) -> LatencyStats:
    """Run ``warmup`` untimed then ``repeats`` timed inferences; median and spread in ms."""
    for _ in range(warmup):
        session.run(None, inputs)
    times = np.empty(repeats)
    for i in range(repeats):
        t0 = time.perf_counter()
        session.run(None, inputs)
        times[i] = time.perf_counter() - t0
    ms = times * 1e3
    q10, q25, q75, q90 = np.percentile(ms, [10, 25, 75, 90])
    return LatencyStats(median_ms=float(statistics.median(ms)), p10_ms=float(q10), p90_ms=float(q90),
                        iqr_ms=float(q75 - q25), count=repeats)


def measure_onnx(model_path: str | Path, input_shape: Sequence[int], settings: OrtSettings, *, batch_size: int = 1,
                 rng: np.random.Generator | None = None) -> LatencyStats:
    """Latency of an ONNX file at ``batch_size`` under ``settings`` (random normal input)."""
    session = settings.session(model_path)
    rng = rng if rng is not None else np.random.default_rng(0)
    x = rng.standard_normal((batch_size, *input_shape)).astype(np.float32)
    name = session.get_inputs()[0].name
    return time_session(session, {name: x}, warmup=settings.warmup, repeats=settings.repeats)


def onnx_max_abs_diff(model: Any, model_path: str | Path, x: np.ndarray) -> float:
    """Largest absolute difference between the torch model and its ONNX file on input ``x``."""
    import torch

    session = OrtSettings(threads=1).session(model_path)
    with torch.no_grad():
        ref = model.eval()(torch.from_numpy(x)).numpy()
    out = session.run(None, {session.get_inputs()[0].name: x})[0]
    return float(np.max(np.abs(out - ref)))


def host_description() -> dict[str, Any]:
    """CPU model, core count and onnxruntime version: the context a CPU measurement belongs to."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ort = _ort()
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "onnxruntime": ort.__version__}
