"""torch backend: eager PyTorch on the CPU (pinned threads) or on a CUDA GPU (timed with CUDA events).

The artifact is the module itself, kept in memory by the backend instance that converted it; ``convert`` writes a
small JSON marker ``<name>.torch.json`` naming it, so the artifact has a path like the other backends'. Nothing is
pickled: a marker is valid only in the process (and backend) that wrote it, and any other use is refused clearly.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hwnas.errors import BackendUnavailable
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol, time_callable, time_cuda_events, time_cuda_graph

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _import_torch() -> ModuleType:
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable("torch is not installed: pip install torch") from exc
    return torch


class TorchBackend:
    """Eager PyTorch under ``torch.inference_mode()``.

    On the CPU the intra-op thread count is pinned with ``torch.set_num_threads`` for the measurement and
    restored after; each run is timed with ``perf_counter``. On CUDA each run is timed with a pair of CUDA
    events (see :func:`time_cuda_events`), with ``torch.backends.cudnn.benchmark`` set as configured; with
    ``cuda_graph`` each artifact is captured once as a CUDA graph and its replays are timed instead
    (:func:`~hwnas.latency.measure.time_cuda_graph`): the GPU's own work without the host's kernel launches. The
    context's provider is then ``cuda-graph``, so a table of one kind is never judged or used as the other.

    Reduced precision casts the module and its input (``.half()`` / ``.bfloat16()``), as a deployment would:
    fp16 on CUDA only (CPU fp16 kernels are not a deployment target), bf16 on CUDA and on CPUs.

    Args:
        device: ``cpu``, ``cuda`` or ``cuda:N``.
        threads: Intra-op threads on the CPU (ignored on CUDA).
        precision: ``fp32``, ``fp16`` (CUDA) or ``bf16``.
        batch_size: Batch size of the timed input.
        cudnn_benchmark: Let cuDNN pick the fastest convolution algorithms (CUDA only), as deployments do.
        cuda_graph: Time CUDA-graph replays rather than eager runs (CUDA only).
    """

    name = "torch"

    def __init__(self, *, device: str = "cpu", threads: int = 1, precision: str = "fp32", batch_size: int = 1,
                 cudnn_benchmark: bool = True, cuda_graph: bool = False) -> None:
        device = str(device).strip().lower()
        if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
            raise ValueError(f"torch backend: device must be cpu, cuda or cuda:N, got {device!r}")
        if precision not in _TORCH_DTYPES:
            raise ValueError(f"torch backend: precision {precision!r} is not supported ({', '.join(_TORCH_DTYPES)})")
        if precision == "fp16" and device == "cpu":
            raise ValueError("torch backend: fp16 runs on cuda only (use fp32 or bf16 on the cpu)")
        if cuda_graph and device == "cpu":
            raise ValueError("torch backend: cuda_graph needs a CUDA device (device cuda or cuda:N)")
        if threads < 1:
            raise ValueError(f"torch backend: threads must be >= 1, got {threads}")
        if batch_size < 1:
            raise ValueError(f"torch backend: batch_size must be >= 1, got {batch_size}")
        self.device = device
        self.threads = threads
        self.precision = precision
        self.batch_size = batch_size
        self.cudnn_benchmark = cudnn_benchmark
        self.cuda_graph = bool(cuda_graph)
        self._modules: dict[str, Any] = {}

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def check(self) -> str:
        torch = _import_torch()
        if not self.is_cuda:
            return f"torch {torch.__version__} on the cpu ({self.threads} thread(s), {self.precision})"
        if not torch.cuda.is_available():
            raise BackendUnavailable(f"CUDA is not available to torch {torch.__version__} "
                                     "(torch.cuda.is_available() is False): install a CUDA build of torch on a "
                                     "machine with an NVIDIA GPU, or use device cpu")
        index = torch.device(self.device).index or 0
        if index >= torch.cuda.device_count():
            raise BackendUnavailable(f"{self.device} does not exist: torch sees {torch.cuda.device_count()} "
                                     "CUDA device(s)")
        return (f"torch {torch.__version__} on {self.device} ({torch.cuda.get_device_name(index)}, "
                f"CUDA {torch.version.cuda}, {self.precision}{', CUDA graphs' if self.cuda_graph else ''})")

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        torch = _import_torch()
        return DeviceContext(device=device, runtime="torch", runtime_version=torch.__version__,
                             provider=("cuda-graph" if self.cuda_graph else "cuda") if self.is_cuda else "cpu",
                             precision=self.precision,  # type: ignore[arg-type]
                             batch_size=self.batch_size, threads=None if self.is_cuda else self.threads,
                             input_resolution=input_resolution)

    def convert(self, model: nn.Module, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        """Keep a copy of the module in this backend and write ``workdir/<name>.torch.json`` naming it."""
        import copy

        torch = _import_torch()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"torch backend: expected a torch.nn.Module, got {type(model).__name__}")
        token = uuid.uuid4().hex
        self._modules[token] = copy.deepcopy(model)
        path = Path(workdir) / f"{name}.torch.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"torch_module": token, "pid": os.getpid(), "class": type(model).__name__}))
        return path

    def load(self, artifact: Path) -> nn.Module:
        """The module :meth:`convert` kept for this marker, in eval mode, on the CPU in fp32."""
        try:
            token = json.loads(Path(artifact).read_text())["torch_module"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{artifact} is not a torch backend artifact ({exc})") from None
        model = self._modules.get(token)
        if model is None:
            raise ValueError(f"{artifact}: its module lives in the process and backend that converted it; "
                             "convert it again here")
        return model.eval()

    def profile(
        self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol
    ) -> tuple[LatencyStats, float]:
        torch = _import_torch()
        if self.is_cuda:
            self.check()
        dtype = getattr(torch, _TORCH_DTYPES[self.precision])
        device = torch.device(self.device)
        model = self.load(artifact).to(device=device, dtype=dtype)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(self.batch_size, *input_shape, generator=gen).to(device=device, dtype=dtype)

        def run() -> object:
            return model(x)

        with torch.inference_mode():
            if not self.is_cuda:
                previous = torch.get_num_threads()
                torch.set_num_threads(self.threads)
                try:
                    return time_callable(run, protocol)
                finally:
                    torch.set_num_threads(previous)
            previous_benchmark = torch.backends.cudnn.benchmark
            torch.backends.cudnn.benchmark = self.cudnn_benchmark
            try:
                with torch.cuda.device(device):
                    return (time_cuda_graph if self.cuda_graph else time_cuda_events)(run, protocol)
            finally:
                torch.backends.cudnn.benchmark = previous_benchmark
