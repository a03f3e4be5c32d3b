"""Conformance checks for a Supernet (torch is imported inside the functions)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from hwnas.supernet.base import RelaxedSupernet, Supernet, one_hot_weights

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.architecture import Architecture

log = logging.getLogger(__name__)


def _clone_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def _close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol, rtol=rtol))


def randomize_batch_norms(module: nn.Module, seed: int = 2) -> None:
    """Random affine parameters and running statistics in every ``BatchNorm2d`` of ``module`` (seeded), so that a
    mis-permuted, mis-sliced or mis-copied batch norm changes an output the conformance checks compare."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                assert m.weight is not None and m.bias is not None, "a batch norm without affine weights"
                assert m.running_mean is not None and m.running_var is not None, "a batch norm without statistics"
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


def check_supernet(
    supernet: object,
    rng: np.random.Generator,
    *,
    n_archs: int = 4,
    batch: int = 4,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Explicit architecture, faithful and independent extraction, state round trip, shared gradients.

    For several sampled architectures: ``extract(arch)(x)`` equals ``forward(x, arch)`` in eval mode;
    the extracted module owns its weights (changing either side leaves the other alone); forward of
    A, then B, then A gives A's output again; outputs are ``(batch, num_classes)`` and finite;
    different architectures give different outputs; ``load_state_dict`` really replaces the weights;
    in train mode gradients reach weights that two architectures share. A :class:`RelaxedSupernet`
    must also reproduce ``forward`` from one-hot relaxation weights and pass gradients to them.
    The supernet's weights and mode are restored afterwards. Raises AssertionError naming the first
    broken rule.

    Args:
        supernet: The supernet under test.
        rng: Draws the architectures, inputs and labels.
        n_archs: Distinct architectures to check (at least two).
        batch: Examples per input batch.
        atol: Absolute tolerance of output comparisons.
        rtol: Relative tolerance of output comparisons.
    """
    import torch
    from torch import nn

    assert isinstance(supernet, Supernet), "the supernet does not implement the Supernet protocol"
    space = supernet.space
    archs: list[Architecture] = []
    for _ in range(50 * n_archs):
        a = space.sample(rng)
        if all(a != b for b in archs):
            archs.append(a)
        if len(archs) == n_archs:
            break
    assert len(archs) >= 2, "the space has fewer than two architectures to compare"

    params = list(supernet.parameters())
    assert params, "the supernet has no parameters"
    device = params[0].device
    inputs: dict[tuple[int, ...], torch.Tensor] = {}

    def input_for(arch: Architecture) -> torch.Tensor:
        shape = tuple(int(s) for s in space.input_shape_of(arch))
        if shape not in inputs:
            inputs[shape] = torch.from_numpy(rng.standard_normal((batch, *shape)).astype(np.float32)).to(device)
        return inputs[shape]

    was_training = bool(getattr(supernet, "training", False))
    original = _clone_state(supernet.state_dict())
    try:
        supernet.eval()
        with torch.no_grad():
            outs = []
            for arch in archs:
                out = supernet.forward(input_for(arch), arch)
                assert isinstance(out, torch.Tensor), f"forward() returned {type(out).__name__}, not a tensor"
                assert tuple(out.shape) == (batch, supernet.num_classes), (
                    f"forward() returned shape {tuple(out.shape)}, expected ({batch}, {supernet.num_classes})"
                )
                assert bool(torch.isfinite(out).all()), "forward() returned NaN or inf"
                outs.append(out.clone())

            a, b = archs[0], archs[1]
            supernet.forward(input_for(b), b)
            again = supernet.forward(input_for(a), a)
            assert _close(again, outs[0], atol, rtol), (
                "forward(A) after forward(B) differs from forward(A) before it: the supernet keeps hidden state"
            )

            by_input: dict[int, list[torch.Tensor]] = {}
            for arch, out in zip(archs, outs):
                by_input.setdefault(id(input_for(arch)), []).append(out)
            groups = [g for g in by_input.values() if len(g) > 1]
            if groups:
                assert any(not _close(g[0], o, atol, rtol) for g in groups for o in g[1:]), (
                    "different architectures give the same output: forward() ignores the architecture"
                )
            else:
                log.info("no two sampled architectures share an input shape; output difference not checked")

            for arch, out in zip(archs, outs):
                module = supernet.extract(arch)
                assert isinstance(module, nn.Module), f"extract() returned {type(module).__name__}, not an nn.Module"
                assert id(module) != id(supernet), "extract() returned the supernet itself, not a new module"
                module.eval()
                got = module(input_for(arch))
                assert _close(got, out, atol, rtol), (
                    f"extract(arch)(x) differs from forward(x, arch) "
                    f"(max abs difference {float((got - out).abs().max()) if got.shape == out.shape else 'shape'})"
                )

            # the extracted module owns its weights: changing it leaves the supernet alone ...
            x0 = input_for(a)
            module = supernet.extract(a).eval()
            own = list(module.parameters())
            assert own, "extract() returned a module without parameters"
            for p in own:
                p.add_(1.0)
            assert _close(supernet.forward(x0, a), outs[0], atol, rtol), (
                "changing the extracted module's weights changed the supernet's output: they share weights"
            )
            for k, v in supernet.state_dict().items():
                assert torch.equal(v, original[k]), (
                    f"changing the extracted module's weights changed supernet weight {k}"
                )

            # ... and changing the supernet leaves an extracted module alone; load_state_dict replaces weights
            module = supernet.extract(a).eval()
            before = module(x0).clone()
            perturbed = {k: (v + 0.5 if v.is_floating_point() else v) for k, v in original.items()}
            supernet.load_state_dict(perturbed)
            assert not _close(supernet.forward(x0, a), outs[0], atol, rtol), (
                "load_state_dict() with other weights did not change the output"
            )
            assert _close(module(x0), before, atol, rtol), (
                "changing the supernet's weights changed an extracted module: they share weights"
            )
            supernet.load_state_dict(original)
            assert _close(supernet.forward(x0, a), outs[0], atol, rtol), (
                "load_state_dict() of the original weights did not restore the output"
            )

        if isinstance(supernet, RelaxedSupernet):
            _check_relaxed(supernet, archs, outs, input_for, atol, rtol)

        supernet.train()
        touched = []
        for arch in (a, b):
            for p in supernet.parameters():
                p.grad = None
            x = input_for(arch)
            labels = torch.from_numpy(rng.integers(supernet.num_classes, size=batch)).to(device)
            loss = nn.functional.cross_entropy(supernet.forward(x, arch), labels)
            loss.backward()
            grads = {id(p): p.grad for p in supernet.parameters() if p.grad is not None}
            assert all(bool(torch.isfinite(g).all()) for g in grads.values()), "a gradient is NaN or inf"
            nonzero = {k for k, g in grads.items() if bool((g != 0).any())}
            assert nonzero, "no gradient reaches the supernet's weights in train mode"
            touched.append(nonzero)
        assert touched[0] & touched[1], "two architectures share no trained weight: the supernet does not share weights"
    finally:
        for p in supernet.parameters():
            p.grad = None
        supernet.load_state_dict(original)
        supernet.train(was_training)


def _check_relaxed(supernet: RelaxedSupernet, archs: list[Architecture], outs: list[torch.Tensor],
                   input_for: Callable[[Architecture], torch.Tensor], atol: float, rtol: float) -> None:
    """One-hot relaxation weights reproduce ``forward``; gradients reach soft relaxation weights."""
    import torch

    space = supernet.space
    with torch.no_grad():
        for arch, out in zip(archs, outs):
            got = supernet.forward_relaxed(input_for(arch), one_hot_weights(space, arch))
            assert _close(got, out, atol, rtol), (
                "forward_relaxed() with the one-hot weights of an architecture differs from forward(x, arch)"
            )
    # soft weights: the mean of two architectures' one-hot weights (at most two choices per gene are computed, so a
    # large space's mixture fits in memory: every choice of a once-for-all network at once does not)
    a_hot, b_hot = one_hot_weights(space, archs[0]), one_hot_weights(space, archs[-1])
    weights = {g.name: (0.5 * (a_hot[g.name] + b_hot[g.name])).requires_grad_(True) for g in space.genes()}
    out = supernet.forward_relaxed(input_for(archs[0]), weights)
    assert tuple(out.shape) == tuple(outs[0].shape), f"forward_relaxed() returned shape {tuple(out.shape)}"
    out.square().mean().backward()
    grads = [w.grad for w in weights.values() if w.grad is not None]
    assert all(bool(torch.isfinite(g).all()) for g in grads), "forward_relaxed() passes a NaN or inf gradient"
    assert any(bool((g != 0).any()) for g in grads), "forward_relaxed() passes only zero gradients to the weights"
