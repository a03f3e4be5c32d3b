"""Strategies keep proposing architectures they have not evaluated until the budget is spent or the space
is exhausted, and the run says which (issue: runs stopped short of their budget)."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.experiments import run_experiment
from hwnas.objectives import Objective, Trial
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.strategies import STRATEGIES
from hwnas.testing.experiments import nb201_benchmark_yaml


@pytest.mark.parametrize("strategy,params", [
    ("evolution", {"population_size": 8, "sample_size": 4}),  # converges fast: children repeat unless pushed on
    ("nsga2", {"pop_size": 8}),
    ("random", {}),
])
def test_multi_objective_search_spends_its_whole_budget(strategy, params, shared_data, tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(nb201_benchmark_yaml(shared_data, name="budget", strategy=strategy, params=params, trials=600))
    result = run_experiment(path, run_dir=tmp_path / "run")
    assert result.stopped_early is None
    assert len(result.trials) == 600 == len({t.arch.arch_id for t in result.trials})


@pytest.mark.parametrize("hardware,distinct", [(True, 15625), (False, 6466)])
def test_random_search_exhausts_nb201_and_says_so(hardware, distinct, shared_data, tmp_path, caplog):
    """With a latency objective every cell as written is its own architecture (isomorphic cells run
    differently); with accuracy alone the 6,466 isomorphism classes are."""
    path = tmp_path / "exp.yaml"
    objectives = None if hardware else [{"metric": "top1", "direction": "max"}]
    path.write_text(nb201_benchmark_yaml(shared_data, name="budget", trials=16000, objectives=objectives))
    with caplog.at_level("WARNING"):
        result = run_experiment(path, run_dir=tmp_path / "run")
    assert (f"the nb201 space has only {distinct:,} distinct architectures, fewer than the budget's 16,000"
            in caplog.text)
    assert len(result.trials) == distinct == len({t.arch.arch_id for t in result.trials})  # each once
    assert result.stopped_early and "exhausted" in result.stopped_early
    config = (result.run_dir / "config.yaml").read_text()
    assert f"merge_isomorphic: {'false' if hardware else 'true'}" in config  # resolved, and recorded


def test_novel_widens_then_restarts_then_gives_up():
    space = NB201Space()
    strategy = STRATEGIES.create("random", {}, space=space, objectives=[Objective("top1", "max")],
                                 constraints=[], rng=np.random.default_rng(0))
    stuck = space.sample(np.random.default_rng(1))
    strategy.remember([Trial(0, stuck, {"top1": 1.0})])
    attempts: list[int] = []

    def propose(attempt: int) -> Architecture:
        attempts.append(attempt)
        return stuck  # a strategy that can only repeat itself

    fresh = strategy.novel(propose, set())
    assert fresh != stuck and fresh.arch_id not in strategy.seen  # a restart (uniform sample) found a new one
    assert attempts[:3] == [0, 1, 2]

    everything = {space.canonicalize(space.from_ops(ops)).arch_id
                  for ops in np.ndindex(*(5,) * 6)}
    strategy.seen |= everything  # nothing left: it gives up after a bounded number of tries
    again = strategy.novel(propose, set())
    assert again.arch_id in strategy.seen


def test_random_search_draws_the_rest_of_an_enumerable_space_as_rejection_would():
    """Past half of NB201's members, random search draws among the unevaluated ones weighted by their chance
    under sample(): the distribution that drawing again until something new comes would give."""
    space = NB201Space()
    members, probs = space.distribution()
    strategy = STRATEGIES.create("random", {}, space=space, objectives=[Objective("top1", "max")],
                                 constraints=[], rng=np.random.default_rng(0))
    order = np.random.default_rng(5).permutation(len(members))  # tell it a random half (just over)
    told = [Trial(i, members[k], {"top1": 1.0}) for i, k in enumerate(order[: len(members) // 2 + 1].tolist())]
    strategy.tell(told)
    left = {members[k].arch_id: float(probs[k]) for k in order[len(told):].tolist()}
    batch = strategy.ask(8)
    assert len(batch) == 8 == len({a.arch_id for a in batch}) and all(a.arch_id in left for a in batch)
    drawn = [left[a.arch_id] for _ in range(3000) for a in strategy.ask(1)]
    q = np.array(list(left.values())) / sum(left.values())  # the conditional distribution on the rest
    mean_p, expected = float(np.mean(drawn)) / sum(left.values()), float((q ** 2).sum())
    spread = float(np.sqrt(((q ** 3).sum() - expected ** 2) / len(drawn)))
    assert abs(mean_p - expected) < 6 * spread
    assert abs(1 / len(q) - expected) > 20 * spread  # (a uniform draw among the rest would fail the check)
    strategy.tell([Trial(len(told) + i, a, {"top1": 1.0}) for i, a in enumerate(batch)])
    assert not {a.arch_id for a in batch} & {a.arch_id for a in strategy.ask(len(left))}  # told: not drawn again


def test_random_search_told_batches_follow_the_conditional_distribution():
    """Asked and told in turn (the runner's loop), the draws come from one weighted order of the rest; each is
    still distributed as a weighted draw among the members not evaluated at that moment."""
    space = NB201Space()
    members, probs = space.distribution()
    strategy = STRATEGIES.create("random", {}, space=space, objectives=[Objective("top1", "max")],
                                 constraints=[], rng=np.random.default_rng(1))
    order = np.random.default_rng(6).permutation(len(members))
    told = [Trial(i, members[k], {"top1": 1.0}) for i, k in enumerate(order[: len(members) // 2 + 1].tolist())]
    strategy.tell(told)
    index = {a.arch_id: k for k, a in enumerate(members)}
    w = probs.astype(float).copy()
    w[order[: len(told)]] = 0.0
    dev = var = uniform_gap = 0.0
    number = len(told)
    first_order = None
    for step in range(1500):
        s, s2, s3 = w.sum(), (w ** 2).sum(), (w ** 3).sum()
        expected = s2 / s ** 2
        (arch,) = strategy.ask(1)
        if step == 0:
            first_order = strategy._order
        k = index[arch.arch_id]
        assert w[k] > 0  # never one already told
        dev += w[k] / s - expected
        var += s3 / s ** 3 - expected ** 2
        uniform_gap += 1 / np.count_nonzero(w) - expected
        w[k] = 0.0
        strategy.tell([Trial(number, arch, {"top1": 1.0})])
        number += 1
    assert strategy._order is first_order  # one order served every told batch
    assert abs(dev) < 6 * np.sqrt(var)
    assert abs(uniform_gap) > 10 * np.sqrt(var)  # (a uniform draw among the rest would fail the check)
