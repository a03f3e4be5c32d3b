"""The cost of per-trial callbacks on a table-only run (issue 46); prints the figures.

``experiments/nb201_benchmark.yaml`` with ``budget.trials`` (default 6,000; published tables, so the search loop
is microseconds per trial), run alternately without a callback, with a per-trial callable that does nearly
nothing (counts), and with a per-trial plus a per-batch callback. Reports the search loop's wall time
(``RunResult.wall_s``: journal, ask, evaluate, tell; setup and outputs aside), medians of ``--repeat`` runs, and
the difference per trial. Needs ../shared/data (run from the repository root).

    python benchmarks/callback_overhead.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from hwnas.experiments import run_experiment

    seen: list[int] = []

    def count(run: Any, trial: Any) -> None:
        seen.append(trial.number)

    def per_batch(run: Any, trials: Sequence[Any]) -> None:
        seen.append(-len(trials))

    class Both:
        def on_trial(self, run: Any, trial: Any) -> None:
            count(run, trial)

        def on_batch(self, run: Any, trials: Sequence[Any]) -> None:
            per_batch(run, trials)

    variants: dict[str, list[Any]] = {"none": [], "per trial": [count], "per trial + per batch": [Both()]}
    walls: dict[str, list[float]] = {k: [] for k in variants}
    out = Path(tempfile.mkdtemp(prefix="callbacks-"))
    for r in range(args.repeat):
        for name, callbacks in variants.items():
            seen.clear()
            result = run_experiment(REPO / "experiments" / "nb201_benchmark.yaml",
                                    overrides=[f"budget.trials={args.trials}", f"output.root={out}"],
                                    run_dir=out / f"{name.replace(' ', '')}-{r}", callbacks=callbacks)
            assert len(result.trials) == args.trials
            assert not callbacks or sum(n >= 0 for n in seen) == result.evaluated  # each new trial announced
            walls[name].append(result.wall_s)
    base = statistics.median(walls["none"])
    print(f"{args.trials} trials of experiments/nb201_benchmark.yaml, median of {args.repeat} (search loop wall s):")
    for name, values in walls.items():
        med = statistics.median(values)
        print(f"  {name:24s} {med:7.3f} s  ({(med - base) / args.trials * 1e6:+7.2f} us per trial vs none; "
              f"runs: {', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
