"""Zero-cost proxies against short-trained top-1 on the quickstart space (run by hand; prints figures).

N architectures of ``experiments/quickstart.yaml``'s space (distinct, sampled with default_rng(--seed)) are
trained with the quickstart's recipe on its data (scikit-learn's digits, 40 % held out) and scored by every
zero-cost proxy on one batch of the training split, plus params and FLOPs as baselines. Prints Kendall tau and
Spearman rho of each against the held-out top-1 (a proxy where lower is claimed better is negated first), and
writes the raw rows as JSON.

Then the proxies as predictor *features*: Kendall tau of out-of-fold predictions (5-fold cross-validation,
repeated over --cv-seeds fold seeds; the ``gbt`` predictor, 200 trees) of top-1 from the space's encoding alone,
from the encoding plus every proxy (``encode+metric:zc_...``), and from the proxies alone.

    python benchmarks/zero_cost_proxies.py [--n 50] [--seed 0] [--out zero_cost.json] [--rows zero_cost.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="zero_cost.json")
    ap.add_argument("--rows", default=None, help="read the rows of an earlier run (its --out) instead of training")
    ap.add_argument("--cv-seeds", type=int, default=10, help="fold seeds of the feature comparison (default 10)")
    args = ap.parse_args()

    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.experiments import load_experiment
    from hwnas.predictors.zero_cost import PROXIES

    experiment = load_experiment(REPO / "experiments" / "quickstart.yaml")
    space = experiment.space
    data_source = next(e for e in experiment.evaluators if "top1" in e.provides).load_data
    ctx = EvalContext(space=space, data=data_source, seed=experiment.config.seed)
    train_params = next(e for e in experiment.evaluators if "top1" in e.provides).params.model_dump()
    train_params["save_weights"] = False
    train = EVALUATORS.create("train", train_params, context=ctx)
    zc = EVALUATORS.create("zero_cost", {"proxies": list(PROXIES)}, context=ctx)
    cx = EVALUATORS.create("complexity", {}, context=ctx)
    if args.rows:
        rows = json.loads(Path(args.rows).read_text())
        report(rows, space, args.cv_seeds, time.perf_counter())
        return
    rng = np.random.default_rng(args.seed)
    archs: dict[str, Any] = {}
    while len(archs) < args.n:
        a = space.canonicalize(space.sample(rng))
        archs.setdefault(a.arch_id, a)
    rows = []
    t0 = time.perf_counter()
    for i, arch in enumerate(archs.values()):
        start = time.perf_counter()
        proxies = zc.evaluate([arch])[0]
        zc_s = time.perf_counter() - start
        row = {"arch": arch.to_dict(), **proxies,
               **cx.evaluate([arch])[0], **train.evaluate([arch])[0], "zero_cost_s": zc_s}
        rows.append(row)
        print(f"{i + 1}/{args.n} top1 {row['top1']:.3f}  " + "  ".join(f"{k} {row[k]:.4g}" for k in proxies),
              flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1, default=str))
    report(rows, space, args.cv_seeds, t0)


def report(rows: list[dict[str, Any]], space: Any, cv_seeds: int, t0: float) -> None:
    from scipy.stats import kendalltau, spearmanr

    from hwnas.architecture import Architecture
    from hwnas.predictors import featurize
    from hwnas.predictors.fit import cross_validate
    from hwnas.predictors.zero_cost import HIGHER_IS_BETTER

    top1 = np.array([r["top1"] for r in rows])
    print(f"\n{len(rows)} quickstart architectures (mbv3, digits, 40 % held out, quickstart recipe), "
          f"top-1 {top1.min():.3f}..{top1.max():.3f}; {time.perf_counter() - t0:.0f} s")
    print(f"{'score':12s} {'Kendall tau':>12s} {'Spearman rho':>13s}")
    for key, higher in [*((f"zc_{k}", v) for k, v in HIGHER_IS_BETTER.items()), ("params_m", True), ("flops_m", True)]:
        s = np.array([r[key] for r in rows]) * (1 if higher else -1)
        print(f"{key:12s} {kendalltau(s, top1)[0]:12.3f} {spearmanr(s, top1)[0]:13.3f}"
              + ("" if higher else "   (negated: lower claimed better)"))
    print(f"zero-cost seconds per architecture (all five proxies): median "
          f"{np.median([r['zero_cost_s'] for r in rows]):.3f}")
    archs = [Architecture.from_dict(r["arch"]) for r in rows]
    zc = "+".join(f"metric:zc_{k}" for k in HIGHER_IS_BETTER)
    print(f"\nas predictor features: gbt (200 trees), 5-fold CV Kendall tau of top-1, mean ± std over {cv_seeds} "
          "fold seeds")
    for features in ("encode", f"encode+{zc}", zc):
        X = featurize(space, archs, features, rows)
        taus = [cross_validate("gbt", {"n_estimators": 200}, X, top1, folds=5, seed=s)["kendall_tau"]
                for s in range(cv_seeds)]
        label = features.replace(zc, "zc_*")
        print(f"{label:16s} {np.mean(taus):.3f} ± {np.std(taus, ddof=1):.3f}")


if __name__ == "__main__":
    main()
