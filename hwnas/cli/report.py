"""``nas report``: a run's Pareto front as a table (or every trial), or the self-contained HTML page of one run or
comparing several."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers


def add_parser(sub: Subparsers) -> None:
    """Register ``nas report``."""
    rep = sub.add_parser("report", help="print a run's Pareto front as a table, or write one HTML page of one run "
                                        "or comparing several",
                         description="Print the Pareto front of a run directory (finished or not) as a table. "
                                     "Read-only: it changes nothing in the run directory (a journal line torn "
                                     "by a crash is skipped, and repaired only by nas run --resume), except that "
                                     "--html of one run writes RUN_DIR/report.html unless given --out. With --html "
                                     "and several runs, one page compares them (--out is then required; it may "
                                     "not be a file of any run).")
    rep.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run directory (several with --html)")
    rep.add_argument("--all", action="store_true", help="print every trial, not only the front (a multi_fidelity "
                                                        "run: a line per rung evaluation, with its rung)")
    rep.add_argument("--html", action="store_true",
                     help="write one self-contained HTML page instead (fronts per device with every run on them, "
                          "hypervolume histories against one reference, genes against metrics, every trial in a "
                          "sortable table filtered by run, the runs side by side, exported models, latency "
                          "validation, config); interactive with hwnas[plotly], a static image for each plot")
    rep.add_argument("--exports", action="append", default=[], metavar="DIR",
                     help="with --html: an export folder to show with the run (nas export --out DIR); repeatable. "
                          "The run's own models/ and the folders its models/export.json lists are read anyway (nas "
                          "export RUN_DIR --out DIR records DIR there; a listed folder that moved is named in a "
                          "warning); a folder exported from another run is named")
    rep.add_argument("--out", help="with --html: the page's path (default RUN_DIR/report.html for one run; required "
                                   "for several)")
    rep.add_argument("--force", action="store_true", help="with --html: replace an existing page (never a run's "
                                                          "other files)")


def cmd_report(args: argparse.Namespace) -> int:
    """Print the front (or every trial) and the run's summary (:func:`hwnas.experiments.report.summary.read_run`);
    read-only, the run directory is left byte for byte as it was.

    With ``--html``, write the self-contained HTML page of the runs instead (see
    :mod:`hwnas.experiments.report.html`); runs whose objectives differ from the compared ones, and export folders
    of another run, are named on stderr as on the page.
    """
    from hwnas.errors import ConfigError

    runs = [Path(p) for p in args.run_dir]
    if args.html:
        from hwnas.experiments.report.compare import check_inputs
        from hwnas.experiments.report.html import write_html_report

        if len(runs) > 1 and not args.out:
            raise ConfigError(f"{len(runs)} runs: give the page's path with --out (a comparing page belongs to no "
                              "run, and is never written inside one by default)")
        check_inputs(runs, [Path(p) for p in args.exports])  # every run is one, before any work
        out = Path(args.out) if args.out else runs[0] / "report.html"
        page, comparison = write_html_report(runs, out, force=args.force, exports=[Path(p) for p in args.exports])
        for _, why in comparison.left_out:
            print(f"warning: {why}", file=sys.stderr)
        for note in comparison.notes:
            print(f"warning: {note}", file=sys.stderr)
        print(f"wrote {page}")
        return 0
    if args.out or args.force or args.exports:
        raise ConfigError("--out, --force and --exports go with --html (the table is printed, not written)")
    if len(runs) > 1:
        raise ConfigError(f"{len(runs)} run directories: the table is of one run; several are compared by "
                          "nas report RUN [RUN ...] --html --out PAGE.html")
    from rich.console import Console

    from hwnas.experiments.report.front import front_table
    from hwnas.experiments.report.summary import describe_fidelity, read_run
    from hwnas.experiments.report.trust import describe_trust

    run_dir = args.run_dir[0]
    _, trials, summary = read_run(run_dir)
    console = Console()
    shown = trials if args.all else summary.front
    title = f"{'all trials' if args.all else 'Pareto front'}: {run_dir}"
    console.print(front_table(shown, summary.objectives, title=title))
    counts, hv = summary.trials, summary.hypervolume
    if summary.multi_fidelity is not None:  # the counts are of candidates, each at the highest rung it reached
        console.print(f"multi-fidelity: {describe_fidelity(summary.multi_fidelity)}; the front is of the top rung "
                      "only" + ("" if args.all else " (--all prints every rung's trials)"))
    console.print(f"{counts.total} trials: {counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} failed; "
                  f"front {len(summary.front)}" + (f"; hypervolume {hv:.4g}" if hv is not None else ""))
    for c in summary.constraints:
        console.print(f"constraint: {c.describe()}")
    for line in describe_trust(summary.latency_trust):
        console.print(f"latency trust: {line}")
    return 0
