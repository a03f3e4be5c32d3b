"""Run outputs: pareto.csv, pareto.png, and the front as a table."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.fileio import atomic_write
from hwnas.objectives import Constraint, Objective, ReferencePoint, Trial, hypervolume, objective_matrix

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.table import Table

    from hwnas.experiments.report.drawer import PlotDrawer


def metric_columns(trials: Sequence[Trial], objectives: Sequence[Objective]) -> list[str]:
    """Objective metrics first, then the other metrics in sorted order."""
    first = [o.metric for o in objectives]
    rest = sorted({m for t in trials for m in t.metrics} - set(first))
    return first + rest


def write_front_csv(run_dir: Path, front: Sequence[Trial], objectives: Sequence[Objective]) -> None:
    """pareto.csv: one row per front member (pareto.json, the same with the full architectures and the run's
    figures, is :func:`hwnas.experiments.report.summary.write_pareto`'s)."""
    cols = metric_columns(front, objectives)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["number", "arch_id", *cols])
    for t in front:
        w.writerow([t.number, t.arch.arch_id, *(f"{t.metrics[c]:.6g}" if c in t.metrics else "" for c in cols)])
    atomic_write(run_dir / "pareto.csv", buf.getvalue())


def _label(metric: str) -> str:
    units = {"_ms": "ms", "_m": "millions", "_mb": "MB", "_mj": "mJ", "_s": "s"}
    base, _, device = metric.partition("@")
    for suffix, unit in units.items():
        if base.endswith(suffix):
            name = base[: -len(suffix)].replace("_", " ")
            return f"{name} ({unit})" + (f" on {device}" if device else "")
    if base == "top1":
        return "top-1 accuracy (held-out)" + (f" on {device}" if device else "")
    return metric


@dataclass(frozen=True)
class FrontPlot:
    """What ``pareto.png`` shows, as plain data: the points of each kind on the plotted pair of objectives, the
    constraint lines and the labels."""

    title: str
    x_label: str
    y_label: str
    ok: tuple[list[float], list[float]]
    infeasible: tuple[list[float], list[float]]
    infeasible_count: int
    front: tuple[list[float], list[float]]
    lines: list[tuple[str, float, str]]  # ("v" or "h", where, label)


def front_plot(trials: Sequence[Trial], front: Sequence[Trial], objectives: Sequence[Objective],
               constraints: Sequence[Constraint], title: str) -> FrontPlot | None:
    """What :func:`plot_front` draws: the first two objectives (the first on the y axis when it is maximised, as
    accuracy usually is); None with fewer than two objectives."""
    if len(objectives) < 2:
        return None
    a, b = objectives[0], objectives[1]
    x_obj, y_obj = (b, a) if a.direction == "max" else (a, b)

    def xy(ts: Sequence[Trial]) -> tuple[list[float], list[float]]:
        pts = [(t.metrics[x_obj.metric], t.metrics[y_obj.metric]) for t in ts
               if x_obj.metric in t.metrics and y_obj.metric in t.metrics]
        return [float(p[0]) for p in pts], [float(p[1]) for p in pts]

    lines = []
    for c in constraints:
        for bound in (c.max, c.min):
            if bound is not None and c.metric in (x_obj.metric, y_obj.metric):
                lines.append(("v" if c.metric == x_obj.metric else "h", float(bound), f"constraint {c.describe()}"))
    better = {"min": "  (lower is better)", "max": "  (higher is better)"}
    infeasible = [t for t in trials if t.status == "infeasible" and not t.partial]
    return FrontPlot(title=title, x_label=_label(x_obj.metric) + better[x_obj.direction],
                     y_label=_label(y_obj.metric) + better[y_obj.direction],
                     ok=xy([t for t in trials if t.status == "ok" and not t.partial]),  # lower rungs: other figures
                     infeasible=xy(infeasible),
                     infeasible_count=len(infeasible),
                     front=xy(sorted(front, key=lambda t: t.metrics.get(x_obj.metric, 0.0))), lines=lines)


def draw_front(plot: FrontPlot) -> bytes:
    """The PNG of ``plot`` (:func:`hwnas.experiments.report.png.draw`, drawn in this process)."""
    from hwnas.experiments.report.png import draw

    return draw(**dataclasses.asdict(plot))


def plot_front(path: Path, trials: Sequence[Trial], front: Sequence[Trial], objectives: Sequence[Objective],
               constraints: Sequence[Constraint], title: str) -> None:
    """Write :func:`front_plot`'s PNG to ``path``, drawn in this process (nothing with fewer than two objectives)."""
    plot = front_plot(trials, front, objectives, constraints, title)
    if plot is not None:
        write_plot(path, plot)


def write_plot(path: Path, plot: FrontPlot, drawer: PlotDrawer | None = None) -> None:
    """Write ``plot``'s PNG to ``path``: drawn by ``drawer``, a process started with the run
    (:mod:`hwnas.experiments.report.drawer`), else (or where it fails) here."""
    drawn = drawer.draw(plot) if drawer is not None else None
    atomic_write(path, drawn if drawn is not None else draw_front(plot))


def front_hypervolume(front: Sequence[Trial], reference: ReferencePoint) -> float | None:
    """Hypervolume of the front against the experiment's fixed reference point; None when an objective has no
    reference (a figure measured from the run's own worst point would not compare across runs)."""
    if not reference.complete:
        return None
    if not front:
        return 0.0
    return hypervolume(objective_matrix(front, reference.objectives), reference.point())


def front_table(front: Sequence[Trial], objectives: Sequence[Objective], title: str) -> FrontTable:
    """The front as a rich renderable that fits the console it is printed on (:class:`FrontTable`)."""
    cols = metric_columns(front, objectives)
    rungs = any(t.rung is not None for t in front)  # a multi-fidelity run's: the rung each line was evaluated at
    rows = [[str(t.number), t.arch.arch_id, *(f"{t.metrics[c]:.4g}" if c in t.metrics else "-" for c in cols),
             f"{t.cost_s:.1f}", *([_rung_cell(t)] if rungs else [])] for t in front]
    return FrontTable(title=title, columns=["#", "arch_id", *cols, "cost_s", *(["rung"] if rungs else [])], rows=rows)


def _rung_cell(t: Trial) -> str:
    """The rung a trial was evaluated at (numbered from 0, as the journal's ``rung``), ``2 top`` for the last."""
    if t.rung is None:
        return "-"
    return f"{t.rung} top" if t.rungs is not None and t.rung == t.rungs - 1 else str(t.rung)


def column_header(name: str, *, split: bool = True) -> str:
    """A column's header; with ``split``, a metric measured on a device on two lines (``latency_ms`` over
    ``@pixel3``), so that two devices' columns stay narrow and still read differently."""
    base, at, device = name.partition("@")
    return f"{base}\n@{device}" if split and at and base and device else name


@dataclass(frozen=True)
class FrontTable:
    """A table of trials that fits the width it is rendered at: every header complete (a metric on a device on two
    lines, :func:`column_header`), and where the columns do not fit side by side, the table wraps: the columns that
    do not fit follow in further tables, each led by the trials' ``#`` (never a header cut to ``laten…``).

    Args:
        title: Above the first table.
        columns: Column names: ``#`` and ``arch_id`` first, then the metrics.
        rows: One row of cell texts per trial.
    """

    title: str
    columns: list[str]
    rows: list[list[str]]

    def widths(self, *, split: bool = True) -> list[int]:
        """Each column's content width: its longest header line or cell."""
        from rich.cells import cell_len

        return [max([cell_len(line) for line in column_header(c, split=split).split("\n")]
                    + [cell_len(r[i]) for r in self.rows if i < len(r)]) for i, c in enumerate(self.columns)]

    def one_line(self, width: int) -> bool:
        """Whether every header fits on one line with all columns side by side (a bordered column takes its
        content and three more characters, the table one)."""
        return 1 + sum(w + 3 for w in self.widths(split=False)) <= width

    def parts(self, width: int) -> list[list[int]]:
        """The column indices of each table, packed in order to fit ``width``: the first two (``#`` and
        ``arch_id``) lead the first table, ``#`` every later one."""
        widths = self.widths()
        lead = [0, 1][: len(self.columns)]
        parts: list[list[int]] = [list(lead)]
        used = 1 + sum(widths[i] + 3 for i in lead)
        for i in range(len(lead), len(self.columns)):
            if used + widths[i] + 3 > width and len(parts[-1]) > (len(lead) if len(parts) == 1 else 1):
                parts.append([0])
                used = 1 + widths[0] + 3
            parts[-1].append(i)
            used += widths[i] + 3
        return parts

    def tables(self, width: int) -> list[Table]:
        """The rich tables that show it at ``width``."""
        from rich.table import Table

        split = not self.one_line(width)
        parts = self.parts(width) if split else [list(range(len(self.columns)))]
        widths = self.widths(split=split)
        out = []
        for n, part in enumerate(parts):
            title = self.title if n == 0 else "more columns (the same trials, by #)"
            table = Table(title=title, show_lines=False)
            for i in part:
                name = self.columns[i]
                table.add_column(column_header(name, split=split), justify="left" if name == "arch_id" else "right",
                                 no_wrap=True, min_width=widths[i])
            for row in self.rows:
                table.add_row(*(row[i] for i in part))
            out.append(table)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.tables(options.max_width)
