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

import logging
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


def ort_session(path: Path, *, threads: int = 1) -> Any:
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


def torch_outputs(model: Any, xs: np.ndarray, *, batch: int = 64) -> np.ndarray:
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


def write_fp16(model: Any, shape: Sequence[int], path: Path, *, opset: int, check: np.ndarray,
               reference: np.ndarray, xs_val: np.ndarray | None, ys_val: np.ndarray | None) -> dict[str, Any]:
    """``<id>.fp16.onnx`` (float16 throughout, for strongly typed TensorRT), checked in onnxruntime on the CPU
    against the fp32 torch outputs ``reference`` on inputs ``check``."""
    from hwnas.latency.backends.trt_common import export_typed_onnx

    export_typed_onnx(model, shape, path, dtype="float16", opset=opset)
    card: dict[str, Any] = {"file": path.name,
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
               xs_val: np.ndarray | None, ys_val: np.ndarray | None, fp32_top1: float | None) -> dict[str, Any]:
    """``<id>.int8.onnx``: onnxruntime static quantisation (QDQ, MinMax) calibrated on ``calibration`` (training
    images; standard-normal inputs when the experiment has no data, and the card says so)."""
    from hwnas.latency.onnx_export import quantize_int8

    quantize_int8(fp32, path, shape, calibration=calibration)
    card: dict[str, Any] = {
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


def write_torch_export(model: Any, shape: Sequence[int], path: Path, *, check: np.ndarray,
                       reference: np.ndarray) -> dict[str, Any]:
    """``<id>.pt2``: ``torch.export`` of the module at batch 1, reloaded with ``torch.export.load`` and checked."""
    import torch

    example = torch.from_numpy(np.ascontiguousarray(check[:1]))
    program = torch.export.export(model.eval(), (example,))
    tmp = path.with_name(path.stem + ".part.pt2")  # torch.export.save warns about names not ending in .pt2
    torch.export.save(program, str(tmp))
    tmp.replace(path)
    loaded = torch.export.load(str(path)).module()
    with torch.no_grad():
        got = np.concatenate([loaded(torch.from_numpy(np.ascontiguousarray(check[i : i + 1]))).float().numpy()
                              for i in range(len(check))])
    return {"file": path.name, "load_with": "torch.export.load(path).module()", "batch": 1,
            "max_abs_diff_vs_torch": float(np.max(np.abs(got - reference)))}


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


def write_tensorrt(onnx_fp32: Path, onnx_fp16: Path | None, path: Path) -> dict[str, Any]:
    """A TensorRT engine (fp16 where an fp16 graph was exported) when TensorRT and a GPU are here; otherwise the
    card says why and what to run on the target."""
    from hwnas.errors import BackendUnavailable

    card: dict[str, Any] = {"trtexec": trtexec_lines(onnx_fp32.name, onnx_fp16.name if onnx_fp16 else None,
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


@dataclass
class MeasureTarget:
    """One context an exported model is (or cannot be) re-measured in.

    Attributes:
        name: A short name for tables (``cpu-fp32``, ``cpu-int8``, the table's device, ``cuda``, ``tensorrt``).
        context: What the context is, in words.
        file: The format whose file is timed (``onnx``, ``onnx_int8``, ``tensorrt``).
        metric: The experiment's metric this context answers (its value is the prediction beside the
            measurement), or None.
        predicted_by: Where that value came from.
        backend: A latency backend that can time the file here, or None.
        not_measured: Why this host cannot measure it (with what to install or run), when ``backend`` is None.
        protocol: How the search's figure was timed (warm-up, repeats, minimum time), for the same context
            measured again the same way; None: the export's own protocol.
    """

    name: str
    context: str
    file: str
    metric: str | None = None
    predicted_by: str | None = None
    backend: Any = None
    not_measured: str | None = None
    protocol: Any = None


def _host_cpu() -> str:
    from hwnas.latency.onnx_export import host_description

    try:
        return str(host_description()["cpu"])
    except Exception:
        return platform.processor() or platform.machine()


def _ort_backend(provider: str = "cpu", threads: int = 1, precision: str = "fp32") -> tuple[Any, str | None]:
    """An onnxruntime backend and None, or None and why it cannot run here."""
    from hwnas.errors import BackendUnavailable
    from hwnas.latency.backends import BACKENDS

    try:
        backend = BACKENDS.get("onnxruntime")(provider=provider, threads=threads, precision=precision)
        backend.check()
    except (BackendUnavailable, ValueError) as exc:
        return None, str(exc)
    return backend, None


def measure_targets(experiment: Any, formats: Sequence[str]) -> list[MeasureTarget]:
    """Every context to re-measure the exported models in: the experiment's latency metrics first (measured
    during the search on this host, or predicted by a table or model for a device), then this host's CPU at
    fp32 and int8, a CUDA GPU and TensorRT; each measurable here or saying why not."""
    from hwnas.experiments.evaluators import OrtLatencyEvaluator
    from hwnas.latency.evaluator import LatencyModelEvaluator, LatencyTableEvaluator

    targets: list[MeasureTarget] = []
    cpu = _host_cpu()
    covered: set[tuple[str, int, str]] = set()  # (provider, threads, precision) measured on this host's CPU
    for ev in experiment.evaluators:
        if isinstance(ev, OrtLatencyEvaluator):
            b = ev.backend
            file = "onnx_int8" if b.precision == "int8" else "onnx"
            ctx = f"this host ({cpu}), onnxruntime {b.provider}, {b.precision}, batch {b.batch_size}, " \
                  f"{b.threads} thread(s)"
            backend, why = _ort_backend(b.provider, b.threads, b.precision)
            if not getattr(ev, "cheap", True):  # timed on the executor's workers (a board's node), not here
                backend, why = None, (f"measured on the executor's workers (device {ev.device or 'unnamed'}), not "
                                      "on this host; measure the exported file there (nas latency kit)")
            elif file not in formats:
                backend, why = None, f"no {file} file in this export (add --formats {file})"
            targets.append(MeasureTarget(f"cpu-{b.precision}", ctx, file, ev.provides[0],
                                         "measured during the search (same context)",
                                         backend, why, protocol=ev.protocol))
            if b.provider == "CPUExecutionProvider" and getattr(ev, "cheap", True):
                covered.add((b.provider, b.threads, b.precision))
        elif isinstance(ev, LatencyTableEvaluator):
            t = ev.table
            c = t.context
            ctx = f"{c.device}: {c.describe()}" if hasattr(c, "describe") else c.device
            by = f"latency table {ev.path.name} ({'calibrated' if ev.calibrated else 'sum of units'})"
            backend, why = None, None
            table_cpu = (t.provenance or {}).get("cpu")
            if c.runtime != "onnxruntime" or c.provider not in (None, "CPUExecutionProvider"):
                why = (f"the table was measured with {c.runtime}"
                       + (f" ({c.provider})" if c.provider else "") + f" on {c.device}, not on this host; "
                       "measure the exported file there (nas latency kit)")
            elif table_cpu != cpu:
                why = (f"the table's device {c.device} ({table_cpu or 'no host recorded'}) is not this host "
                       f"({cpu}); measure the exported file there (nas latency kit)")
            elif c.precision not in ("fp32", "int8"):
                why = f"precision {c.precision} is not measured on a CPU"
            else:
                file = "onnx_int8" if c.precision == "int8" else "onnx"
                if file not in formats:
                    why = f"no {file} file in this export (add --formats {file})"
                else:
                    backend, why = _ort_backend("cpu", c.threads or 1, c.precision)
                    covered.add(("CPUExecutionProvider", c.threads or 1, c.precision))
            targets.append(MeasureTarget(ev.device, ctx, "onnx_int8" if c.precision == "int8" else "onnx",
                                         ev.provides[0], by, backend, why, protocol=_table_protocol(t.protocol)))
        elif isinstance(ev, LatencyModelEvaluator):
            targets.append(MeasureTarget(
                ev.device, f"{ev.device}: few-shot latency model {ev.path.name}", "onnx", ev.provides[0],
                f"latency model {ev.path.name}", None,
                f"{ev.device} is a device known through a latency model, not this host; measure the exported file "
                "there (nas latency kit)"))
    for precision, file in (("fp32", "onnx"), ("int8", "onnx_int8")):
        if ("CPUExecutionProvider", 1, precision) in covered:
            continue
        ctx = f"this host ({cpu}), onnxruntime CPUExecutionProvider, {precision}, batch 1, 1 thread(s)"
        if file not in formats:
            targets.append(MeasureTarget(f"cpu-{precision}", ctx, file, not_measured=f"no {file} file in this export "
                                                                 f"(add --formats {file})"))
            continue
        backend, why = _ort_backend("cpu", 1, precision)
        targets.append(MeasureTarget(f"cpu-{precision}", ctx, file, backend=backend, not_measured=why))
    targets.append(_cuda_target())
    targets.append(_tensorrt_target(formats))
    return targets


def _table_protocol(recorded: Any) -> Any:
    """The whole-network timing protocol a table recorded (None when it recorded none it can be rebuilt from)."""
    from hwnas.latency.measure import MeasureProtocol

    keys = ("warmup", "repeats", "min_time_s", "max_repeats")
    try:
        return MeasureProtocol(**{k: recorded[k] for k in keys if k in (recorded or {})}) if recorded else None
    except (TypeError, ValueError):
        return None


def _cuda_target() -> MeasureTarget:
    ctx = "a CUDA GPU, onnxruntime CUDAExecutionProvider, fp32, batch 1"
    try:
        import torch

        has_gpu = bool(torch.cuda.is_available())
    except ImportError:
        has_gpu = False
    if not has_gpu:
        return MeasureTarget("cuda", ctx, "onnx", not_measured="no CUDA GPU on this host")
    backend, why = _ort_backend("cuda")
    return MeasureTarget("cuda", f"{ctx} ({torch.cuda.get_device_name(0)})", "onnx", backend=backend, not_measured=why)


def _tensorrt_target(formats: Sequence[str]) -> MeasureTarget:
    from hwnas.errors import BackendUnavailable

    ctx = "TensorRT engine on a CUDA GPU"
    if "tensorrt" not in formats:
        return MeasureTarget("tensorrt", ctx, "tensorrt",
                             not_measured="no engine in this export (add --formats tensorrt)")
    try:
        from hwnas.latency.backends.tensorrt_backend import TensorRTBackend

        backend = TensorRTBackend(precision="fp16" if "onnx_fp16" in formats else "fp32")
        backend.check()
    except BackendUnavailable as exc:
        return MeasureTarget("tensorrt", ctx, "tensorrt", not_measured=f"{exc}")
    return MeasureTarget("tensorrt", f"{ctx}: {backend.plan().describe()}", "tensorrt", backend=backend)


def remeasure(target: MeasureTarget, files: dict[str, Path], shape: Sequence[int], protocol: Any,
              predicted: float | None) -> dict[str, Any]:
    """One row of a card's ``latency`` list: the measured median and p90 of the exported file in ``target``'s
    context (or why it was not measured), the search's figure for it and the error (predicted vs measured)."""
    row: dict[str, Any] = {"name": target.name, "context": target.context, "metric": target.metric, "file": None,
                           "measured": None,
                           "not_measured": target.not_measured, "predicted_ms": predicted,
                           "predicted_by": target.predicted_by if predicted is not None else None, "error_pct": None}
    path = files.get(target.file)
    if target.backend is None:
        return row
    if path is None:
        row["not_measured"] = f"no {target.file} file was written for this model"
        return row
    row["file"] = path.name
    try:
        stats, _ = target.backend.profile(path, tuple(shape), protocol)
    except Exception as exc:  # a backend failing on this file: the card says so, the export goes on
        row["not_measured"] = f"measurement failed: {type(exc).__name__}: {str(exc)[:200]}"
        return row
    row["measured"] = {"median_ms": stats.median_ms, "p90_ms": stats.p90_ms, "count": stats.count}
    if predicted is not None and stats.median_ms > 0:
        row["error_pct"] = 100.0 * (predicted - stats.median_ms) / stats.median_ms
    return row


__all__ = ["FORMATS", "SUFFIX", "MeasureTarget", "measure_targets", "parse_formats", "remeasure", "simplify_onnx",
           "trtexec_lines", "write_fp16", "write_int8", "write_tensorrt", "write_torch_export"]
