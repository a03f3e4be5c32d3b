"""Bayesian optimisation: its acquisition functions against direct computation, and its choices."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.objectives import Objective, hypervolume, hypervolume_improvement
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.strategies import STRATEGIES
from hwnas.strategies.bayes_opt import expected_improvement


def test_expected_improvement_matches_monte_carlo():
    rng = np.random.default_rng(0)
    mean, std, best = np.array([0.0, 1.0, -0.5, 2.0]), np.array([1.0, 0.5, 0.0, 0.1]), 0.5
    draws = mean[:, None] + std[:, None] * rng.standard_normal((4, 400_000))
    mc = np.maximum(best - draws, 0).mean(axis=1)
    np.testing.assert_allclose(expected_improvement(mean, std, best), mc, atol=3e-3)
    assert expected_improvement(np.array([1.0]), np.array([0.0]), 0.5)[0] == 0.0  # no chance, no spread


@pytest.mark.parametrize("k", [2, 3])
def test_hypervolume_improvement_is_the_difference_of_hypervolumes(k):
    rng = np.random.default_rng(k)
    front, ref = rng.random((7, k)), np.full(k, 1.1)
    points = rng.random((50, k)) * 1.2 - 0.05
    direct = [hypervolume(np.vstack([front, p]), ref) - hypervolume(front, ref) for p in points]
    np.testing.assert_allclose(hypervolume_improvement(points, front, ref), direct, atol=1e-12)
    assert np.all(hypervolume_improvement(front, front, ref) < 1e-12)  # a front point adds nothing


def _strategy(objectives, **params):
    return STRATEGIES.get("bayes_opt")(space=MobileNetV3Space(), objectives=objectives, constraints=[],
                                       rng=np.random.default_rng(0), **params)


def test_ehvi_prefers_the_candidate_beyond_the_front():
    s = _strategy([Objective("a", "min"), Objective("b", "min")], samples=256)
    from hwnas.objectives import Trial

    space = s.space
    archs = [space.sample(np.random.default_rng(i)) for i in range(3)]
    s.tell([Trial(i, a, m) for i, (a, m) in enumerate(zip(archs, [{"a": 1.0, "b": 3.0}, {"a": 2.0, "b": 2.0},
                                                                   {"a": 3.0, "b": 1.0}]))])
    mean = np.array([[2.5, 2.5], [1.5, 1.5], [2.0, 2.0], [0.5, 3.5]])  # dominated, beyond, on, beyond an end
    std = np.full_like(mean, 0.05)
    order = s._acquire(mean, std, 4)
    assert order[0] == 1 and order[1] == 3 and set(order[2:]) == {0, 2}


def test_needs_an_uncertain_surrogate_and_the_right_acquisition():
    with pytest.raises(ConfigError, match="no uncertainty"):
        _strategy([Objective("a", "min")], predictor="gbt", predictor_params={})
    with pytest.raises(ConfigError, match="use ehvi"):
        _strategy([Objective("a", "min"), Objective("b", "min")], acquisition="ei")
    assert _strategy([Objective("a", "min")]).acquisition == "ei"
