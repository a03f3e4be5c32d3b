"""How far this machine's latency drifts, and how well networks timed side by side hold their ratios.

    python benchmarks/latency_drift.py --space fbnet --seconds 180

A few random members of the space and its largest member are converted to ONNX once, then timed with onnxruntime
(1 thread, batch 1) in turns for ``--seconds``: each turn times every network ``--turn`` runs in a row. The turns
are then cut into windows of 5, 10, 20 and 30 seconds, and for each window length this prints, over the windows:

- the coefficient of variation of each network's median latency (what a measurement of that length gives, taken
  at different moments): the absolute figure a later re-measurement can move by;
- the coefficient of variation of each network's median ratio to the largest member timed in the same turns:
  the relative figure, which the machine's slow drifts move far less;
- the share of pairs of windows whose absolute medians agree within ±5 %, and the same for the ratios.

Prints one table; ``--json FILE`` also writes the per-window medians. Run it alone on the machine it describes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", choices=["fbnet", "darts", "nb201", "mbv3"], default="fbnet")
    ap.add_argument("--networks", type=int, default=3, help="random members timed beside the largest one")
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--turn", type=int, default=5, help="runs of one network before the next one's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the per-window medians here")
    args = ap.parse_args(argv)

    import torch

    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.search_spaces import SPACES

    params = {"in_chans": 1, "num_classes": 10}
    if args.space == "darts":
        params.update(resolution=16, cells=3, init_channels=16)
    space = SPACES.create(args.space, params)
    rng = np.random.default_rng(args.seed)
    archs = [space.sample(rng) for _ in range(args.networks)] + [space.largest()]
    backend = BACKENDS.get("onnxruntime")(threads=1)
    warm = MeasureProtocol(warmup=20, repeats=20)
    turn = MeasureProtocol(warmup=0, repeats=args.turn)
    with tempfile.TemporaryDirectory(prefix="hwnas-drift-") as tmp:
        arts = []
        for i, arch in enumerate(archs):
            torch.manual_seed(0)
            shape = tuple(int(s) for s in space.input_shape_of(arch))
            arts.append((backend.convert(space.build(arch).eval(), shape, Path(tmp), f"net{i}"), shape))
            backend.profile(arts[-1][0], shape, warm)
        t0 = time.perf_counter()
        stamps, turns = [], []
        while time.perf_counter() - t0 < args.seconds:
            stamps.append(time.perf_counter() - t0)
            turns.append([backend.profile(a, s, turn)[0].median_ms for a, s in arts])
    when, ms = np.array(stamps), np.array(turns)  # (turns,), (turns, networks); the last column is the largest

    def agree(values: np.ndarray) -> float:
        """Share of pairs of windows within ±5 % of each other (the later one against the earlier)."""
        i, j = np.triu_indices(len(values), 1)
        return float(np.mean(np.abs(values[j] / values[i] - 1) <= 0.05))

    rows, per_window = [], {}
    for w in (5, 10, 20, 30):
        idx = (when // w).astype(int)
        keep = [k for k in np.unique(idx) if np.sum(idx == k) >= 2]
        if len(keep) < 2:
            continue
        med = np.array([np.median(ms[idx == k], axis=0) for k in keep])
        ratio = np.array([np.median(ms[idx == k, :-1] / ms[idx == k, -1:], axis=0) for k in keep])
        per_window[w] = {"median_ms": med.round(5).tolist(), "ratio_to_largest": ratio.round(5).tolist()}
        cv_abs = med.std(0) / med.mean(0)
        cv_ratio = ratio.std(0) / ratio.mean(0)
        rows.append((w, len(keep), float(np.mean(cv_abs)), float(np.max(cv_abs)), float(np.mean(cv_ratio)),
                     float(np.max(cv_ratio)), float(np.mean([agree(med[:, n]) for n in range(med.shape[1])])),
                     float(np.mean([agree(ratio[:, n]) for n in range(ratio.shape[1])]))))
    print(f"{args.space}: {args.networks} random members and the largest ({float(np.median(ms[:, -1])):.3f} ms), "
          f"onnxruntime 1 thread, batch 1, turns of {args.turn} runs, {len(ms)} turns in {args.seconds:.0f} s")
    print(f"{'window':>7s} {'windows':>7s} {'cv ms (mean, max)':>18s} {'cv ratio (mean, max)':>21s} "
          f"{'within 5 %: ms':>15s} {'ratio':>7s}")
    for w, n, a, amax, r, rmax, agree_ms, agree_ratio in rows:
        print(f"{w:>6d}s {n:7d} {a:9.3f} {amax:8.3f} {r:10.3f} {rmax:10.3f} {agree_ms:15.0%} {agree_ratio:7.0%}")
    if args.json:
        Path(args.json).write_text(json.dumps({"space": args.space, "turn": args.turn, "seconds": args.seconds,
                                               "windows": per_window}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
