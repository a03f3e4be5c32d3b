"""The ask/tell Strategy protocol and what black-box strategies share."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, TypedDict, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from hwnas.architecture import Architecture, require_generator
from hwnas.objectives import Constraint, Objective, Trial, non_dominated_rows
from hwnas.registry import Registry

if TYPE_CHECKING:
    from typing_extensions import NotRequired

    from hwnas.search_spaces.base import SearchSpace

#: The built-in strategies, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_STRATEGIES: dict[str, str] = {
    "agemoea": "hwnas.strategies.pymoo_algorithms:AGEMOEAStrategy",
    "bayes_opt": "hwnas.strategies.bayes_opt:BayesOpt",
    "evolution": "hwnas.strategies.evolution:RegularizedEvolution",
    "local_search": "hwnas.strategies.local_search:LocalSearch",
    "nsga2": "hwnas.strategies.pymoo_algorithms:NSGA2Strategy",
    "nsga3": "hwnas.strategies.pymoo_algorithms:NSGA3Strategy",
    "optuna": "hwnas.strategies.optuna_search:OptunaSearch",
    "predictor_guided": "hwnas.strategies.predictor_guided:PredictorGuided",
    "random": "hwnas.strategies.random_search:RandomSearch",
    "reinforce": "hwnas.strategies.reinforce:Reinforce",
    "smsemoa": "hwnas.strategies.pymoo_algorithms:SMSEMOAStrategy",
}
STRATEGIES: Registry[Strategy] = Registry(kind="strategy", entry_point_group="hwnas.strategies",
                                          builtins=BUILTIN_STRATEGIES)

#: Objective value given to trials that have no value for an objective (infeasible or failed).
WORST = 1e12

#: Proposals :meth:`BlackBoxStrategy.novel` tries (then as many uniform samples) before giving up on novelty.
NOVEL_TRIES = 64


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


#: Metrics of architectures that are not evaluated yet, at a table lookup's cost: one dict per architecture,
#: in order, holding the looked-up metrics it could price (a latency table's ``latency_ms@pixel3``).
Lookup = Callable[[Sequence[Architecture]], list[dict[str, float]]]


@runtime_checkable
class LookupAware(Strategy, Protocol):
    """A strategy that can use metrics known before evaluation (a latency table: microseconds a candidate).

    In a hardware-aware search the accuracy costs a training (or a supernet pass) while a device's latency from a
    table costs a lookup; such a strategy is given the lookup once, before its first ask, and may price as many
    candidates as it likes with it. The lookup is deterministic (a table, not a measurement), so a run that uses
    it still resumes by replay.
    """

    def use_lookup(self, lookup: Lookup, metrics: Sequence[str]) -> None:
        """Take ``lookup``, which prices ``metrics`` (a subset of the objective and constraint metrics)."""
        ...


@runtime_checkable
class FiniteStrategy(Strategy, Protocol):
    """A strategy with a known end (a one-shot search's derived architectures): the runner stops when it says so."""

    def exhausted(self) -> bool:
        """True when ``ask`` will return nothing new any more."""
        ...


class StrategyParams(BaseModel):
    """Parameters common to every strategy; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StrategyContext(TypedDict):
    """:class:`BlackBoxStrategy`'s keyword arguments, what the runner gives a strategy besides its ``Params``
    (a subclass's ``**kwargs`` that it passes on)."""

    space: SearchSpace
    objectives: Sequence[Objective]
    constraints: Sequence[Constraint]
    rng: np.random.Generator
    run_dir: NotRequired[Path | None]


class BlackBoxStrategy:
    """Holds the space, objectives, constraints and generator; turns trials into vectors."""

    Params: ClassVar[type[StrategyParams]] = StrategyParams

    def __init__(self, *, space: SearchSpace, objectives: Sequence[Objective], constraints: Sequence[Constraint],
                 rng: np.random.Generator, run_dir: Path | None = None) -> None:
        self.space = space
        self.objectives = list(objectives)
        self.constraints = list(constraints)
        require_generator(rng, self, "__init__")
        self.rng = rng
        self.run_dir = run_dir  # the run directory, for a strategy that keeps files of its own (None: in memory)
        self.seen: set[str] = set()  # arch ids told so far (rebuilt by replay on resume)

    def remember(self, trials: Sequence[Trial]) -> None:
        """Record told trials, so that :meth:`novel` does not propose them again."""
        self.seen.update(t.arch.arch_id for t in trials)

    def novel(self, propose: Callable[[int], Architecture], taken: set[str]) -> Architecture:
        """A proposal that is neither evaluated (:attr:`seen`) nor already in this batch (``taken``, updated).

        ``propose(attempt)`` is called with attempts 0, 1, 2, ... (a strategy widens its step with it, e.g.
        more mutations); after :data:`NOVEL_TRIES` proposals, uniform samples of the space are tried (a
        restart) as many times again. When even those are all known the space is exhausted, or nearly:
        the last proposal is returned and the runner, finding nothing new, stops and says so.
        """
        arch = propose(0)
        attempt = 1
        while arch.arch_id in self.seen or arch.arch_id in taken:
            if attempt >= 2 * NOVEL_TRIES:
                break
            arch = propose(attempt) if attempt < NOVEL_TRIES else self.space.sample(self.rng)
            attempt += 1
        taken.add(arch.arch_id)
        return arch

    def mutate_steps(self, arch: Architecture, steps: int) -> Architecture:
        """``steps`` successive mutations of ``arch`` (a wider step than one)."""
        for _ in range(steps):
            arch = self.space.mutate(arch, self.rng)
        return arch

    def objective_vector(self, trial: Trial) -> np.ndarray:
        """Objectives on the minimise scale; :data:`WORST` where a value is missing or not finite."""
        return np.array(self.objective_row(trial), dtype=float)

    def objective_row(self, trial: Trial) -> list[float]:
        """:meth:`objective_vector`'s values as a list of floats (for a few trials: no array each)."""
        ok, metrics = trial.status == "ok", trial.metrics
        return [o.to_minimise(float(v)) if ok and (v := metrics.get(o.metric)) is not None and math.isfinite(v)
                else WORST for o in self.objectives]

    def violation_vector(self, trial: Trial) -> np.ndarray:
        """Per constraint, how far it is violated (``<= 0`` is satisfied, as pymoo expects).

        Failed trials violate all.
        """
        if trial.status == "failed":
            return np.full(max(len(self.constraints), 1), WORST)[: len(self.constraints)]
        return np.array([min(c.violation(trial.metrics), WORST) for c in self.constraints])

    def pick_best(self, trials: Sequence[Trial], rows: Sequence[list[float]] | None = None) -> Trial:
        """A random member of the non-dominated set of the ok, feasible trials (least violation if none).

        ``rows``, when given, are the trials' :meth:`row_of` values, computed earlier (a population's, once per
        member rather than once per tournament it takes part in); the pick is the same.
        """
        good = [j for j, t in enumerate(trials) if t.status == "ok"]
        if not good:
            return min(trials, key=lambda t: float(self.violation_vector(t).sum()) if self.constraints else 0.0)
        picked = [rows[j] for j in good] if rows is not None else [self.row_of(trials[j]) for j in good]
        front = non_dominated_rows(picked)
        return trials[good[front[int(self.rng.integers(len(front)))]]]

    def row_of(self, trial: Trial) -> list[float]:
        """The trial's objectives on the minimise scale as a list of floats: :meth:`objective_row`, or a
        subclass's own :meth:`objective_vector` where it has one."""
        if type(self).objective_vector is BlackBoxStrategy.objective_vector:
            return self.objective_row(trial)  # a tournament's few: no numpy per call
        return [float(v) for v in self.objective_vector(trial).tolist()]


class LookupMixin:
    """:class:`LookupAware` for a :class:`BlackBoxStrategy`: keeps the lookup and prices objectives with it."""

    objectives: list[Objective]
    lookup: Lookup | None = None
    lookup_metrics: tuple[str, ...] = ()

    def use_lookup(self, lookup: Lookup, metrics: Sequence[str]) -> None:
        """Keep ``lookup`` (see :class:`LookupAware`); read by :meth:`look_up`."""
        self.lookup = lookup
        self.lookup_metrics = tuple(metrics)

    def looked_up_objectives(self) -> list[int]:
        """Indices of the objectives whose metric the lookup prices."""
        return [j for j, o in enumerate(self.objectives) if o.metric in self.lookup_metrics]

    def look_up(self, archs: Sequence[Architecture]) -> np.ndarray:
        """The objectives of ``archs`` by lookup, on the minimise scale: ``(len(archs), n_objectives)``, NaN where
        an objective is not looked up, :data:`WORST` where the lookup could not price an architecture."""
        out = np.full((len(archs), len(self.objectives)), np.nan)
        cols = self.looked_up_objectives()
        if self.lookup is None or not cols or not archs:
            return out
        for i, metrics in enumerate(self.lookup(archs)):
            for j in cols:
                o = self.objectives[j]
                v = metrics.get(o.metric)
                out[i, j] = o.to_minimise(float(v)) if v is not None and math.isfinite(v) else WORST
        return out
