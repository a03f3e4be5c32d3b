"""``ort_latency``: latency measured with onnxruntime on this host (or a worker's), exported to ONNX first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, cast

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, stable_fingerprint
from hwnas.training import build_seeded

if TYPE_CHECKING:
    from hwnas.latency.backends.onnxruntime_backend import OnnxRuntimeBackend


class OrtLatencyParams(EvaluatorParams):
    device: str | None = Field(None, description="device name: the metric becomes latency_ms@<device>")
    provider: str = Field("CPUExecutionProvider", description="onnxruntime execution provider")
    threads: int = Field(1, ge=1, description="intra-op threads (pinned)")
    batch_size: int = Field(1, ge=1)
    warmup: int = Field(10, ge=0)
    repeats: int = Field(50, ge=3)
    opset: int = Field(17, ge=13)
    precision: Literal["fp32", "int8"] = Field(
        "fp32", description="int8: the network statically quantised (QDQ) before timing; the metric's device says "
                            "so (latency_ms@int8, latency_ms@<device>-int8)")
    cheap: bool = Field(True, description="false: an expensive evaluation, sent to the executor's workers (with "
                                          "the ray executor and resources_per_eval {<board>: 1}, timed on the "
                                          "node that has the device) after the constraints on cheap metrics")


class OrtLatencyEvaluator:
    """Measured latency: export to ONNX, time with onnxruntime (warm-up, repeats, median and IQR in ms)."""

    Params = OrtLatencyParams
    cheap = True

    def __init__(self, *, context: EvalContext, device: str | None = None, provider: str = "CPUExecutionProvider",
                 threads: int = 1, batch_size: int = 1, warmup: int = 10, repeats: int = 50, opset: int = 17,
                 precision: str = "fp32", cheap: bool = True) -> None:
        from hwnas.evaluators.latency_table import device_name
        from hwnas.latency.backends import BACKENDS
        from hwnas.latency.measure import MeasureProtocol

        self.space = context.space
        self.seed = context.seed
        self.device = device
        self.cheap = bool(cheap)
        # the built-in of that name (a plug-in cannot take a built-in's name), whose opset the fingerprint reads
        backend_cls = cast("type[OnnxRuntimeBackend]", BACKENDS.get("onnxruntime"))
        self.backend = backend_cls(provider=provider, threads=threads, batch_size=batch_size, opset=opset,
                                   precision=precision)
        self.protocol = MeasureProtocol(warmup=warmup, repeats=repeats)
        name = device_name(device, precision) if device else (precision if precision != "fp32" else "")
        suffix = f"@{name}" if name else ""
        self.provides = (f"latency_ms{suffix}", f"latency_iqr_ms{suffix}")

    def fingerprint(self) -> str:
        """The measurement context: this host's CPU for a cheap (driver-side) measurement; for an expensive one,
        which runs on whichever worker the executor picks (a board's node), the device's name stands for it, so
        the driver and the worker agree."""
        from hwnas.latency.onnx_export import host_description

        where = host_description()["cpu"] if self.cheap else f"worker of device {self.device or 'unnamed'}"
        return stable_fingerprint("ort_latency", {
            "context": self.backend.context(self.device or "local").to_dict(), "protocol": self.protocol.to_dict(),
            "opset": self.backend.opset, "cpu": where,
        })

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        import tempfile

        from hwnas.latency.measure import measure_network

        out: list[Metrics | BaseException] = []
        with tempfile.TemporaryDirectory(prefix="hwnas-ort-") as tmp:
            for arch in archs:
                try:
                    model = build_seeded(self.space, arch, self.seed)
                    stats, _ = measure_network(self.backend, model, self.space.input_shape_of(arch), self.protocol,
                                               workdir=tmp, name=arch.arch_id)
                    out.append({self.provides[0]: stats.median_ms, self.provides[1]: stats.iqr_ms})
                except Exception as exc:
                    out.append(exc)
        return out

    def measure_rounds(self, archs: Sequence[Architecture], rounds: int) -> list[list[float]]:
        """Each network converted once, then all timed in ``rounds`` rounds, one after another in each round: per
        round the median ms of each (side by side, for a landing that compares networks on a drifting machine)."""
        import tempfile

        from hwnas.latency.measure import measure_rounds

        with tempfile.TemporaryDirectory(prefix="hwnas-ort-") as tmp:
            models = ((build_seeded(self.space, a, self.seed), self.space.input_shape_of(a)) for a in archs)
            return measure_rounds(self.backend, models, self.protocol, rounds, workdir=tmp)
