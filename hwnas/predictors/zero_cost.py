"""Zero-cost proxies: scores of an untrained network from one batch of real data (Abdelfattah et al. 2021).

- ``synflow`` (Tanaka et al. 2020): the network made linear (absolute weights, float64, eval mode), an all-ones
  input; sum over parameters of |θ · ∂R/∂θ| with R the sum of the outputs. Data-free by design.
- ``snip`` (Lee et al. 2019): sum of |θ · ∂L/∂θ|, L the cross-entropy of the batch.
- ``grad_norm``: sum over parameter tensors of the L2 norm of ∂L/∂θ.
- ``naswot`` (Mellor et al. 2021, "jacov"'s successor): binary codes of which activation units are positive,
  per image; the log-determinant of the Hamming-similarity kernel of the batch.
- ``ntk_cond`` (TE-NAS, Chen et al. 2021): condition number of the empirical neural tangent kernel of the
  batch (per-sample gradients of the summed logits; eigenvalues λmax / λmin). Lower is claimed better, a
  claim the seed literature doubts: measure it (``benchmarks/zero_cost_proxies.py``).

Each function takes a freshly built model (it is changed: use a copy you do not need), a batch ``x`` (N, C,
H, W) and labels ``y`` (N,), and returns a float. Higher means "predicted more accurate" for all but
``ntk_cond``; :data:`HIGHER_IS_BETTER` says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn

HIGHER_IS_BETTER: dict[str, bool] = {"synflow": True, "snip": True, "grad_norm": True, "naswot": True,
                                     "ntk_cond": False}


def _params(model: nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def synflow(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    import torch

    del y  # data-free: only the input's shape is used
    model = model.double().eval()
    signs = {}
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if p.is_floating_point():
                signs[name] = torch.sign(p)
                p.abs_()
    model.zero_grad()
    out = model(torch.ones((1, *x.shape[1:]), dtype=torch.float64))
    torch.sum(out).backward()
    score = sum(float((p * p.grad).detach().abs().sum()) for p in _params(model) if p.grad is not None)
    return score


def _loss_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    import torch

    model.train()
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()


def snip(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    _loss_grads(model, x, y)
    return sum(float((p * p.grad).detach().abs().sum()) for p in _params(model) if p.grad is not None)


def grad_norm(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    _loss_grads(model, x, y)
    return sum(float(p.grad.detach().norm()) for p in _params(model) if p.grad is not None)


#: Activation modules whose outputs give NASWOT's binary codes (positive or not).
_ACTIVATIONS = ("ReLU", "ReLU6", "Hardswish", "GELU", "SiLU", "LeakyReLU")


def naswot(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    import torch

    del y
    codes: list[Any] = []

    def hook(_module: object, _inputs: object, out: torch.Tensor) -> None:
        codes.append((out.detach().reshape(out.shape[0], -1) > 0).double())

    handles = [m.register_forward_hook(hook) for m in model.modules() if type(m).__name__ in _ACTIVATIONS]
    try:
        if not handles:
            raise ValueError("naswot: the network has no activation modules to read codes from")
        model.eval()
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    c = torch.cat(codes, dim=1)
    kernel = c @ c.T + (1 - c) @ (1 - c).T
    sign, logdet = torch.linalg.slogdet(kernel)
    return float(logdet) if float(sign) > 0 else -math.inf


def ntk_cond(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    import torch

    del y
    model.train()
    params = _params(model)
    rows = []
    for i in range(x.shape[0]):
        model.zero_grad()
        model(x[i : i + 1]).sum().backward()
        rows.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]))
    jac = torch.stack(rows).double()
    eig = torch.linalg.eigvalsh(jac @ jac.T)
    lo, hi = float(eig[0]), float(eig[-1])
    return hi / lo if lo > 0 else math.inf


PROXIES: dict[str, Callable[[nn.Module, torch.Tensor, torch.Tensor], float]] = {
    "synflow": synflow, "snip": snip, "grad_norm": grad_norm, "naswot": naswot, "ntk_cond": ntk_cond,
}


def score_all(build: Callable[[], nn.Module], x: np.ndarray, y: np.ndarray, names: list[str] | tuple[str, ...],
              *, seed: int = 0) -> dict[str, float]:
    """Every proxy in ``names`` on a fresh ``build()`` each (proxies change the model), torch seeded per proxy.

    Args:
        build: Returns a newly initialised network (the same one every call, e.g. seeded).
        x: A batch of images (N, C, H, W), float32.
        y: Their labels (N,), int.
        names: Proxies from :data:`PROXIES`.
        seed: Seed of torch's generator for anything a proxy draws (dropout, stochastic depth).
    """
    import torch

    unknown = [n for n in names if n not in PROXIES]
    if unknown:
        raise ValueError(f"unknown zero-cost proxies {unknown}; known: {', '.join(PROXIES)}")
    xt = torch.as_tensor(x, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.long)
    out = {}
    for name in names:
        with torch.random.fork_rng(devices=[]):  # the caller's global generator is left as it was
            torch.manual_seed(seed)
            out[name] = float(PROXIES[name](build(), xt, yt))
    return out
