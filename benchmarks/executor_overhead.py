"""What an executor costs per evaluation, measured with a trivial expensive evaluator (run by hand).

The ``fake`` evaluator (``hwnas.testing``) answers in microseconds, so the wall time of a search is the
runner's and the executor's own cost: for ``process``, worker start-up (spawn, imports, rebuilding the
evaluators) plus one round trip over a pipe per evaluation.

    python benchmarks/executor_overhead.py [--trials 400] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    import hwnas.testing  # noqa: F401  (registers "fake")
    from hwnas.experiments import run_experiment

    work = Path(tempfile.mkdtemp(prefix="hwnas-overhead-"))
    print(f"machine: {os.cpu_count()} cores; {args.trials} trivial evaluations, batch 16")
    rows = {}
    for label, executor in (("local", "{name: local}"),
                            (f"process x{args.workers}", f"{{name: process, workers: {args.workers}}}")):
        path = work / f"{label.split()[0]}.yaml"
        path.write_text(YAML.format(trials=args.trials, executor=executor))
        t0 = time.perf_counter()
        result = run_experiment(path, run_dir=work / label.replace(" ", ""))
        rows[label] = (result.wall_s, time.perf_counter() - t0)
    base = rows["local"][0]
    for label, (loop_s, wall_s) in rows.items():
        extra_ms = (loop_s - base) / args.trials * 1e3
        print(f"{label:12s} search {loop_s:6.2f} s  ({loop_s / args.trials * 1e3:6.2f} ms per evaluation, "
              f"+{extra_ms:.2f} ms over local)  whole run {wall_s:6.2f} s")


if __name__ == "__main__":
    main()
