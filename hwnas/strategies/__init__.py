"""Strategies: ask/tell black-box strategies (random, evolution, local search, REINFORCE, Optuna's samplers,
pymoo's NSGA-II, NSGA-III, SMS-EMOA and AGE-MOEA, predictor-guided search,
Bayesian optimisation with EI / EHVI); one-shot differentiable strategies (DARTS, PC-DARTS, GDAS, FBNet,
ProxylessNAS) with a latency term."""

from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, Strategy
from hwnas.strategies.oneshot import ONE_SHOT_STRATEGIES, OneShotStrategy

__all__ = ["STRATEGIES", "BlackBoxStrategy", "Strategy"]
__all__ += ["ONE_SHOT_STRATEGIES", "OneShotStrategy"]
