"""The interactive plots of ``nas report RUN [RUN ...] --html``: :func:`comparison_figures` (plotly, imported when
called: ``pip install "hwnas[plotly]"``), and the hover text of a trial that :mod:`hwnas.visualization`'s figures
share (:func:`hover_text`)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hwnas.extras import require
from hwnas.objectives import Objective, Trial, pareto_front

if TYPE_CHECKING:
    from hwnas.experiments.report.compare import Comparison, InteractiveFigures

__all__ = ["comparison_figures", "hover_text"]


def _axis(o: Objective) -> str:
    return f"{o.metric} ({'lower' if o.direction == 'min' else 'higher'} is better)"


def hover_text(trial: Trial) -> str:
    """A trial's hover text in the plots: its number and status, architecture id, every metric and every gene."""
    metrics = "<br>".join(f"{html.escape(k)} = {v:.5g}" for k, v in trial.metrics.items())
    genes = ", ".join(f"{html.escape(k)}={v}" for k, v in trial.arch.genes.items())
    error = f"<br>{html.escape(trial.error)}" if trial.error else ""
    return (f"trial {trial.number} ({trial.status})<br>arch {trial.arch.arch_id}<br>{metrics}<br>"
            f"<span style='font-size:0.8em'>{_wrap(genes)}</span>{error}")


def _wrap(text: str, width: int = 90) -> str:
    """``text`` broken into lines of about ``width`` characters (``<br>``)."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) > width:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])

def _run_hover(label: str, trial: Trial, several: bool) -> str:
    return (f"<b>{html.escape(label)}</b><br>" if several else "") + hover_text(trial)


def _plain(value: object) -> object:
    """JSON for what :func:`json.dumps` does not take: numpy arrays and numbers."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _figure(traces: Sequence[Mapping[str, object]], **layout: object) -> str:
    """A figure's JSON: ``layout`` checked by plotly (with the ``plotly_white`` template resolved), the traces as
    given (plotly.js's own attributes; not run through plotly's validators, which take seconds for tens of
    thousands of points)."""
    go_mod = require("plotly.graph_objects", "plotly", "the interactive plots of nas report --html")
    spec = go_mod.Figure(layout={"template": "plotly_white", **layout}).to_plotly_json()
    spec["data"] = list(traces)
    return json.dumps(spec, default=_plain, separators=(",", ":"))


def comparison_figures(comparison: Comparison) -> InteractiveFigures:
    """The interactive plots of ``nas report RUN [RUN ...] --html`` (:mod:`hwnas.experiments.report.html`), as
    plotly JSON with plotly.js to inline once (``plotly.offline.get_plotlyjs``):

    - ``front-i``: per device (:func:`hwnas.experiments.report.compare.front_pairs`), every compared run's front
      (joined) and its other trials (faint; beyond :data:`~hwnas.experiments.report.compare.MAX_POINTS` a seeded
      sample), WebGL (``scattergl``) so that tens of thousands of points stay responsive; hover gives the run, the
      trial, its architecture id, metrics and genes; each point's ``customdata`` is [run index, trial number]
      (a click shows the trial's row and card);
    - ``progress``: each run's hypervolume after each trial against the comparison's one reference;
    - ``genes``: parallel coordinates of genes against the objectives (coloured by run, or by the first objective
      for one run), at most :data:`~hwnas.experiments.report.compare.PARALLEL_LINES` lines.
    """
    require("plotly", "plotly", "the interactive plots of nas report --html")
    import plotly.offline

    from hwnas.experiments.report.compare import PALETTE, InteractiveFigures, drawn_points, front_pairs, parallel_data

    runs = comparison.runs
    several = len(runs) > 1
    figures: dict[str, str] = {}
    for i, (a, b) in enumerate(front_pairs(list(comparison.objectives))):
        traces: list[Mapping[str, object]] = []
        for k, run in enumerate(runs):
            colour = PALETTE[k % len(PALETTE)]
            front = sorted(pareto_front(run.data.trials, [a, b]), key=lambda t: t.metrics[b.metric])
            rest, total = drawn_points(run.data.trials, b.metric, a.metric, front)
            name = run.label if several else "trials"
            sampled = f" ({len(rest)} of {total})" if len(rest) < total else ""
            traces.append({
                "type": "scattergl", "mode": "markers", "name": f"{name}: other trials{sampled}",
                "legendgroup": str(k), "x": [t.metrics[b.metric] for t in rest],
                "y": [t.metrics[a.metric] for t in rest],
                "marker": {"color": colour if several else "rgba(120,120,120,0.45)", "size": 5,
                           "opacity": 0.25 if several else 0.6,
                           "symbol": ["x" if t.status == "infeasible" else "circle" for t in rest]},
                "customdata": [[k, t.number] for t in rest],
                "hovertext": [_run_hover(run.label, t, several) for t in rest], "hoverinfo": "text"})
            traces.append({
                "type": "scattergl", "mode": "lines+markers",
                "name": f"{name}: front ({len(front)})" if several else f"front ({len(front)})",
                "legendgroup": str(k), "x": [t.metrics[b.metric] for t in front],
                "y": [t.metrics[a.metric] for t in front],
                "line": {"shape": "hv", "color": colour if several else "#d62728"},
                "marker": {"color": colour if several else "#d62728", "size": 8},
                "customdata": [[k, t.number] for t in front],
                "hovertext": [_run_hover(run.label, t, several) for t in front], "hoverinfo": "text"})
        figures[f"front-{i}"] = _figure(
            traces, title={"text": f"{a.metric} against {b.metric}"}, xaxis={"title": {"text": _axis(b)}},
            yaxis={"title": {"text": _axis(a)}}, hovermode="closest", height=520,
            legend={"orientation": "h", "y": -0.18})
    if comparison.reference.complete and any(comparison.histories):
        traces = []
        for k, (run, values) in enumerate(zip(runs, comparison.histories)):
            if not values:
                continue
            numbers = [t.number for t in sorted(run.data.trials, key=lambda t: t.number)]
            traces.append({"type": "scattergl", "mode": "lines", "name": run.label,
                           "x": list(range(1, len(values) + 1)), "y": values,
                           "line": {"shape": "hv", "color": PALETTE[k % len(PALETTE)]},
                           "customdata": [[k, n] for n in numbers],
                           "hovertemplate": f"{html.escape(run.label)}<br>after %{{x}} trials: "
                                            "%{y:.5g}<extra></extra>"})
        figures["progress"] = _figure(
            traces, title={"text": "hypervolume after each trial" + (" (one reference for every run)" if several
                                                                      else " (the run's reference point)")},
            xaxis={"title": {"text": "trials evaluated (journal order)"}}, yaxis={"title": {"text": "hypervolume"}},
            height=420, hovermode="closest")
    data = parallel_data(comparison)
    if data is not None and data.genes:
        dims: list[Mapping[str, object]] = [{"label": n, "values": data.values[:, j]}
                                            for j, n in enumerate([*data.genes, *data.metrics])]
        line: Mapping[str, object]
        if several:
            scale = [[k / max(len(runs) - 1, 1), PALETTE[k % len(PALETTE)]] for k in range(len(runs))]
            line = {"color": data.runs, "colorscale": scale, "cmin": 0, "cmax": max(len(runs) - 1, 1)}
            dims = [{"label": "run", "values": data.runs, "tickvals": list(range(len(runs))),
                     "ticktext": [r.label for r in runs]}, *dims]
        else:
            line = {"color": data.values[:, len(data.genes)], "colorscale": "Viridis", "showscale": True,
                    "colorbar": {"title": {"text": data.metrics[0]}}}
        figures["genes"] = _figure([{"type": "parcoords", "line": line, "dimensions": dims}],
                                   title={"text": f"genes against metrics ({len(data.trials)} ok trials)"}, height=460)
    return InteractiveFigures(library=plotly.offline.get_plotlyjs(), figures=figures)
