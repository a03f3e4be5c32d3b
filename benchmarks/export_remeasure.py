"""Predicted against re-measured latency on an exported front: a latency table of this CPU against the files.

A NAS-Bench-201 search (accuracy from the published table, ``../shared/data``; latency from a table profiled on
this very host by ``benchmarks/latency_tables.py``, calibrated) finds a front of (top-1, latency); ``nas export``
writes the front (seeded weights: latency does not depend on them) and re-measures every file end to end on
this CPU with the table's own whole-network protocol, in rounds. Printed per model: the table's prediction, the
re-measured median and the error; then the MAPE over the front, and int8 against fp32 latency.

Run: ``python benchmarks/export_remeasure.py [--table runs/bench/latency_tables/nb201.json] [--trials 60]``
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from hwnas.experiments import load_run, run_experiment
from hwnas.experiments.export import export_front
from hwnas.latency.measure import MeasureProtocol
from hwnas.objectives import pareto_front

EXPERIMENT = """\
name: export_remeasure
seed: {seed}
space: {{name: nb201}}
evaluators:
  - name: latency_table
    params: {{table: {table}, device: this-cpu}}
  - name: benchmark
    params:
      table: {accuracy}
      columns: {{top1: cifar10_test_200ep}}
      cheap: false
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: "latency_ms@this-cpu", direction: min}}
strategy: {{name: nsga2, params: {{pop_size: 12}}}}
budget: {{trials: {trials}, batch_size: 12}}
export: {{enabled: false}}
output: {{root: {root}}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="runs/bench/latency_tables/nb201.json",
                        help="an nb201 latency table profiled on this host (benchmarks/latency_tables.py)")
    parser.add_argument("--data", default="../shared/data", help="the published benchmark data")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="runs/bench/export_remeasure")
    args = parser.parse_args()

    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    path = out / "experiment.yaml"
    path.write_text(EXPERIMENT.format(seed=args.seed, table=Path(args.table).resolve(), trials=args.trials,
                                      accuracy=(Path(args.data) / "nas-bench-201/nb201_accuracy.csv").resolve(),
                                      root=out.resolve()))
    run_dir = run_experiment(path).run_dir
    experiment, trials = load_run(run_dir)
    front = pareto_front(trials, experiment.objectives)
    protocol = MeasureProtocol(warmup=20, repeats=50, rounds=args.rounds)
    cards = export_front(run_dir, experiment, front, out_dir=out / "exported", random_init=True,
                         formats=("onnx", "onnx_int8"), measure=True, protocol=protocol)
    print(f"\nNAS-Bench-201 front of {len(trials)} trials ({len(front)} models), re-measured on this CPU "
          f"(onnxruntime, 1 thread, batch 1), median of {args.rounds} rounds")
    head = ("model", "table ms", "measured", "p90", "error", "int8 ms", "int8/fp32")
    print(f"{head[0]:18s} {head[1]:>9s} {head[2]:>9s} {head[3]:>8s} {head[4]:>8s} {head[5]:>8s} {head[6]:>9s}")
    errors, ratios = [], []
    for card in cards:
        rows = {r["name"]: r for r in card.latency or ()}
        table = rows["this-cpu"]
        int8 = rows["cpu-int8"]["measured"]["median_ms"]
        ratio = int8 / table["measured"]["median_ms"]
        errors.append(abs(table["error_pct"]))
        ratios.append(ratio)
        print(f"{card.arch_id:18s} {table['predicted_ms']:9.3f} {table['measured']['median_ms']:9.3f} "
              f"{table['measured']['p90_ms']:8.3f} {table['error_pct']:+7.1f}% {int8:8.3f} {ratio:9.2f}")
    summary = {"models": len(cards), "mape_pct": float(np.mean(errors)), "max_ape_pct": float(np.max(errors)),
               "within_10pct": float(np.mean(np.array(errors) <= 10)),
               "int8_over_fp32_median": float(np.median(ratios)),
               "max_abs_diff_vs_torch": max(c.max_abs_diff or 0.0 for c in cards)}
    print(f"table against re-measured on the exported front: MAPE {summary['mape_pct']:.1f}%, max "
          f"{summary['max_ape_pct']:.1f}%, {100 * summary['within_10pct']:.0f}% within ±10%; int8/fp32 latency "
          f"median {summary['int8_over_fp32_median']:.2f}; max |onnx - torch| {summary['max_abs_diff_vs_torch']:.1e}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
