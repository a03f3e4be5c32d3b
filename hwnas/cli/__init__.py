"""The ``nas`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from hwnas import __version__
from hwnas.errors import HwnasError

EPILOG = """examples:
  nas run experiments/quickstart.yaml                  run the quickstart search (2 to 3 minutes on 2 cores)
  nas run experiments/quickstart.yaml --set budget.trials=12
  nas run --resume runs/quickstart                     continue a run that was stopped or killed
  nas validate experiments/quickstart.yaml             check a file and build everything, run nothing
  nas report runs/quickstart                           the Pareto front as a table
  nas list spaces -v                                   registered components with their parameters
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nas", description="hwnas: hardware-aware neural architecture search.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"hwnas {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run (or resume) an experiment end to end",
                       description="Run an experiment: search, Pareto front, plot and exported models in "
                                   "runs/<name>/ (a new numbered folder if that exists; nothing is overwritten).")
    r.add_argument("file", nargs="?", help="experiment YAML file")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set budget.trials=20 (repeatable)")
    r.add_argument("--resume", metavar="RUN_DIR_OR_FILE",
                   help="continue a stopped or killed run from its journal: a run directory, or the experiment "
                        "file (its latest run); finished evaluations are reused, none is repeated")
    r.add_argument("--run-dir", help="write the run here instead of <output.root>/<name>")
    r.add_argument("--quiet", action="store_true", help="no progress display")

    v = sub.add_parser("validate", help="check an experiment file and build every component; run nothing",
                       description="Load, validate and build an experiment (registry lookups, parameters, "
                                   "cross-checks) and report every problem at once. Runs nothing, writes nothing.")
    v.add_argument("file")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    rep = sub.add_parser("report", help="print a run's Pareto front as a table",
                         description="Print the Pareto front of a run directory (finished or not) as a table. "
                                     "Read-only: it changes nothing in the run directory (a journal line torn "
                                     "by a crash is skipped, and repaired only by nas run --resume).")
    rep.add_argument("run_dir")
    rep.add_argument("--all", action="store_true", help="print every trial, not only the front")

    ex = sub.add_parser("export", help="export a run's Pareto-front models to ONNX (again)",
                        description="Write <arch_id>.onnx and a card of measured metrics (<arch_id>.json) for "
                                    "each front member. Every check is made before anything is written: an "
                                    "existing file is not replaced without --force, and a model whose trained "
                                    "weights are missing is not exported without --random-init. The journal "
                                    "is only read.")
    ex.add_argument("run_dir")
    ex.add_argument("--out", help="output folder (default RUN_DIR/models)")
    ex.add_argument("--force", action="store_true", help="replace existing <arch_id>.onnx/.json files")
    ex.add_argument("--random-init", action="store_true",
                    help="export front members whose trained weights (RUN_DIR/weights/<arch_id>.pt) are missing "
                         "with their seeded, untrained initialisation; their cards say \"trained_weights\": false")

    from hwnas.cli.bench import add_parser as add_bench
    from hwnas.cli.latency import add_parser as add_latency
    from hwnas.cli.predictor import add_parser as add_predictor
    from hwnas.cli.supernet import add_parser as add_supernet

    add_latency(sub)
    add_bench(sub)
    add_predictor(sub)
    add_supernet(sub)

    ls = sub.add_parser("list", help="list registered spaces, strategies, evaluators, executors, predictors, supernets",
                        description="List registered components with their one-line docs.")
    ls.add_argument("kind", nargs="?",
                    choices=["spaces", "strategies", "evaluators", "executors", "predictors", "supernets"],
                    help="only this kind")
    ls.add_argument("-v", "--verbose", action="store_true", help="also parameters (and genes and size for spaces)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nas`` script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(COMMANDS[args.command](args) or 0)
    except HwnasError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        if args.command == "run":
            run_dir = getattr(exc, "run_dir", None)
            resume = f"nas run --resume {run_dir}" if run_dir is not None else "nas run --resume RUN_DIR"
            print(f"interrupted: the journal keeps every finished evaluation; continue with {resume}",
                  file=sys.stderr)
        elif args.command == "latency":
            print("interrupted: run the same command again to continue (profile and the board runner resume)",
                  file=sys.stderr)
        else:
            print("interrupted", file=sys.stderr)
        return 130


def _console():
    from rich.console import Console

    return Console()


def cmd_run(args: argparse.Namespace) -> int:
    from hwnas.experiments import run_experiment
    from hwnas.experiments.outputs import front_table
    from hwnas.experiments.progress import SearchProgress

    progress = None if args.quiet else SearchProgress()
    result = run_experiment(args.file, overrides=args.overrides, resume=args.resume, run_dir=args.run_dir,
                            progress=progress)
    console = _console()
    console.print(front_table(result.front, result.objectives, title=f"Pareto front: {result.run_dir}"))
    out = result.outputs
    counts = out.get("trials", {})
    console.print(f"{len(result.trials)} trials ({counts.get('ok', 0)} ok, {counts.get('infeasible', 0)} infeasible, "
                  f"{counts.get('failed', 0)} failed); {result.evaluated} evaluated now, {result.reused} reused from "
                  f"the journal; {result.wall_s:.0f} s")
    if "exported" in out:
        console.print(f"exported {len(out['exported'])} models to {result.run_dir / 'models'} "
                      f"(max |onnx - torch| = {out['max_abs_diff']:.2e})")
    console.print(f"plot: {result.run_dir / 'pareto.png'}")
    if result.stopped_early:
        console.print(f"[yellow]stopped early: {result.stopped_early}")
    return _no_feasible(result)


def _no_feasible(result) -> int:
    """1 (with one error line naming the closest candidate) when constraints left no feasible trial, else 0."""
    constraints = result.constraints
    if not result.trials or any(t.status == "ok" for t in result.trials):
        return 0
    scored = [(sum(c.violation(t.metrics) for c in constraints), t) for t in result.trials if t.status == "infeasible"]
    if not scored:
        return 0  # every trial failed: the failures were reported
    least, best = min(scored, key=lambda p: p[0])
    print(f"error: 0 feasible among {len(result.trials)} trials: no architecture met the constraints; the "
          f"closest, trial {best.number} ({best.arch.arch_id}), missed them by {least:g} ({best.error})",
          file=sys.stderr)
    return 1


def cmd_validate(args: argparse.Namespace) -> int:
    from hwnas.experiments import load_experiment
    from hwnas.objectives import reference_point

    exp = load_experiment(args.file, args.overrides)
    exp.check_inputs()  # what a run would check before its first trial: tables, images, export opset
    providers = exp.metric_providers()
    print(f"{args.file}: ok")
    print(f"  space      {exp.config.space.name} ({_space_size(exp.space)} architectures)")
    print(f"  strategy   {exp.config.strategy.name}, budget {exp.config.budget.trials} trials")
    for name, ev in zip(exp.evaluator_names, exp.evaluators):
        print(f"  evaluator  {name} ({'cheap' if ev.cheap else 'expensive'}): {', '.join(ev.provides)}")
    reference = reference_point(exp.objectives, exp.constraints)
    for o, value, source in zip(exp.objectives, reference.values, reference.sources):
        if value is not None:
            ref = f"hypervolume reference {value:g}, from {source}"
        elif source.startswith("none"):
            ref = f"no hypervolume reference: {source}"
        else:  # a relative constraint's bound, measured when the run starts
            ref = f"hypervolume reference from {source}"
        print(f"  objective  {o.direction} {o.metric} (from {providers[o.metric]}; {ref})")
    for c in exp.constraints:
        print(f"  constraint {c.describe()}")
    note = exp.budget_note()
    if note:
        print(f"  note       {note}")
    executor_params = ", ".join(f"{k}={v}" for k, v in exp.params["executor"].items() if v is not None)
    print(f"  executor   {exp.config.executor.name}" + (f" ({executor_params})" if executor_params else ""))
    return 0


def _space_size(space) -> str:
    try:
        return f"{space.size():,}"
    except NotImplementedError:
        return "?"


def cmd_report(args: argparse.Namespace) -> int:
    """Print the front (or every trial); read-only, the run directory is left byte for byte as it was."""
    from hwnas.experiments import load_run
    from hwnas.experiments.outputs import front_hypervolume, front_table
    from hwnas.objectives import pareto_front, reference_point

    experiment, trials = load_run(args.run_dir)
    front = pareto_front(trials, experiment.objectives)
    console = _console()
    shown = trials if args.all else front
    title = f"{'all trials' if args.all else 'Pareto front'}: {args.run_dir}"
    console.print(front_table(shown, experiment.objectives, title=title))
    counts = {s: sum(t.status == s for t in trials) for s in ("ok", "infeasible", "failed")}
    hv = front_hypervolume(front, reference_point(experiment.objectives, experiment.constraints))
    console.print(f"{len(trials)} trials: {counts['ok']} ok, {counts['infeasible']} infeasible, "
                  f"{counts['failed']} failed; "
                  f"front {len(front)}" + (f"; hypervolume {hv:.4g}" if hv is not None else ""))
    for c in experiment.constraints:
        console.print(f"constraint: {c.describe()}")
    from hwnas.experiments.api import describe_trust, latency_trust

    for line in describe_trust(latency_trust(experiment)):
        console.print(f"latency trust: {line}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export the front again; refuses (writing nothing) to replace files without ``--force`` or to export
    untrained models without ``--random-init`` (see :func:`hwnas.experiments.export.export_front`)."""
    from pathlib import Path

    from hwnas.experiments import load_run
    from hwnas.experiments.export import export_front
    from hwnas.objectives import pareto_front

    experiment, trials = load_run(args.run_dir)
    front = pareto_front(trials, experiment.objectives)
    out = Path(args.out) if args.out else None
    cards = export_front(Path(args.run_dir), experiment, front, out_dir=out, opset=experiment.config.export.opset,
                         force=args.force, random_init=args.random_init)
    for c in cards:
        print(f"{c['onnx']['file']}  max|onnx-torch|={c['onnx']['max_abs_diff_vs_torch']:.2e}"
              + (f"  top1(onnx, held-out)={c['onnx']['top1_heldout']:.4f}" if "top1_heldout" in c["onnx"] else ""))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments import evaluators as _ev  # noqa: F401
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.predictors import PREDICTORS
    from hwnas.registry import first_doc_line
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.supernet import SUPERNETS

    kinds = {"spaces": SPACES, "strategies": STRATEGIES, "one-shot strategies": ONE_SHOT_STRATEGIES,
             "evaluators": EVALUATORS, "executors": EXECUTORS, "predictors": PREDICTORS, "supernets": SUPERNETS}
    if args.kind in (None, "supernets"):
        from hwnas.supernet import builtin as _builtin  # noqa: F401  (imports torch)
    for kind, registry in kinds.items():
        if args.kind and args.kind != kind and not (args.kind == "strategies" and kind == "one-shot strategies"):
            continue
        print(f"{kind}:")
        for name, cls in registry.items():
            print(f"  {name:14s} {first_doc_line(cls)}")
            if args.verbose:
                _print_params(cls)
                if kind == "spaces":
                    space = cls()
                    print(f"      size: {_space_size(space)} architectures")
                    for g in space.genes():
                        print(f"      gene {g.name}: {list(g.choices)}")
    return 0


def _print_params(cls) -> None:
    for fname, field in cls.Params.model_fields.items():
        default = field.default if field.default_factory is None else field.default_factory()
        desc = f"  {field.description}" if field.description else ""
        print(f"      {fname} = {default!r}{desc}")


def cmd_latency(args: argparse.Namespace) -> int:
    from hwnas.cli.latency import cmd_latency as run

    return run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from hwnas.cli.bench import cmd_bench as run

    return run(args)


def cmd_supernet(args: argparse.Namespace) -> int:
    from hwnas.cli.supernet import cmd_supernet as run

    return run(args)


def cmd_predictor(args: argparse.Namespace) -> int:
    from hwnas.cli.predictor import cmd_predictor as run

    return run(args)


COMMANDS = {"predictor": cmd_predictor, "supernet": cmd_supernet, "latency": cmd_latency, "run": cmd_run,
            "validate": cmd_validate, "report": cmd_report,
            "export": cmd_export, "list": cmd_list, "bench": cmd_bench}

