"""The ``nas`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hwnas import __version__
from hwnas.errors import HwnasError

if TYPE_CHECKING:
    from hwnas.experiments.export.card import ModelCard

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

    v = sub.add_parser("validate", help="check an experiment file and build every component; run nothing",
                       description="Load, validate and build an experiment (registry lookups, parameters, "
                                   "cross-checks) and report every problem at once. Runs nothing, writes nothing.")
    v.add_argument("file")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

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

    from hwnas.experiments.export.formats import FORMATS

    ex = sub.add_parser(
        "export", help="export a run's Pareto-front models: ONNX, fp16/int8 ONNX, torch.export, TensorRT; re-measured",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the chosen models of a run (its Pareto front by default) in every format asked for, "
                    "each with a card (<arch_id>.json): weights source, top-1 and how it was obtained, params, "
                    "FLOPs, the ONNX file's difference from torch, int8's top-1 lost, and its latency re-measured "
                    "end to end in every context this host can measure, beside the search's prediction and the "
                    "error (\"not measured: ...\" with the reason elsewhere). export.json indexes the export.\n\n"
                    "Every check is made before anything is written: an existing file, or a --out folder holding "
                    "other files, is refused without --force; a model whose kept weights are missing is refused "
                    "without --random-init or --train. The run directory is only read.\n\nformats:\n"
                    + "\n".join(f"  {k:13s} {v}" for k, v in FORMATS.items()))
    ex.add_argument("run_dir")
    ex.add_argument("--out", help="output folder (default RUN_DIR/models)")
    ex.add_argument("--force", action="store_true",
                    help="replace existing files of this export (other files in --out are left as they are)")
    pick = ex.add_mutually_exclusive_group()
    pick.add_argument("--device", help="the Pareto front for one device only (its hardware objectives and the "
                                       "others); default: the front over every objective")
    pick.add_argument("--top-k", type=int, metavar="K", help="the best K feasible trials by --by instead")
    pick.add_argument("--arch", action="append", default=[], metavar="ARCH_ID",
                      help="export this architecture (an id or a unique prefix; repeatable)")
    ex.add_argument("--by", metavar="METRIC", help="with --top-k: the objective to rank by")
    ex.add_argument("--formats", default="all", metavar="LIST",
                    help="comma-separated formats (onnx is always written), or all (default)")
    ex.add_argument("--opset", type=int, help="ONNX opset (default: the experiment's export.opset)")
    ex.add_argument("--dynamic-batch", action="store_true", help="leave the ONNX batch axis free (default fixed 1)")
    ex.add_argument("--no-simplify", action="store_true", help="do not simplify the ONNX file with onnxslim")
    weights = ex.add_mutually_exclusive_group()
    weights.add_argument("--random-init", action="store_true",
                         help="export models whose kept weights (RUN_DIR/weights/<arch_id>.pt) are missing with "
                              "their seeded, untrained initialisation (for latency work); the card says so")
    weights.add_argument("--train", action="store_true",
                         help="train every exported model from scratch with the experiment's recipe first "
                              "(weights kept as <arch_id>.pt beside it)")
    ex.add_argument("--no-measure", action="store_true", help="do not re-measure the exported files' latency")
    ex.add_argument("--repeats", type=int, default=50, help="timed runs per file, context and round (default 50)")
    ex.add_argument("--rounds", type=int, default=3,
                    help="timing rounds, each over every model; the median of the rounds is kept (default 3)")

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
    except BrokenPipeError:  # the reader of our output went away (nas ... | head): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")  # so the interpreter's final flush cannot fail
        except OSError:
            pass
        return 141
    except OSError as exc:  # a path that cannot be read or written: one line, naming it
        logging.getLogger(__name__).debug("OS error", exc_info=True)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        if args.command == "run":
            run_dir = getattr(exc, "run_dir", None)
            resume = f"nas run --resume {run_dir}" if run_dir is not None else "nas run --resume RUN_DIR"
            print(f"interrupted: the journal keeps every finished evaluation; continue with {resume}",
                  file=sys.stderr)
        elif args.command == "sweep":
            print(f"interrupted: finished trials are kept (results so far in {getattr(exc, 'sweep_dir', 'the sweep')}"
                  f"); continue with nas sweep {args.file} --resume", file=sys.stderr)
        elif args.command == "latency" and getattr(args, "latency_command", None) == "profile":
            print("interrupted: every unit measured so far is in the table; run the same command again to continue",
                  file=sys.stderr)
        elif args.command == "latency":
            print("interrupted: nothing was written (files already there are unchanged)", file=sys.stderr)
        else:
            print("interrupted", file=sys.stderr)
        return 130


def _console():
    from rich.console import Console

    return Console()


def cmd_run(args: argparse.Namespace) -> int:
    from hwnas.experiments import run_experiment
    from hwnas.experiments.progress import SearchProgress
    from hwnas.experiments.report.front import front_table
    from hwnas.experiments.report.summary import closest_infeasible

    progress = None if args.quiet else SearchProgress()
    result = run_experiment(args.file, overrides=args.overrides, resume=args.resume, run_dir=args.run_dir,
                            progress=progress)
    summary = result.summary
    assert summary is not None  # run_experiment returns a finished run's summary
    console = _console()
    console.print(front_table(result.front, result.objectives, title=f"Pareto front: {result.run_dir}"))
    counts = summary.trials
    console.print(f"{len(result.trials)} trials ({counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} "
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


def _journal_time(result) -> str:
    """For a resumed run: the evaluation time its journal holds, earlier sessions included (the wall time above is
    this session's alone)."""
    if not result.reused:
        return ""
    total = sum(t.cost_s for t in result.trials)
    return f" now ({total:.0f} s of evaluation in the journal, earlier sessions included)"


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
    """Print the front (or every trial); read-only, the run directory is left byte for byte as it was.

    With ``--html``, write the run's self-contained HTML page instead (see :mod:`hwnas.experiments.report.html`).
    """
    if args.html:
        from pathlib import Path

        from hwnas.experiments.report.html import write_html_report

        out = Path(args.out) if args.out else Path(args.run_dir) / "report.html"
        print(f"wrote {write_html_report(Path(args.run_dir), out, force=args.force)}")
        return 0
    if args.out or args.force:
        from hwnas.errors import ConfigError

        raise ConfigError("--out and --force go with --html (the table is printed, not written)")
    from hwnas.experiments.report.front import front_table
    from hwnas.experiments.report.summary import read_run
    from hwnas.experiments.report.trust import describe_trust

    _, trials, summary = read_run(args.run_dir)
    console = _console()
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


def cmd_export(args: argparse.Namespace) -> int:
    """Export the chosen models again; refuses (writing nothing) to replace files without ``--force`` or to
    export models without kept weights unless ``--random-init`` or ``--train`` (see
    :func:`hwnas.experiments.export.export_front`)."""
    from pathlib import Path

    from hwnas.experiments import load_run
    from hwnas.experiments.export import export_front, select_models
    from hwnas.experiments.export.formats import parse_formats
    from hwnas.experiments.progress import progress_bar
    from hwnas.experiments.rundir import check_run_dir
    from hwnas.latency.measure import MeasureProtocol

    try:
        formats = parse_formats(args.formats)
    except ValueError as exc:
        raise HwnasError(f"--formats {args.formats}: {exc}") from None
    try:
        protocol = MeasureProtocol(warmup=20, repeats=args.repeats, min_time_s=0.2, rounds=args.rounds)
    except ValueError as exc:
        raise HwnasError(f"--repeats {args.repeats} / --rounds {args.rounds}: {exc}") from None
    if args.top_k is not None and not args.by:
        raise HwnasError("--top-k needs --by METRIC (an objective of the run)")
    if args.by and args.top_k is None:
        raise HwnasError("--by ranks the models for --top-k K: give both (without them the whole front is exported)")
    if args.opset is not None:
        from hwnas.latency.onnx_export import max_export_opset

        newest, why = max_export_opset()
        if not 13 <= args.opset <= newest:
            raise HwnasError(f"--opset {args.opset}: an ONNX opset from 13 to {newest} ({why} writes at most {newest})")
    check_run_dir(Path(args.run_dir))
    experiment, trials = load_run(args.run_dir)
    chosen, selection = select_models(experiment, trials, device=args.device, top_k=args.top_k, by=args.by,
                                      archs=args.arch)
    out = Path(args.out) if args.out else None
    from hwnas.experiments.export import FORMATS, check_export

    # refused before the progress bar shows (export_front checks the same again)
    check_export(Path(args.run_dir), chosen, out or Path(args.run_dir) / "models", force=args.force,
                 random_init=args.random_init, formats=tuple(f for f in FORMATS if f in {"onnx", *formats}),
                 train=args.train)
    console = _console()
    with progress_bar("export", status=True, console=console) as bar:
        task = bar.add_task("export", total=len(chosen), status="")

        def on_model(k: int, n: int, arch_id: str) -> None:
            bar.update(task, completed=k, status=arch_id)

        cards = export_front(Path(args.run_dir), experiment, chosen, out_dir=out,
                             opset=args.opset or experiment.config.export.opset, force=args.force,
                             random_init=args.random_init, train=args.train, formats=formats,
                             dynamic_batch=args.dynamic_batch, simplify=not args.no_simplify,
                             measure=not args.no_measure, protocol=protocol, selection=selection, on_model=on_model)
        bar.update(task, completed=len(chosen), status="done")
    console.print(export_table(cards, title=f"{selection}: {len(cards)} model(s) in "
                                            f"{out or Path(args.run_dir) / 'models'}"))
    return 0


def export_table(cards: Sequence[ModelCard], *, title: str) -> Any:
    """A rich table of an export: per model its weights, top-1 (fp32 / int8) and each re-measured latency."""
    from rich.table import Table

    table = Table(title=title)
    for col in ("model", "weights", "top-1 fp32/int8", "context", "median (p90) ms", "search ms", "error"):
        table.add_column(col)
    for c in cards:
        int8 = c.format_record("onnx_int8").get("top1_heldout")
        top1 = c.top1.value if c.top1 is not None else None
        head = [c.arch_id[:8], c.weights.kind if c.weights is not None else "?",
                (f"{top1:.3f}" if top1 is not None else "-") + (f"/{int8:.3f}" if int8 is not None else "")]
        rows: list[Mapping[str, Any] | None] = [*c.measured_latency()] or [None]
        for i, row in enumerate(rows):
            cells = head if i == 0 else [""] * len(head)
            if row is None:
                table.add_row(*cells, "not measured", "", "", "")
                continue
            m = row["measured"]
            table.add_row(*cells, row.get("name", ""), f"{m['median_ms']:.3f} ({m['p90_ms']:.3f})",
                          f"{row['predicted_ms']:.3f}" if row["predicted_ms"] is not None else "",
                          f"{row['error_pct']:+.1f}%" if row["error_pct"] is not None else "")
    worst = max((c.max_abs_diff for c in cards if c.max_abs_diff is not None), default=0.0)
    table.caption = (f"max |onnx - torch| {worst:.1e}; contexts not measured here and why: see each "
                     "<arch_id>.json (latency)")
    return table


def cmd_list(args: argparse.Namespace) -> int:
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.predictors import PREDICTORS
    from hwnas.registry import first_doc_line
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.supernet import SUPERNETS

    kinds = {"spaces": SPACES, "strategies": STRATEGIES, "one-shot strategies": ONE_SHOT_STRATEGIES,
             "evaluators": EVALUATORS, "executors": EXECUTORS, "predictors": PREDICTORS, "supernets": SUPERNETS}
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
        print(f"      {fname} = {_as_yaml(default)}{desc}")


def _as_yaml(value: Any) -> str:
    """A parameter's default as a user would write it in an experiment file (YAML flow style)."""
    import yaml
    from pydantic_core import to_jsonable_python

    try:
        text = yaml.safe_dump(to_jsonable_python(value), default_flow_style=True, width=1 << 20, sort_keys=False)
    except Exception:  # not plain data: as Python shows it
        return repr(value)
    return text.removesuffix("\n...\n").strip()


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


def cmd_sweep(args: argparse.Namespace) -> int:
    from hwnas.experiments.sweep import SweepInterrupted, results_table, run_sweep

    try:
        sweep_dir = run_sweep(args.file, resume=args.resume)
    except SweepInterrupted as exc:  # the trials so far, then the resume line (main prints it)
        _console().print(results_table(exc.sweep_dir))
        raise
    _console().print(results_table(sweep_dir))
    print(f"sweep: {sweep_dir} (results.csv, results.json, fronts.png; a run per trial in runs/)")
    return 0


COMMANDS = {"sweep": cmd_sweep, "predictor": cmd_predictor, "supernet": cmd_supernet, "latency": cmd_latency,
            "run": cmd_run, "validate": cmd_validate, "report": cmd_report,
            "export": cmd_export, "list": cmd_list, "bench": cmd_bench}

