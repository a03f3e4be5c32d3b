"""onnxruntime backend: CPU, CUDA and TensorRT execution providers, whichever are installed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.errors import BackendUnavailable
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol, time_callable
from hwnas.latency.onnx_export import export_onnx, import_onnxruntime, quantize_int8

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from torch import nn

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


class OnnxRuntimeBackend:
    """onnxruntime with a pinned thread count on one execution provider (cpu, cuda or tensorrt).

    Args:
        provider: ``cpu``, ``cuda`` or ``tensorrt`` (or a full provider name).
        threads: Intra-op threads (CPU provider).
        batch_size: Batch size of the exported graphs.
        opset: ONNX opset of the export.
        precision: ``fp32``; ``fp16`` with the TensorRT provider (``trt_fp16_enable``); ``int8`` with the CPU
            provider: the graph is statically quantised (QDQ, :func:`~hwnas.latency.onnx_export.quantize_int8`).
    """

    name = "onnxruntime"

    def __init__(self, *, provider: str = "cpu", threads: int = 1, batch_size: int = 1, opset: int = 17,
                 precision: str = "fp32") -> None:
        self.provider = PROVIDERS.get(provider, provider)
        if not self.provider.endswith("ExecutionProvider"):
            raise ValueError(f"onnxruntime backend: unknown provider {provider!r}; one of {', '.join(PROVIDERS)} "
                             "(or an onnxruntime provider's full name, ...ExecutionProvider)")
        self.threads = threads
        self.batch_size = batch_size
        self.opset = opset
        self.precision = precision
        if precision not in ("fp32", "fp16", "int8"):
            raise ValueError(f"onnxruntime backend: precision {precision!r} is not supported (fp32, fp16, int8)")
        if precision == "fp16" and self.provider != PROVIDERS["tensorrt"]:
            raise ValueError("onnxruntime backend: fp16 needs the tensorrt provider (the graph itself is fp32)")
        if precision == "int8" and self.provider != PROVIDERS["cpu"]:
            raise ValueError("onnxruntime backend: int8 is measured on the cpu provider (a statically quantised "
                             "QDQ graph)")

    def _ort(self) -> ModuleType:
        return import_onnxruntime()

    def check(self) -> str:
        ort = self._ort()
        available = ort.get_available_providers()
        if self.provider not in available:
            hint = " (pip install onnxruntime-gpu)" if self.provider != PROVIDERS["cpu"] else ""
            raise BackendUnavailable(f"onnxruntime {ort.__version__} has no {self.provider}{hint}; "
                                     f"available: {', '.join(available)}")
        return f"onnxruntime {ort.__version__} with {self.provider}"

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        ort = self._ort()
        return DeviceContext(device=device, runtime="onnxruntime", runtime_version=ort.__version__,
                             provider=self.provider, precision=self.precision,  # type: ignore[arg-type]
                             batch_size=self.batch_size,
                             threads=self.threads if self.provider == PROVIDERS["cpu"] else None,
                             input_resolution=input_resolution)

    def convert(self, model: nn.Module, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        if self.precision != "int8":
            return export_onnx(model, input_shape, Path(workdir) / f"{name}.onnx", opset=self.opset,
                               batch_size=self.batch_size)
        fp32 = export_onnx(model, input_shape, Path(workdir) / f"{name}.fp32.onnx", opset=self.opset,
                           batch_size=self.batch_size)
        try:
            return quantize_int8(fp32, Path(workdir) / f"{name}.onnx", input_shape, batch_size=self.batch_size)
        finally:
            fp32.unlink(missing_ok=True)

    def session(self, artifact: Path) -> InferenceSession:
        ort = self._ort()
        self.check()
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        providers: list[Any] = [self.provider]
        if self.provider == PROVIDERS["tensorrt"]:
            providers = [(self.provider, {"trt_fp16_enable": self.precision == "fp16"}), PROVIDERS["cuda"]]
        return ort.InferenceSession(str(artifact), so, providers=providers)

    def profile(
        self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol
    ) -> tuple[LatencyStats, float]:
        session = self.session(artifact)
        x = example_input(session.get_inputs()[0].type, (self.batch_size, *input_shape))
        feed = {session.get_inputs()[0].name: x}
        if self.provider == PROVIDERS["cpu"]:
            return time_callable(lambda: session.run(None, feed), protocol)
        # device providers: bind input and output on the device so copies stay out of the timing
        binding = session.io_binding()
        device = "cuda"
        import onnxruntime as ort

        x_dev = ort.OrtValue.ortvalue_from_numpy(x, device, 0)
        binding.bind_ortvalue_input(session.get_inputs()[0].name, x_dev)
        binding.bind_output(session.get_outputs()[0].name, device)
        return time_callable(lambda: session.run_with_iobinding(binding), protocol,
                             sync=binding.synchronize_outputs)


def example_input(onnx_type: str, shape: Sequence[int]) -> np.ndarray:
    """A seeded input of ``shape`` in the graph input's own type (onnxruntime's ``NodeArg.type``): uniform
    ``0..255`` for ``tensor(uint8)`` (a graph that takes raw images), standard-normal ``float16`` for
    ``tensor(float16)``, else standard-normal ``float32``. The values do not change the time; the type must fit."""
    rng = np.random.default_rng(0)
    if onnx_type == "tensor(uint8)":
        return rng.integers(0, 256, size=tuple(shape), dtype=np.uint8)
    x = rng.standard_normal(tuple(shape))
    return x.astype(np.float16 if onnx_type == "tensor(float16)" else np.float32)
