"""How fast the search loop itself is, with evaluators that cost microseconds (run by hand; prints figures).

Three workloads, each run through the Python API (``run_experiment``) and through the CLI (``nas run``,
a separate process, progress display on), side by side in one session:

- ``nb201``: random search on NAS-Bench-201 through the ``benchmark`` evaluator (Pixel 3 latency from
  HELP as a cheap lookup, CIFAR-10 200-epoch accuracy as a simulated expensive one, exactly as
  ``experiments/nb201_benchmark.yaml``), 2,000 trials;
- ``nb201-all``: the same with a budget of 20,000, which NAS-Bench-201 cannot hold: with a latency
  objective every one of its 15,625 cells is a distinct architecture (isomorphic cells are kept apart
  when the hardware is judged), so the run ends when the space is exhausted;
- ``fbnet``: random search on the FBNet space (9^22 members) priced by two published HW-NAS-Bench
  lookup tables (Pixel 3 and Raspberry Pi 4 latency), 20,000 trials.

Figures: the evaluators' one-off setup (``RunResult.setup_s``: the tables read), trials per second of the
search loop after it (``RunResult.wall_s``: ask, canonicalize, evaluate, journal, tell, final front), and
the whole command's wall time (imports, env.json, front, plot included). ``--repeat N`` runs each
workload N times, the API and the CLI alternating, and prints every run, the median rates and the paired
API/CLI ratio (this VM's timings vary by about 30 %).

    python benchmarks/runner_throughput.py [--data ../shared/data] [--only nb201,fbnet]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NB201 = """\
name: throughput-nb201
seed: 0
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params: {{table: {data}/help-latency/nb201_latency.csv, columns: {{"latency_ms@pixel3": pixel3}}}}
  - name: benchmark
    params: {{table: {data}/nas-bench-201/nb201_accuracy.csv, columns: {{top1: cifar10_test_200ep}},
             cost_s_per_query: 3600, cheap: false}}
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: "latency_ms@pixel3", direction: min}}
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: 10}}
export: {{enabled: false}}
"""

FBNET = """\
name: throughput-fbnet
seed: 0
space: {{name: fbnet}}
evaluators:
  - {{name: latency_table, params: {{table: {tables}/pixel3.json}}}}
  - {{name: latency_table, params: {{table: {tables}/raspi4.json}}}}
objectives:
  - {{metric: "latency_ms@pixel3", direction: min}}
  - {{metric: "latency_ms@raspi4", direction: min}}
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: 10}}
export: {{enabled: false}}
"""


def _api(path: Path, run_dir: Path) -> tuple[int, float, float, float]:
    """In a fresh interpreter, like the CLI (a second run in one process would find its caches warm)."""
    code = ("import json, sys, time; t0 = time.perf_counter(); from hwnas.experiments import run_experiment; "
            "r = run_experiment(sys.argv[1], run_dir=sys.argv[2]); "
            "print(json.dumps([len(r.trials), r.setup_s, r.wall_s, time.perf_counter() - t0]))")
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(run_dir)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"run_experiment failed:\n{proc.stderr[-2000:]}")
    n, setup, loop, wall = json.loads(proc.stdout.strip().splitlines()[-1])
    return int(n), float(setup), float(loop), float(wall)


def _cli(path: Path, run_dir: Path) -> tuple[int, float, float, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hwnas.cli", "run", str(path), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"nas run failed:\n{proc.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    search = summary["search"]
    return sum(summary["trials"].values()), float(search["setup_s"]), float(search["wall_s"]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="the published benchmark data")
    ap.add_argument("--only", default="nb201,nb201-all,fbnet", help="comma-separated workloads")
    ap.add_argument("--repeat", type=int, default=1, help="runs per workload and interface (median reported)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (the runs' journals) instead of deleting it")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hwnas-throughput-"))
    try:
        _run(args, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path) -> None:
    data = Path(args.data).resolve()
    tables = work / "tables"
    tables.mkdir()
    for device in ("pixel3", "raspi4"):
        subprocess.run([sys.executable, "-m", "hwnas.cli", "latency", "import-published", "hw-nas-bench-fbnet",
                        str(data / "hw-nas-bench" / "fbnet_lut.json"), "--space", "fbnet", "--metric",
                        f"{device}_latency", "--out", str(tables / f"{device}.json")], check=True,
                       capture_output=True)
    workloads = {
        "nb201": NB201.format(data=data, trials=2000),
        "nb201-all": NB201.format(data=data, trials=20000),
        "fbnet": FBNET.format(tables=tables, trials=20000),
    }
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; work dir {work}")
    print(f"{'workload':10s} {'via':4s} {'trials':>7s} {'setup s':>8s} {'loop s':>8s} {'trials/s':>9s} {'wall s':>7s}")
    for name in args.only.split(","):
        path = work / f"{name}.yaml"
        path.write_text(workloads[name])
        rates: dict[str, list[float]] = {"api": [], "cli": []}
        for rep in range(args.repeat):  # API and CLI alternate, so that the VM's drift falls on both alike
            for via, fn in (("api", _api), ("cli", _cli)):
                n, setup, loop_s, wall = fn(path, work / f"run-{name}-{via}-{rep}")
                rates[via].append(n / loop_s)
                print(f"{name:10s} {via:4s} {n:7d} {setup:8.3f} {loop_s:8.3f} {n / loop_s:9.0f} {wall:7.2f}",
                      flush=True)
        if args.repeat > 1:
            for via, r in rates.items():
                print(f"{name:10s} {via:4s} median {statistics.median(r):,.0f} trials/s over {args.repeat} runs "
                      f"(min {min(r):,.0f}, max {max(r):,.0f})", flush=True)
            ratios = [a / c for a, c in zip(rates["api"], rates["cli"])]
            print(f"{name:10s} api/cli, paired: median {statistics.median(ratios):.2f} "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})", flush=True)

if __name__ == "__main__":
    main()
