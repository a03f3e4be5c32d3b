"""Built-in evaluators: model complexity (cheap), onnxruntime latency (cheap), short training (expensive); the
published-benchmark lookup (``benchmark``) and ONNX-graph memory (``memory``) register from their own modules."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, TrainingDiverged
from hwnas.evaluation import EVALUATORS, EvalContext, EvaluatorParams, Metrics, evaluate_each, stable_fingerprint
from hwnas.training import TrainRecipe, build_seeded, evaluate_top1, seed_for, train_model

log = logging.getLogger(__name__)


class ComplexityParams(EvaluatorParams):
    pass


@EVALUATORS.register("complexity")
class ComplexityEvaluator:
    """Parameters (millions) and FLOPs at batch 1 (millions; torch's FlopCounterMode, a multiply-add is 2 FLOPs)."""

    Params = ComplexityParams
    cheap = True
    provides = ("params_m", "flops_m")

    def __init__(self, *, context: EvalContext) -> None:
        self.space = context.space
        self.seed = context.seed

    def fingerprint(self) -> str:
        return stable_fingerprint("complexity", {})

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        out: list[Metrics | BaseException] = []
        for arch in archs:
            try:
                model = build_seeded(self.space, arch, self.seed).eval()
                params_m, flops_m = params_flops(model, self.space.input_shape_of(arch))
                out.append({"params_m": params_m, "flops_m": flops_m})
            except Exception as exc:  # reported per architecture
                out.append(exc)
        return out


def params_flops(model: Any, input_shape: Sequence[int]) -> tuple[float, float]:
    """Parameters and FLOPs at batch 1, both in millions (torch's FlopCounterMode: a multiply-add is 2 FLOPs)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, *input_shape))
    return sum(p.numel() for p in model.parameters()) / 1e6, counter.get_total_flops() / 1e6


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


@EVALUATORS.register("ort_latency")
class OrtLatencyEvaluator:
    """Measured latency: export to ONNX, time with onnxruntime (warm-up, repeats, median and IQR in ms)."""

    Params = OrtLatencyParams
    cheap = True

    def __init__(self, *, context: EvalContext, device: str | None = None, provider: str = "CPUExecutionProvider",
                 threads: int = 1, batch_size: int = 1, warmup: int = 10, repeats: int = 50, opset: int = 17,
                 precision: str = "fp32", cheap: bool = True) -> None:
        from hwnas.latency.backends import BACKENDS
        from hwnas.latency.evaluator import device_name
        from hwnas.latency.measure import MeasureProtocol

        self.space = context.space
        self.seed = context.seed
        self.device = device
        self.cheap = bool(cheap)
        self.backend = BACKENDS.get("onnxruntime")(provider=provider, threads=threads, batch_size=batch_size,
                                                   opset=opset, precision=precision)
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


class TrainParams(EvaluatorParams, TrainRecipe):
    save_weights: bool = Field(True, description="keep the trained weights so the exported models are trained ones")


@EVALUATORS.register("train")
class TrainEvaluator:
    """Top-1 on the held-out split after a short, fixed training recipe (one-cycle SGD) on the train split.

    torch's thread count is the executor's business (``executor.threads``), not the evaluator's: it
    changes no process-wide state.
    """

    Params = TrainParams
    cheap = False
    provides = ("top1", "val_loss")

    def __init__(self, *, context: EvalContext, **params: Any) -> None:
        if context.data is None:
            raise ConfigError("evaluators: 'train' needs a dataset section")
        self.space = context.space
        self.load_data = context.data
        self.weights_dir = (context.artifacts_dir / "weights") if context.artifacts_dir else None
        self.seed = context.seed
        self.params = TrainParams(**params)
        self.recipe = TrainRecipe(**self.params.model_dump(include=set(TrainRecipe.model_fields)))

    def fingerprint(self) -> str:
        return stable_fingerprint("train", {"params": self.recipe.model_dump(), "seed": self.seed})

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        return evaluate_each(self.train_one, archs)

    def train_one(self, arch: Architecture) -> Metrics:
        """Train ``arch`` from its seeded initialisation; returns top1 and val_loss on the held-out split."""
        import torch

        data = self.load_data(self.space.input_shape_of(arch)[-1])
        model = build_seeded(self.space, arch, self.seed)
        gen = torch.Generator().manual_seed(seed_for(self.seed + 1, arch))
        train_model(model, data.x_train, data.y_train, self.recipe, generator=gen, name=arch.arch_id)
        top1, val_loss = evaluate_top1(model, data.x_val, data.y_val)
        if not math.isfinite(val_loss):
            raise TrainingDiverged(f"training {arch.arch_id}: non-finite validation loss")
        if self.weights_dir is not None and self.params.save_weights:
            self.weights_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.weights_dir / f"{arch.arch_id}.pt.{os.getpid()}.part"
            torch.save(model.state_dict(), tmp)
            os.replace(tmp, self.weights_dir / f"{arch.arch_id}.pt")
        return {"top1": top1, "val_loss": val_loss}


from hwnas.experiments import benchmark as _benchmark  # noqa: E402,F401  (registers "benchmark")
from hwnas.experiments import memory as _memory  # noqa: E402,F401  (registers "memory")
from hwnas.experiments import predictor_eval as _predictor_eval  # noqa: E402,F401  (registers "predictor")
from hwnas.experiments import supernet_eval as _supernet_eval  # noqa: E402,F401  (registers "supernet")
from hwnas.experiments import zero_cost_eval as _zero_cost  # noqa: E402,F401  (registers "zero_cost")
from hwnas.latency import evaluator as _latency_table  # noqa: E402,F401  (registers "latency_table")
