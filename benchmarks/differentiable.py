"""Differentiable search with a latency term, measured: DARTS cells or the FBNet space on digits, this CPU.

    python benchmarks/differentiable.py --out runs/bench/differentiable
    python benchmarks/differentiable.py --space fbnet --landing --out runs/bench/differentiable_fbnet

1. A latency table for the space (DARTS: digits at 16x16, 3 cells, 16 channels; FBNet: HW-NAS-Bench's CIFAR
   setting, 32x32, one input channel, 10 classes) is profiled on this CPU with onnxruntime (1 thread, in context)
   and calibrated on 30 random networks measured end to end (resumes).
2. One supernet warm-up, then one search per latency weight (penalty mode, ``--lambdas``) and one per target
   (budget mode: ``--target-fracs`` of the way from the fastest to the largest member, by the table). With
   ``--landing`` each budget search also lands by measurement (``landing_metric``: the derived network timed 5
   times beside the space's largest member, re-derived against the table's target corrected by measured / table,
   up to 4 rounds of up to 3 networks; ``--landing-anchor none`` times it alone).
3. Every derived network is trained from scratch (``--epochs``, ``--train-seeds`` seeds, mean top-1 on the held-out
   30 % of digits) and its whole network measured end to end (onnxruntime, 5 interleaved rounds, median): the
   latency figures are measured, not the table's. With ``--landing`` the network the table alone landed is
   measured beside the one landed by measurement.
4. Search cost: regularized evolution (population 8, tournament 4) trains networks from scratch with the same
   recipe until one reaches the λ = 0 network's top-1 (or ``--evolution-trials``; 0 skips it); its wall time against
   the differentiable search's (warm-up + search + training the derived network).

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
    if space.name == "darts":
        path = out / f"darts_r{space.params.resolution}_c{space.params.cells}_ch{space.params.init_channels}_table.json"
    else:
        path = out / f"{space.name}_{space.params.setting}_table.json"
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
    ap.add_argument("--space", choices=["darts", "fbnet"], default="darts",
                    help="darts: DARTS cells (--resolution, --cells, --channels); fbnet: the FBNet space, 32x32")
    ap.add_argument("--landing", action="store_true", help="budget searches also land by measurement")
    ap.add_argument("--landing-anchor", choices=["largest", "none"], default="largest",
                    help="the strategy's landing_anchor: time each landing network beside the largest member or alone")
    ap.add_argument("--batch", type=int, default=64, help="images per search step")
    ap.add_argument("--strategy", default="gdas", help="a one-shot strategy (gdas: one path per step, the fastest)")
    ap.add_argument("--resolution", type=int, default=16, help="digits are upsampled from 8x8")
    ap.add_argument("--cells", type=int, default=3)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--lambdas", type=float, nargs="*", default=[0.0, 2.0, 8.0], help="latency weights, per ms "
                    "(the first is the reference of the 'vs' column and of the search cost)")
    ap.add_argument("--target-fracs", type=float, nargs="*", default=[0.25, 0.5, 0.75])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--train-seeds", type=int, default=2)
    ap.add_argument("--evolution-trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from hwnas.data import DataConfig, DataSource
    from hwnas.experiments.oneshot import Batches
    from hwnas.latency.tables import measure_networks
    from hwnas.objectives import Objective, Trial
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.strategies.differentiable import most_probable_member
    from hwnas.supernet import SUPERNETS

    torch.set_num_threads(2)
    if args.space == "darts":
        SPACE: dict[str, Any] = {"resolution": args.resolution, "in_chans": 1, "num_classes": 10, "cells": args.cells,
                                 "init_channels": args.channels}
    else:
        SPACE = {"in_chans": 1, "num_classes": 10}
    space = SPACES.create(args.space, SPACE)
    resolution = int(space.input_shape[-1])
    model, backend, protocol = build_table(space, out, args)
    largest = space.largest()
    fastest = None
    data = DataSource(DataConfig(name="digits", val_fraction=0.3))(resolution)
    landing = Measured(space, backend) if args.landing else None
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
    supernet = SUPERNETS.create(args.space, {}, space=space, generator=torch.Generator().manual_seed(args.seed))
    train = Batches(data.x_train[w_idx], data.y_train[w_idx], args.batch, np.random.default_rng([args.seed, 2]))
    probe.warmup(supernet, train, steps=args.warmup)
    warm = copy.deepcopy(supernet.state_dict())
    warmup_s = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    table_arch: dict[str, Any] = {}
    for k, run in enumerate(runs):
        t1 = time.perf_counter()
        supernet.load_state_dict(warm)
        strategy = ONE_SHOT_STRATEGIES.create(args.strategy, {"steps": args.steps, **run,
                                                              "landing_anchor": args.landing_anchor},
                                              space=space, rng=np.random.default_rng([args.seed, k]))
        use_landing = landing if "target_ms" in run else None
        found = strategy.search(
            supernet,
            Batches(data.x_train[w_idx], data.y_train[w_idx], args.batch, np.random.default_rng([args.seed, 3, k])),
            Batches(data.x_train[a_idx], data.y_train[a_idx], args.batch, np.random.default_rng([args.seed, 4, k])),
            steps=args.steps, latency_model=model, landing_model=use_landing)
        search_s = time.perf_counter() - t1
        arch = found[0]
        t2 = time.perf_counter()
        top1 = train_top1(space, arch, data, args)
        train_s = (time.perf_counter() - t2) / args.train_seeds
        rec = strategy.record
        rows.append({**run, "arch": arch.to_dict(), "genotype": describe(space, arch),
                     "table_ms": float(model.predict_ms([arch])[0]), "top1": top1, "search_s": round(search_s, 1),
                     "train_s": round(train_s, 1), "param_free": param_free(space, arch),
                     "stopped": rec.get("stopped"), "landed": rec.get("landed"),
                     "landing_measured_ms": rec.get("measured_ms") if use_landing is not None else None,
                     "anchor_ms": rec.get("anchor_ms")})
        if use_landing is not None:  # the network the table alone landed (the first measured), kept to compare
            first = rec["landing"][0]
            rows[-1]["landing"] = rec["landing"]
            rows[-1]["table_landed"] = {"arch_id": first["arch_id"], "table_ms": first["model_ms"]}
            table_arch[first["arch_id"]] = use_landing.archs[first["arch_id"]]
        print(f"  {run}: top1 {top1:.4f}  table {rows[-1]['table_ms']:.4f} ms  search {search_s:.0f} s  "
              f"param-free {rows[-1]['param_free']}{'  ' + str(rows[-1]['stopped']) if rows[-1]['stopped'] else ''}"
              + (f"  landing rounds {len(rec['landing'])}" if use_landing is not None else ""))
    extra = list(table_arch.values())
    measured = measure_networks(space, backend, [r_arch(r) for r in rows] + [largest, fastest] + extra, protocol)
    for r, ms in zip(rows, measured):
        r["measured_ms"] = round(float(ms), 5)
    by_id = {a.arch_id: float(ms) for a, ms in zip(extra, measured[len(rows) + 2:])}
    largest_ms = float(measured[len(rows)])
    for r in rows:
        if "table_landed" in r:
            r["table_landed"]["measured_ms"] = round(by_id[r["table_landed"]["arch_id"]], 5)
        if r.get("anchor_ms"):  # landed beside the largest member: its re-measured ratio, on the landing's level
            r["remeasured_ratio"] = round(float(r["measured_ms"]) / largest_ms, 6)
            r["at_landing_level_ms"] = round(r["remeasured_ratio"] * r["anchor_ms"], 5)
            r["anchor_drift"] = round(largest_ms / r["anchor_ms"] - 1, 4)
    ref = rows[0]
    what = (f"DARTS cells on digits ({args.resolution}x{args.resolution}, {args.cells} cells, {args.channels} "
            "channels)" if args.space == "darts" else
            "the FBNet space (HW-NAS-Bench's CIFAR setting, 32x32, 1 input channel, 10 classes) on digits")
    print(f"\n{what}, {args.strategy}, {args.steps} steps after "
          f"{args.warmup} warm-up; top-1 = mean of {args.train_seeds} trainings from scratch ({args.epochs} epochs) "
          "on the held-out 30 % of digits; latency measured end to end with onnxruntime on this CPU (1 thread, "
          "batch 1, median of 5 interleaved rounds)")
    print(f"{'run':>22s} {'top1':>7s} {'measured ms':>11s} {'vs ref':>8s} {'table ms':>9s} {'target err':>10s}"
          + ("  table-landed: measured, target err" if args.landing else ""))
    for r in rows:
        label = (f"λ={r['latency_weight']:g}" if "latency_weight" in r else f"target {r['target_ms']:.4f}")
        rel = r["measured_ms"] / ref["measured_ms"] - 1
        err = f"{r['measured_ms'] / r['target_ms'] - 1:+.1%}" if "target_ms" in r else ""
        tl = r.get("table_landed")
        side = f"  {tl['measured_ms']:.4f} {tl['measured_ms'] / r['target_ms'] - 1:+.1%}" if tl else ""
        print(f"{label:>22s} {r['top1']:7.4f} {r['measured_ms']:11.4f} {rel:+8.1%} {r['table_ms']:9.4f} {err:>10s}"
              + side)
    print(f"(largest member measured {measured[len(rows)]:.4f} ms, fastest {measured[len(rows) + 1]:.4f} ms)")
    landed = [r for r in rows if r.get("anchor_ms")]
    if landed:
        print("\nlanded beside the largest member: the landing's own figure; re-measured above, absolute; the same "
              "network's re-measured ratio to the largest member times the largest member's latency during its "
              "landing (what the machine's drift between the two phases does not move); that drift")
        for r in landed:
            t = r["target_ms"]
            print(f"  target {t:.4f}: landing {r['landing_measured_ms']:.4f} ({r['landing_measured_ms'] / t - 1:+.1%})"
                  f"  re-measured {r['measured_ms']:.4f} ({r['measured_ms'] / t - 1:+.1%})"
                  f"  at the landing's level {r['at_landing_level_ms']:.4f} ({r['at_landing_level_ms'] / t - 1:+.1%})"
                  f"  largest member {r['anchor_ms']:.4f} -> {largest_ms:.4f} ms ({r['anchor_drift']:+.1%})")

    # search cost: evolution training networks from scratch until one reaches the reference network's top-1
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
    if args.evolution_trials:
        print(f"\nsearch cost to top-1 {goal:.4f}: differentiable {diff_s:.0f} s (warm-up {warmup_s:.0f} + search "
              f"{ref['search_s']:.0f} + training the derived network {ref['train_s'] * args.train_seeds:.0f}); "
              "evolution " + (f"{evo_s:.0f} s ({reached} networks trained)" if reached else
                              f"did not reach it in {trials} networks ({evo_s:.0f} s, best {best:.4f})"))
    summary = {"space_name": args.space, "space": SPACE, "strategy": args.strategy, "batch": args.batch,
               "landing": args.landing, "landing_anchor": args.landing_anchor, "steps": args.steps,
               "warmup": args.warmup,
               "epochs": args.epochs, "train_seeds": args.train_seeds, "targets_ms": targets,
               "fastest_table_ms": lo_ms, "largest_table_ms": hi_ms, "largest_measured_ms": measured[len(rows)],
               "fastest_measured_ms": measured[len(rows) + 1], "warmup_s": round(warmup_s, 1), "runs": rows,
               "evolution": {"goal_top1": goal, "reached_after": reached, "trials": trials, "best": best,
                             "wall_s": round(evo_s, 1)}, "differentiable_cost_s": round(diff_s, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    _plot(rows, out / "differentiable.png", what)
    return 0


class Measured:
    """A landing model: networks measured end to end with the backend (onnxruntime, 1 thread), side by side in
    rounds (``measure_rounds``, what the strategy's landing uses) or in 3 interleaved rounds (``predict_ms``)."""

    def __init__(self, space: Any, backend: Any) -> None:
        from hwnas.latency.measure import MeasureProtocol

        self.space, self.backend = space, backend
        self.protocol = MeasureProtocol(warmup=10, repeats=50, min_time_s=0.2, rounds=3)
        self.archs: dict[str, Any] = {}

    def predict_ms(self, archs: list[Any]) -> np.ndarray:
        from hwnas.latency.tables import measure_networks

        for a in archs:
            self.archs[a.arch_id] = a
        return np.array(measure_networks(self.space, self.backend, list(archs), self.protocol))

    def measure_rounds(self, archs: list[Any], rounds: int) -> list[list[float]]:
        import dataclasses
        import tempfile

        import torch

        from hwnas.latency.measure import measure_rounds

        def built(a: Any) -> tuple[Any, tuple[int, ...]]:
            self.archs[a.arch_id] = a
            torch.manual_seed(0)
            return self.space.build(a).eval(), tuple(int(s) for s in self.space.input_shape_of(a))

        with tempfile.TemporaryDirectory(prefix="hwnas-landing-") as tmp:
            return measure_rounds(self.backend, (built(a) for a in archs), dataclasses.replace(self.protocol, rounds=1),
                                  rounds, workdir=tmp)


def describe(space: Any, arch: Any) -> str:
    return str(space.to_genotype(arch)) if hasattr(space, "to_genotype") else str(space.to_str(arch))


def param_free(space: Any, arch: Any) -> list[int] | None:
    return list(space.parameter_free_ops(arch)) if hasattr(space, "parameter_free_ops") else None


def r_arch(row: dict[str, Any]) -> Any:
    from hwnas.architecture import Architecture

    return Architecture.from_dict(row["arch"])


def _plot(rows: list[dict[str, Any]], path: Path, what: str) -> None:
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
    ax.set_title(f"{what}:\nderived networks (circles: penalty λ; squares: budget, dashed targets)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
