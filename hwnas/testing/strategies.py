"""Conformance checks for an ask/tell Strategy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hwnas.objectives import Constraint, Objective, Trial


def toy_metrics(space: Any) -> Callable[[Any], dict[str, float]]:
    """Deterministic metrics of an architecture from its encoding: a fixed random linear 'accuracy' and 'cost'."""
    width = space.encode(space.sample(np.random.default_rng(0))).shape[0]
    w = np.random.default_rng(123).standard_normal((2, width))

    def metrics(arch: Any) -> dict[str, float]:
        e = space.encode(arch)
        return {"score": float(w[0] @ e), "cost_ms": float(abs(w[1]) @ e)}

    return metrics


def _drive(factory: Callable[[np.random.Generator], Any], space: Any, rounds: int, batch: int,
           constraints: list[Constraint]) -> list[str]:
    strategy = factory(np.random.default_rng(7))
    metrics = toy_metrics(space)
    ids, number = [], 0
    for _ in range(rounds):
        archs = strategy.ask(batch)
        assert 1 <= len(archs) <= batch, f"ask({batch}) returned {len(archs)} architectures"
        trials = []
        for arch in archs:
            space.validate(arch)
            m = metrics(space.canonicalize(arch))
            status = "ok" if all(c.is_satisfied(m) for c in constraints) else "infeasible"
            trials.append(Trial(number, space.canonicalize(arch), m, status))
            number += 1
            ids.append(arch.arch_id)
        strategy.tell(trials)
    return ids


def check_strategy(cls: Any, space: Any, *, rounds: int = 6, batch: int = 4, params: dict[str, Any] | None = None) -> None:
    """Valid proposals, determinism under (seed, tells), and no crash with constraints and infeasible trials."""
    params = params or {}
    objectives = [Objective("score", "max"), Objective("cost_ms", "min")]
    m = toy_metrics(space)
    costs = sorted(m(space.sample(np.random.default_rng(i)))["cost_ms"] for i in range(20))
    constraints = [Constraint("cost_ms", max=costs[len(costs) // 2])]

    def factory(rng: np.random.Generator) -> Any:
        return cls(space=space, objectives=objectives, constraints=constraints, rng=rng, **params)

    first = _drive(factory, space, rounds, batch, constraints)
    second = _drive(factory, space, rounds, batch, constraints)
    assert first == second, "the strategy is not deterministic under the same seed and tells"
    assert len(set(first)) > 1, "the strategy proposes a single architecture"
