"""``mlp``: a multilayer perceptron over the features, as once-for-all's accuracy predictor.

Features and targets are standardised; hidden layers of ReLU units (once-for-all: three of 400) are
trained with Adam on the squared error, mini-batches drawn from a torch generator seeded by the
predictor's generator, so a fit is repeatable. Prediction runs in numpy (float32, batched): no torch
at predict time, and hundreds of thousands of architectures a second on one CPU core
(``benchmarks/predictor_throughput.py``). Saved as JSON with the weights packed as base64 arrays.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from pydantic import Field

from hwnas.predictors._torch_fit import seeded_linear, train_minibatch
from hwnas.predictors.base import (
    JSONPredictor,
    RankTargetParams,
    as_feature_matrix,
    check_fit_data,
    pack_array,
    unpack_array,
)

MIN_SAMPLES = 8


class MLPParams(RankTargetParams):
    """Parameters of the ``mlp`` predictor."""


    hidden: tuple[int, ...] = Field((400, 400, 400), min_length=1, description="units per hidden layer")
    epochs: int = Field(300, ge=1, le=100_000, description="passes over the training rows (at most max_steps)")
    max_steps: int = Field(5000, ge=1, description="cap on optimiser steps: large training sets get fewer epochs")
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(1e-3, gt=0, le=1)
    weight_decay: float = Field(1e-4, ge=0, description="AdamW's decoupled weight decay")


class MLPPredictor(JSONPredictor):
    """A ReLU MLP (as once-for-all's accuracy predictor), trained with AdamW, predicted in numpy."""

    name = "mlp"
    Params = MLPParams
    params: MLPParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        self._weights: list[np.ndarray] = []
        self._biases: list[np.ndarray] = []
        self._x_mean = self._x_scale = np.zeros(0)
        self._y_mean, self._y_scale = 0.0, 1.0

    def fit(self, X: np.ndarray, y: np.ndarray) -> MLPPredictor:
        import torch

        X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        p = self.params
        y = self._fit_targets(y)
        self._x_mean = X.mean(axis=0)
        std = X.std(axis=0)
        self._x_scale = np.where(std > 0, std, 1.0)
        self._y_mean, self._y_scale = float(y.mean()), float(y.std())
        gen = torch.Generator().manual_seed(self.seed)
        xs = torch.as_tensor((X - self._x_mean) / self._x_scale, dtype=torch.float32)
        ys = torch.as_tensor((y - self._y_mean) / self._y_scale, dtype=torch.float32)
        sizes = [X.shape[1], *p.hidden, 1]
        layers: list[torch.nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            layers.append(seeded_linear(n_in, n_out, gen))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
        train_minibatch(net.parameters(),
                        lambda idx: torch.nn.functional.mse_loss(net(xs[idx]).squeeze(1), ys[idx]),
                        xs.shape[0], p, gen, owner=self.name)
        lins = [m for m in net if isinstance(m, torch.nn.Linear)]
        self._weights = [m.weight.detach().numpy().T.astype(np.float32).copy() for m in lins]
        self._biases = [m.bias.detach().numpy().astype(np.float32).copy() for m in lins]
        self.n_features = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        h = ((X - self._x_mean) / self._x_scale).astype(np.float32)
        last = len(self._weights) - 1
        for i, (w, b) in enumerate(zip(self._weights, self._biases)):
            h = h @ w
            h += b
            if i < last:
                np.maximum(h, 0, out=h)
        out = h[:, 0].astype(np.float64) * self._y_scale + self._y_mean
        return self._to_target_units(out)

    def _state(self) -> dict[str, object]:
        return {
            "x_mean": pack_array(self._x_mean), "x_scale": pack_array(self._x_scale),
            "y_mean": self._y_mean, "y_scale": self._y_scale,
            "weights": [pack_array(w) for w in self._weights], "biases": [pack_array(b) for b in self._biases],
        }

    def _from_state(self, state: dict[str, Any]) -> None:
        self._x_mean = unpack_array(state["x_mean"], what="mlp x_mean")
        self._x_scale = unpack_array(state["x_scale"], what="mlp x_scale")
        self._y_mean, self._y_scale = float(state["y_mean"]), float(state["y_scale"])
        self._weights = [unpack_array(w, what="mlp weight") for w in state["weights"]]
        self._biases = [unpack_array(b, what="mlp bias") for b in state["biases"]]
        width = self.n_features
        sizes = [width, *self.params.hidden, 1]
        if self._x_mean.shape != (width,) or self._x_scale.shape != (width,):
            raise ValueError(f"mlp feature scaling does not have {width} entries")
        if len(self._weights) != len(sizes) - 1 or len(self._biases) != len(sizes) - 1:
            raise ValueError(f"mlp has {len(self._weights)} weight matrices, its layers need {len(sizes) - 1}")
        for w, b, n_in, n_out in zip(self._weights, self._biases, sizes[:-1], sizes[1:]):
            if w.shape != (n_in, n_out) or b.shape != (n_out,):
                raise ValueError(f"mlp weight shape {w.shape} / bias {b.shape} != ({n_in}, {n_out}) / ({n_out},)")
