"""Pareto optimisers from pymoo, driven through pymoo's ask/tell interface over choice indices.

- ``nsga2``: NSGA-II (non-dominated sorting, crowding distance);
- ``nsga3``: NSGA-III (reference directions, for many objectives: accuracy x several devices x memory);
- ``smsemoa``: SMS-EMOA (survival by least hypervolume contribution);
- ``agemoea``: AGE-MOEA (adaptive geometry estimation of the front; pymoo compiles it with numba).

All of them: integer genes (pymoo's integer sampling, SBX and polynomial mutation rounded), pymoo's
constraint domination (a violation vector per trial, failed trials violating everything), a generation
evaluated in as many batches as the runner asks for, and never an architecture evaluated before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.objectives import Trial
from hwnas.strategies.base import BlackBoxStrategy, StrategyContext, StrategyParams

if TYPE_CHECKING:
    from pymoo.core.algorithm import Algorithm
    from pymoo.core.individual import Individual
    from pymoo.core.population import Population
    from typing_extensions import Unpack

    from hwnas.search_spaces.base import IntegerVectorSpace


class PymooParams(StrategyParams):
    pop_size: int = Field(16, ge=2, description="population size")
    n_offsprings: int | None = Field(None, ge=1, description="children per generation (default: pop_size)")
    crossover_prob: float = Field(0.9, ge=0.0, le=1.0)
    crossover_eta: float = Field(15.0, gt=0)
    mutation_eta: float = Field(20.0, gt=0)


class PymooKwargs(StrategyContext, total=False):
    """The keyword arguments a subclass (``nsga3``) passes on to :class:`PymooStrategy`: the context and the
    genetic operators' parameters."""

    pop_size: int
    n_offsprings: int | None
    crossover_prob: float
    crossover_eta: float
    mutation_eta: float


class PymooStrategy(BlackBoxStrategy):
    """The ask/tell bridge to a pymoo genetic algorithm (a subclass says which, in :meth:`_algorithm_class`)."""

    Params: ClassVar[type[StrategyParams]] = PymooParams
    space: IntegerVectorSpace  # the operators work on choice indices (to_indices / from_indices)
    #: The fewest objectives the algorithm is defined for.
    min_objectives: ClassVar[int] = 1

    def __init__(self, *, pop_size: int = 16, n_offsprings: int | None = None, crossover_prob: float = 0.9,
                 crossover_eta: float = 15.0, mutation_eta: float = 20.0,
                 **kwargs: Unpack[StrategyContext]) -> None:
        super().__init__(**kwargs)
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.sbx import SBX
        from pymoo.operators.mutation.pm import PM
        from pymoo.operators.repair.rounding import RoundingRepair
        from pymoo.operators.sampling.rnd import IntegerRandomSampling

        if len(self.objectives) < self.min_objectives:
            raise ValueError(f"{type(self).__name__.removesuffix('Strategy')} needs at least {self.min_objectives} "
                             f"objectives; this experiment has {len(self.objectives)} (for one objective use "
                             "nsga2, evolution, local_search or random)")
        genes = self.space.genes()
        self._problem = Problem(
            n_var=len(genes), n_obj=len(self.objectives), n_ieq_constr=len(self.constraints),
            xl=np.zeros(len(genes)), xu=np.array([len(g.choices) - 1 for g in genes], dtype=float), vtype=int,
        )
        operators = {
            "sampling": IntegerRandomSampling(),
            "crossover": SBX(prob=crossover_prob, eta=crossover_eta, vtype=float, repair=RoundingRepair()),
            "mutation": PM(eta=mutation_eta, vtype=float, repair=RoundingRepair()),
            "eliminate_duplicates": True,
        }
        self._algorithm = self._make_algorithm(pop_size, n_offsprings, operators)
        seed = int(self.rng.integers(2**31 - 1))
        self._algorithm.setup(self._problem, seed=seed, termination=("n_gen", 10**9), verbose=False)
        self._generation: Any = None  # the pymoo Population being evaluated
        self._archs: list[Architecture] = []
        self._handed = 0
        self._results: dict[int, Trial] = {}

    def _make_algorithm(self, pop_size: int, n_offsprings: int | None, operators: dict[str, object]) -> Algorithm:
        raise NotImplementedError

    def ask(self, n: int) -> list[Architecture]:
        if self._generation is None:
            pop = self._algorithm.ask()
            if pop is None or len(pop) == 0:  # pymoo makes no new offspring: the space (or the algorithm) is spent
                return []
            self._generation = pop
            taken: set[str] = set()
            self._archs = [self._novel(ind, taken) for ind in pop]
            self._handed = 0
            self._results = {}
        k = max(1, min(n, len(self._archs) - self._handed))
        out = self._archs[self._handed : self._handed + k]
        self._handed += k
        return out

    def _novel(self, individual: Individual, taken: set[str]) -> Architecture:
        """The individual's architecture, or, when it was evaluated before (pymoo removes duplicates only
        within a generation), a mutation of it that was not (``novel``), written back into the individual."""
        arch = self._decode(individual)
        if arch.arch_id not in self.seen and arch.arch_id not in taken:
            taken.add(arch.arch_id)
            return arch
        fresh = self.novel(lambda attempt: self.mutate_steps(arch, 1 + attempt // 8), taken)
        individual.set("X", self.space.to_indices(fresh))
        return fresh

    def _decode(self, individual: Individual) -> Architecture:
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
            if not trials:  # after an ask() that had nothing to propose
                return
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


class NSGA2Strategy(PymooStrategy):
    """NSGA-II (pymoo): non-dominated sorting, crowding distance, constraint domination; integer genes."""

    def _make_algorithm(self, pop_size: int, n_offsprings: int | None, operators: dict[str, object]) -> Algorithm:
        from pymoo.algorithms.moo.nsga2 import NSGA2

        return NSGA2(pop_size=pop_size, n_offsprings=n_offsprings, **operators)


def das_dennis_partitions(n_obj: int, n_points: int) -> int:
    """The most partitions whose Das-Dennis reference directions (``C(p + m - 1, m - 1)`` of them) fit in
    ``n_points`` (at least 1): NSGA-III keeps about one survivor per direction."""
    p = 1
    while n_obj > 1 and math.comb(p + 1 + n_obj - 1, n_obj - 1) <= n_points:
        p += 1
    return p


def _by_violation_then_random(pop: Population, P: np.ndarray, random_state: np.random.Generator,
                              **_: object) -> np.ndarray:
    """NSGA-III's binary tournament: the smaller constraint violation wins, else a coin toss from the seeded
    ``random_state`` (pymoo 0.6.2's own ``comp_by_cv_then_random`` breaks violation ties with an unseeded
    generator, which made runs differ under one seed)."""
    winners = np.empty(len(P), dtype=int)
    for i, (a, b) in enumerate(P[:, :2].tolist()):
        cv_a, cv_b = float(pop[a].CV[0]), float(pop[b].CV[0])
        if (cv_a > 0.0 or cv_b > 0.0) and cv_a != cv_b:
            winners[i] = a if cv_a < cv_b else b
        else:
            winners[i] = a if random_state.random() < 0.5 else b
    return winners[:, None]


class NSGA3Params(PymooParams):
    n_partitions: int | None = Field(
        None, ge=1, description="Das-Dennis partitions of the reference directions (default: as many "
                                "directions as fit in pop_size)")


class NSGA3Strategy(PymooStrategy):
    """NSGA-III (pymoo): non-dominated sorting, then niching around Das-Dennis reference directions in the
    normalised objective space, for three objectives and more (accuracy x several devices x memory)."""

    Params = NSGA3Params

    def __init__(self, *, n_partitions: int | None = None, **kwargs: Unpack[PymooKwargs]) -> None:
        self._partitions = n_partitions
        super().__init__(**kwargs)

    def _make_algorithm(self, pop_size: int, n_offsprings: int | None, operators: dict[str, object]) -> Algorithm:
        from pymoo.algorithms.moo.nsga3 import NSGA3
        from pymoo.operators.selection.tournament import TournamentSelection
        from pymoo.util.ref_dirs import get_reference_directions

        m = len(self.objectives)
        p = self._partitions or das_dennis_partitions(m, pop_size)
        ref_dirs = get_reference_directions("das-dennis", m, n_partitions=p)
        if len(ref_dirs) > pop_size:
            raise ValueError(f"nsga3: {len(ref_dirs)} reference directions ({m} objectives, {p} partitions) "
                             f"exceed pop_size {pop_size}; raise pop_size or lower n_partitions")
        return NSGA3(ref_dirs=ref_dirs, pop_size=pop_size, n_offsprings=n_offsprings,
                     selection=TournamentSelection(func_comp=_by_violation_then_random), **operators)


class SMSEMOAStrategy(PymooStrategy):
    """SMS-EMOA (pymoo): non-dominated sorting, then the member adding least hypervolume to its front is
    dropped, one at a time (generational here: ``n_offsprings`` children per generation, default pop_size).
    Hypervolume needs two objectives at least."""

    min_objectives = 2

    def _make_algorithm(self, pop_size: int, n_offsprings: int | None, operators: dict[str, object]) -> Algorithm:
        from pymoo.algorithms.moo.sms import SMSEMOA

        return SMSEMOA(pop_size=pop_size, n_offsprings=n_offsprings, **operators)


class AGEMOEAStrategy(PymooStrategy):
    """AGE-MOEA (pymoo; Panichella 2019): survival by the front's estimated geometry (its Lp norm), which
    adapts to convex, linear and concave fronts. Its survival is compiled by numba on first use (seconds)."""

    def _make_algorithm(self, pop_size: int, n_offsprings: int | None, operators: dict[str, object]) -> Algorithm:
        from pymoo.algorithms.moo.age import AGEMOEA

        return AGEMOEA(pop_size=pop_size, n_offsprings=n_offsprings, **operators)
