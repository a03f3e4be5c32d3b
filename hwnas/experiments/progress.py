"""A live progress display for a search: evaluations done/total, best so far, front size, elapsed and ETA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hwnas.objectives import Constraint, Objective, Trial, pareto_front


class SearchProgress:
    """Rich progress bar fed by the runner after every finished trial.

    Args:
        console: A ``rich.console.Console`` (stderr by default).
    """

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._progress: Any = None
        self._task: Any = None

    def start(self, *, total: int, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.objectives = list(objectives)
        self._progress = Progress(
            TextColumn("[bold]search"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
        )
        self._progress.start()
        self._task = self._progress.add_task("search", total=total, status="")

    def update(self, trial: Trial, trials: list[Trial]) -> None:
        first = self.objectives[0]
        ok = [t for t in trials if t.status == "ok" and first.metric in t.metrics]
        best = ""
        if ok:
            pick = min(ok, key=lambda t: first.to_minimise(t.metrics[first.metric]))
            best = f"best {first.metric}={pick.metrics[first.metric]:.4g}"
        n_inf = sum(t.status == "infeasible" for t in trials)
        n_fail = sum(t.status == "failed" for t in trials)
        front = len(pareto_front(trials, self.objectives))
        status = f"{best}  front {front}  infeasible {n_inf}" + (f"  failed {n_fail}" if n_fail else "")
        self._progress.update(self._task, advance=1, status=status)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
