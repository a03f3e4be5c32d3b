"""``nas predictor fit`` / ``nas predictor evaluate``: accuracy predictors from run journals or benchmark tables."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers
    from hwnas.predictors.fit import TrainingData

FIT_DESCRIPTION = """\
Fit an accuracy predictor on measured architectures: the ok trials of one or more run directories (--run, the
space comes from the run's config.yaml) or the rows of a benchmark table (--table with --space). Before the final
fit on every row, k-fold cross-validation judges it (Kendall tau, Spearman rho, top-5 % precision, MAE, R²); those
figures, the space, the feature set and the target are saved with it. The file is JSON (never pickle); use it in an
experiment with the `predictor` evaluator."""

FIT_EPILOG = """examples:
  nas predictor fit --table ../shared/data/nas-bench-201/nb201_accuracy.csv --space nb201 \\
      --target cifar10_test_200ep --predictor ensemble --features cell -o c10_ensemble.json
  nas predictor fit --run runs/quickstart --target top1 --predictor gbt --features encode -o qs_gbt.json
  nas predictor fit --run runs/zc --target top1 --features encode+metric:zc_synflow+metric:zc_naswot -o zc.json
"""


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"n_estimators\": 400}'")
    return value


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", action="append", default=[], metavar="RUN_DIR",
                   help="a run directory whose ok trials measured --target (repeatable; one space)")
    p.add_argument("--table", metavar="CSV", help="a benchmark table: architecture strings and a --target column")
    p.add_argument("--space", help="the table's space (e.g. nb201); with --table only")
    p.add_argument("--space-params", type=_json_object, default=None, metavar="JSON",
                   help="the space's parameters, with --table (default: the space's defaults)")
    p.add_argument("--key-column", default=None, help="the table's architecture column (default arch_str, "
                   "else ArchitectureString)")


def add_parser(sub: Subparsers) -> None:
    pr = sub.add_parser("predictor", help="accuracy predictors: fit on journals or tables, evaluate",
                        description="Accuracy predictors: fit them on measured architectures and judge them.")
    psub = pr.add_subparsers(dest="predictor_command", metavar="SUBCOMMAND")
    fit = psub.add_parser("fit", help="fit (and cross-validate) a predictor, save it as JSON",
                          description=FIT_DESCRIPTION, epilog=FIT_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_sources(fit)
    fit.add_argument("--target", required=True, help="the metric (journal) or column (table) to predict")
    fit.add_argument("--predictor", default="ensemble", help="registered predictor (gbt, mlp, gp, linear, ensemble; "
                     "default ensemble)")
    fit.add_argument("--params", type=_json_object, default=None, metavar="JSON", help="the predictor's parameters")
    fit.add_argument("--features", default="encode", help="feature set: encode (every space), path, cell or graph "
                     "(cell spaces such as nb201; graph is what the gin predictor reads), metric:NAME (a measured "
                     "metric of each architecture, e.g. metric:zc_synflow from the zero_cost evaluator), joined "
                     "with + (default encode)")
    fit.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: skip; default 5)")
    fit.add_argument("--seed", type=int, default=0, help="seed of the folds and of the fit (default 0)")
    fit.add_argument("-o", "--out", required=True, help="where to write the predictor (.json)")
    fit.add_argument("--force", action="store_true", help="replace an existing --out")
    ev = psub.add_parser("evaluate", help="judge a saved predictor on other journals or table rows",
                         description="Predict every architecture of the given runs or table with a saved predictor "
                                     "and compare with what was measured: Kendall tau, Spearman rho, top-5 % "
                                     "precision, MAE, R².")
    ev.add_argument("file", help="a predictor saved by `nas predictor fit`")
    _add_sources(ev)
    ev.add_argument("--target", default=None, help="the measured metric or column (default: the predictor's target)")


def _data(args: argparse.Namespace, target: str) -> TrainingData:
    from hwnas.experiments.runs import measured_data

    return measured_data(target, runs=args.run, table=args.table, space=args.space, space_params=args.space_params,
                         key_column=args.key_column)


def _figures_line(fig: Mapping[str, object]) -> str:
    return (f"Kendall tau {fig['kendall_tau']:.3f}, Spearman rho {fig['spearman_rho']:.3f}, top-5% precision "
            f"{fig['top5_precision']:.3f}, MAE {fig['mae']:.4g}, R² {fig['r2']:.3f} (n = {fig['n']})")


def cmd_predictor(args: argparse.Namespace) -> int:
    import sys

    command = getattr(args, "predictor_command", None)
    if command == "fit":
        return _fit(args)
    if command == "evaluate":
        return _evaluate(args)
    print("usage: nas predictor {fit,evaluate} ... (nas predictor fit --help)", file=sys.stderr)
    return 2


def _fit(args: argparse.Namespace) -> int:
    from hwnas.fileio import refuse_overwrite
    from hwnas.predictors import PREDICTORS, check_pairing
    from hwnas.predictors.fit import fit_predictor

    out = Path(args.out)
    refuse_overwrite([out], force=args.force)
    PREDICTORS.validate_params(args.predictor, args.params)
    check_pairing(args.predictor, args.features)
    data = _data(args, args.target)
    model = fit_predictor(data, args.predictor, args.params, features=args.features, folds=args.folds,
                          seed=args.seed)
    model.save(out)
    cv = model.meta["validation"]
    print(f"fitted {args.predictor} [{args.features}, {model.n_features} features] on {data.y.size} "
          f"{data.space.name} architectures ({args.target})")
    if cv:
        print(f"{cv['folds']}-fold cross-validation: {_figures_line(cv)}")
    print(f"wrote {out}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from hwnas.predictors.evaluate import evaluate_saved_predictor

    ev = evaluate_saved_predictor(args.file, lambda target: _data(args, target), target=args.target)
    print(f"{args.file} ({ev.predictor} [{ev.features}]) on {ev.n} architectures ({ev.target}): "
          f"{_figures_line(ev.figures)}")
    return 0
