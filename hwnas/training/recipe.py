"""The training recipe (one-cycle SGD or AdamW), top-1 evaluation and BatchNorm recalibration."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.architecture import Architecture
from hwnas.errors import TrainingDiverged

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.search_spaces.base import SearchSpace


class TrainRecipe(BaseModel):
    """A short, fixed training recipe: every candidate gets the same one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: int = Field(4, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(0.2, gt=0, description="peak learning rate of the one-cycle schedule")
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(5e-5, ge=0)
    label_smoothing: float = Field(0.0, ge=0, lt=1)
    optimizer: Literal["sgd", "adamw"] = "sgd"


def seed_for(seed: int, arch: Architecture) -> int:
    """A per-architecture seed derived from the experiment seed and the arch id (stable across processes)."""
    return (int(arch.arch_id, 16) ^ (seed * 0x9E3779B97F4A7C15)) % (2**63 - 1)


def build_seeded(space: SearchSpace, arch: Architecture, seed: int) -> nn.Module:
    """``space.build(arch)`` with torch's initialisation drawn from a generator seeded by (seed, arch)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_for(seed, arch))
        return space.build(arch)


def train_model(model: nn.Module, x_train: np.ndarray, y_train: np.ndarray, recipe: TrainRecipe, *,
                generator: torch.Generator, name: str = "model") -> nn.Module:
    """Train ``model`` in place with ``recipe``; batches drawn with ``generator``.

    Raises:
        TrainingDiverged: A non-finite loss (names the epoch and step).
    """
    import torch
    import torch.nn.functional as F

    p = recipe
    xtr, ytr = torch.from_numpy(x_train), torch.from_numpy(y_train)
    n = len(xtr)
    steps_per_epoch = math.ceil(n / p.batch_size)
    if p.optimizer == "sgd":
        opt: Any = torch.optim.SGD(model.parameters(), lr=p.lr, momentum=p.momentum, nesterov=p.momentum > 0,
                                   weight_decay=p.weight_decay)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=p.lr, total_steps=p.epochs * steps_per_epoch)
    model.train()
    for epoch in range(p.epochs):
        perm = torch.randperm(n, generator=generator)
        for step in range(steps_per_epoch):
            idx = perm[step * p.batch_size : (step + 1) * p.batch_size]
            if len(idx) < 2:  # BatchNorm needs two samples
                continue
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx], label_smoothing=p.label_smoothing)
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"training {name}: non-finite loss ({loss.item()}) at epoch {epoch + 1} "
                                       f"step {step + 1}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return model.eval()


def evaluate_top1(model: nn.Module, x: np.ndarray, y: np.ndarray, *, batch_size: int = 256) -> tuple[float, float]:
    """(top-1 as a fraction, mean cross-entropy) of ``model`` in eval mode on (x, y)."""
    import torch
    import torch.nn.functional as F

    model.eval()
    with torch.no_grad():
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        logits = torch.cat([model(xs[i : i + batch_size]) for i in range(0, len(xs), batch_size)])
        return float((logits.argmax(1) == ys).float().mean()), float(F.cross_entropy(logits, ys))


def recalibrate_bn(model: nn.Module, x: np.ndarray, *, batch_size: int = 64, max_images: int | None = 2000
                   ) -> nn.Module:
    """Re-estimate every BatchNorm's running statistics on ``x`` (cumulative average), then eval mode.

    Weights taken from a supernet carry statistics of other subnetworks; this makes them the network's own.
    """
    import torch

    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average over the batches below
    xs = torch.from_numpy(x[:max_images] if max_images else x)
    model.train()
    with torch.no_grad():
        for i in range(0, len(xs), batch_size):
            if len(xs[i : i + batch_size]) >= 2:
                model(xs[i : i + batch_size])
    return model.eval()
