"""``nas sweep``: many experiments as Ray Tune trials, each a full run; resumable."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers


def add_parser(sub: Subparsers) -> None:
    """Register ``nas sweep``."""
    sw = sub.add_parser("sweep", help="many experiments as Ray Tune trials (a grid, random or Optuna search over "
                                      "an experiment's keys), each a full run; resumable",
                        description="Run a sweep file (see hwnas.experiments.sweep): a base experiment and the "
                                    "dotted keys to vary (grid, choice, uniform, loguniform, randint), searched by "
                                    "Tune's basic generator or OptunaSearch, scheduled FIFO or by ASHA on the "
                                    "hypervolume each run reports after every batch. Each trial is a run in "
                                    "<output.root>/<name>/runs/<trial id>; the sweep ends with a table, "
                                    "results.csv/json and fronts.png. Needs pip install -e \".[ray]\".")
    sw.add_argument("file")
    sw.add_argument("--resume", action="store_true", help="restore an interrupted sweep (Tune's restore)")


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hwnas.experiments.sweep import SweepInterrupted, results_table, run_sweep

    try:
        sweep_dir = run_sweep(args.file, resume=args.resume)
    except SweepInterrupted as exc:  # the trials so far, then the resume line (main prints it)
        Console().print(results_table(exc.sweep_dir))
        raise
    Console().print(results_table(sweep_dir))
    print(f"sweep: {sweep_dir} (results.csv, results.json, fronts.png; a run per trial in runs/)")
    return 0
