"""What ``nas report RUN [RUN ...] --html`` compares, as plain data (no HTML, no plotting library).

:func:`compare_runs` reads run directories (each checked before any is read) into a :class:`Comparison`: the
runs whose objectives match (the comparable ones: the largest group with the same metrics and directions, the
first run's group on a tie), the others named with why, one hypervolume reference for every compared run
(:func:`shared_reference`), each run's hypervolume history against it, and each run's export folders
(:func:`export_folders`: ``RUN/models``, the folders its own ``export.json`` lists under ``exports``, and any
given with ``--exports``), an export of another run named as such (:func:`foreign_export`).

Large runs stay drawable: :func:`drawn_points` keeps every front member and at most :data:`MAX_POINTS` dominated
trials per run and device, a seeded sample; :func:`table_trials` limits the table to :data:`TABLE_ROWS` rows per
run (the front first); :func:`parallel_trials` at most :data:`PARALLEL_LINES` lines in all. The page says so
wherever it sampled or limited.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hwnas.errors import ConfigError
from hwnas.experiments.export.card import EXPORTS_KEY, INDEX, ModelCard, read_cards
from hwnas.experiments.report.summary import RunSummary, read_run, summary_of
from hwnas.experiments.report.trust import LatencyTrust
from hwnas.experiments.rundir import check_run_dir
from hwnas.objectives import (
    Constraint,
    IncrementalFront,
    Objective,
    ReferencePoint,
    Trial,
    hypervolume,
    is_hardware_metric,
    objective_matrix,
    reference_point,
)

__all__ = ["MAX_POINTS", "PALETTE", "PARALLEL_LINES", "SAMPLE_SEED", "TABLE_ROWS", "ComparedRun", "Comparison",
           "ExportFolder", "InteractiveFigures", "ParallelData", "ReportData", "collect", "compare_runs",
           "drawn_points", "export_folders", "foreign_export", "front_pairs", "hypervolume_progress", "parallel_data",
           "parallel_trials", "shared_reference", "table_trials"]

#: Per run and device, the dominated trials drawn beyond this many are a seeded sample of this many.
MAX_POINTS = 4000
#: Per run, the trial table holds at most this many rows: the front, then the first trials in journal order.
TABLE_ROWS = 2000
#: The parallel-coordinates plot draws at most this many trials in all (every front member, then a sample).
PARALLEL_LINES = 3000
#: The seed of every sample the page draws (the same page for the same runs).
SAMPLE_SEED = 0
#: One colour per compared run (cycled), the same in the static and the interactive plots.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")

JsonObject = Mapping[str, object]


@dataclass
class ReportData:
    """Everything the page shows of one run, read from a run directory by :func:`collect` (or built by hand in
    tests).

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
    export_info: JsonObject | None = None
    model_files: set[str] | None = None
    trust: LatencyTrust | Mapping[str, object] | None = None
    config_text: str | None = None
    env: JsonObject | None = None

    def __post_init__(self) -> None:
        from hwnas.experiments.export.card import cards_of

        self.cards = cards_of(self.cards)
        if self.summary is None:
            self.summary = summary_of(self.trials, self.objectives, self.constraints,
                                      latency_trust=LatencyTrust.of(self.trust))
        self.trust = self.summary.latency_trust

    @property
    def run_summary(self) -> RunSummary:
        assert self.summary is not None  # set by __post_init__
        return self.summary


def _read_json(path: Path) -> object:
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


# ------------------------------------------------------------------------------------------------ the figures


def front_pairs(objectives: Sequence[Objective]) -> list[tuple[Objective, Objective]]:
    """The objective pairs plotted: the first non-hardware objective against each hardware one, or the first two
    objectives when there is no such pair (none when there is a single objective)."""
    hardware = [o for o in objectives if is_hardware_metric(o.metric)]
    other = [o for o in objectives if not is_hardware_metric(o.metric)]
    if hardware and other:
        return [(other[0], h) for h in hardware]
    return [(objectives[0], objectives[1])] if len(objectives) >= 2 else []


def device_of(metric: str) -> str:
    """Where a hardware metric is measured: the part after ``@``, or this host."""
    return metric.partition("@")[2] or "this host"


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
        first = t.status == "ok" and not t.partial and t.arch.arch_id not in seen
        if first:
            seen.add(t.arch.arch_id)
        # a point that does not strictly dominate the reference adds nothing, and cannot dominate one that does
        if first and bool(np.all(p < ref)) and front.add(p):
            value = hypervolume(front.points, list(ref))
        out.append(value)
    return out


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def drawn_points(trials: Sequence[Trial], x: str, y: str, front: Sequence[Trial], *,
                 limit: int = MAX_POINTS, seed: int = SAMPLE_SEED) -> tuple[list[Trial], int]:
    """The dominated trials (ok or infeasible, not on ``front``) drawn on the (``x``, ``y``) plot, in journal
    order: all of them, or a sample of ``limit`` drawn with ``numpy.random.default_rng(seed)``; and how many there
    were."""
    on_front = {id(t) for t in front}
    rest = [t for t in trials if id(t) not in on_front and t.status != "failed"
            and _finite(t.metrics.get(x)) and _finite(t.metrics.get(y))]
    if len(rest) <= limit:
        return rest, len(rest)
    keep = np.sort(np.random.default_rng(seed).choice(len(rest), size=limit, replace=False))
    return [rest[int(i)] for i in keep], len(rest)


def table_trials(trials: Sequence[Trial], front: Sequence[Trial], limit: int = TABLE_ROWS) -> list[Trial]:
    """The trials of one run the table holds, in journal order: all of them, or when there are more than ``limit``,
    every front member and then the first trials in journal order up to ``limit`` rows."""
    if len(trials) <= limit:
        return list(trials)
    on_front = {id(t) for t in front}
    room = max(limit - len(on_front), 0)
    kept = {id(t) for t in front} | {id(t) for t in [t for t in trials if id(t) not in on_front][:room]}
    return [t for t in trials if id(t) in kept]


def flat_genes(trial: Trial) -> dict[str, float]:
    """A trial's genes as ``NAME`` (ints) and ``NAME.i`` (the items of a sequence gene) -> value."""
    out: dict[str, float] = {}
    for name, value in trial.arch.genes.items():
        if isinstance(value, tuple):
            out.update({f"{name}.{i}": float(v) for i, v in enumerate(value)})
        elif isinstance(value, (int, float)):
            out[name] = float(value)
    return out


def parallel_trials(runs: Sequence[tuple[Sequence[Trial], Sequence[Trial]]], metrics: Sequence[str], *,
                    limit: int = PARALLEL_LINES, seed: int = SAMPLE_SEED) -> tuple[list[tuple[int, Trial]], int]:
    """The (run index, trial) lines of the parallel-coordinates plot from each run's (trials, front): ok trials
    with every metric finite; every front member, and the others (a seeded sample when there are more than
    ``limit`` lines in all); and how many there were."""
    front: list[tuple[int, Trial]] = []
    rest: list[tuple[int, Trial]] = []
    for k, (trials, on) in enumerate(runs):
        ids = {id(t) for t in on}
        for t in trials:
            if t.status == "ok" and not t.partial and all(_finite(t.metrics.get(m)) for m in metrics):
                (front if id(t) in ids else rest).append((k, t))
    total = len(front) + len(rest)
    room = max(limit - len(front), 0)
    if len(rest) > room:
        keep = np.sort(np.random.default_rng(seed).choice(len(rest), size=room, replace=False))
        rest = [rest[int(i)] for i in keep]
    return front + rest, total


# ---------------------------------------------------------------------------------------------- the exports


@dataclass
class ExportFolder:
    """One export folder shown with a run: its cards and index, how it was found, and whether it is another
    run's export.

    Args:
        path: The folder.
        found_by: How the report found it (``RUN/models``, listed in the run's ``export.json``, ``--exports``).
        cards: Its model cards (:func:`hwnas.experiments.export.card.read_cards`).
        problems: One line per card that could not be read.
        info: Its ``export.json`` without the ``models`` list (None: there is none).
        files: The names of the files it holds (None: not a folder).
        foreign: Why it is an export of another run (None: it is this run's, or nothing says otherwise).
        href: The folder relative to the page (set by the writer; None: its path as found).
    """

    path: Path
    found_by: str
    cards: list[ModelCard] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    info: JsonObject | None = None
    files: set[str] | None = None
    foreign: str | None = None
    href: str | None = None

    @classmethod
    def read(cls, path: Path, found_by: str) -> ExportFolder:
        cards, problems, info = read_cards(path)
        files = {p.name for p in path.iterdir()} if path.is_dir() else None
        if files is None:
            problems = [f"{path} is not a folder (any more)", *problems]
        return cls(path=path, found_by=found_by, cards=cards, problems=problems, info=info, files=files)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def foreign_export(folder: ExportFolder, run_dir: Path, trials: Sequence[Trial]) -> str | None:
    """Why ``folder`` is an export of another run than ``run_dir`` (None when it is this run's, or nothing says
    otherwise).

    The cards decide: each card's architecture id against the run's trial of the card's trial number (or, without
    a trial number, any of its trials); a card that is not this run's trial makes the folder another run's. Only a
    folder without cards is judged by the run its ``export.json`` names (``run``, a path as the export was given
    it, read relative to the working directory when relative): another existing folder than ``run_dir``. (A run
    folder copied elsewhere keeps the old path in its export.json, and its cards still match.)
    """
    recorded = (folder.info or {}).get("run")
    named_other: str | None = None
    if isinstance(recorded, str) and recorded:
        where = Path(recorded)
        if not _same_folder(where, run_dir) and where.is_dir():
            named_other = recorded
    by_number = {t.number: t.arch.arch_id for t in trials}
    ids = set(by_number.values())
    cards = [c for c in folder.cards if c.arch_id]
    strangers = [c for c in cards if (c.trial is not None and by_number.get(c.trial) != c.arch_id)
                 or (c.trial is None and c.arch_id not in ids)]
    if not strangers and (cards or named_other is None):
        return None
    why = []
    if named_other is not None:
        why.append(f"its {INDEX} names the run {named_other}")
    if strangers:
        c = strangers[0]
        at = f" as trial {c.trial}" if c.trial is not None else ""
        why.append(f"{len(strangers)} of its {len(cards)} models are not this run's trials ({c.arch_id}{at} is not)")
    return f"{folder.path} is an export of another run than {run_dir}: " + "; ".join(why)


def _listed_exports(run_dir: Path, info: JsonObject | None) -> tuple[list[Path], list[str]]:
    """The folders the run's own ``models/export.json`` lists under :data:`EXPORTS_KEY` (relative to the run
    folder, or absolute), and one line per entry that cannot be read."""
    listed = (info or {}).get(EXPORTS_KEY)
    if listed is None:
        return [], []
    if not isinstance(listed, list):
        return [], [f"{run_dir / 'models' / INDEX}: {EXPORTS_KEY} is not a list of folders; ignored"]
    out, problems = [], []
    for entry in listed:
        raw = entry.get("path") if isinstance(entry, Mapping) else entry
        if not isinstance(raw, str) or not raw:
            problems.append(f"{run_dir / 'models' / INDEX}: {EXPORTS_KEY} entry {entry!r} is not a folder path")
            continue
        path = Path(raw) if Path(raw).is_absolute() else run_dir / raw
        if not path.is_dir():
            created = entry.get("created") if isinstance(entry, Mapping) else None
            when = f" (exported {created})" if isinstance(created, str) else ""
            state = "is not a folder" if path.exists() else "is missing (moved or deleted)"
            problems.append(f"{run_dir / 'models' / INDEX} lists the export folder {raw}{when}, which {state}; "
                            "not shown (nas report --exports DIR reads it where it is now)")
            continue
        out.append(path)
    return out, problems


def export_folders(run_dir: Path, data: ReportData) -> tuple[list[ExportFolder], list[str]]:
    """A run's own export folders: ``RUN/models`` (when it exists) and those its ``export.json`` lists under
    :data:`EXPORTS_KEY`; and one line per listed folder that could not be read."""
    out = []
    models = run_dir / "models"
    if models.is_dir():
        out.append(ExportFolder(path=models, found_by="the run's models/", cards=list(data.cards),
                                problems=list(data.card_problems), info=data.export_info, files=data.model_files))
    listed, problems = _listed_exports(run_dir, data.export_info)
    for path in listed:
        if not any(_same_folder(path, f.path) for f in out):
            out.append(ExportFolder.read(path, found_by=f"listed in {run_dir / 'models' / INDEX}"))
    for f in out:
        f.foreign = foreign_export(f, run_dir, data.trials)
    return out, problems


# ---------------------------------------------------------------------------------------------- the comparison


@dataclass
class ComparedRun:
    """One run of the page: its label (unique on the page), its data and its export folders."""

    label: str
    data: ReportData
    exports: list[ExportFolder] = field(default_factory=list)

    @property
    def front(self) -> tuple[Trial, ...]:
        return self.data.run_summary.front


@dataclass
class Comparison:
    """What the page compares.

    Args:
        runs: The compared runs (the same objectives), in the order given.
        objectives: Their objectives (the first compared run's order).
        reference: The one hypervolume reference of every compared run (:func:`shared_reference`).
        histories: Per compared run, its hypervolume after each trial against ``reference`` (None: incomplete).
        left_out: Runs not compared (other objectives), each with a line saying why.
        notes: Lines the page and stderr show (export folders of another run, unreadable listings).
    """

    runs: list[ComparedRun]
    objectives: tuple[Objective, ...]
    reference: ReferencePoint
    histories: list[list[float] | None]
    left_out: list[tuple[ComparedRun, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, runs: Sequence[ComparedRun], left_out: Sequence[tuple[ComparedRun, str]] = (),
           notes: Sequence[str] = ()) -> Comparison:
        """The comparison of ``runs`` (which share their objectives): the shared reference and the histories."""
        objectives = tuple(runs[0].data.objectives)
        reference = shared_reference([r.data for r in runs], objectives)
        histories = [hypervolume_progress(r.data.trials, objectives, reference) for r in runs]
        return cls(runs=list(runs), objectives=objectives, reference=reference, histories=histories,
                   left_out=list(left_out), notes=list(notes))


@dataclass(frozen=True)
class InteractiveFigures:
    """The page's interactive plots, made by :func:`hwnas.visualization.comparison_figures`: the plotting
    library's script (inlined once) and, per plot slot (``front-0``, ``progress``, ``genes``), the figure as JSON
    text."""

    library: str
    figures: Mapping[str, str]


def _objectives_key(objectives: Sequence[Objective]) -> frozenset[tuple[str, str]]:
    return frozenset((o.metric, o.direction) for o in objectives)


def describe_objectives(objectives: Sequence[Objective]) -> str:
    return ", ".join(f"{o.metric} ({o.direction})" for o in objectives)


def shared_reference(runs: Sequence[ReportData], objectives: Sequence[Objective]) -> ReferencePoint:
    """One hypervolume reference for every compared run, per objective:

    - the value every run's own reference point gives it (:func:`hwnas.objectives.reference_point`: the
      objective's ``reference``, a constraint bound, or the metric's natural bound), when they all give the same;
    - else, with several runs, derived from every compared run's ok trials: the worst value among them, moved a
      tenth of their range beyond it (the source says so, and why: the runs' references differ, or none fixes one);
    - else (one run without a reference for it) none, as the run's own summary says.
    """
    own = []
    for data in runs:
        by_metric = {o.metric: o for o in data.objectives}
        mine = [by_metric.get(o.metric, o) for o in objectives]
        own.append(reference_point(mine, data.constraints))
    values: list[float | None] = []
    sources: list[str] = []
    for i, o in enumerate(objectives):
        given = [r.values[i] for r in own]
        if given[0] is not None and all(v == given[0] for v in given):
            values.append(given[0])
            sources.append(own[0].sources[i] + (" (the same in every compared run)" if len(runs) > 1 else ""))
            continue
        if len(runs) == 1:
            values.append(None)
            sources.append(own[0].sources[i])
            continue
        seen = np.array([o.to_minimise(float(t.metrics[o.metric])) for data in runs for t in data.trials
                         if t.status == "ok" and not t.partial and _finite(t.metrics.get(o.metric))],
                        dtype=float)
        why = ("the runs' own references differ (" + ", ".join("none" if v is None else f"{v:g}" for v in given)
               + ")") if any(v is not None for v in given) else "no compared run fixes one"
        if not len(seen):
            values.append(None)
            sources.append(f"none: {why}, and no compared run has an ok trial with {o.metric}")
            continue
        worst, span = float(seen.max()), float(seen.max() - seen.min())
        step = 0.1 * span if span > 0 else (0.1 * abs(worst) or 1.0)
        value = worst + step
        values.append(value if o.direction == "min" else -value)
        sources.append(f"derived from the {len(seen)} ok trials of the {len(runs)} compared runs: their worst "
                       f"{o.metric} ({worst if o.direction == 'min' else -worst:.6g}) moved a tenth of their range "
                       f"beyond it, as {why}")
    return ReferencePoint(tuple(values), tuple(sources), tuple(objectives))


def _labels(run_dirs: Sequence[Path]) -> list[str]:
    """A label per run: its folder's name, or the path as given when two share a name."""
    names = [p.name or str(p) for p in run_dirs]
    return [n if names.count(n) == 1 else str(p) for n, p in zip(names, run_dirs)]


def check_inputs(run_dirs: Sequence[Path], exports: Sequence[Path] = ()) -> None:
    """Before anything is read: every run directory is one (:func:`check_run_dir`: one line naming the first that
    is not), and every ``--exports`` folder is a folder."""
    if not run_dirs:
        raise ConfigError("name at least one run directory")
    for run_dir in run_dirs:
        check_run_dir(run_dir)
    for folder in exports:
        if not folder.is_dir():
            raise ConfigError(f"--exports {folder}: no such folder")


def compare_runs(run_dirs: Sequence[Path], exports: Sequence[Path] = ()) -> Comparison:
    """Read ``run_dirs`` (read-only; :func:`check_inputs` first) into a :class:`Comparison`.

    Each ``--exports`` folder goes with the first run it is not foreign to (:func:`foreign_export`), else with the
    first run, named as another run's export.
    """
    run_dirs = [Path(p) for p in run_dirs]
    exports = [Path(p) for p in exports]
    check_inputs(run_dirs, exports)
    runs: list[ComparedRun] = []
    notes: list[str] = []
    for label, run_dir in zip(_labels(run_dirs), run_dirs):
        data = collect(run_dir)
        folders, problems = export_folders(run_dir, data)
        notes += problems
        runs.append(ComparedRun(label=label, data=data, exports=folders))
    for path in exports:
        owner = None
        folder = ExportFolder.read(path, found_by="--exports")
        for run, run_dir in zip(runs, run_dirs):
            if any(_same_folder(path, f.path) for f in run.exports):
                owner = run
                break
            if foreign_export(folder, run_dir, run.data.trials) is None:
                owner = run
                folder.foreign = None
                run.exports.append(folder)
                break
        if owner is None:
            folder.foreign = foreign_export(folder, run_dirs[0], runs[0].data.trials)
            runs[0].exports.append(folder)
    for run in runs:
        notes += [f.foreign for f in run.exports if f.foreign]
    # the comparable runs: the largest group sharing objectives (the first run's group on a tie)
    keys = [_objectives_key(r.data.objectives) for r in runs]
    best = max(keys, key=lambda k: (keys.count(k), -keys.index(k)))
    compared = [r for r, k in zip(runs, keys) if k == best]
    shown = describe_objectives(compared[0].data.objectives)
    left_out = [(r, f"{r.label} ({r.data.run_dir}) is not compared: its objectives "
                    f"{describe_objectives(r.data.objectives)} are not the compared runs' {shown}")
                for r, k in zip(runs, keys) if k != best]
    return Comparison.of(compared, left_out=left_out, notes=notes)


@dataclass(frozen=True)
class ParallelData:
    """The lines of the parallel-coordinates plot (:func:`parallel_data`).

    Args:
        genes: The gene axes (``NAME``, ``NAME.i`` for a sequence gene's items), naturally sorted.
        metrics: The metric axes (the objectives).
        values: One row per line: the genes (-1 where a trial lacks one) then the metrics.
        runs: Per line, the index of its run in the comparison.
        trials: Per line, its trial.
        total: How many lines there were before sampling (:func:`parallel_trials`).
    """

    genes: list[str]
    metrics: list[str]
    values: np.ndarray
    runs: list[int]
    trials: list[Trial]
    total: int


def _natural(name: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in name.split("."))


def parallel_data(comparison: Comparison) -> ParallelData | None:
    """Genes against the objectives, one line per ok trial of every compared run (at most
    :data:`PARALLEL_LINES`: every front member, then a seeded sample); None when there is no such trial."""
    metrics = [o.metric for o in comparison.objectives]
    lines, total = parallel_trials([(r.data.trials, r.front) for r in comparison.runs], metrics)
    if not lines:
        return None
    rows = [flat_genes(t) for _, t in lines]
    genes = sorted({k for r in rows for k in r}, key=_natural)
    values = np.array([[r.get(g, -1.0) for g in genes] + [float(t.metrics[m]) for m in metrics]
                       for r, (_, t) in zip(rows, lines)], dtype=float).reshape(len(lines), len(genes) + len(metrics))
    return ParallelData(genes=genes, metrics=metrics, values=values, runs=[k for k, _ in lines],
                        trials=[t for _, t in lines], total=total)
