"""ONNX export of torch modules, an export check against onnxruntime, and host facts for measurement contexts.

Imports no backend: the backends import this module.
"""

from __future__ import annotations

import logging
import os
import platform
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import BackendUnavailable

log = logging.getLogger(__name__)


def export_onnx(
    model: Any, input_shape: Sequence[int], path: str | Path, *, opset: int = 17, batch_size: int = 1
) -> Path:
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


def import_onnxruntime() -> Any:
    """The ``onnxruntime`` module, or :class:`BackendUnavailable` saying what to install."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise BackendUnavailable("onnxruntime is not installed: pip install onnxruntime "
                                 "(or onnxruntime-gpu for the CUDA and TensorRT providers)") from exc
    return onnxruntime


def onnx_max_abs_diff(model: Any, model_path: str | Path, x: np.ndarray) -> float:
    """Largest absolute difference between the torch model and its ONNX file on input ``x``.

    The ONNX file runs on onnxruntime's CPU provider with one thread (a correctness check, not a timing).
    """
    import torch

    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
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
    ort = import_onnxruntime()
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "onnxruntime": ort.__version__}
