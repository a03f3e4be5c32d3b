"""pareto.png: the plotted data, drawn here or by a drawer process started with the run (the same PNG either way);
a drawer that fails in any way leaves the drawing to the run's process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.experiments.report.front import FrontDrawer, FrontPlot, draw_front, front_plot, plot_front
from hwnas.objectives import Constraint, Objective, Trial

PNG = b"\x89PNG\r\n\x1a\n"


def _trials() -> list[Trial]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(40):
        top1, lat = float(rng.uniform(60, 95)), float(rng.uniform(1, 30))
        status = "infeasible" if lat > 25 else "ok"
        out.append(Trial(i, Architecture("toy", {"k": i}), {"top1": top1, "latency_ms@cpu": lat}, status, 0.0))
    return out


OBJECTIVES = [Objective("top1", "max"), Objective("latency_ms@cpu", "min")]
CONSTRAINTS = [Constraint("latency_ms@cpu", max=25.0)]


def _plot() -> FrontPlot:
    trials = _trials()
    front = [t for t in trials if t.number in (3, 7, 11)]
    plot = front_plot(trials, front, OBJECTIVES, CONSTRAINTS, "toy")
    assert plot is not None
    return plot


def test_the_plot_puts_the_maximised_objective_on_y_and_draws_the_constraint():
    plot = _plot()
    assert plot.y_label.startswith("top-1") and "higher is better" in plot.y_label
    assert "lower is better" in plot.x_label
    trials = _trials()
    assert len(plot.ok[0]) == sum(t.status == "ok" for t in trials)
    assert plot.infeasible_count == len(plot.infeasible[0]) == sum(t.status == "infeasible" for t in trials)
    assert plot.front[0] == sorted(plot.front[0])  # joined left to right
    assert plot.lines == [("v", 25.0, "constraint latency_ms@cpu <= 25")]
    assert FrontPlot.from_dict(plot.to_dict()) == plot


def test_one_objective_has_no_plot(tmp_path):
    assert front_plot(_trials(), [], OBJECTIVES[:1], [], "one") is None
    plot_front(tmp_path / "p.png", _trials(), [], OBJECTIVES[:1], [], "one")
    assert not (tmp_path / "p.png").exists()


def test_the_drawer_process_draws_the_same_png_as_the_run_process():
    plot = _plot()
    here = draw_front(plot)
    assert here.startswith(PNG) and len(here) > 10_000
    with FrontDrawer() as drawer:
        assert drawer.draw(plot) == here
        assert drawer.draw(plot) is None  # one plot per drawer: a second call draws nothing


def test_plot_front_writes_the_drawers_png(tmp_path):
    trials = _trials()
    with FrontDrawer() as drawer:
        plot_front(tmp_path / "p.png", trials, trials[:2], OBJECTIVES, CONSTRAINTS, "toy", drawer=drawer)
    assert (tmp_path / "p.png").read_bytes() == draw_front(front_plot(trials, trials[:2], OBJECTIVES, CONSTRAINTS,
                                                                      "toy"))


@pytest.mark.parametrize("child", [
    "import sys; sys.stdout.write('not a png')",   # garbage
    "import sys; sys.exit(3)",                       # dies
    "import sys; sys.stdin.read(); raise RuntimeError('broken matplotlib')",  # fails while drawing
])
def test_a_drawer_that_fails_leaves_the_plot_to_the_run(tmp_path, child):
    drawer = FrontDrawer()
    drawer.close()
    drawer.proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
    trials = _trials()
    plot_front(tmp_path / "p.png", trials, trials[:2], OBJECTIVES, CONSTRAINTS, "toy", drawer=drawer)
    assert (tmp_path / "p.png").read_bytes() == draw_front(front_plot(trials, trials[:2], OBJECTIVES, CONSTRAINTS,
                                                                      "toy"))


def test_a_drawer_that_never_answers_is_killed_after_its_timeout(tmp_path):
    drawer = FrontDrawer(timeout_s=0.5)
    drawer.close()
    drawer.proc = proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert drawer.draw(_plot()) is None
    assert proc.returncode is not None  # reaped, not left behind


def test_closing_an_unused_drawer_ends_its_process():
    drawer = FrontDrawer()
    proc = drawer.proc
    assert proc is not None
    drawer.close()
    assert proc.returncode == 0
