"""Conformance checks for a OneShotStrategy (torch is imported by the strategy, not here)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from hwnas.errors import InvalidArchitecture
from hwnas.strategies.oneshot import ArchLatencyModel, OneShotStrategy

if TYPE_CHECKING:
    import torch

    from hwnas.architecture import Architecture
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import RelaxedSupernet

log = logging.getLogger(__name__)


def _params_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _assert_member(space: SearchSpace, arch: Architecture, what: str) -> None:
    try:
        space.validate(arch)
    except InvalidArchitecture as exc:
        raise AssertionError(f"{what} is not a member of the space: {exc}") from None
    assert space.canonicalize(arch) == arch, f"{what} is not canonical"


def check_one_shot_strategy(
    factory: Callable[[np.random.Generator, float], object],
    supernet_factory: Callable[[], RelaxedSupernet],
    train_data: Iterable[tuple[torch.Tensor, torch.Tensor]],
    valid_data: Iterable[tuple[torch.Tensor, torch.Tensor]],
    latency_model: object,
    *,
    steps: int = 30,
    seed: int = 0,
    latency_weights: Sequence[float] = (0.0, 0.1, 1.0, 10.0),
    require_latency_effect: bool = True,
) -> None:
    """Valid and deterministic derived architectures, learning parameters, and a latency term that works.

    Raises AssertionError naming the first broken rule.

    Args:
        factory: Builds a fresh strategy from a seeded generator and a latency weight (e.g.
            ``lambda g, w: ONE_SHOT_STRATEGIES.create(name, {"latency_weight": w}, space=space, rng=g)``).
        supernet_factory: Builds a fresh supernet with the same initial weights on every call.
        train_data: Re-iterable batches for the shared weights.
        valid_data: Re-iterable batches for the architecture parameters.
        latency_model: A :class:`~hwnas.strategies.oneshot.ArchLatencyModel` over the supernet's space.
        steps: Search budget of every run.
        seed: Seed of the generators handed to ``factory``.
        latency_weights: Increasing latency weights; the derived architecture's predicted latency
            must not increase along them.
        require_latency_effect: Also require the largest weight to derive a strictly faster
            architecture than the smallest (true on a toy problem whose accuracy prefers slow choices).
    """
    assert list(latency_weights) == sorted(latency_weights) and len(latency_weights) >= 2, (
        "latency_weights must be at least two increasing values"
    )
    assert isinstance(latency_model, ArchLatencyModel), "latency_model lacks predict_ms"

    def run(weight: float, model: ArchLatencyModel | None
            ) -> tuple[list[Architecture], dict[str, np.ndarray], dict[str, np.ndarray], OneShotStrategy]:
        strategy = factory(np.random.default_rng(seed), weight)
        assert isinstance(strategy, OneShotStrategy), "the strategy does not implement the OneShotStrategy protocol"
        supernet = supernet_factory()
        before = strategy.architecture_parameters()
        archs = strategy.search(supernet, train_data, valid_data, steps=steps, latency_model=model)
        return list(archs), before, strategy.architecture_parameters(), strategy

    archs, before, after, strategy = run(latency_weights[0], None)
    space = supernet_factory().space
    genes = {g.name: g for g in space.genes()}
    for name, vec in {**before, **after}.items():
        assert name in genes, f"architecture parameters name {name!r}, which is not a gene of the space"
        v = np.asarray(vec)
        assert v.shape == (len(genes[name].choices),), (
            f"architecture parameters of gene {name} have shape {v.shape}, expected ({len(genes[name].choices)},)"
        )
        assert np.all(np.isfinite(v)), f"architecture parameters of gene {name} are not finite"
    assert archs, "search() returned no architecture"
    for arch in archs:
        _assert_member(space, arch, "an architecture search() returned")
    assert len({a.arch_id for a in archs}) == len(archs), "search() returned the same architecture twice"
    derived = strategy.derive()
    _assert_member(space, derived, "derive()'s architecture")
    assert derived == archs[0], "search()'s first architecture is not derive()'s"
    assert not _params_equal(before, after), "the architecture parameters did not change during search"

    again, before2, after2, _ = run(latency_weights[0], None)
    assert _params_equal(before, before2), (
        "the initial architecture parameters are not deterministic under the same seed"
    )
    assert again == archs, "search() is not deterministic under the same seed"
    assert _params_equal(after, after2), "the learned architecture parameters are not deterministic under the same seed"

    warm = factory(np.random.default_rng(seed), latency_weights[0])
    assert isinstance(warm, OneShotStrategy), "the strategy does not implement the OneShotStrategy protocol"
    supernet = supernet_factory()
    weights = [q.detach().cpu().numpy().copy() for q in supernet.parameters()]
    logits = warm.architecture_parameters()
    warm.warmup(supernet, train_data, steps=2)
    assert any(not np.array_equal(w, q.detach().cpu().numpy()) for w, q in zip(weights, supernet.parameters())), (
        "warmup() did not train the shared weights"
    )
    assert _params_equal(logits, warm.architecture_parameters()), "warmup() changed the architecture parameters"

    latencies = []
    for w in latency_weights:
        found, _, _, _ = run(w, latency_model)
        _assert_member(space, found[0], f"the architecture derived at latency weight {w:g}")
        latencies.append(float(np.asarray(latency_model.predict_ms([found[0]]), dtype=float)[0]))
    log.info("derived latency (ms) by latency weight: %s", dict(zip(latency_weights, latencies)))
    for (w0, l0), (w1, l1) in zip(zip(latency_weights, latencies), zip(latency_weights[1:], latencies[1:])):
        assert l1 <= l0 + 1e-9, (
            f"a larger latency weight derived a slower architecture: {l0:.4g} ms at weight {w0:g}, "
            f"{l1:.4g} ms at {w1:g}"
        )
    if require_latency_effect:
        assert latencies[-1] < latencies[0], (
            f"the latency term has no effect: {latencies[0]:.4g} ms at weight {latency_weights[0]:g} "
            f"and at {latency_weights[-1]:g}"
        )
