"""What the torch-trained predictors (``mlp``, ``gin``) share: seeded layers and one mini-batch training loop.

torch is imported inside the functions: the predictors import this module at fit time only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch


class MinibatchParams(Protocol):
    """What :func:`train_minibatch` reads of a predictor's parameters (``mlp``'s and ``gin``'s have them)."""

    @property
    def epochs(self) -> int: ...
    @property
    def max_steps(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def weight_decay(self) -> float: ...


def seeded_linear(n_in: int, n_out: int, gen: torch.Generator) -> torch.nn.Linear:
    """A ``torch.nn.Linear`` in PyTorch's default range, its weights drawn from the generator ``gen``."""
    import torch

    lin = torch.nn.Linear(n_in, n_out)
    bound = 1.0 / np.sqrt(n_in)
    with torch.no_grad():
        lin.weight.copy_((torch.rand(n_out, n_in, generator=gen) * 2 - 1) * bound)
        lin.bias.copy_((torch.rand(n_out, generator=gen) * 2 - 1) * bound)
    return lin


def train_minibatch(params: Iterable[torch.Tensor], loss_of: Callable[[torch.Tensor], torch.Tensor], n: int,
                    p: MinibatchParams, gen: torch.Generator, *, owner: str) -> None:
    """AdamW with a cosine schedule over mini-batches of ``n`` rows drawn from ``gen``.

    Args:
        params: The tensors to train.
        loss_of: The loss of the rows at an index tensor.
        n: Rows.
        p: Parameters with ``epochs``, ``max_steps``, ``batch_size``, ``learning_rate``, ``weight_decay``
            (large training sets get fewer epochs: at most ``max_steps`` steps in all).
        gen: The torch generator of the batch order.
        owner: Who trains, for the message.

    Raises:
        ValueError: The final loss is not finite (training diverged).
    """
    import torch

    opt = torch.optim.AdamW(params, lr=p.learning_rate, weight_decay=p.weight_decay)
    batches = -(-n // p.batch_size)
    epochs = max(1, min(p.epochs, p.max_steps // batches))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, p.batch_size):
            loss = loss_of(order[start : start + p.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    final = float(loss.detach())
    if not np.isfinite(final):
        raise ValueError(f"{owner}: training diverged (loss {final}); lower learning_rate")
