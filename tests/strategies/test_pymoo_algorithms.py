"""pymoo's Pareto optimisers beyond NSGA-II: NSGA-III's reference directions, many objectives."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.objectives import Objective
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.strategies import STRATEGIES
from hwnas.strategies.pymoo_algorithms import das_dennis_partitions


def test_nsga3_reference_directions_fit_the_population():
    assert das_dennis_partitions(1, 16) == 1
    assert das_dennis_partitions(2, 16) == 15  # 16 directions on a line
    assert das_dennis_partitions(3, 16) == 4  # C(6, 2) = 15 <= 16 < C(7, 2) = 21
    objectives = [Objective(f"f{i}", "min") for i in range(4)]
    s = STRATEGIES.create("nsga3", {"pop_size": 20}, space=NB201Space(), objectives=objectives, constraints=[],
                          rng=np.random.default_rng(0))
    assert len(s.ask(20)) == 20
    with pytest.raises(ValueError, match="exceed pop_size 8"):
        STRATEGIES.create("nsga3", {"pop_size": 8, "n_partitions": 4}, space=NB201Space(), objectives=objectives,
                          constraints=[], rng=np.random.default_rng(0))


def test_smsemoa_needs_two_objectives():
    with pytest.raises(ValueError, match="SMSEMOA needs at least 2 objectives; this experiment has 1"):
        STRATEGIES.create("smsemoa", {}, space=NB201Space(), objectives=[Objective("top1", "max")], constraints=[],
                          rng=np.random.default_rng(0))
