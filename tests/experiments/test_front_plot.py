"""pareto.png: the plotted data (FrontPlot) and its drawing."""

from __future__ import annotations

import numpy as np

from hwnas.architecture import Architecture
from hwnas.experiments.report.front import FrontPlot, draw_front, front_plot, plot_front
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


def test_one_objective_has_no_plot(tmp_path):
    assert front_plot(_trials(), [], OBJECTIVES[:1], [], "one") is None
    plot_front(tmp_path / "p.png", _trials(), [], OBJECTIVES[:1], [], "one")
    assert not (tmp_path / "p.png").exists()


def test_plot_front_writes_the_drawn_png(tmp_path):
    trials = _trials()
    plot_front(tmp_path / "p.png", trials, trials[:2], OBJECTIVES, CONSTRAINTS, "toy")
    png = (tmp_path / "p.png").read_bytes()
    assert png.startswith(PNG) and png == draw_front(front_plot(trials, trials[:2], OBJECTIVES, CONSTRAINTS, "toy"))
