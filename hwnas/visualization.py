"""Interactive Plotly figures of runs, as ``optuna.visualization`` draws studies (``pip install "hwnas[plotly]"``).

Each function takes a :class:`~hwnas.experiments.study.Study` or a run directory and returns a
``plotly.graph_objects.Figure``: shown inline in Jupyter, and written as one HTML file that opens without network
by :func:`write_html` (plotly.js inlined).

- :func:`plot_front`: the Pareto front per device (accuracy-like objective against each hardware objective), every
  trial drawn, with hover giving the trial, its architecture id, every metric and every gene;
- :func:`plot_hypervolume_history`: the front's hypervolume after each trial, against the run's fixed reference;
- :func:`plot_parallel_coordinate`: genes against metrics, one line per ok trial, coloured by the first objective;
- :func:`plot_gene_importance`: how much each gene matters for each objective (:func:`gene_importances`:
  permutation importance of a random forest fitted to the ok trials, scikit-learn's);
- :func:`plot_fronts`: several runs' fronts on the same axes, to compare searches;
- :func:`comparison_figures`: the interactive plots of ``nas report RUN [RUN ...] --html`` (from
  :mod:`hwnas.experiments.report.interactive`, whose hover text these figures share).

Importing this module imports neither plotly nor anything heavy: each function imports plotly when called.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.errors import HwnasError
from hwnas.experiments.report.interactive import comparison_figures
from hwnas.experiments.report.interactive import hover_text as _hover
from hwnas.extras import require
from hwnas.objectives import Objective, Trial, is_hardware_metric, pareto_front

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from hwnas.experiments.study import Study

__all__ = ["comparison_figures", "gene_importances", "plot_front", "plot_fronts", "plot_gene_importance",
           "plot_hypervolume_history", "plot_parallel_coordinate", "write_html"]

_GREY, _FRONT, _INFEASIBLE = "rgba(120,120,120,0.45)", "#d62728", "rgba(255,127,14,0.5)"


def _go(what: str) -> Any:
    return require("plotly.graph_objects", "plotly", f"hwnas.visualization.{what}")


def _study(run: Study | str | Path) -> Study:
    from hwnas.experiments.study import Study, load_run

    return run if isinstance(run, Study) else load_run(run)


def _flat_genes(trial: Trial) -> dict[str, float]:
    from hwnas.experiments.study import flat_genes

    return flat_genes(trial)


def _pairs(objectives: Sequence[Objective]) -> list[tuple[Objective, Objective]]:
    """(x, y) per device: the first objective that is not a hardware metric against each hardware objective; the
    first two objectives when there is no hardware objective (or no other one)."""
    hardware = [o for o in objectives if is_hardware_metric(o.metric)]
    others = [o for o in objectives if not is_hardware_metric(o.metric)]
    if hardware and others:
        return [(h, others[0]) for h in hardware]
    if len(objectives) >= 2:
        return [(objectives[1], objectives[0])]
    raise HwnasError("a front needs two objectives; this run has one: see plot_hypervolume_history")


def _xy(trials: Sequence[Trial], x: Objective, y: Objective) -> tuple[list[float], list[float], list[Trial]]:
    kept = [t for t in trials if _finite(t.metrics.get(x.metric)) and _finite(t.metrics.get(y.metric))]
    return [t.metrics[x.metric] for t in kept], [t.metrics[y.metric] for t in kept], kept


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _label(o: Objective) -> str:
    return f"{o.metric} ({'lower' if o.direction == 'min' else 'higher'} is better)"


def plot_front(run: Study | str | Path) -> go.Figure:
    """The front per device: one panel per hardware objective (x) against the accuracy-like objective (y), with
    every ok trial (grey), the infeasible ones (orange) and the panel's two-objective front (red, joined in order);
    hovering a point shows its trial number, architecture id, every metric and every gene."""
    go_mod = _go("plot_front")
    from plotly.subplots import make_subplots

    study = _study(run)
    trials, objectives = study.trials, study.objectives
    pairs = _pairs(objectives)
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[f"{y.metric} vs {x.metric}" for x, y in pairs])
    for col, (x, y) in enumerate(pairs, start=1):
        for status, color, symbol in (("ok", _GREY, "circle"), ("infeasible", _INFEASIBLE, "x")):
            xs, ys, kept = _xy([t for t in trials if t.status == status], x, y)
            fig.add_trace(go_mod.Scatter(x=xs, y=ys, mode="markers", name=status, legendgroup=status,
                                         showlegend=col == 1, marker={"color": color, "symbol": symbol, "size": 7},
                                         hovertext=[_hover(t) for t in kept], hoverinfo="text"), row=1, col=col)
        front = sorted(pareto_front(trials, [x, y]), key=lambda t: t.metrics[x.metric])
        xs, ys, kept = _xy(front, x, y)
        fig.add_trace(go_mod.Scatter(x=xs, y=ys, mode="lines+markers", name="front", legendgroup="front",
                                     showlegend=col == 1, line={"shape": "hv", "color": _FRONT},
                                     marker={"color": _FRONT, "size": 9},
                                     hovertext=[_hover(t) for t in kept], hoverinfo="text"), row=1, col=col)
        fig.update_xaxes(title_text=_label(x), row=1, col=col)
        fig.update_yaxes(title_text=_label(y), row=1, col=col)
    fig.update_layout(title=f"{study.name}: {len(trials)} trials, front per device", hovermode="closest",
                      template="plotly_white")
    return fig


def plot_hypervolume_history(run: Study | str | Path) -> go.Figure:
    """The hypervolume of the front of the first i trials, i = 1..n, against the run's fixed reference point (the
    one ``nas report`` uses; every objective needs one: a ``reference`` or a constraint bound)."""
    go_mod = _go("plot_hypervolume_history")
    from hwnas.experiments.report.compare import hypervolume_progress

    study = _study(run)
    trials = study.trials
    summary = study.summary
    values = hypervolume_progress(trials, study.objectives, summary.reference)
    if values is None:
        missing = ", ".join(summary.reference.missing())
        raise HwnasError(f"no hypervolume: {missing} has no reference point (set objectives[i].reference in the "
                         "experiment, or bound the metric with a constraint)")
    numbers = [t.number for t in sorted(trials, key=lambda t: t.number)]
    fig = go_mod.Figure(go_mod.Scatter(x=numbers, y=values, mode="lines", name="hypervolume",
                                       line={"shape": "hv"}))
    fig.update_layout(title=f"{study.name}: hypervolume after each trial", xaxis_title="trial",
                      yaxis_title="hypervolume", template="plotly_white")
    return fig


def _table(trials: Sequence[Trial], metrics: Sequence[str]) -> tuple[np.ndarray, list[str], np.ndarray, list[Trial]]:
    """(gene matrix, gene column names, metric matrix, the trials kept): ok trials with every metric finite; a gene
    position a trial lacks (a shorter sequence gene) is -1."""
    kept = [t for t in trials if t.status == "ok" and not t.partial and all(_finite(t.metrics.get(m)) for m in metrics)]
    rows = [_flat_genes(t) for t in kept]
    names = sorted({k for r in rows for k in r}, key=_natural)
    genes = np.array([[r.get(n, -1.0) for n in names] for r in rows], dtype=float).reshape(len(rows), len(names))
    values = np.array([[t.metrics[m] for m in metrics] for t in kept], dtype=float).reshape(len(kept), len(metrics))
    return genes, names, values, kept


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in name.split("."))


def plot_parallel_coordinate(run: Study | str | Path, *, genes: Sequence[str] | None = None,
                             metrics: Sequence[str] | None = None) -> go.Figure:
    """Genes against metrics: one axis per gene (``gene.NAME``, as in ``trials_dataframe()``) and per metric (the
    objectives by default), one line per ok trial, coloured by the first metric."""
    go_mod = _go("plot_parallel_coordinate")
    study = _study(run)
    metrics = list(metrics) if metrics is not None else [o.metric for o in study.objectives]
    X, names, Y, kept = _table(study.trials, metrics)
    if not kept:
        raise HwnasError(f"no ok trial with {', '.join(metrics)} to draw")
    chosen = [n for n in names if genes is None or n in genes or n.split(".")[1] in genes]
    dims = [{"label": n.removeprefix("gene."), "values": X[:, names.index(n)]} for n in chosen]
    dims += [{"label": m, "values": Y[:, i]} for i, m in enumerate(metrics)]
    fig = go_mod.Figure(go_mod.Parcoords(line={"color": Y[:, 0], "colorscale": "Viridis", "showscale": True,
                                               "colorbar": {"title": metrics[0]}}, dimensions=dims))
    fig.update_layout(title=f"{study.name}: genes against metrics ({len(kept)} ok trials)")
    return fig


def gene_importances(run: Study | str | Path, metrics: Sequence[str] | None = None, *, n_repeats: int = 10,
                     seed: int = 0) -> dict[str, dict[str, float]]:
    """Metric -> gene -> importance, each metric's importances summing to 1 (all 0 when nothing is explained).

    The method is permutation importance (scikit-learn's ``permutation_importance``) of a random forest
    (``RandomForestRegressor``, 200 trees, seeded) fitted to the ok trials' genes: how much the forest's R^2 on
    those trials drops when one gene's column is shuffled, averaged over ``n_repeats`` shuffles, negative drops
    counted as 0. Sequence genes count as one gene (their positions' importances added up). Deterministic for a
    given ``seed``.

    Raises:
        HwnasError: Fewer than 4 ok trials with the metrics.
    """
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    study = _study(run)
    metrics = list(metrics) if metrics is not None else [o.metric for o in study.objectives]
    X, names, Y, kept = _table(study.trials, metrics)
    if len(kept) < 4:
        raise HwnasError(f"gene importance needs at least 4 ok trials with {', '.join(metrics)}; the run has "
                         f"{len(kept)}")
    genes = list(dict.fromkeys(n.split(".")[1] for n in names))
    out: dict[str, dict[str, float]] = {}
    for j, metric in enumerate(metrics):
        forest = RandomForestRegressor(n_estimators=200, random_state=seed, n_jobs=1).fit(X, Y[:, j])
        drops = permutation_importance(forest, X, Y[:, j], n_repeats=n_repeats, random_state=seed,
                                       n_jobs=1).importances_mean
        per_gene = dict.fromkeys(genes, 0.0)
        for name, drop in zip(names, np.clip(drops, 0.0, None)):
            per_gene[name.split(".")[1]] += float(drop)
        total = sum(per_gene.values())
        out[metric] = {g: (v / total if total > 0 else 0.0) for g, v in per_gene.items()}
    return out


def plot_gene_importance(run: Study | str | Path, metrics: Sequence[str] | None = None, *, n_repeats: int = 10,
                         seed: int = 0) -> go.Figure:
    """One horizontal bar per gene and objective: :func:`gene_importances` (permutation importance of a random
    forest on the ok trials)."""
    go_mod = _go("plot_gene_importance")
    study = _study(run)
    importances = gene_importances(study, metrics, n_repeats=n_repeats, seed=seed)
    fig = go_mod.Figure()
    for metric, per_gene in importances.items():
        genes = list(per_gene)
        fig.add_trace(go_mod.Bar(y=genes, x=[per_gene[g] for g in genes], name=metric, orientation="h"))
    fig.update_layout(title=f"{study.name}: gene importance per objective (permutation importance, random forest)",
                      xaxis_title="share of the explained variance lost when the gene is shuffled", barmode="group",
                      template="plotly_white", yaxis={"autorange": "reversed"})
    return fig


def plot_fronts(runs: Sequence[Study | str | Path] | Mapping[str, Study | str | Path]) -> go.Figure:
    """Several runs' fronts on the same axes (one panel per device, as :func:`plot_front`), one colour per run;
    ``runs`` as a list (labelled by run directory) or a mapping label -> run. The panels are the first run's
    objectives; a run lacking a metric is left out of that panel."""
    go_mod = _go("plot_fronts")
    from plotly.subplots import make_subplots

    labelled = list(runs.items()) if isinstance(runs, Mapping) else [(None, r) for r in runs]
    if not labelled:
        raise HwnasError("plot_fronts needs at least one run")
    studies = [(label or str(_study(r).run_dir), _study(r)) for label, r in labelled]
    pairs = _pairs(studies[0][1].objectives)
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[f"{y.metric} vs {x.metric}" for x, y in pairs])
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
    for k, (label, study) in enumerate(studies):
        trials = study.trials
        for col, (x, y) in enumerate(pairs, start=1):
            front = sorted(pareto_front([t for t in trials if _finite(t.metrics.get(x.metric))
                                         and _finite(t.metrics.get(y.metric))], [x, y]),
                           key=lambda t: t.metrics[x.metric])
            xs, ys, kept = _xy(front, x, y)
            fig.add_trace(go_mod.Scatter(x=xs, y=ys, mode="lines+markers", name=label, legendgroup=label,
                                         showlegend=col == 1, line={"shape": "hv", "color": palette[k % 8]},
                                         hovertext=[f"{html.escape(label)}<br>{_hover(t)}" for t in kept],
                                         hoverinfo="text"), row=1, col=col)
            fig.update_xaxes(title_text=_label(x), row=1, col=col)
            fig.update_yaxes(title_text=_label(y), row=1, col=col)
    fig.update_layout(title="fronts of " + ", ".join(label for label, _ in studies), template="plotly_white")
    return fig


def write_html(fig: go.Figure, path: str | Path) -> Path:
    """Write ``fig`` as one self-contained HTML file (plotly.js inlined: it opens without network); returns the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(path), include_plotlyjs=True, full_html=True)
    return path
