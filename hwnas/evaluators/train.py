"""``train``: top-1 on the held-out split after a short, fixed training recipe (expensive)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, TrainingDiverged
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, evaluate_each, stable_fingerprint
from hwnas.training import TrainRecipe, build_seeded, evaluate_top1, seed_for, train_model


class TrainParams(EvaluatorParams, TrainRecipe):
    save_weights: bool = Field(True, description="keep the trained weights so the exported models are trained ones")


class TrainEvaluator:
    """Top-1 on the held-out split after a short, fixed training recipe (one-cycle SGD) on the train split.

    torch's thread count is the executor's business (``executor.threads``), not the evaluator's: it
    changes no process-wide state.
    """

    Params = TrainParams
    cheap = False
    provides = ("top1", "val_loss")
    fidelity_kind = "training epochs (a whole number, at least 1)"

    def __init__(self, *, context: EvalContext, **params: object) -> None:
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

    def fidelity_problems(self, fidelity: object) -> list[str]:
        """A multi-fidelity rung of ``train`` is a number of epochs (the one-cycle schedule spans them)."""
        if isinstance(fidelity, bool) or not isinstance(fidelity, int) or fidelity < 1:
            return [f"train offers {self.fidelity_kind} as its fidelity, not {fidelity!r}"]
        return []

    def fidelity_params(self, fidelity: object) -> dict[str, object]:
        return {"epochs": fidelity}

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
