"""Few-shot latency, leave one device out, on HW-NAS-Bench's five FBNet devices (their published LUTs).

HELP's tables hold GPUs, CPUs and phones that rank architectures alike; HW-NAS-Bench's FBNet LUT adds an
edge GPU, an ASIC (Eyeriss) and an FPGA, which do not. Each device in turn is the new one, the other four
the known ones; an architecture's latency on a device is the sum of its LUT entries (HW-NAS-Bench's own
definition). ``--archs`` random architectures (seeded): the first ``--pool`` are where the k samples are
drawn, the rest the query set. Prints Spearman rho, MAPE and the share within +-10 % on the query set, mean
over ``--seeds``, for each method: on the space's one-hot encoding, the transfer without and with its
residual model (hwnas's default before unit features); on hwnas's few-shot features (``UnitFeatures``: the
encoding, unit and unit-attribute counts), the transfer with its residual, the same blended with the model
of the target's own samples (hwnas's default until 2026-11-28), that own model alone (ridge), and hwnas's
default (``FewShotLatencyPredictor()``: on ms, the evidence correction).

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

    from hwnas.latency.features import UnitFeatures
    from hwnas.latency.predictors import FewShotLatencyPredictor, LatencyRidgePredictor
    from hwnas.latency.published import hw_nas_bench_fbnet_table
    from hwnas.latency.tables.model import TableLatencyModel
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
    features = UnitFeatures.of_space(space)
    assert features is not None
    U = features.transform(space, archs)
    L = np.column_stack([TableLatencyModel(table=hw_nas_bench_fbnet_table(args.lut, space=space, metric=d),
                                           space=space).predict_ms(archs) for d in DEVICES])
    pool, query = np.arange(args.pool), np.arange(args.pool, args.archs)
    methods = {  # name: (features, residual, own); None = ridge on the target's samples alone; "default" = hwnas's
        # default (the evidence correction on ms); the others: log-latency, the cross-validated correction
        "onehot transfer": (X, False, False), "onehot +residual": (X, True, False),
        "hwnas +residual": (U, True, False), "hwnas +residual+own": (U, True, True), "hwnas ridge": (U, None, None),
        "hwnas default": (U, "default", None),
    }
    print(f"rho / MAPE / share within +-10 % on {len(query)} query archs, mean over {args.seeds} seeds")
    print(f"{'new device':16s} {'method':20s} " + " ".join(f"{'k=' + str(k):>20s}" for k in ks))
    for ti, target in enumerate(DEVICES):
        known = [j for j in range(len(DEVICES)) if j != ti]
        for method, (F, residual, own) in methods.items():
            cells = []
            for k in ks:
                rhos, mapes, within = [], [], []
                for seed in range(args.seeds):
                    s = np.random.default_rng(seed).permutation(pool)[:k]
                    if residual is None:
                        model = LatencyRidgePredictor().fit(F[s], L[s, ti])
                    else:
                        model = FewShotLatencyPredictor() if residual == "default" else FewShotLatencyPredictor(
                            residual=bool(residual), own=bool(own), correction="cv", scale="log")
                        model.fit_sources(F[pool], L[np.ix_(pool, known)]).fit(F[s], L[s, ti])
                    p, y = model.predict(F[query]), L[query, ti]
                    err = np.abs(p - y) / y
                    rhos.append(spearmanr(p, y).statistic)
                    mapes.append(100 * float(np.mean(err)))
                    within.append(100 * float(np.mean(err <= 0.10)))
                cells.append(f"{np.mean(rhos):.3f} {np.mean(mapes):4.1f}% {np.mean(within):3.0f}%")
            print(f"{target:16s} {method:20s} " + " ".join(f"{c:>20s}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
