"""Local search (White, Nolen, Neiswanger and Savani, "Local search is state of the art for NAS benchmarks",
2021), with Pareto acceptance for several objectives (Pareto local search, Paquete et al. 2004)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import NeighbourhoodSpace, sample_batch
from hwnas.strategies.base import BlackBoxStrategy, StrategyContext, StrategyParams

if TYPE_CHECKING:
    from typing_extensions import Unpack


class LocalSearchParams(StrategyParams):
    initial: int = Field(10, ge=1, description="random architectures evaluated before the first walk starts "
                                               "from the best of them")
    max_neighbours: int | None = Field(None, ge=1, description="neighbours evaluated per step, drawn at random "
                                                               "(default: the whole neighbourhood)")


class LocalSearch(BlackBoxStrategy):
    """Walks from the best architecture so far to a better neighbour until none is better, then restarts.

    A walk keeps its *set* of best trials (one trial with one objective; the non-dominated ones with several,
    constraint violation first, as pymoo's constraint domination). It evaluates the whole neighbourhood of a
    member it has not explored yet, adds what is not dominated, drops what is, and goes on; when every member
    is explored the walk has reached a local optimum (a local Pareto set) and a new walk starts from a random
    architecture. With one objective this is White et al.'s local search: move to the best neighbour while it
    improves, restart at a local optimum. Neighbours come from the space's ``neighbours`` (every space built
    on ``CategoricalSpace`` has it); a space without it gets 16 distinct mutations instead.
    """

    Params = LocalSearchParams

    def __init__(self, *, initial: int = 10, max_neighbours: int | None = None,
                 **kwargs: Unpack[StrategyContext]) -> None:
        super().__init__(**kwargs)
        self.initial = initial
        self.max_neighbours = max_neighbours
        self._walk: list[Trial] = []  # the current walk's best trials (non-dominated, by violation first)
        self._explored: set[str] = set()  # arch ids whose neighbourhoods were queued
        self._queue: list[Architecture] = []  # to propose, in order
        self._starts = 0  # random starts asked (the initial ones, then one per restart)
        self._pending_start = False  # a restart was asked and not yet told
        self.walks = 0  # walks started (for tests and reports)

    # -- ask / tell --------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Architecture]:
        """The queued neighbours first (at most ``n``); when none are queued, the next step's neighbourhood,
        or random starts. Fewer than ``n`` when the rest depends on trials not yet told."""
        n = max(1, n)
        if not self._queue:
            self._step()
        out: list[Architecture] = []
        taken: set[str] = set()
        while self._queue and len(out) < n:
            arch = self._queue.pop(0)
            if arch.arch_id not in self.seen and arch.arch_id not in taken:
                taken.add(arch.arch_id)
                out.append(arch)
        if not out:  # every queued neighbour was known already: a fresh start
            out.append(self._start(taken))
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        self.remember(trials)
        for t in trials:
            self._accept(t)
        self._pending_start = False

    # -- the walk ----------------------------------------------------------------------------------
    def _step(self) -> None:
        """Queue the neighbourhood of an unexplored member of the walk, or random starts."""
        if self._starts < self.initial:  # the initial random architectures, in one go
            k = self.initial - self._starts
            self._queue.extend(sample_batch(self.space, self.rng, k))
            self._starts += k
            self.walks = 1
            return
        for member in self._walk:
            aid = member.arch.arch_id
            if aid not in self._explored:
                self._explored.add(aid)
                self._queue.extend(self._neighbours(member.arch))
                if self._queue:  # else every neighbour is known already: the next member
                    return
        if not self._pending_start:  # a local optimum: a new walk from a random architecture
            self._walk = []
            self.walks += 1
            self._pending_start = True
            self._queue.append(self._start(set()))

    def _start(self, taken: set[str]) -> Architecture:
        self._starts += 1
        return self.novel(lambda _attempt: self.space.sample(self.rng), taken)

    def _neighbours(self, arch: Architecture) -> list[Architecture]:
        if isinstance(self.space, NeighbourhoodSpace):
            found = self.space.neighbours(arch, self.rng)
        else:
            found = list({self.space.mutate(arch, self.rng): None for _ in range(16)})
        fresh = [a for a in found if a.arch_id not in self.seen]
        order = self.rng.permutation(len(fresh))
        if self.max_neighbours is not None:
            order = order[: self.max_neighbours]
        return [fresh[int(i)] for i in order]

    def _key(self, trial: Trial) -> tuple[float, np.ndarray]:
        """(total constraint violation, objectives on the minimise scale); failed trials violate everything."""
        violation = float(self.violation_vector(trial).sum()) if self.constraints else 0.0
        if trial.status == "failed":
            violation = float("inf")
        return violation, self.objective_vector(trial)

    def _dominates(self, a: Trial, b: Trial) -> bool:
        (va, fa), (vb, fb) = self._key(a), self._key(b)
        if va != vb:
            return va < vb
        return bool(np.all(fa <= fb) and np.any(fa < fb))

    def _accept(self, trial: Trial) -> None:
        """Add ``trial`` to the walk unless a member dominates it (or equals it on every objective: the walk
        moves only on improvement); drop the members it dominates."""
        if trial.status == "failed" and self._walk:
            return
        key = self._key(trial)
        for member in self._walk:
            if self._dominates(member, trial) or (self._key(member)[0] == key[0]
                                                   and np.array_equal(self._key(member)[1], key[1])):
                return
        self._walk = [m for m in self._walk if not self._dominates(trial, m)] + [trial]
