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
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from hwnas.errors import BackendUnavailable

if TYPE_CHECKING:
    import torch
    from torch import nn

log = logging.getLogger(__name__)


def export_onnx(
    model: nn.Module, input_shape: Sequence[int], path: str | Path, *, opset: int = 17, batch_size: int = 1,
    dynamic_batch: bool = False, input_name: str = "input", dtype: torch.dtype | None = None,
) -> Path:
    """Export ``model`` (put in eval mode) to ONNX at a fixed batch size (or a dynamic one); returns the path.

    Uses torch's TorchScript-based exporter (fast, single file); falls back to the dynamo exporter
    where the former is unavailable. With ``dynamic_batch`` the first axis of the input and the output is
    named ``batch`` and left free (traced at ``batch_size``). The input is ``input_name``, of ``dtype`` (default
    float32).
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    dummy = torch.zeros(batch_size, *input_shape, dtype=dtype)
    tmp = path.with_name(path.name + ".part")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, (dummy,), str(tmp), dynamo=False, opset_version=opset,
                              input_names=[input_name], output_names=["output"],
                              dynamic_axes=({input_name: {0: "batch"}, "output": {0: "batch"}} if dynamic_batch
                                            else None))
        except TypeError:  # a torch without the TorchScript exporter
            # positional: the one input
            shapes = (({0: torch.export.Dim("batch", min=1)},) if dynamic_batch else None)
            torch.onnx.export(model, (dummy,), str(tmp), opset_version=max(opset, 18), dynamic_shapes=shapes,
                              input_names=[input_name], output_names=["output"], external_data=False)
    os.replace(tmp, path)
    return path


def max_export_opset() -> tuple[int, str]:
    """The newest ONNX opset :func:`export_onnx` can write here, and what limits it (the installed onnx, or
    torch's TorchScript exporter, which it uses where torch has it)."""
    import onnx
    import torch

    newest, why = int(onnx.defs.onnx_opset_version()), f"the installed onnx {onnx.__version__}"
    try:
        from torch.onnx import _constants

        torch_max = int(_constants.ONNX_MAX_OPSET)  # what torch.onnx.export accepts (measured: 23 on torch 2.14)
    except (ImportError, AttributeError):  # a torch without these constants: onnx's limit alone
        return newest, why
    if torch_max < newest:
        newest, why = torch_max, f"torch {torch.__version__}'s ONNX exporter"
    return newest, why


def quantize_int8(fp32: str | Path, out: str | Path, input_shape: Sequence[int], *, batch_size: int = 1,
                  calibration_batches: int = 4, seed: int = 0, calibration: np.ndarray | None = None,
                  symmetric: bool = False) -> Path:
    """Static int8 quantisation of an ONNX graph with onnxruntime (QDQ format: int8 weights, uint8 activations).

    ``symmetric``: int8 activations and weights, both with zero points 0: the explicit quantisation TensorRT
    builds (it takes symmetric signed int8 Q/DQ only), instead of onnxruntime's preferred uint8 activations.

    Activation ranges are calibrated (MinMax) on ``calibration_batches`` standard-normal batches of
    ``input_shape``: a latency measurement needs the int8 graph, not its accuracy. An export that is judged for
    accuracy passes ``calibration``, real inputs of shape ``(n, *input_shape)`` (the experiment's training
    images), fed ``batch_size`` at a time.

    Raises:
        ValueError: The graph could not be quantised (onnxruntime's own message).
    """
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Batches(CalibrationDataReader):
        def __init__(self) -> None:
            if calibration is not None:
                xs = np.asarray(calibration, dtype=np.float32)
                usable = len(xs) - len(xs) % batch_size
                if usable == 0:
                    raise ValueError(f"int8 calibration needs at least {batch_size} input(s), got {len(xs)}")
                self._left = [{"input": xs[i : i + batch_size]} for i in range(0, usable, batch_size)]
                return
            rng = np.random.default_rng(seed)
            self._left = [{"input": rng.standard_normal((batch_size, *input_shape)).astype(np.float32)}
                          for _ in range(calibration_batches)]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self._left.pop() if self._left else None

    from onnxruntime.quantization.shape_inference import quant_pre_process

    out = Path(out)
    tmp = out.with_name(out.name + ".part")
    prepared = out.with_name(out.name + ".pre.onnx")
    import onnxruntime

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # onnxruntime's quantiser logs advice through the root logger, per graph
    onnxruntime.set_default_logger_severity(3)  # and its sessions warn of every initializer they drop, per unit
    try:
        try:  # the pre-processing onnxruntime recommends (shape inference, graph optimisation); optional
            quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=True)
            source = prepared
        except Exception:
            source = Path(fp32)
        quantize_static(str(source), str(tmp), _Batches(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
                        weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True} if symmetric else None)
    except Exception as exc:  # onnxruntime raises many kinds; one message naming the graph
        tmp.unlink(missing_ok=True)
        raise ValueError(f"int8 quantisation of {Path(fp32).name} failed: {type(exc).__name__}: {exc}") from None
    finally:
        root.setLevel(level)
        onnxruntime.set_default_logger_severity(2)  # onnxruntime's default: warnings
        prepared.unlink(missing_ok=True)
    os.replace(tmp, out)
    return out


def import_onnxruntime() -> ModuleType:
    """The ``onnxruntime`` module, or :class:`BackendUnavailable` saying what to install."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise BackendUnavailable("onnxruntime is not installed: pip install onnxruntime "
                                 "(or onnxruntime-gpu for the CUDA and TensorRT providers)") from exc
    return onnxruntime


def onnx_max_abs_diff(model: nn.Module, model_path: str | Path, x: np.ndarray) -> float:
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


def host_description() -> dict[str, str | int | None]:
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
