"""The ``zero_cost`` evaluator: zero-cost proxies of the untrained network on a batch of the experiment's data.

.. code-block:: yaml

    evaluators:
      - name: zero_cost
        params: {proxies: [synflow, naswot], batch_size: 64}

Provides ``zc_<proxy>`` per proxy (see :mod:`hwnas.predictors.zero_cost`). The network is the one the
``train`` evaluator would start from (the same seeded initialisation); the batch is drawn once from the
training split with the experiment seed. Cheap: a forward and a backward pass (``ntk_cond``: one backward
per image of its batch, at most ``ntk_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, EvaluationError
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, evaluate_each, stable_fingerprint

Proxy = Literal["synflow", "snip", "grad_norm", "naswot", "ntk_cond"]


class ZeroCostParams(EvaluatorParams):
    """Parameters of the ``zero_cost`` evaluator."""

    proxies: list[Proxy] = Field(["synflow", "snip", "grad_norm", "naswot"], min_length=1,
                                 description="proxies to compute; each gives metric zc_<proxy>")
    batch_size: int = Field(64, ge=2, le=4096, description="images in the batch")
    ntk_batch: int = Field(32, ge=2, le=1024, description="images of ntk_cond's kernel (one backward each)")
    cheap: bool = Field(True, description="runs before constraints filter")

    @model_validator(mode="after")
    def _ntk_within_batch(self) -> ZeroCostParams:
        # asked for both, they contradict each other (the default ntk_batch is capped by a smaller batch)
        if "ntk_cond" in self.proxies and "ntk_batch" in self.model_fields_set and self.ntk_batch > self.batch_size:
            raise ValueError(f"ntk_batch ({self.ntk_batch}) is larger than batch_size ({self.batch_size}): ntk_cond's "
                             "kernel is taken on images of the batch")
        return self

    @field_validator("proxies")
    @classmethod
    def _no_repeats(cls, proxies: list[str]) -> list[str]:
        repeated = sorted({p for p in proxies if proxies.count(p) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once")
        return proxies


class ZeroCostEvaluator:
    """Zero-cost proxies (synflow, snip, grad_norm, naswot, ntk_cond) on one batch of the experiment's data."""

    Params = ZeroCostParams

    def __init__(self, *, context: EvalContext, proxies: list[str], batch_size: int = 64, ntk_batch: int = 32,
                 cheap: bool = True) -> None:
        if context.data is None:
            raise ConfigError("evaluators: 'zero_cost' needs a dataset section (the proxies read a real batch)")
        self.space = context.space
        self.load_data = context.data
        self.seed = context.seed
        self.proxies = list(dict.fromkeys(proxies))
        self.batch_size = batch_size
        self.ntk_batch = ntk_batch
        self.cheap = bool(cheap)
        self.provides: tuple[str, ...] = tuple(f"zc_{p}" for p in self.proxies)

    def fingerprint(self) -> str:
        return stable_fingerprint("zero_cost", {"proxies": self.proxies, "batch_size": self.batch_size,
                                                "ntk_batch": self.ntk_batch, "seed": self.seed})

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        return evaluate_each(self.score_one, archs)

    def _batch(self, resolution: int) -> tuple[np.ndarray, np.ndarray]:
        data = self.load_data(resolution)
        n = len(data.y_train)
        pick = np.random.default_rng(self.seed).permutation(n)[: min(self.batch_size, n)]
        return data.x_train[pick], data.y_train[pick]

    def score_one(self, arch: Architecture) -> Metrics:
        from hwnas.predictors.zero_cost import score_all
        from hwnas.training import build_seeded

        x, y = self._batch(self.space.input_shape_of(arch)[-1])
        out: dict[str, float] = {}
        for proxy in self.proxies:
            xb, yb = (x[: self.ntk_batch], y[: self.ntk_batch]) if proxy == "ntk_cond" else (x, y)
            out.update(score_all(lambda: build_seeded(self.space, arch, self.seed), xb, yb, [proxy], seed=self.seed))
        bad = [k for k, v in out.items() if not np.isfinite(v)]
        if bad:  # a singular kernel (two images with one activation code; a rank-deficient NTK)
            raise EvaluationError(f"zero_cost: {', '.join(bad)} of {arch.arch_id} is not finite "
                                  f"({', '.join(f'{k}={out[k]}' for k in bad)}); try another batch_size")
        return {f"zc_{k}": v for k, v in out.items()}
