"""``nas supernet score``: held-out top-1 of subnets of a trained supernet, with inherited weights."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError


@dataclass(frozen=True)
class SubnetScore:
    """One subnet's held-out top-1 (a fraction) with the supernet's weights, BatchNorm recalibrated."""

    label: str
    arch: Architecture
    top1: float


@dataclass(frozen=True)
class SubnetScoring:
    """The subnets of a checkpoint to score and the dataset they are scored on (:func:`subnet_scoring`).

    Args:
        supernet: The supernet, its weights loaded.
        dataset: The dataset's name (the held-out split of the one it was trained on).
        data: Its images at the supernet's resolution.
        subnets: (label, architecture): the largest, the smallest, then random ones.
        calib_images: Training images BatchNorm is recalibrated on.
    """

    supernet: Any
    dataset: str
    data: Any
    subnets: tuple[tuple[str, Architecture], ...]
    calib_images: int = 500

    def scores(self) -> Iterator[SubnetScore]:
        """Each subnet's score, as it is measured."""
        from hwnas.supernet.train import score_subnet

        for label, arch in self.subnets:
            top1, _ = score_subnet(self.supernet, arch, self.data, calib_images=self.calib_images)
            yield SubnetScore(label, arch, top1)


def subnet_scoring(checkpoint: str | Path, *, samples: int = 10, seed: int = 0) -> SubnetScoring:
    """Load a trained supernet and choose its subnets to score: the largest, the smallest of its last phase, and
    ``samples`` random ones of that phase (drawn with ``seed``). The data is the training run's dataset (recorded
    in the weights' metadata or the training folder's ``supernet.json``; digits for a checkpoint that records none).

    Args:
        checkpoint: A training folder, its ``checkpoint/`` or its ``supernet.safetensors``.

    Raises:
        ConfigError: ``samples`` below 0, or no checkpoint there.
    """
    import numpy as np

    from hwnas.data.datasets import DataConfig, DataSource
    from hwnas.supernet.checkpoint import load_supernet, resolve_checkpoint, trained_on

    if samples < 0:
        raise ConfigError(f"--samples must be at least 0, got {samples}")
    file = resolve_checkpoint(checkpoint)
    supernet = load_supernet(file)
    cfg = trained_on(file) or {}
    data = DataSource(DataConfig(**cfg))(int(supernet.space.input_shape[-1]))
    rng = np.random.default_rng(seed)
    last = supernet.phases[-1]
    subnets = [("largest", supernet.largest()), ("smallest", supernet.smallest(last))]
    subnets += [(f"random {i + 1}", supernet.sample_subnet(rng, last)) for i in range(samples)]
    return SubnetScoring(supernet=supernet, dataset=str(cfg.get("name", "digits")), data=data,
                         subnets=tuple(subnets))
