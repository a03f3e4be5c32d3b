"""``nas run``: run (or resume) an experiment end to end."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers
    from hwnas.experiments.runner import RunResult


def add_parser(sub: Subparsers) -> None:
    """Register ``nas run``."""
    r = sub.add_parser("run", help="run (or resume) an experiment end to end",
                       description="Run an experiment: search, Pareto front, plot and exported models in "
                                   "runs/<name>/ (a new numbered folder if that exists; nothing is overwritten).")
    r.add_argument("file", nargs="?", help="experiment YAML file")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set budget.trials=20 (repeatable); with --resume only "
                        "budget.trials, to extend the run: it may only grow (a multi_fidelity run: "
                        "multi_fidelity.budget, and budget.trials follows)")
    r.add_argument("--resume", metavar="RUN_DIR_OR_FILE",
                   help="continue a stopped or killed run from its journal: a run directory, or the experiment "
                        "file (its latest run); finished evaluations are reused, none is repeated (in a "
                        "multi_fidelity run, every rung's); with --set budget.trials=N the run is extended to N "
                        "trials (a multi_fidelity run: --set multi_fidelity.budget=X, its cost budget)")
    r.add_argument("--run-dir", help="write the run here instead of <output.root>/<name>")
    r.add_argument("--quiet", action="store_true", help="no progress display")


def cmd_run(args: argparse.Namespace) -> int:
    """Run the experiment, then print its front and summary; 1 when constraints left no feasible trial."""
    from hwnas.experiments.report.drawer import spare

    with spare():  # pareto.png's drawing process, started before the library is imported: see its module
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hwnas.experiments import run_experiment
    from hwnas.experiments.progress import SearchProgress
    from hwnas.experiments.report.front import front_table
    from hwnas.experiments.report.summary import closest_infeasible, describe_fidelity

    progress = None if args.quiet else SearchProgress()
    result = run_experiment(args.file, overrides=args.overrides, resume=args.resume, run_dir=args.run_dir,
                            progress=progress)
    summary = result.summary
    assert summary is not None  # run_experiment returns a finished run's summary
    console = Console()
    console.print(front_table(result.front, result.objectives, title=f"Pareto front: {result.run_dir}"))
    counts = summary.trials
    mf = summary.multi_fidelity
    if mf is not None:  # a multi-fidelity run: the trials are candidates, each at the highest rung it reached
        console.print(f"multi-fidelity: {describe_fidelity(mf)}; the front is of the top rung only")
    shown = counts.total if mf is not None else len(result.trials)
    console.print(f"{shown} trials ({counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} "
                  f"failed); {result.evaluated} evaluated now, {result.reused} reused from the journal; "
                  f"{result.wall_s:.0f} s" + _journal_time(result))
    if summary.exported is not None:
        console.print(f"exported {len(summary.exported)} models to {result.run_dir / 'models'} "
                      f"(max |onnx - torch| = {summary.max_abs_diff:.2e})")
    console.print(f"plot: {result.run_dir / 'pareto.png'}")
    if result.stopped_early:
        console.print(f"[yellow]stopped early: {result.stopped_early}")
    closest = closest_infeasible(result.trials, result.constraints)
    if closest is None:
        return 0
    least, best = closest
    print(f"error: 0 feasible among {len(result.trials)} trials: no architecture met the constraints; the "
          f"closest, trial {best.number} ({best.arch.arch_id}), missed them by {least:g} ({best.error})",
          file=sys.stderr)
    return 1


def _journal_time(result: RunResult) -> str:
    """For a resumed run: the evaluation time its journal holds, earlier sessions included (the wall time above is
    this session's alone)."""
    if not result.reused:
        return ""
    total = sum(t.cost_s for t in result.trials)
    return f" now ({total:.0f} s of evaluation in the journal, earlier sessions included)"
