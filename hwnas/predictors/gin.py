"""``gin``: a graph isomorphism network over cell graphs, as BRP-NAS's graph predictor.

It reads the ``graph`` feature set (:mod:`hwnas.predictors.features`): per cell, N nodes (input(s), one
node per slot carrying its operation, output) with one-hot node features (K per node) and a directed
adjacency ``A``. Each of ``layers`` GIN layers (Xu et al., 2019) updates every node as

    h' = ReLU(W2 · ReLU(W1 · ((1 + eps) · h + sum of the neighbours' h) + b1) + b2)

with a learnt ``eps`` per layer. ``neighbours`` says whose ``h`` a node sums: ``symmetric`` (the default:
predecessors and successors alike, ``A + Aᵀ``), ``forward`` (predecessors, the direction data flows) or
``backward`` (successors). The states of the nodes that take part (those with a non-zero one-hot: a
``none`` slot's node is left out) are summed (``readout: sum``) or averaged, and a linear head maps that
to the standardised target (by default the targets' quantiles, ``target: rank``).

Chosen on NAS-Bench-201 CIFAR-10 (200-epoch test, fitted on 200 cells, scored on the other 15,425, seeds
0-4, Kendall tau / top-5 % precision): symmetric 0.733 / 0.534, forward 0.727 / 0.502, backward 0.727 /
0.485; mean readout 0.734 / 0.538. Width 128, 4 layers, batch 16, 2x the steps, lr 1e-3, weight decay
1e-2 and 0.3, dropout, or a readout of every layer (jumping knowledge) all moved tau by under 0.015
(noise at 5 seeds) while costing more time; 2 layers or width 32 lost 0.006-0.016. The network fits its
training cells almost perfectly (tau 0.99): the cells as written carry dead edges, which the ``cell``
features of the tree models encode away and a graph network must learn from few rows.

Training: AdamW on the squared error, a cosine learning-rate schedule, mini-batches and initial
weights drawn from a torch generator seeded by the predictor's generator, so a fit is repeatable
(same seed, bit-identical predictions). The fit runs on one torch thread (restored afterwards): for
graphs of a few nodes more threads only wait on each other, 50x slower beside another busy process.
Prediction runs in numpy (float32, batched): no torch at predict time. Saved as JSON with the weights
packed as base64 arrays.
"""

from __future__ import annotations

from typing import Any, Literal

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
from hwnas.predictors.features import graph_layout

MIN_SAMPLES = 8
#: Cells run through the network at once in predict (memory: rows x nodes x hidden floats).
_CHUNK_ROWS = 4096


class GINParams(RankTargetParams):
    """Parameters of the ``gin`` predictor."""


    hidden: int = Field(64, ge=1, le=4096, description="units of every node state and of each layer's MLP")
    layers: int = Field(3, ge=1, le=16, description="GIN layers (message-passing rounds)")
    neighbours: Literal["symmetric", "forward", "backward"] = Field(
        "symmetric", description="whose states a node sums: both directions, its predecessors, or its successors")
    readout: Literal["sum", "mean"] = Field("sum", description="how node states become one cell state")
    epochs: int = Field(300, ge=1, le=100_000, description="passes over the training rows (at most max_steps)")
    max_steps: int = Field(3000, ge=1, description="cap on optimiser steps: large training sets get fewer epochs")
    batch_size: int = Field(32, ge=1)
    learning_rate: float = Field(3e-3, gt=0, le=1)
    weight_decay: float = Field(1e-4, ge=0, description="AdamW's decoupled weight decay")


def graph_shape(X: np.ndarray, *, owner: str = "gin") -> tuple[int, int]:
    """(N nodes, K node features) of ``graph`` rows ``X``, or a ValueError naming the expected layout."""
    width = X.shape[1]
    n = X[0, 0] if X.shape[0] else 0.0
    k = graph_layout(width, int(n)) if n == int(n) and n >= 1 else -1
    if k < 1 or not np.all(X[:, 0] == n):
        first = f"{float(X[0, 0]):g}" if X.shape[0] else "absent"
        raise ValueError(
            f"{owner} reads the 'graph' feature set: each row [N, N*N adjacency, N*K node one-hots] with column 0 "
            f"the same positive integer N for every row and width 1 + N*N + N*K (K >= 1); got {width} columns "
            f"and column 0 = {first}{'' if np.all(X[:, 0] == n) else ' (varying)'} "
            f"(fit on features 'graph')")
    body = X[:, 1:]
    if not np.all((body == 0) | (body == 1)):
        raise ValueError(f"{owner} reads the 'graph' feature set: the adjacency and node one-hots after column 0 "
                         "must be 0 or 1 (fit on features 'graph')")
    return int(n), k


def _split(X: np.ndarray, n: int, k: int, neighbours: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(message matrices M with ``M @ h`` the neighbour sums, (B, N, N); node features (B, N, K); node mask (B, N))."""
    adj = X[:, 1 : 1 + n * n].reshape(-1, n, n)
    feats = X[:, 1 + n * n :].reshape(-1, n, k)
    if neighbours == "forward":  # node i sums its predecessors j: A[j, i]
        msg = adj.transpose(0, 2, 1)
    elif neighbours == "backward":
        msg = adj
    else:
        msg = np.minimum(adj + adj.transpose(0, 2, 1), 1.0)
    mask = (feats != 0).any(axis=2)
    return np.ascontiguousarray(msg, dtype=np.float32), feats.astype(np.float32), mask.astype(np.float32)


class GINPredictor(JSONPredictor):
    """A graph isomorphism network over the ``graph`` features (BRP-NAS), trained with AdamW, predicted in numpy."""

    name = "gin"
    Params = GINParams
    params: GINParams
    #: The one feature set it reads (checked where a command pairs a predictor with features).
    features = "graph"

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        self.n_nodes = self.n_node_features = 0
        self._eps = np.zeros(0, dtype=np.float32)
        self._weights: list[np.ndarray] = []  # per layer W1, W2; then the head
        self._biases: list[np.ndarray] = []
        self._y_mean, self._y_scale = 0.0, 1.0

    def fit(self, X: np.ndarray, y: np.ndarray) -> GINPredictor:
        import torch

        X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        graph_shape(X, owner=self.name)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # graphs of a few nodes: threads only wait on each other (50x slower on a busy host)
        try:
            return self._fit(X, y)
        finally:
            torch.set_num_threads(threads)

    def _fit(self, X: np.ndarray, y: np.ndarray) -> GINPredictor:
        import torch

        n_nodes, k = graph_shape(X, owner=self.name)
        p = self.params
        y = self._fit_targets(y)
        self._y_mean, self._y_scale = float(y.mean()), float(y.std())
        gen = torch.Generator().manual_seed(self.seed)
        msg, feats, mask = (torch.from_numpy(a) for a in _split(X, n_nodes, k, p.neighbours))
        ys = torch.as_tensor((y - self._y_mean) / self._y_scale, dtype=torch.float32)

        lins = torch.nn.ModuleList()
        for layer in range(p.layers):
            lins.append(seeded_linear(k if layer == 0 else p.hidden, p.hidden, gen))
            lins.append(seeded_linear(p.hidden, p.hidden, gen))
        head = seeded_linear(p.hidden, 1, gen)
        eps = torch.nn.Parameter(torch.zeros(p.layers))
        relu = torch.nn.functional.relu
        mean = p.readout == "mean"

        def forward(m: torch.Tensor, h: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            for layer in range(p.layers):
                h = (1 + eps[layer]) * h + torch.bmm(m, h)
                h = relu(lins[2 * layer + 1](relu(lins[2 * layer](h))))
            g = (h * keep.unsqueeze(2)).sum(dim=1)
            if mean:
                g = g / keep.sum(dim=1, keepdim=True)
            return head(g).squeeze(1)

        train_minibatch([*lins.parameters(), *head.parameters(), eps],
                        lambda idx: torch.nn.functional.mse_loss(forward(msg[idx], feats[idx], mask[idx]), ys[idx]),
                        ys.shape[0], p, gen, owner=self.name)
        self._eps = eps.detach().numpy().astype(np.float32).copy()
        all_lins = [*lins, head]
        self._weights = [m.weight.detach().numpy().T.astype(np.float32).copy() for m in all_lins]
        self._biases = [m.bias.detach().numpy().astype(np.float32).copy() for m in all_lins]
        self.n_nodes, self.n_node_features = n_nodes, k
        self.n_features = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        if X.shape[0] == 0:
            return self._to_target_units(np.zeros(0))
        n_nodes, _ = graph_shape(X, owner=self.name)
        if n_nodes != self.n_nodes:
            raise ValueError(f"{self.name}: rows of {n_nodes}-node graphs, fitted on {self.n_nodes}-node graphs")
        out = np.concatenate([self._forward(X[i : i + _CHUNK_ROWS]) for i in range(0, X.shape[0], _CHUNK_ROWS)])
        return self._to_target_units(out.astype(np.float64) * self._y_scale + self._y_mean)

    def _forward(self, X: np.ndarray) -> np.ndarray:
        msg, h, keep = _split(X, self.n_nodes, self.n_node_features, self.params.neighbours)
        w, b = self._weights, self._biases
        for layer in range(self.params.layers):
            h = (1 + self._eps[layer]) * h + np.matmul(msg, h)
            h = h @ w[2 * layer]
            h += b[2 * layer]
            np.maximum(h, 0, out=h)
            h = h @ w[2 * layer + 1]
            h += b[2 * layer + 1]
            np.maximum(h, 0, out=h)
        g = np.einsum("bnh,bn->bh", h, keep)
        if self.params.readout == "mean":
            g /= keep.sum(axis=1, keepdims=True)
        out: np.ndarray = (g @ w[-1] + b[-1])[:, 0]
        return out

    def _state(self) -> dict[str, object]:
        return {
            "n_nodes": self.n_nodes, "n_node_features": self.n_node_features,
            "y_mean": self._y_mean, "y_scale": self._y_scale, "eps": pack_array(self._eps),
            "weights": [pack_array(w) for w in self._weights], "biases": [pack_array(b) for b in self._biases],
        }

    def _from_state(self, state: dict[str, Any]) -> None:
        p = self.params
        self.n_nodes, self.n_node_features = int(state["n_nodes"]), int(state["n_node_features"])
        self._y_mean, self._y_scale = float(state["y_mean"]), float(state["y_scale"])
        self._eps = unpack_array(state["eps"], what="gin eps").astype(np.float32)
        self._weights = [unpack_array(w, what="gin weight").astype(np.float32) for w in state["weights"]]
        self._biases = [unpack_array(b, what="gin bias").astype(np.float32) for b in state["biases"]]
        n, k, width = self.n_nodes, self.n_node_features, self.n_features
        if n < 1 or k < 1 or graph_layout(int(width or 0), n) != k:
            raise ValueError(f"gin graph of {n} nodes x {k} features does not make rows of {width} columns")
        if self._eps.shape != (p.layers,):
            raise ValueError(f"gin eps has shape {self._eps.shape}, its {p.layers} layers need ({p.layers},)")
        shapes: list[tuple[int, int]] = []
        for layer in range(p.layers):
            shapes += [(k if layer == 0 else p.hidden, p.hidden), (p.hidden, p.hidden)]
        shapes.append((p.hidden, 1))
        if len(self._weights) != len(shapes) or len(self._biases) != len(shapes):
            raise ValueError(f"gin has {len(self._weights)} weight matrices, its layers need {len(shapes)}")
        for w, b, shape in zip(self._weights, self._biases, shapes):
            if w.shape != shape or b.shape != (shape[1],):
                raise ValueError(f"gin weight shape {w.shape} / bias {b.shape} != {shape} / ({shape[1]},)")
