"""Strategies: ask/tell black-box strategies (random, evolution, local search, REINFORCE, Optuna's samplers,
pymoo's NSGA-II, NSGA-III, SMS-EMOA and AGE-MOEA, predictor-guided search,
Bayesian optimisation with EI / EHVI); one-shot differentiable strategies (DARTS, PC-DARTS, GDAS, FBNet,
ProxylessNAS) with a latency term."""

from hwnas.strategies import bayes_opt as _bayes_opt  # noqa: F401
from hwnas.strategies import differentiable as _differentiable  # noqa: F401
from hwnas.strategies import evolution as _evolution  # noqa: F401
from hwnas.strategies import local_search as _local_search  # noqa: F401
from hwnas.strategies import optuna_search as _optuna  # noqa: F401
from hwnas.strategies import predictor_guided as _predictor_guided  # noqa: F401
from hwnas.strategies import pymoo_algorithms as _pymoo  # noqa: F401
from hwnas.strategies import random_search as _random  # noqa: F401
from hwnas.strategies import reinforce as _reinforce  # noqa: F401
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, Strategy
from hwnas.strategies.oneshot import ONE_SHOT_STRATEGIES, OneShotStrategy

__all__ = ["STRATEGIES", "BlackBoxStrategy", "Strategy"]
__all__ += ["ONE_SHOT_STRATEGIES", "OneShotStrategy"]
