"""Conformance suites every registered component must pass (shipped, like ``optuna.testing``).

A third-party space or strategy calls :func:`check_space` / :func:`check_strategy` in its own tests;
hwnas's tests run them over every registered name. Importing this package also registers the ``fake``
evaluator (a test double for runners and executors).
"""

from hwnas.testing.evaluators import check_evaluator
from hwnas.testing.latency import check_backend, check_latency_model
from hwnas.testing.oneshot import check_one_shot_strategy
from hwnas.testing.predictors import check_predictor
from hwnas.testing.spaces import check_space, check_space_build, check_space_units
from hwnas.testing.strategies import check_strategy
from hwnas.testing.supernet import check_supernet

__all__ = ["check_space", "check_space_build", "check_space_units", "check_strategy"]
__all__ += ["check_one_shot_strategy", "check_predictor", "check_supernet"]
__all__ += ["check_backend", "check_latency_model"]
__all__ += ["check_evaluator"]
