"""NSGA-II from pymoo, driven through pymoo's ask/tell interface over choice indices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.objectives import Trial
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy, StrategyParams


class NSGA2Params(StrategyParams):
    pop_size: int = Field(16, ge=2, description="population size")
    n_offsprings: int | None = Field(None, ge=1, description="children per generation (default: pop_size)")
    crossover_prob: float = Field(0.9, ge=0.0, le=1.0)
    crossover_eta: float = Field(15.0, gt=0)
    mutation_eta: float = Field(20.0, gt=0)


@STRATEGIES.register("nsga2")
class NSGA2Strategy(BlackBoxStrategy):
    """NSGA-II (pymoo): non-dominated sorting, crowding distance, constraint domination; integer genes."""

    Params = NSGA2Params

    def __init__(self, *, pop_size: int = 16, n_offsprings: int | None = None, crossover_prob: float = 0.9,
                 crossover_eta: float = 15.0, mutation_eta: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.sbx import SBX
        from pymoo.operators.mutation.pm import PM
        from pymoo.operators.repair.rounding import RoundingRepair
        from pymoo.operators.sampling.rnd import IntegerRandomSampling

        genes = self.space.genes()
        self._problem = Problem(
            n_var=len(genes), n_obj=len(self.objectives), n_ieq_constr=len(self.constraints),
            xl=np.zeros(len(genes)), xu=np.array([len(g.choices) - 1 for g in genes], dtype=float), vtype=int,
        )
        self._algorithm = NSGA2(
            pop_size=pop_size,
            n_offsprings=n_offsprings,
            sampling=IntegerRandomSampling(),
            crossover=SBX(prob=crossover_prob, eta=crossover_eta, vtype=float, repair=RoundingRepair()),
            mutation=PM(eta=mutation_eta, vtype=float, repair=RoundingRepair()),
            eliminate_duplicates=True,
        )
        seed = int(self.rng.integers(2**31 - 1))
        self._algorithm.setup(self._problem, seed=seed, termination=("n_gen", 10**9), verbose=False)
        self._generation: Any = None  # the pymoo Population being evaluated
        self._archs: list[Architecture] = []
        self._handed = 0
        self._results: dict[int, Trial] = {}

    def ask(self, n: int) -> list[Architecture]:
        if self._generation is None:
            pop = self._algorithm.ask()
            self._generation = pop
            taken: set[str] = set()
            self._archs = [self._novel(ind, taken) for ind in pop]
            self._handed = 0
            self._results = {}
        k = max(1, min(n, len(self._archs) - self._handed))
        out = self._archs[self._handed : self._handed + k]
        self._handed += k
        return out

    def _novel(self, individual: Any, taken: set[str]) -> Architecture:
        """The individual's architecture, or, when it was evaluated before (pymoo removes duplicates only
        within a generation), a mutation of it that was not (``novel``), written back into the individual."""
        arch = self._decode(individual)
        if arch.arch_id not in self.seen and arch.arch_id not in taken:
            taken.add(arch.arch_id)
            return arch
        fresh = self.novel(lambda attempt: self.mutate_steps(arch, 1 + attempt // 8), taken)
        individual.set("X", self.space.to_indices(fresh))
        return fresh

    def _decode(self, individual: Any) -> Architecture:
        """Choice indices -> architecture; a vector that is not a member (e.g. a DARTS node fed twice by one
        input) is repaired by a fresh sample, written back so pymoo learns what was really evaluated."""
        try:
            return self.space.from_indices(individual.get("X"))
        except InvalidArchitecture:
            arch = self.space.sample(self.rng)
            individual.set("X", self.space.to_indices(arch))
            return arch

    def tell(self, trials: Sequence[Trial]) -> None:
        from pymoo.core.evaluator import Evaluator
        from pymoo.problems.static import StaticProblem

        if self._generation is None:
            raise RuntimeError("tell() before ask()")
        self.remember(trials)
        start = len(self._results)
        for i, t in enumerate(trials):
            self._results[start + i] = t
        if len(self._results) < len(self._archs):
            return
        ordered = [self._results[i] for i in range(len(self._archs))]
        F = np.stack([self.objective_vector(t) for t in ordered])
        kw: dict[str, Any] = {"F": F}
        if self.constraints:
            kw["G"] = np.stack([self.violation_vector(t) for t in ordered])
        Evaluator().eval(StaticProblem(self._problem, **kw), self._generation)
        self._algorithm.tell(infills=self._generation)
        self._generation = None
