"""``nas report``: a run's Pareto front as a table (or every trial), or its self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers


def add_parser(sub: Subparsers) -> None:
    """Register ``nas report``."""
    rep = sub.add_parser("report", help="print a run's Pareto front as a table, or write it as an HTML page",
                         description="Print the Pareto front of a run directory (finished or not) as a table. "
                                     "Read-only: it changes nothing in the run directory (a journal line torn "
                                     "by a crash is skipped, and repaired only by nas run --resume), except that "
                                     "--html writes RUN_DIR/report.html unless given --out.")
    rep.add_argument("run_dir")
    rep.add_argument("--all", action="store_true", help="print every trial, not only the front")
    rep.add_argument("--html", action="store_true",
                     help="write one self-contained HTML page instead (front plot per device, search progress, "
                          "every trial in a sortable table, exported models, latency validation, config)")
    rep.add_argument("--out", help="with --html: the page's path (default RUN_DIR/report.html)")
    rep.add_argument("--force", action="store_true", help="with --html: replace an existing page")


def cmd_report(args: argparse.Namespace) -> int:
    """Print the front (or every trial) and the run's summary (:func:`hwnas.experiments.report.summary.read_run`);
    read-only, the run directory is left byte for byte as it was.

    With ``--html``, write the run's self-contained HTML page instead (see :mod:`hwnas.experiments.report.html`).
    """
    if args.html:
        from hwnas.experiments.report.html import write_html_report

        out = Path(args.out) if args.out else Path(args.run_dir) / "report.html"
        print(f"wrote {write_html_report(Path(args.run_dir), out, force=args.force)}")
        return 0
    if args.out or args.force:
        from hwnas.errors import ConfigError

        raise ConfigError("--out and --force go with --html (the table is printed, not written)")
    from rich.console import Console

    from hwnas.experiments.report.front import front_table
    from hwnas.experiments.report.summary import read_run
    from hwnas.experiments.report.trust import describe_trust

    _, trials, summary = read_run(args.run_dir)
    console = Console()
    shown = trials if args.all else summary.front
    title = f"{'all trials' if args.all else 'Pareto front'}: {args.run_dir}"
    console.print(front_table(shown, summary.objectives, title=title))
    counts, hv = summary.trials, summary.hypervolume
    console.print(f"{counts.total} trials: {counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} failed; "
                  f"front {len(summary.front)}" + (f"; hypervolume {hv:.4g}" if hv is not None else ""))
    for c in summary.constraints:
        console.print(f"constraint: {c.describe()}")
    for line in describe_trust(summary.latency_trust):
        console.print(f"latency trust: {line}")
    return 0
