"""What the TensorRT Python API backend and the ``trtexec`` backend share: versions, precision plans, typed ONNX.

TensorRT 10 and 11 differ in where numeric precision is decided:

* **TensorRT 10** builds weakly typed networks by default: the ONNX graph stays fp32 and reduced precision is
  *allowed* with a builder flag (``BuilderFlag.FP16`` / ``BF16`` in Python, ``--fp16`` / ``--bf16`` for
  ``trtexec``); TensorRT then picks per layer.
* **TensorRT 11** removed every precision builder flag and every ``trtexec`` precision option: networks are always
  strongly typed, so the precision lives in the ONNX graph itself. For fp16 or bf16 the module is exported to
  ONNX in that dtype (weights, activations and I/O), with nothing but torch, which hwnas already requires. The
  ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` flag is still accepted by TensorRT 11 (deprecated and ignored,
  strong typing being always on) and is set where the enum still has it.

Everything here except :func:`export_typed_onnx` is pure, so the decisions can be tested without TensorRT.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

from hwnas.latency.onnx_export import export_onnx

if TYPE_CHECKING:
    import torch
    from torch import nn

log = logging.getLogger(__name__)

SUPPORTED_PRECISIONS = ("fp32", "fp16", "bf16")
MIN_MAJOR = 10


class TrtVersion(NamedTuple):
    """A TensorRT version, ordered like a tuple."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_trt_version(text: str) -> TrtVersion:
    """``"10.3.0.26"`` (``tensorrt.__version__``), ``"11.1"`` or ``"v11.1.0.106"`` -> :class:`TrtVersion`.

    Raises:
        ValueError: ``text`` does not start with a dotted version number.
    """
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ValueError(f"not a TensorRT version: {text!r}")
    return TrtVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def decode_packed_version(packed: int | str) -> TrtVersion:
    """Decode the integer ``NV_TENSORRT_VERSION`` that ``trtexec`` prints as ``[TensorRT v100300]``.

    TensorRT 10 and later pack ``major * 10000 + minor * 100 + patch`` (``100300`` is 10.3.0, ``110100`` is
    11.1.0); TensorRT 8 and earlier packed ``major * 1000 + minor * 100 + patch`` (``8602`` is 8.6.2).
    """
    value = int(packed)
    if value < 0:
        raise ValueError(f"not a packed TensorRT version: {packed!r}")
    if value >= 100_000:
        return TrtVersion(value // 10_000, (value // 100) % 100, value % 100)
    return TrtVersion(value // 1000, (value // 100) % 10, value % 100)


@dataclass(frozen=True)
class PrecisionPlan:
    """How one (TensorRT version, precision) pair is built.

    Attributes:
        version: The TensorRT version the plan is for.
        precision: ``fp32``, ``fp16`` or ``bf16``.
        onnx_dtype: torch dtype name the module is exported to ONNX in (``float32``, ``float16``, ``bfloat16``).
        network_flags: ``NetworkDefinitionCreationFlag`` member names for ``Builder.create_network``.
        builder_flags: ``BuilderFlag`` member names to set on the builder config.
        trtexec_flags: Precision options for ``trtexec``'s build command.
        strongly_typed: Whether the network is strongly typed (precision taken from the graph).
    """

    version: TrtVersion
    precision: str
    onnx_dtype: str
    network_flags: tuple[str, ...]
    builder_flags: tuple[str, ...]
    trtexec_flags: tuple[str, ...]
    strongly_typed: bool

    def describe(self) -> str:
        """One line, e.g. ``TensorRT 11.1.0 fp16: strongly typed, ONNX graph in float16``."""
        if self.strongly_typed:
            how = f"strongly typed, ONNX graph in {self.onnx_dtype}"
        elif self.builder_flags:
            how = f"weakly typed, fp32 ONNX graph, builder flag(s) {', '.join(self.builder_flags)}"
        else:
            how = "weakly typed, fp32 ONNX graph"
        return f"TensorRT {self.version} {self.precision}: {how}"


_ONNX_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_TRT10_BUILDER_FLAG = {"fp32": (), "fp16": ("FP16",), "bf16": ("BF16",)}
_TRT10_TRTEXEC_FLAG = {"fp32": (), "fp16": ("--fp16",), "bf16": ("--bf16",)}


def precision_plan(version: TrtVersion, precision: str) -> PrecisionPlan:
    """The decision table: builder flags (TensorRT 10) or graph dtype (TensorRT 11 and later) for a precision.

    Raises:
        ValueError: An unsupported precision (int8 needs calibration or Q/DQ nodes, which hwnas does not make)
            or a TensorRT older than 10.
    """
    if precision not in SUPPORTED_PRECISIONS:
        hint = " (int8 needs calibration or Q/DQ nodes in the graph)" if precision == "int8" else ""
        raise ValueError(f"TensorRT precision {precision!r} is not supported{hint}; "
                         f"choose one of {', '.join(SUPPORTED_PRECISIONS)}")
    if version.major < MIN_MAJOR:
        raise ValueError(f"TensorRT {version} is not supported: hwnas needs TensorRT 10 or 11 "
                         "(pip install -U tensorrt)")
    if version.major == 10:
        return PrecisionPlan(version=version, precision=precision, onnx_dtype="float32", network_flags=(),
                             builder_flags=_TRT10_BUILDER_FLAG[precision], trtexec_flags=_TRT10_TRTEXEC_FLAG[precision],
                             strongly_typed=False)
    return PrecisionPlan(version=version, precision=precision, onnx_dtype=_ONNX_DTYPE[precision],
                         network_flags=("STRONGLY_TYPED",), builder_flags=(), trtexec_flags=(), strongly_typed=True)


def flag_bits(names: Iterable[str], enum: object) -> int:
    """OR of ``1 << int(enum.NAME)`` over ``names``: the bit mask ``create_network`` takes.

    A name ``enum`` no longer has is skipped with a log line (TensorRT 11 keeps ``STRONGLY_TYPED`` only as an
    ignored, deprecated member, which a later release may drop).
    """
    bits = 0
    for name in names:
        member = getattr(enum, name, None)
        if member is None:
            log.info("TensorRT has no network creation flag %s (strong typing is always on); not set", name)
            continue
        bits |= 1 << int(member)
    return bits


def parse_device_index(device: str | int) -> int:
    """``0``, ``"1"``, ``"cuda"`` or ``"cuda:1"`` -> the CUDA device index.

    Raises:
        ValueError: Anything else (a CPU device, say).
    """
    if isinstance(device, int):
        index = device
    else:
        m = re.fullmatch(r"\s*(?:(?:cuda|gpu)(?::(\d+))?|(\d+))\s*", str(device).lower())
        if not m:
            raise ValueError(f"TensorRT runs on a CUDA device: expected cuda, cuda:N or N, got {device!r}")
        index = int(m.group(1) or m.group(2) or 0)
    if index < 0:
        raise ValueError(f"CUDA device index must be >= 0, got {index}")
    return index


def export_typed_onnx(model: nn.Module, input_shape: Sequence[int], path: str | Path, *, dtype: str = "float32",
                      opset: int = 17, batch_size: int = 1) -> Path:
    """Export ``model`` to ONNX with weights, activations and I/O in ``dtype`` (for strongly typed TensorRT).

    ``float32`` is :func:`hwnas.latency.onnx_export.export_onnx`. For ``float16`` / ``bfloat16`` a copy of the
    module (the caller's module is left as it is) is cast and traced with an input of that dtype, on the CPU, or
    on the GPU where a CPU kernel for the dtype is missing and CUDA is available.
    """
    if dtype == "float32":
        return export_onnx(model, input_shape, path, opset=opset, batch_size=batch_size)
    import torch

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype) or not torch_dtype.is_floating_point:
        raise ValueError(f"cannot export ONNX in dtype {dtype!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    last: Exception | None = None
    for device in devices:
        typed = copy.deepcopy(model).eval().to(device=device, dtype=torch_dtype)
        dummy = torch.zeros(batch_size, *input_shape, dtype=torch_dtype, device=device)
        try:
            _torch_onnx_export(torch, typed, dummy, tmp, opset)
        except RuntimeError as exc:  # e.g. no CPU kernel for the dtype: try the GPU
            last = exc
            log.info("ONNX export in %s on %s failed (%s)%s", dtype, device, exc,
                     "; retrying on cuda" if device != devices[-1] else "")
            continue
        os.replace(tmp, path)
        return path
    raise RuntimeError(f"could not export the module to ONNX in {dtype}: {last}") from last


def _torch_onnx_export(torch: ModuleType, model: nn.Module, dummy: torch.Tensor, path: Path, opset: int) -> None:
    """TorchScript-based exporter (one file), or the dynamo exporter where torch no longer has the former."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, (dummy,), str(path), dynamo=False, opset_version=opset,
                              input_names=["input"], output_names=["output"])
        except TypeError:
            torch.onnx.export(model, (dummy,), str(path), opset_version=max(opset, 18),
                              input_names=["input"], output_names=["output"], external_data=False)
