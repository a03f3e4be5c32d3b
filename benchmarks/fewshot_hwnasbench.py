"""Few-shot latency, leave one device out, on HW-NAS-Bench's five FBNet devices (their published LUTs).

HELP's tables hold GPUs, CPUs and phones that rank architectures alike; HW-NAS-Bench's FBNet LUT adds an
edge GPU, an ASIC (Eyeriss) and an FPGA, which do not. Each device in turn is the new one, the other four
the known ones; an architecture's latency on a device is the sum of its LUT entries (HW-NAS-Bench's own
definition). ``--archs`` random architectures (seeded): the first ``--pool`` are where the k samples are
drawn, the rest the query set. Prints Spearman rho and MAPE on the query set, mean over ``--seeds``, for
the transfer predictor without and with its residual model, and plain ridge on the target's samples.

    python benchmarks/fewshot_hwnasbench.py --lut ../shared/data/hw-nas-bench/fbnet_lut.json
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

DEVICES = ("edgegpu_latency", "raspi4_latency", "pixel3_latency", "eyeriss_latency", "fpga_latency")


def main(argv: list[str] | None = None) -> int:
    from scipy.stats import spearmanr

    from hwnas.latency.model import TableLatencyModel
    from hwnas.latency.predictors import FewShotLatencyPredictor, LatencyRidgePredictor
    from hwnas.latency.published import hw_nas_bench_fbnet_table
    from hwnas.search_spaces.fbnet import FBNetSpace

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lut", type=Path, default=Path("../shared/data/hw-nas-bench/fbnet_lut.json"))
    ap.add_argument("--archs", type=int, default=2500)
    ap.add_argument("--pool", type=int, default=1000)
    ap.add_argument("--ks", default="10,20,50")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    logging.getLogger("hwnas.latency.predictors").setLevel(logging.ERROR)  # the no-evidence fallback, expected here
    ks = [int(k) for k in args.ks.split(",")]
    space = FBNetSpace()
    rng = np.random.default_rng(0)
    archs = [space.sample(rng) for _ in range(args.archs)]
    X = np.stack([space.encode(a) for a in archs])
    L = np.column_stack([TableLatencyModel(table=hw_nas_bench_fbnet_table(args.lut, space=space, metric=d),
                                           space=space).predict_ms(archs) for d in DEVICES])
    pool, query = np.arange(args.pool), np.arange(args.pool, args.archs)
    methods = ("transfer", "transfer+residual", "ridge")
    print(f"{'new device':16s} " + " ".join(f"{m + ' k=' + str(k):>24s}" for m in methods for k in ks))
    for ti, target in enumerate(DEVICES):
        known = [j for j in range(len(DEVICES)) if j != ti]
        cells = []
        for method in methods:
            for k in ks:
                rhos, mapes = [], []
                for seed in range(args.seeds):
                    s = np.random.default_rng(seed).permutation(pool)[:k]
                    if method == "ridge":
                        model = LatencyRidgePredictor().fit(X[s], L[s, ti])
                    else:
                        model = FewShotLatencyPredictor(residual=method != "transfer").fit_sources(
                            X[pool], L[np.ix_(pool, known)]).fit(X[s], L[s, ti])
                    p, y = model.predict(X[query]), L[query, ti]
                    rhos.append(spearmanr(p, y).statistic)
                    mapes.append(100 * float(np.mean(np.abs(p - y) / y)))
                cells.append(f"rho {np.mean(rhos):.3f} MAPE {np.mean(mapes):4.1f}%")
        print(f"{target:16s} " + " ".join(f"{c:>24s}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
