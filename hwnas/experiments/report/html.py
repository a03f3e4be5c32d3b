"""``nas report RUN_DIR --html``: one self-contained HTML page of a run.

The page holds the run's summary (trial counts, front size, hypervolume and its reference point), a front plot
per device (each hardware objective against the first non-hardware one), the hypervolume of the search as it
went, every trial in a sortable, filterable table, a card per exported model, the latency tables' validation
figures and the resolved config. Nothing is fetched: the plots are inlined as ``data:image/png;base64`` and the
styles and the few lines of script are embedded, so the file can be mailed or archived on its own.

:func:`collect` reads a run directory into a :class:`ReportData`; :func:`render_html` turns one into the page's
text (pure: tests build a :class:`ReportData` by hand); :func:`write_html_report` does both and writes the file.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.experiments.export.card import ModelCard, cards_of, read_cards
from hwnas.experiments.report.summary import RunSummary, read_run, summary_of
from hwnas.experiments.report.trust import LatencyTrust, TrustEntry, describe_entry
from hwnas.experiments.rundir import check_run_dir
from hwnas.fileio import atomic_write, refuse_overwrite
from hwnas.objectives import (
    Constraint,
    IncrementalFront,
    Objective,
    ReferencePoint,
    Trial,
    hypervolume,
    is_hardware_metric,
    objective_matrix,
    pareto_front,
    reference_point,
)

__all__ = ["ReportData", "collect", "front_pairs", "hypervolume_progress", "read_cards", "render_html",
           "write_html_report"]

#: Card keys rendered in their own places; any other key is listed generically.
_KNOWN_CARD_KEYS = frozenset({
    "arch_id", "trial", "input_shape", "weights", "trained_weights", "weights_source", "params_m", "flops_m", "top1",
    "measured_metrics", "onnx", "formats", "latency",
})
_ONNX_KEYS = ("file", "opset", "batch", "simplified", "sha256", "max_abs_diff_vs_torch", "checked_inputs",
              "top1_heldout")


@dataclass
class ReportData:
    """Everything the page shows, read from a run directory by :func:`collect` (or built by hand in tests).

    Args:
        name: The run's name.
        trials: Every trial, in journal order.
        objectives: The experiment's objectives.
        constraints: Its constraints (relative ones resolved with the values the run measured).
        space: The search space's registered name.
        strategy: The strategy's registered name.
        budget: ``budget.trials``, or None.
        run_dir: The run directory, as the user named it.
        summary: The run's summary (:func:`hwnas.experiments.report.summary.read_summary`); None: computed from
            ``trials``, ``objectives``, ``constraints`` and ``trust``.
        cards: The exported models' cards, in the order :func:`read_cards` found them (their JSON objects are
            read with :meth:`ModelCard.from_dict`).
        card_problems: One line per card that could not be read.
        export_info: ``models/export.json`` without its ``models`` list (None when there is none).
        model_files: Names of the files in ``models/`` (None: do not check whether a card's files exist).
        trust: Latency metric to its validation figures, when there is no ``summary`` (``latency_trust``, or its
            JSON object; None or empty: no table); afterwards the summary's.
        config_text: The text of ``config.yaml``.
        env: The content of ``env.json``.
    """

    name: str
    trials: list[Trial]
    objectives: list[Objective]
    constraints: list[Constraint] = field(default_factory=list)
    space: str = ""
    strategy: str = ""
    budget: int | None = None
    run_dir: str = ""
    summary: RunSummary | None = None
    cards: list[ModelCard] = field(default_factory=list)
    card_problems: list[str] = field(default_factory=list)
    export_info: dict[str, Any] | None = None
    model_files: set[str] | None = None
    trust: LatencyTrust | None = None
    config_text: str | None = None
    env: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.cards = cards_of(self.cards)
        if self.summary is None:
            self.summary = summary_of(self.trials, self.objectives, self.constraints,
                                      latency_trust=LatencyTrust.of(self.trust))
        self.trust = self.summary.latency_trust

    @property
    def run_summary(self) -> RunSummary:
        assert self.summary is not None  # set by __post_init__
        return self.summary


# ---------------------------------------------------------------------------------------------- reading a run


def _read_json(path: Path) -> Any:
    """The parsed content of a JSON file, or None when it is missing or unreadable (the page says what it lacks)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def collect(run_dir: Path) -> ReportData:
    """Read a run directory (read-only) into a :class:`ReportData`; a :class:`RunDirectoryError` names what an
    incomplete one lacks."""
    run_dir = Path(run_dir)
    experiment, trials, summary = read_run(run_dir)
    cards, problems, info = read_cards(run_dir / "models")
    models = run_dir / "models"
    env = _read_json(run_dir / "env.json")
    cfg = experiment.config
    return ReportData(
        name=cfg.name, trials=sorted(trials, key=lambda t: t.number), objectives=list(experiment.objectives),
        constraints=list(experiment.constraints), space=cfg.space.name, strategy=cfg.strategy.name,
        budget=cfg.budget.trials, run_dir=str(run_dir), summary=summary, cards=cards, card_problems=problems,
        export_info=info, model_files={p.name for p in models.iterdir()} if models.is_dir() else None,
        config_text=(run_dir / "config.yaml").read_text(encoding="utf-8", errors="replace"),
        env=env if isinstance(env, dict) else None,
    )


def write_html_report(run_dir: Path, out: Path, *, force: bool = False) -> Path:
    """Write the page of ``run_dir`` to ``out`` (atomically); refuses to replace an existing ``out`` without
    ``force`` (checked before anything is read or written). The run directory is only read. Returns ``out``."""
    run_dir, out = Path(run_dir), Path(out)
    check_run_dir(run_dir)
    refuse_overwrite([out], force=force, own=("report.html",), own_run=run_dir)  # never another file of a run
    data = collect(run_dir)
    models_href = Path(os.path.relpath(run_dir.resolve() / "models", out.resolve().parent)).as_posix()
    atomic_write(out, render_html(data, models_href=models_href))
    return out


# ------------------------------------------------------------------------------------------------ the figures


def hypervolume_progress(trials: Sequence[Trial], objectives: Sequence[Objective],
                         reference: ReferencePoint) -> list[float] | None:
    """The hypervolume of the front of the first i trials (in ``trial.number`` order), for i = 1..n, against the
    fixed ``reference``; None when the reference is incomplete.

    Incremental: a trial joins a running non-dominated set (O(front)) and the hypervolume is recomputed only
    when that set changed, so thousands of trials take a fraction of a second.
    """
    if not reference.complete:
        return None
    ref = reference.point()
    ordered = sorted(trials, key=lambda t: t.number)
    if not ordered:
        return []
    points = objective_matrix(ordered, objectives)
    front = IncrementalFront(len(objectives))
    value, out = 0.0, []
    seen: set[str] = set()  # like pareto_front: the first ok trial of an architecture stands for it
    for t, p in zip(ordered, points):
        first = t.status == "ok" and t.arch.arch_id not in seen
        if first:
            seen.add(t.arch.arch_id)
        # a point that does not strictly dominate the reference adds nothing, and cannot dominate one that does
        if first and bool(np.all(p < ref)) and front.add(p):
            value = hypervolume(front.points, list(ref))
        out.append(value)
    return out


def _png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _device(metric: str) -> str:
    """Where a hardware metric is measured: the part after ``@``, or this host."""
    return metric.partition("@")[2] or "this host"


def front_pairs(objectives: Sequence[Objective]) -> list[tuple[Objective, Objective]]:
    """The objective pairs plotted: the first non-hardware objective against each hardware one, or the first two
    objectives when there is no such pair (none when there is a single objective)."""
    hardware = [o for o in objectives if is_hardware_metric(o.metric)]
    other = [o for o in objectives if not is_hardware_metric(o.metric)]
    if hardware and other:
        return [(other[0], h) for h in hardware]
    return [(objectives[0], objectives[1])] if len(objectives) >= 2 else []


def front_plots(data: ReportData) -> list[tuple[str, str, int]]:
    """One PNG per pair of :func:`front_pairs`: (caption, data URI, front size of the pair)."""
    from hwnas.experiments.report.front import plot_front

    out = []
    with tempfile.TemporaryDirectory(prefix="hwnas-report-") as tmp:
        for i, (a, b) in enumerate(front_pairs(data.objectives)):
            pair = [a, b]
            front = pareto_front(data.trials, pair)
            where = f" on {_device(b.metric)}" if is_hardware_metric(b.metric) else ""
            path = Path(tmp) / f"front{i}.png"
            plot_front(path, data.trials, front, pair, data.constraints,
                       title=f"{data.name}: {a.metric} vs {b.metric}{where}, {len(front)} on the front")
            if path.is_file():
                out.append((f"{a.metric} against {b.metric}{where}", _png_uri(path.read_bytes()), len(front)))
    return out


def progress_plot(values: Sequence[float], title: str) -> str:
    """The hypervolume after each trial as a step curve, improvements marked; a PNG data URI."""
    import io

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
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return _png_uri(buf.getvalue())


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
        ("trials", f"{len(data.trials)}{_e(budget)}: <span class=ok>{counts.ok} ok</span>, "
                   f"<span class=infeasible>{counts.infeasible} infeasible</span>, "
                   f"<span class=failed>{counts.failed} failed</span>"),
        ("objectives", ", ".join(f"{_e(o.metric)} ({arrow[o.direction]})" for o in data.objectives)),
        ("constraints", "; ".join(_e(c.describe()) for c in data.constraints) or "none"),
        ("Pareto front", f"{len(front)} architectures"),
        ("hypervolume", (f"<b>{_num(hv)}</b>" if hv is not None else "none: an objective has no reference point")
         + f" <span class=muted>({_e(summary.hypervolume_from)})</span>"),
        ("reference point", "<br>".join(f"{_e(m)} = {v}" for m, v in _reference_lines(summary))),
    ]
    return (f"<header><h1>Run report: {_e(data.name)}</h1>{_kv(facts, cls='kv facts')}</header>\n")


def _fronts_section(data: ReportData) -> str:
    if len(data.objectives) < 2:
        return _section("fronts", "Pareto front per device",
                        "<p>A single objective: there is no front to plot.</p>")
    if not data.trials:
        return _section("fronts", "Pareto front per device", "<p>No trial yet.</p>")
    plots = front_plots(data)
    figs = "".join(f'<figure><img src="{uri}" alt="{_e(cap)}" width="840" height="600">'
                   f"<figcaption>{_e(cap)}: {n} on this pair's front</figcaption></figure>" for cap, uri, n in plots)
    hw = [o for o in data.objectives if is_hardware_metric(o.metric)]
    note = ("<p>Each hardware objective against the first other objective; every trial in grey, infeasible ones as "
            "crosses, the front of the two objectives joined.</p>" if hw and len(plots) == len(hw) else
            "<p>No hardware objective: the first two objectives.</p>" if not hw else "")
    return _section("fronts", "Pareto front per device", note + f'<div class="plots">{figs}</div>')


def _progress_section(data: ReportData) -> str:
    ref = reference_point(data.objectives, data.constraints)
    values = hypervolume_progress(data.trials, data.objectives, ref)
    if values is None:
        body = (f"<p>No hypervolume to follow: {_e(', '.join(ref.missing()))} "
                f"{'has' if len(ref.missing()) == 1 else 'have'} no reference point (set objectives[i].reference in "
                "the experiment, or bound the metric with a constraint).</p>")
    elif not values:
        body = "<p>No trial yet.</p>"
    else:
        uri = progress_plot(values, f"{data.name}: hypervolume of the front of the first i trials")
        body = (f'<figure><img src="{uri}" alt="hypervolume against trials" width="770" height="396">'
                f"<figcaption>Hypervolume after each of {len(values)} trials against the run's fixed reference "
                f"point; final {_num(values[-1])}.</figcaption></figure>")
    return _section("progress", "Search progress", body)


def _trials_section(data: ReportData, front: Sequence[Trial]) -> str:
    from hwnas.experiments.report.front import metric_columns

    cols = metric_columns(data.trials, data.objectives)
    on_front = {id(t) for t in front}
    heads = [("number", "#"), ("arch_id", "arch_id"), ("status", "status"), *((c, c) for c in cols)]
    text_cols = {"arch_id", "status"}  # compared as text; the others as numbers
    th = "".join(f'<th data-key="{_e(k)}" data-type="{"text" if k in text_cols else "num"}"'
                 f'{" class=l" if k in text_cols or k == "number" else ""} title="sort by {_e(label)}">{_e(label)}</th>'
                 for k, label in heads)
    rows = []
    for t in data.trials:
        cells = [f'<td data-v="{t.number}">{t.number}</td>',
                 f'<td class="id" title="{_e(t.arch.arch_id)}">{_e(t.arch.arch_id)}</td>',
                 f'<td class="st {_e(t.status)}"' + (f' title="{_e(t.error)}"' if t.error else "")
                 + f">{_e(t.status)}</td>"]
        for c in cols:
            v = t.metrics.get(c)
            sort_value = repr(float(v)) if v is not None and math.isfinite(v) else ""  # missing: sorted last
            cells.append(f'<td data-v="{_e(sort_value)}">{_num(v) if v is not None else ""}</td>')
        cls = ' class="front"' if id(t) in on_front else ""
        rows.append(f'<tr{cls} data-n="{t.number}">{"".join(cells)}</tr>')
    controls = ('<div class="controls"><input id="trial-filter" type="search" placeholder="filter rows (any text)"> '
                '<label><input id="front-only" type="checkbox"> front only</label> '
                f'<span id="shown">{len(data.trials)} of {len(data.trials)} trials shown</span> '
                '<span class=muted>click a header to sort; <code>#sort=COLUMN:desc</code> in the address sorts at '
                'load</span></div>')
    table = (f'<div class="scroll"><table id="trial-table" class="data"><thead><tr>{th}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table></div>')
    return _section("trials", f"Every trial ({len(data.trials)})",
                    controls + table + '<p class=muted>Highlighted rows are on the Pareto front.</p>')


def _file_cell(name: object, data: ReportData, models_href: str) -> str:
    """A card's file name, linked (relative to the page) when the file is in models/, marked when missing."""
    if not isinstance(name, str) or not name:
        return _generic(name)
    if data.model_files is None:
        return f"<code>{_e(name)}</code>"
    if name in data.model_files:
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


def _onnx_table(onnx: object, data: ReportData, models_href: str) -> str:
    if not isinstance(onnx, Mapping):
        return _generic(onnx)
    fmt = {"max_abs_diff_vs_torch": ".2e", "top1_heldout": ".4f"}
    rows = []
    for k in _ONNX_KEYS:
        if k not in onnx:
            continue
        v = onnx[k]
        if k == "file":
            cell = _file_cell(v, data, models_href)
        elif k == "sha256":
            cell = f'<code class="hash">{_e(v)}</code>'
        elif isinstance(v, float):
            cell = _num(v, fmt.get(k, ".4g"))
        else:
            cell = _generic(v)
        rows.append((_e(k), cell))
    rows += [(_e(k), _generic(v)) for k, v in onnx.items() if k not in _ONNX_KEYS]
    return _kv(rows, cls="kv small")


def _formats_table(formats: object, data: ReportData, models_href: str) -> str:
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
            result = '<span class="ok">written</span> ' + _file_cell(d.get("file", d.get("engine")), data, models_href)
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


def _card(card: ModelCard, data: ReportData, models_href: str) -> str:
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
    if data.model_files is not None and (onnx_name or f"{arch_id}.onnx") not in data.model_files:
        left.append(f'<p class="failed">{_e(onnx_name or arch_id + ".onnx")} is not in models/</p>')
    if card.measured_metrics is not None:
        left.append("<h4>Measured by the search</h4>"
                    + _kv(((_e(k), _num(v)) for k, v in card.measured_metrics.items()), cls="kv small"))
    elif "measured_metrics" in raw:
        left.append("<h4>Measured by the search</h4>" + _generic(raw["measured_metrics"]))
    if card.onnx is not None or "onnx" in raw:
        left.append("<h4>ONNX</h4>" + _onnx_table(card.onnx if card.onnx is not None else raw["onnx"], data,
                                                  models_href))
    if card.formats is not None or "formats" in raw:
        right.append("<h4>Other formats</h4>" + _formats_table(card.formats if card.formats is not None
                                                               else raw["formats"], data, models_href))
    if card.latency is not None or "latency" in raw:
        right.append("<h4>Latency</h4>" + _latency_table(list(card.latency) if card.latency is not None
                                                         else raw["latency"]))
    shown = card.to_dict()
    if any(k not in _KNOWN_CARD_KEYS for k in shown):
        right.append("<h4>Other fields</h4>" + _generic_kv(shown, skip=_KNOWN_CARD_KEYS))
    return (f'<article class="card" id="model-{_e(arch_id)}">{head}<div class="card-body">'
            f'<div>{"".join(left)}</div><div>{"".join(right)}</div></div></article>')


def _models_section(data: ReportData, models_href: str) -> str:
    body = []
    if data.export_info:
        body.append(_generic_kv(data.export_info))
    if data.card_problems:
        body.append("<ul>" + "".join(f'<li class="failed">{_e(p)}</li>' for p in data.card_problems) + "</ul>")
    if data.cards:
        body.append('<div class="cards">' + "".join(_card(c, data, models_href) for c in data.cards) + "</div>")
    else:
        body.append("<p>No exported model in this run (models/ holds no card; <code>nas export RUN_DIR</code> "
                    "writes them).</p>")
    return _section("models", f"Exported models ({len(data.cards)})", "".join(body))


def _trust_section(data: ReportData) -> str:
    trust = data.run_summary.latency_trust
    if not trust:
        return _section("latency-trust", "Latency tables' validation", "<p>No latency table in this run.</p>")
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
    return _section("latency-trust", "Latency tables' validation",
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


def _config_section(data: ReportData) -> str:
    body = []
    env = data.env
    if env:
        facts = [(_e(k), _generic(env[k])) for k in ("started", "host", "cpu", "cpu_cores", "torch_threads",
                                                        "cuda_devices", "python", "platform", "git_sha") if k in env]
        if isinstance(env.get("resumes"), list):
            facts.append(("resumes", _e(len(env["resumes"]))))
        versions = env.get("versions")
        if isinstance(versions, dict):
            facts.append(("versions", ", ".join(f"{_e(k)}&nbsp;{_e(v) if v else '<span class=muted>no</span>'}"
                                                for k, v in versions.items())))
        body.append("<h3>Environment (env.json)</h3>" + _kv(facts, cls="kv small"))
    else:
        body.append("<p class=muted>No env.json in this run.</p>")
    body.append("<h3>config.yaml</h3>" + (f'<pre class="config">{_e(data.config_text)}</pre>'
                                           if data.config_text is not None else "<p class=muted>none</p>"))
    return _section("config", "Resolved config", "".join(body))


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
_JS = """
(function () {
  var table = document.getElementById('trial-table');
  if (table) {
    var tbody = table.tBodies[0], heads = table.tHead.rows[0].cells;
    var filter = document.getElementById('trial-filter'), frontOnly = document.getElementById('front-only');
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
        if (d === 0) { return Number(r.getAttribute('data-n')) - Number(s.getAttribute('data-n')); }
        return desc ? -d : d;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
      for (var j = 0; j < heads.length; j++) { heads[j].removeAttribute('aria-sort'); }
      heads[idx].setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      state = {key: key, desc: desc};
      table.setAttribute('data-sorted', key + ':' + (desc ? 'desc' : 'asc'));
      return true;
    };
    var applyFilter = function () {
      var q = filter.value.trim().toLowerCase(), only = frontOnly.checked, n = 0;
      for (var i = 0; i < tbody.rows.length; i++) {
        var r = tbody.rows[i];
        var show = (!only || r.classList.contains('front')) && (!q || r.textContent.toLowerCase().indexOf(q) >= 0);
        r.hidden = !show;
        if (show) { n++; }
      }
      shown.textContent = n + ' of ' + tbody.rows.length + ' trials shown';
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
    var m = /(?:^#|&)sort=([^&]*)/.exec(location.hash);
    if (m) {
      var spec = decodeURIComponent(m[1]), cut = spec.lastIndexOf(':');
      var dir = cut >= 0 ? spec.slice(cut + 1) : '';
      if (dir === 'asc' || dir === 'desc') { sortBy(spec.slice(0, cut), dir === 'desc'); } else { sortBy(spec, false); }
    }
    applyFilter();
  }
  window.addEventListener('load', function () {
    var imgs = document.images, ok = 0;
    for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; } }
    document.body.setAttribute('data-images-loaded', String(ok));
    document.body.setAttribute('data-images-total', String(imgs.length));
  });
})();
"""


def render_html(data: ReportData, *, models_href: str = "models") -> str:
    """The whole page as text: embedded styles and script, plots inlined as PNG data URIs, every text from the
    run HTML-escaped. ``models_href`` is the models/ folder relative to where the page will be."""
    front = list(data.run_summary.front)
    nav = ('<nav><a href="#fronts">fronts</a><a href="#progress">progress</a><a href="#trials">trials</a>'
           '<a href="#models">models</a><a href="#latency-trust">latency validation</a><a href="#config">config</a>'
           "</nav>")
    fronts, progress = _fronts_section(data), _progress_section(data)
    # a single front plot and the progress curve side by side; several devices' plots take the whole width
    figures = (f'<div class="two">{fronts}{progress}</div>' if fronts.count("<img ") <= 1
               else fronts + progress)
    body = "".join([
        _header(data, front), nav, figures, _trials_section(data, front), _models_section(data, models_href),
        _trust_section(data), _config_section(data),
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
            f"<title>{_e(data.name)}: hwnas run report</title><style>{_CSS}</style></head>\n"
            f"<body><main>\n{body}</main>\n<script>{_JS}</script>\n</body></html>\n")
