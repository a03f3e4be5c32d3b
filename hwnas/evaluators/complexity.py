"""``complexity``: parameters and FLOPs at batch 1 (cheap)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hwnas.architecture import Architecture
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, stable_fingerprint
from hwnas.training import build_seeded

if TYPE_CHECKING:
    from torch import nn


class ComplexityParams(EvaluatorParams):
    pass


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


def params_flops(model: nn.Module, input_shape: Sequence[int]) -> tuple[float, float]:
    """Parameters and FLOPs at batch 1, both in millions (torch's FlopCounterMode: a multiply-add is 2 FLOPs)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, *input_shape))
    return sum(p.numel() for p in model.parameters()) / 1e6, counter.get_total_flops() / 1e6
