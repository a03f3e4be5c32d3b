"""Latency tables for every search space: profile every unit, then judge the table on random whole networks.

For each space (CPU-sized parameters below), on this machine with onnxruntime's CPU provider (batch 1,
one pinned thread, fp32 by default):

1. ``nas latency profile``'s library call: every unit of the space timed in context (behind a cheap producer of
   its input, whose time is subtracted; with ``--context between`` also before a cheap consumer of its output),
   resumable, into ``OUT/<label>.json``;
2. ``nas latency validate``'s: ``--networks`` random whole networks (default 100) exported and timed end
   to end, compared with the table's plain sum (``raw``), with the calibration
   ``measured ≈ a·sum + b·units + c`` fitted on half of them and judged on the other half (``calibrated``),
   and with the learned whole-network correction fitted and judged on the same halves (``learned``);
3. the floor: ``--repeat-check`` of those networks timed again the same way, later; the MAPE between the
   two timings of the same networks is what no table can beat on this machine.

Units and networks are timed in ``--rounds`` rounds (default 3), the median kept; each timing keeps the median
of its runs, or with ``--statistic p10`` their 10th percentile.

Prints one row per space (MAPE, share within ±10 %, Kendall τ; raw and calibrated), the profiling wall
time and unit count, and writes ``OUT/summary.json``. Run the spaces one after the other on an otherwise
idle machine: two timings side by side on two cores disturb each other.

    python benchmarks/latency_tables.py --out runs/bench/latency_tables
    python benchmarks/latency_tables.py --only nb201,darts --networks 30 --out /tmp/lt
    python benchmarks/latency_tables.py --only vit --statistic p10 --space-param vit.resolution=64 --out /tmp/v64
    python benchmarks/latency_tables.py --backend torch --backend-device cuda --device h100 --min-time 0.05 --out /tmp/g
    python benchmarks/latency_tables.py --backend torch --backend-device cuda --cuda-graph --device h100 --out /tmp/gg
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: (label, space, space params): small enough that every unit and 100 networks time in minutes on a CPU.
SPACES: list[tuple[str, str, dict[str, Any]]] = [
    ("mbv3", "mbv3", {"resolution": 64}),
    ("ofa_mbv3", "ofa_mbv3", {"resolutions": [128, 160], "num_classes": 10}),
    ("fbnet-cifar100", "fbnet", {"setting": "cifar100"}),
    ("fbnet-imagenet", "fbnet", {"setting": "imagenet"}),  # HW-NAS-Bench's 224 px setting, 1,000 classes
    ("nb201", "nb201", {}),
    ("darts", "darts", {}),
    ("vit", "vit", {}),
    ("convnext", "convnext", {}),
]


def run_space(label: str, name: str, params: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Profile and validate one space; return its figures."""
    from hwnas.architecture import Architecture
    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import LatencyTable, accuracy_figures, measure_networks, profile_space, validate_table
    from hwnas.search_spaces import SPACES as SPACE_REG

    space = SPACE_REG.get(name)(**params)
    if args.backend == "torch":
        backend = BACKENDS.get("torch")(device=args.backend_device, threads=args.threads, precision=args.precision,
                                        cuda_graph=args.cuda_graph)
    else:  # onnxruntime's execution provider: cpu, cuda or tensorrt
        backend = BACKENDS.get("onnxruntime")(provider=args.backend_device, threads=args.threads,
                                              precision=args.precision)
    protocol = MeasureProtocol(warmup=args.warmup, repeats=args.repeats, min_time_s=args.min_time, rounds=args.rounds,
                               statistic=args.statistic)
    out = Path(args.out) / f"{label}.json"
    rep = profile_space(space, backend, device=args.device, out=out, protocol=protocol, in_context=args.context)
    table = LatencyTable.load(out)
    t0 = time.perf_counter()
    figures = validate_table(table, space, backend, n=args.networks, rng=np.random.default_rng(args.seed),
                             protocol=protocol, out=out, replace=True)  # a rerun judges the table afresh
    # the floor: the same networks timed again, later, the same way (no table can beat the timing's own noise)
    again_archs = [Architecture.from_dict(m["arch"]) for m in figures["measured"][: args.repeat_check]]
    again = measure_networks(space, backend, again_archs, protocol)
    first = [m["measured_ms"] for m in figures["measured"][: args.repeat_check]]
    floor = accuracy_figures(first, again)
    row = {
        "label": label, "space": name, "space_params": params, "context": args.context, "units": len(table.entries),
        "failed_units": len(table.failed), "profile_wall_s": round(rep.wall_s, 1),
        "units_measured_now": rep.measured, "validate_wall_s": round(time.perf_counter() - t0, 1),
        "networks": figures["networks"], "raw": figures["raw"], "calibrated_heldout": figures["calibrated_heldout"],
        "learned_heldout": figures.get("learned_heldout"), "mean_heldout": figures.get("mean_heldout"),
        "answers": figures.get("answers"),
        "remeasured": floor,
        "measured_ms": [round(m["measured_ms"], 4) for m in figures["measured"]],
    }
    return row


def space_param_overrides(items: list[str], labels: list[str]) -> dict[str, dict[str, Any]]:
    """``--space-param LABEL.KEY=VALUE`` items (VALUE is YAML) -> {label: {key: value}}; ValueError names a bad one."""
    overrides: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, text = item.partition("=")
        label, dot, key = target.partition(".")
        if not sep or not dot or not key:
            raise ValueError(f"--space-param {item!r}: expected LABEL.KEY=VALUE, e.g. vit.resolution=64")
        if label not in labels:
            raise ValueError(f"--space-param {item!r}: unknown label {label!r}; known: {labels}")
        overrides.setdefault(label, {})[key] = yaml.safe_load(text)
    return overrides


def _fmt(f: dict[str, Any]) -> str:
    return f"{f['mape_pct']:6.2f}% {f['within_10pct'] * 100:5.0f}% {f['kendall_tau']:6.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the tables and summary.json (tables resume)")
    ap.add_argument("--only", default="", help="comma-separated labels (default: all)")
    ap.add_argument("--networks", type=int, default=100)
    ap.add_argument("--device", default="this-cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default="fp32", help="fp32, int8 (onnxruntime on the cpu), fp16 (cuda)")
    ap.add_argument("--backend", choices=("onnxruntime", "torch"), default="onnxruntime",
                    help="what times units and networks (default onnxruntime)")
    ap.add_argument("--backend-device", default="cpu",
                    help="torch: cpu, cuda or cuda:N; onnxruntime: its provider, cpu, cuda or tensorrt")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="torch on cuda: time CUDA-graph replays of each unit and network, not eager runs")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per unit and per network (median kept)")
    ap.add_argument("--statistic", choices=("median", "p10"), default="median",
                    help="what each timing keeps of its runs (units, networks and the re-timed check alike)")
    ap.add_argument("--space-param", action="append", default=[], metavar="LABEL.KEY=VALUE",
                    help="change one space parameter (VALUE is YAML), e.g. vit.resolution=64 (repeatable); the row and "
                         "summary.json record the parameters used")
    ap.add_argument("--context", choices=("in_context", "between"), default="in_context",
                    help="how units are timed (nas latency profile --in-context MODE): behind a producer of their "
                         "input (default), or between that producer and a consumer of their output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat-check", type=int, default=20,
                    help="time this many of the validation networks again: the timing's own noise (the floor)")
    args = ap.parse_args(argv)
    if args.backend == "onnxruntime" and args.backend_device not in ("cpu", "cuda", "tensorrt"):
        ap.error(f"--backend-device {args.backend_device!r}: onnxruntime takes a provider, cpu, cuda or tensorrt")
    if args.cuda_graph and (args.backend != "torch" or not args.backend_device.startswith("cuda")):
        ap.error("--cuda-graph: only --backend torch --backend-device cuda captures CUDA graphs")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    unknown = only - {label for label, _, _ in SPACES}
    if unknown:
        ap.error(f"--only: unknown label(s) {sorted(unknown)}; known: {[label for label, _, _ in SPACES]}")
    try:
        overrides = space_param_overrides(args.space_param, [label for label, _, _ in SPACES])
    except ValueError as exc:
        ap.error(str(exc))
    rows = []
    print(f"{'space':16s} {'units':>5s} {'profile':>8s} | {'raw: MAPE ±10% τ':>22s} | {'calibrated (held-out)':>22s} | "
          f"{'learned (held-out)':>22s} | {'answers':11s} | {'re-timed (floor)':>22s}")
    for label, name, params in SPACES:
        if only and label not in only:
            continue
        row = run_space(label, name, {**params, **overrides.get(label, {})}, args)
        rows.append(row)
        learned = _fmt(row["learned_heldout"]) if row["learned_heldout"] else "-"
        print(f"{label:16s} {row['units']:5d} {row['profile_wall_s']:7.0f}s | {_fmt(row['raw']):>22s} | "
              f"{_fmt(row['calibrated_heldout']):>22s} | {learned:>22s} | {row['answers']:11s} | "
              f"{_fmt(row['remeasured']):>22s}", flush=True)
        mean = row.get("mean_heldout") or {}
        if mean.get("calibrated"):
            learned_mean = _fmt(mean["learned"]) if mean.get("learned") else "-"
            print(f"{'':16s} {'':5s} {'':8s} | {'mean of ' + str(mean['calibrated']['splits']) + ' halvings':>22s} | "
                  f"{_fmt(mean['calibrated']):>22s} | {learned_mean:>22s} |", flush=True)
    summary = {"created": time.strftime("%Y-%m-%d %H:%M:%S"), "device": args.device, "backend": args.backend,
               "backend_device": args.backend_device, "cuda_graph": args.cuda_graph, "threads": args.threads,
               "precision": args.precision, "networks": args.networks,
               "protocol": {"warmup": args.warmup, "repeats": args.repeats, "min_time_s": args.min_time,
                            "rounds": args.rounds, "statistic": args.statistic},
               "rows": rows}
    (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
