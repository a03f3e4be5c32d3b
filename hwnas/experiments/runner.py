"""The search loop: ask -> canonicalize -> cheap evaluators -> constraints -> expensive evaluators -> tell."""

from __future__ import annotations

import gc
import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.architecture import Architecture
from hwnas.errors import EvaluationError, RunDirectoryError
from hwnas.evaluation import Observer
from hwnas.experiments.config import Experiment
from hwnas.experiments.executors import Task, evaluate_batch
from hwnas.experiments.journal import Journal
from hwnas.experiments.references import resolve_relative_constraints
from hwnas.experiments.rundir import JOURNAL
from hwnas.objectives import Trial, pareto_front
from hwnas.strategies.base import FiniteStrategy

if TYPE_CHECKING:
    from hwnas.experiments.report.summary import RunSummary

log = logging.getLogger(__name__)

#: Batches in a row that bring no new architecture before the run stops (the strategy has converged).
MAX_STALE_BATCHES = 50


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves."""

    run_dir: Path
    trials: list[Trial]
    front: list[Trial]
    evaluated: int = 0
    reused: int = 0
    stopped_early: str | None = None
    wall_s: float = 0.0
    setup_s: float = 0.0
    objectives: list[Any] = field(default_factory=list)
    constraints: list[Any] = field(default_factory=list)
    summary: RunSummary | None = None  # the run's summary, once written (hwnas.experiments.api.finish) or read

    @property
    def outputs(self) -> dict[str, Any]:
        """The run's summary as summary.json holds it (empty before the run finished)."""
        return self.summary.to_dict() if self.summary is not None else {}


def _error_kind(error: str) -> str:
    """An error message with what changes from trial to trial masked: arch ids, quoted names, numbers."""
    return re.sub(r"[0-9a-f]{16}|'[^']*'|\"[^\"]*\"|-?\d+(\.\d+)?(e-?\d+)?", "#", error)


def evaluators_fingerprint(experiment: Experiment) -> str:
    """One fingerprint for the whole evaluator pipeline: a cached trial is reused only under the same one."""
    text = "|".join(ev.fingerprint() for ev in experiment.evaluators)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Runner:
    """Runs one experiment in one run directory, resuming from its journal.

    Per batch: ask -> canonicalize -> journal cache -> cheap evaluators (batched, here) -> constraints ->
    expensive evaluators through the executor (results taken as they finish) -> every trial journaled
    (written as it finishes, fsynced once per batch) -> ``tell`` in the order asked.

    Args:
        experiment: The built experiment.
        run_dir: Its run directory (config.yaml already written).
        progress: A :class:`hwnas.experiments.progress.SearchProgress`, or any object with its ``start(total=,
            objectives=, constraints=)``, ``update(trials, *, replayed)`` and ``stop()`` (the sweep's ``TuneReport``
            is one), or None.
        executor: Runs the expensive evaluations (default: the experiment's ``executor`` section).
    """

    def __init__(self, *, experiment: Experiment, run_dir: Path, progress: Any = None, executor: Any = None,
                 checked_s: float | None = None) -> None:
        self.exp = experiment
        self.checked_s = checked_s  # set: the inputs were checked already (taking this long), before run_dir existed
        self.run_dir = run_dir
        self.journal = Journal(run_dir / JOURNAL)
        self.progress = progress
        self.executor = executor
        self.cheap = [(n, e) for n, e in zip(experiment.evaluator_names, experiment.evaluators) if e.cheap]
        self.has_expensive = any(not e.cheap for e in experiment.evaluators)
        self.observers = [e for _, e in self.cheap if isinstance(e, Observer)]

    def run(self) -> RunResult:
        """Search until the budget is spent (or the strategy stops proposing new architectures).

        ``RunResult.setup_s`` is the one-off preparation of the space and the evaluators (tables read and
        hashed, models loaded);
        ``wall_s`` is the search loop after it: journal replay, ask, evaluate, journal, tell, final front.
        """
        t_setup = time.perf_counter() - (self.checked_s or 0.0)
        exp, budget = self.exp, self.exp.config.budget
        if self.checked_s is None:
            exp.check_inputs()
        fingerprint = evaluators_fingerprint(exp)  # hashes table files: part of the setup
        t0 = time.perf_counter()
        setup_s = t0 - t_setup
        cached: dict[str, Trial] = {}
        for trial, fp in self.journal.read(repair=True):
            if fp != fingerprint:
                raise RunDirectoryError(
                    f"{self.journal.path}: trial {trial.number} was evaluated under evaluator fingerprint {fp}, "
                    f"but this machine and config give {fingerprint} (a different CPU, onnxruntime or recipe); "
                    "start a new run instead of resuming this one"
                )
            cached.setdefault(trial.arch.arch_id, trial)
        log.info("journal: %d finished trial(s) to reuse", len(cached))
        # relative constraints become absolute before anything judges a trial (stored, so a resume keeps them)
        resolve_relative_constraints(exp, self.run_dir, fingerprint, journaled=len(cached))
        note = exp.budget_note()
        if note:
            log.warning("%s", note)

        strategy = exp.make_strategy(self.run_dir)
        executor = self.executor if self.executor is not None else exp.make_executor()
        finite = isinstance(strategy, FiniteStrategy)  # a protocol check costs microseconds: once, not per batch
        seen: dict[str, Trial] = {}
        next_number = 0
        evaluated = reused = stale = streak = 0
        streak_key: str | None = None
        stopped: str | None = None
        if self.progress:
            self.progress.start(total=budget.trials, objectives=exp.objectives, constraints=exp.constraints)
        executor.start(exp.pipeline())
        # What was allocated before the search (torch, tables, the journal's trials) lives as long as the run:
        # frozen, the cyclic collector does not traverse it again at every collection inside the loop (with
        # torch imported that was 40 % of a microsecond-evaluator loop). Unfrozen when the loop ends.
        gc.freeze()
        try:
            with self.journal.writer(fingerprint) as writer:
                while len(seen) < budget.trials:
                    asked = strategy.ask(min(budget.batch_size, budget.trials - len(seen)))
                    archs = [exp.space.canonicalize(a) for a in asked]
                    slots: list[Trial | None] = [None] * len(archs)
                    fresh: list[tuple[int, Architecture, int]] = []
                    in_batch: dict[str, int] = {}
                    for i, arch in enumerate(archs):
                        aid = arch.arch_id
                        if aid in seen:
                            slots[i] = seen[aid]
                        elif aid in in_batch:
                            continue  # filled from its first occurrence below
                        elif len(seen) + len(in_batch) >= budget.trials:
                            continue  # over budget: never evaluated, never told
                        else:
                            number = next_number + len(in_batch)  # numbers follow the order of first asks
                            in_batch[aid] = i
                            if aid in cached:
                                slots[i] = cached[aid]
                                reused += 1
                                if cached[aid].number != number:
                                    log.warning("journal trial %d is replayed as number %d: the strategy did not "
                                                "ask the same sequence again", cached[aid].number, number)
                            else:
                                fresh.append((i, arch, number))
                    new_trials = self._evaluate(fresh, executor, writer)
                    for i, trial in new_trials:
                        slots[i] = trial
                        evaluated += 1
                    writer.sync()  # every trial of the batch is written before the strategy hears of it
                    batch_trials = []
                    for aid, i in in_batch.items():
                        done = slots[i]
                        assert done is not None
                        seen[aid] = done
                        batch_trials.append(done)
                    if self.progress:
                        self.progress.update(batch_trials, replayed=bool(batch_trials) and not new_trials)
                    streak, streak_key = self._failure_streak(
                        sorted((t for _, t in new_trials), key=lambda t: t.number), streak, streak_key)
                    next_number += len(in_batch)
                    for i, arch in enumerate(archs):
                        if slots[i] is None and arch.arch_id in seen:
                            slots[i] = seen[arch.arch_id]
                    told = [t for t in slots if t is not None]
                    if len(told) < len(slots):  # the budget ran out inside this batch
                        break
                    strategy.tell(told)
                    for ev in self.observers:
                        ev.observe(sorted(batch_trials, key=lambda t: t.number))
                    if finite and strategy.exhausted() and not in_batch:
                        stopped = "the strategy has no more architectures (every one it derived is evaluated)"
                        log.info("stopping: %s", stopped)
                        break
                    stale = stale + 1 if not in_batch else 0
                    if stale >= MAX_STALE_BATCHES:
                        stopped = (f"the space is exhausted, or nearly: for {stale} batches the strategy found no "
                                   f"architecture it had not evaluated ({len(seen)} of the budget's {budget.trials} "
                                   "evaluated)")
                        log.warning("stopping early: %s", stopped)
                        break
        finally:
            gc.unfreeze()
            executor.close()
            if self.progress:
                self.progress.stop()
        unused = set(cached) - set(seen)
        if unused:
            log.warning("%d journal trial(s) were not asked again on resume (is the strategy deterministic?); "
                        "they stay in the journal", len(unused))
        trials = sorted(seen.values(), key=lambda t: t.number)
        return RunResult(run_dir=self.run_dir, trials=trials, front=pareto_front(trials, exp.objectives),
                         evaluated=evaluated, reused=reused, stopped_early=stopped,
                         wall_s=time.perf_counter() - t0, setup_s=setup_s)

    def _failure_streak(self, trials: Sequence[Trial], streak: int, key: str | None) -> tuple[int, str | None]:
        """Count fresh trials failing in a row with the same error (ids, names and numbers aside); past
        ``budget.max_failures_in_a_row`` the run stops with that error instead of failing trial after trial."""
        limit = self.exp.config.budget.max_failures_in_a_row
        for t in trials:
            if t.status != "failed":
                streak, key = 0, None
                continue
            k = _error_kind(t.error or "")
            streak, key = (streak + 1, key) if k == key else (1, k)
            if limit and streak >= limit:
                raise EvaluationError(f"the last {streak} trials all failed the same way, stopping the run (they "
                                      f"are in the journal; fix the cause and start a new run): {t.error}")
        return streak, key

    def _evaluate(self, fresh: Sequence[tuple[int, Architecture, int]], executor: Any,
                  writer: Any) -> list[tuple[int, Trial]]:
        """Cheap evaluators on the whole batch here, constraints, then the expensive ones through the executor.

        Each trial is written to the journal as soon as it is finished (out of order is fine: trial numbers
        were fixed at ask time).
        """
        if not fresh:
            return []
        archs = [a for _, a, _ in fresh]
        metrics: list[dict[str, float]] = [{} for _ in archs]
        errors: list[str | None] = [None] * len(archs)
        cost = [0.0] * len(archs)
        for name, ev in self.cheap:
            todo = [k for k in range(len(archs)) if errors[k] is None]
            if not todo:
                break
            # one call for the batch; an evaluator that raises, or answers for the wrong number of architectures,
            # is called again one architecture at a time, so that only those it fails on fail (and the run goes on)
            for k, (m, error, share) in zip(todo, evaluate_batch(((name, ev),), [archs[k] for k in todo])):
                metrics[k].update(m)
                errors[k] = error
                cost[k] += share
        out: list[tuple[int, Trial]] = []

        def finish(k: int, *, early: bool = False) -> None:
            slot, arch, number = fresh[k]
            if errors[k] is not None:
                trial = Trial(number, arch, metrics[k], "failed", cost[k], error=errors[k])
                log.warning("trial %d (%s) failed: %s", number, arch.arch_id, errors[k])
            else:
                violated = [c for c in self.exp.constraints
                            if (c.metric in metrics[k] or not early) and not c.is_satisfied(metrics[k])]
                err = ("violates " + ", ".join(c.describe() for c in violated)) if violated else None
                trial = Trial(number, arch, metrics[k], "infeasible" if violated else "ok", cost[k], error=err)
            writer.append(trial)  # flushed now if it was costly, else with the batch by writer.sync()
            out.append((slot, trial))

        tasks = []
        for k in range(len(archs)):
            if errors[k] is None and not self.has_expensive:
                finish(k)
            elif errors[k] is None and all(c.metric not in metrics[k] or c.is_satisfied(metrics[k])
                                           for c in self.exp.constraints):
                tasks.append(Task(k, archs[k]))
            else:
                finish(k, early=True)  # failed in a cheap evaluator, or infeasible: never sent on
        if tasks:
            executor.submit(tasks)
            for outcome in executor.as_completed():
                k = outcome.key
                metrics[k].update(outcome.metrics)
                errors[k] = outcome.error
                cost[k] += outcome.cost_s
                finish(k)
        return out
