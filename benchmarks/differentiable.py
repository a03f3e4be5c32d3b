"""Differentiable search with a latency term, measured: DARTS cells on scikit-learn's digits, this CPU.

    python benchmarks/differentiable.py --out runs/bench/differentiable

1. A latency table for a small DARTS space (digits at 16x16, 3 cells, 16 channels) is profiled on this CPU with
   onnxruntime (1 thread, in context) and calibrated on 30 random networks measured end to end (resumes).
2. One supernet warm-up, then one search per latency weight (penalty mode, ``--lambdas``) and one per target
   (budget mode: ``--target-fracs`` of the way from the fastest to the largest member, by the table).
3. Every derived cell is trained from scratch (``--epochs``, ``--train-seeds`` seeds, mean top-1 on the held-out
   30 % of digits) and its whole network measured end to end (onnxruntime, 5 interleaved rounds, median): the latency
   figures are measured, not the table's.
4. Search cost: regularized evolution (population 8, tournament 4) trains cells from scratch with the same
   recipe until one reaches the λ = 0 cell's top-1 (or ``--evolution-trials``); its wall time against the
   differentiable search's (warm-up + search + training the derived cell).

Prints the rows and writes ``summary.json`` and ``differentiable.png`` under ``--out``. Timings are for this
machine; run it alone (nothing else on the cores).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def build_table(space: Any, out: Path, args: argparse.Namespace) -> Any:
    from hwnas.latency import TableLatencyModel
    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import LatencyTable, profile_space, validate_table

    backend = BACKENDS.get("onnxruntime")(threads=1)
    protocol = MeasureProtocol(warmup=10, repeats=50, min_time_s=0.2, rounds=5)
    path = out / f"darts_r{space.params.resolution}_c{space.params.cells}_ch{space.params.init_channels}_table.json"
    rep = profile_space(space, backend, device="this-cpu", out=path, protocol=protocol, in_context=True)
    table = LatencyTable.load(path)
    if table.calibration is None:
        validate_table(table, space, backend, n=30, rng=np.random.default_rng(0), protocol=protocol, out=path)
        table = LatencyTable.load(path)
    print(f"table: {len(table.entries)} units ({rep.wall_s:.0f} s profiling), calibrated on 30 networks")
    return TableLatencyModel(table=table, space=space), backend, protocol


def train_top1(space: Any, arch: Any, data: Any, args: argparse.Namespace) -> float:
    import torch

    from hwnas.training.recipe import TrainRecipe, build_seeded, evaluate_top1, train_model

    recipe = TrainRecipe(epochs=args.epochs, batch_size=64, optimizer="adamw", lr=0.01, weight_decay=0.01)
    scores = []
    for seed in range(args.train_seeds):
        model = build_seeded(space, arch, seed)
        train_model(model, data.x_train, data.y_train, recipe, generator=torch.Generator().manual_seed(seed))
        scores.append(evaluate_top1(model, data.x_val, data.y_val)[0])
    return float(np.mean(scores))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--strategy", default="gdas", help="a one-shot strategy (gdas: one path per step, the fastest)")
    ap.add_argument("--resolution", type=int, default=16, help="digits are upsampled from 8x8")
    ap.add_argument("--cells", type=int, default=3)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--lambdas", type=float, nargs="+", default=[0.0, 2.0, 8.0], help="latency weights, per ms")
    ap.add_argument("--target-fracs", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--train-seeds", type=int, default=2)
    ap.add_argument("--evolution-trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from hwnas.data import DataConfig, DataSource
    from hwnas.experiments.oneshot_search import Batches
    from hwnas.latency.tables import measure_networks
    from hwnas.objectives import Objective, Trial
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.strategies.differentiable import most_probable_member
    from hwnas.supernet import SUPERNETS
    from hwnas.supernet import builtin as _builtin  # noqa: F401

    torch.set_num_threads(2)
    SPACE = {"resolution": args.resolution, "in_chans": 1, "num_classes": 10, "cells": args.cells,
             "init_channels": args.channels}
    space = SPACES.create("darts", SPACE)
    model, backend, protocol = build_table(space, out, args)
    largest = space.largest()
    fastest = None
    data = DataSource(DataConfig(name="digits", val_fraction=0.3))(SPACE["resolution"])
    split = np.random.default_rng([args.seed, 1]).permutation(len(data.x_train))
    w_idx, a_idx = split[: len(split) // 2], split[len(split) // 2:]

    probe = ONE_SHOT_STRATEGIES.create(args.strategy, {"latency_weight": 1.0}, space=space,
                                       rng=np.random.default_rng(args.seed))
    probe.prepare_latency(model)
    assert probe.linear is not None
    fastest = most_probable_member(space, {k: -v for k, v in probe.linear.delta.items()})
    lo_ms, hi_ms = (float(v) for v in model.predict_ms([fastest, largest]))
    targets = [round(lo_ms + f * (hi_ms - lo_ms), 4) for f in args.target_fracs]
    print(f"table range: fastest {lo_ms:.4f} ms, largest {hi_ms:.4f} ms; targets {targets}")

    runs: list[dict[str, Any]] = [{"latency_weight": w} for w in args.lambdas] + [{"target_ms": t} for t in targets]
    t0 = time.perf_counter()
    supernet = SUPERNETS.create("darts", {}, space=space, generator=torch.Generator().manual_seed(args.seed))
    train = Batches(data.x_train[w_idx], data.y_train[w_idx], 64, np.random.default_rng([args.seed, 2]))
    probe.warmup(supernet, train, steps=args.warmup)
    warm = copy.deepcopy(supernet.state_dict())
    warmup_s = time.perf_counter() - t0
    rows = []
    for k, run in enumerate(runs):
        t1 = time.perf_counter()
        supernet.load_state_dict(warm)
        strategy = ONE_SHOT_STRATEGIES.create(args.strategy, {"steps": args.steps, **run}, space=space,
                                              rng=np.random.default_rng([args.seed, k]))
        found = strategy.search(
            supernet,
            Batches(data.x_train[w_idx], data.y_train[w_idx], 64, np.random.default_rng([args.seed, 3, k])),
            Batches(data.x_train[a_idx], data.y_train[a_idx], 64, np.random.default_rng([args.seed, 4, k])),
            steps=args.steps, latency_model=model)
        search_s = time.perf_counter() - t1
        arch = found[0]
        t2 = time.perf_counter()
        top1 = train_top1(space, arch, data, args)
        train_s = (time.perf_counter() - t2) / args.train_seeds
        rows.append({**run, "arch": arch.to_dict(), "genotype": str(space.to_genotype(arch)),
                     "table_ms": float(model.predict_ms([arch])[0]), "top1": top1, "search_s": round(search_s, 1),
                     "train_s": round(train_s, 1), "param_free": list(space.parameter_free_ops(arch)),
                     "stopped": strategy.record.get("stopped"), "landed": strategy.record.get("landed")})
        print(f"  {run}: top1 {top1:.4f}  table {rows[-1]['table_ms']:.4f} ms  search {search_s:.0f} s  "
              f"param-free {rows[-1]['param_free']}{'  ' + str(rows[-1]['stopped']) if rows[-1]['stopped'] else ''}")
    measured = measure_networks(space, backend, [r_arch(r) for r in rows] + [largest, fastest], protocol)
    for r, ms in zip(rows, measured):
        r["measured_ms"] = round(float(ms), 5)
    ref = rows[0]
    print(f"\nDARTS cells on digits ({args.resolution}x{args.resolution}, {args.cells} cells, {args.channels} "
          f"channels), {args.strategy}, {args.steps} steps after "
          f"{args.warmup} warm-up; top-1 = mean of {args.train_seeds} trainings from scratch ({args.epochs} epochs) "
          "on the held-out 30 % of digits; latency measured end to end with onnxruntime on this CPU (1 thread, "
          "batch 1, median of 5 interleaved rounds)")
    print(f"{'run':>22s} {'top1':>7s} {'measured ms':>11s} {'vs λ=0':>8s} {'table ms':>9s} {'target err':>10s}")
    for r in rows:
        label = (f"λ={r['latency_weight']:g}" if "latency_weight" in r else f"target {r['target_ms']:.4f}")
        rel = r["measured_ms"] / ref["measured_ms"] - 1
        err = f"{r['measured_ms'] / r['target_ms'] - 1:+.1%}" if "target_ms" in r else ""
        print(f"{label:>22s} {r['top1']:7.4f} {r['measured_ms']:11.4f} {rel:+8.1%} {r['table_ms']:9.4f} {err:>10s}")
    print(f"(largest member measured {measured[-2]:.4f} ms, fastest {measured[-1]:.4f} ms)")

    # search cost: evolution training cells from scratch until one reaches the λ = 0 cell's top-1
    goal = ref["top1"]
    evo = STRATEGIES.create("evolution", {"population_size": 8, "sample_size": 4}, space=space,
                            objectives=[Objective("top1", "max")], constraints=[],
                            rng=np.random.default_rng(args.seed))
    t3 = time.perf_counter()
    best, trials, reached = 0.0, 0, None
    seen: dict[str, float] = {}
    while trials < args.evolution_trials:
        (arch,) = evo.ask(1)
        arch = space.canonicalize(arch)
        if arch.arch_id in seen:  # told its known score again, as the runner's journal cache would
            evo.tell([Trial(trials, arch, {"top1": seen[arch.arch_id]}, "ok", 0.0)])
            continue
        top1 = seen[arch.arch_id] = train_top1(space, arch, data, args)
        evo.tell([Trial(trials, arch, {"top1": top1}, "ok", 0.0)])
        trials += 1
        best = max(best, top1)
        if reached is None and top1 >= goal:
            reached = trials
            break
    evo_s = time.perf_counter() - t3
    diff_s = warmup_s + ref["search_s"] + ref["train_s"] * args.train_seeds
    print(f"\nsearch cost to top-1 {goal:.4f}: differentiable {diff_s:.0f} s (warm-up {warmup_s:.0f} + search "
          f"{ref['search_s']:.0f} + training the derived cell {ref['train_s'] * args.train_seeds:.0f}); evolution "
          + (f"{evo_s:.0f} s ({reached} cells trained)" if reached else
             f"did not reach it in {trials} cells ({evo_s:.0f} s, best {best:.4f})"))
    summary = {"space": SPACE, "strategy": args.strategy, "steps": args.steps, "warmup": args.warmup,
               "epochs": args.epochs, "train_seeds": args.train_seeds, "targets_ms": targets,
               "fastest_table_ms": lo_ms, "largest_table_ms": hi_ms, "largest_measured_ms": measured[-2],
               "fastest_measured_ms": measured[-1], "warmup_s": round(warmup_s, 1), "runs": rows,
               "evolution": {"goal_top1": goal, "reached_after": reached, "trials": trials, "best": best,
                             "wall_s": round(evo_s, 1)}, "differentiable_cost_s": round(diff_s, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    _plot(rows, out / "differentiable.png")
    return 0


def r_arch(row: dict[str, Any]) -> Any:
    from hwnas.architecture import Architecture

    return Architecture.from_dict(row["arch"])


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in rows:
        if "latency_weight" in r:
            ax.scatter(r["measured_ms"], r["top1"], marker="o", color="C0")
            ax.annotate(f"λ={r['latency_weight']:g}", (r["measured_ms"], r["top1"]), fontsize=8)
        else:
            ax.scatter(r["measured_ms"], r["top1"], marker="s", color="C1")
            ax.axvline(r["target_ms"], color="C1", ls="--", lw=0.7)
    ax.set_xlabel("measured latency (ms, onnxruntime, this CPU, batch 1)")
    ax.set_ylabel("top-1 (held-out digits, trained from scratch)")
    ax.set_title("DARTS cells on digits: derived cells (circles: penalty λ; squares: budget, dashed targets)",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
