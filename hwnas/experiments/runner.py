"""The search loop: ask -> canonicalize -> cheap evaluators -> constraints -> expensive evaluators -> tell."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas.architecture import Architecture
from hwnas.errors import RunDirectoryError
from hwnas.experiments.config import Experiment
from hwnas.experiments.journal import Journal
from hwnas.experiments.rundir import JOURNAL
from hwnas.objectives import Trial, pareto_front

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
    objectives: list[Any] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)


def evaluators_fingerprint(experiment: Experiment) -> str:
    """One fingerprint for the whole evaluator pipeline: a cached trial is reused only under the same one."""
    text = "|".join(ev.fingerprint() for ev in experiment.evaluators)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Runner:
    """Runs one experiment in one run directory, resuming from its journal.

    Args:
        experiment: The built experiment.
        run_dir: Its run directory (config.yaml already written).
        progress: A :class:`hwnas.experiments.progress.SearchProgress` or None.
    """

    def __init__(self, *, experiment: Experiment, run_dir: Path, progress: Any = None) -> None:
        self.exp = experiment
        self.run_dir = run_dir
        self.journal = Journal(run_dir / JOURNAL)
        self.progress = progress
        self.cheap = [(n, e) for n, e in zip(experiment.evaluator_names, experiment.evaluators) if e.cheap]
        self.expensive = [(n, e) for n, e in zip(experiment.evaluator_names, experiment.evaluators) if not e.cheap]

    def run(self) -> RunResult:
        t0 = time.perf_counter()
        exp, budget = self.exp, self.exp.config.budget
        fingerprint = evaluators_fingerprint(exp)
        cached: dict[str, Trial] = {}
        for trial, fp in self.journal.read():
            if fp != fingerprint:
                raise RunDirectoryError(
                    f"{self.journal.path}: trial {trial.number} was evaluated under evaluator fingerprint {fp}, "
                    f"but this machine and config give {fingerprint} (a different CPU, onnxruntime or recipe); "
                    "start a new run instead of resuming this one"
                )
            cached.setdefault(trial.arch.arch_id, trial)
        log.info("journal: %d finished trial(s) to reuse", len(cached))

        strategy = exp.make_strategy()
        seen: dict[str, Trial] = {}
        next_number = 0
        evaluated = reused = stale = 0
        stopped: str | None = None
        if self.progress:
            self.progress.start(total=budget.trials, objectives=exp.objectives, constraints=exp.constraints)
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
                            log.warning("journal trial %d is replayed as number %d: the strategy did not ask the "
                                        "same sequence again", cached[aid].number, number)
                    else:
                        fresh.append((i, arch, number))
            for i, trial in self._evaluate(fresh, fingerprint):
                slots[i] = trial
                evaluated += 1
            for aid, i in in_batch.items():
                trial = slots[i]
                assert trial is not None
                seen[aid] = trial
                if self.progress:
                    self.progress.update(trial, list(seen.values()))
            next_number += len(in_batch)
            for i, arch in enumerate(archs):
                if slots[i] is None and arch.arch_id in seen:
                    slots[i] = seen[arch.arch_id]
            told = [t for t in slots if t is not None]
            if len(told) < len(slots):  # the budget ran out inside this batch
                break
            strategy.tell(told)
            stale = stale + 1 if not in_batch else 0
            if stale >= MAX_STALE_BATCHES:
                stopped = (f"the strategy proposed only already-evaluated architectures for {stale} batches "
                           f"({len(seen)} of {budget.trials} evaluated)")
                log.warning("stopping early: %s", stopped)
                break
        if self.progress:
            self.progress.stop()
        unused = set(cached) - set(seen)
        if unused:
            log.warning("%d journal trial(s) were not asked again on resume (is the strategy deterministic?); "
                        "they stay in the journal", len(unused))
        trials = sorted(seen.values(), key=lambda t: t.number)
        return RunResult(run_dir=self.run_dir, trials=trials, front=pareto_front(trials, exp.objectives),
                         evaluated=evaluated, reused=reused, stopped_early=stopped,
                         wall_s=time.perf_counter() - t0)

    def _evaluate(self, fresh: Sequence[tuple[int, Architecture, int]], fingerprint: str) -> list[tuple[int, Trial]]:
        """Cheap evaluators on the whole batch, constraints, then expensive ones one architecture at a time.

        Every finished trial is journaled before the next expensive evaluation starts.
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
            t = time.perf_counter()
            results = ev.evaluate([archs[k] for k in todo])
            share = (time.perf_counter() - t) / len(todo)
            for k, res in zip(todo, results):
                cost[k] += share
                self._merge(k, name, res, metrics, errors)
        out: list[tuple[int, Trial]] = []
        for k, (slot, arch, number) in enumerate(fresh):
            if errors[k] is None:
                violated = [c for c in self.exp.constraints if c.metric in metrics[k] and not c.is_satisfied(metrics[k])]
                if violated:
                    trial = Trial(number, arch, metrics[k], "infeasible", cost[k],
                                  error="violates " + ", ".join(c.describe() for c in violated))
                    self.journal.append(trial, fingerprint)
                    out.append((slot, trial))
                    continue
                for name, ev in self.expensive:
                    t = time.perf_counter()
                    res = ev.evaluate([arch])[0]
                    cost[k] += time.perf_counter() - t
                    self._merge(k, name, res, metrics, errors)
                    if errors[k] is not None:
                        break
            if errors[k] is not None:
                trial = Trial(number, arch, metrics[k], "failed", cost[k], error=errors[k])
                log.warning("trial %d (%s) failed: %s", number, arch.arch_id, errors[k])
            else:
                violated = [c for c in self.exp.constraints if not c.is_satisfied(metrics[k])]
                status = "infeasible" if violated else "ok"
                err = ("violates " + ", ".join(c.describe() for c in violated)) if violated else None
                trial = Trial(number, arch, metrics[k], status, cost[k], error=err)
            self.journal.append(trial, fingerprint)
            out.append((slot, trial))
        return out

    @staticmethod
    def _merge(k: int, name: str, res: Any, metrics: list[dict[str, float]], errors: list[str | None]) -> None:
        if isinstance(res, BaseException):
            errors[k] = f"{name}: {type(res).__name__}: {res}"
            return
        bad = [m for m, v in res.items() if not math.isfinite(float(v))]
        if bad:
            errors[k] = f"{name}: non-finite value for {', '.join(bad)}"
        metrics[k].update({m: float(v) for m, v in res.items()})
