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
otherwise, and the message names the differing parameters), and trained on the experiment's dataset, split the same
way (a checkpoint in its training folder records it in ``supernet.json``; another dataset, ``val_fraction``,
``split_seed`` or ``max_images`` is refused, both named). ``ensemble`` adds checkpoints of the same supernet
trained from other seeds: each subnet is scored with every one of them and its top-1 and loss are their mean
(docs/results/supernet-ranking.md measures what it does to the ranking). With ``save_weights`` (the default)
each scored subnet's recalibrated weights are kept in the run's ``weights/`` folder (an ensemble's: those of the
member that scores it best), so ``nas export`` writes the Pareto front with inherited weights; ``finetune_epochs``
fine-tunes each kept subnet first with the ``train`` evaluator's recipe (``lr``, ``optimizer``), and its top-1 is then
the fine-tuned one: slower (a training epoch per subnet), and on the ConvNeXt example not a reliably closer ranking
(docs/results/supernet-ranking.md).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, TrainingDiverged
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, ResolvedPath, stable_fingerprint

if TYPE_CHECKING:
    from torch import nn

    from hwnas.data.datasets import ImageData

log = logging.getLogger(__name__)


class SupernetEvalParams(EvaluatorParams):
    """Parameters of the ``supernet`` evaluator."""

    checkpoint: ResolvedPath = Field(description="a `nas supernet train` output folder, its checkpoint/ or its "
                                     "supernet.safetensors (relative to the working directory)")
    ensemble: list[ResolvedPath] = Field(
        default_factory=list, description="more checkpoints of the same supernet file trained with other seeds "
        "(--set supernet.seed=N); top-1 and loss are the mean over checkpoint and these, and a subnet keeps the "
        "weights of the one that scores it best")
    calib_images: int = Field(500, ge=2, description="training images for BatchNorm recalibration")
    val_images: int | None = Field(None, ge=1, description="held-out images to score on (default all)")
    batch_size: int = Field(256, ge=1)
    save_weights: bool = Field(True, description="keep each subnet's weights so the front exports with them")
    finetune_epochs: int = Field(0, ge=0, description="fine-tune each subnet this many epochs before scoring "
                                 "and keeping it (0: inherited weights as they are)")
    lr: float = Field(0.02, gt=0, description="peak learning rate of the fine-tuning")
    optimizer: Literal["sgd", "adamw"] = Field("sgd", description="optimiser of the fine-tuning (adamw for supernets "
                                              "trained with AdamW, as the ConvNeXt and ViT examples are)")


class SupernetEvaluator:
    """Top-1 with weights inherited from a trained supernet (BatchNorm recalibrated; no training)."""

    Params = SupernetEvalParams
    cheap = False
    provides = ("top1", "val_loss")

    def __init__(self, *, context: EvalContext, **params: object) -> None:
        from hwnas.data.datasets import DataConfig
        from hwnas.supernet.checkpoint import (
            SupernetIdentity,
            check_identity,
            check_trained_on,
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
        self.files: list[Path] = []
        expected = None
        problems: list[str] = []  # every member's problem at once
        for k, path in enumerate([self.params.checkpoint, *self.params.ensemble]):
            label = "checkpoint" if k == 0 else f"ensemble[{k - 1}]"
            try:
                file = resolve_checkpoint(path)
                if file in self.files:
                    raise ConfigError(f"{path} is already in the ensemble (it would count twice)")
                ident = read_identity(file)
                if expected is None:  # the first readable one fixes the supernet and its parameters
                    expected = SupernetIdentity(space=self.space.name,
                                                space_params=jsonable(self.space.params.model_dump()),
                                                supernet=ident.supernet, supernet_params=ident.supernet_params)
                check_identity(ident, expected, f"supernet: {label} {path}")
                data_cfg = getattr(context.data, "config", None)  # a DataSource's DataConfig
                if isinstance(data_cfg, DataConfig):
                    check_trained_on(file, data_cfg, f"supernet: {label} {path}")
                self.files.append(file)
            except ConfigError as exc:
                problems.extend(p if p.startswith("supernet: ") else f"supernet: {label}: {p}" for p in exc.problems)
        if problems:
            raise ConfigError(problems)
        self._supernets: list[Any] = []
        self._digests: list[str] = []

    @staticmethod
    def shared_files(params: dict[str, Any]) -> dict[str, Path]:
        """The read-only file an executor may ship to its workers instead of letting each read the path: the
        checkpoint's weights (``params["checkpoint"]`` may name the file or its folder)."""
        from hwnas.supernet.checkpoint import resolve_checkpoint

        files = {"checkpoint": resolve_checkpoint(params["checkpoint"])}
        files.update({f"ensemble.{k}": resolve_checkpoint(p) for k, p in enumerate(params.get("ensemble") or [])})
        return files

    def _shas(self) -> list[str]:
        if not self._digests:
            for file in self.files:
                h = hashlib.sha256()
                with open(file, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                self._digests.append(h.hexdigest()[:16])
        return self._digests

    def fingerprint(self) -> str:
        # the optimiser enters the fingerprint only when it is not the default, and the weights are one digest
        # without an ensemble: runs from before either existed resume
        p = self.params.model_dump(exclude={"checkpoint", "ensemble", "save_weights"}
                                   | ({"optimizer"} if self.params.optimizer == "sgd" else set()))
        shas = self._shas()
        return stable_fingerprint("supernet", {"params": p, "weights": shas[0] if len(shas) == 1 else shas,
                                               "seed": self.seed})

    def prepare(self) -> None:
        """Load the supernets' weights (once)."""
        from hwnas.supernet.checkpoint import load_supernet

        if not self._supernets:
            self._supernets = [load_supernet(file, space=self.space).eval() for file in self.files]
            self._shas()

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
                size = int(self.space.input_shape_of(arch)[-1])
                for supernet in self._supernets:  # one subnet per ensemble member, scored in the same pass
                    module = inherited_subnet(supernet, arch, data.x_train, calib_images=self.params.calib_images,
                                              batch_size=min(self.params.batch_size, 128))
                    if self.params.finetune_epochs:
                        module = self._finetune(module, arch, data)
                    groups.setdefault(size, []).append((i, module))
            except Exception as exc:  # reported per architecture
                out[i] = exc
                for members in groups.values():  # members already extracted for it are not scored
                    members[:] = [(j, m) for j, m in members if j != i]
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
            scored: dict[int, list[tuple[float, float, Any]]] = {}  # arch index -> (top-1, loss, module) per member
            for j, (i, module) in enumerate(members):
                scored.setdefault(i, []).append((correct[j] / n, losses[j] / n, module))
            for i, runs in scored.items():
                loss = float(sum(r[1] for r in runs) / len(runs))
                if not math.isfinite(loss):
                    out[i] = TrainingDiverged(f"supernet: {archs[i].arch_id} gives a non-finite held-out loss")
                    continue
                out[i] = {"top1": float(sum(r[0] for r in runs) / len(runs)), "val_loss": loss}
                if self.weights_dir is not None and self.params.save_weights:
                    self._save(archs[i], max(runs, key=lambda r: r[0])[2])  # the member that scores it best
        return [o if o is not None else RuntimeError("not scored") for o in out]

    def _finetune(self, module: nn.Module, arch: Architecture, data: ImageData) -> nn.Module:
        from hwnas.supernet.train import finetune_subnet

        return finetune_subnet(module, self.space, arch, data, epochs=self.params.finetune_epochs, lr=self.params.lr,
                               optimizer=self.params.optimizer, seed=self.seed + 2)

    def _save(self, arch: Architecture, module: nn.Module) -> None:
        import torch

        assert self.weights_dir is not None
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.weights_dir / f"{arch.arch_id}.pt.{os.getpid()}.part"
        torch.save(module.state_dict(), tmp)
        os.replace(tmp, self.weights_dir / f"{arch.arch_id}.pt")


__all__ = ["SupernetEvalParams", "SupernetEvaluator"]
