"""Strategies: ask/tell black-box strategies (random, evolution, NSGA-II)."""

from hwnas.strategies import evolution as _evolution  # noqa: F401
from hwnas.strategies import nsga2 as _nsga2  # noqa: F401
from hwnas.strategies import random_search as _random  # noqa: F401
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, Strategy
from hwnas.strategies.oneshot import ONE_SHOT_STRATEGIES, OneShotStrategy

__all__ = ["STRATEGIES", "BlackBoxStrategy", "Strategy"]
__all__ += ["ONE_SHOT_STRATEGIES", "OneShotStrategy"]
