"""The ``supernet`` evaluator: held-out top-1 of a subnet with weights inherited from a trained supernet.

.. code-block:: yaml

    evaluators:
      - name: supernet
        params:
          checkpoint: runs/supernets/mbv3_digits   # a `nas supernet train` folder (or its supernet.safetensors)
          calib_images: 500                         # training images for BatchNorm recalibration
          save_weights: true                        # keep each subnet's weights: the front exports with them

Per architecture: ``extract(arch)`` (the space's own network, the supernet's weights copied in), BatchNorm
statistics recalibrated on ``calib_images`` training images, top-1 and loss on the held-out split. The
subnets of one batch share one pass over the held-out images (the models of one input size are
evaluated batch by batch together). Expensive in the runner's sense (it runs in the executor's
workers), but cheap in practice: no training.

The checkpoint must be of the experiment's space with the same parameters (the experiment does not build
otherwise, and the message names the differing parameters). With ``save_weights`` (the default) each
scored subnet's recalibrated weights are kept in the run's ``weights/`` folder, so ``nas export`` writes the
Pareto front with inherited weights; ``finetune_epochs`` fine-tunes each kept subnet first with the
``train`` evaluator's recipe (``lr``, ``optimizer``), and its top-1 is then the fine-tuned one: slower (a training
epoch per subnet), and on the ConvNeXt example not a reliably closer ranking (README, Supernets).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, TrainingDiverged
from hwnas.evaluation import EVALUATORS, EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint

log = logging.getLogger(__name__)


class SupernetEvalParams(EvaluatorParams):
    """Parameters of the ``supernet`` evaluator."""

    checkpoint: ResolvedPath = Field(description="a `nas supernet train` output folder, its checkpoint/ or its "
                                     "supernet.safetensors (relative to the working directory)")
    calib_images: int = Field(500, ge=2, description="training images for BatchNorm recalibration")
    val_images: int | None = Field(None, ge=1, description="held-out images to score on (default all)")
    batch_size: int = Field(256, ge=1)
    save_weights: bool = Field(True, description="keep each subnet's weights so the front exports with them")
    finetune_epochs: int = Field(0, ge=0, description="fine-tune each subnet this many epochs before scoring "
                                 "and keeping it (0: inherited weights as they are)")
    lr: float = Field(0.02, gt=0, description="peak learning rate of the fine-tuning")
    optimizer: Literal["sgd", "adamw"] = Field("sgd", description="optimiser of the fine-tuning (adamw for supernets "
                                              "trained with AdamW, as the ConvNeXt and ViT examples are)")


@EVALUATORS.register("supernet")
class SupernetEvaluator:
    """Top-1 with weights inherited from a trained supernet (BatchNorm recalibrated; no training)."""

    Params = SupernetEvalParams
    cheap = False
    provides = ("top1", "val_loss")

    def __init__(self, *, context: EvalContext, **params: Any) -> None:
        from hwnas.supernet.checkpoint import (
            SupernetIdentity,
            check_identity,
            jsonable,
            read_identity,
            resolve_checkpoint,
        )

        self.params = SupernetEvalParams(**params)
        if context.data is None:
            raise ConfigError("evaluators: 'supernet' needs a dataset section (its images recalibrate and score)")
        self.space = context.space
        self.load_data = context.data
        self.seed = context.seed
        self.weights_dir = (context.artifacts_dir / "weights") if context.artifacts_dir else None
        where = f"supernet: checkpoint {self.params.checkpoint}"
        try:
            self.file = resolve_checkpoint(self.params.checkpoint)
        except ConfigError as exc:
            raise ConfigError(f"supernet: {exc}") from None
        ident = read_identity(self.file)
        expected = SupernetIdentity(space=self.space.name, space_params=jsonable(self.space.params.model_dump()),
                                    supernet=ident.supernet, supernet_params=ident.supernet_params)
        check_identity(ident, expected, where)
        self._supernet: Any = None
        self._digest: str | None = None

    @staticmethod
    def shared_files(params: dict[str, Any]) -> dict[str, Path]:
        """The read-only file an executor may ship to its workers instead of letting each read the path: the
        checkpoint's weights (``params["checkpoint"]`` may name the file or its folder)."""
        from hwnas.supernet.checkpoint import resolve_checkpoint

        return {"checkpoint": resolve_checkpoint(params["checkpoint"])}

    def _sha(self) -> str:
        if self._digest is None:
            h = hashlib.sha256()
            with open(self.file, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            self._digest = h.hexdigest()[:16]
        return self._digest

    def fingerprint(self) -> str:
        # the optimiser enters the fingerprint only when it is not the default: runs from before it existed resume
        p = self.params.model_dump(exclude={"checkpoint", "save_weights"}
                                   | ({"optimizer"} if self.params.optimizer == "sgd" else set()))
        return stable_fingerprint("supernet", {"params": p, "weights": self._sha(), "seed": self.seed})

    def prepare(self) -> None:
        """Load the supernet's weights (once)."""
        from hwnas.supernet.checkpoint import load_supernet

        if self._supernet is None:
            self._supernet = load_supernet(self.file, space=self.space).eval()
            self._sha()

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """Score the batch: every subnet extracted and recalibrated, then one held-out pass per input size."""
        import torch

        from hwnas.supernet.train import inherited_subnet

        self.prepare()
        out: list[Metrics | BaseException | None] = [None] * len(archs)
        groups: dict[int, list[tuple[int, Any]]] = {}
        for i, arch in enumerate(archs):
            try:
                data = self.load_data(int(self.space.input_shape[-1]))
                module = inherited_subnet(self._supernet, arch, data.x_train, calib_images=self.params.calib_images,
                                          batch_size=min(self.params.batch_size, 128))
                if self.params.finetune_epochs:
                    module = self._finetune(module, arch, data)
                size = int(self.space.input_shape_of(arch)[-1])
                groups.setdefault(size, []).append((i, module))
            except Exception as exc:  # reported per architecture
                out[i] = exc
        for size, members in groups.items():
            data = self.load_data(int(self.space.input_shape[-1]))
            n = len(data.x_val) if self.params.val_images is None else min(self.params.val_images, len(data.x_val))
            correct = [0] * len(members)
            losses = [0.0] * len(members)
            with torch.no_grad():
                for start in range(0, n, self.params.batch_size):
                    xb = torch.from_numpy(data.x_val[start:start + self.params.batch_size][: n - start])
                    yb = torch.from_numpy(data.y_val[start:start + self.params.batch_size][: n - start])
                    if xb.shape[-1] != size:
                        xb = torch.nn.functional.interpolate(xb, size=(size, size), mode="bilinear",
                                                             align_corners=False)
                    for j, (_, module) in enumerate(members):
                        logits = module(xb)
                        correct[j] += int((logits.argmax(1) == yb).sum())
                        losses[j] += float(torch.nn.functional.cross_entropy(logits, yb, reduction="sum"))
            for j, (i, module) in enumerate(members):
                loss = losses[j] / n
                if not math.isfinite(loss):
                    out[i] = TrainingDiverged(f"supernet: {archs[i].arch_id} gives a non-finite held-out loss")
                    continue
                out[i] = {"top1": correct[j] / n, "val_loss": loss}
                if self.weights_dir is not None and self.params.save_weights:
                    self._save(archs[i], module)
        return [o if o is not None else RuntimeError("not scored") for o in out]

    def _finetune(self, module: Any, arch: Architecture, data: Any) -> Any:
        from hwnas.supernet.train import finetune_subnet

        return finetune_subnet(module, self.space, arch, data, epochs=self.params.finetune_epochs, lr=self.params.lr,
                               optimizer=self.params.optimizer, seed=self.seed + 2)

    def _save(self, arch: Architecture, module: Any) -> None:
        import torch

        assert self.weights_dir is not None
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.weights_dir / f"{arch.arch_id}.pt.{os.getpid()}.part"
        torch.save(module.state_dict(), tmp)
        os.replace(tmp, self.weights_dir / f"{arch.arch_id}.pt")


__all__ = ["SupernetEvalParams", "SupernetEvaluator"]
