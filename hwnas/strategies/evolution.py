"""Regularized (aging) evolution, Real et al. 2019, with a multi-objective tournament."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, StrategyParams


class EvolutionParams(StrategyParams):
    population_size: int = Field(16, ge=2, description="size of the aging population")
    sample_size: int = Field(4, ge=1, description="tournament size")


@STRATEGIES.register("evolution")
class RegularizedEvolution(BlackBoxStrategy):
    """Regularized (aging) evolution: tournament parent, one mutation, the oldest member dies."""

    Params = EvolutionParams

    def __init__(self, *, population_size: int = 16, sample_size: int = 4, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if sample_size > population_size:
            raise ValueError("sample_size must not exceed population_size")
        self.population_size = population_size
        self.sample_size = sample_size
        self.population: deque[Trial] = deque(maxlen=population_size)
        self._asked = 0

    def ask(self, n: int) -> list[Architecture]:
        out = []
        for _ in range(max(1, n)):
            if self._asked < self.population_size or len(self.population) < self.sample_size:
                out.append(self.space.sample(self.rng))
            else:
                members = list(self.population)
                idx = self.rng.choice(len(members), size=self.sample_size, replace=False)
                parent = self.pick_best([members[int(i)] for i in idx])
                out.append(self.space.mutate(parent.arch, self.rng))
            self._asked += 1
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        self.population.extend(trials)
