"""The files of an export beyond fp32 ONNX, and the re-measurement of every exported model.

Each writer returns the part of the model's card that describes its file: what it is, how it was checked and,
where the experiment has data, its own top-1 on the held-out split. A format that cannot be made here says why
on the card instead of failing the whole export (a TensorRT engine without TensorRT: the card carries the
exact ``trtexec`` line to run on the target).

Re-measurement (:func:`measure_targets`, :func:`remeasure`) times the exported files themselves, end to end, on
every context of the experiment that this host can measure, beside the figure the search used for it (the
search's own measurement, or the latency table's or model's prediction) and the error between them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from torch import nn

    from hwnas.data.preprocess import InputContract

log = logging.getLogger(__name__)

#: Every format ``nas export --formats`` knows, and what it writes.
FORMATS: dict[str, str] = {
    "onnx": "<id>.onnx: fp32 ONNX (simplified with onnxslim, checked in onnxruntime against torch)",
    "onnx_fp16": "<id>.fp16.onnx: weights, activations and I/O in float16, for strongly typed TensorRT",
    "onnx_int8": "<id>.int8.onnx: onnxruntime static quantisation (QDQ) calibrated on the training images",
    "torch_export": "<id>.pt2: a torch.export program (torch.export.load)",
    "tensorrt": "<id>.engine: a TensorRT engine where TensorRT and a GPU are present, else the trtexec line",
}

#: The file name suffix of each format.
SUFFIX: dict[str, str] = {"onnx": ".onnx", "onnx_fp16": ".fp16.onnx", "onnx_int8": ".int8.onnx",
                          "torch_export": ".pt2", "tensorrt": ".engine"}


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"onnx,onnx_int8"``, ``"all"`` or a list -> the formats in canonical order (``onnx`` always first).

    Raises:
        ValueError: An unknown format, named with the known ones.
    """
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if items == ["all"]:
        return tuple(FORMATS)
    unknown = [t for t in items if t not in FORMATS]
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(map(repr, unknown))}; known: all, {', '.join(FORMATS)}")
    chosen = {"onnx", *items}  # every other format is derived from, or judged against, the fp32 ONNX file
    return tuple(f for f in FORMATS if f in chosen)


def simplify_onnx(path: Path) -> str | None:
    """Simplify an ONNX file in place with onnxslim; returns None, or why the file was left as exported."""
    try:
        import onnx
        import onnxslim
    except ImportError as exc:
        return f"onnxslim is not installed ({exc.name}): pip install onnxslim"
    try:
        slim = onnxslim.slim(onnx.load(str(path)))
        if slim is None:
            return "onnxslim returned no model"
        tmp = path.with_name(path.name + ".slim.part")
        onnx.save(slim, str(tmp))
        tmp.replace(path)
    except Exception as exc:  # onnxslim raises many kinds; the unsimplified file is still a valid export
        return f"onnxslim failed: {type(exc).__name__}: {str(exc)[:200]}"
    return None


def ort_session(path: Path, *, threads: int = 1) -> InferenceSession:
    """An onnxruntime CPU session on one thread (correctness checks and top-1, not timing)."""
    from hwnas.latency.onnx_export import import_onnxruntime

    ort = import_onnxruntime()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_outputs(path: Path, xs: np.ndarray, *, dynamic_batch: bool = False, batch: int = 64) -> np.ndarray:
    """The ONNX file's outputs (as float32) on inputs ``xs`` (n, C, H, W): one image a run at a fixed batch of 1,
    ``batch`` at a time when the batch axis is dynamic. The input is cast to the graph's own input type."""
    session = ort_session(path)
    inp = session.get_inputs()[0]
    dtype = np.float16 if "float16" in inp.type else np.float32
    step = batch if dynamic_batch else 1
    outs = [session.run(None, {inp.name: xs[i : i + step].astype(dtype)})[0].astype(np.float32)
            for i in range(0, len(xs), step)]
    return np.concatenate(outs) if outs else np.zeros((0,), np.float32)


def torch_outputs(model: nn.Module, xs: np.ndarray, *, batch: int = 64) -> np.ndarray:
    """The torch module's outputs on ``xs`` in eval mode, as float32 numpy."""
    import torch

    model.eval()
    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(np.ascontiguousarray(xs[i : i + batch]))).float().numpy()
                               for i in range(0, len(xs), batch)])


def top1_of(logits: np.ndarray, ys: np.ndarray | None) -> float | None:
    """Fraction of rows whose arg-max is the label; None without labels."""
    if ys is None or len(ys) == 0:
        return None
    return float(np.mean(logits.argmax(1) == ys))


def write_fp16(model: nn.Module, shape: Sequence[int], path: Path, *, opset: int, check: np.ndarray,
               reference: np.ndarray, xs_val: np.ndarray | None, ys_val: np.ndarray | None) -> dict[str, object]:
    """``<id>.fp16.onnx`` (float16 throughout, for strongly typed TensorRT), checked in onnxruntime on the CPU
    against the fp32 torch outputs ``reference`` on inputs ``check``."""
    from hwnas.latency.backends.trt_common import export_typed_onnx

    export_typed_onnx(model, shape, path, dtype="float16", opset=opset)
    card: dict[str, object] = {"file": path.name,
                               "for": "strongly typed TensorRT (TensorRT 11; TensorRT 10 with --stronglyTyped)"}
    try:
        got = ort_outputs(path, check)
        card["max_abs_diff_vs_torch_fp32"] = float(np.max(np.abs(got - reference)))
        if xs_val is not None and ys_val is not None:
            card["top1_heldout"] = top1_of(ort_outputs(path, xs_val), ys_val)
    except Exception as exc:  # onnxruntime's CPU provider lacks some float16 kernels: the file is still valid
        card["not_checked"] = f"onnxruntime cannot run it on this CPU: {type(exc).__name__}: {str(exc)[:200]}"
    return card


def write_int8(fp32: Path, path: Path, shape: Sequence[int], *, calibration: np.ndarray | None,
               xs_val: np.ndarray | None, ys_val: np.ndarray | None, fp32_top1: float | None) -> dict[str, object]:
    """``<id>.int8.onnx``: onnxruntime static quantisation (QDQ, MinMax) calibrated on ``calibration`` (training
    images; standard-normal inputs when the experiment has no data, and the card says so)."""
    from hwnas.latency.onnx_export import quantize_int8

    quantize_int8(fp32, path, shape, calibration=calibration)
    card: dict[str, object] = {
        "file": path.name,
        "calibration": (f"{len(calibration)} training images (MinMax)" if calibration is not None
                        else "4 standard-normal inputs (no dataset): the file is for latency, its accuracy is "
                             "not meaningful"),
    }
    if xs_val is not None and ys_val is not None:
        top1 = top1_of(ort_outputs(path, xs_val), ys_val)
        card["top1_heldout"] = top1
        if top1 is not None and fp32_top1 is not None:
            card["top1_lost_vs_fp32"] = fp32_top1 - top1
    return card


def write_torch_export(model: nn.Module, shape: Sequence[int], path: Path, *, check: np.ndarray,
                       reference: np.ndarray, dynamic_batch: bool = False) -> dict[str, object]:
    """``<id>.pt2``: ``torch.export`` of the module, reloaded with ``torch.export.load`` and checked one image at a
    time; with ``dynamic_batch`` its batch axis is a ``torch.export.Dim`` (1 and up; traced at 2, checked at 1 and
    at the whole ``check`` batch), else it is fixed at 1."""
    import torch

    if dynamic_batch:
        example = torch.from_numpy(np.ascontiguousarray(np.concatenate([check[:1], check[:1]])))  # 1 specialises
        program = torch.export.export(model.eval(), (example,),
                                      dynamic_shapes=({0: torch.export.Dim("batch", min=1)},))
    else:
        program = torch.export.export(model.eval(), (torch.from_numpy(np.ascontiguousarray(check[:1])),))
    tmp = path.with_name(path.stem + ".part.pt2")  # torch.export.save warns about names not ending in .pt2
    torch.export.save(program, str(tmp))
    tmp.replace(path)
    loaded = torch.export.load(str(path)).module()
    with torch.no_grad():
        got = np.concatenate([loaded(torch.from_numpy(np.ascontiguousarray(check[i : i + 1]))).float().numpy()
                              for i in range(len(check))])
        diff = float(np.max(np.abs(got - reference)))
        if dynamic_batch:  # the whole check set in one call
            whole = loaded(torch.from_numpy(np.ascontiguousarray(check))).float().numpy()
            diff = max(diff, float(np.max(np.abs(whole - reference))))
    return {"file": path.name, "load_with": "torch.export.load(path).module()",
            "batch": "dynamic" if dynamic_batch else 1,
            "batch_sizes": {"min": 1, "max": None if dynamic_batch else 1},
            **({"checked_batches": [1, len(check)]} if dynamic_batch else {}),
            "max_abs_diff_vs_torch": diff}


def onnx_batch_sizes(path: Path) -> dict[str, int | None]:
    """The batch sizes an ONNX file's first input accepts: ``{"min": 1, "max": n}`` for a fixed batch axis of
    ``n``, ``max`` None for a free (named) one."""
    import onnx

    dim = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim[0]
    if dim.HasField("dim_value"):
        return {"min": int(dim.dim_value), "max": int(dim.dim_value)}
    return {"min": 1, "max": None}


def write_raw_onnx(model: nn.Module, contract: InputContract, path: Path, *, opset: int, dynamic_batch: bool,
                   simplify: bool, raw_val: np.ndarray, python: np.ndarray,
                   y_val: np.ndarray | None) -> dict[str, object]:
    """``<id>.raw.onnx``: the network behind its input contract (:meth:`InputContract.wrap`): the graph takes raw
    ``uint8`` ``N x H x W x C`` images (input ``image``) and casts, scales, resizes, normalises and transposes them
    itself. Checked on the whole held-out split: its logits on the raw images ``raw_val`` against ``python``, the
    fp32 ONNX file's logits on the Python pipeline's inputs (``contract(raw_val)``, the data's ``x_val``; that
    file is itself checked against torch)."""
    import torch

    from hwnas.latency.onnx_export import export_onnx

    h, w = contract.raw_size
    export_onnx(contract.wrap(model), (h, w, contract.channels), path, opset=opset, dynamic_batch=dynamic_batch,
                batch_size=2 if dynamic_batch else 1, input_name="image", dtype=torch.uint8)
    not_simplified = simplify_onnx(path) if simplify else "not asked (--no-simplify)"
    session = ort_session(path)
    step = 64 if dynamic_batch else 1
    got = np.concatenate([session.run(None, {"image": raw_val[i : i + step]})[0] for i in range(0, len(raw_val), step)])
    card: dict[str, object] = {
        "file": path.name,
        "input": {"name": "image", "dtype": "uint8", "layout": "NHWC",
                  "shape": ["batch" if dynamic_batch else 1, h, w, contract.channels],
                  "channel_order": contract.channel_order, "value_range": [0, contract.source_max],
                  "accepts": _raw_accepts(contract)},
        "in_graph": contract.steps()[1:],
        **({"before_the_graph": contract.steps()[0]} if contract.source_size is None else {}),
        "output": "logits (no softmax)",
        "opset": opset,
        "simplified": not_simplified is None,
        **({"not_simplified": not_simplified} if not_simplified else {}),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "max_abs_diff_vs_python_pipeline": float(np.max(np.abs(got - python))),
        "checked_images": f"{len(raw_val)} held-out images: this graph on the raw images against the fp32 ONNX "
                          "file on the Python pipeline's inputs (hwnas.data.preprocess.InputContract)",
        "top1_agreement_vs_python_pipeline": float(np.mean(got.argmax(1) == python.argmax(1))),
    }
    if y_val is not None:
        card["top1_heldout"] = top1_of(got, y_val)
    return card


def _raw_accepts(contract: InputContract) -> dict[str, object]:
    """The image size the graph that takes raw images accepts (its H and W are fixed), and where that size comes
    from: the dataset's own source size, or, for an image folder, the network's resolution after the Pillow resize
    that stays outside the graph (no in-graph resize of arbitrary sizes)."""
    h, w = contract.raw_size
    if contract.source_size is not None:
        why = f"the source size of {contract.dataset} images; the graph resizes them to the network's resolution"
    else:
        why = (f"an image folder's pictures must already be {h} x {w} (the network's resolution): resize any other "
               "size first as before_the_graph says (Pillow's bilinear Image.resize on the 8-bit RGB image); the "
               "graph does not resize")
    return {"height": h, "width": w, "other_sizes": "refused (the input's H and W are fixed)", "why": why}


def trtexec_lines(onnx_fp32: str, onnx_fp16: str | None, engine: str) -> dict[str, str]:
    """The exact ``trtexec`` build command per TensorRT major version (fp16 where the export has its graph)."""
    from hwnas.latency.backends.trt_common import TrtVersion, precision_plan
    from hwnas.latency.backends.trtexec_backend import build_command

    lines = {}
    for major in (10, 11):
        precision = "fp16" if onnx_fp16 else "fp32"
        plan = precision_plan(TrtVersion(major, 0), precision)
        source = onnx_fp16 if plan.onnx_dtype == "float16" and onnx_fp16 else onnx_fp32
        lines[f"tensorrt{major}"] = " ".join(build_command("trtexec", source, engine, plan))
    return lines


def write_tensorrt(onnx_fp32: Path, onnx_fp16: Path | None, path: Path) -> dict[str, object]:
    """A TensorRT engine (fp16 where an fp16 graph was exported) when TensorRT and a GPU are here; otherwise the
    card says why and what to run on the target."""
    from hwnas.errors import BackendUnavailable

    card: dict[str, object] = {"trtexec": trtexec_lines(onnx_fp32.name, onnx_fp16.name if onnx_fp16 else None,
                                                     path.name)}
    try:
        from hwnas.latency.backends.tensorrt_backend import TensorRTBackend

        backend = TensorRTBackend(precision="fp16" if onnx_fp16 else "fp32")
        backend.check()
        plan = backend.plan()
        source = onnx_fp16 if plan.onnx_dtype == "float16" and onnx_fp16 else onnx_fp32
        backend.build_engine(source, path, plan)
    except BackendUnavailable as exc:
        card["not_built"] = f"{exc}; on the target run the trtexec line for its TensorRT version"
        return card
    except RuntimeError as exc:  # the parser or builder refused the graph: TensorRT's first error
        card["not_built"] = f"TensorRT failed: {str(exc)[:300]}"
        return card
    card.update({"engine": path.name, "plan": plan.describe()})
    return card
