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


def _render(width: int) -> list[list[str]]:
    """The front table of two devices' latencies and three more metrics printed at ``width``: per table printed,
    its header cells (each header's lines joined), and the lines of the whole output as the last item."""
    import io

    from rich.console import Console

    from hwnas.experiments.report.front import front_table

    objectives = [Objective("top1", "max"), Objective("latency_ms@pixel3", "min"),
                  Objective("latency_ms@raspi4", "min")]
    front = [Trial(i, Architecture("mbv3", {"i": i}), {"top1": 0.91 + i / 100, "latency_ms@pixel3": 12.3 * i + 1,
                                                       "latency_ms@raspi4": 123.4 * i + 3, "energy_mj@cpu": 5.5,
                                                       "params_m": 2.345, "flops_m": 123.4}, cost_s=12.3)
             for i in range(3)]
    buf = io.StringIO()
    table = front_table(front, objectives, title="Pareto front: runs/quickstart")
    Console(file=buf, width=width, color_system=None).print(table)
    return [[str(c.header) for c in t.columns] for t in table.tables(width)] + [buf.getvalue().splitlines()]


def test_front_table_fits_80_columns_with_every_header_complete_and_distinct() -> None:
    *tables, lines = _render(80)
    assert max(len(line) for line in lines) <= 80
    assert not any("…" in line for line in lines)  # nothing truncated, neither a header nor a cell
    headers = [str(h).replace("\n", "") for t in tables for h in t]
    named = [h for h in headers if h != "#"]
    assert len(named) == len(set(named))  # every column once, however many tables it took
    assert {"latency_ms@pixel3", "latency_ms@raspi4", "energy_mj@cpu", "top1", "params_m", "flops_m", "arch_id",
            "cost_s"} == set(named)
    assert len(tables) == 2 and all(t[0] == "#" for t in tables)  # the wrapped table is led by the trials' #
    text = "\n".join(lines)
    assert "latency_ms" in text and "@pixel3" in text and "@raspi4" in text
    assert all(Architecture("mbv3", {"i": i}).arch_id in text for i in range(3))  # whole arch ids
    assert tables[0][:3] == ["#", "arch_id", "top1"]  # the objectives first


def test_front_table_on_a_wide_terminal_is_one_table_of_one_line_headers() -> None:
    *tables, lines = _render(160)
    assert len(tables) == 1
    assert "latency_ms@pixel3" in tables[0] and "latency_ms@raspi4" in tables[0]
    assert max(len(line) for line in lines) <= 160
