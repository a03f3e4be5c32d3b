"""The interactive plots of ``nas report RUN [RUN ...] --html``: :func:`comparison_figures` (plotly, imported when
called: ``pip install "hwnas[plotly]"``), and the hover text of a trial that :mod:`hwnas.visualization`'s figures
share (:func:`hover_text`)."""

from __future__ import annotations

import html
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


def comparison_figures(comparison: Comparison) -> InteractiveFigures:
    """The interactive plots of ``nas report RUN [RUN ...] --html`` (:mod:`hwnas.experiments.report.html`), as
    plotly JSON with plotly.js to inline once (``plotly.offline.get_plotlyjs``):

    - ``front-i``: per device (:func:`hwnas.experiments.report.compare.front_pairs`), every compared run's front
      (joined) and its other trials (faint; beyond :data:`~hwnas.experiments.report.compare.MAX_POINTS` a seeded
      sample), WebGL (``Scattergl``) so that tens of thousands of points stay responsive; hover gives the run, the
      trial, its architecture id, metrics and genes; each point's ``customdata`` is [run index, trial number]
      (a click shows the trial's row and card);
    - ``progress``: each run's hypervolume after each trial against the comparison's one reference;
    - ``genes``: parallel coordinates of genes against the objectives (coloured by run, or by the first objective
      for one run), at most :data:`~hwnas.experiments.report.compare.PARALLEL_LINES` lines.
    """
    go_mod = require("plotly.graph_objects", "plotly", "the interactive plots of nas report --html")
    import plotly.offline

    from hwnas.experiments.report.compare import PALETTE, InteractiveFigures, drawn_points, front_pairs, parallel_data

    runs = comparison.runs
    several = len(runs) > 1
    figures: dict[str, str] = {}
    for i, (a, b) in enumerate(front_pairs(list(comparison.objectives))):
        fig = go_mod.Figure()
        for k, run in enumerate(runs):
            colour = PALETTE[k % len(PALETTE)]
            front = sorted(pareto_front(run.data.trials, [a, b]), key=lambda t: t.metrics[b.metric])
            rest, total = drawn_points(run.data.trials, b.metric, a.metric, front)
            name = run.label if several else "trials"
            sampled = f" ({len(rest)} of {total})" if len(rest) < total else ""
            fig.add_trace(go_mod.Scattergl(
                x=[t.metrics[b.metric] for t in rest], y=[t.metrics[a.metric] for t in rest], mode="markers",
                name=f"{name}: other trials{sampled}", legendgroup=str(k),
                marker={"color": colour if several else "rgba(120,120,120,0.45)", "size": 5,
                        "opacity": 0.25 if several else 0.6,
                        "symbol": ["x" if t.status == "infeasible" else "circle" for t in rest]},
                customdata=[[k, t.number] for t in rest], hovertext=[_run_hover(run.label, t, several) for t in rest],
                hoverinfo="text"))
            fig.add_trace(go_mod.Scattergl(
                x=[t.metrics[b.metric] for t in front], y=[t.metrics[a.metric] for t in front],
                mode="lines+markers", name=f"{name}: front ({len(front)})" if several else f"front ({len(front)})",
                legendgroup=str(k), line={"shape": "hv", "color": colour if several else "#d62728"},
                marker={"color": colour if several else "#d62728", "size": 8},
                customdata=[[k, t.number] for t in front], hovertext=[_run_hover(run.label, t, several) for t in front],
                hoverinfo="text"))
        fig.update_layout(title=f"{a.metric} against {b.metric}", xaxis_title=_axis(b), yaxis_title=_axis(a),
                          hovermode="closest", template="plotly_white", height=520,
                          legend={"orientation": "h", "y": -0.18})
        figures[f"front-{i}"] = fig.to_json()
    if comparison.reference.complete and any(comparison.histories):
        fig = go_mod.Figure()
        for k, (run, values) in enumerate(zip(runs, comparison.histories)):
            if not values:
                continue
            numbers = [t.number for t in sorted(run.data.trials, key=lambda t: t.number)]
            fig.add_trace(go_mod.Scattergl(x=list(range(1, len(values) + 1)), y=values, mode="lines",
                                           name=run.label, line={"shape": "hv", "color": PALETTE[k % len(PALETTE)]},
                                           customdata=[[k, n] for n in numbers],
                                           hovertemplate=f"{html.escape(run.label)}<br>after %{{x}} trials: "
                                                         "%{y:.5g}<extra></extra>"))
        fig.update_layout(title="hypervolume after each trial (one reference for every run)",
                          xaxis_title="trials evaluated (journal order)", yaxis_title="hypervolume",
                          template="plotly_white", height=420, hovermode="closest")
        figures["progress"] = fig.to_json()
    data = parallel_data(comparison)
    if data is not None and data.genes:
        dims = [{"label": n, "values": data.values[:, j]} for j, n in enumerate([*data.genes, *data.metrics])]
        if several:
            scale = [[k / max(len(runs) - 1, 1), PALETTE[k % len(PALETTE)]] for k in range(len(runs))]
            line = {"color": data.runs, "colorscale": scale, "cmin": 0, "cmax": max(len(runs) - 1, 1)}
            dims = [{"label": "run", "values": data.runs, "tickvals": list(range(len(runs))),
                     "ticktext": [r.label for r in runs]}, *dims]
        else:
            line = {"color": data.values[:, len(data.genes)], "colorscale": "Viridis", "showscale": True,
                    "colorbar": {"title": {"text": data.metrics[0]}}}
        fig = go_mod.Figure(go_mod.Parcoords(line=line, dimensions=dims))
        fig.update_layout(title=f"genes against metrics ({len(data.trials)} ok trials)", height=460)
        figures["genes"] = fig.to_json()
    return InteractiveFigures(library=plotly.offline.get_plotlyjs(), figures=figures)
