"""pareto.png: the plotted data (FrontPlot) and its drawing, in process or by a child process
(hwnas.experiments.report.drawer): the same bytes either way, and the run's own drawing wherever the child fails,
gives up or is not wanted. Real child processes throughout."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.experiments.report import drawer as drawers
from hwnas.experiments.report import front as front_module
from hwnas.experiments.report.drawer import PlotDrawer
from hwnas.experiments.report.front import FrontPlot, draw_front, front_plot, plot_front
from hwnas.objectives import Constraint, Objective, Trial
from hwnas.testing.experiments import nb201_benchmark_yaml

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


def test_the_drawing_process_draws_the_png_the_run_would():
    plot = _plot()
    drawer = PlotDrawer.start()
    assert drawer is not None
    with drawer:
        drawn = drawer.draw(plot)
    assert drawn is not None and drawn.startswith(PNG)
    assert drawn == draw_front(plot)  # byte for byte
    assert drawer.proc.returncode == 0


def test_a_drawing_process_that_cannot_import_matplotlib_leaves_the_plot_to_the_run(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "site" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('matplotlib is broken here')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))  # the child's matplotlib; this process has its own
    trials = _trials()
    drawer = PlotDrawer.start()
    assert drawer is not None
    with drawer:
        plot = front_plot(trials, trials[:2], OBJECTIVES, CONSTRAINTS, "toy")
        assert plot is not None
        with caplog.at_level("DEBUG", logger=drawers.__name__):
            assert drawer.draw(plot) is None
        assert drawer.proc.returncode != 0
        assert "matplotlib is broken here" in caplog.text  # the child's error, at debug level
    path = tmp_path / "p.png"
    drawer2 = PlotDrawer.start()
    assert drawer2 is not None
    with drawer2:
        front_module.write_plot(path, plot, drawer2)
    assert path.read_bytes() == draw_front(plot)  # drawn in process instead


def test_a_drawing_process_that_waited_too_long_has_exited_and_the_run_draws(tmp_path):
    drawer = PlotDrawer.start(idle_s=0.2)
    assert drawer is not None
    with drawer:
        assert drawer.proc.wait(timeout=120) == 0  # gave up waiting for a plot, quietly
        plot = _plot()
        assert drawer.draw(plot) is None  # into a closed pipe: not an error
        front_module.write_plot(tmp_path / "p.png", plot, drawer)  # asked again: drawn here
    assert (tmp_path / "p.png").read_bytes() == draw_front(plot)


def test_a_drawing_process_nobody_asks_to_draw_is_stopped(monkeypatch):
    monkeypatch.setattr(drawers, "can_gain", lambda: True)
    with drawers.spare():
        started = drawers._spare
        assert started is not None and started.proc.poll() is None
        assert drawers.for_run(plots=False) is None  # a run with one objective: no plot, the child is stopped
        assert started.proc.returncode is not None
        assert drawers._spare is None
    with drawers.spare():
        left = drawers._spare
        assert left is not None
    assert left.proc.returncode is not None  # not taken: stopped on leaving


def test_no_drawing_process_where_matplotlib_is_imported_already_or_one_core_is_all(monkeypatch):
    import matplotlib.figure  # noqa: F401  (a notebook's process)

    assert not drawers.can_gain()
    monkeypatch.delitem(sys.modules, "matplotlib.figure")
    monkeypatch.setattr(drawers, "_usable_cores", lambda: 1)
    assert not drawers.can_gain()


def test_a_run_whose_plot_the_process_drew_writes_the_same_png(shared_data, tmp_path, monkeypatch):
    """Two runs of one experiment: one drawn by the child (the run's own drawing made to fail, to prove it),
    one in process; the same pareto.png."""
    from hwnas.experiments.api import run_experiment

    path = tmp_path / "nb201.yaml"
    path.write_text(nb201_benchmark_yaml(shared_data, strategy="evolution", trials=30, batch_size=10))
    monkeypatch.setattr(drawers, "can_gain", lambda: False)
    run_experiment(path, run_dir=tmp_path / "here")
    monkeypatch.setattr(drawers, "can_gain", lambda: True)

    def no_drawing_here(plot: object) -> bytes:
        raise AssertionError("drawn in the run's process")

    monkeypatch.setattr(front_module, "draw_front", no_drawing_here)
    run_experiment(path, run_dir=tmp_path / "there")
    here, there = (tmp_path / "here" / "pareto.png").read_bytes(), (tmp_path / "there" / "pareto.png").read_bytes()
    assert here.startswith(PNG) and here == there
    fronts = [[m["arch_id"] for m in json.loads((tmp_path / run / "pareto.json").read_text())["front"]]
              for run in ("here", "there")]
    assert fronts[0] and fronts[0] == fronts[1]


@pytest.mark.parametrize("plots", [True, False])
def test_for_run_starts_none_where_it_cannot_gain(monkeypatch, plots):
    monkeypatch.setattr(drawers, "can_gain", lambda: False)
    assert drawers.for_run(plots=plots) is None


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
