"""Prediction throughput of the shipped predictors on this CPU (run by hand; a figure, not a test).

Each predictor is fitted on 1,000 NAS-Bench-201 cells (cell features, CIFAR-10 200-epoch test accuracy from
../shared/data), then predicts a batch of N rows (the 15,625 cells repeated) --repeat times; the median time
gives architectures per second. Featurising is timed apart (it is paid once per architecture in a search).

    python benchmarks/predictor_throughput.py [--rows 1000000] [--repeat 5] [--predictors mlp,gbt,ensemble]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--predictors", default="mlp,gbt,ensemble,gp")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = ap.parse_args()

    import torch

    from hwnas.bench.predictors import nb201_cells
    from hwnas.bench.strategies import load_nb201, machine
    from hwnas.predictors import PREDICTORS, featurize

    space, archs = nb201_cells()
    start = time.perf_counter()
    X = featurize(space, archs, "cell")
    feat_s = time.perf_counter() - start
    y = load_nb201(args.data).accuracy["cifar10_test_200ep"]
    train = np.random.default_rng(0).permutation(len(archs))[:1000]
    batch = np.resize(X, (args.rows, X.shape[1]))
    m = machine()
    print(f"{m['cpu']}, {m['cores']} cores, torch threads {torch.get_num_threads()}")
    print(f"featurize 'cell': {len(archs) / feat_s:,.0f} architectures/s ({len(archs)} NB201 cells)")
    for name in args.predictors.split(","):
        model = PREDICTORS.create(name, None, rng=np.random.default_rng(0)).fit(X[train], y[train])
        rows = batch if name != "gp" else batch[: min(args.rows, 100_000)]
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            model.predict(rows)
            times.append(time.perf_counter() - start)
        med = statistics.median(times)
        print(f"{name:9s} predict {rows.shape[0]:>9,} rows: median {med:.3f} s over {args.repeat} -> "
              f"{rows.shape[0] / med:,.0f} architectures/s")


if __name__ == "__main__":
    main()
