"""Experiment files for tests and benchmarks: NAS-Bench-201 searches priced by the published tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

PIXEL3 = "latency_ms@pixel3"


def nb201_benchmark_yaml(data: str | Path, *, strategy: str = "random", params: Mapping[str, object] | None = None,
                         trials: int = 100, seed: int = 3, batch_size: int = 8, name: str = "nb201",
                         accuracy: str = "cifar10_test_200ep",
                         objectives: Sequence[Mapping[str, object]] | None = None,
                         constraints: Sequence[Mapping[str, object]] = ()) -> str:
    """The text of an experiment on NAS-Bench-201 with the ``benchmark`` evaluator: HELP's Pixel 3 latency
    (``latency_ms@pixel3``, cheap) and the accuracy column ``accuracy`` of ``data``'s NB201 table (``top1``,
    a simulated expensive evaluation); by default the objectives are top1 (max) and that latency (min)."""
    data = Path(data)
    config = {
        "name": name, "seed": seed, "space": {"name": "nb201"},
        "evaluators": [
            {"name": "benchmark", "params": {"table": str(data / "help-latency" / "nb201_latency.csv"),
                                             "columns": {PIXEL3: "pixel3"}}},
            {"name": "benchmark", "params": {"table": str(data / "nas-bench-201" / "nb201_accuracy.csv"),
                                             "columns": {"top1": accuracy}, "cheap": False}},
        ],
        "objectives": [dict(o) for o in objectives] if objectives is not None else [
            {"metric": "top1", "direction": "max"}, {"metric": PIXEL3, "direction": "min"}],
        "constraints": [dict(c) for c in constraints],
        "strategy": {"name": strategy, "params": dict(params or {})},
        "budget": {"trials": trials, "batch_size": batch_size},
        "export": {"enabled": False},
    }
    return yaml.safe_dump(config, sort_keys=False)
