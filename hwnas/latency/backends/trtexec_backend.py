"""trtexec backend: NVIDIA's ``trtexec`` command-line tool builds and times TensorRT engines (10 and 11).

``convert`` exports the module to ONNX and runs ``trtexec --onnx=F --saveEngine=E --skipInference``;
``profile`` runs ``trtexec --loadEngine=E --warmUp=MS --iterations=N --duration=S --exportTimes=T`` and reads the
per-query timing records ``--exportTimes`` writes (a JSON list of objects with ``startEnqMs``, ``endEnqMs``,
``startH2dMs``, ``endH2dMs``, ``startComputeMs``, ``endComputeMs``, ``startD2hMs``, ``endD2hMs``, ``h2dMs``,
``computeMs``, ``d2hMs``, ``latencyMs`` and, in older releases, ``endToEndMs``).

The statistic is **GPU compute time** (``computeMs``: the kernels of one query, what trtexec reports as
"GPU Compute Time"), the number comparable with the Python-API backend's CUDA-event timings; the host latency
(``latencyMs`` = H2D + compute + D2H) is kept beside it in :class:`TrtexecTiming`. When the times file is
missing, the "GPU Compute Time: min = ..., median = ..., percentile(90%) = ..." summary line trtexec prints is
the fallback (it has no 10th percentile or IQR: see :func:`stats_from_summary`).

Precision: TensorRT 10's trtexec gets ``--fp16`` / ``--bf16`` on an fp32 graph; TensorRT 11's trtexec has no
precision options (networks are always strongly typed, ``--stronglyTyped`` being a no-op), so the ONNX graph is
exported in fp16 / bf16 and no flag is passed. The version comes from trtexec's own banner
(``&&&& RUNNING TensorRT.trtexec [TensorRT v100300] ...``) or its ``TensorRT version: 10.3.0`` line.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.errors import BackendUnavailable
from hwnas.latency.backends.trt_common import (
    MIN_MAJOR,
    PrecisionPlan,
    TrtVersion,
    decode_packed_version,
    export_typed_onnx,
    parse_device_index,
    parse_trt_version,
    precision_plan,
)
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol, stats_from_ms

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
_SUMMARY_RE = re.compile(
    rf"^(?:\[[^\]]*\]\s*)*(?P<metric>[A-Za-z][A-Za-z0-9 \-]*?):\s*min = (?P<min>{_NUM}) ms, max = (?P<max>{_NUM}) ms, "
    rf"mean = (?P<mean>{_NUM}) ms, median = (?P<median>{_NUM}) ms(?P<rest>.*)$", re.MULTILINE)
_PERCENTILE_RE = re.compile(rf"percentile\((?P<p>{_NUM})%\) = (?P<v>{_NUM}) ms")
_TRACE_RE = re.compile(rf"Timing trace has (?P<n>\d+) queries over (?P<s>{_NUM}) s")
_VERSION_LINE_RE = re.compile(r"TensorRT version:\s*(\d+\.\d+(?:\.\d+)*)")
_BANNER_RE = re.compile(r"\[TensorRT v(\d+(?:\.\d+)*)\]")
_ERROR_RE = re.compile(r"^(?:\[[^\]]*\]\s*)*\[E\]\s*(.+)$", re.MULTILINE)

#: The summary metric kept as the latency statistic.
COMPUTE_METRIC = "GPU Compute Time"


# ---------------------------------------------------------------------------------------------------------------
# pure parsing


def parse_trtexec_version(text: str) -> TrtVersion | None:
    """TensorRT version from trtexec output: the ``TensorRT version: X.Y.Z`` line, else the
    ``[TensorRT v100300]`` banner (a packed ``NV_TENSORRT_VERSION``, or a dotted version); None if neither."""
    m = _VERSION_LINE_RE.search(text)
    if m:
        return parse_trt_version(m.group(1))
    m = _BANNER_RE.search(text)
    if m:
        token = m.group(1)
        return parse_trt_version(token) if "." in token else decode_packed_version(token)
    return None


def missing_options(help_text: str, options: Sequence[str]) -> list[str]:
    """The ``--options`` that ``trtexec --help`` does not list (``--fp16`` is gone from TensorRT 11's)."""
    return [opt for opt in options
            if not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", help_text)]


@dataclass(frozen=True)
class SummaryLine:
    """One "<metric>: min = ... ms, max = ..., mean = ..., median = ..., percentile(P%) = ..." summary line."""

    metric: str
    min_ms: float
    max_ms: float
    mean_ms: float
    median_ms: float
    percentiles_ms: Mapping[float, float] = field(default_factory=dict)


def parse_summary(text: str) -> dict[str, SummaryLine]:
    """The performance-summary lines of trtexec's output, by metric ("GPU Compute Time", "Latency", ...)."""
    out: dict[str, SummaryLine] = {}
    for m in _SUMMARY_RE.finditer(text):
        pct = {float(p.group("p")): float(p.group("v")) for p in _PERCENTILE_RE.finditer(m.group("rest"))}
        metric = m.group("metric").strip()
        out[metric] = SummaryLine(metric=metric, min_ms=float(m.group("min")), max_ms=float(m.group("max")),
                                  mean_ms=float(m.group("mean")), median_ms=float(m.group("median")),
                                  percentiles_ms=pct)
    return out


def parse_trace_count(text: str) -> tuple[int, float] | None:
    """``(queries, seconds)`` from "Timing trace has N queries over S s", or None."""
    m = _TRACE_RE.search(text)
    return (int(m.group("n")), float(m.group("s"))) if m else None


def stats_from_summary(line: SummaryLine, count: int) -> LatencyStats:
    """LatencyStats from a summary line, for when the per-query times are missing.

    The summary has no 10th percentile and no quartiles, so this gives bounds, not the exact figures:
    ``p10_ms`` is the minimum (below the true p10), ``p90_ms`` the printed 90th percentile (the maximum where
    trtexec printed none), and ``iqr_ms`` is ``p90_ms - p10_ms`` (wider than the true IQR).
    """
    p90 = line.percentiles_ms.get(90.0, line.max_ms)
    return LatencyStats(median_ms=line.median_ms, p10_ms=line.min_ms, p90_ms=p90, iqr_ms=max(0.0, p90 - line.min_ms),
                        count=int(count))


@dataclass(frozen=True)
class TimingRecords:
    """Per-query times read from an ``--exportTimes`` file.

    Attributes:
        compute_ms: GPU compute time of each query.
        latency_ms: Host latency (H2D + compute + D2H) of each query, where the records have it.
        span_s: Seconds from the first query's start to the last query's end.
    """

    compute_ms: list[float]
    latency_ms: list[float] | None
    span_s: float


def _num(rec: Mapping[str, object], key: str) -> float | None:
    v = rec.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_times(records: object, *, warmup_ms: float | None = None, max_records: int | None = None) -> TimingRecords:
    """Per-query times from the parsed ``--exportTimes`` JSON.

    Releases before TensorRT 10 also exported the warm-up queries; with ``warmup_ms`` given, records whose
    compute started before it are dropped, as trtexec's own report does (a no-op for files without them).

    Raises:
        ValueError: ``records`` is not a non-empty list of objects each with ``computeMs`` (or both
            ``startComputeMs`` and ``endComputeMs``).
    """
    if not isinstance(records, list) or not records:
        raise ValueError("the trtexec times file holds no timing records")
    if not all(isinstance(r, dict) for r in records):
        raise ValueError("the trtexec times file is not a list of objects")
    if warmup_ms is not None and all(_num(r, "startComputeMs") is not None for r in records):
        kept = [r for r in records if _num(r, "startComputeMs") >= warmup_ms]  # type: ignore[operator]
        records = kept or records
    if max_records is not None:
        records = records[:max_records]
    compute: list[float] = []
    latency: list[float] = []
    for i, rec in enumerate(records):
        c = _num(rec, "computeMs")
        if c is None:
            start, end = _num(rec, "startComputeMs"), _num(rec, "endComputeMs")
            if start is None or end is None:
                raise ValueError(f"trtexec timing record {i} has neither computeMs nor startComputeMs/endComputeMs")
            c = end - start
        compute.append(c)
        lat = _num(rec, "latencyMs")
        if lat is None and all(_num(rec, k) is not None for k in ("h2dMs", "d2hMs")):
            lat = _num(rec, "h2dMs") + c + _num(rec, "d2hMs")  # type: ignore[operator]
        if lat is not None:
            latency.append(lat)
    starts = [v for r in records for k in ("startEnqMs", "startH2dMs", "startComputeMs")
              if (v := _num(r, k)) is not None]
    ends = [v for r in records for k in ("endD2hMs", "endComputeMs") if (v := _num(r, k)) is not None]
    span_s = (max(ends) - min(starts)) / 1e3 if starts and ends else sum(compute) / 1e3
    return TimingRecords(compute_ms=compute, latency_ms=latency if len(latency) == len(compute) else None,
                         span_s=max(span_s, 0.0))


@dataclass(frozen=True)
class LayerTime:
    """One layer of an ``--exportProfile`` file."""

    name: str
    time_ms: float
    average_ms: float
    median_ms: float | None
    percentage: float


def parse_profile(records: object) -> tuple[int, list[LayerTime]]:
    """``(iterations, layers)`` from the parsed ``--exportProfile`` JSON (``[{"count": N}, {"name": ..., "timeMs":
    ..., "averageMs": ..., "medianMs": ..., "percentage": ...}, ...]``).

    Raises:
        ValueError: Not a list, or no ``count`` entry.
    """
    if not isinstance(records, list):
        raise ValueError("the trtexec profile file is not a list")
    count: int | None = None
    layers: list[LayerTime] = []
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if "count" in rec and "name" not in rec:
            count = int(rec["count"])
        elif "name" in rec:
            layers.append(LayerTime(name=str(rec["name"]), time_ms=float(rec.get("timeMs", 0.0)),
                                    average_ms=float(rec.get("averageMs", 0.0)),
                                    median_ms=_num(rec, "medianMs"), percentage=float(rec.get("percentage", 0.0))))
    if count is None:
        raise ValueError("the trtexec profile file has no iteration count")
    return count, layers


# ---------------------------------------------------------------------------------------------------------------
# pure command lines


def build_command(executable: str | Path, onnx: str | Path, engine: str | Path, plan: PrecisionPlan, *,
                  workspace_mib: int | None = None, device: int = 0, extra: Sequence[str] = ()) -> list[str]:
    """``trtexec --onnx=F --saveEngine=E --skipInference`` plus the plan's precision options (none on 11)."""
    cmd = [str(executable), f"--onnx={onnx}", f"--saveEngine={engine}", "--skipInference", *plan.trtexec_flags]
    if workspace_mib is not None:
        cmd.append(f"--memPoolSize=workspace:{int(workspace_mib)}")  # a bare size is MiB
    if device:
        cmd.append(f"--device={device}")
    return [*cmd, *extra]


def timing_command(executable: str | Path, engine: str | Path, protocol: MeasureProtocol, *, warmup_ms: float,
                   times_path: str | Path, profile_path: str | Path | None = None, device: int = 0,
                   spin_wait: bool = False, extra: Sequence[str] = ()) -> list[str]:
    """``trtexec --loadEngine=E --warmUp=MS --iterations=N --duration=S --exportTimes=T`` for a protocol.

    trtexec warms up for a time, not a count (``warmup_ms``), runs at least ``protocol.repeats`` queries and at
    least ``protocol.min_time_s`` seconds (rounded up: whole seconds parse on every release; trtexec's default
    of 3 s is overridden). With a profile path the layer profile is taken in a separate run
    (``--separateProfileRun``), since trtexec does not report the timing of a profiled run.
    """
    cmd = [str(executable), f"--loadEngine={engine}", f"--warmUp={int(round(warmup_ms))}",
           f"--iterations={int(protocol.repeats)}", f"--duration={int(math.ceil(protocol.min_time_s))}",
           f"--exportTimes={times_path}"]
    if profile_path is not None:
        cmd += [f"--exportProfile={profile_path}", "--separateProfileRun"]
    if spin_wait:
        cmd.append("--useSpinWait")
    if device:
        cmd.append(f"--device={device}")
    return [*cmd, *extra]


def first_error(output: str) -> str:
    """The first ``[E]`` line trtexec printed, else its last non-empty line."""
    m = _ERROR_RE.search(output)
    if m:
        return m.group(1).strip()
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


# ---------------------------------------------------------------------------------------------------------------
# the backend


@dataclass(frozen=True)
class TrtexecInfo:
    """What ``trtexec --help`` said about itself."""

    executable: Path
    version: TrtVersion
    help_text: str


@dataclass(frozen=True)
class TrtexecTiming:
    """Everything one timing run of trtexec measured.

    Attributes:
        compute: GPU compute time per query (the backend's statistic).
        latency: Host latency per query (H2D + compute + D2H), where available.
        timed_s: Seconds the timed queries spanned.
        source: ``exportTimes`` (per-query records) or ``summary`` (the printed summary line, bounds only).
        layers: Per-layer times from ``--exportProfile``, when asked for.
        command: The command line that ran.
    """

    compute: LatencyStats
    latency: LatencyStats | None
    timed_s: float
    source: str
    layers: list[LayerTime] | None
    command: list[str]


class TrtexecBackend:
    """TensorRT 10 / 11 engines built and timed by the ``trtexec`` executable (no Python TensorRT needed).

    Args:
        precision: ``fp32``, ``fp16`` or ``bf16``.
        batch_size: Batch size of the exported graph.
        opset: ONNX opset of the export.
        executable: ``trtexec`` path or name; the one on ``PATH`` when None.
        workspace_mib: Workspace memory-pool limit in MiB (``--memPoolSize``); TensorRT's default when None.
        device: CUDA device (``0``, ``cuda`` or ``cuda:N``).
        warmup_ms: Warm-up time before timing (``--warmUp``; trtexec warms up by time, not by count).
        export_profile: Also take a per-layer profile (``--exportProfile``, in a separate run).
        spin_wait: Synchronize by spinning (``--useSpinWait``): steadier timings for more CPU.
        build_args: Extra options for the build command.
        run_args: Extra options for the timing command.
        timeout_s: Time limit of one trtexec call.
    """

    name = "trtexec"

    def __init__(self, *, precision: str = "fp32", batch_size: int = 1, opset: int = 17,
                 executable: str | Path | None = None, workspace_mib: int | None = None, device: str | int = 0,
                 warmup_ms: float = 200.0, export_profile: bool = False, spin_wait: bool = False,
                 build_args: Sequence[str] = (), run_args: Sequence[str] = (), timeout_s: float = 1800.0) -> None:
        if precision not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"trtexec backend: precision {precision!r} is not supported (fp32, fp16, bf16)")
        if batch_size < 1:
            raise ValueError(f"trtexec backend: batch_size must be >= 1, got {batch_size}")
        if warmup_ms < 0:
            raise ValueError(f"trtexec backend: warmup_ms must be >= 0, got {warmup_ms}")
        self.precision = precision
        self.batch_size = batch_size
        self.opset = opset
        self.executable = executable
        self.workspace_mib = workspace_mib
        self.device_index = parse_device_index(device)
        self.warmup_ms = float(warmup_ms)
        self.export_profile = export_profile
        self.spin_wait = spin_wait
        self.build_args = tuple(build_args)
        self.run_args = tuple(run_args)
        self.timeout_s = timeout_s
        self._info: TrtexecInfo | None = None

    def find(self) -> Path:
        """The trtexec executable: ``executable`` as a path or a name on ``PATH``, else ``trtexec`` on ``PATH``."""
        wanted = str(self.executable) if self.executable is not None else "trtexec"
        if os.sep in wanted or (os.altsep and os.altsep in wanted):
            path = Path(wanted)
            if path.is_file() and os.access(path, os.X_OK):
                return path
            raise BackendUnavailable(f"trtexec not found at {path} (or not executable): install TensorRT, which "
                                     "ships trtexec (e.g. /usr/src/tensorrt/bin/trtexec)")
        found = shutil.which(wanted)
        if found is None:
            raise BackendUnavailable(f"{wanted} not found on PATH: install TensorRT, which ships trtexec "
                                     "(e.g. /usr/src/tensorrt/bin), and put its bin folder on PATH or pass executable=")
        return Path(found)

    def _run(self, cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
        log.debug("running %s", " ".join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"trtexec not found: {cmd[0]}") from exc
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"trtexec {what} did not finish within {self.timeout_s:g} s") from exc
        return proc

    def probe(self) -> TrtexecInfo:
        """Run ``trtexec --help`` once (cached) for its version and option list."""
        if self._info is not None:
            return self._info
        exe = self.find()
        proc = self._run([str(exe), "--help"], "--help")
        text = (proc.stdout or "") + (proc.stderr or "")
        version = parse_trtexec_version(text)
        if version is None:
            raise BackendUnavailable(f"could not read the TensorRT version from `{exe} --help` "
                                     f"(exit {proc.returncode}): {first_error(text)}")
        self._info = TrtexecInfo(executable=exe, version=version, help_text=text)
        return self._info

    def plan(self) -> PrecisionPlan:
        """The precision plan for this trtexec's TensorRT version."""
        return precision_plan(self.probe().version, self.precision)

    def check(self) -> str:
        info = self.probe()
        if info.version.major < MIN_MAJOR:
            raise BackendUnavailable(f"{info.executable} is TensorRT {info.version}: hwnas needs TensorRT 10 or 11")
        plan = precision_plan(info.version, self.precision)
        if "--onnx" in info.help_text:  # it printed its option list: check ours are in it
            missing = missing_options(info.help_text, [*plan.trtexec_flags, "--exportTimes", "--skipInference"])
            if missing:
                raise BackendUnavailable(f"{info.executable} (TensorRT {info.version}) has no {', '.join(missing)} "
                                         "option")
        return f"trtexec {info.executable} ({plan.describe()}, cuda:{self.device_index})"

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        info = self.probe()
        return DeviceContext(device=device, runtime="trtexec", runtime_version=str(info.version), provider=None,
                             precision=self.precision,  # type: ignore[arg-type]
                             batch_size=self.batch_size, threads=None, input_resolution=input_resolution)

    def convert(self, model: nn.Module, input_shape: Sequence[int], workdir: Path, name: str) -> Path:
        """Export ``workdir/<name>.onnx`` in the plan's dtype and build ``workdir/<name>.engine`` with trtexec."""
        info = self.probe()
        plan = precision_plan(info.version, self.precision)
        workdir = Path(workdir)
        onnx_path = export_typed_onnx(model, input_shape, workdir / f"{name}.onnx", dtype=plan.onnx_dtype,
                                      opset=self.opset, batch_size=self.batch_size)
        engine_path = workdir / f"{name}.engine"
        engine_path.unlink(missing_ok=True)
        cmd = build_command(info.executable, onnx_path, engine_path, plan, workspace_mib=self.workspace_mib,
                            device=self.device_index, extra=self.build_args)
        proc = self._run(cmd, "build")
        if proc.returncode != 0 or not engine_path.is_file():
            out = (proc.stdout or "") + (proc.stderr or "")
            log.debug("trtexec build output:\n%s", out)
            raise RuntimeError(f"trtexec could not build {engine_path.name} from {onnx_path.name} "
                               f"(exit {proc.returncode}): {first_error(out)}")
        return engine_path

    def measure(self, engine: Path, protocol: MeasureProtocol) -> TrtexecTiming:
        """Time ``engine`` with trtexec per ``protocol``: compute and host-latency stats, and the layer profile
        when ``export_profile`` is set."""
        info = self.probe()
        with tempfile.TemporaryDirectory(prefix="hwnas-trtexec-") as tmp:
            times_path = Path(tmp) / "times.json"
            profile_path = Path(tmp) / "profile.json" if self.export_profile else None
            cmd = timing_command(info.executable, engine, protocol, warmup_ms=self.warmup_ms, times_path=times_path,
                                 profile_path=profile_path, device=self.device_index, spin_wait=self.spin_wait,
                                 extra=self.run_args)
            t0 = time.perf_counter()
            proc = self._run(cmd, "timing")
            wall_s = time.perf_counter() - t0
            out = (proc.stdout or "") + (proc.stderr or "")
            if proc.returncode != 0:
                log.debug("trtexec timing output:\n%s", out)
                raise RuntimeError(f"trtexec could not time {Path(engine).name} (exit {proc.returncode}): "
                                   f"{first_error(out)}")
            layers = None
            if profile_path is not None and profile_path.is_file():
                _, layers = parse_profile(json.loads(profile_path.read_text()))
            if times_path.is_file():
                rec = parse_times(json.loads(times_path.read_text()), warmup_ms=self.warmup_ms,
                                  max_records=protocol.max_repeats)
                latency = stats_from_ms(rec.latency_ms) if rec.latency_ms else None
                return TrtexecTiming(compute=stats_from_ms(rec.compute_ms), latency=latency, timed_s=rec.span_s,
                                     source="exportTimes", layers=layers, command=cmd)
        summary = parse_summary(out)
        if COMPUTE_METRIC not in summary:
            raise RuntimeError(f"trtexec wrote no times file and printed no '{COMPUTE_METRIC}' summary for "
                               f"{Path(engine).name}")
        log.warning("trtexec wrote no times file; using its printed summary (p10/IQR are bounds, not quantiles)")
        trace = parse_trace_count(out)
        count, timed_s = trace if trace else (protocol.repeats, wall_s)
        latency_line = summary.get("Latency")
        return TrtexecTiming(compute=stats_from_summary(summary[COMPUTE_METRIC], count),
                             latency=stats_from_summary(latency_line, count) if latency_line else None,
                             timed_s=timed_s, source="summary", layers=layers, command=cmd)

    def profile(
        self, artifact: Path, input_shape: Sequence[int], protocol: MeasureProtocol
    ) -> tuple[LatencyStats, float]:
        """GPU compute time of the engine (its input shape is fixed in the engine, so ``input_shape`` is unused)."""
        timing = self.measure(Path(artifact), protocol)
        return timing.compute, timing.timed_s
