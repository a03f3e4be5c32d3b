"""Local search (White et al. 2021) and its Pareto version: climbs while a neighbour improves, restarts at a
local optimum, keeps the walk's non-dominated set with several objectives."""

from __future__ import annotations

import numpy as np

from hwnas.objectives import Constraint, Objective, Trial
from hwnas.search_spaces.fbnet import FBNetSpace
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.strategies import STRATEGIES


def _drive(strategy, metrics, budget, batch=16, status=lambda m: "ok"):
    trials, n = [], 0
    while n < budget:
        archs = strategy.ask(min(batch, budget - n))
        told = [Trial(n + i, a, metrics(a), status(metrics(a))) for i, a in enumerate(archs)]
        n += len(told)
        trials += told
        strategy.tell(told)
    return trials


def test_climbs_to_the_optimum_of_a_separable_score():
    """FBNet with a score that adds one weight per (layer, op): a single-layer change never hurts another
    layer, so the only local optimum is the global one, and local search must reach it."""
    space = FBNetSpace()
    w = np.random.default_rng(3).standard_normal((22, 9))

    def metrics(arch):
        return {"score": float(w[np.arange(22), space.op_indices(arch)].sum())}

    s = STRATEGIES.create("local_search", {"initial": 5}, space=space, objectives=[Objective("score", "max")],
                          constraints=[], rng=np.random.default_rng(0))
    trials = _drive(s, metrics, budget=22 * 8 * 22 + 5)  # at most 22 steps of 176 neighbours
    best = max(t.metrics["score"] for t in trials)
    assert best == float(w.max(axis=1).sum())  # every layer on its best op
    assert len({t.arch.arch_id for t in trials}) == len(trials)


def test_restarts_at_a_local_optimum_and_keeps_a_pareto_set_with_two_objectives():
    space = NB201Space()
    rng = np.random.default_rng(1)
    table = {a.arch_id: (float(rng.random()), float(rng.random())) for a in space.distribution()[0]}

    def metrics(arch):
        acc, ms = table[arch.arch_id]
        return {"top1": acc, "latency_ms": ms}

    s = STRATEGIES.create("local_search", {"initial": 4}, space=space,
                          objectives=[Objective("top1", "max"), Objective("latency_ms", "min")],
                          constraints=[], rng=np.random.default_rng(2))
    _drive(s, metrics, budget=600)
    assert s.walks > 1  # random values: local Pareto sets are reached quickly, then walks restart
    walk = np.array([[-t.metrics["top1"], t.metrics["latency_ms"]] for t in s._walk])
    for i, p in enumerate(walk):  # no member of the walk dominates another
        others = np.delete(walk, i, axis=0)
        assert not np.any(np.all(others <= p, axis=1) & np.any(others < p, axis=1))


def test_a_walk_prefers_feasible_architectures():
    space = FBNetSpace()
    w = np.random.default_rng(4).standard_normal((2, 22, 9))

    def metrics(arch):
        ops = space.op_indices(arch)
        return {"score": float(w[0, np.arange(22), ops].sum()), "cost_ms": float(abs(w[1, np.arange(22), ops]).sum())}

    limit = Constraint("cost_ms", max=12.0)
    s = STRATEGIES.create("local_search", {"initial": 8, "max_neighbours": 40}, space=space,
                          objectives=[Objective("score", "max")], constraints=[limit], rng=np.random.default_rng(0))
    trials = _drive(s, metrics, budget=800, status=lambda m: "ok" if limit.is_satisfied(m) else "infeasible")
    assert all(t.status == "ok" for t in s._walk)
    late = trials[-200:]
    assert np.mean([t.status == "ok" for t in late]) > np.mean([t.status == "ok" for t in trials[:8]])

