"""The search's live progress display: what its status line says after a run's trials, however they are batched."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from hwnas.architecture import Architecture
from hwnas.experiments.progress import SearchProgress
from hwnas.objectives import Objective, Trial, pareto_front


def _trials(n: int, seed: int) -> list[Trial]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        arch = Architecture("toy", {"i": i})
        top1, lat = float(rng.uniform(0.5, 0.95)), float(rng.uniform(1.0, 20.0))
        status = ("ok", "ok", "ok", "infeasible", "failed")[int(rng.integers(5))]
        metrics = {"top1": top1, "latency_ms": lat} if status != "failed" else {}
        if status == "ok" and i % 17 == 0:
            metrics["top1"] = float("nan")  # a non-finite value is no point of the front
        out.append(Trial(i, arch, metrics, status, error=None if status == "ok" else "x"))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("max_hz", [1e9, 1e-9])  # a refresh after every batch / only the first and stop()'s
def test_status_line_counts_the_best_and_the_front_as_pareto_front_does(max_hz):
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min")]
    trials = _trials(300, seed=3)
    progress = SearchProgress(Console(file=io.StringIO()), max_hz=max_hz)
    progress.start(total=len(trials), objectives=objectives, constraints=[])
    for i in range(0, len(trials), 7):
        progress.update(trials[i:i + 7])
    line = progress.status()
    progress_task = progress._progress.tasks[0]
    progress.stop()

    finite = [t for t in trials if t.status == "ok" and np.isfinite(t.metrics["top1"])]
    front = pareto_front(finite, objectives)
    best = max(t.metrics["top1"] for t in finite)
    infeasible = sum(t.status == "infeasible" for t in trials)
    failed = sum(t.status == "failed" for t in trials)
    assert line == f"best top1={best:.4g}  front {len(front)}  infeasible {infeasible}  failed {failed}"
    assert progress_task.completed == len(trials)  # stop() advanced the bar by what was still pending


def test_status_reads_the_buffer_once():
    objectives = [Objective("latency_ms", "min")]
    trials = [Trial(i, Architecture("toy", {"i": i}), {"latency_ms": 10.0 - i}) for i in range(5)]
    progress = SearchProgress(Console(file=io.StringIO()), max_hz=1e-9)
    progress.start(total=5, objectives=objectives, constraints=[])
    progress.update(trials[:1])  # the first update refreshes (nothing was shown yet)
    progress.update(trials[1:])  # kept for the next refresh
    assert progress.status() == progress.status() == "best latency_ms=6  front 1  infeasible 0"
    progress.stop()


def test_a_resumed_runs_replay_advances_the_bar_but_not_its_rate():
    """Batches replayed from the journal advance the bar and are said in the status; the bar's rate (and ETA)
    starts over at the first batch that is evaluated, and later batches advance it as before."""
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min")]
    trials = _trials(40, seed=5)
    progress = SearchProgress(Console(file=io.StringIO()), max_hz=1e9)
    progress.start(total=len(trials), objectives=objectives, constraints=[])
    for i in range(0, 20, 5):
        progress.update(trials[i:i + 5], replayed=True)
    task = progress._progress.tasks[0]
    assert task.completed == 20 and task.speed is None  # no speed samples: the replay says nothing of the rate
    assert progress.status().endswith("(20 from the journal)")
    progress.update(trials[20:30])
    progress.update(trials[30:35], replayed=True)  # once evaluating, a cached batch is an ordinary batch
    progress.update(trials[35:])
    assert task.completed == 40 and task.speed is not None
    progress.stop()
