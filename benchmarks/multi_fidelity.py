"""Multi-fidelity against single-fidelity search at equal cost, through ``nas run``'s own runner.

(a) ``nb201``: NAS-Bench-201 on CIFAR-10, objectives top-1 (max) and the Pixel 3 latency of HW-NAS-Bench (min).
Single fidelity: every candidate is scored by its 12-epoch CIFAR-10 validation accuracy (``cifar10_valid_12ep``),
costing 12 epochs. Multi-fidelity: every candidate is first scored by a zero-cost proxy, its parameter count
(costed at ``--proxy-cost`` epochs), and the best ``--promote`` of each bracket of ``--bracket`` (feasible first, by
non-dominated rank, then hypervolume contribution) goes on to the 12-epoch validation accuracy. Both spend
``--budget`` epochs. The search reads a table holding only the architecture string, the proxy and the 12-epoch
validation column: the 200-epoch test accuracy (``cifar10_test_200ep``) is never a search signal. It is read by
this harness afterwards, to score the front each run found: for every member its 200-epoch test accuracy, then

- ``best test``: the front's best 200-epoch test accuracy;
- ``HV``: the hypervolume of the front re-scored (test accuracy x latency), as a fraction of the exact front's
  of the whole table, in a box at the table's median test accuracy and median latency. The box is the harness's
  scoring, computed here and never given to a strategy or the run (neither needs a reference point: promotion
  takes its box from the rung's own trials);

each at the cost checkpoints ``--checkpoints`` (fractions of the budget: the front of what was evaluated at the top
rung by then), mean over ``--seeds`` seeds, for each strategy of ``--strategies``; and the cost (epochs, median
over the seeds; ``inf``: not within the budget) at which the front first holds a member of ``--target-test`` test
accuracy, and first reaches ``--target-hv`` of the exact front's hypervolume.

The proxy column is computed here with the project's ``complexity`` evaluator (parameters of the built network,
CIFAR-10 shape). An NB201 network has the modules of all six edges whatever the wiring, so its parameter count is a
function of its operations' multiset: one network is built per multiset (210) and the count checked on
``--check`` random cells built whole. The table is written to a temporary folder and removed.

(b) ``digits``: real training on scikit-learn's digits (``--images``), top-1 (max) and FLOPs (min), a small
MobileNetV3-style space; single fidelity trains each candidate ``--epochs-top`` epochs, multi-fidelity 1 epoch
first, then the best ``--promote`` at ``--epochs-top``. The front's top-1 is the held-out accuracy at the top rung.

    nice -n 10 python benchmarks/multi_fidelity.py nb201 --seeds 3
    nice -n 10 python benchmarks/multi_fidelity.py digits --seeds 2
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("HWNAS_SHARED_DATA", REPO.parent / "shared" / "data"))
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")


def _proxy_table(folder: Path, check: int) -> Path:
    """arch_str, params_m (the zero-cost proxy) and cifar10_valid_12ep of every NB201 cell, in a CSV under
    ``folder``: the only table the multi-fidelity search reads accuracy from."""
    import torch

    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.search_spaces import SPACES

    torch.set_num_threads(1)
    space = SPACES.create("nb201", {"merge_isomorphic": False})
    complexity = EVALUATORS.create("complexity", {}, context=EvalContext(space=space))
    with open(DATA / "nas-bench-201" / "nb201_accuracy.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    genes = [g.name for g in space.genes()]
    by_multiset: dict[tuple[int, ...], float] = {}
    for combo in itertools.combinations_with_replacement(range(len(OPS)), len(genes)):
        arch = space.canonicalize(_arch(space, genes, combo))
        result = complexity.evaluate([arch])[0]
        assert not isinstance(result, BaseException), result
        by_multiset[_multiset(combo)] = float(result["params_m"])
    rng = np.random.default_rng(0)
    for _ in range(check):  # the multiset rule, checked on whole random cells
        arch = space.sample(rng)
        result = complexity.evaluate([arch])[0]
        assert not isinstance(result, BaseException), result
        ops = tuple(int(arch.genes[g]) for g in genes)  # type: ignore[call-overload]
        assert math.isclose(by_multiset[_multiset(ops)], result["params_m"], rel_tol=1e-9), (arch, result)
    path = folder / "nb201_proxy.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arch_str", "params_m", "cifar10_valid_12ep"])
        for r in rows:
            arch = space.from_str(r["arch_str"])
            ops = tuple(int(arch.genes[g]) for g in genes)  # type: ignore[call-overload]
            w.writerow([r["arch_str"], by_multiset[_multiset(ops)], r["cifar10_valid_12ep"]])
    return path


def _arch(space: Any, genes: Sequence[str], ops: Sequence[int]) -> Any:
    from hwnas.architecture import Architecture

    return Architecture(space.name, dict(zip(genes, ops)))


def _multiset(ops: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(ops))


def _nb201_config(table: Path, *, seed: int, strategy: dict[str, Any], budget: float, mf: bool, bracket: int,
                  promote: float, proxy_cost: float, root: Path, name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": name, "seed": seed, "space": {"name": "nb201"},
        "evaluators": [
            {"name": "benchmark", "params": {"table": str(DATA / "hw-nas-bench" / "nb201_cifar10_latency.csv"),
                                             "columns": {"latency_ms@pixel3": "pixel3_latency"}}},
            {"name": "benchmark", "params": {"table": str(table), "columns": {"top1": "cifar10_valid_12ep"},
                                             "cheap": False}},
        ],
        "objectives": [{"metric": "top1", "direction": "max"}, {"metric": "latency_ms@pixel3", "direction": "min"}],
        "strategy": strategy,
        "export": {"enabled": False}, "output": {"root": str(root)},
    }
    if mf:
        cfg["budget"] = {"batch_size": bracket}
        cfg["multi_fidelity"] = {"evaluator": 1, "promote": promote, "budget": budget, "unit": "epochs", "rungs": [
            {"fidelity": {"top1": "params_m"}, "cost": proxy_cost},
            {"fidelity": {"top1": "cifar10_valid_12ep"}, "cost": 12}]}
    else:
        cfg["budget"] = {"trials": int(budget // 12), "batch_size": bracket}
    return cfg


def _journal(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]


def _scores(lines: Sequence[dict[str, Any]], *, top_rung: int | None, step_cost: float, budget: float,
            checkpoints: Sequence[float], test: dict[str, float], box: np.ndarray, exact_hv: float,
            space: Any) -> list[tuple[float, float]]:
    """(best 200-epoch test accuracy, HV fraction) of the front of the top-rung trials evaluated within each
    checkpoint's cost (a fraction of the budget), the journal read in the order it was written."""
    from hwnas.architecture import Architecture
    from hwnas.objectives import hypervolume, non_dominated

    spent = np.cumsum([d.get("rung_cost", step_cost) for d in lines])
    out = []
    for mark in checkpoints:
        seen = [d for d, c in zip(lines, spent) if c <= mark * budget + 1e-9 and d["status"] == "ok"
                and (top_rung is None or d.get("rung") == top_rung)]
        pts = np.array([[-test[space.to_str(Architecture.from_dict(d["arch"]))], d["metrics"]["latency_ms@pixel3"]]
                        for d in seen]).reshape(-1, 2)
        if not len(pts):
            out.append((math.nan, 0.0))
            continue
        front = pts[non_dominated(pts)]
        out.append((float(-front[:, 0].min()), hypervolume(front, box) / exact_hv))
    return out


def _cost_to_reach(lines: Sequence[dict[str, Any]], *, top_rung: int | None, step_cost: float,
                   test: dict[str, float], box: np.ndarray, exact_hv: float, space: Any, target_test: float,
                   target_hv: float) -> tuple[float, float]:
    """(cost at which the front first holds a member of at least ``target_test`` 200-epoch test accuracy, cost at
    which its HV fraction first reaches ``target_hv``); inf when never."""
    from hwnas.architecture import Architecture
    from hwnas.objectives import hypervolume, non_dominated

    spent, pts = 0.0, []
    reach_test = reach_hv = math.inf
    for d in lines:
        spent += d.get("rung_cost", step_cost)
        if d["status"] != "ok" or (top_rung is not None and d.get("rung") != top_rung):
            continue
        pts.append([-test[space.to_str(Architecture.from_dict(d["arch"]))], d["metrics"]["latency_ms@pixel3"]])
        if -pts[-1][0] >= target_test:
            reach_test = min(reach_test, spent)
        if reach_hv == math.inf:
            arr = np.array(pts)
            if hypervolume(arr[non_dominated(arr)], box) / exact_hv >= target_hv:
                reach_hv = spent
    return reach_test, reach_hv


def nb201(args: argparse.Namespace) -> None:
    from hwnas.experiments import run_experiment
    from hwnas.objectives import hypervolume, non_dominated
    from hwnas.search_spaces import SPACES

    space = SPACES.create("nb201", {"merge_isomorphic": False})
    with open(DATA / "nas-bench-201" / "nb201_accuracy.csv", newline="") as f:
        test = {r["arch_str"]: float(r["cifar10_test_200ep"]) for r in csv.DictReader(f)}
    with open(DATA / "hw-nas-bench" / "nb201_cifar10_latency.csv", newline="") as f:
        lat = {r["arch_str"]: float(r["pixel3_latency"]) for r in csv.DictReader(f)}
    keys = sorted(test)
    table_pts = np.array([[-test[k], lat[k]] for k in keys])
    box = np.array([-np.median([test[k] for k in keys]), np.median([lat[k] for k in keys])])  # the harness's own
    exact_hv = hypervolume(table_pts[non_dominated(table_pts)], box)
    folder = Path(tempfile.mkdtemp(prefix="hwnas-mf-"))
    try:
        t0 = time.perf_counter()
        table = _proxy_table(folder, args.check)
        print(f"proxy table: {time.perf_counter() - t0:.0f} s (210 multisets, {args.check} cells checked whole)")
        strategies = {
            "random": {"name": "random"},
            "evolution": {"name": "evolution", "params": {"population_size": 32, "sample_size": 8}},
            "nsga2": {"name": "nsga2", "params": {"pop_size": 32}},
        }
        checkpoints = [float(c) for c in args.checkpoints.split(",")]
        print(f"NB201 CIFAR-10 x Pixel 3 latency; budget {args.budget:g} epochs; MF: proxy params_m at "
              f"{args.proxy_cost:g} epoch, then cifar10_valid_12ep at 12, promote {args.promote:g}, bracket "
              f"{args.bracket}; SF: cifar10_valid_12ep at 12 for every candidate; mean over seeds "
              f"{', '.join(map(str, range(args.seeds)))}")
        print(f"{'strategy':10s} {'search':4s} {'evaluated (per rung)':>22s} "
              + " ".join(f"{f'{c:.0%} test':>9s} {f'{c:.0%} HV':>8s}" for c in checkpoints)
              + f" {f'cost to {args.target_test:g}':>13s} {f'cost to HV {args.target_hv:g}':>15s}")
        for sname in args.strategies.split(","):
            for mf in (False, True):
                rows, counts, reach = [], [], []
                for seed in range(args.seeds):
                    name = f"{sname}-{'mf' if mf else 'sf'}-{seed}"
                    cfg = _nb201_config(table, seed=seed, strategy=strategies[sname], budget=args.budget, mf=mf,
                                        bracket=args.bracket, promote=args.promote, proxy_cost=args.proxy_cost,
                                        root=folder / "runs", name=name)
                    res = run_experiment(cfg)
                    lines = _journal(res.run_dir)
                    rows.append(_scores(lines, top_rung=1 if mf else None, step_cost=12.0, budget=args.budget,
                                        checkpoints=checkpoints, test=test, box=box, exact_hv=exact_hv,
                                        space=space))
                    counts.append([sum(d.get("rung", 0) == r for d in lines) for r in range(2 if mf else 1)])
                    reach.append(_cost_to_reach(lines, top_rung=1 if mf else None, step_cost=12.0, test=test,
                                                box=box, exact_hv=exact_hv, space=space,
                                                target_test=args.target_test, target_hv=args.target_hv))
                mean = np.nanmean(np.array(rows), axis=0)
                count = "/".join(f"{c:.0f}" for c in np.mean(np.array(counts), axis=0))
                med = np.median(np.array(reach), axis=0)  # inf (never, within the budget) counts as the worst
                print(f"{sname:10s} {'MF' if mf else 'SF':4s} {count:>22s} "
                      + " ".join(f"{b:9.2f} {h:8.3f}" for b, h in mean)
                      + f" {med[0]:13.0f} {med[1]:15.0f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def digits(args: argparse.Namespace) -> None:
    from hwnas.experiments import run_experiment

    space = {"name": "mbv3", "params": {"resolution": 8, "head_channels": 16, "stages": [
        {"channels": 8, "stride": 1, "depths": [1, 2]},
        {"channels": 16, "stride": 2, "depths": [1, 2], "se": True}]}}
    folder = Path(tempfile.mkdtemp(prefix="hwnas-mf-"))
    top = args.epochs_top
    try:
        print(f"digits ({args.images} images) x FLOPs; budget {args.budget:g} epochs; MF: 1 epoch then {top}, promote "
              f"{args.promote:g}, bracket {args.bracket}; SF: {top} epochs each; mean over seeds "
              f"{', '.join(map(str, range(args.seeds)))}")
        print(f"{'search':6s} {'trained (per rung)':>20s} {'front':>6s} {'best top1':>10s} {'wall s':>8s}")
        for mf in (False, True):
            best, sizes, counts, walls = [], [], [], []
            for seed in range(args.seeds):
                cfg: dict[str, Any] = {
                    "name": f"digits-{'mf' if mf else 'sf'}-{seed}", "seed": seed, "space": space,
                    "dataset": {"name": "digits", "max_images": args.images},
                    "evaluators": [{"name": "complexity"},
                                   {"name": "train", "params": {"epochs": top, "batch_size": 32,
                                                                "save_weights": False}}],
                    "objectives": [{"metric": "top1", "direction": "max"}, {"metric": "flops_m", "direction": "min"}],
                    "strategy": {"name": "random"}, "export": {"enabled": False},
                    "output": {"root": str(folder / "runs")},
                }
                if mf:
                    cfg["budget"] = {"batch_size": args.bracket}
                    cfg["multi_fidelity"] = {"evaluator": 1, "promote": args.promote, "budget": args.budget,
                                             "rungs": [{"fidelity": 1, "cost": 1}, {"fidelity": top, "cost": top}]}
                else:
                    cfg["budget"] = {"trials": int(args.budget // top), "batch_size": args.bracket}
                t0 = time.perf_counter()
                res = run_experiment(cfg)
                walls.append(time.perf_counter() - t0)
                lines = _journal(res.run_dir)
                counts.append([sum(d.get("rung", 0) == r for d in lines) for r in range(2 if mf else 1)])
                sizes.append(len(res.front))
                best.append(max((t.metrics["top1"] for t in res.front), default=math.nan))
            count = "/".join(f"{c:.0f}" for c in np.mean(np.array(counts), axis=0))
            print(f"{'MF' if mf else 'SF':6s} {count:>20s} {np.mean(sizes):6.1f} {np.nanmean(best):10.4f} "
                  f"{np.mean(walls):8.0f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("nb201", help="(a) the NB201 table, proxy then 12-epoch validation accuracy")
    a.add_argument("--seeds", type=int, default=3)
    a.add_argument("--budget", type=float, default=1200.0, help="epochs (SF: budget / 12 candidates)")
    a.add_argument("--bracket", type=int, default=16)
    a.add_argument("--promote", type=float, default=0.25)
    a.add_argument("--proxy-cost", type=float, default=0.1, help="epochs one proxy score is costed at")
    a.add_argument("--strategies", default="random,evolution")
    a.add_argument("--checkpoints", default="0.25,0.5,1.0")
    a.add_argument("--check", type=int, default=20, help="random cells whose parameters are counted whole")
    a.add_argument("--target-test", type=float, default=93.5, help="test accuracy whose cost to reach is printed")
    a.add_argument("--target-hv", type=float, default=0.5, help="HV fraction whose cost to reach is printed")
    b = sub.add_parser("digits", help="(b) real training on digits, epochs as the fidelity")
    b.add_argument("--seeds", type=int, default=2)
    b.add_argument("--budget", type=float, default=48.0)
    b.add_argument("--bracket", type=int, default=8)
    b.add_argument("--promote", type=float, default=0.25)
    b.add_argument("--epochs-top", type=int, default=4)
    b.add_argument("--images", type=int, default=600)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("hwnas").setLevel(logging.ERROR)
    nb201(args) if args.what == "nb201" else digits(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
