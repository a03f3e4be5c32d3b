"""TensorRT backend through TensorRT's Python API (versions 10 and 11).

``convert`` exports the module to ONNX, parses it with ``trt.OnnxParser`` into a network made by
``Builder.create_network``, builds a serialized engine with a workspace memory-pool limit and writes
``<name>.engine``. ``profile`` deserializes it with ``trt.Runtime``, binds one torch CUDA tensor per I/O tensor by
name (``set_tensor_address``), runs ``execute_async_v3`` on a torch CUDA stream and times each run with CUDA
events. Device buffers are torch CUDA tensors, so ``check`` requires torch with CUDA as well as ``tensorrt``.

Precision: TensorRT 10 keeps the ONNX graph fp32 and sets ``BuilderFlag.FP16`` / ``BF16``; TensorRT 11 has no
precision flags (networks are strongly typed), so the module is exported in fp16 / bf16 (see
:mod:`hwnas.latency.backends.trt_common`). Explicit batch needs no flag on either: it is the only mode since
TensorRT 10.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hwnas.errors import BackendUnavailable
from hwnas.latency.backends.trt_common import (
    MIN_MAJOR,
    PrecisionPlan,
    TrtVersion,
    export_typed_onnx,
    flag_bits,
    parse_device_index,
    parse_trt_version,
    precision_plan,
)
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol, time_cuda_events

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

#: ``tensorrt.DataType`` member name -> torch dtype name, for the I/O types a buffer can be made for.
TRT_TO_TORCH_DTYPE = {
    "FLOAT": "float32",
    "HALF": "float16",
    "BF16": "bfloat16",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
}


@dataclass(frozen=True)
class IOTensor:
    """One I/O tensor of an engine.

    Attributes:
        name: Tensor name (what ``set_tensor_address`` binds).
        is_input: Input (True) or output.
        shape: Dimensions; -1 marks a dynamic one (engine shapes only, before :func:`plan_io` resolves inputs).
        dtype: ``tensorrt.DataType`` member name (``FLOAT``, ``HALF``, ...).
    """

    name: str
    is_input: bool
    shape: tuple[int, ...]
    dtype: str

    @property
    def torch_dtype(self) -> str:
        return TRT_TO_TORCH_DTYPE[self.dtype]


def plan_io(tensors: Sequence[IOTensor], input_shape: Sequence[int]) -> list[IOTensor]:
    """Check an engine's I/O tensors against the requested input shape and resolve the input's dynamic dims.

    hwnas engines have one input (``(batch, *shape)``) and at least one output. Output shapes are returned as
    given: where the engine has dynamic ones, read them from the execution context after setting the input
    shape and check them with :func:`require_static`.

    Raises:
        ValueError: No input or more than one, no output, a rank or static-dimension mismatch, or an I/O type
            no buffer can be made for.
    """
    inputs = [t for t in tensors if t.is_input]
    outputs = [t for t in tensors if not t.is_input]
    names = ", ".join(t.name for t in tensors) or "none"
    if len(inputs) != 1:
        raise ValueError(f"the engine has {len(inputs)} input tensors ({names}); hwnas engines have exactly one")
    if not outputs:
        raise ValueError(f"the engine has no output tensor ({names})")
    for t in tensors:
        if t.dtype not in TRT_TO_TORCH_DTYPE:
            raise ValueError(f"tensor {t.name!r} has type {t.dtype}, for which no buffer can be allocated "
                             f"(supported: {', '.join(TRT_TO_TORCH_DTYPE)})")
    (inp,) = inputs
    want = tuple(int(d) for d in input_shape)
    if len(inp.shape) != len(want):
        raise ValueError(f"input {inp.name!r} has shape {inp.shape}, which does not fit the requested {want}")
    for have, asked in zip(inp.shape, want, strict=True):
        if have >= 0 and have != asked:
            raise ValueError(f"input {inp.name!r} has shape {inp.shape}, which does not fit the requested {want}")
    resolved = IOTensor(name=inp.name, is_input=True, shape=want, dtype=inp.dtype)
    return [resolved if t.is_input else t for t in tensors]


def require_static(name: str, shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` as a tuple; a ValueError naming ``name`` if a dimension is still dynamic (negative)."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"tensor {name!r} still has a dynamic shape {dims} after the input shape was set")
    return dims


def _import_trt() -> ModuleType:
    try:
        import tensorrt
    except ImportError as exc:
        raise BackendUnavailable("TensorRT's Python package is not installed: pip install tensorrt") from exc
    return tensorrt


def _trt_logger(trt: Any) -> Any:
    """A ``trt.ILogger`` that forwards TensorRT's messages to :mod:`logging` and keeps the last error."""

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: object, msg: str) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR):
                self.errors.append(msg)
                log.error("TensorRT: %s", msg)
            elif severity == trt.ILogger.WARNING:
                log.warning("TensorRT: %s", msg)
            else:
                log.debug("TensorRT: %s", msg)

    return _Logger()


class TensorRTBackend:
    """TensorRT 10 / 11 through its Python API, I/O buffers as torch CUDA tensors, timed with CUDA events.

    Args:
        precision: ``fp32``, ``fp16`` or ``bf16`` (see the module docstring for how each TensorRT major builds it).
        batch_size: Batch size of the exported graph and the timed input.
        opset: ONNX opset of the export.
        workspace_mib: Workspace memory-pool limit of the builder, in MiB.
        device: CUDA device: ``0``, ``cuda`` or ``cuda:N``.
        builder_optimization_level: TensorRT's builder optimization level (0-5); TensorRT's default when None.
    """

    name = "tensorrt"

    def __init__(self, *, precision: str = "fp32", batch_size: int = 1, opset: int = 17, workspace_mib: int = 1024,
                 device: str | int = 0, builder_optimization_level: int | None = None) -> None:
        if precision not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"tensorrt backend: precision {precision!r} is not supported (fp32, fp16, bf16)")
        if batch_size < 1:
            raise ValueError(f"tensorrt backend: batch_size must be >= 1, got {batch_size}")
        if workspace_mib < 1:
            raise ValueError(f"tensorrt backend: workspace_mib must be >= 1, got {workspace_mib}")
        self.precision = precision
        self.batch_size = batch_size
        self.opset = opset
        self.workspace_mib = workspace_mib
        self.device_index = parse_device_index(device)
        self.builder_optimization_level = builder_optimization_level

    def version(self) -> TrtVersion:
        """The installed TensorRT's version (``tensorrt.__version__``)."""
        return parse_trt_version(_import_trt().__version__)

    def plan(self) -> PrecisionPlan:
        """The precision plan for the installed TensorRT."""
        return precision_plan(self.version(), self.precision)

    def _torch_cuda(self) -> ModuleType:
        try:
            import torch
        except ImportError as exc:
            raise BackendUnavailable("the tensorrt backend allocates its I/O buffers as torch CUDA tensors: "
                                     "torch is not installed (pip install torch)") from exc
        if not torch.cuda.is_available():
            raise BackendUnavailable(f"the tensorrt backend needs a CUDA GPU: torch {torch.__version__} sees none "
                                     "(torch.cuda.is_available() is False)")
        if self.device_index >= torch.cuda.device_count():
            raise BackendUnavailable(f"cuda:{self.device_index} does not exist: torch sees "
                                     f"{torch.cuda.device_count()} CUDA device(s)")
        return torch

    def check(self) -> str:
        trt = _import_trt()
        version = parse_trt_version(trt.__version__)
        if version.major < MIN_MAJOR:
            raise BackendUnavailable(f"TensorRT {trt.__version__} is too old: hwnas needs TensorRT 10 or 11 "
                                     "(pip install -U tensorrt)")
        plan = precision_plan(version, self.precision)
        torch = self._torch_cuda()
        gpu = torch.cuda.get_device_name(self.device_index)
        return f"{plan.describe()} on cuda:{self.device_index} ({gpu})"

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        trt = _import_trt()
        return DeviceContext(device=device, runtime="tensorrt", runtime_version=trt.__version__, provider=None,
                             precision=self.precision,  # type: ignore[arg-type]
                             batch_size=self.batch_size, threads=None, input_resolution=input_resolution)

    def convert(self, model: nn.Module, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        """Export ``workdir/<name>.onnx`` in the plan's dtype and build ``workdir/<name>.engine`` from it."""
        trt = _import_trt()
        plan = precision_plan(parse_trt_version(trt.__version__), self.precision)
        workdir = Path(workdir)
        onnx_path = export_typed_onnx(model, input_shape, workdir / f"{name}.onnx", dtype=plan.onnx_dtype,
                                      opset=self.opset, batch_size=self.batch_size)
        engine_path = workdir / f"{name}.engine"
        self.build_engine(onnx_path, engine_path, plan)
        return engine_path

    def build_engine(self, onnx_path: Path, engine_path: Path, plan: PrecisionPlan) -> Path:
        """Parse ``onnx_path`` and serialize an engine to ``engine_path`` per ``plan``.

        Raises:
            RuntimeError: The parser rejects the graph or the builder returns no engine (TensorRT's first error
                is in the message).
        """
        trt = _import_trt()
        logger = _trt_logger(trt)
        builder = trt.Builder(logger)
        network = builder.create_network(flag_bits(plan.network_flags, trt.NetworkDefinitionCreationFlag))
        parser = trt.OnnxParser(network, logger)
        if not parser.parse_from_file(str(onnx_path)):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors[0] if errors else 'unknown error'}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, self.workspace_mib << 20)
        for flag in plan.builder_flags:
            config.set_flag(getattr(trt.BuilderFlag, flag))
        if self.builder_optimization_level is not None:
            config.builder_optimization_level = self.builder_optimization_level
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            why = logger.errors[-1] if logger.errors else "see the TensorRT log"
            raise RuntimeError(f"TensorRT could not build an engine from {onnx_path}: {why}")
        engine_path = Path(engine_path)
        tmp = engine_path.with_name(engine_path.name + ".part")
        with open(tmp, "wb") as fh:
            fh.write(serialized)
        os.replace(tmp, engine_path)
        log.info("built %s (%s)", engine_path, plan.describe())
        return engine_path

    def profile(
        self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol
    ) -> tuple[LatencyStats, float]:
        trt = _import_trt()
        torch = self._torch_cuda()
        device = torch.device("cuda", self.device_index)
        logger = _trt_logger(trt)
        with torch.cuda.device(device):
            runtime = trt.Runtime(logger)
            engine = runtime.deserialize_cuda_engine(Path(artifact).read_bytes())
            if engine is None:
                why = logger.errors[-1] if logger.errors else "see the TensorRT log"
                raise RuntimeError(f"TensorRT could not deserialize {artifact}: {why}")
            context = engine.create_execution_context()
            tensors = []
            for i in range(engine.num_io_tensors):
                tname = engine.get_tensor_name(i)
                tensors.append(IOTensor(name=tname, is_input=engine.get_tensor_mode(tname) == trt.TensorIOMode.INPUT,
                                        shape=tuple(engine.get_tensor_shape(tname)),
                                        dtype=engine.get_tensor_dtype(tname).name))
            plan = plan_io(tensors, (self.batch_size, *input_shape))
            for t in plan:
                if t.is_input and not context.set_input_shape(t.name, t.shape):
                    raise RuntimeError(f"TensorRT rejected input shape {t.shape} for {t.name!r}")
            gen = torch.Generator(device=device).manual_seed(0)
            buffers: dict[str, Any] = {}
            for t in plan:
                shape = t.shape if t.is_input else require_static(t.name, context.get_tensor_shape(t.name))
                dtype = getattr(torch, t.torch_dtype)
                buf = torch.empty(shape, dtype=dtype, device=device)
                if t.is_input and buf.is_floating_point():
                    buf.normal_(generator=gen)
                else:
                    buf.zero_()
                buffers[t.name] = buf
                if not context.set_tensor_address(t.name, buf.data_ptr()):
                    raise RuntimeError(f"TensorRT rejected the buffer address for {t.name!r}")
            torch.cuda.synchronize(device)  # the inputs were filled on the default stream
            stream = torch.cuda.Stream(device=device)
            handle = stream.cuda_stream

            def run() -> None:
                if not context.execute_async_v3(handle):
                    raise RuntimeError(f"TensorRT execute_async_v3 failed for {artifact}")

            stats, seconds = time_cuda_events(run, protocol, stream=stream)
            buffers.clear()  # the engine no longer runs: the tensors may go
        return stats, seconds
