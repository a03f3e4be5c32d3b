"""Re-measurement of exported files: the contexts this host can time them in (CPU fp32/int8, the tables' devices,
CUDA, TensorRT), each with the search's figure beside it, or why it cannot."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from hwnas.experiments.config import Experiment
    from hwnas.latency.backends.base import LatencyBackend
    from hwnas.latency.backends.onnxruntime_backend import OnnxRuntimeBackend
    from hwnas.latency.kit.run_kit import KitProtocol
    from hwnas.latency.measure import MeasureProtocol


class _MeasuredFields(TypedDict):
    median_ms: float
    p90_ms: float
    count: int


class MeasuredLatency(_MeasuredFields, total=False):
    """A latency row's measurement: median and p90 (ms) over ``count`` timed runs (in ``rounds`` rounds)."""

    rounds: int


class _LatencyRowFields(TypedDict):
    name: str
    context: str
    metric: str | None
    file: str | None
    measured: MeasuredLatency | None
    not_measured: str | None
    predicted_ms: float | None
    predicted_by: str | None
    error_pct: float | None


class LatencyRow(_LatencyRowFields, total=False):
    """One row of a card's ``latency`` list (:func:`remeasure`), with the protocol it was timed with; a row of the
    graph that takes raw images (:func:`raw_targets`) says in ``includes`` what its time includes beyond the
    network."""

    protocol: KitProtocol
    includes: str


#: The key, among the files a target may time, of the graph that takes raw images (``<id>.raw.onnx``, written by
#: ``--with-preprocessing``; not one of ``--formats``).
RAW_FILE = "raw_onnx"
#: What the name of a context timing that graph ends with (``cpu-fp32+preprocessing``).
RAW_TAG = "+preprocessing"


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
    backend: LatencyBackend | None = None
    not_measured: str | None = None
    protocol: MeasureProtocol | None = None


def _host_cpu() -> str:
    from hwnas.latency.onnx_export import host_description

    try:
        return str(host_description()["cpu"])
    except Exception:
        return platform.processor() or platform.machine()


def _ort_backend(provider: str = "cpu", threads: int = 1,
                 precision: str = "fp32") -> tuple[OnnxRuntimeBackend | None, str | None]:
    """An onnxruntime backend and None, or None and why it cannot run here."""
    from hwnas.errors import BackendUnavailable
    from hwnas.latency.backends.onnxruntime_backend import OnnxRuntimeBackend

    try:
        backend = OnnxRuntimeBackend(provider=provider, threads=threads, precision=precision)
        backend.check()
    except (BackendUnavailable, ValueError) as exc:
        return None, str(exc)
    return backend, None


def measure_targets(experiment: Experiment, formats: Sequence[str]) -> list[MeasureTarget]:
    """Every context to re-measure the exported models in: the experiment's latency metrics first (measured
    during the search on this host, or predicted by a table or model for a device), then this host's CPU at
    fp32 and int8, a CUDA GPU and TensorRT; each measurable here or saying why not."""
    from hwnas.evaluators.latency_table import LatencyModelEvaluator, LatencyTableEvaluator
    from hwnas.evaluators.ort_latency import OrtLatencyEvaluator

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


def raw_targets(targets: Sequence[MeasureTarget]) -> list[MeasureTarget]:
    """The contexts the graph that takes raw images (``<id>.raw.onnx``) is timed in: a twin of each context that
    times the fp32 ONNX file with onnxruntime on this host's CPU (one per thread count), with the same backend and
    protocol, so the two rows differ only by the in-graph preprocessing. No prediction beside it: the search
    timed the network alone."""
    from hwnas.latency.backends.onnxruntime_backend import OnnxRuntimeBackend

    out: list[MeasureTarget] = []
    threads: set[int] = set()
    for t in targets:
        b = t.backend
        if (t.file != "onnx" or not isinstance(b, OnnxRuntimeBackend) or b.provider != "CPUExecutionProvider"
                or b.precision != "fp32" or b.threads in threads):
            continue
        threads.add(b.threads)
        out.append(MeasureTarget(f"{t.name}{RAW_TAG}",
                                 f"{t.context}; the graph that takes raw images (<id>.raw.onnx): the time includes "
                                 "the in-graph preprocessing, uint8 input at the source size",
                                 RAW_FILE, backend=b, protocol=t.protocol))
    return out


def _table_protocol(recorded: Any) -> MeasureProtocol | None:
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


def remeasure(target: MeasureTarget, files: dict[str, Path], shape: Sequence[int], protocol: MeasureProtocol,
              predicted: float | None) -> LatencyRow:
    """One row of a card's ``latency`` list: the measured median and p90 of the exported file in ``target``'s
    context (or why it was not measured), the search's figure for it and the error (predicted vs measured)."""
    row: LatencyRow = {"name": target.name, "context": target.context, "metric": target.metric, "file": None,
                           "measured": None,
                           "not_measured": target.not_measured, "predicted_ms": predicted,
                           "predicted_by": target.predicted_by if predicted is not None else None, "error_pct": None}
    path = files.get(target.file)
    if target.backend is None:
        return row
    if path is None:
        row["not_measured"] = ("no graph that takes raw images was written for this model (its card's raw_onnx "
                               "says why)" if target.file == RAW_FILE else
                               f"no {target.file} file was written for this model")
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
