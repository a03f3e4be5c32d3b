"""The batch loop that drives a :class:`~hwnas.strategies.base.Strategy`: ask -> canonicalize -> dedupe ->
evaluate the new ones -> tell, until the budget is spent, the strategy is exhausted or it stops finding new
architectures.

Written once for every driver: the runner (journal, executor, constraints around the evaluation), the strategy
benchmark (metrics read from tables) and the strategy conformance suite (toy metrics, injected failures). What
the drivers differ in is the evaluation, which the loop hands to a callback.

Per batch: ``ask(min(batch_size, budget - evaluated))`` (``ask(batch_size)`` with ``full_batches``); every
proposal canonicalized through the space; an architecture evaluated in an earlier batch gets its earlier trial;
the new ones (each once, in the order first asked, numbered in that order, none past the budget) go to
``evaluate``; then, unless the budget ran out inside the batch, the strategy is told every slot of the batch in
the order asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.strategies.base import FiniteStrategy, Strategy

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace

#: Batches in a row that bring no new architecture before the loop stops (the strategy has converged).
MAX_STALE_BATCHES = 50

#: Why a loop stopped: the budget is spent (or ran out inside a batch); a :class:`FiniteStrategy` has no more
#: architectures; :data:`MAX_STALE_BATCHES` batches brought nothing new; the strategy's own ask + tell time passed
#: ``max_ask_tell_s``; ``should_stop`` asked to stop (a user's callback).
StopReason = Literal["budget", "exhausted", "stale", "ask_tell_time", "requested"]


@dataclass(frozen=True)
class Candidate:
    """A new architecture of a batch (canonical) and the trial number it gets."""

    arch: Architecture
    number: int


#: One trial per candidate, in the candidates' order (called once per batch, with no candidate too).
Evaluate = Callable[[Sequence[Candidate]], Sequence[Trial]]


@dataclass
class Batch:
    """One ask/tell round of a :class:`BatchLoop`."""

    asked: list[Architecture]  # as the strategy proposed them
    archs: list[Architecture]  # canonicalized, slot by slot
    new: list[Trial]  # the trials of the architectures first asked in this batch, in the order first asked
    repeats: list[str]  # arch ids of the slots evaluated in an earlier batch, slot by slot
    told: list[Trial] | None  # what the strategy was told, slot by slot; None: the budget ran out inside the batch


@dataclass(frozen=True)
class Stop:
    """Why a :class:`BatchLoop` stopped (:data:`StopReason`), in words."""

    reason: StopReason
    message: str

    @property
    def early(self) -> bool:
        """Stopped before the budget because the strategy had nothing new to propose, or because a callback asked
        to stop."""
        return self.reason in ("exhausted", "stale", "requested")


class BatchLoop:
    """Drives ``strategy`` over ``space`` batch by batch (see the module's docstring).

    Args:
        strategy: The strategy (``ask``/``tell``; a :class:`FiniteStrategy` is stopped when it says it is
            exhausted and its batch brought nothing new).
        space: Canonicalizes the proposals.
        evaluate: The new candidates of a batch -> their trials (see :data:`Evaluate`).
        budget: Distinct architectures to evaluate.
        batch_size: The most architectures asked per batch.
        max_stale: Batches in a row with nothing new before the loop stops.
        max_ask_tell_s: Stop after the batch in which the strategy's ``ask`` + ``tell`` passed this many seconds.
        on_ask: Called with ``n`` and the proposals as asked, before anything else sees them (checks).
        on_told: Called with each :class:`Batch` the strategy was told of, right after ``tell``.
        full_batches: Ask ``batch_size`` every batch, the last one included (what is past the budget is neither
            evaluated nor told), instead of only what the budget has left. The sequence of asks then does not
            depend on the budget: a loop over a larger budget asks, evaluates and tells exactly what a smaller
            one did before going on, which is what extending a run (:mod:`hwnas.experiments.study`) rests on.
        should_stop: Called after each told batch; a message (a user's callback asked to stop) stops the loop
            there, with reason ``"requested"``.
        budget_spent: Called after each told batch; True stops the loop there, with reason ``"budget"`` (a budget
            counted in something other than architectures: a multi-fidelity run's cost).

    Attributes:
        trials: Arch id -> trial of every architecture evaluated so far, in the order first asked.
        ask_tell_s: Wall seconds spent in the strategy's ``ask`` and ``tell``.
        stale: Batches in a row that brought nothing new.
        stop: Why the loop stopped (None while it may go on).
    """

    def __init__(self, strategy: Strategy, space: SearchSpace, evaluate: Evaluate, *, budget: int, batch_size: int,
                 max_stale: int = MAX_STALE_BATCHES, max_ask_tell_s: float | None = None,
                 on_ask: Callable[[int, list[Architecture]], None] | None = None,
                 on_told: Callable[[Batch], None] | None = None, full_batches: bool = False,
                 should_stop: Callable[[], str | None] | None = None,
                 budget_spent: Callable[[], bool] | None = None) -> None:
        self.strategy, self.space, self.evaluate = strategy, space, evaluate
        self.budget_spent = budget_spent
        self.budget, self.batch_size = budget, batch_size
        self.max_stale, self.max_ask_tell_s = max_stale, max_ask_tell_s
        self.on_ask, self.on_told = on_ask, on_told
        self.full_batches, self.should_stop = full_batches, should_stop
        # a protocol check costs microseconds: once, not per batch
        self._exhausted = strategy.exhausted if isinstance(strategy, FiniteStrategy) else None
        self.finite = self._exhausted is not None
        self.trials: dict[str, Trial] = {}
        self.ask_tell_s = 0.0
        self.stale = 0
        self.stop: Stop | None = None

    def run(self) -> Stop:
        """Batches until the loop stops; why it did."""
        if self.stop is None and len(self.trials) >= self.budget:
            self.stop = Stop("budget", "the budget is spent")
        while self.stop is None:
            self.step()
        return self.stop

    def step(self) -> Batch:
        """One batch: ask, canonicalize, evaluate the new ones, tell; :attr:`stop` is set when the loop is done."""
        n = self.batch_size if self.full_batches else min(self.batch_size, self.budget - len(self.trials))
        t0 = time.perf_counter()
        asked = self.strategy.ask(n)
        self.ask_tell_s += time.perf_counter() - t0
        if self.on_ask is not None:
            self.on_ask(n, asked)
        archs = [self.space.canonicalize(a) for a in asked]
        slots, first, repeats = self._sort_out(archs)
        new = self._evaluate_new(archs, first)
        for (aid, i), trial in zip(first.items(), new):
            slots[i] = self.trials[aid] = trial
        for i, arch in enumerate(archs):  # repeats inside the batch take the trial of their first occurrence
            if slots[i] is None and arch.arch_id in self.trials:
                slots[i] = self.trials[arch.arch_id]
        told = [t for t in slots if t is not None]
        if len(told) < len(slots):  # the budget ran out inside this batch: the rest is never evaluated nor told
            self.stop = Stop("budget", "the budget is spent")
            return Batch(asked, archs, new, repeats, None)
        t0 = time.perf_counter()
        self.strategy.tell(told)
        self.ask_tell_s += time.perf_counter() - t0
        batch = Batch(asked, archs, new, repeats, told)
        if self.on_told is not None:
            self.on_told(batch)
        self.stop = self._why_stop(brought_new=bool(first))
        return batch

    def _sort_out(self, archs: Sequence[Architecture]) -> tuple[list[Trial | None], dict[str, int], list[str]]:
        """(slots filled with the trials of architectures evaluated before, arch id -> slot of each architecture
        first asked in this batch within the budget, arch ids of the slots evaluated before)."""
        slots: list[Trial | None] = [None] * len(archs)
        first: dict[str, int] = {}
        repeats: list[str] = []
        for i, arch in enumerate(archs):
            aid = arch.arch_id
            if aid in self.trials:
                slots[i] = self.trials[aid]
                repeats.append(aid)
            elif aid in first:
                continue  # filled from its first occurrence
            elif len(self.trials) + len(first) >= self.budget:
                continue  # over budget: never evaluated, never told
            else:
                first[aid] = i
        return slots, first, repeats

    def _evaluate_new(self, archs: Sequence[Architecture], first: dict[str, int]) -> list[Trial]:
        """The trials of the batch's new architectures, numbered in the order first asked."""
        start = len(self.trials)
        candidates = [Candidate(archs[i], start + k) for k, i in enumerate(first.values())]
        new = list(self.evaluate(candidates))
        if len(new) != len(candidates):
            raise ValueError(f"evaluate returned {len(new)} trial(s) for {len(candidates)} candidate(s)")
        return new

    def _why_stop(self, *, brought_new: bool) -> Stop | None:
        """After a told batch: whether the loop is done, and why."""
        requested = self.should_stop() if self.should_stop is not None else None
        if requested is not None:
            return Stop("requested", requested)
        if self._exhausted is not None and self._exhausted() and not brought_new:
            return Stop("exhausted", "the strategy has no more architectures (every one it derived is evaluated)")
        self.stale = 0 if brought_new else self.stale + 1
        if self.stale >= self.max_stale:
            return Stop("stale", f"the space is exhausted, or nearly: for {self.stale} batches the strategy found no "
                                 f"architecture it had not evaluated ({len(self.trials)} of the budget's "
                                 f"{self.budget} evaluated)")
        if self.max_ask_tell_s is not None and self.ask_tell_s > self.max_ask_tell_s:
            return Stop("ask_tell_time", f"the strategy's ask + tell passed {self.max_ask_tell_s:g} s")
        if len(self.trials) >= self.budget or (self.budget_spent is not None and self.budget_spent()):
            return Stop("budget", "the budget is spent")
        return None
