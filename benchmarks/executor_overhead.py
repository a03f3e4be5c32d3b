"""What an executor costs per evaluation, measured with a trivial expensive evaluator (run by hand).

The ``fake`` evaluator (``hwnas.testing``) answers in microseconds, so the wall time of a search is the
runner's and the executor's own cost: for ``process``, worker start-up (spawn, imports, rebuilding the
evaluators) plus one round trip over a pipe per evaluation; for ``ray`` (a local Ray instance started by the
run), Ray's start-up and the actors' plus one actor call per evaluation. ``--train N`` then runs N real
training evaluations (MobileNetV3-style nets on digits, one torch thread per worker) under each executor,
for the speed-up of 2 workers; ``--journal`` times the driver's journal per evaluation.

    python benchmarks/executor_overhead.py [--trials 400] [--workers 2] [--train 8] [--journal 5000]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

YAML = """\
name: overhead
seed: 0
space: {{name: nb201}}
evaluators:
  - {{name: fake, params: {{cheap: false}}}}
objectives: [{{metric: fake_score, direction: max}}, {{metric: fake_cost_ms, direction: min}}]
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: 16}}
executor: {executor}
export: {{enabled: false}}
"""


TRAIN = """\
name: train_speed
seed: 0
space:
  name: mbv3
  params:
    resolution: 16
    head_channels: 32
    stages:
      - {{channels: 16, stride: 1, depths: [1, 2]}}
      - {{channels: 24, stride: 2, depths: [1, 2], se: true}}
dataset: {{name: digits}}
evaluators:
  - name: train
    params: {{epochs: 2, batch_size: 32, save_weights: false}}
objectives: [{{metric: top1, direction: max}}]
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: {trials}}}
executor: {executor}
export: {{enabled: false}}
"""


def journal_cost(n: int) -> float:
    """Microseconds per trial the driver spends journaling an expensive evaluation: its line written and flushed
    at once, and the batch synced every 16 (fsync at most every 0.2 s, as the runner does)."""
    import numpy as np

    from hwnas.experiments.journal import Journal
    from hwnas.objectives import Trial
    from hwnas.search_spaces import SPACES

    space = SPACES.create("nb201", {})
    rng = np.random.default_rng(0)
    trials = [Trial(number=i, arch=space.sample(rng), metrics={"top1": 0.9, "latency_ms@a": 1.5, "params_m": 0.3})
              for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        writer = Journal(Path(tmp) / "trials.jsonl").writer("f" * 16)
        t0 = time.perf_counter()
        for i, t in enumerate(trials):
            writer.append(t, flush=True)
            if i % 16 == 15:
                writer.sync()
        writer.sync()
        seconds = time.perf_counter() - t0
        writer.close()
    return seconds / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--train", type=int, default=0, help="real training evaluations per executor (0: skip)")
    ap.add_argument("--journal", type=int, default=0, help="trials to journal for the driver's cost (0: skip)")
    ap.add_argument("--no-ray", action="store_true", help="leave the ray executor out")
    args = ap.parse_args()

    import hwnas.testing  # noqa: F401  (registers "fake")
    from hwnas.experiments import run_experiment

    work = Path(tempfile.mkdtemp(prefix="hwnas-overhead-"))
    atexit.register(shutil.rmtree, work, True)  # the runs' folders go when the benchmark ends, however it ends
    print(f"machine: {os.cpu_count()} cores; {args.trials} trivial evaluations, batch 16")
    rows = {}
    executors = [("local", "{name: local, params: {threads: 1}}"),
                 (f"process x{args.workers}", f"{{name: process, params: {{workers: {args.workers}}}}}")]
    if not args.no_ray:
        executors.append((f"ray x{args.workers}", f"{{name: ray, params: {{max_concurrent: {args.workers}}}}}"))
    for label, executor in executors:  # N and 2N trials: the difference is the per-evaluation cost alone
        walls = []
        for n in (args.trials, 2 * args.trials):
            path = work / f"{label.split()[0]}-{n}.yaml"
            path.write_text(YAML.format(trials=n, executor=executor))
            t0 = time.perf_counter()
            result = run_experiment(path, run_dir=work / f"{label.replace(' ', '')}-{n}")
            walls.append((result.wall_s, time.perf_counter() - t0))
        rows[label] = walls
    base = (rows["local"][1][0] - rows["local"][0][0]) / args.trials
    for label, ((loop1, whole1), (loop2, _)) in rows.items():
        per = (loop2 - loop1) / args.trials
        print(f"{label:12s} {per * 1e3:6.2f} ms per evaluation (+{(per - base) * 1e3:.2f} ms over local; from "
              f"{args.trials} and {2 * args.trials} trials), start-up {max(0.0, loop1 - per * args.trials):5.2f} s "
              f"in the search, whole run of {args.trials} {whole1:6.2f} s", flush=True)
    if args.train:
        print(f"\n{args.train} training evaluations (2 epochs on digits each), batch {args.train}:")
        times = {}
        for label, executor in executors:
            path = work / f"train-{label.split()[0]}.yaml"
            path.write_text(TRAIN.format(trials=args.train, executor=executor))
            t0 = time.perf_counter()
            result = run_experiment(path, run_dir=work / f"train-{label.replace(' ', '')}")
            times[label] = (result.wall_s, time.perf_counter() - t0)
            print(f"{label:12s} search {times[label][0]:6.1f} s  whole run {times[label][1]:6.1f} s  speed-up "
                  f"{times['local'][0] / times[label][0]:.2f}x (search), "
                  f"{times['local'][1] / times[label][1]:.2f}x (whole run)", flush=True)
    if args.journal:
        us = journal_cost(args.journal)
        print(f"\njournal at the driver: {us:.0f} µs per evaluation ({args.journal} trials, flushed each, synced "
              "per 16): "
              f"{1e6 / us:,.0f} evaluations/s at most; 100,000 evaluations cost {us * 1e5 / 1e6:.0f} s of "
              "driver time in all")


if __name__ == "__main__":
    main()
