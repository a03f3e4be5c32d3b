"""``nas report RUN [RUN ...] --html``: one self-contained HTML page of one run, or comparing several.

The page holds the runs' summaries (one run: its trial counts, front size, hypervolume and its reference point;
several: side by side), a front plot per device with every compared run on it, the hypervolume of each search
as it went against one reference, genes against metrics (parallel coordinates), every trial in a sortable,
filterable table (filter by run), a card per exported model of every export folder of each run, the latency
tables' validation figures and the resolved config. Nothing is fetched: the plots are interactive when the
plotting library is installed (``hwnas[plotly]``: plotly.js inlined once, the figures as JSON beside it) and each
has a static PNG inlined as ``data:image/png;base64`` (shown when printing, or without the library); the styles
and the few lines of script are embedded, so the file can be mailed or archived on its own.

:mod:`.compare` reads run directories into a :class:`~hwnas.experiments.report.compare.Comparison`;
:func:`render_comparison` turns one into the page's text (pure); :func:`render_html` is the one-run case of a
:class:`ReportData` (tests build one by hand); :func:`write_html_report` reads, renders and writes the file.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hwnas.experiments.export.card import ModelCard, read_cards
from hwnas.experiments.report.compare import (
    MAX_POINTS,
    PALETTE,
    PARALLEL_LINES,
    TABLE_ROWS,
    ComparedRun,
    Comparison,
    ExportFolder,
    InteractiveFigures,
    ParallelData,
    ReportData,
    check_inputs,
    collect,
    compare_runs,
    describe_objectives,
    device_of,
    drawn_points,
    front_pairs,
    hypervolume_progress,
    parallel_data,
    table_trials,
)
from hwnas.experiments.report.summary import RunSummary, describe_fidelity, final_trials
from hwnas.experiments.report.trust import TrustEntry, describe_entry
from hwnas.fileio import atomic_write, refuse_overwrite
from hwnas.objectives import Objective, Trial, is_hardware_metric, pareto_front

__all__ = ["ReportData", "collect", "front_pairs", "hypervolume_progress", "read_cards", "render_comparison",
           "render_html", "write_html_report"]

#: Card keys rendered in their own places; any other key is listed generically.
_KNOWN_CARD_KEYS = frozenset({
    "arch_id", "trial", "input_shape", "weights", "trained_weights", "weights_source", "params_m", "flops_m", "top1",
    "measured_metrics", "onnx", "formats", "latency",
})
_ONNX_KEYS = ("file", "opset", "batch", "simplified", "sha256", "max_abs_diff_vs_torch", "checked_inputs",
              "top1_heldout")

# ---------------------------------------------------------------------------------------------- reading runs


def write_html_report(run_dirs: Path | Sequence[Path], out: Path, *, force: bool = False,
                      exports: Sequence[Path] = (), interactive: bool = True) -> tuple[Path, Comparison]:
    """Write the page of ``run_dirs`` (one run directory, or several) to ``out`` (atomically); returns ``out`` and
    what it compared (its ``left_out`` and ``notes`` are for stderr).

    Before anything is read or written: each run directory is checked (one line naming the first that is not
    one), each ``exports`` folder must exist, and ``out`` must not be an existing page unless ``force``, nor any
    other file of a run even with ``force`` (with one run, its own ``report.html`` may be replaced with
    ``force``; with several, no file of any run). The run directories are only read. The plots are interactive
    when ``interactive`` and plotly is installed (:func:`hwnas.experiments.report.interactive.comparison_figures`),
    else static images only (the page says so).
    """
    dirs = [Path(run_dirs)] if isinstance(run_dirs, (str, Path)) else [Path(p) for p in run_dirs]
    out = Path(out)
    check_inputs(dirs, [Path(p) for p in exports])
    refuse_overwrite([out], force=force, own=("report.html",) if len(dirs) == 1 else (),
                     own_run=dirs[0] if len(dirs) == 1 else None)  # never another file of a run
    comparison = compare_runs(dirs, exports)
    page_dir = out.resolve().parent
    for run in [*comparison.runs, *(r for r, _ in comparison.left_out)]:
        for folder in run.exports:
            folder.href = Path(os.path.relpath(folder.path.resolve(), page_dir)).as_posix()
    figures = None
    if interactive and importlib.util.find_spec("plotly") is not None:
        from hwnas.experiments.report.interactive import comparison_figures

        figures = comparison_figures(comparison)
    atomic_write(out, render_comparison(comparison, figures))
    return out, comparison


# ------------------------------------------------------------------------------------------------ the figures


def _png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _figure_png(fig: object) -> str:
    """A matplotlib figure as a PNG data URI (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    return _png_uri(buf.getvalue())


def front_plots(data: ReportData) -> list[tuple[str, str, int]]:
    """One PNG per pair of :func:`front_pairs` of one run: (caption, data URI, front size of the pair)."""
    from hwnas.experiments.report.front import plot_front

    out = []
    with tempfile.TemporaryDirectory(prefix="hwnas-report-") as tmp:
        for i, (a, b) in enumerate(front_pairs(data.objectives)):
            pair = [a, b]
            front = pareto_front(data.trials, pair)
            where = f" on {device_of(b.metric)}" if is_hardware_metric(b.metric) else ""
            path = Path(tmp) / f"front{i}.png"
            plot_front(path, data.trials, front, pair, data.constraints,
                       title=f"{data.name}: {a.metric} vs {b.metric}{where}, {len(front)} on the front")
            if path.is_file():
                out.append((f"{a.metric} against {b.metric}{where}", _png_uri(path.read_bytes()), len(front)))
    return out


def fronts_png(comparison: Comparison, a: Objective, b: Objective, title: str) -> str:
    """Several runs' fronts of the pair (``a`` on y, ``b`` on x), one colour per run: the dominated trials faint
    (a seeded sample of at most :data:`MAX_POINTS` per run), the front joined; a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.6, 5.2), dpi=110)
    for k, run in enumerate(comparison.runs):
        colour = PALETTE[k % len(PALETTE)]
        front = sorted(pareto_front(run.data.trials, [a, b]), key=lambda t: t.metrics[b.metric])
        rest, _ = drawn_points(run.data.trials, b.metric, a.metric, front)
        ax.scatter([t.metrics[b.metric] for t in rest], [t.metrics[a.metric] for t in rest], s=7, c=colour,
                   alpha=0.18, linewidths=0, rasterized=True)
        ax.step([t.metrics[b.metric] for t in front], [t.metrics[a.metric] for t in front], where="post", c=colour,
                lw=1.6, marker="o", ms=4, label=f"{run.label} ({len(front)} on the front)")
    ax.set_xlabel(f"{b.metric} ({'lower' if b.direction == 'min' else 'higher'} is better)")
    ax.set_ylabel(f"{a.metric} ({'lower' if a.direction == 'min' else 'higher'} is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _figure_png(fig)


def progress_plot(values: Sequence[float], title: str) -> str:
    """The hypervolume after each trial as a step curve, improvements marked; a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(1, len(values) + 1)
    y = np.asarray(values, dtype=float)
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    ax.step(x, y, where="post", c="tab:blue", lw=1.6)
    up = np.flatnonzero(np.diff(np.concatenate([[0.0], y])) > 0)
    ax.scatter(x[up], y[up], s=14, c="tab:blue", zorder=3, label=f"front improved ({len(up)})")
    ax.set_xlabel("trials evaluated (journal order)")
    ax.set_ylabel("hypervolume")
    ax.set_xlim(0.5, max(len(values), 1) + 0.5)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(up):
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return _figure_png(fig)


def progress_runs_png(comparison: Comparison, title: str) -> str:
    """Every compared run's hypervolume after each trial against the shared reference; a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.6, 4.0), dpi=110)
    for k, (run, values) in enumerate(zip(comparison.runs, comparison.histories)):
        if values:
            ax.step(np.arange(1, len(values) + 1), values, where="post", c=PALETTE[k % len(PALETTE)], lw=1.5,
                    label=f"{run.label}: {values[-1]:.4g}")
    ax.set_xlabel("trials evaluated (journal order)")
    ax.set_ylabel("hypervolume (shared reference)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _figure_png(fig)


def parallel_png(comparison: Comparison, data: ParallelData, title: str) -> str:
    """Genes against metrics: each axis scaled to its range, one line per trial (coloured by run, or by the first
    metric for one run); a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    names = [*data.genes, *data.metrics]
    lo, hi = data.values.min(axis=0), data.values.max(axis=0)
    scaled = (data.values - lo) / np.where(hi > lo, hi - lo, 1.0)
    xs = np.arange(len(names), dtype=float)
    segments = [np.column_stack([xs, row]) for row in scaled]
    fig, ax = plt.subplots(figsize=(max(7.6, 0.42 * len(names)), 4.2), dpi=110)
    if len(comparison.runs) > 1:
        colours = [PALETTE[k % len(PALETTE)] for k in data.runs]
        lines = LineCollection(segments, colors=colours, linewidths=0.6, alpha=0.35)
    else:
        lines = LineCollection(segments, cmap="viridis", linewidths=0.6, alpha=0.45)
        lines.set_array(data.values[:, len(data.genes)])
        fig.colorbar(lines, ax=ax, label=data.metrics[0], pad=0.01)
    ax.add_collection(lines)
    ax.set_xlim(-0.3, len(names) - 0.7)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xticks(xs, names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks([])
    for x in xs:
        ax.axvline(x, c="#999", lw=0.5)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _figure_png(fig)


# --------------------------------------------------------------------------------------------- html helpers


def _e(value: object) -> str:
    """HTML-escaped text of any value."""
    return html.escape(str(value), quote=True)


def _num(value: object, spec: str = ".4g") -> str:
    """A number for display (escaped): ``-`` for None/NaN, booleans as yes/no, floats with ``spec``."""
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return _e(value)
    if isinstance(value, float):
        return "&ndash;" if math.isnan(value) else _e(format(value, spec))
    return _e(value)


def _generic(value: object, limit: int = 400, depth: int = 0) -> str:
    """Any JSON value, compactly: scalars as text, lists of scalars joined, small dicts as nested key/value tables
    (three levels at most), anything else as truncated JSON."""
    if value is None or isinstance(value, (bool, int, float)):
        return _num(value)
    if isinstance(value, str):
        return _e(value)
    if isinstance(value, dict) and value and len(value) <= 12 and depth < 3:
        return _kv(((_e(k), _generic(v, limit, depth + 1)) for k, v in value.items()), cls="kv small")
    if isinstance(value, list) and value and len(value) <= 20 and depth < 3 and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        head = "".join(f"<th>{_e(k)}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{_generic(v.get(k), limit, depth + 1) if k in v else ''}</td>"
                                        for k in keys) + "</tr>" for v in value)
        return f'<table class="data small inner"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        text = ", ".join(str(v) for v in value)
    else:
        try:
            text = json.dumps(value, sort_keys=True, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > limit:
        text = text[:limit] + " …"
    return f"<code>{_e(text)}</code>"


def _kv(items: Iterable[tuple[str, str]], cls: str = "kv") -> str:
    """A two-column table of (already escaped) key and value cells."""
    rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in items)
    return f'<table class="{cls}">{rows}</table>' if rows else ""


def _generic_kv(d: Mapping[str, object], skip: Iterable[str] = ()) -> str:
    """The keys of ``d`` not in ``skip`` as a small key/value table."""
    skipped = set(skip)
    return _kv(((_e(k), _generic(v)) for k, v in d.items() if k not in skipped), cls="kv small")


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2>\n{body}\n</section>\n'


# ---------------------------------------------------------------------------------------------- the sections


def _reference_lines(summary: RunSummary) -> list[tuple[str, str]]:
    """Per objective of the reference point: its metric, and its value with where it comes from."""
    ref = summary.reference
    return [(o.metric, f"{_num(v)} <span class=muted>({_e(src)})</span>")
            for o, v, src in zip(ref.objectives, ref.values, ref.sources)]


def _header(data: ReportData, front: Sequence[Trial]) -> str:
    summary = data.run_summary
    counts, hv = summary.trials, summary.hypervolume
    budget = f" of a budget of {data.budget}" if data.budget is not None else ""
    arrow = {"max": "&uarr; max", "min": "&darr; min"}
    facts = [
        ("run", f"<b>{_e(data.name)}</b>" + (f" <span class=muted>{_e(data.run_dir)}</span>" if data.run_dir else "")),
        ("search space", _e(data.space or "?")),
        ("strategy", _e(data.strategy or "?")),
        # a multi-fidelity run's trials are its candidates, each at the highest rung it reached
        ("trials", f"{counts.total if summary.multi_fidelity is not None else len(data.trials)}{_e(budget)}: "
                   f"<span class=ok>{counts.ok} ok</span>, "
                   f"<span class=infeasible>{counts.infeasible} infeasible</span>, "
                   f"<span class=failed>{counts.failed} failed</span>"),
        *([("multi-fidelity", _e(describe_fidelity(summary.multi_fidelity)) + " <span class=muted>(evaluations "
            "per rung, their cost; the front holds top-rung trials only)</span>")]
          if summary.multi_fidelity is not None else []),
        ("objectives", ", ".join(f"{_e(o.metric)} ({arrow[o.direction]})" for o in data.objectives)),
        ("constraints", "; ".join(_e(c.describe()) for c in data.constraints) or "none"),
        ("Pareto front", f"{len(front)} architectures"),
        ("hypervolume", (f"<b>{_num(hv)}</b>" if hv is not None else "none: an objective has no reference point")
         + f" <span class=muted>({_e(summary.hypervolume_from)})</span>"),
        ("reference point", "<br>".join(f"{_e(m)} = {v}" for m, v in _reference_lines(summary))),
    ]
    return (f"<header><h1>Run report: {_e(data.name)}</h1>{_kv(facts, cls='kv facts')}</header>\n")


def _plot(slot: str, uri: str, alt: str, caption: str, interactive: InteractiveFigures | None, *,
          width: int = 840, height: int = 600) -> str:
    """A plot: its interactive slot (when there is a figure for it) and its static PNG (shown when printing, or
    when the script did not draw the plot), and its caption."""
    live = (f'<div class="iplot" data-fig="{_e(slot)}" id="plot-{_e(slot)}"></div>'
            if interactive is not None and slot in interactive.figures else "")
    return (f'<figure>{live}<img class="static" src="{uri}" alt="{_e(alt)}" width="{width}" height="{height}">'
            f"<figcaption>{caption}</figcaption></figure>")


def _header_many(comparison: Comparison, interactive: InteractiveFigures | None) -> str:
    runs = comparison.runs
    facts = [
        ("runs", "<br>".join(f'<span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}"></span>'
                             f"<b>{_e(r.label)}</b> <span class=muted>{_e(r.data.run_dir)}</span>"
                             for k, r in enumerate(runs))),
        ("objectives", _e(describe_objectives(comparison.objectives))),
        ("hypervolume reference", "<br>".join(
            f"{_e(o.metric)} = <b>{_num(v)}</b> <span class=muted>({_e(src)})</span>"
            for o, v, src in zip(comparison.reference.objectives, comparison.reference.values,
                                 comparison.reference.sources))),
    ]
    return (f"<header><h1>Comparing {len(runs)} runs</h1>{_kv(facts, cls='kv facts')}"
            f"{_problems(comparison)}{_interactive_note(interactive)}</header>\n")


def _interactive_note(interactive: InteractiveFigures | None) -> str:
    if interactive is not None:
        return ("<p class=muted>The plots are interactive (hover a point for its trial, click it for its row in the "
                "table and its card); printed, each shows its static image.</p>")
    return ('<p class=muted>Static images only: the plotting library is not installed '
            '(<code>pip install "hwnas[plotly]"</code> makes the plots interactive).</p>')


def _problems(comparison: Comparison) -> str:
    lines = [why for _, why in comparison.left_out] + comparison.notes
    if not lines:
        return ""
    return ('<div class="warn" id="problems"><b>Not compared, or not this run\'s</b><ul>'
            + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul></div>")


def _fronts_section(comparison: Comparison, interactive: InteractiveFigures | None) -> str:
    title = "Pareto front per device"
    pairs = front_pairs(list(comparison.objectives))
    if not pairs:
        return _section("fronts", title, "<p>A single objective: there is no front to plot.</p>")
    if not any(r.data.trials for r in comparison.runs):
        return _section("fronts", title, "<p>No trial yet.</p>")
    figs = []
    if len(comparison.runs) == 1:
        for i, (cap, uri, n) in enumerate(front_plots(comparison.runs[0].data)):
            figs.append(_plot(f"front-{i}", uri, cap, f"{_e(cap)}: {n} on this pair's front", interactive))
    else:
        for i, (a, b) in enumerate(pairs):
            where = f" on {device_of(b.metric)}" if is_hardware_metric(b.metric) else ""
            cap = f"{a.metric} against {b.metric}{where}"
            uri = fronts_png(comparison, a, b, f"{cap}: {len(comparison.runs)} runs")
            figs.append(_plot(f"front-{i}", uri, cap, f"{_e(cap)}: every compared run's front", interactive))
    hw = [o for o in comparison.objectives if is_hardware_metric(o.metric)]
    note = ("<p>Each hardware objective against the first other objective; " if hw else
            "<p>No hardware objective: the first two objectives; ")
    note += ("every trial in grey, infeasible ones as crosses, the front of the two objectives joined." if
             len(comparison.runs) == 1 else "one colour per run: its front joined, its other trials faint.")
    big = [r.label for r in comparison.runs if len(r.data.trials) > MAX_POINTS]
    if big and interactive is not None:
        note += (f" Of {', '.join(big)}, the interactive plot draws every front member and a seeded sample of "
                 f"{MAX_POINTS} of the other trials (WebGL).")
    return _section("fronts", title, note + "</p>" + f'<div class="plots">{"".join(figs)}</div>')


def _progress_section(comparison: Comparison, interactive: InteractiveFigures | None) -> str:
    ref = comparison.reference
    title = "Search progress"
    if not ref.complete:
        missing = ref.missing()
        return _section("progress", title, f"<p>No hypervolume to follow: {_e(', '.join(missing))} "
                        f"{'has' if len(missing) == 1 else 'have'} no reference point (set objectives[i].reference "
                        "in the experiment, or bound the metric with a constraint).</p>")
    histories = [h for h in comparison.histories if h]
    if not histories:
        return _section("progress", title, "<p>No trial yet.</p>")
    if len(comparison.runs) == 1:
        values = histories[0]
        name = comparison.runs[0].data.name
        uri = progress_plot(values, f"{name}: hypervolume of the front of the first i trials")
        cap = (f"Hypervolume after each of {len(values)} trials against the run's fixed reference point; final "
               f"{_num(values[-1])}.")
        return _section("progress", title, _plot("progress", uri, "hypervolume against trials", cap, interactive,
                                                 width=770, height=396))
    uri = progress_runs_png(comparison, "hypervolume of the front of the first i trials, one reference")
    finals = ", ".join(f"{_e(r.label)} {_num(h[-1]) if h else '&ndash;'}"
                       for r, h in zip(comparison.runs, comparison.histories))
    cap = f"Each run's hypervolume after each trial against the same reference (in the header); final: {finals}."
    return _section("progress", title, _plot("progress", uri, "hypervolume against trials, every run", cap,
                                             interactive, width=836, height=440))


def _genes_section(comparison: Comparison, data: ParallelData | None, interactive: InteractiveFigures | None) -> str:
    title = "Genes against metrics"
    if data is None or not data.genes:
        return _section("genes", title, "<p>No ok trial with every objective and a gene to draw.</p>")
    runs = len(comparison.runs)
    uri = parallel_png(comparison, data, f"{len(data.trials)} ok trials: genes, then the objectives")
    sampled = (f" A seeded sample: every front member and others, {len(data.trials)} of {data.total} ok trials "
               f"(at most {PARALLEL_LINES})." if len(data.trials) < data.total else "")
    cap = (f"One line per ok trial, one axis per gene (a sequence gene's items as NAME.i; -1: a trial lacks it) and "
           f"per objective, coloured {'by run' if runs > 1 else 'by ' + _e(data.metrics[0])}; drag along an axis "
           f"to select a range.{sampled}")
    return _section("genes", title, _plot("genes", uri, "parallel coordinates of genes and metrics", cap, interactive,
                                          width=max(836, 46 * (len(data.genes) + len(data.metrics))), height=462))


def _runs_section(comparison: Comparison) -> str:
    import yaml

    runs = comparison.runs
    configs = []
    for r in runs:
        try:
            configs.append(yaml.safe_load(r.data.config_text or "") or {})
        except yaml.YAMLError:
            configs.append(None)
    from hwnas.experiments.rundir import diff_configs

    def cell(k: int, run: ComparedRun) -> list[str]:
        s = run.data.run_summary
        counts = s.trials
        history = comparison.histories[k]
        search = s.search
        cfg, first = configs[k], configs[0]
        if k == 0:
            diff = "&ndash;"
        elif cfg is None or first is None:
            diff = "<span class=muted>unreadable config.yaml</span>"
        else:
            diff = _e(", ".join(diff_configs(first, cfg)[:12]) or "nothing")
        cards = sum(len(f.cards) for f in run.exports)
        return [
            f'<span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}"></span><b>{_e(run.label)}</b>',
            _e(run.data.run_dir), _e(run.data.name), _e(run.data.space or "?"), _e(run.data.strategy or "?"),
            f"{counts.total}" + (f" of {run.data.budget}" if run.data.budget is not None else "")
            + f": {counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} failed",
            str(len(s.front)),
            _num(history[-1]) if history else "&ndash;",
            _num(s.hypervolume) + f" <span class=muted>({_e(s.hypervolume_from)})</span>",
            _num(search.wall_s, ".1f") + " s" if search is not None and search.wall_s is not None else "&ndash;",
            _e(s.stopped_early) if s.stopped_early else "no",
            (_e(describe_fidelity(s.multi_fidelity)) + " <span class=muted>(trials: candidates, each at the highest "
             "rung it reached; the front: the top rung's)</span>") if s.multi_fidelity is not None else "no",
            f"{cards} in {len(run.exports)} folder(s)" if run.exports else "none",
            diff,
        ]

    heads = ["run", "folder", "name", "search space", "strategy", "trials", "front size",
             "hypervolume (shared reference)", "hypervolume (its own summary)", "search wall time", "stopped early",
             "multi-fidelity (evaluations per rung, their cost)", "exported models",
             "config differs from the first run at"]
    cols = [cell(k, r) for k, r in enumerate(runs)]
    body = "".join(f"<tr><th>{_e(h)}</th>" + "".join(f"<td>{c[i]}</td>" for c in cols) + "</tr>"
                   for i, h in enumerate(heads))
    return _section("runs", "Runs side by side", f'<div class="scroll x"><table class="kv side">{body}</table></div>')


def _card_anchors(runs: Sequence[ComparedRun]) -> dict[tuple[int, str], str]:
    """(run index, architecture id) -> the anchor of its first card on the page."""
    out: dict[tuple[int, str], str] = {}
    for k, run in enumerate(runs):
        for j, folder in enumerate(run.exports):
            for card in folder.cards:
                out.setdefault((k, card.arch_id), _anchor(k, j, card.arch_id))
    return out


def _anchor(k: int, j: int, arch_id: str) -> str:
    return f"model-{k}-{arch_id}" if j == 0 else f"model-{k}-{j}-{arch_id}"


def _trials_section(comparison: Comparison) -> str:
    from hwnas.experiments.report.front import metric_columns

    runs = comparison.runs
    several = len(runs) > 1
    every = [t for r in runs for t in r.data.trials]
    cols = metric_columns(every, list(comparison.objectives))
    anchors = _card_anchors(runs)
    rungs = any(t.rung is not None for t in every)  # a multi-fidelity run: a row per rung a candidate reached
    heads = ([("run", "run")] if several else []) + [("number", "#"), ("arch_id", "arch_id"), ("status", "status"),
                                                     *([("rung", "rung")] if rungs else []), *((c, c) for c in cols)]
    text_cols = {"run", "arch_id", "status"}  # compared as text; the others as numbers
    th = "".join(f'<th data-key="{_e(k)}" data-type="{"text" if k in text_cols else "num"}"'
                 f'{" class=l" if k in text_cols or k == "number" else ""} title="sort by {_e(label)}">{_e(label)}</th>'
                 for k, label in heads)
    rows, limited, shown = [], [], 0
    for k, run in enumerate(runs):
        front = run.front
        on_front = {id(t) for t in front}
        kept = table_trials(run.data.trials, front)
        final = {id(t) for t in final_trials(run.data.trials)}  # each candidate's last word: the row a plot points at
        if len(kept) < len(run.data.trials):
            limited.append(f"{run.label}: its {len(front)} front members and its first "
                           f"{len(kept) - len(front)} trials of {len(run.data.trials)} (every trial is in "
                           f"{run.data.run_dir}/trials.jsonl; nas report {run.data.run_dir} --all prints them)")
        shown += len(kept)
        for t in kept:
            arch = _e(t.arch.arch_id)
            anchor = anchors.get((k, t.arch.arch_id))
            cells = ([f'<td class="id"><span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}"></span>'
                      f"{_e(run.label)}</td>"] if several else [])
            cells += [f'<td data-v="{t.number}">{t.number}</td>',
                      f'<td class="id" title="{arch}">' + (f'<a href="#{_e(anchor)}" title="its card">{arch}</a>'
                                                           if anchor else arch) + "</td>",
                      f'<td class="st {_e(t.status)}"' + (f' title="{_e(t.error)}"' if t.error else "")
                      + f">{_e(t.status)}</td>"]
            if rungs:
                cells.append(f'<td data-v="{"" if t.rung is None else t.rung}">'
                             f'{"" if t.rung is None else t.rung}</td>')
            for c in cols:
                v = t.metrics.get(c)
                sort_value = repr(float(v)) if v is not None and math.isfinite(v) else ""  # missing: sorted last
                cells.append(f'<td data-v="{_e(sort_value)}">{_num(v) if v is not None else ""}</td>')
            cls = ' class="front"' if id(t) in on_front else ""
            row_id = f"t-{k}-{t.number}" if id(t) in final else f"t-{k}-{t.number}-rung{t.rung}"
            rows.append(f'<tr{cls} id="{row_id}" data-run="{k}" data-n="{t.number}">{"".join(cells)}</tr>')
    total = len(every)
    runs_filter = ("" if not several else '<select id="run-filter" title="filter by run"><option value="">all runs'
                   "</option>" + "".join(f'<option value="{k}">{_e(r.label)}</option>' for k, r in enumerate(runs))
                   + "</select> ")
    controls = (f'<div class="controls">{runs_filter}<input id="trial-filter" type="search" '
                'placeholder="filter rows (any text)"> <label><input id="front-only" type="checkbox"> front only'
                f'</label> <span id="shown">{shown} of {shown} trials shown</span> '
                '<span class=muted>click a header to sort; <code>#sort=COLUMN:desc</code> in the address sorts at '
                'load</span></div><div id="picked" class="picked-info" hidden></div>')
    table = (f'<div class="scroll"><table id="trial-table" class="data"><thead><tr>{th}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table></div>')
    note = ('<p class=muted>Highlighted rows are on the Pareto front.'
            + (" A multi-fidelity run has a row for each rung a candidate was evaluated at (rung 0 first); only "
               "top-rung rows can be on the front." if rungs else "")
            + (f" The table is limited to {TABLE_ROWS} rows per run: " + "; ".join(_e(x) for x in limited) + "."
               if limited else "") + "</p>")
    return _section("trials", f"Every trial ({total})", controls + table + note)


def _file_cell(name: object, files: set[str] | None, models_href: str) -> str:
    """A card's file name, linked (relative to the page) when the file is in models/, marked when missing."""
    if not isinstance(name, str) or not name:
        return _generic(name)
    if files is None:
        return f"<code>{_e(name)}</code>"
    if name in files:
        href = f"{models_href.rstrip('/')}/{name}" if models_href else name
        return f'<a href="{_e(href)}"><code>{_e(name)}</code></a>'
    return f"<code>{_e(name)}</code> <span class=failed>(missing)</span>"


def _weights(card: ModelCard) -> str:
    if card.weights is not None:
        kind, detail = card.weights.kind, card.weights.detail
        return (f'<span class="badge w-{_e(kind)}">{_e(kind)}</span>'
                + (f" <span class=muted>{_e(detail)}</span>" if detail else ""))
    if card.trained_weights is not None:
        kind = "trained" if card.trained_weights else "random-init"
        src = card.weights_source
        return f'<span class="badge w-{kind}">{kind}</span>' + (f" <span class=muted>{_e(src)}</span>" if src else "")
    w = card.extra.get("weights")  # of another form than the exporter writes: as it is
    return _generic(w) if w is not None else "&ndash;"


def _top1(card: ModelCard) -> str:
    if card.top1 is not None:
        how = card.top1.how
        return _num(card.top1.value) + (f" <span class=muted>({_e(how)})</span>" if how else "")
    return _generic(card.extra.get("top1"))


def _onnx_table(onnx: object, files: set[str] | None, models_href: str) -> str:
    if not isinstance(onnx, Mapping):
        return _generic(onnx)
    fmt = {"max_abs_diff_vs_torch": ".2e", "top1_heldout": ".4f"}
    rows = []
    for k in _ONNX_KEYS:
        if k not in onnx:
            continue
        v = onnx[k]
        if k == "file":
            cell = _file_cell(v, files, models_href)
        elif k == "sha256":
            cell = f'<code class="hash">{_e(v)}</code>'
        elif isinstance(v, float):
            cell = _num(v, fmt.get(k, ".4g"))
        else:
            cell = _generic(v)
        rows.append((_e(k), cell))
    rows += [(_e(k), _generic(v)) for k, v in onnx.items() if k not in _ONNX_KEYS]
    return _kv(rows, cls="kv small")


def _formats_table(formats: object, files: set[str] | None, models_href: str) -> str:
    if not isinstance(formats, Mapping):
        return _generic(formats)
    rows = []
    for name, d in formats.items():
        if not isinstance(d, Mapping):
            rows.append(f"<tr><th>{_e(name)}</th><td colspan=2>{_generic(d)}</td></tr>")
            continue
        if "error" in d:
            result = f'<span class="failed">error</span>: {_e(d["error"])}'
        elif "skipped" in d:
            result = f'<span class="muted">skipped</span>: {_e(d["skipped"])}'
        elif "not_built" in d:
            result = f'<span class="infeasible">not built</span>: {_e(d["not_built"])}'
        elif "file" in d or "engine" in d:
            result = '<span class="ok">written</span> ' + _file_cell(d.get("file", d.get("engine")), files, models_href)
        else:
            result = "&ndash;"
        shown = {"error", "skipped", "not_built", "file", "engine", "trtexec"}
        details = ", ".join(
            f"{_e(k)}&nbsp;{_num(v, '.2e' if 'diff' in k else '.4g') if isinstance(v, (int, float)) else _generic(v)}"
            for k, v in d.items() if k not in shown)
        rows.append(f"<tr><th>{_e(name)}</th><td>{result}</td><td>{details}</td></tr>")
        if d.get("trtexec"):
            rows.append(f'<tr><td></td><td colspan=2 class="left">{_commands(d["trtexec"])}</td></tr>')
    return ('<table class="data small"><thead><tr><th>format</th><th>result</th><th>details</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _commands(value: object) -> str:
    """Command lines in code blocks: one string, a list of them, or a dict of label -> line (one per version)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [("", v) for v in value]
    else:
        items = [("", value)]
    return "".join((f"<span class=muted>{_e(label)}</span>" if label else "")
                   + f'<pre class="cmd"><code>{_e(line)}</code></pre>' for label, line in items)


def _latency_table(latency: object) -> str:
    if not isinstance(latency, list):
        return _generic(latency)
    rows = []
    for entry in latency:
        if not isinstance(entry, Mapping):
            rows.append(f"<tr><td colspan=5>{_generic(entry)}</td></tr>")
            continue
        name = entry.get("name")
        context = (f"<b>{_e(name)}</b> " if name else "") + _e(entry.get("context", "?"))
        below = [_e(v) for v in (entry.get("metric"), entry.get("file")) if isinstance(v, str) and v]
        if below:
            context += f"<br><span class=muted>{' · '.join(below)}</span>"
        measured = entry.get("measured")
        if isinstance(measured, dict):
            count = measured.get("count")
            m = (f"<td class=num>{_num(measured.get('median_ms'))}</td><td class=num>{_num(measured.get('p90_ms'))}"
                 + (f"<br><span class=muted>n={_num(count)}</span>" if count is not None else "") + "</td>")
        else:
            reason = entry.get("not_measured") or "no measurement recorded"
            m = f'<td colspan=2 class="muted">not measured: {_e(reason)}</td>'
        by = entry.get("predicted_by")
        pred = _num(entry.get("predicted_ms")) + (f"<br><span class=muted>{_e(by)}</span>" if by else "")
        err = entry.get("error_pct")
        err_s = _e(f"{err:+.1f} %") if isinstance(err, (int, float)) and not isinstance(err, bool) else _num(err)
        rows.append(f"<tr><td>{context}</td>{m}<td class=num>{pred}</td><td class='num nw'>{err_s}</td></tr>")
    return ('<table class="data small"><thead><tr><th>context</th><th class=num>measured median (ms)</th>'
            '<th class=num>p90 (ms)</th><th class=num>predicted (ms)</th><th class=num>error</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _card(card: ModelCard, files: set[str] | None, models_href: str, *, anchor: str, where: str = "models/") -> str:
    # a field of another form than the exporter writes was kept as read (card.extra): shown as it is, in its place
    raw = card.extra
    arch_id = card.arch_id or str(raw.get("arch_id", "?"))
    trial = card.trial if card.trial is not None else raw.get("trial")
    head = (f'<h3><code>{_e(arch_id)}</code>' + (f' <span class=muted>trial #{_e(trial)}</span>' if trial is not None
                                                 else "") + "</h3>")
    facts = [("weights", _weights(card))]
    if card.input_shape is not None or "input_shape" in raw:
        facts.append(("input shape", _generic(list(card.input_shape) if card.input_shape is not None
                                              else raw["input_shape"])))
    for key, label, value in (("params_m", "parameters (M)", card.params_m), ("flops_m", "FLOPs (M)", card.flops_m)):
        if value is not None or key in raw:
            facts.append((label, _num(value if value is not None else raw[key])))
    if card.top1 is not None or "top1" in raw:
        facts.append(("top-1", _top1(card)))
    left = [_kv(facts)]
    right = []
    onnx_name = card.onnx_file
    if files is not None and (onnx_name or f"{arch_id}.onnx") not in files:
        left.append(f'<p class="failed">{_e(onnx_name or arch_id + ".onnx")} is not in {_e(where)}</p>')
    if card.measured_metrics is not None:
        left.append("<h4>Measured by the search</h4>"
                    + _kv(((_e(k), _num(v)) for k, v in card.measured_metrics.items()), cls="kv small"))
    elif "measured_metrics" in raw:
        left.append("<h4>Measured by the search</h4>" + _generic(raw["measured_metrics"]))
    if card.onnx is not None or "onnx" in raw:
        left.append("<h4>ONNX</h4>" + _onnx_table(card.onnx if card.onnx is not None else raw["onnx"], files,
                                                  models_href))
    if card.formats is not None or "formats" in raw:
        right.append("<h4>Other formats</h4>" + _formats_table(card.formats if card.formats is not None
                                                               else raw["formats"], files, models_href))
    if card.latency is not None or "latency" in raw:
        right.append("<h4>Latency</h4>" + _latency_table(list(card.latency) if card.latency is not None
                                                         else raw["latency"]))
    shown = card.to_dict()
    if any(k not in _KNOWN_CARD_KEYS for k in shown):
        right.append("<h4>Other fields</h4>" + _generic_kv(shown, skip=_KNOWN_CARD_KEYS))
    return (f'<article class="card" id="{_e(anchor)}">{head}<div class="card-body">'
            f'<div>{"".join(left)}</div><div>{"".join(right)}</div></div></article>')


def _models_section(run: ComparedRun, k: int, sid: str, prefix: str) -> str:
    """Every export folder of a run (its own models/, those its export.json lists, --exports): each folder's
    index, problems and cards; an export of another run says so."""
    count = sum(len(f.cards) for f in run.exports)
    if not run.exports:
        return _section(sid, f"{prefix}Exported models (0)",
                        "<p>No exported model in this run (models/ holds no card; <code>nas export RUN_DIR</code> "
                        "writes them; <code>nas report RUN --exports DIR</code> reads an export elsewhere).</p>")
    body = []
    for j, folder in enumerate(run.exports):
        own = folder.found_by == "the run's models/"
        href = folder.href if folder.href is not None else folder.path.as_posix()
        where = "models/" if own else f"{folder.path.name}/"
        body.append(f'<h3 class="folder"><code>{_e(folder.path)}</code> <span class=muted>({_e(folder.found_by)}, '
                    f"{len(folder.cards)} card{'s' if len(folder.cards) != 1 else ''})</span></h3>")
        if folder.foreign:
            body.append(f'<p class="warn foreign">{_e(folder.foreign)}</p>')
        if folder.info:
            body.append(_generic_kv(folder.info))
        if folder.problems:
            body.append("<ul>" + "".join(f'<li class="failed">{_e(p)}</li>' for p in folder.problems) + "</ul>")
        if folder.cards:
            body.append('<div class="cards">' + "".join(
                _card(c, folder.files, href, anchor=_anchor(k, j, c.arch_id), where=where) for c in folder.cards)
                + "</div>")
        else:
            body.append("<p>No exported model in this folder.</p>")
    return _section(sid, f"{prefix}Exported models ({count})", "".join(body))


def _trust_section(data: ReportData, sid: str = "latency-trust", prefix: str = "") -> str:
    trust = data.run_summary.latency_trust
    if not trust:
        return _section(sid, f"{prefix}Latency tables' validation", "<p>No latency table in this run.</p>")
    lines = []
    for metric, entry in trust.items():
        try:
            lines += describe_entry(metric, entry)
        except (KeyError, TypeError, ValueError):  # figures from another version: show them as they are
            shown = entry.to_dict() if entry is not None else None
            lines.append(f"{metric}: {json.dumps(shown, default=str)[:300]}")
    rows = [_trust_row(metric, entry) for metric, entry in trust.items()]
    table = ('<table class="data small"><thead><tr><th>metric</th><th>answers</th><th>networks</th>'
             '<th>figures are</th><th>MAPE %</th><th>% within ±10 %</th><th>Kendall τ</th></tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>')
    return _section(sid, f"{prefix}Latency tables' validation",
                    "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>" + table)


def _trust_row(metric: str, entry: TrustEntry | None) -> str:
    if entry is None:
        return f"<tr><td>{_e(metric)}</td><td colspan=6 class=muted>never validated</td></tr>"
    f = entry.figures or {}
    within = f.get("within_10pct")
    return (f"<tr><td>{_e(metric)}</td><td>{_e(entry.answers or '?')}</td><td>{_num(entry.networks)}</td>"
            f"<td>{_e(entry.figures_are or '?')}</td><td>{_num(f.get('mape_pct'), '.1f')}</td>"
            f"<td>{_num(100 * within, '.0f') if isinstance(within, (int, float)) else _num(within)}</td>"
            f"<td>{_num(f.get('kendall_tau'), '.2f')}</td></tr>")


def _config_section(data: ReportData, sid: str = "config", prefix: str = "") -> str:
    body = []
    env = data.env
    if env:
        facts = [(_e(k), _generic(env[k])) for k in ("started", "host", "cpu", "cpu_cores", "torch_threads",
                                                        "cuda_devices", "python", "platform", "git_sha") if k in env]
        resumes = env.get("resumes")
        if isinstance(resumes, list):
            facts.append(("resumes", _e(len(resumes))))
        versions = env.get("versions")
        if isinstance(versions, dict):
            facts.append(("versions", ", ".join(f"{_e(k)}&nbsp;{_e(v) if v else '<span class=muted>no</span>'}"
                                                for k, v in versions.items())))
        body.append("<h3>Environment (env.json)</h3>" + _kv(facts, cls="kv small"))
    else:
        body.append("<p class=muted>No env.json in this run.</p>")
    body.append("<h3>config.yaml</h3>" + (f'<pre class="config">{_e(data.config_text)}</pre>'
                                           if data.config_text is not None else "<p class=muted>none</p>"))
    return _section(sid, f"{prefix}Resolved config", "".join(body))


_CSS = """
:root { --fg:#1d2329; --muted:#68717a; --line:#d9dee3; --front:#e6f0ff; --frontbar:#2f6fdb; --bg:#f6f7f9; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
       color:var(--fg); background:var(--bg); }
main { max-width:1220px; margin:0 auto; padding:20px 24px 48px; }
h1 { font-size:24px; margin:0 0 12px; } h2 { font-size:19px; margin:0 0 10px; border-bottom:1px solid var(--line);
padding-bottom:4px; } h3 { font-size:15px; margin:14px 0 6px; } h4 { font-size:13px; margin:12px 0 4px;
color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
header, section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px;
                  margin:0 0 18px; }
nav { margin:0 0 14px; font-size:13px; } nav a { margin-right:14px; color:var(--frontbar); text-decoration:none; }
code, pre { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12px; }
.muted { color:var(--muted); } .ok { color:#1c7c3a; } .infeasible { color:#b26a00; } .failed { color:#c0262d; }
table { border-collapse:collapse; }
table.kv th { text-align:left; font-weight:600; padding:3px 14px 3px 0; vertical-align:top; white-space:nowrap; }
table.kv td { padding:3px 0; vertical-align:top; }
table.small { font-size:12.5px; }
table.data { width:100%; } table.data th, table.data td { padding:4px 8px; border-bottom:1px solid var(--line);
text-align:right; } table.data th:first-child, table.data td:first-child { text-align:left; }
table.data thead th { background:#eef1f4; position:sticky; top:0; }
#trial-table th { cursor:pointer; user-select:none; white-space:nowrap; }
#trial-table th[aria-sort=ascending]::after { content:" \\25B2"; font-size:10px; }
#trial-table th[aria-sort=descending]::after { content:" \\25BC"; font-size:10px; }
#trial-table th.l { text-align:left; }
#trial-table td.id, #trial-table td.st { text-align:left; font:12px ui-monospace,Menlo,Consolas,monospace; }
#trial-table tr.front td { background:var(--front); }
#trial-table tr.front td:first-child { box-shadow:inset 4px 0 var(--frontbar); font-weight:600; }
.scroll { max-height:560px; overflow:auto; border:1px solid var(--line); border-radius:6px; }
.controls { margin:0 0 8px; display:flex; gap:14px; align-items:center; flex-wrap:wrap; }
.controls input[type=search] { width:260px; padding:5px 8px; border:1px solid var(--line); border-radius:5px; }
.plots { display:grid; grid-template-columns:repeat(auto-fit, minmax(520px, 1fr)); gap:14px; }
figure { margin:0; max-width:660px; }
.two { display:grid; grid-template-columns:minmax(0, 1fr) minmax(0, 1fr); gap:0 18px; }
img { max-width:100%; height:auto; display:block; }
figcaption { font-size:12.5px; color:var(--muted); margin-top:4px; }
.cards { display:flex; flex-direction:column; gap:14px; }
.card-body { display:grid; grid-template-columns:minmax(0, 1fr) minmax(0, 1.5fr); gap:10px 28px; }
.card td code, .card td a { overflow-wrap:anywhere; }
.card table.data th, .card table.data td { text-align:left; vertical-align:top; }
.card table.data .num { text-align:right; }
table.data td.left { text-align:left; } .nw { white-space:nowrap; } .card-body h4:first-child { margin-top:4px; }
table.kv table.kv { margin:0; } table.kv table.kv th { font-weight:500; color:var(--muted); }
.card { border:1px solid var(--line); border-radius:8px; padding:10px 14px; background:#fcfcfd; min-width:0; }
.card h3 { margin-top:4px; } .hash { word-break:break-all; }
.badge { display:inline-block; padding:0 7px; border-radius:9px; font-size:12px; font-weight:600; background:#eee; }
.w-trained, .w-retrained { background:#dcf3e3; color:#1c6b34; } .w-supernet { background:#e0ebff; color:#244f9e; }
.w-random-init { background:#fff0d6; color:#8a5200; }
pre.cmd { margin:2px 0; white-space:pre-wrap; word-break:break-all; background:#f2f4f6; padding:6px 8px;
border-radius:5px; }
pre.config { background:#f6f8fa; border:1px solid var(--line); border-radius:6px; padding:10px 12px; max-height:480px;
overflow:auto; }
"""

# Sorting (numeric-aware, asc/desc toggling, missing values last), the text filter, "front only", the
# #sort=COLUMN:asc|desc fragment, and, once loaded, how many images decoded (data-images-loaded/-total on body).

_CSS_MORE = """
.warn { background:#fff6e0; border:1px solid #f0d28a; border-radius:6px; padding:8px 12px; margin:8px 0; }
.warn ul { margin:4px 0 0; padding-left:20px; }
.swatch { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:6px; }
.iplot { width:100%; min-height:420px; } body.no-webgl .iplot { display:none; }
body.interactive figure:has(.iplot) img.static { display:none; }
figure:has(.iplot) { max-width:none; }
table.side th { white-space:nowrap; } table.side td { padding:3px 18px 3px 0; min-width:160px; }
.scroll.x { max-height:none; }
#trial-table tr.picked td { background:#ffe9a8 !important; }
.card.picked { outline:3px solid #f0b400; }
.picked-info { margin:0 0 8px; padding:6px 10px; background:#fffbe8; border:1px solid #f0d28a; border-radius:6px; }
h3.folder { font-size:14px; }
@media print {
  .iplot { display:none !important; }
  body.interactive figure:has(.iplot) img.static { display:block !important; }
  .scroll { max-height:none; overflow:visible; }
}
"""

# Sorting (numeric-aware, asc/desc toggling, missing values last), the text filter, the run filter, "front only",
# the #sort=COLUMN:asc|desc and #run=K fragments; hwnasShowTrial(run, number) (a click on a plotted point, or the
# #trial=RUN:NUMBER fragment) brings the trial's row into view and highlights it and its card; once loaded, how
# many images decoded (data-images-loaded/-total on body) and how many script errors there were (data-js-errors).
_JS = """
(function () {
  var table = document.getElementById('trial-table'), applyFilter = function () {};
  var filter = document.getElementById('trial-filter'), frontOnly = document.getElementById('front-only');
  var runFilter = document.getElementById('run-filter');
  if (table) {
    var tbody = table.tBodies[0], heads = table.tHead.rows[0].cells;
    var shown = document.getElementById('shown'), state = {key: null, desc: false};
    var value = function (row, i) {
      var c = row.cells[i];
      return c.hasAttribute('data-v') ? c.getAttribute('data-v') : c.textContent.trim();
    };
    var compare = function (a, b, numeric) {
      if (numeric) {
        var x = Number(a), y = Number(b);
        if (!isNaN(x) && !isNaN(y)) { return x - y; }
      }
      return a < b ? -1 : (a > b ? 1 : 0);
    };
    var sortBy = function (key, desc) {
      var idx = -1;
      for (var i = 0; i < heads.length; i++) { if (heads[i].getAttribute('data-key') === key) { idx = i; } }
      if (idx < 0) { return false; }
      var numeric = heads[idx].getAttribute('data-type') !== 'text';
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.sort(function (r, s) {
        var a = value(r, idx), b = value(s, idx);
        if (a === '' || b === '') { return (a === '') - (b === ''); }
        var d = compare(a, b, numeric);
        if (d === 0) {
          return (Number(r.getAttribute('data-run')) - Number(s.getAttribute('data-run')))
            || (Number(r.getAttribute('data-n')) - Number(s.getAttribute('data-n')));
        }
        return desc ? -d : d;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
      for (var j = 0; j < heads.length; j++) { heads[j].removeAttribute('aria-sort'); }
      heads[idx].setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      state = {key: key, desc: desc};
      table.setAttribute('data-sorted', key + ':' + (desc ? 'desc' : 'asc'));
      return true;
    };
    applyFilter = function () {
      var q = filter.value.trim().toLowerCase(), only = frontOnly.checked, n = 0;
      var run = runFilter ? runFilter.value : '';
      for (var i = 0; i < tbody.rows.length; i++) {
        var r = tbody.rows[i];
        var show = (!only || r.classList.contains('front')) && (!run || r.getAttribute('data-run') === run)
          && (!q || r.textContent.toLowerCase().indexOf(q) >= 0);
        r.hidden = !show;
        if (show) { n++; }
      }
      shown.textContent = n + ' of ' + tbody.rows.length + ' trials shown';
      table.setAttribute('data-shown', String(n));
    };
    for (var h = 0; h < heads.length; h++) {
      heads[h].addEventListener('click', function (ev) {
        var key = ev.currentTarget.getAttribute('data-key');
        var desc = state.key === key ? !state.desc : false;
        sortBy(key, desc);
        try { history.replaceState(null, '', '#sort=' + encodeURIComponent(key) + ':' + (desc ? 'desc' : 'asc')); }
        catch (e) { /* a file:// page may refuse: the view is sorted anyway */ }
      });
    }
    filter.addEventListener('input', applyFilter);
    frontOnly.addEventListener('change', applyFilter);
    if (runFilter) { runFilter.addEventListener('change', applyFilter); }
    var m = /(?:^#|&)sort=([^&]*)/.exec(location.hash);
    if (m) {
      var spec = decodeURIComponent(m[1]), cut = spec.lastIndexOf(':');
      var dir = cut >= 0 ? spec.slice(cut + 1) : '';
      if (dir === 'asc' || dir === 'desc') { sortBy(spec.slice(0, cut), dir === 'desc'); } else { sortBy(spec, false); }
    }
    var f = /(?:^#|&)run=([^&]*)/.exec(location.hash);
    if (f && runFilter) { runFilter.value = decodeURIComponent(f[1]); }
    applyFilter();
  }
  window.hwnasShowTrial = function (run, number) {
    var info = document.getElementById('picked');
    var row = document.getElementById('t-' + run + '-' + number);
    var old = document.querySelectorAll('.picked');
    for (var i = 0; i < old.length; i++) { old[i].classList.remove('picked'); }
    if (row) {
      if (row.hidden) {
        filter.value = ''; frontOnly.checked = false; if (runFilter) { runFilter.value = ''; }
        applyFilter();
      }
      row.classList.add('picked');
      row.scrollIntoView({block: 'center'});
      var link = row.querySelector('a[href^="#model-"]');
      var card = link ? document.getElementById(link.getAttribute('href').slice(1)) : null;
      if (card) { card.classList.add('picked'); }
      info.innerHTML = '';
      var arch = row.cells[runFilter ? 2 : 1].textContent.trim();
      var label = runFilter ? row.cells[0].textContent.trim() + ', ' : '';
      info.appendChild(document.createTextNode('trial ' + number + ' (' + label + 'arch ' + arch
        + ') is highlighted in the table. '));
      if (card) {
        var a = document.createElement('a'); a.href = '#' + card.id; a.textContent = 'its exported model\\'s card';
        info.appendChild(a);
      }
    } else if (info) {
      info.textContent = 'trial ' + number + ' is not in the table (it is limited for large runs; see the note).';
    }
    if (info) { info.hidden = false; }
    document.body.setAttribute('data-picked', run + ':' + number);
    return !!row;
  };
  var picked = /(?:^#|&)trial=(\\d+):(\\d+)/.exec(location.hash);  // #trial=RUN:NUMBER, as a click on its point
  if (picked) { window.hwnasShowTrial(picked[1], picked[2]); }
  window.addEventListener('load', function () {
    var imgs = document.images, ok = 0;
    for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; } }
    document.body.setAttribute('data-images-loaded', String(ok));
    document.body.setAttribute('data-images-total', String(imgs.length));
  });
})();
"""

# Counts the script errors from the first script on (data-js-errors on <html>, and on body once loaded).
_JS_ERRORS = """
window.hwnasErrors = [];
window.addEventListener('error', function (e) {
  window.hwnasErrors.push(String(e.message || e));
  document.documentElement.setAttribute('data-js-errors', String(window.hwnasErrors.length));
  document.documentElement.setAttribute('data-js-error', String(e.message || e).slice(0, 300));
});
window.addEventListener('load', function () {
  document.body.setAttribute('data-js-errors', String(window.hwnasErrors.length));
});
"""

# Draws each interactive plot from its JSON (script type=application/json id=fig-SLOT) once plotly.js is loaded;
# a click on a point whose customdata is [run, trial number] shows that trial. data-plots-drawn counts them.
# Without WebGL nothing is drawn (the static images stay). plotly.js compiles its WebGL shaders with Function():
# the page's Content-Security-Policy allows 'unsafe-eval' when it inlines plotly.js (checked: without it no plot).
_JS_PLOTS = """
(function () {
  if (!window.Plotly) { return; }
  var gl = null;
  try { var c = document.createElement('canvas'); gl = c.getContext('webgl') || c.getContext('experimental-webgl'); }
  catch (e) { gl = null; }
  if (!gl) {  // the plots draw with WebGL: without it, the static images stay
    document.body.setAttribute('data-plots-drawn', '0');
    document.body.classList.add('no-webgl');
    return;
  }
  var slots = document.querySelectorAll('.iplot[data-fig]'), drawn = 0;
  document.body.classList.add('interactive');
  for (var i = 0; i < slots.length; i++) {
    (function (div) {
      var spec = JSON.parse(document.getElementById('fig-' + div.getAttribute('data-fig')).textContent);
      Plotly.newPlot(div, spec.data, spec.layout, {responsive: true, displaylogo: false}).then(function () {
        drawn++;
        document.body.setAttribute('data-plots-drawn', String(drawn));
        div.on('plotly_click', function (ev) {
          var p = ev && ev.points && ev.points[0];
          if (p && p.customdata && p.customdata.length === 2) {
            window.hwnasShowTrial(p.customdata[0], p.customdata[1]);
          }
        });
      });
    })(slots[i]);
  }
})();
"""


def _figure_scripts(interactive: InteractiveFigures | None) -> str:
    """The plotting library (once) and each figure's JSON (``</`` escaped so that no text closes the script)."""
    if interactive is None:
        return ""
    data = "".join(f'<script type="application/json" id="fig-{_e(slot)}">{text.replace("</", "<" + chr(92) + "/")}'
                   "</script>\n" for slot, text in interactive.figures.items())
    return f"<script>{interactive.library}</script>\n{data}<script>{_JS_PLOTS}</script>\n"


def render_comparison(comparison: Comparison, interactive: InteractiveFigures | None = None) -> str:
    """The whole page as text: embedded styles and script, plots inlined (PNG data URIs; with ``interactive``,
    the plotting library once and each figure's JSON), every text from the runs HTML-escaped. One compared run
    gives the one-run page (its header, its models, latency validation and config); several give a header
    naming them and the shared reference, the runs side by side, and each run's models, validation and config."""
    runs = comparison.runs
    several = len(runs) > 1
    nav_items = [("fronts", "fronts"), ("progress", "progress"), ("genes", "genes")]
    nav_items += [("runs", "runs side by side")] if several else []
    nav_items += [("trials", "trials")]
    if several:
        nav_items += [(f"run-{k}", r.label) for k, r in enumerate(runs)]
    else:
        nav_items += [("models", "models"), ("latency-trust", "latency validation"), ("config", "config")]
    nav = "<nav>" + "".join(f'<a href="#{_e(a)}">{_e(t)}</a>' for a, t in nav_items) + "</nav>"
    if several:
        header = _header_many(comparison, interactive)
    else:
        header = (_header(runs[0].data, list(runs[0].front)).replace("</header>", "")
                  + _problems(comparison) + _interactive_note(interactive) + "</header>\n")
    fronts, progress = _fronts_section(comparison, interactive), _progress_section(comparison, interactive)
    # a single front plot and the progress curve side by side; several devices' plots take the whole width
    figures = (f'<div class="two">{fronts}{progress}</div>' if fronts.count("<img ") <= 1 and not several
               else fronts + progress)
    parts = [header, nav, figures, _genes_section(comparison, parallel_data(comparison), interactive)]
    if several:
        parts.append(_runs_section(comparison))
    parts.append(_trials_section(comparison))
    for k, run in enumerate(runs):
        prefix = f"{run.label}: " if several else ""
        end = f"-{k}" if several else ""
        if several:
            parts.append(f'<div id="run-{k}"></div>')
        parts += [_models_section(run, k, f"models{end}", prefix),
                  _trust_section(run.data, f"latency-trust{end}", prefix),
                  _config_section(run.data, f"config{end}", prefix)]
    title = (f"{_e(runs[0].data.name)}: hwnas run report" if not several
             else f"{len(runs)} runs compared: hwnas report")
    # plotly.js compiles its WebGL shaders with Function(): 'unsafe-eval' is allowed only when it is inlined
    evaluate = " 'unsafe-eval'" if interactive is not None else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data: blob:; "
            f"style-src 'unsafe-inline'; script-src 'unsafe-inline'{evaluate}\">"
            f"<title>{title}</title><style>{_CSS}{_CSS_MORE}</style><script>{_JS_ERRORS}</script></head>\n"
            f"<body><main>\n{''.join(parts)}</main>\n<script>{_JS}</script>\n{_figure_scripts(interactive)}"
            "</body></html>\n")


def render_html(data: ReportData, *, models_href: str = "models",
                interactive: InteractiveFigures | None = None) -> str:
    """The one-run page of ``data`` (:func:`render_comparison` of that run alone); ``models_href`` is its models/
    folder relative to where the page will be."""
    exports = []
    if data.cards or data.card_problems or data.export_info is not None or data.model_files is not None:
        exports.append(ExportFolder(path=Path(data.run_dir or ".") / "models", found_by="the run's models/",
                                    cards=list(data.cards), problems=list(data.card_problems), info=data.export_info,
                                    files=data.model_files, href=models_href))
    return render_comparison(Comparison.of([ComparedRun(label=data.name, data=data, exports=exports)]), interactive)
