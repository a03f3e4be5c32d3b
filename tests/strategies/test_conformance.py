"""Every registered strategy is deterministic under its seed and proposes valid architectures."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.objectives import Constraint, Objective, Trial
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.strategies import STRATEGIES
from hwnas.testing import check_strategy
from hwnas.testing.strategies import toy_metrics

#: Params a strategy needs for check_strategy's problem (score max, cost_ms min, a constraint on cost_ms).
CONFORMANCE_PARAMS = {
    "reinforce": {"reward": {"accuracy": "score", "latency": "cost_ms", "target": 1.0}},
    # the protocol, not the search quality, is checked here: small predictors and pools keep 7 spaces quick
    "predictor_guided": {"predictor_params": {"n_estimators": 20}, "pool": 40, "parents": 3, "mutants": 4,
                         "generations": 1},
    "bayes_opt": {"predictor_params": {"members": ["gbt"], "n_members": 2, "bootstrap": True,
                                       "member_params": {"gbt": {"n_estimators": 10}}},
                  "pool": 40, "parents": 3, "mutants": 4, "generations": 1, "samples": 8},
}


@pytest.mark.parametrize("space_name", SPACES.names())
@pytest.mark.parametrize("name", STRATEGIES.names())
def test_strategy_conformance(name, space_name):
    check_strategy(STRATEGIES.get(name), SPACES.get(space_name)(), params=CONFORMANCE_PARAMS.get(name))


@pytest.mark.parametrize("name", STRATEGIES.names())
def test_different_seeds_give_different_proposals(name):
    space = MobileNetV3Space()
    objs = [Objective("score", "max"), Objective("cost_ms", "min")]
    ids = []
    for seed in (1, 2):
        s = STRATEGIES.get(name)(space=space, objectives=objs, constraints=[], rng=np.random.default_rng(seed),
                                 **CONFORMANCE_PARAMS.get(name, {}))
        ids.append([a.arch_id for a in s.ask(4)])
    assert ids[0] != ids[1]


GUIDED = {"evolution": {"population_size": 10, "sample_size": 3}, "nsga2": {"pop_size": 10},
          "nsga3": {"pop_size": 10}, "agemoea": {"pop_size": 10},
          "local_search": {"initial": 10}, "random": {},
          "predictor_guided": {"predictor_params": {"n_estimators": 30}, "pool": 100, "initial": 10},
          "bayes_opt": {"predictor_params": {"members": ["gbt"], "n_members": 3, "bootstrap": True,
                                             "member_params": {"gbt": {"n_estimators": 20}}},
                        "pool": 100, "initial": 10, "parents": 5, "mutants": 10}}


@pytest.mark.parametrize("name", sorted(set(GUIDED) - {"random"}))
def test_guided_strategies_beat_random_on_a_toy_problem(name):
    """On a fixed linear toy objective, the guided strategies end better than random search (same budget, 3 seeds)."""
    space = MobileNetV3Space()
    metrics = toy_metrics(space)
    objs = [Objective("score", "max")]

    def best(strategy_name: str, seed: int) -> float:
        s = STRATEGIES.get(strategy_name)(space=space, objectives=objs, constraints=[],
                                          rng=np.random.default_rng(seed), **GUIDED[strategy_name])
        scores, n = [], 0
        while n < 120:
            archs = s.ask(10)
            trials = [Trial(n + i, a, metrics(a)) for i, a in enumerate(archs)]
            n += len(archs)
            scores += [t.metrics["score"] for t in trials]
            s.tell(trials)
        return max(scores)

    guided = np.mean([best(name, s) for s in range(3)])
    baseline = np.mean([best("random", s) for s in range(3)])
    assert guided > baseline


def test_nsga2_respects_constraints_in_selection():
    """With a constraint on cost, NSGA-II's later generations are mostly feasible."""
    space = MobileNetV3Space()
    metrics = toy_metrics(space)
    costs = sorted(metrics(space.sample(np.random.default_rng(i)))["cost_ms"] for i in range(200))
    limit = costs[40]  # about 20 % of random samples are feasible
    cons = [Constraint("cost_ms", max=limit)]
    s = STRATEGIES.get("nsga2")(space=space, objectives=[Objective("score", "max")], constraints=cons,
                                rng=np.random.default_rng(0), pop_size=20)
    feasible_share = []
    n = 0
    for _ in range(8):
        archs = s.ask(20)
        trials = []
        for a in archs:
            m = metrics(a)
            trials.append(Trial(n, a, m, "ok" if cons[0].is_satisfied(m) else "infeasible"))
            n += 1
        feasible_share.append(np.mean([t.status == "ok" for t in trials]))
        s.tell(trials)
    assert feasible_share[-1] > 0.6 > feasible_share[0]


def test_check_strategy_names_a_space_it_cannot_judge_on():
    from hwnas.search_spaces.base import CategoricalSpace, Gene
    from hwnas.strategies import STRATEGIES

    class Small(CategoricalSpace):
        name = "small"
        input_shape = (1, 4, 4)

        def genes(self) -> list[Gene]:
            return [Gene("a", (0, 1, 2)), Gene("b", (0, 1, 2))]

        def size(self) -> int:
            return 9

    with pytest.raises(ValueError, match=r"more than 160 members .* Small has 9"):
        check_strategy(STRATEGIES.get("random"), Small())
