"""Conformance checks for an ask/tell Strategy."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from hwnas.objectives import Constraint, Objective, Status, Trial
from hwnas.strategies.loop import BatchLoop, Candidate

if TYPE_CHECKING:
    from hwnas.architecture import Architecture
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.strategies.base import Strategy

#: Rounds of ``_check_keeps_proposing_new``: the space must have more than this many times ``batch`` members.
NEW_ROUNDS = 40


def toy_metrics(space: SearchSpace) -> Callable[[Architecture], dict[str, float]]:
    """Deterministic metrics of an architecture from its encoding: a fixed random linear 'accuracy' and 'cost'."""
    width = space.encode(space.sample(np.random.default_rng(0))).shape[0]
    w = np.random.default_rng(123).standard_normal((2, width))

    def metrics(arch: Architecture) -> dict[str, float]:
        e = space.encode(arch)
        return {"score": float(w[0] @ e), "cost_ms": float(abs(w[1]) @ e)}

    return metrics


def _failure(number: int, round_index: int, metrics: dict[str, float]) -> tuple[dict[str, float], str] | None:
    """Whether trial ``number`` is reported failed, and with which metrics and error text.

    The whole second round fails (an evaluator that broke for a while), and elsewhere every fifth
    trial fails with no metrics and every seventh with partial metrics (a later evaluator raised).
    """
    if round_index == 1 or number % 5 == 4:
        return {}, "RuntimeError: CUDA out of memory (failure injected by check_strategy)"
    if number % 7 == 3:
        partial = dict(list(metrics.items())[-1:])
        return partial, "EvaluationError: training diverged (failure injected by check_strategy)"
    return None


def _drive(factory: Callable[[np.random.Generator], Strategy], space: SearchSpace, rounds: int, batch: int,
           constraints: list[Constraint]) -> list[str]:
    """``rounds`` batches of ``batch`` through the runner's loop, with toy metrics and injected failures; the arch
    ids of every proposal as asked."""
    strategy = factory(np.random.default_rng(7))
    metrics = toy_metrics(space)
    ids: list[str] = []
    round_index = 0

    def check_asked(n: int, archs: list[Architecture]) -> None:
        assert 1 <= len(archs) <= batch, f"ask({batch}) returned {len(archs)} architectures"
        for arch in archs:
            space.validate(arch)
            ids.append(arch.arch_id)

    def trials_for(candidates: Sequence[Candidate]) -> list[Trial]:
        trials = []
        for c in candidates:
            m = metrics(c.arch)
            failed = _failure(c.number, round_index, m)
            if failed is not None:
                trials.append(Trial(c.number, c.arch, failed[0], "failed", error=failed[1]))
            else:
                status: Status = "ok" if all(con.is_satisfied(m) for con in constraints) else "infeasible"
                trials.append(Trial(c.number, c.arch, m, status))
        return trials

    loop = BatchLoop(strategy, space, trials_for, budget=rounds * batch, batch_size=batch, on_ask=check_asked)
    for round_index in range(rounds):  # noqa: B007 (read by trials_for)
        loop.step()
    return ids


def check_strategy(
    cls: Callable[..., Strategy], space: SearchSpace, *, rounds: int = 6, batch: int = 4,
    params: Mapping[str, object] | None = None,
) -> None:
    """Valid proposals, determinism under (seed, tells), and no crash with constraints, infeasible and failed trials.

    Some trials are told as ``failed`` (no or partial metrics, an error text), a whole round of them
    included; the strategy must go on proposing valid architectures, deterministically. A
    :class:`~hwnas.strategies.base.LookupAware` strategy is driven once more with ``cost_ms`` given as a lookup.

    What the space must offer: ``encode()`` (the toy metrics are fixed linear functions of the encoding), and
    more than ``40 * batch`` distinct members (40 rounds of ``batch`` are asked for new architectures only; a
    smaller space runs out, and the check would blame the strategy). The strategy class is called as
    ``cls(space=..., objectives=..., constraints=..., rng=..., **params)``.

    Args:
        cls: The strategy class (or factory).
        space: A search space with ``encode()`` and more than ``40 * batch`` members.
        rounds: Ask/tell rounds of the determinism and failure checks.
        batch: Architectures asked per round.
        params: The strategy's own keyword parameters.
    """
    params = params or {}
    if not callable(getattr(space, "encode", None)):
        raise TypeError(f"check_strategy needs a space with encode() (the toy metrics read it); "
                        f"{type(space).__name__} has none")
    try:
        size = int(space.size())
    except (AttributeError, NotImplementedError):
        size = None  # a space that does not count its members: the check cannot tell beforehand
    if size is not None and size <= NEW_ROUNDS * batch:
        raise ValueError(f"check_strategy needs a space of more than {NEW_ROUNDS * batch} members (it asks for that "
                         f"many new ones); {type(space).__name__} has {size}")
    params = params or {}
    objectives = [Objective("score", "max"), Objective("cost_ms", "min")]
    m = toy_metrics(space)
    costs = sorted(m(space.sample(np.random.default_rng(i)))["cost_ms"] for i in range(20))
    constraints = [Constraint("cost_ms", max=costs[len(costs) // 2])]

    def factory(rng: np.random.Generator) -> Strategy:
        return cls(space=space, objectives=objectives, constraints=constraints, rng=rng, **params)

    first = _drive(factory, space, rounds, batch, constraints)
    second = _drive(factory, space, rounds, batch, constraints)
    assert first == second, "the strategy is not deterministic under the same seed and tells"
    assert len(set(first)) > 1, "the strategy proposes a single architecture"

    def unconstrained(rng: np.random.Generator) -> Strategy:
        return cls(space=space, objectives=objectives, constraints=[], rng=rng, **params)

    _drive(unconstrained, space, rounds, batch, [])  # failed trials without constraints to fall back on
    _check_keeps_proposing_new(factory, space, batch)

    from hwnas.strategies.base import LookupAware

    if isinstance(factory(np.random.default_rng(0)), LookupAware):  # once more, pricing cost_ms by lookup
        def look_up(archs: Sequence[Architecture]) -> list[dict[str, float]]:
            return [{"cost_ms": m(space.canonicalize(a))["cost_ms"]} for a in archs]

        def with_lookup(rng: np.random.Generator) -> Strategy:
            strategy = cast(LookupAware, factory(rng))  # the same class as the one checked above
            strategy.use_lookup(look_up, ["cost_ms"])
            return strategy

        first = _drive(with_lookup, space, rounds, batch, constraints)
        assert first == _drive(with_lookup, space, rounds, batch, constraints), (
            "the strategy is not deterministic under the same seed, tells and lookup")


def _check_keeps_proposing_new(factory: Callable[[np.random.Generator], Strategy], space: SearchSpace, batch: int,
                               rounds: int = NEW_ROUNDS) -> None:
    """Over many rounds, ask() proposes no architecture it was already told of (a run must be able to spend
    its budget: the runner stops a strategy that only repeats itself). The spaces it is run on must have
    more members than ``rounds * batch``."""
    strategy = factory(np.random.default_rng(11))
    metrics = toy_metrics(space)

    def trials_for(candidates: Sequence[Candidate]) -> list[Trial]:
        return [Trial(c.number, c.arch, metrics(c.arch), "ok") for c in candidates]

    loop = BatchLoop(strategy, space, trials_for, budget=rounds * batch, batch_size=batch)
    for number in range(rounds):
        told = len(loop.trials)
        repeats = loop.step().repeats
        assert not repeats, (f"round {number}: ask() proposed {len(repeats)} architecture(s) it was already told "
                             f"of ({told} told); it must propose new ones while the space has them")
