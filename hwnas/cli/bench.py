"""``nas bench ...``: judge search strategies and accuracy predictors on published benchmark tables."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwnas.bench.journal import BenchJournal, BenchSettings
    from hwnas.cli.parsing import Subparsers

DESCRIPTION = """\
Judge the registered ask/tell search strategies on NAS-Bench-201 (and HW-NAS-Bench's FBNet table) with every
metric read from the published tables: no training, no run directories. Each (strategy, seed) runs once to the
largest budget; smaller budgets are read off the same run. Seed s is np.random.default_rng(s).

  accuracy     per dataset: search on the 12-epoch validation accuracy (--oracle: the 200-epoch test accuracy),
               report the 200-epoch test accuracy of the best-searched architecture among the first B distinct
               queries; mean ± std over seeds; isomorphic cells merged.
  hardware     12-epoch validation accuracy x a device's latency (HELP), every cell: hypervolume of the front of the
               first --hw-budget queries / the true front's, reference point at the medians over all cells. The
               latency column is a lookup for strategies that take one (as a latency table is in nas run; a
               query is then one accuracy evaluation); --no-lookup withholds it.
  FBNet        FLOPs x a device's latency (HW-NAS-Bench LUT) against the exact true front (skipped without the file).
  --overhead   ask + tell seconds per 1,000 candidates on this machine.

Writes results.json, anytime.png, hw_fractions.png (fbnet_fractions.png, overhead.png) to --out. Until then the
results so far are in --out's results.partial.json, rewritten after every strategy of every section: an interrupted
bench (Ctrl-C, a kill, a crash) loses at most the strategy it was running, and the same command with --resume runs
only what is missing."""

EPILOG = """examples:
  nas bench strategies                                             everything, 20 seeds
  nas bench strategies --strategies random,evolution --seeds 5 --out /tmp/b
  nas bench strategies --params 'evolution:{"population_size": 32}' --overhead --force
  nas bench strategies --strategies random,evolution --seeds 5 --out /tmp/b --resume    after an interruption
"""


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    try:
        return sorted({int(t) for t in _csv(text)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_parser(sub: Subparsers) -> None:
    """Register ``nas bench`` and its ``strategies`` subcommand (nothing heavy is imported: the defaults written
    in the help are the library's, :mod:`hwnas.bench.strategies`, filled in by :func:`cmd_bench`)."""
    b = sub.add_parser("bench", help="judge search strategies and accuracy predictors on published benchmark tables",
                       description="Benchmarks of the platform's own components, run by hand.")
    bsub = b.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    s = bsub.add_parser("strategies", help="anytime accuracy and hypervolume fractions of every strategy "
                        "(NAS-Bench-201, FBNet)", description=DESCRIPTION, epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--strategies", type=_csv, default=None, metavar="A,B,...",
                   help="strategies to judge (default: every registered ask/tell strategy, default parameters)")
    s.add_argument("--params", action="append", default=[], metavar="NAME:JSON",
                   help="a strategy's parameters, e.g. 'evolution:{\"population_size\": 32}' (repeatable)")
    s.add_argument("--hw-params", action="append", default=[], metavar="NAME:JSON",
                   help="parameters for the two-objective problems only (hardware-aware, FBNet, overhead), over "
                        "--params; the strings {accuracy} and {latency} become each problem's metric names, e.g. "
                        "'reinforce:{\"reward\": {\"accuracy\": \"{accuracy}\", \"latency\": \"{latency}\", "
                        "\"target\": 10}}' (a target you choose: nothing computed from the tables reaches a "
                        "strategy; repeatable)")
    s.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 per strategy (default 20)")
    s.add_argument("--budgets", type=_ints, default=None, metavar="B,B,...",
                   help="accuracy budgets in distinct queries (default 25,50,100,200,500)")
    s.add_argument("--datasets", type=_csv, default=None, metavar="D,D,...",
                   help="cifar10, cifar100, imagenet16 (default all; an empty value skips the accuracy part)")
    s.add_argument("--oracle", action="store_true",
                   help="search on the 200-epoch test accuracy instead of the 12-epoch validation accuracy")
    s.add_argument("--hw-budget", type=int, default=None, help="queries of the hardware-aware runs (default 300)")
    s.add_argument("--hw-dataset", default="cifar10", help="accuracy of the hardware-aware runs (default cifar10)")
    s.add_argument("--devices", type=_csv, default=None, metavar="D,D,...",
                   help="HELP latency columns (default pixel3,samsung_a50,gold_6240,titan_rtx_1,1080ti_1; an empty "
                        "value skips the hardware-aware part)")
    s.add_argument("--fbnet-devices", type=_csv, default=None, metavar="D,D,...",
                   help="HW-NAS-Bench FBNet latency metrics without _latency (default pixel3,raspi4; an empty value "
                        "skips FBNet)")
    s.add_argument("--fbnet-budget", type=int, default=None, help="queries of the FBNet runs (default 1000)")
    s.add_argument("--batch", type=int, default=None, help="candidates asked of a strategy at a time (default 10)")
    s.add_argument("--no-lookup", dest="lookup", action="store_false",
                   help="hardware-aware and FBNet runs: do not give the latency column to strategies that take a "
                        "lookup (by default it is one, as a latency table is in nas run: a query then costs only the "
                        "accuracy; strategies without use_lookup never see it)")
    s.add_argument("--overhead", action="store_true",
                   help="also time ask + tell for --overhead-candidates candidates per strategy (this machine)")
    s.add_argument("--overhead-candidates", type=int, default=None,
                   help="candidates of the overhead measurement (default 10000)")
    s.add_argument("--overhead-max-s", type=float, default=None,
                   help="stop a strategy's overhead measurement after the batch in which its ask + tell passed this "
                        "many seconds (default 120; the table says how many candidates it reached)")
    s.add_argument("--data", default="../shared/data",
                   help="the published benchmark data (default ../shared/data, from the working directory)")
    s.add_argument("--out", default="bench-strategies",
                   help="output folder (default bench-strategies/); the results so far are kept there in "
                        "results.partial.json after every strategy of every section, until results.json is written")
    _add_force_or_resume(s, finished="the strategies it finished are not run again")
    s.add_argument("--quiet", action="store_true", help="no progress display")
    _add_predictors(bsub)


def _add_force_or_resume(p: argparse.ArgumentParser, *, finished: str) -> None:
    """A bench's --force and --resume (one or the other): what to do with an --out that holds files."""
    again = p.add_mutually_exclusive_group()
    again.add_argument("--force", action="store_true", help="write into a non-empty --out (its files are replaced)")
    again.add_argument("--resume", action="store_true",
                       help=f"go on with the interrupted bench in --out (its results.partial.json), with the same "
                            f"options: {finished}")


PREDICTORS_DESCRIPTION = """\
Judge accuracy predictors on NAS-Bench-201 (200-epoch test accuracy of all 15,625 cells, from the published
tables). Per dataset, training size N and seed s: shuffle the cells with np.random.default_rng(s), fit each
predictor on the first N, score it on all the rest: Kendall tau, Spearman rho and the precision of its top 5 %.
Baseline: the FLOPs proxy (no fitting). Writes results.json and kendall_tau.png to --out; the results so far are
in --out's results.partial.json, rewritten after every training size of every dataset: an interrupted bench (Ctrl-C,
a kill, a crash) loses at most the size it was fitting, and the same command with --resume goes on from the rest."""

PREDICTORS_EPILOG = """examples:
  nas bench predictors                                               every predictor, 3 datasets, 10 seeds
  nas bench predictors --datasets cifar10 --sizes 200 --seeds 3 --out /tmp/p
  nas bench predictors --predictors gbt:encode+cell,mlp:path --force
  nas bench predictors --datasets cifar10 --sizes 200 --seeds 3 --out /tmp/p --resume       after an interruption
"""


def _predictor_features(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in _csv(text):
        name, _, feats = item.partition(":")
        out[name.strip()] = feats.strip() or "cell"
    return out


def _add_predictors(bsub: Subparsers) -> None:
    p = bsub.add_parser("predictors", help="Kendall tau / Spearman / top-5 %% precision of every accuracy predictor "
                        "(NAS-Bench-201)", description=PREDICTORS_DESCRIPTION, epilog=PREDICTORS_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--predictors", type=_predictor_features, default=None, metavar="NAME[:FEATURES],...",
                   help="predictors and the feature set each reads (default gbt:cell,mlp:cell,gp:cell,"
                        "ensemble:cell; feature sets: encode, path, cell, graph (for gin), joined with +)")
    p.add_argument("--params", action="append", default=[], metavar="NAME:JSON",
                   help="a predictor's parameters, e.g. 'gbt:{\"n_estimators\": 400}' (repeatable)")
    p.add_argument("--datasets", type=_csv, default=None, metavar="D,D,...",
                   help="cifar10, cifar100, imagenet16 (default all)")
    p.add_argument("--sizes", type=_ints, default=None, metavar="N,N,...",
                   help="training sizes (default 20,50,100,200,1000)")
    p.add_argument("--seeds", type=int, default=None, help="seeds 0..S-1 (default 10)")
    p.add_argument("--max-gp-size", type=int, default=None,
                   help="skip the Gaussian process above this training size (its cost grows as N³; default 1000)")
    p.add_argument("--data", default="../shared/data",
                   help="the published benchmark data (default ../shared/data, from the working directory)")
    p.add_argument("--out", default="bench-predictors",
                   help="output folder (default bench-predictors/); the results so far are kept there in "
                        "results.partial.json after every training size of every dataset, until results.json is "
                        "written")
    _add_force_or_resume(p, finished="the training sizes it finished are not fitted again")
    p.add_argument("--quiet", action="store_true", help="no progress display")


def _run(run: Any, cfg: Any, *, title: str, quiet: bool, journal: BenchJournal, pieces: str
         ) -> tuple[dict[str, Any], Any]:
    """``run(cfg, progress=, say=, journal=)`` with a progress bar on stderr (none with ``quiet``); (results, stdout
    console). Interrupted, it says where the ``pieces`` finished so far are kept and how to go on from them.

    The results get the command line that produced them."""
    try:
        return _run_with_progress(functools.partial(run, journal=journal), cfg, title=title, quiet=quiet)
    except BaseException:
        if journal.path.is_file():
            print(f"the {pieces} finished so far are kept in {journal.path}: the same command with --resume goes on "
                  "from them", file=sys.stderr)
        raise


def _run_with_progress(run: Any, cfg: Any, *, title: str, quiet: bool) -> tuple[dict[str, Any], Any]:
    from rich.console import Console

    from hwnas.experiments.progress import progress_bar

    console = Console() if sys.stdout.isatty() else Console(width=150)  # a file or pipe: tables unwrapped
    err = Console(stderr=True)

    def say(text: str) -> None:
        err.print(text, markup=False, highlight=False)

    if quiet:
        res = run(cfg, say=say)
    else:
        bar = progress_bar(title, status=True, console=err)
        with bar:
            res = run(cfg, progress=bar, say=say)
    res["command"] = " ".join(["nas", *sys.argv[1:]]) if sys.argv and "bench" in sys.argv else None
    return res, console


def cmd_bench_predictors(args: argparse.Namespace) -> int:

    from hwnas.bench.journal import PARTIAL
    from hwnas.bench.predictors import PredictorBenchConfig, print_report, run_predictor_bench, write_outputs

    t0 = time.perf_counter()
    out = Path(args.out)
    resume = getattr(args, "resume", False)
    if not resume:
        _check_out(out, args.force, partial=PARTIAL)
    given = {"predictors": args.predictors, "datasets": args.datasets, "sizes": args.sizes, "seeds": args.seeds,
             "max_gp_size": args.max_gp_size}
    cfg = PredictorBenchConfig(data_dir=Path(args.data), params=_params(args.params),
                               **{k: v for k, v in given.items() if v is not None})
    journal = _journal(out, cfg, resume)
    res, console = _run(run_predictor_bench, cfg, title="predictors", quiet=args.quiet, journal=journal,
                        pieces="training sizes")
    print_report(res, console)
    written = write_outputs(res, out)
    journal.path.unlink(missing_ok=True)  # results.json holds everything now
    reused = f" ({journal.reused} training sizes reused from the interrupted bench)" if journal.reused else ""
    console.print(f"wrote {', '.join(str(p) for p in written)}{reused}")
    console.print(f"wall time {time.perf_counter() - t0:.0f} s")
    return 0


def _journal(out: Path, cfg: BenchSettings, resume: bool) -> BenchJournal:
    """The bench's journal in ``out``: a fresh one, or with ``resume`` the interrupted bench's (refused, named,
    when there is none or its options differ)."""
    from hwnas.bench.journal import PARTIAL, BenchJournal
    from hwnas.errors import ConfigError

    if not resume:
        return BenchJournal(out / PARTIAL)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--resume: --out {out} is a file; a folder is expected")
    return BenchJournal.resume(out / PARTIAL, cfg)


def _params(items: list[str], option: str = "--params") -> dict[str, dict[str, Any]]:
    from hwnas.errors import ConfigError

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        name, sep, text = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{option} {item!r}: expected NAME:JSON, e.g. 'evolution:{{\"population_size\": 32}}'")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{option} {item!r}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{option} {item!r}: expected a JSON object of parameters")
        out.setdefault(name.strip(), {}).update(value)
    return out


def _check_out(out: Path, force: bool, *, partial: str | None = None) -> None:
    from hwnas.errors import OutputExists

    if out.exists() and not out.is_dir():
        raise OutputExists(f"--out {out} is a file; a folder is expected")
    if out.is_dir() and any(out.iterdir()) and not force:
        if partial is not None and (out / partial).is_file():
            raise OutputExists(f"{out} holds an interrupted bench ({partial}): --resume goes on with it, --force "
                               "starts afresh (replacing its files)")
        raise OutputExists(f"{out} exists and is not empty; not writing into it (pass --force to replace its files)")


def cmd_bench(args: argparse.Namespace) -> int:
    command = getattr(args, "bench_command", None)
    if command == "predictors":
        return cmd_bench_predictors(args)
    if command != "strategies":
        print("usage: nas bench {strategies,predictors} ... (nas bench strategies --help)", file=sys.stderr)
        return 2

    from hwnas.bench.journal import PARTIAL
    from hwnas.bench.strategies import (
        BenchConfig,
        default_strategies,
        print_report,
        run_bench,
        write_outputs,
    )

    t0 = time.perf_counter()
    out = Path(args.out)
    resume = getattr(args, "resume", False)
    if not resume:
        _check_out(out, args.force, partial=PARTIAL)
    given = {"seeds": args.seeds, "budgets": args.budgets, "hw_budget": args.hw_budget, "devices": args.devices,
             "fbnet_devices": args.fbnet_devices, "fbnet_budget": args.fbnet_budget, "batch": args.batch,
             "overhead_candidates": args.overhead_candidates, "overhead_max_s": args.overhead_max_s,
             "datasets": args.datasets}
    cfg = BenchConfig(
        data_dir=Path(args.data), strategies=args.strategies if args.strategies is not None else default_strategies(),
        params=_params(args.params), hw_params=_params(args.hw_params, "--hw-params"), oracle=args.oracle,
        hw_dataset=args.hw_dataset, overhead=args.overhead, lookup=args.lookup,
        **{k: v for k, v in given.items() if v is not None})
    if resume:
        cfg.check()
    journal = _journal(out, cfg, resume)
    res, console = _run(run_bench, cfg, title="bench", quiet=args.quiet, journal=journal, pieces="strategies")
    res["command_wall_s_before_writing"] = time.perf_counter() - t0
    print_report(res, console)
    written = write_outputs(res, out)
    journal.path.unlink(missing_ok=True)  # results.json holds everything now
    reused = f" ({journal.reused} strategy entries reused from the interrupted bench)" if journal.reused else ""
    console.print(f"wrote {', '.join(str(p) for p in written)}{reused}")
    console.print(f"wall time {time.perf_counter() - t0:.0f} s ({len(cfg.strategies)} strategies x {cfg.seeds} seeds; "
                  f"{res['wall_s']:.0f} s of runs)")
    return 0
