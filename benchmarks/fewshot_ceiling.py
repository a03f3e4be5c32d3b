"""How well any model of the networks can rank a device's latencies: the per-device ceiling behind few-shot figures.

For each device column of HELP's tables, three models are fitted on thousands of that device's *own* measured
networks (archs ``--train-from`` onwards, none of HELP's pool or query set) and scored, as the few-shot benchmark
scores, by Spearman rho on the device's trimmed query set (archs 900-1899, its 10 %-90 % latency band): ridge on
hwnas's few-shot features (the encoding, unit and unit-attribute counts) of log-latency and of latency in ms, and
gradient-boosted trees on the same features (interactions a linear model misses); and, as ``ties``, the column's
own ranking with its ties broken at random (what rounding to whole milliseconds alone costs). No few-shot model,
which sees 10 of the device's networks, should be expected to rank it better than these. A column whose ceiling
is below a target cannot reach it, whatever the method: its latencies hold what the networks do not explain.

    python benchmarks/fewshot_ceiling.py --trees --devices fbnet:essential_ph_1,nb201:pixel3
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from help_protocol import HelpProtocol, find_help_tables, hwnas_unit_features, load_help_table


def main(argv: list[str] | None = None) -> int:
    from scipy.stats import spearmanr
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    from hwnas.latency.predictors import DEFAULT_ALPHAS, ridge_loo

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data/help-latency"),
                   help="directory of HELP *_latency.csv files (default: %(default)s)")
    p.add_argument("--devices", default="",
                   help="comma-separated space:device pairs (default: every column of the NB201 and FBNet tables)")
    p.add_argument("--train-from", type=int, default=2000, help="first arch of the training set (default: %(default)s)")
    p.add_argument("--train-size", type=int, default=6000,
                   help="most archs in the training set (default: %(default)s; FBNet's table has 3,000 after 2,000)")
    p.add_argument("--trees", action="store_true", help="also fit the gradient-boosted trees (slower)")
    args = p.parse_args(argv)
    tables = find_help_tables(args.data)
    wanted: dict[str, list[str]] = {}
    for pair in (s for s in args.devices.split(",") if s):
        space, _, device = pair.partition(":")
        wanted.setdefault(space, []).append(device)
    protocol = HelpProtocol()
    print(f"{'space':6s} {'device':16s} {'ties':>10s} {'ridge log':>10s} {'ridge ms':>10s} {'trees':>10s}   (Spearman "
          "rho on the trimmed query set, archs 900-1899; ties: the column itself, its ties broken at random)")
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for space in wanted or ("nb201", "fbnet"):
            table = load_help_table(tables[space])
            X = hwnas_unit_features(table)
            train = np.arange(args.train_from, min(table.n_archs, args.train_from + args.train_size))
            for device in wanted.get(space) or table.devices:
                y = table.column(device)
                _, query = protocol.split(y)
                tiebreak = np.random.default_rng(0).uniform(0.0, 1e-9, size=query.shape[0])
                cells = [float(spearmanr(y[query] + tiebreak, y[query])[0])]  # what whole-ms rounding costs
                for target, back in ((np.log(y), np.exp), (y, lambda v: v)):
                    _, coef, intercept, _ = ridge_loo(X[train], target[train], DEFAULT_ALPHAS)
                    cells.append(float(spearmanr(back(X[query] @ coef + intercept), y[query])[0]))
                if args.trees:
                    gbm = HistGradientBoostingRegressor(max_iter=300, random_state=0).fit(X[train], np.log(y[train]))
                    cells.append(float(spearmanr(gbm.predict(X[query]), y[query])[0]))
                print(f"{space:6s} {device:16s} " + " ".join(f"{c:10.3f}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
