"""Extending a finished run's budget against a fresh run of the larger budget (issue 46); prints the figures.

1. a fresh run of ``--first`` trials (default the quickstart's 48);
2. that run extended to ``--then`` trials (``nas run --resume RUN --set budget.trials=N``, here through
   ``Study.optimize(budget=N)``), timed;
3. a fresh run of ``--then`` trials, timed;

then checks and prints: the first run's journal is a byte-for-byte prefix of the extended one; the extension
evaluated only the new trials (``evaluated``/``reused``, and no architecture twice in the journal); how many of the
fresh run's first trials are the same architectures (all of them for deterministic metrics; a measured latency
differs between runs, so a search that reads it may choose differently).

    python benchmarks/extend_run.py                                   # experiments/quickstart.yaml, 48 -> 72
    python benchmarks/extend_run.py --config experiments/nb201_benchmark.yaml --first 200 --then 300
    python benchmarks/extend_run.py --fresh-in-parallel     # the fresh run at the same time, in a second process
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "experiments" / "quickstart.yaml"))
    parser.add_argument("--first", type=int, default=48)
    parser.add_argument("--then", type=int, default=72)
    parser.add_argument("--out", default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--fresh-in-parallel", action="store_true",
                        help="run the fresh run in a second process at the same time as the first run and its "
                             "extension (on a busy machine both then get the same share of it); each process then "
                             "trains with half the cores (executor.threads), so that their torch thread pools do not "
                             "oversubscribe the machine")
    parser.add_argument("--fresh-only", action="store_true", help=argparse.SUPPRESS)  # the second process
    args = parser.parse_args()
    import hwnas

    out = Path(args.out or tempfile.mkdtemp(prefix="extend-"))
    overrides = [f"output.root={out}"]
    if args.fresh_in_parallel or args.fresh_only:  # two trainings at once: half the cores each
        import yaml

        if "executor" not in (yaml.safe_load(Path(args.config).read_text(encoding="utf-8")) or {}):
            overrides.append("executor.name=local")
        overrides.append(f"executor.threads={max(1, (os.cpu_count() or 2) // 2)}")
    if args.fresh_only:
        t0 = time.perf_counter()
        fresh = hwnas.create_run(args.config, run_dir=out / "fresh", overrides=[*overrides,
                                                                                 f"budget.trials={args.then}"])
        result = fresh.optimize(show_progress=False)
        print(json.dumps({"wall_s": time.perf_counter() - t0, "search_s": result.wall_s,
                          "evaluated": result.evaluated}))
        return
    second = None
    if args.fresh_in_parallel:
        second = subprocess.Popen([sys.executable, __file__, "--fresh-only", "--config", args.config, "--then",
                                   str(args.then), "--out", str(out)], stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    study = hwnas.create_run(args.config, run_dir=out / "extended", overrides=[*overrides,
                                                                                f"budget.trials={args.first}"])
    first = study.optimize(show_progress=False)
    first_s = time.perf_counter() - t0
    before = (study.run_dir / "trials.jsonl").read_bytes()

    t0 = time.perf_counter()
    extension = study.optimize(budget=args.then, show_progress=False)
    extend_s = time.perf_counter() - t0
    after = (study.run_dir / "trials.jsonl").read_bytes()

    if second is not None:
        fresh_out, _ = second.communicate()
        figures = json.loads(fresh_out.strip().splitlines()[-1])
        fresh_s, fresh_search_s, fresh_evaluated = figures["wall_s"], figures["search_s"], figures["evaluated"]
    else:
        t0 = time.perf_counter()
        fresh_run = hwnas.create_run(args.config, run_dir=out / "fresh", overrides=[*overrides,
                                                                                     f"budget.trials={args.then}"])
        fresh_result = fresh_run.optimize(show_progress=False)
        fresh_s, fresh_search_s, fresh_evaluated = (time.perf_counter() - t0, fresh_result.wall_s,
                                                    fresh_result.evaluated)
    fresh = hwnas.load_run(out / "fresh")

    lines = after.decode().splitlines()
    ids = [json.loads(line)["arch_id"] for line in lines]
    # trial by trial in the order asked (the journal is in the order finished)
    by_number = [d["arch_id"] for d in sorted((json.loads(line) for line in lines), key=lambda d: d["number"])]
    fresh_ids = [t.arch.arch_id for t in sorted(fresh.trials, key=lambda t: t.number)]
    same = sum(a == b for a, b in zip(by_number[:args.first], fresh_ids[:args.first]))
    differ = next((k for k, (a, b) in enumerate(zip(by_number, fresh_ids)) if a != b), None)
    print(f"config {args.config}, runs in {out}")
    print(f"first run, {args.first} trials: {first_s:.1f} s (search {first.wall_s:.1f} s), "
          f"{first.evaluated} evaluated")
    print(f"extension {args.first} -> {args.then}: {extend_s:.1f} s (search {extension.wall_s:.1f} s), "
          f"{extension.evaluated} evaluated, {extension.reused} reused from the journal")
    print(f"fresh run, {args.then} trials: {fresh_s:.1f} s (search {fresh_search_s:.1f} s), "
          f"{fresh_evaluated} evaluated" + (" (in parallel with the two above)" if second is not None else ""))
    print(f"journal: first {len(before):,} bytes ({args.first} lines) byte-identical after the extension: "
          f"{after.startswith(before)}; {len(lines)} lines, {len(set(ids))} distinct architectures")
    print(f"trial evaluation seconds in the journal: first {args.first} "
          f"{sum(json.loads(x)['cost_s'] for x in lines[:args.first]):.1f} s, new "
          f"{sum(json.loads(x)['cost_s'] for x in lines[args.first:]):.1f} s")
    print(f"the fresh {args.then}-trial run's first {args.first} trials, number by number: {same} the same "
          f"architectures as the extended run's"
          + (f" (the first to differ: trial {differ})" if differ is not None else " (all of them)"))


if __name__ == "__main__":
    main()
