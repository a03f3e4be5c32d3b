"""Conformance checks for a LatencyModel and a LatencyBackend (torch is imported inside the functions)."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwnas.errors import MissingLatencyEntry
from hwnas.latency.backends.base import LatencyBackend
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol
from hwnas.latency.model import LatencyModel
from hwnas.latency.tables.model import TableLatencyModel

if TYPE_CHECKING:
    from torch import nn

    from hwnas.search_spaces.base import SearchSpace


def _table_defaults(model: object) -> tuple[Callable[[float, int], float] | None,
                                            Callable[[str], TableLatencyModel] | None]:
    """How a :class:`TableLatencyModel` combines its unit costs, and how to make it lack one unit."""
    if not isinstance(model, TableLatencyModel):
        return None, None
    table = model.table
    combine: Callable[[float, int], float]
    if model.calibrated and table.calibration is not None:
        combine = table.calibration.apply
    else:
        combine = lambda total, _units: total  # noqa: E731

    if model.measured_resolutions is not None:
        # interpolated prices come from the units of the measured resolutions, never from the arch's own keys:
        # the missing-unit rule is checked on a model at the table's own resolutions
        return combine, None

    def without(key: str) -> TableLatencyModel:
        entries = {k: v for k, v in table.entries.items() if k != key}
        return TableLatencyModel(table=replace(table, entries=entries), space=model.space, calibrated=model.calibrated)

    return combine, without


def check_latency_model(model: LatencyModel, space: SearchSpace, rng: np.random.Generator, *, samples: int = 8,
                        combine: Callable[[float, int], float] | None = None,
                        without: Callable[[str], LatencyModel] | None = None) -> None:
    """The :class:`~hwnas.latency.model.LatencyModel` contract, on ``samples`` architectures drawn from ``space``.

    Checked: ``predict_ms`` gives one finite positive float per architecture, the same in a batch as one by one,
    and the same when asked again; ``unit_costs_ms`` has exactly the distinct units of ``space.layers(arch)``,
    finite and non-negative, and their sum over ``layers(arch)`` (repeats counted) gives ``predict_ms`` through
    ``combine``; a model that lacks one unit raises :class:`~hwnas.errors.MissingLatencyEntry` naming it, from
    both methods and from a batch that contains the architecture (never 0, never a guess).

    Args:
        model: The model under test.
        space: The search space it prices.
        rng: Draws the architectures.
        samples: Number of architectures.
        combine: ``(sum of unit costs, number of units) -> predict_ms``; the identity on the sum by default, and
            the table's calibration for a calibrated :class:`~hwnas.latency.tables.model.TableLatencyModel`.
        without: ``key -> `` the same model lacking unit ``key`` (a table with that entry removed); built for a
            :class:`~hwnas.latency.tables.model.TableLatencyModel`; without one the missing-unit check is not run.

    Raises:
        AssertionError: Naming the first broken rule.
    """
    default_combine, default_without = _table_defaults(model)
    # a table that answers with its learned whole-network model is not a function of the unit sum alone
    # and neither is an interpolated price corrected per resolution (the factor scales the whole network)
    learned = isinstance(model, TableLatencyModel) and (model.uses_learned or bool(model.resolution_factors))
    combine = combine or default_combine or (lambda total, _units: total)
    without = without or default_without

    assert isinstance(model, LatencyModel), \
        "the model does not implement LatencyModel (context, predict_ms, unit_costs_ms)"
    assert isinstance(model.context, DeviceContext), f"context is a {type(model.context).__name__}, not a DeviceContext"
    archs = [space.sample(rng) for _ in range(samples)]

    batch = model.predict_ms(archs)
    assert isinstance(batch, np.ndarray), f"predict_ms returned a {type(batch).__name__}, not an np.ndarray"
    assert batch.shape == (len(archs),), f"predict_ms returned shape {batch.shape} for {len(archs)} architectures"
    assert np.issubdtype(batch.dtype, np.floating), f"predict_ms returned dtype {batch.dtype}, not floats"
    assert np.all(np.isfinite(batch)) and np.all(batch > 0), f"predict_ms returned non-finite or non-positive {batch}"
    assert model.predict_ms([]).shape == (0,), "predict_ms([]) is not an empty array"
    single = np.array([model.predict_ms([a])[0] for a in archs])
    assert np.allclose(single, batch, rtol=1e-9, atol=0), f"batch {batch} differs from one by one {single}"
    assert np.array_equal(model.predict_ms(archs), batch), "predict_ms is not deterministic"

    for arch, predicted in zip(archs, batch):
        keys = space.layers(arch)
        costs = model.unit_costs_ms(arch)
        assert isinstance(costs, dict), f"unit_costs_ms returned a {type(costs).__name__}, not a dict"
        extra, absent = sorted(set(costs) - set(keys))[:3], sorted(set(keys) - set(costs))[:3]
        assert not extra and not absent, \
            f"unit_costs_ms keys differ from layers({arch.arch_id}): extra {extra}, missing {absent}"
        assert all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in costs.values()), \
            "unit costs must be finite non-negative floats (ms)"
        assert costs == model.unit_costs_ms(arch), "unit_costs_ms is not deterministic"
        if learned:
            continue
        expected = combine(sum(costs[k] for k in keys), len(keys))
        assert math.isclose(predicted, expected, rel_tol=1e-9, abs_tol=1e-12), \
            f"predict_ms {predicted} of {arch.arch_id} does not follow from its unit costs ({expected})"

    if without is None:
        return
    arch = archs[0]
    key = space.layers(arch)[0]
    lacking = without(key)
    for call, what in ((lambda: lacking.predict_ms([arch]), "predict_ms"),
                       (lambda: lacking.predict_ms(archs), "predict_ms of a batch"),
                       (lambda: lacking.unit_costs_ms(arch), "unit_costs_ms")):
        try:
            call()
        except MissingLatencyEntry as exc:
            assert key in exc.keys, f"{what}: MissingLatencyEntry names {exc.keys}, not the missing {key!r}"
        else:
            raise AssertionError(f"{what} of an architecture whose unit {key!r} is missing raised nothing "
                                 "(it must raise MissingLatencyEntry, never price it as 0)")


def _tiny_module() -> nn.Module:
    """A small convolutional network on a (3, 8, 8) input: every backend can convert it."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4)).eval()


def _profile(backend: LatencyBackend, protocol: MeasureProtocol, workdir: Path,
             name: str) -> tuple[LatencyStats, float]:
    """Convert the tiny network and profile it, checking the shapes of what comes back."""
    shape = (3, 8, 8)
    artifact = Path(backend.convert(_tiny_module(), shape, workdir, name))
    assert artifact.exists(), f"convert() returned {artifact}, which does not exist"
    assert artifact.resolve().is_relative_to(workdir.resolve()), f"convert() wrote {artifact} outside its workdir"
    result = backend.profile(artifact, shape, protocol)
    assert isinstance(result, tuple) and len(result) == 2, "profile() must return (LatencyStats, seconds)"
    stats, seconds = result
    assert isinstance(stats, LatencyStats), f"profile() returned a {type(stats).__name__}, not LatencyStats"
    assert isinstance(seconds, float) and math.isfinite(seconds) and seconds > 0, f"profile() timed for {seconds!r} s"
    return stats, seconds


def check_backend(backend: LatencyBackend, *, device: str = "conformance-device", min_time_s: float = 0.3) -> None:
    """The :class:`~hwnas.latency.backends.base.LatencyBackend` contract on a tiny torch network.

    Checked: ``check()`` returns a one-line description (or raises :class:`~hwnas.errors.BackendUnavailable`,
    which is passed on: the caller skips); ``context()`` is a :class:`DeviceContext` for the device and input
    resolution asked; ``convert`` writes an artifact under its work folder; ``profile`` returns
    :class:`LatencyStats` of at least ``repeats`` runs with a positive median and ``p10 <= median <= p90``,
    and follows the stop rule: at least ``min_time_s`` seconds when asked, at most ``max_repeats`` runs.

    Args:
        backend: The backend under test, constructed.
        device: The device name its context should carry.
        min_time_s: The minimum timed span asked of the stop-rule check.

    Raises:
        BackendUnavailable: From ``backend.check()``: the backend cannot run here.
        AssertionError: Naming the first broken rule.
    """
    description = backend.check()
    assert isinstance(description, str) and description.strip() and "\n" not in description.strip(), \
        f"check() must return a one-line description, got {description!r}"
    assert isinstance(backend, LatencyBackend), "the backend does not implement LatencyBackend"
    assert isinstance(backend.name, str) and backend.name, "the backend has no registry name"
    context = backend.context(device, input_resolution=8)
    assert isinstance(context, DeviceContext), f"context() returned a {type(context).__name__}, not a DeviceContext"
    assert context.device == device and context.input_resolution == 8, \
        f"context() lost the device or resolution: {context}"
    assert context.runtime and context.batch_size >= 1, f"context() names no runtime or batch size: {context}"

    with tempfile.TemporaryDirectory(prefix="hwnas-backend-check-") as tmp:
        workdir = Path(tmp)
        protocol = MeasureProtocol(warmup=2, repeats=7)
        stats, _ = _profile(backend, protocol, workdir, "tiny")
        assert stats.count >= protocol.repeats, f"{stats.count} timed runs, fewer than repeats={protocol.repeats}"
        assert stats.median_ms > 0 and math.isfinite(stats.median_ms), f"median {stats.median_ms} ms"
        assert stats.p10_ms <= stats.median_ms <= stats.p90_ms, f"not p10 <= median <= p90: {stats}"
        assert stats.iqr_ms >= 0, f"negative IQR: {stats}"

        timed = MeasureProtocol(warmup=1, repeats=1, min_time_s=min_time_s)
        stats, seconds = _profile(backend, timed, workdir, "timed")
        assert seconds >= min_time_s, f"min_time_s={min_time_s} asked, {seconds:.3f} s timed"
        assert stats.count >= 1

        capped = MeasureProtocol(warmup=0, repeats=3, min_time_s=2.0, max_repeats=5)
        stats, _ = _profile(backend, capped, workdir, "capped")
        assert stats.count == capped.max_repeats, (f"max_repeats={capped.max_repeats} with a 2 s minimum time: "
                                                   f"{stats.count} runs were timed")


__all__ = ["check_backend", "check_latency_model"]


def synthetic_devices(rng: np.random.Generator, n: int = 400, d: int = 16,
                      m: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Data for few-shot latency tests: binary encodings ``X`` (n, d), latencies on ``m`` known devices
    (log-linear in the encoding, 2 % noise) and a new device's that mixes devices 1 and 3 in log space."""
    X = rng.integers(0, 2, size=(n, d)).astype(float)
    W = rng.uniform(0.05, 0.5, size=(d, m))
    sources = np.exp(X @ W + rng.normal(0, 0.02, size=(n, m)))
    target = np.exp(0.7 * np.log(sources[:, 1]) + 0.3 * np.log(sources[:, 3]) + 0.4)
    return X, sources, target
