"""Few-shot latency prediction on new devices, scored with HELP's protocol.

For every HELP latency table in ``--data`` (``*_latency.csv``: NB201, FBNet, OFA), every method
and two ways of choosing the target devices (``help``: HELP's held-out devices with HELP's
meta-training devices as sources; ``loo``: each device column in turn, all others as sources),
prints the mean Spearman rho over target devices for k target samples, as mean +- std over
``--seeds`` repetitions.

    python benchmarks/fewshot_latency.py --seeds 10 --plot fewshot_latency.png
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
from help_protocol import (  # benchmarks/help_protocol.py, next to this script
    METHODS,
    HelpProtocol,
    ProtocolResult,
    find_help_tables,
    help_split_tasks,
    hwnas_unit_features,
    leave_one_out_tasks,
    load_help_table,
    run_fewshot_protocol,
)

from hwnas.errors import HwnasError

PROTOCOLS = {"help": help_split_tasks, "loo": leave_one_out_tasks}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data/help-latency"),
                   help="directory of HELP *_latency.csv files (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=10, help="repetitions, seeds 0..N-1 (default: %(default)s)")
    p.add_argument("--ks", default="10,20,50,100", help="target sample counts (default: %(default)s)")
    p.add_argument("--spaces", default="", help="comma-separated spaces (default: every table in --data)")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated, from: " + ", ".join(METHODS))
    p.add_argument("--protocols", default="help,loo", help="comma-separated, from: help, loo")
    p.add_argument("--train-pool", type=int, default=900, help="archs 0..N-1 are the train pool (default: %(default)s)")
    p.add_argument("--query-size", type=int, default=1000,
                   help="the next N archs are the query set (default: %(default)s)")
    p.add_argument("--per-device", action="store_true", help="also print the mean rho of every target device")
    p.add_argument("--device-groups", action="store_true",
                   help="also print the mean and the worst device's rho over two fixed halves of the targets: the "
                        "targets sorted by name, 1st, 3rd, 5th... the tuning group, 2nd, 4th... the reporting group "
                        "(the rule hwnas's default was chosen by: on the tuning group of the loo protocol)")
    p.add_argument("--reference-archs", action="store_true",
                   help="the first 10 samples of every k are HELP's 10 reference archs (hardware_embedding_index.json "
                        "in --data), measured on every device; they leave the query set")
    p.add_argument("--features", choices=("onehot", "hwnas"), default="hwnas",
                   help="what the encoding methods see: the table's one-hot tokens, or hwnas's few-shot features of "
                        "the architectures they describe (the space's encoding, unit and unit-attribute counts; "
                        "what `nas latency fewshot` uses; a table no hwnas space describes falls back to "
                        "onehot) (default: %(default)s)")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG of rho vs k per space")
    p.add_argument("--plot-methods", default="transfer,transfer+residual+own,raw-nnls",
                   help="methods drawn in --plot (default: %(default)s)")
    p.add_argument("--target-rho", type=float, default=0.93, help="reference line in the plot (default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, help="write every rho (repeat x target x k) as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log per-device progress")
    return p.parse_args(argv)


def plot_results(results: list[ProtocolResult], path: Path, methods: list[str], target_rho: float) -> None:
    """rho vs k, one panel per space.

    Colour = method, solid = HELP split, dashed = leave-one-out, error bars = std over seeds.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spaces = list(dict.fromkeys(r.space for r in results))
    fig, axes = plt.subplots(1, len(spaces), figsize=(4.6 * len(spaces), 4.0), squeeze=False)
    styles = {"help": "-", "loo": "--"}
    for ax, space in zip(axes[0], spaces):
        lows = []
        for r in results:
            if r.space != space or r.method not in methods:
                continue
            s = r.summary()
            mean = np.array([s[k][0] for k in r.ks])
            std = np.array([s[k][1] for k in r.ks])
            lows.append(float((mean - std).min()))
            ax.errorbar(r.ks, mean, yerr=std, marker="o", capsize=3, linestyle=styles.get(r.protocol, "-"),
                        color=f"C{methods.index(r.method)}", label=f"{r.method} ({r.protocol}, {len(r.targets)} dev)")
        ax.axhline(target_rho, color="grey", linestyle=":", linewidth=1, label=f"target rho = {target_rho:g}")
        ax.set_xscale("log")
        ax.set_xticks(sorted({k for r in results for k in r.ks}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_ylim(min([*lows, target_rho]) - 0.02, 1.0)
        ax.set_xlabel("k = measured archs on the target device")
        ax.set_ylabel("Spearman rho on the query set")
        ax.set_title(space)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Few-shot latency prediction, HELP protocol (mean over target devices, +- std over seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def device_groups(result: ProtocolResult) -> dict[str, list[tuple[float, float]]]:
    """Per group of targets (``tuning``: 1st, 3rd, ... by name; ``reporting``: 2nd, 4th, ...), per k: the mean over
    its devices of their mean rho over seeds, and the worst device's."""
    per_device = result.per_device()
    names = sorted(per_device)
    out: dict[str, list[tuple[float, float]]] = {}
    for group, members in (("tuning", names[0::2]), ("reporting", names[1::2])):
        if members:
            rhos = np.array([[per_device[d][k] for k in result.ks] for d in members])
            out[f"{group} ({len(members)})"] = [(float(m), float(w))
                                                for m, w in zip(rhos.mean(axis=0), rhos.min(axis=0))]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (BLAS limited to one thread: the matrices are tiny)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return run(parse_args(argv))
    with threadpool_limits(limits=1):
        return run(parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args`` and print the table."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    ks = [int(k) for k in args.ks.split(",") if k]
    methods = [m for m in args.methods.split(",") if m]
    protocols = [p for p in args.protocols.split(",") if p]
    for name in protocols:
        if name not in PROTOCOLS:
            raise SystemExit(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    for name in methods:
        if name not in METHODS:
            raise SystemExit(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    tables = find_help_tables(args.data)
    spaces = [s for s in args.spaces.split(",") if s] or list(tables)
    protocol = HelpProtocol(train_pool_size=args.train_pool, query_size=args.query_size)

    print(f"data: {args.data.resolve()}   seeds: 0..{args.seeds - 1}   pool: archs 0..{args.train_pool - 1}   "
          f"query: archs {args.train_pool}..{args.train_pool + args.query_size - 1}   trim: "
          f"{protocol.trim_low:.0%}-{protocol.trim_high:.0%} per set   metric: Spearman rho (mean over targets)   "
          f"features: {args.features}")
    header = f"{'space':7s} {'protocol':8s} {'method':17s} {'#tgt':>4s} "
    header += " ".join(f"{'k=' + str(k):>15s}" for k in ks)
    results: list[ProtocolResult] = []
    t_start = time.perf_counter()
    for space in spaces:
        if space not in tables:
            raise SystemExit(f"no {space}_latency.csv in {args.data}; found: {', '.join(tables)}")
        table = load_help_table(tables[space])
        features = None
        if args.features == "hwnas":
            try:
                features = hwnas_unit_features(table)
            except (ValueError, KeyError, HwnasError) as exc:
                print(f"  {space}: one-hot tokens, not hwnas's features ({exc})")
        references = None
        if args.reference_archs:
            index = json.loads((args.data / "hardware_embedding_index.json").read_text())
            references = index[{"nb201": "nasbench201"}.get(space, space)]
        print(f"\n{space}: {table.n_archs} archs x {len(table.devices)} devices ({', '.join(table.devices)})")
        space_tasks = {}
        for pname in protocols:
            try:
                space_tasks[pname] = PROTOCOLS[pname](table)
            except ValueError as exc:  # e.g. a table HELP has no device split for
                print(f"  {pname}: skipped ({exc})")
        if "help" in space_tasks:
            tasks = space_tasks["help"]
            print(f"  help targets: {', '.join(t.target for t in tasks)}   sources: {', '.join(tasks[0].sources)}")
        print(header)
        for pname, tasks in space_tasks.items():
            for method in methods:
                rngs = [np.random.default_rng(seed) for seed in range(args.seeds)]
                r = run_fewshot_protocol(table, tasks, ks=ks, rngs=rngs, method=method, protocol=protocol, label=pname,
                                         references=references, features=features)
                results.append(r)
                cells = " ".join(f"{m:.4f} ± {s:.4f}".rjust(15) for m, s in r.summary().values())
                print(f"{space:7s} {pname:8s} {method:17s} {len(tasks):4d} {cells}")
                mape, within = r.mean_of("mape"), r.mean_of("within10")
                cells = " ".join(f"{mape[k]:5.1f}% {100 * within[k]:4.0f}%".rjust(15) for k in r.ks)
                print(f"{'':7s} {'':8s} {'  MAPE, ±10%':17s} {'':4s} {cells}")
                if args.device_groups:
                    for group, rows in device_groups(r).items():
                        cells = " ".join(f"{m:.4f} min {w:.3f}".rjust(15) for m, w in rows)
                        print(f"{'':7s} {'':8s} {'  ' + group:17s} {'':4s} {cells}")
                if args.per_device:
                    for dev, per_k in r.per_device().items():
                        values = " ".join(f"{v:15.4f}" for v in per_k.values())
                        print(f"{'':7s} {'':8s} {'  ' + dev:17s} {'':4s} {values}")
    print(f"\n({time.perf_counter() - t_start:.1f} s)")
    if args.json is not None:
        payload = [
            {"space": r.space, "protocol": r.protocol, "method": r.method, "targets": list(r.targets),
             "ks": list(r.ks), "seeds": list(range(args.seeds)), "rho": r.rho.tolist(),
             "mape_pct": None if r.mape is None else r.mape.tolist(),
             "within10": None if r.within10 is None else r.within10.tolist()}
            for r in results
        ]
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    if args.plot is not None:
        plot_results(results, args.plot, [m for m in args.plot_methods.split(",") if m], args.target_rho)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
