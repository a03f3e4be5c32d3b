"""The measurement-backend interface: convert a module, profile the artifact, test the connection."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol
from hwnas.registry import Registry

if TYPE_CHECKING:
    from torch import nn

#: The built-in latency backends, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_BACKENDS: dict[str, str] = {
    "onnxruntime": "hwnas.latency.backends.onnxruntime_backend:OnnxRuntimeBackend",
    "tensorrt": "hwnas.latency.backends.tensorrt_backend:TensorRTBackend",
    "torch": "hwnas.latency.backends.torch_backend:TorchBackend",
    "trtexec": "hwnas.latency.backends.trtexec_backend:TrtexecBackend",
}
BACKENDS: Registry[LatencyBackend] = Registry(kind="latency backend", entry_point_group="hwnas.latency_backends",
                                              builtins=BUILTIN_BACKENDS)


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

    def convert(self, model: nn.Module, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        """Turn a torch module into this backend's artifact (an ONNX file, an engine) under ``workdir``."""
        ...

    def profile(
        self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol
    ) -> tuple[LatencyStats, float]:
        """Time an artifact; returns its stats and the seconds spent in timed runs (the bare measurement time)."""
        ...
