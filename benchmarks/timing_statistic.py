"""How far two timings of the same network fall apart, keeping the median of the runs or their 10th percentile
(run by hand; prints figures).

For each space, ``--networks`` random networks (default 30) are exported once to ONNX and timed with
onnxruntime (CPU, batch 1, one thread, the default protocol) in twice ``--rounds`` rounds, each round going over
every network. The first half of the rounds and the second half each give a value per network (the median over
their rounds of each round's statistic), and the two halves are compared as ``nas latency validate`` compares a
table with measurements: MAPE, share within ±10 %, Kendall τ. Both statistics come from the same timed runs, so
the comparison is side by side by construction. This is the noise of a timing within one session; it is a floor
for any latency table judged by such timings.

    python benchmarks/timing_statistic.py --spaces nb201,vit,fbnet
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

#: CPU-sized parameters, as in ``latency_tables.py``.
PARAMS: dict[str, dict[str, Any]] = {
    "mbv3": {"resolution": 64}, "ofa_mbv3": {"resolutions": [128, 160], "num_classes": 10},
    "fbnet": {"setting": "cifar100"}, "nb201": {}, "darts": {}, "vit": {}, "convnext": {},
}


def run_space(name: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Per statistic: the accuracy figures of the second half of the rounds against the first."""
    import torch

    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.kit.run_kit import STATISTICS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import accuracy_figures, sample_distinct
    from hwnas.search_spaces import SPACES

    space = SPACES.get(name)(**PARAMS[name])
    backend = BACKENDS.get("onnxruntime")(threads=1)
    protocol = MeasureProtocol()
    archs = sample_distinct(space, args.networks, np.random.default_rng(args.seed))
    per: dict[str, list[list[float]]] = {s: [[] for _ in archs] for s in STATISTICS}
    with tempfile.TemporaryDirectory(prefix="hwnas-statistic-") as tmp:
        artifacts = []
        for i, arch in enumerate(archs):
            torch.manual_seed(0)
            shape = tuple(int(s) for s in space.input_shape_of(arch))
            artifacts.append((backend.convert(space.build(arch).eval(), shape, Path(tmp), f"net{i}"), shape))
        for _ in range(2 * args.rounds):
            for i, (artifact, shape) in enumerate(artifacts):
                stats, _ = backend.profile(artifact, shape, protocol)
                for s in STATISTICS:
                    per[s][i].append(stats.central(s))
    out = {}
    for s, values in per.items():
        first = [statistics.median(v[: args.rounds]) for v in values]
        second = [statistics.median(v[args.rounds:]) for v in values]
        out[s] = accuracy_figures(first, second)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spaces", default="nb201,vit,fbnet", help=f"comma-separated, from {', '.join(PARAMS)}")
    ap.add_argument("--networks", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per half (default 3: 6 timings per network)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    names = [s for s in args.spaces.split(",") if s]
    unknown = sorted(set(names) - set(PARAMS))
    if unknown:
        ap.error(f"--spaces: unknown {unknown}; known: {list(PARAMS)}")
    print(f"{'space':10s} {'statistic':9s} | second half against the first: MAPE, within ±10 %, Kendall τ")
    for name in names:
        for s, f in run_space(name, args).items():
            line = f"{f['mape_pct']:6.2f} % {f['within_10pct'] * 100:5.0f} % {f['kendall_tau']:6.3f}"
            print(f"{name:10s} {s:9s} | {line}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
