"""``nas latency validate``: whole networks measured end to end against the table; a robust calibration."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.measure import MeasureProtocol, measure_network, measure_rounds
from hwnas.latency.tables import learned
from hwnas.latency.tables.table import Calibration, LatencyTable, accuracy_figures, now_iso

if TYPE_CHECKING:
    from torch import nn

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
    """End-to-end latency (ms: the protocol's statistic, the median by default) of each architecture's whole
    network on ``backend`` (weights seeded with 0).

    With ``protocol.rounds`` > 1 every network is converted once and timed once per round, each round going over
    all of them, and the median of its rounds is kept (``on_arch`` counts timings over all rounds).
    """
    import statistics

    import torch

    rounds = protocol.rounds
    per_arch: list[list[float]] = [[] for _ in archs]
    total = len(archs) * rounds

    def built(arch: Architecture) -> tuple[nn.Module, tuple[int, ...]]:
        torch.manual_seed(0)
        return space.build(arch).eval(), tuple(int(s) for s in space.input_shape_of(arch))

    with tempfile.TemporaryDirectory(prefix="hwnas-validate-") as tmp:
        if rounds == 1:  # one timing: convert, time and delete one network at a time
            for i, arch in enumerate(archs):
                stats, _ = measure_network(backend, *built(arch), protocol, workdir=tmp, name=f"net{i}")
                per_arch[i].append(stats.central(protocol.statistic))
                if on_arch:
                    on_arch(i + 1, total)
        else:
            for row in measure_rounds(backend, (built(a) for a in archs), protocol, rounds, workdir=tmp,
                                      on_timing=on_arch):
                for i, ms in enumerate(row):
                    per_arch[i].append(ms)
    return [float(statistics.median(v)) for v in per_arch]


def fit_calibration(sums: Sequence[float] | np.ndarray, units: Sequence[int] | np.ndarray,
                    measured: Sequence[float] | np.ndarray) -> Calibration:
    """Robust (Huber) fit of ``measured ≈ a·sum + b·units + c``, weighted by 1/measured so relative error counts."""
    from sklearn.linear_model import HuberRegressor

    X = np.column_stack([np.asarray(sums, float), np.asarray(units, float)])
    y = np.asarray(measured, float)
    if len(y) < 4:
        raise ValueError(f"a calibration needs at least 4 measured networks, got {len(y)}")
    model = HuberRegressor(epsilon=1.35, alpha=0.0, max_iter=1000).fit(X, y, sample_weight=1.0 / y)
    return Calibration(a=float(model.coef_[0]), b=float(model.coef_[1]), c=float(model.intercept_))


def heldout_split(n: int, rng: np.random.Generator, fraction: float, *,
                  min_train: int) -> tuple[np.ndarray, np.ndarray]:
    """(held-out, training) indices of ``n`` networks: a random ``fraction`` held out, at least 2, leaving at
    least ``min_train`` to fit on."""
    perm = rng.permutation(n)
    n_hold = min(max(2, int(round(n * fraction))), n - min_train)
    return perm[:n_hold], perm[n_hold:]


#: Random halvings the calibration and the learned correction are judged on (the first is the reported split).
#: On 100 networks one halving's MAPE moves by about ±0.3 points and its share within ±10 % by a network or two
#: (the `nb201` int8 table: calibrated 1.81 % / 98 % on its halving, 1.86 ± 0.20 % / 98.8 % over 40), so a
#: single halving picks between two models this close by luck; the mean over these picks by their merit.
SPLITS = 10

_FIGURES = ("mape_pct", "within_5pct", "within_10pct", "kendall_tau")


def _mean_figures(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of several halvings' figures (and how many there were: ``splits``)."""
    return {"n": int(runs[0]["n"]), "train": int(runs[0]["train"]), "splits": len(runs),
            **{k: float(np.nanmean([r[k] for r in runs])) for k in _FIGURES}}


def calibrate_table(table: LatencyTable, space: SearchSpace, archs: Sequence[Architecture],
                    measured: Sequence[float], *,
                    rng: np.random.Generator, holdout_fraction: float = 0.5, how: str = "",
                    splits: int = SPLITS) -> dict[str, Any]:
    """Compare the table with measured networks, fit a calibration, and store both in the table.

    Figures: ``raw`` (the plain sum, all networks), ``calibrated_heldout`` (a calibration fitted on a random
    ``1 - holdout_fraction`` share and judged on the rest), and the calibration kept in the table is refitted
    on all networks. With at least :data:`~hwnas.latency.tables.learned.MIN_TRAIN` training networks, a
    learned whole-network correction is fitted on the same share and judged on the same held-out networks
    (``learned_heldout``). Both are judged again on ``splits - 1`` more random halvings, and ``mean_heldout``
    holds the means over all ``splits``; the table answers with the learned correction only where its mean
    held-out MAPE is lower than the calibration's.
    """
    if splits < 1:
        raise ValueError(f"validation: splits must be >= 1, got {splits}")
    keys = [space.layers(a) for a in archs]
    sums = np.array([table.sum_ms(k) for k in keys])
    units = np.array([len(k) for k in keys])
    y = np.asarray(measured, float)
    if len(y) < MIN_NETWORKS:
        raise ValueError(f"validation needs at least {MIN_NETWORKS} measured networks (4 to fit, 2 to judge), "
                         f"got {len(y)}")
    arch_list = list(archs)
    raw = accuracy_figures(y, sums)

    def judge(hold: np.ndarray, train: np.ndarray,
              seed: int | None) -> tuple[dict[str, float], dict[str, float] | None]:
        """The calibration's and (with a seed) the learned correction's figures, fitted on ``train``."""
        cal = fit_calibration(sums[train], units[train], y[train])
        held = {**accuracy_figures(y[hold], [cal.apply(s, u) for s, u in zip(sums[hold], units[hold])]),
                "train": int(len(train))}
        if seed is None:
            return held, None
        model = learned.fit_correction(space, [arch_list[i] for i in train], sums[train], units[train], y[train],
                                       cal, seed=seed)
        pred = learned.predict(model, cal, space, [arch_list[i] for i in hold], sums[hold], units[hold])
        return held, {**accuracy_figures(y[hold], pred), "train": int(len(train))}

    hold, train = heldout_split(len(y), rng, holdout_fraction, min_train=4)
    fit_learned = len(train) >= learned.MIN_TRAIN
    seed = int(rng.integers(2**31 - 1)) if fit_learned else None
    held, learned_held = judge(hold, train, seed)
    cal_runs, learned_runs = [held], [learned_held]
    split_rng = np.random.default_rng([seed if seed is not None else 0, len(y), 1])
    for _ in range(splits - 1):
        h, t = heldout_split(len(y), split_rng, holdout_fraction, min_train=4)
        c, lh = judge(h, t, int(split_rng.integers(2**31 - 1)) if fit_learned else None)
        cal_runs.append(c)
        learned_runs.append(lh)
    calibrated_mean = _mean_figures(cal_runs)
    learned_mean = _mean_figures([r for r in learned_runs if r is not None]) if fit_learned else None
    mean_held = {"calibrated": calibrated_mean, "learned": learned_mean}
    table.calibration = fit_calibration(sums, units, y)
    table.answers, table.learned = "calibration", None
    if seed is not None and learned_mean is not None:  # a learned correction was fitted and judged (both or neither)
        model = learned.fit_correction(space, arch_list, sums, units, y, table.calibration, seed=seed)
        better = learned_mean["mape_pct"] < calibrated_mean["mape_pct"]
        table.answers = "learned" if better else "calibration"
        table.learned = {"kind": "gbt", "target": "log(measured / calibrated sum)", "heldout": learned_held,
                         **model.to_table()}
    table.validation = {
        "created": now_iso(),
        "how": how,
        "networks": int(len(y)),
        "raw": raw,
        "calibrated_heldout": held,
        "learned_heldout": learned_held,
        "mean_heldout": mean_held,
        "answers": table.answers,
        "measured": [{"arch": a.to_dict(), "measured_ms": float(m), "sum_ms": float(s)}
                     for a, m, s in zip(archs, y, sums)],
    }
    return table.validation


def table_statistic(table: LatencyTable, protocol: MeasureProtocol) -> MeasureProtocol:
    """``protocol`` keeping the statistic the table's units were timed with, so that networks are judged on the
    same statistic as their units (a table that records none, or a published one, keeps ``protocol``'s)."""
    from dataclasses import replace

    from hwnas.latency.kit.run_kit import STATISTICS

    statistic = table.protocol.get("statistic")
    if statistic in STATISTICS and statistic != protocol.statistic:
        return replace(protocol, statistic=statistic)
    return protocol


def validate_table(table: LatencyTable, space: SearchSpace, backend: LatencyBackend, *, n: int,
                   rng: np.random.Generator,
                   protocol: MeasureProtocol, out: Path | None = None,
                   on_arch: Callable[[int, int], None] | None = None, replace: bool = False) -> dict[str, Any]:
    """Measure ``n`` random networks end to end on the table's context and store the figures in the table.

    Refused before anything is timed (:class:`~hwnas.latency.tables.LatencyTableError`, naming why): a table of
    another context, one that lacks units of ``space`` (an interrupted profile), one measured on a machine with
    another CPU (a board's table: its validation is the board's own), and one that already holds a validation,
    unless ``replace``.
    """
    from hwnas.latency.tables.table import LatencyTableError
    from hwnas.search_spaces.base import UnitListedSpace

    table.require_latency("nas latency validate")
    backend.check()
    ctx = backend.context(table.context.device, input_resolution=table.context.input_resolution)
    table.check(space=space.name, context=ctx)
    where = table.source or "the table"
    if isinstance(space, UnitListedSpace):
        units = list(dict.fromkeys(space.all_layers()))
        missing = table.missing(units)
        if missing:
            raise LatencyTableError(f"{where} is incomplete: {len(missing)} of the {len(units)} units of space "
                                    f"{space.name!r} have no entry (e.g. {missing[0]}); finish it first (the same nas "
                                    "latency profile command resumes it)")
    theirs, mine = _measured_on(table), _this_cpu() if "cpu" in (ctx.provider or "cpu").lower() else None
    if theirs and mine and theirs != mine:
        raise LatencyTableError(f"{where} was measured on another machine (CPU {theirs!r}; this one has {mine!r}): "
                                "validate it where it was measured (nas latency show prints its validation)")
    if table.validation and not replace:
        raise LatencyTableError(f"{where} already holds a validation ({table.validation.get('how', '?')}); pass "
                                "--force to replace it")
    archs = sample_distinct(space, n, rng)
    measured = measure_networks(space, backend, archs, table_statistic(table, protocol), on_arch=on_arch)
    figures = calibrate_table(table, space, archs, measured, rng=rng,
                              how=f"{len(archs)} random networks measured end to end with {backend.check()}")
    table.save(out or Path(table.source))
    return figures


def _measured_on(table: LatencyTable) -> str | None:
    """The CPU a table's units were measured on, where its provenance says (profile: ``cpu``; a board kit:
    ``board.cpu``)."""
    prov = table.provenance if isinstance(table.provenance, dict) else {}
    listed = prov.get("board")
    board = listed if isinstance(listed, dict) else {}
    cpu = prov.get("cpu") or board.get("cpu")
    return str(cpu) if cpu else None


def _this_cpu() -> str | None:
    try:
        from hwnas.latency.onnx_export import host_description

        return str(host_description().get("cpu") or "") or None
    except Exception:  # no onnxruntime: nothing to compare with
        return None


def validate_interpolation(table: LatencyTable, space: SearchSpace, backend: LatencyBackend, *, n: int,
                           rng: np.random.Generator, protocol: MeasureProtocol, out: Path | None = None,
                           on_arch: Callable[[int, int], None] | None = None,
                           holdout_fraction: float = 0.5) -> dict[str, Any]:
    """Judge a table on networks at the resolutions it did *not* measure, priced by interpolation, and fit a
    per-resolution correction of the interpolation from the same networks.

    ``space`` is the space with every resolution (a table profiled with fewer, ``--space-param
    resolutions=[...]``, prices the others between its measured ones): ``n`` random networks, each at a random
    unmeasured resolution, are timed end to end and compared with the table's interpolated prediction (the
    figures over all of them). Pixel count does not carry latency from one resolution to the next (a feature
    map of 33 pixels runs slower per pixel than one of 32), so a factor per resolution (the median of
    measured / interpolated over its networks) is fitted on a random ``1 - holdout_fraction`` share and judged
    on the rest beside the plain interpolation (``heldout``); refitted on all networks, the factors are stored
    (``correction``) and used where they judged better. A resolution without networks takes the factor
    interpolated between its neighbours (a measured resolution's is 1). Everything goes to
    ``table.validation["interpolated"]``; the unit entries and the calibration are not touched.

    Raises:
        ValueError: The table was not validated at its own resolutions first, or it measured every resolution
            of ``space`` (nothing to interpolate), or fewer than 4 networks were asked for.
    """
    from hwnas.latency.tables.model import TableLatencyModel, resolution_factor

    table.require_latency("nas latency validate")
    if table.validation is None:
        raise ValueError(f"{table.source or 'the table'} is not validated at its own resolutions yet: run nas latency "
                         "validate on it without --space-param first")
    if n < 4:
        raise ValueError(f"judging the interpolation needs at least 4 networks (2 to fit, 2 to judge), got {n}")
    backend.check()
    model = TableLatencyModel(table=table, space=space)
    if model.measured_resolutions is None:
        raise ValueError("the space's resolutions are the table's own: nothing is interpolated (validate without "
                         "--space-param)")
    model.resolution_factors = None  # judge the plain interpolation, whatever an earlier run fitted
    measured_res = model.measured_resolutions
    unmeasured = [r for r in space.resolution_choices() if r not in measured_res]  # type: ignore[attr-defined]
    archs = [space.at_resolution(a, int(rng.choice(unmeasured)))  # type: ignore[attr-defined]
             for a in sample_distinct(space, n, rng)]
    measured = np.asarray(measure_networks(space, backend, archs, table_statistic(table, protocol),
                                           on_arch=on_arch), float)
    predicted = np.asarray(model.predict_ms(archs), float)
    res = np.array([space.resolution_of(a) for a in archs])  # type: ignore[attr-defined]
    hold, train = heldout_split(len(archs), rng, holdout_fraction, min_train=2)
    split = fit_resolution_factors(res[train], measured[train], predicted[train])
    plain_held = accuracy_figures(measured[hold], predicted[hold])
    corrected_held = accuracy_figures(measured[hold], predicted[hold] * np.array(
        [resolution_factor(split, measured_res, int(r)) for r in res[hold]]))
    used = corrected_held["mape_pct"] < plain_held["mape_pct"]
    figures = {**accuracy_figures(measured, predicted), "measured_resolutions": list(measured_res),
               "resolutions": sorted({int(r) for r in res}),
               "created": now_iso(), "how": f"{len(archs)} random networks at unmeasured resolutions, measured end to "
                                            f"end with {backend.check()}",
               "heldout": {"interpolated": plain_held, "corrected": corrected_held, "train": int(len(train))},
               "correction": {"kind": "factor per resolution: median of measured / interpolated",
                              "factors": {str(r): f for r, f in
                                          fit_resolution_factors(res, measured, predicted).items()},
                              "used": bool(used)},
               "measured": [{"arch": a.to_dict(), "measured_ms": float(m), "predicted_ms": float(p)}
                            for a, m, p in zip(archs, measured, predicted)]}
    table.validation["interpolated"] = figures
    table.save(out or Path(table.source))
    return figures


def fit_resolution_factors(resolutions: Sequence[int] | np.ndarray, measured: Sequence[float] | np.ndarray,
                           predicted: Sequence[float] | np.ndarray) -> dict[int, float]:
    """Per resolution, the median ratio of measured to predicted latency over its networks (in log space)."""
    res = np.asarray(resolutions, int)
    ratio = np.log(np.asarray(measured, float) / np.asarray(predicted, float))
    return {int(r): float(np.exp(np.median(ratio[res == r]))) for r in sorted(set(res.tolist()))}
