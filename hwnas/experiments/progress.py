"""A live progress display for a search: evaluations done/total, best so far, front size, elapsed and ETA."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hwnas.objectives import Constraint, IncrementalFront, Objective, Trial

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


class RunProgress(Protocol):
    """What the runner reports a search's progress to: :class:`SearchProgress`, the notebook's
    :class:`~hwnas.experiments.notebook.NotebookProgress`, the sweep's ``TuneReport``."""

    def start(self, *, total: int, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
        """The search starts: ``total`` trials at most."""

    def update(self, trials: Sequence[Trial], *, replayed: bool = False) -> None:
        """A batch finished (``replayed``: taken whole from a resumed run's journal)."""

    def stop(self) -> None:
        """The search ended."""


def progress_bar(title: str, *, status: bool = False, console: Console | None = None) -> Progress:
    """hwnas's rich progress bar: title, bar, done/total, (a ``status`` field), elapsed, ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn(f"[bold]{title}"), BarColumn(), MofNCompleteColumn()]
    if status:
        columns.append(TextColumn("{task.fields[status]}"))
    columns += [TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    return Progress(*columns, console=console)


class SearchProgress:
    """Rich progress bar fed by the runner after every batch; the status line is redrawn at most ``max_hz``.

    Args:
        console: A ``rich.console.Console`` (stderr by default).
        max_hz: Most status recomputations per second.
    """

    def __init__(self, console: Console | None = None, *, max_hz: float = 8.0) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.min_interval_s = 1.0 / max_hz
        # Built here, with the command, so that starting the search only starts the display.
        self._progress: Progress = progress_bar("search", status=True, console=self.console)
        self._task: Any = None  # rich's TaskID once started

    def start(self, *, total: int, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
        self.objectives = list(objectives)
        self.front = IncrementalFront(len(self.objectives))
        self.best: float | None = None
        self.counts = {"ok": 0, "infeasible": 0, "failed": 0}
        self._buffer: list[Trial] = []  # reported, not yet folded into counts / best / front
        self._pending = 0  # reported, not yet advanced on the bar
        self._replayed = 0  # trials a resumed run took from its journal before it evaluated anything
        self._evaluating = False  # whether any reported batch held a fresh evaluation
        self._last = 0.0
        self._progress.start()
        self._task = self._progress.add_task("search", total=total, status="")

    def update(self, trials: Sequence[Trial], *, replayed: bool = False) -> None:
        """Account for finished trials (a batch). Cheap: they are kept until the display's next refresh (at most
        ``max_hz``), which folds everything since the last one into the counts, the best and the front at once.

        ``replayed``: the whole batch came from the journal of a resumed run. Until the first batch that is not,
        the bar is restarted at the replayed count after each, so its rate and ETA come from real evaluations
        only (a replay takes milliseconds; counted in, it would promise the rest of the run in seconds)."""
        self._buffer.extend(trials)
        self._pending += len(trials)
        if replayed and not self._evaluating:
            self._replayed += len(trials)  # before the first evaluation, the bar holds replayed trials only
            self._pending = 0
            self._progress.reset(self._task, completed=self._replayed, status=self.status())
            return
        self._evaluating = True
        now = time.perf_counter()
        if now - self._last >= self.min_interval_s:
            self._flush(now)

    def _account(self, trials: Sequence[Trial]) -> None:
        objectives = self.objectives
        counts = self.counts
        rows = []
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
            if t.status != "ok":
                continue
            values = [t.metrics.get(o.metric) for o in objectives]
            if any(v is None or not math.isfinite(v) for v in values):
                continue
            rows.append([o.to_minimise(float(v)) for o, v in zip(objectives, values)])  # type: ignore[arg-type]
        if rows:
            points = np.array(rows)
            self.front.add_many(points)
            i = int(np.argmin(points[:, 0]))
            if self.best is None or points[i, 0] < objectives[0].to_minimise(self.best):
                self.best = objectives[0].to_minimise(float(points[i, 0]))  # to_minimise is its own inverse

    def status(self) -> str:
        """The status line as it stands after everything reported so far (the buffer folded in)."""
        if self._buffer:
            self._account(self._buffer)
            self._buffer = []
        best = f"best {self.objectives[0].metric}={self.best:.4g}" if self.best is not None else ""
        line = f"{best}  front {len(self.front)}  infeasible {self.counts['infeasible']}"
        if self.counts["failed"]:
            line += f"  failed {self.counts['failed']}"
        if self._replayed:
            line += f"  ({self._replayed} from the journal)"
        return line

    def _flush(self, now: float) -> None:
        self._progress.update(self._task, advance=self._pending, status=self.status())
        self._pending = 0
        self._last = now

    def stop(self) -> None:
        if self._task is not None:
            self._flush(time.perf_counter())
            self._progress.stop()
            self._progress.remove_task(self._task)  # a second start() shows one bar again
            self._task = None
