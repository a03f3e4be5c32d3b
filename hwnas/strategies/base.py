"""The ask/tell Strategy protocol and what black-box strategies share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from hwnas.architecture import Architecture
from hwnas.objectives import Constraint, Objective, Trial, non_dominated
from hwnas.registry import Registry

STRATEGIES: Registry[Any] = Registry(kind="strategy", entry_point_group="hwnas.strategies")

#: Objective value given to trials that have no value for an objective (infeasible or failed).
WORST = 1e12


@runtime_checkable
class Strategy(Protocol):
    """Proposes architectures and learns from finished trials.

    Deterministic given its generator's seed and the sequence of ``tell`` calls, so a run
    resumes by replaying its journal through ``tell``; nothing is pickled.
    """

    def ask(self, n: int) -> list[Architecture]:
        """Up to ``n`` architectures to evaluate next (at least one)."""
        ...

    def tell(self, trials: Sequence[Trial]) -> None:
        """Finished trials for architectures this strategy asked, in the order asked."""
        ...


class StrategyParams(BaseModel):
    """Parameters common to every strategy; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BlackBoxStrategy:
    """Holds the space, objectives, constraints and generator; turns trials into vectors."""

    Params: ClassVar[type[StrategyParams]] = StrategyParams

    def __init__(self, *, space: Any, objectives: Sequence[Objective], constraints: Sequence[Constraint],
                 rng: np.random.Generator) -> None:
        self.space = space
        self.objectives = list(objectives)
        self.constraints = list(constraints)
        self.rng = rng

    def objective_vector(self, trial: Trial) -> np.ndarray:
        """Objectives on the minimise scale; :data:`WORST` where a value is missing or not finite."""
        out = np.empty(len(self.objectives))
        for j, o in enumerate(self.objectives):
            v = trial.metrics.get(o.metric)
            out[j] = o.to_minimise(float(v)) if (trial.status == "ok" and v is not None and math.isfinite(v)) else WORST
        return out

    def violation_vector(self, trial: Trial) -> np.ndarray:
        """Per constraint, how far it is violated (``<= 0`` is satisfied, as pymoo expects).

        Failed trials violate all.
        """
        if trial.status == "failed":
            return np.full(max(len(self.constraints), 1), WORST)[: len(self.constraints)]
        return np.array([min(c.violation(trial.metrics), WORST) for c in self.constraints])

    def pick_best(self, trials: Sequence[Trial]) -> Trial:
        """A random member of the non-dominated set of the ok, feasible trials (least violation if none)."""
        good = [t for t in trials if t.status == "ok"]
        if not good:
            return min(trials, key=lambda t: float(self.violation_vector(t).sum()) if self.constraints else 0.0)
        front = non_dominated(np.stack([self.objective_vector(t) for t in good]))
        return good[int(front[int(self.rng.integers(len(front)))])]
