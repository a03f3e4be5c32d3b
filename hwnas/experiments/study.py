"""A run as a Python object, the way an Optuna user handles a study: :func:`create_run`, :func:`load_run`, and
:class:`Study` with ``optimize()`` (called again to extend the budget), ``trials``, ``best_trials``,
``trials_dataframe()``, ``summary``, ``export()`` and ``report()``.

A study is its run directory: everything it knows is read from there (``config.yaml``, the journal
``trials.jsonl``, ``pareto.json``, ``summary.json``), so ``nas report``, ``nas export`` and ``nas run --resume``
work on a run started from Python, and :func:`load_run` picks up one started by ``nas run``.

**Extending a run.** ``optimize(n_trials=k)`` raises the budget by ``k`` (``optimize(budget=n)`` sets it), exactly
as ``nas run --resume RUN_DIR --set budget.trials=N`` does: config.yaml takes the new budget (``run.json`` keeps
the history under ``extensions``), the journal is reused and appended to, and nothing already evaluated is
evaluated again. What is guaranteed, precisely:

1. The journal's existing lines are never rewritten: its first N lines are byte for byte what they were.
2. No journaled trial is evaluated again: each one the strategy asks for again is taken from the journal (same
   architecture, same evaluator fingerprint), with its number, metrics and cost as recorded.
3. The extended run's trials (architectures and numbers, in order) are those of a fresh run of the same config
   with the larger budget, for a strategy that is deterministic given its seed and what it was told (every
   built-in is; ``hwnas.testing.check_strategy`` tests it), *provided the first N trials' metrics are the ones
   the fresh run would get*. That holds for deterministic evaluators (tables, counters, seeded training on the
   same machine); a measured latency differs from one measurement to the next, so a fresh run may choose
   differently after its first such difference, while the extended run goes on from the journal's values.
   It holds because the runner asks the strategy for full batches whatever the budget (the last batch's surplus
   is neither evaluated nor told; :class:`hwnas.strategies.loop.BatchLoop` ``full_batches``): the replay of the
   first N trials asks exactly what the first session asked, and goes on from there.
4. The same holds for a run stopped early (Ctrl-C, a kill, a callback's ``stop()``) and resumed, and for any
   number of extensions (48 -> 60 -> 72 gives the trials of a fresh 72-trial run).

Only ``budget.trials`` may change, and only grow: any other change (by ``--set``, or an edited config.yaml) is
refused naming the keys, and so is a smaller budget.

A multi-fidelity run's budget is its cost, ``multi_fidelity.budget``, and its trials follow from it: it is extended
by ``optimize(cost_budget=X)`` (``nas run --resume RUN_DIR --set multi_fidelity.budget=X``), with the same four
guarantees (the trials and every rung's trial of a fresh run with cost budget X); ``n_trials``/``budget`` are
refused for it, and so is any change of the schedule.
"""

from __future__ import annotations

import io
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import ConfigError, HwnasError, RunDirectoryError
from hwnas.experiments.api import ConfigSource, make_run_dir, prepare, run_experiment
from hwnas.experiments.callbacks import Callbacks
from hwnas.experiments.config import Experiment, ExperimentConfig
from hwnas.experiments.journal import read_trials
from hwnas.experiments.rundir import CONFIG, RunLock, write_config
from hwnas.experiments.runner import RunResult
from hwnas.extras import require
from hwnas.objectives import Objective, Trial, pareto_front

if TYPE_CHECKING:
    import pandas as pd

    from hwnas.experiments.export.card import ModelCard
    from hwnas.experiments.progress import RunProgress
    from hwnas.experiments.report.summary import RunSummary

log = logging.getLogger(__name__)

__all__ = ["Study", "create_run", "load_run"]


def create_run(config: ConfigSource, *, run_dir: str | Path | None = None, overrides: Sequence[str] = ()) -> Study:
    """Start a run: validate and build the experiment, check its inputs, and create its run directory with the
    resolved ``config.yaml`` (nothing is evaluated until :meth:`Study.optimize`).

    Args:
        config: A YAML file, a dict of the same keys, or an :class:`ExperimentConfig`. A dict's problems are all
            reported at once, each with its key path (``config: budget.trials: Input should be a valid integer``).
        run_dir: Where the run goes (default ``<output.root>/<name>``, numbered when that exists).
        overrides: ``key.sub=value`` strings, as ``nas run --set``.

    Raises:
        ConfigError: The config is wrong (every problem, located).
        RunDirectoryError: ``run_dir`` holds something else.
    """
    experiment, directory, _ = prepare(config, overrides=overrides, run_dir=run_dir)
    experiment.check_inputs()  # before the folder exists: a bad table leaves no folder behind
    make_run_dir(directory)
    with RunLock(directory):
        write_config(directory, experiment.resolved())
    log.info("new run directory %s", directory)
    return Study(directory)


def load_run(run_dir: str | Path) -> Study:
    """The :class:`Study` of an existing run directory (started by :func:`create_run` or ``nas run``)."""
    return Study(run_dir)


class Study:
    """A run directory as an object (see the module's docstring; made by :func:`create_run` or :func:`load_run`).

    Attributes:
        run_dir: The run directory.
        last_result: What the last :meth:`optimize` returned in this process (None before).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        if not (self.run_dir / CONFIG).is_file():
            raise RunDirectoryError(f"{self.run_dir} is not a run directory (no {CONFIG})")
        self._experiment: Experiment | None = None
        self._callbacks: Callbacks | None = None  # while optimize() runs
        self.last_result: RunResult | None = None

    def __repr__(self) -> str:
        return f"Study({str(self.run_dir)!r}, budget={self.budget}, trials={len(self.trials)})"

    # -- the experiment ------------------------------------------------------------------------------------

    @property
    def experiment(self) -> Experiment:
        """The experiment, rebuilt from the run's config.yaml (cached until the next :meth:`optimize`)."""
        if self._experiment is None:
            from hwnas.experiments.runs import load_run as load_experiment_run

            self._experiment = load_experiment_run(self.run_dir)[0]
        return self._experiment

    @property
    def config(self) -> ExperimentConfig:
        """The run's validated config (as config.yaml holds it)."""
        return self.experiment.config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def budget(self) -> int:
        """The run's budget: distinct architectures it evaluates (``budget.trials``)."""
        return self.config.budget.trials

    @property
    def cost_budget(self) -> float | None:
        """A multi-fidelity run's budget in cost (``multi_fidelity.budget``, in its ``unit``; :attr:`budget` follows
        from it), None for another run."""
        mf = self.config.multi_fidelity
        return None if mf is None else mf.budget

    @property
    def objectives(self) -> list[Objective]:
        return list(self.experiment.objectives)

    # -- searching -----------------------------------------------------------------------------------------

    def optimize(self, n_trials: int | None = None, *, budget: int | None = None, cost_budget: float | None = None,
                 callbacks: Sequence[object] = (),
                 batch_callbacks: Sequence[Callable[[Study, Sequence[Trial]], None]] = (),
                 show_progress: bool | None = None) -> RunResult:
        """Search until the budget is spent; called again, it continues (a stopped run) or extends (a larger budget).

        Args:
            n_trials: Raise the budget by this many trials first (as Optuna's ``optimize(n_trials=...)`` adds
                trials). Without it (and without ``budget``) the run goes to the budget it has.
            budget: Set the budget to this many trials first (at least the current one).
            cost_budget: A multi-fidelity run's budget is its cost (``multi_fidelity.budget``), and its trials follow
                from it: set the cost budget to this first (at least the current one), as ``nas run --resume RUN
                --set multi_fidelity.budget=X`` does. ``n_trials`` and ``budget`` are refused for such a run.
            callbacks: Called with ``(study, trial)`` after each trial evaluated now, or objects with ``on_start``
                / ``on_trial`` / ``on_batch`` / ``on_end`` (:mod:`hwnas.experiments.callbacks`); one may call
                ``study.stop(reason)`` to stop after the batch in progress. One that raises stops the run with a
                :class:`~hwnas.experiments.callbacks.CallbackError` naming it; calling ``optimize()`` again
                continues.
            batch_callbacks: Called with ``(study, trials)`` after each batch's new trials are journaled.
            show_progress: A progress display: rich's bar in a terminal, an HTML line in Jupyter. Default: shown
                when stderr is a terminal or in Jupyter.

        Returns:
            The session's :class:`RunResult` (every trial of the run, the front, what was evaluated now and what
            was reused, and the written summary).

        Raises:
            ConfigError: ``n_trials`` or ``budget`` not a positive integer, both given, or a smaller budget; a
                ``cost_budget`` for a run without ``multi_fidelity``, or ``n_trials``/``budget`` for one with it.
        """
        if self.cost_budget is not None or cost_budget is not None:
            overrides = self._cost_overrides(n_trials, budget, cost_budget)
        else:
            target = self._target_budget(n_trials, budget)
            overrides = [f"budget.trials={target}"] if target != self.budget else []
        hooks = Callbacks(callbacks, batch_callbacks=batch_callbacks, handle=self)
        self._callbacks = hooks
        try:
            result = run_experiment(resume=self.run_dir, overrides=overrides, progress=_progress(show_progress),
                                    callbacks=hooks)
        finally:
            self._callbacks = None
            self._experiment = None  # the budget may have changed
        self.last_result = result
        return result

    run = optimize

    def _target_budget(self, n_trials: int | None, budget: int | None) -> int:
        for label, value in (("n_trials", n_trials), ("budget", budget)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{label}: a positive number of trials, not {value!r}")
        if n_trials is not None and budget is not None:
            raise ConfigError("give n_trials (trials to add) or budget (the new total), not both")
        if n_trials is not None:
            return self.budget + n_trials
        if budget is not None:
            if budget < self.budget:
                raise ConfigError(f"budget: {budget} is smaller than the run's budget of {self.budget}; a run's "
                                  "budget may only grow")
            return budget
        return self.budget

    def _cost_overrides(self, n_trials: int | None, budget: int | None, cost_budget: float | None) -> list[str]:
        """The override that extends a multi-fidelity run to ``cost_budget`` (none when it is the current one)."""
        current = self.cost_budget
        if current is None:
            raise ConfigError(f"cost_budget: {self.name} has no multi_fidelity block; its budget is trials: "
                              "optimize(n_trials=k) or optimize(budget=n)")
        if n_trials is not None or budget is not None:
            raise ConfigError(f"{'n_trials' if n_trials is not None else 'budget'}: a multi-fidelity run's trials "
                              f"follow from its cost budget (multi_fidelity.budget = {current:g}: {self.budget} "
                              "trials); extend it with optimize(cost_budget=X)")
        if cost_budget is None:
            return []
        if (isinstance(cost_budget, bool) or not isinstance(cost_budget, (int, float))
                or not math.isfinite(cost_budget) or cost_budget <= 0):
            raise ConfigError(f"cost_budget: a positive number, not {cost_budget!r}")
        if cost_budget < current:
            raise ConfigError(f"cost_budget: {cost_budget:g} is smaller than the run's multi_fidelity.budget of "
                              f"{current:g}; a run's budget may only grow")
        return [f"multi_fidelity.budget={cost_budget!r}"] if cost_budget != current else []

    def stop(self, reason: str = "a callback asked to stop") -> None:
        """From a callback: stop the search after the batch in progress (the run is summarised as usual, and says
        it stopped early; ``optimize()`` again continues)."""
        if self._callbacks is None or self._callbacks.state is None:
            raise HwnasError("Study.stop() stops a search in progress: call it from a callback given to optimize()")
        self._callbacks.state.stop(reason)

    # -- what the run holds --------------------------------------------------------------------------------

    @property
    def trials(self) -> list[Trial]:
        """Every trial of the run, in trial-number order (frozen :class:`~hwnas.objectives.Trial` objects); during
        :meth:`optimize` (in a callback), those finished so far."""
        if self._callbacks is not None and self._callbacks.state is not None:
            return sorted(self._callbacks.state.trials, key=lambda t: t.number)
        return sorted(read_trials(self.run_dir), key=lambda t: t.number)

    @property
    def best_trials(self) -> list[Trial]:
        """The Pareto front of :attr:`trials`: the ok trials no other ok trial dominates, by the first objective."""
        return pareto_front(self.trials, self.objectives)

    front = best_trials

    @property
    def summary(self) -> RunSummary:
        """The run's typed summary (:class:`hwnas.experiments.report.summary.RunSummary`): counts, front,
        hypervolume, constraints, latency trust, and the search's facts once it finished."""
        from hwnas.experiments.report.summary import read_summary

        return read_summary(self.run_dir, self.experiment, read_trials(self.run_dir))

    def trials_dataframe(self) -> pd.DataFrame:
        """One row per trial (pandas; ``pip install "hwnas[pandas]"``).

        Columns: ``number``, ``arch_id``, ``status`` (ok, infeasible, failed), ``on_front`` (in
        :attr:`best_trials`), ``cost_s`` (seconds of evaluation), ``error``; then one column per metric, named as
        the metric (``top1``, ``latency_ms@pixel3``; NaN where a trial has none; a metric named like one of the
        columns before it, or starting ``gene.``, is ``metric.NAME``), and one per gene, ``gene.NAME`` (a gene
        holding a sequence gives ``gene.NAME.0``, ``gene.NAME.1``, ...).
        """
        pd_mod = require("pandas", "pandas", "Study.trials_dataframe()")
        trials = self.trials
        on_front = {t.number for t in pareto_front(trials, self.objectives)}
        fixed = ("number", "arch_id", "status", "on_front", "cost_s", "error")

        def column(metric: str) -> str:
            return f"metric.{metric}" if metric in fixed or metric.startswith(("gene.", "metric.")) else metric

        rows = []
        metrics: dict[str, None] = {}
        genes: dict[str, None] = {}
        for t in trials:
            metrics.update(dict.fromkeys(column(m) for m in t.metrics))
            flat = flat_genes(t)
            genes.update(dict.fromkeys(flat))
            rows.append({"number": t.number, "arch_id": t.arch.arch_id, "status": t.status,
                         "on_front": t.number in on_front, "cost_s": t.cost_s, "error": t.error,
                         **{column(m): float(v) for m, v in t.metrics.items()}, **flat})
        columns = [*fixed, *metrics, *sorted(genes)]
        frame = pd_mod.DataFrame(rows, columns=columns)
        for m in metrics:
            frame[m] = frame[m].astype(float)
        return frame

    # -- outputs -------------------------------------------------------------------------------------------

    def export(self, **options: Any) -> list[ModelCard]:
        """Export models of the run, as ``nas export RUN_DIR`` does (default: the Pareto front, every format this
        host can write, to ``RUN_DIR/models``); returns their model cards.

        ``options`` are :func:`hwnas.experiments.export.plan_export`'s: ``out``, ``formats`` (``"onnx"``),
        ``device``, ``top_k``, ``by``, ``archs``, ``opset``, ``force``, ``random_init`` (models without trained
        weights, e.g. of a table-priced search), ``train``, ``dynamic_batch``, ``simplify``, ``measure``, ...
        """
        from hwnas.experiments.export import plan_export

        return plan_export(self.run_dir, **options).run()

    def report(self, html: str | Path | bool = False, *, force: bool = False) -> str | Path:
        """The run's report: with ``html`` (True: ``RUN_DIR/report.html``, or a path) the self-contained page, as
        ``nas report --html`` writes it (returns its path); else the front table and the summary as text, as
        ``nas report`` prints them."""
        if html:
            from hwnas.experiments.report.html import write_html_report

            out = self.run_dir / "report.html" if html is True else Path(html)
            return write_html_report(self.run_dir, out, force=force)[0]
        from rich.console import Console

        from hwnas.experiments.report.front import front_table

        summary = self.summary
        buffer = io.StringIO()
        console = Console(file=buffer, width=120, color_system=None)
        console.print(front_table(list(summary.front), list(summary.objectives), title=f"Pareto front: {self.run_dir}"))
        counts, hv = summary.trials, summary.hypervolume
        console.print(f"{counts.total} trials: {counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} "
                      f"failed; front {len(summary.front)}" + (f"; hypervolume {hv:.4g}" if hv is not None else ""))
        if summary.stopped_early:
            console.print(f"stopped early: {summary.stopped_early}")
        return buffer.getvalue()


def flat_genes(trial: Trial) -> dict[str, float]:
    """A trial's genes as ``gene.NAME`` (ints) and ``gene.NAME.i`` (the items of a sequence gene) -> value."""
    out: dict[str, float] = {}
    for name, value in trial.arch.genes.items():
        if isinstance(value, tuple):
            out.update({f"gene.{name}.{i}": float(v) for i, v in enumerate(value)})
        else:
            out[f"gene.{name}"] = float(value)
    return out


def _progress(show: bool | None) -> RunProgress | None:
    """The progress display to hand the runner: rich's bar in a terminal, an HTML line in Jupyter, or None."""
    from hwnas.experiments.notebook import NotebookProgress, in_notebook

    notebook = in_notebook()
    if show is None:
        show = notebook or sys.stderr.isatty()
    if not show:
        return None
    if notebook:
        return NotebookProgress()
    from hwnas.experiments.progress import SearchProgress

    return SearchProgress()

