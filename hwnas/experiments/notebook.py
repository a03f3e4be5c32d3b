"""The progress display of a search in Jupyter: one HTML line updated in place (IPython's display, no widgets).

In a terminal the rich bar (:class:`hwnas.experiments.progress.SearchProgress`) is the display; rich's live view
needs ``ipywidgets`` in a notebook, which this one does not: it redraws one output cell with
``IPython.display`` (always there inside Jupyter). :func:`in_notebook` says which one fits.
"""

from __future__ import annotations

import html
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from hwnas.objectives import Constraint, Objective, Trial

__all__ = ["NotebookProgress", "in_notebook", "render_progress"]


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell); imports nothing that is not loaded."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def render_progress(done: int, total: int, *, elapsed_s: float, best: str, front: int, failed: int) -> str:
    """One line of HTML: a progress bar, done/total, the best value so far, the front's size, elapsed time."""
    share = 0.0 if total <= 0 else min(done / total, 1.0)
    eta = f", ETA {elapsed_s * (1 - share) / share:.0f} s" if 0 < share < 1 else ""
    failed_text = f", {failed} failed" if failed else ""
    return (f'<div style="font-family:monospace"><progress value="{done}" max="{max(total, 1)}" '
            f'style="width:30em"></progress> {done}/{total} &nbsp; {html.escape(best)} &nbsp; front {front}'
            f"{failed_text} &nbsp; {elapsed_s:.0f} s{eta}</div>")


class NotebookProgress:
    """The runner's progress protocol (``start``, ``update``, ``stop``) drawn into a notebook cell.

    Args:
        max_hz: Most redraws per second.
        display: ``IPython.display.display`` (looked up on start when not given; tests hand in their own).
    """

    def __init__(self, *, max_hz: float = 4.0, display: Callable[..., object] | None = None) -> None:
        self.min_interval_s = 1.0 / max_hz
        self._display = display
        self._handle: Any = None
        self.html = ""

    def start(self, *, total: int, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
        if self._display is None:
            from IPython.display import display

            self._display = display
        self.total, self.objectives = total, list(objectives)
        self.done = self.failed = 0
        self.best: float | None = None
        self.front: list[Trial] = []
        self.t0 = self._last = time.perf_counter()
        self._handle = self._display(self._html_object(self._line()), display_id=True)

    def update(self, trials: Sequence[Trial], *, replayed: bool = False) -> None:
        from hwnas.objectives import pareto_front

        self.done += len(trials)
        first = self.objectives[0]
        for t in trials:
            self.failed += t.status == "failed"
            value = t.metrics.get(first.metric)
            if t.status == "ok" and value is not None and math.isfinite(value) and (
                    self.best is None or first.to_minimise(value) < first.to_minimise(self.best)):
                self.best = float(value)
        self.front = pareto_front([*self.front, *(t for t in trials if t.status == "ok")], self.objectives)
        now = time.perf_counter()
        if now - self._last >= self.min_interval_s:
            self._redraw(now)

    def _line(self) -> str:
        best = f"best {self.objectives[0].metric}={self.best:.4g}" if self.best is not None else ""
        return render_progress(self.done, self.total, elapsed_s=time.perf_counter() - self.t0, best=best,
                               front=len(self.front), failed=self.failed)

    def _html_object(self, text: str) -> object:
        self.html = text
        try:
            from IPython.display import HTML
        except ImportError:  # a display handed in by a test, outside IPython
            return text
        return HTML(text)

    def _redraw(self, now: float) -> None:
        if self._handle is not None:
            self._handle.update(self._html_object(self._line()))
        self._last = now

    def stop(self) -> None:
        self._redraw(time.perf_counter())
