"""The LSTM controller of Zoph & Le (2017) and ENAS (Pham et al. 2018): one decision per gene, each conditioned
on the ones before it through an LSTM's state.

Step ``g`` feeds the embedding of the previous decision (a start token for the first gene) to an
``LSTMCell``; a linear head reads the gene's logits off the hidden state (``tanh_constant · tanh(z / 5)``
when ``tanh_constant`` is set, ENAS's way of keeping the early policy exploratory). Parameters start
uniform in ±0.1 from a torch generator seeded by the strategy, so the first policy is close to uniform and
the same seed builds the same controller.

Draws use the strategy's numpy generator (one uniform number per gene, inverse CDF in float64), so the
proposals are as reproducible as the factorised controller's. Log-probabilities are recomputed with
teacher forcing on the drawn indices, batched over samples; only *active* genes count in a sample's
log-probability (an inactive gene's decision changes nothing about the architecture), but every decision is
still fed forward, as drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

#: Parameters start uniform in +- this (ENAS).
INIT_RANGE = 0.1


class LSTMController:
    """An autoregressive policy over ``len(counts)`` genes, gene ``g`` having ``counts[g]`` choices.

    Args:
        counts: Choices per gene.
        hidden: LSTM width (embedding width too).
        seed: Seeds the parameter initialisation.
        tanh_constant: Logits squashed to ``±tanh_constant`` (None: raw logits).
    """

    def __init__(self, counts: Sequence[int], *, hidden: int = 64, seed: int = 0,
                 tanh_constant: float | None = 2.5) -> None:
        import torch

        self.torch = torch
        self.counts = [int(k) for k in counts]
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        total = int(self.offsets[-1])
        self.tanh_constant = tanh_constant
        self.embedding = torch.nn.Embedding(total + 1, hidden)  # the last row is the start token
        self.cell = torch.nn.LSTMCell(hidden, hidden)
        self.head = torch.nn.Linear(hidden, total)
        gen = torch.Generator().manual_seed(int(seed))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.rand(p.shape, generator=gen, dtype=p.dtype) * (2 * INIT_RANGE) - INIT_RANGE)

    def parameters(self) -> list[torch.nn.Parameter]:
        return [*self.embedding.parameters(), *self.cell.parameters(), *self.head.parameters()]

    def _logits(self, h: torch.Tensor, g: int) -> torch.Tensor:
        z = self.head(h)[:, int(self.offsets[g]): int(self.offsets[g + 1])]
        if self.tanh_constant is not None:
            z = self.tanh_constant * self.torch.tanh(z / 5.0)
        return z

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One choice index per gene, each drawn given the ones before it."""
        torch = self.torch
        out = np.empty(len(self.counts), dtype=np.int64)
        u = rng.random(len(self.counts))
        with torch.no_grad():
            x = self.embedding(torch.tensor([int(self.offsets[-1])]))
            state = None
            for g, k in enumerate(self.counts):
                state = self.cell(x, state)
                p = torch.softmax(self._logits(state[0], g).double(), dim=1)[0].numpy()
                idx = min(int(np.searchsorted(np.cumsum(p), u[g], side="right")), k - 1)
                out[g] = idx
                x = self.embedding(torch.tensor([int(self.offsets[g]) + idx]))
        return out

    def log_probs(self, indices: Sequence[np.ndarray], active: Sequence[np.ndarray]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π(a) over the active genes, the summed per-step entropies along the path) per sample, as
        differentiable tensors of shape (n,), by teacher forcing on ``indices``."""
        torch = self.torch
        n = len(indices)
        idx = torch.as_tensor(np.stack(indices).astype(np.int64)).reshape(n, len(self.counts))
        act = torch.as_tensor(np.stack(active).astype(bool)).reshape(n, len(self.counts))
        x = self.embedding(torch.full((n,), int(self.offsets[-1]), dtype=torch.long))
        state = None
        logp = torch.zeros(n)
        entropy = torch.zeros(n)
        for g in range(len(self.counts)):
            state = self.cell(x, state)
            lsm = torch.log_softmax(self._logits(state[0], g), dim=1)
            chosen = lsm.gather(1, idx[:, g: g + 1]).squeeze(1)
            logp = logp + torch.where(act[:, g], chosen, torch.zeros_like(chosen))
            entropy = entropy - (lsm.exp() * lsm).sum(dim=1)
            x = self.embedding(idx[:, g] + int(self.offsets[g]))
        return logp, entropy
