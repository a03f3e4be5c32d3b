"""A run: journal replay, then the batch loop (:class:`~hwnas.strategies.loop.BatchLoop`: ask -> canonicalize ->
dedupe -> evaluate -> tell) with the run's evaluation: journal cache -> cheap evaluators -> constraints -> expensive
evaluators -> journal."""

from __future__ import annotations

import gc
import hashlib
import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.architecture import Architecture
from hwnas.errors import EvaluationError, RunDirectoryError
from hwnas.evaluation import Observer
from hwnas.experiments.callbacks import Callbacks, RunState
from hwnas.experiments.config import Experiment
from hwnas.experiments.executors import Task, evaluate_batch
from hwnas.experiments.journal import Journal
from hwnas.experiments.references import resolve_relative_constraints
from hwnas.experiments.rundir import JOURNAL
from hwnas.objectives import Constraint, Objective, Trial, pareto_front, promotion_order
from hwnas.strategies.loop import Batch, BatchLoop, Candidate, Stop

if TYPE_CHECKING:
    from hwnas.experiments.executors import Executor
    from hwnas.experiments.journal import JournalWriter
    from hwnas.experiments.progress import RunProgress
    from hwnas.experiments.report.summary import RunSummary

log = logging.getLogger(__name__)


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
    objectives: list[Objective] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    summary: RunSummary | None = None  # the run's summary, once written (hwnas.experiments.api.finish) or read

    @property
    def outputs(self) -> dict[str, object]:
        """The run's summary as summary.json holds it (empty before the run finished)."""
        return self.summary.to_dict() if self.summary is not None else {}


def _error_kind(error: str) -> str:
    """An error message with what changes from trial to trial masked: arch ids, quoted names, numbers."""
    return re.sub(r"[0-9a-f]{16}|'[^']*'|\"[^\"]*\"|-?\d+(\.\d+)?(e-?\d+)?", "#", error)


def evaluators_fingerprint(experiment: Experiment) -> str:
    """One fingerprint for the whole evaluator pipeline: a cached trial is reused only under the same one."""
    text = "|".join(ev.fingerprint() for ev in experiment.evaluators)
    if experiment.rung_evaluators:  # a multi-fidelity run: each rung's evaluator too (a rung is one fidelity)
        text += "|rungs:" + "|".join(ev.fingerprint() for ev, _ in experiment.rung_evaluators)
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
        callbacks: The user's callbacks (:mod:`hwnas.experiments.callbacks`): per trial, per batch, and a rule to
            stop; None for none.

    The loop asks full batches (``BatchLoop(full_batches=True)``): the sequence of asks does not depend on the
    budget, so a run resumed with a larger budget replays exactly what it asked before and goes on as a run
    started with that budget would have.
    """

    def __init__(self, *, experiment: Experiment, run_dir: Path, progress: RunProgress | None = None,
                 executor: Executor | None = None,
                 checked_s: float | None = None, callbacks: Callbacks | None = None) -> None:
        self.exp = experiment
        self.checked_s = checked_s  # set: the inputs were checked already (taking this long), before run_dir existed
        self.run_dir = run_dir
        self.journal = Journal(run_dir / JOURNAL)
        self.progress = progress
        self.executor = executor
        self.observers = [e for e in experiment.evaluators if e.cheap and isinstance(e, Observer)]
        self.callbacks = callbacks if callbacks is not None and not callbacks.empty else None

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
        cached, rung_cached = self._journaled_trials(fingerprint)
        # relative constraints become absolute before anything judges a trial (stored, so a resume keeps them)
        resolve_relative_constraints(exp, self.run_dir, fingerprint, journaled=len(cached))
        note = exp.budget_note()
        if note:
            log.warning("%s", note)

        strategy = exp.make_strategy(self.run_dir)
        executor = self.executor if self.executor is not None else exp.make_executor()
        if self.callbacks is not None:
            self.callbacks.begin(RunState(self.run_dir, budget.trials, list(exp.objectives),
                                          list(exp.constraints)))
        if self.progress:
            self.progress.start(total=budget.trials, objectives=exp.objectives, constraints=exp.constraints)
        executor.start(exp.pipeline())
        # What was allocated before the search (torch, tables, the journal's trials) lives as long as the run:
        # frozen, the cyclic collector does not traverse it again at every collection inside the loop (with
        # torch imported that was 40 % of a microsecond-evaluator loop). Unfrozen when the loop ends.
        gc.freeze()
        try:
            with self.journal.writer(fingerprint) as writer:
                evaluation = _BatchEvaluation(exp, cached, executor, writer, self.progress, self.observers,
                                              self.callbacks, rung_cached=rung_cached)
                loop = BatchLoop(strategy, exp.space, evaluation, budget=budget.trials, batch_size=budget.batch_size,
                                 on_told=evaluation.observe, full_batches=True,
                                 should_stop=self.callbacks.requested_stop if self.callbacks is not None else None,
                                 budget_spent=evaluation.cost_spent if exp.config.multi_fidelity else None)
                stopped = _stopped_early(loop.run())
        finally:
            gc.unfreeze()
            executor.close()
            if self.progress:
                self.progress.stop()
        unused = set(cached) - set(loop.trials)
        if unused:
            log.warning("%d journal trial(s) were not asked again on resume (is the strategy deterministic?); "
                        "they stay in the journal", len(unused))
        trials = sorted([*loop.trials.values(), *evaluation.higher_rungs],
                        key=lambda t: (t.number, t.rung or 0))
        return RunResult(run_dir=self.run_dir, trials=trials, front=pareto_front(trials, exp.objectives),
                         evaluated=evaluation.evaluated, reused=evaluation.reused, stopped_early=stopped,
                         wall_s=time.perf_counter() - t0, setup_s=setup_s)

    def _journaled_trials(self, fingerprint: str) -> tuple[dict[str, Trial], dict[tuple[str, int], Trial]]:
        """(arch id -> the finished trial the journal holds for it (the first; in a multi-fidelity run, at the first
        rung), (arch id, rung) -> the trial of a higher rung), to reuse on resume.

        Raises:
            RunDirectoryError: A trial was evaluated under another evaluator fingerprint.
        """
        cached: dict[str, Trial] = {}
        rung_cached: dict[tuple[str, int], Trial] = {}
        for trial, fp in self.journal.read(repair=True):
            if fp != fingerprint:
                raise RunDirectoryError(
                    f"{self.journal.path}: trial {trial.number} was evaluated under evaluator fingerprint {fp}, "
                    f"but this machine and config give {fingerprint} (a different CPU, onnxruntime or recipe); "
                    "start a new run instead of resuming this one"
                )
            if trial.rung:
                rung_cached.setdefault((trial.arch.arch_id, trial.rung), trial)
            else:
                cached.setdefault(trial.arch.arch_id, trial)
        log.info("journal: %d finished trial(s) to reuse", len(cached) + len(rung_cached))
        return cached, rung_cached


def _stopped_early(stop: Stop) -> str | None:
    """Why the run stopped before its budget (logged), or None."""
    if stop.reason == "exhausted":
        log.info("stopping: %s", stop.message)
    elif stop.reason in ("stale", "requested"):
        log.warning("stopping early: %s", stop.message)
    return stop.message if stop.early else None


class _BatchEvaluation:
    """The runner's evaluation of a batch's new architectures, for :class:`BatchLoop`: a trial the journal holds
    is reused; the others go through the cheap evaluators (batched, here), the constraints and the expensive
    evaluators through the executor (results taken as they finish), each journaled as it finishes and the
    journal synced once per batch, before the strategy hears of any. Then progress, and the failure streak.

    Args:
        experiment: The built experiment.
        cached: Arch id -> the journal's trial (a resumed run).
        executor: Runs the expensive evaluations (started).
        writer: The journal's writer.
        progress: As :class:`Runner`'s, or None.
        observers: Cheap evaluators that learn from finished trials (told each batch after the strategy).
        callbacks: The user's callbacks: each fresh trial once journaled, each batch's fresh trials once synced.
    """

    def __init__(self, experiment: Experiment, cached: dict[str, Trial], executor: Executor,
                 writer: JournalWriter, progress: RunProgress | None, observers: Sequence[Observer],
                 callbacks: Callbacks | None = None, *,
                 rung_cached: dict[tuple[str, int], Trial] | None = None) -> None:
        self.exp, self.cached, self.executor, self.writer = experiment, cached, executor, writer
        self.progress, self.observers, self.callbacks = progress, observers, callbacks
        self.mf = experiment.config.multi_fidelity if experiment.rung_evaluators else None
        if self.mf is not None:  # the first rung: the schedule's evaluator at its first fidelity
            self.cheap = experiment.stage_of(0)
            self.has_expensive = any(not e.cheap for i, e in enumerate(experiment.evaluators)
                                     if i != experiment.fidelity_index) or not experiment.rung_evaluators[0][0].cheap
        else:
            self.cheap = [(n, e) for n, e in zip(experiment.evaluator_names, experiment.evaluators) if e.cheap]
            self.has_expensive = any(not e.cheap for e in experiment.evaluators)
        self.rung_cached = rung_cached or {}
        self.higher_rungs: list[Trial] = []  # every trial above the first rung, in the order made or replayed
        self.spent = 0.0  # the schedule's cost of every rung evaluation so far (replayed ones included)
        self.evaluated = self.reused = 0
        self.streak = 0
        self.streak_key: str | None = None

    def __call__(self, candidates: Sequence[Candidate]) -> list[Trial]:
        """One trial per candidate, in order: reused from the journal or evaluated now."""
        slots: list[Trial | None] = [None] * len(candidates)
        fresh: list[tuple[int, Architecture, int]] = []
        for k, c in enumerate(candidates):
            hit = self.cached.get(c.arch.arch_id)
            if hit is None:
                fresh.append((k, c.arch, c.number))
                continue
            slots[k] = hit
            self.reused += 1
            if hit.number != c.number:
                log.warning("journal trial %d is replayed as number %d: the strategy did not ask the same sequence "
                            "again", hit.number, c.number)
        new_trials = self._evaluate(fresh)
        for k, trial in new_trials:
            slots[k] = trial
        self.evaluated += len(new_trials)
        trials = [t for t in slots if t is not None]
        assert len(trials) == len(slots)
        if self.mf is not None:
            self._climb(trials)
        self.writer.sync()  # every trial of the batch is written before the strategy hears of it
        if self.progress:
            self.progress.update(trials, replayed=bool(trials) and not new_trials)
        if self.callbacks is not None and self.callbacks.state is not None:
            fresh_numbers = {t.number for _, t in new_trials}
            self.callbacks.state.trials.extend(t for t in trials if t.number not in fresh_numbers)  # replayed
            self.callbacks.batch([t for _, t in new_trials])
        self._count_failures(sorted((t for _, t in new_trials), key=lambda t: t.number))
        return trials

    def observe(self, batch: Batch) -> None:
        """The observers learn from the batch's trials, in trial order (after the strategy was told)."""
        for ev in self.observers:
            ev.observe(sorted(batch.new, key=lambda t: t.number))

    def _rung(self, rung: int) -> dict[str, Any]:
        """A trial's rung fields (none outside a multi-fidelity run)."""
        if self.mf is None:
            return {}
        return {"rung": rung, "rungs": len(self.mf.rungs), "rung_cost": self.mf.rungs[rung].cost}

    def cost_spent(self) -> bool:
        """Whether the cost budget cannot pay for another full bracket (the loop stops then)."""
        assert self.mf is not None
        return self.spent + self.mf.bracket_cost(self.exp.config.budget.batch_size) > self.mf.budget + 1e-9

    def _climb(self, bracket: list[Trial]) -> None:
        """Successive halving over one bracket (the batch's new candidates, at the first rung): at each rung the
        best fraction ``promote`` of those evaluated there (:func:`~hwnas.objectives.promotion_order`; only
        feasible ones go on) is evaluated at the next, or its journaled trial reused."""
        assert self.mf is not None
        mf = self.mf
        self.spent += mf.rungs[0].cost * len(bracket)
        current = bracket
        for r in range(1, len(mf.rungs)):
            k = max(1, math.ceil(len(current) * mf.promote - 1e-9))
            chosen = [t for t in promotion_order(current, self.exp.objectives, self.exp.constraints)[:k]
                      if t.status == "ok"]
            if not chosen:
                return
            reached: list[Trial] = []
            fresh: list[Trial] = []
            for t in chosen:
                hit = self.rung_cached.get((t.arch.arch_id, r))
                if hit is None:
                    fresh.append(t)
                else:
                    reached.append(hit)
                    self.reused += 1
            reached += self._evaluate_rung(r, fresh)
            self.evaluated += len(fresh)
            self.spent += mf.rungs[r].cost * len(reached)
            reached.sort(key=lambda t: t.number)
            self.higher_rungs.extend(reached)
            current = reached

    def _evaluate_rung(self, rung: int, below: Sequence[Trial]) -> list[Trial]:
        """Trials of ``below`` (trials of rung ``rung - 1``) evaluated again by the schedule's evaluator at rung
        ``rung`` (in the driver when it is cheap, else through the executor): its metrics replace theirs, the
        others are kept; the constraints are checked again. Each journaled as it finishes."""
        if not below:
            return []
        index = self.exp.fidelity_index
        assert index is not None
        name = self.exp.evaluator_names[index]
        ev = self.exp.rung_evaluators[rung][0]
        provided = set(self.exp.evaluators[index].provides)
        out: list[Trial] = []

        def finish(t: Trial, got: dict[str, float], error: str | None, cost_s: float) -> None:
            metrics = {m: v for m, v in t.metrics.items() if m not in provided}
            metrics.update(got)
            fields = self._rung(rung)
            if error is not None:
                trial = Trial(t.number, t.arch, metrics, "failed", cost_s, error=error, **fields)
                log.warning("trial %d (%s) failed at rung %d: %s", t.number, t.arch.arch_id, rung, error)
            else:
                violated = [c for c in self.exp.constraints if not c.is_satisfied(metrics)]
                err = ("violates " + ", ".join(c.describe() for c in violated)) if violated else None
                trial = Trial(t.number, t.arch, metrics, "infeasible" if violated else "ok", cost_s, error=err,
                              **fields)
            self.writer.append(trial)
            out.append(trial)
            if self.callbacks is not None and self.callbacks.state is not None:
                self.callbacks.state.evaluated += 1
                self.callbacks.trial(trial)

        if ev.cheap:
            for t, (m, error, share) in zip(below, evaluate_batch(((name, ev),), [t.arch for t in below])):
                finish(t, m, error, share)
            return out
        self.executor.submit([Task(k, t.arch, stage=rung) for k, t in enumerate(below)])
        for outcome in self.executor.as_completed():
            finish(below[outcome.key], outcome.metrics, outcome.error, outcome.cost_s)
        return out

    def _count_failures(self, trials: Sequence[Trial]) -> None:
        """Count fresh trials failing in a row with the same error (ids, names and numbers aside); past
        ``budget.max_failures_in_a_row`` the run stops with that error instead of failing trial after trial."""
        limit = self.exp.config.budget.max_failures_in_a_row
        for t in trials:
            if t.status != "failed":
                self.streak, self.streak_key = 0, None
                continue
            k = _error_kind(t.error or "")
            self.streak, self.streak_key = (self.streak + 1, self.streak_key) if k == self.streak_key else (1, k)
            if limit and self.streak >= limit:
                raise EvaluationError(f"the last {self.streak} trials all failed the same way, stopping the run "
                                      f"(they are in the journal; fix the cause and start a new run): {t.error}")

    def _evaluate(self, fresh: Sequence[tuple[int, Architecture, int]]) -> list[tuple[int, Trial]]:
        """Cheap evaluators on the whole batch here, constraints, then the expensive ones through the executor.

        Each trial is written to the journal as soon as it is finished (out of order is fine: trial numbers
        were fixed at ask time).
        """
        if not fresh:
            return []
        archs = [a for _, a, _ in fresh]
        metrics, errors, cost = self._evaluate_cheap(archs)
        out: list[tuple[int, Trial]] = []

        def finish(k: int, *, early: bool = False) -> None:
            slot, arch, number = fresh[k]
            if errors[k] is not None:
                trial = Trial(number, arch, metrics[k], "failed", cost[k], error=errors[k], **self._rung(0))
                log.warning("trial %d (%s) failed: %s", number, arch.arch_id, errors[k])
            else:
                violated = [c for c in self.exp.constraints
                            if (c.metric in metrics[k] or not early) and not c.is_satisfied(metrics[k])]
                err = ("violates " + ", ".join(c.describe() for c in violated)) if violated else None
                trial = Trial(number, arch, metrics[k], "infeasible" if violated else "ok", cost[k], error=err,
                              **self._rung(0))
            self.writer.append(trial)  # flushed now if it was costly, else with the batch by writer.sync()
            out.append((slot, trial))
            if self.callbacks is not None and self.callbacks.state is not None:
                self.callbacks.state.trials.append(trial)
                self.callbacks.state.evaluated += 1
                self.callbacks.trial(trial)  # raises CallbackError: the with-block closes (syncs) the journal

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
            self.executor.submit(tasks)
            for outcome in self.executor.as_completed():
                k = outcome.key
                metrics[k].update(outcome.metrics)
                errors[k] = outcome.error
                cost[k] += outcome.cost_s
                finish(k)
        return out

    def _evaluate_cheap(self, archs: Sequence[Architecture]
                        ) -> tuple[list[dict[str, float]], list[str | None], list[float]]:
        """(metrics, error, cost) of each architecture after the cheap evaluators; an architecture is not passed
        to the evaluators after the one it failed in."""
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
        return metrics, errors, cost
