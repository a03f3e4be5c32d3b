"""``nas latency validate``: whole networks measured end to end against the table; a robust calibration."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.measure import MeasureProtocol, measure_network
from hwnas.latency.tables.table import Calibration, LatencyTable, accuracy_figures, now_iso

if TYPE_CHECKING:
    from hwnas.latency.backends.base import LatencyBackend
    from hwnas.search_spaces import SearchSpace

log = logging.getLogger(__name__)

#: Fewest whole networks a validation accepts: four to fit the calibration, two held out to judge it.
MIN_NETWORKS = 6


def sample_distinct(space: SearchSpace, n: int, rng: np.random.Generator, *,
                    max_tries: int = 100) -> list[Architecture]:
    """``n`` distinct random architectures of ``space``."""
    out: dict[str, Architecture] = {}
    tries = 0
    while len(out) < n and tries < n * max_tries:
        a = space.sample(rng)
        out.setdefault(a.arch_id, a)
        tries += 1
    return list(out.values())


def measure_networks(space: SearchSpace, backend: LatencyBackend, archs: Sequence[Architecture],
                     protocol: MeasureProtocol, on_arch: Callable[[int, int], None] | None = None) -> list[float]:
    """End-to-end median latency (ms) of each architecture's whole network on ``backend`` (weights seeded with 0)."""
    import torch

    out = []
    with tempfile.TemporaryDirectory(prefix="hwnas-validate-") as tmp:
        for i, arch in enumerate(archs):
            torch.manual_seed(0)
            model = space.build(arch).eval()
            stats, _ = measure_network(backend, model, space.input_shape_of(arch), protocol, workdir=tmp,
                                       name=f"net{i}")
            out.append(stats.median_ms)
            if on_arch:
                on_arch(i + 1, len(archs))
    return out


def fit_calibration(sums: Sequence[float], units: Sequence[int], measured: Sequence[float]) -> Calibration:
    """Robust (Huber) fit of ``measured ≈ a·sum + b·units + c``, weighted by 1/measured so relative error counts."""
    from sklearn.linear_model import HuberRegressor

    X = np.column_stack([np.asarray(sums, float), np.asarray(units, float)])
    y = np.asarray(measured, float)
    if len(y) < 4:
        raise ValueError(f"a calibration needs at least 4 measured networks, got {len(y)}")
    model = HuberRegressor(epsilon=1.35, alpha=0.0, max_iter=1000).fit(X, y, sample_weight=1.0 / y)
    return Calibration(a=float(model.coef_[0]), b=float(model.coef_[1]), c=float(model.intercept_))


def calibrate_table(table: LatencyTable, space: SearchSpace, archs: Sequence[Architecture],
                    measured: Sequence[float], *,
                    rng: np.random.Generator, holdout_fraction: float = 0.5, how: str = "") -> dict[str, Any]:
    """Compare the table with measured networks, fit a calibration, and store both in the table.

    Figures: ``raw`` (the plain sum, all networks), ``calibrated_heldout`` (a calibration fitted on a random
    ``1 - holdout_fraction`` share and judged on the rest), and the calibration kept in the table is refitted
    on all networks.
    """
    keys = [space.layers(a) for a in archs]
    sums = np.array([table.sum_ms(k) for k in keys])
    units = np.array([len(k) for k in keys])
    y = np.asarray(measured, float)
    if len(y) < MIN_NETWORKS:
        raise ValueError(f"validation needs at least {MIN_NETWORKS} measured networks (4 to fit, 2 to judge), "
                         f"got {len(y)}")
    raw = accuracy_figures(y, sums)
    perm = rng.permutation(len(y))
    n_hold = min(max(2, int(round(len(y) * holdout_fraction))), len(y) - 4)
    hold, train = perm[:n_hold], perm[n_hold:]
    split_cal = fit_calibration(sums[train], units[train], y[train])
    held = accuracy_figures(y[hold], [split_cal.apply(s, u) for s, u in zip(sums[hold], units[hold])])
    table.calibration = fit_calibration(sums, units, y)
    table.validation = {
        "created": now_iso(),
        "how": how,
        "networks": int(len(y)),
        "raw": raw,
        "calibrated_heldout": {**held, "train": int(len(train))},
        "measured": [{"arch": a.to_dict(), "measured_ms": float(m), "sum_ms": float(s)}
                     for a, m, s in zip(archs, y, sums)],
    }
    return table.validation


def validate_table(table: LatencyTable, space: SearchSpace, backend: LatencyBackend, *, n: int,
                   rng: np.random.Generator,
                   protocol: MeasureProtocol, out: Path | None = None,
                   on_arch: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Measure ``n`` random networks end to end on the table's context and store the figures in the table."""
    table.require_latency("nas latency validate")
    backend.check()
    ctx = backend.context(table.context.device, input_resolution=table.context.input_resolution)
    table.check(space=space.name, context=ctx)
    archs = sample_distinct(space, n, rng)
    measured = measure_networks(space, backend, archs, protocol, on_arch=on_arch)
    figures = calibrate_table(table, space, archs, measured, rng=rng,
                              how=f"{len(archs)} random networks measured end to end with {backend.check()}")
    table.save(out or Path(table.source))
    return figures
