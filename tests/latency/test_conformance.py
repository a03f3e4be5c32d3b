"""Conformance: every registered latency backend, and the table latency model (hwnas.testing.latency)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.errors import BackendUnavailable, MissingLatencyEntry
from hwnas.latency import LatencyModel, TableLatencyModel
from hwnas.latency.backends import BACKENDS
from hwnas.latency.context import DeviceContext
from hwnas.latency.measure import LatencyStats, MeasureProtocol
from hwnas.latency.tables import Calibration, Entry, LatencyTable, profile_space
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.testing import check_backend, check_latency_model

#: Variants beyond each backend's defaults: the device ones skip here through their own check().
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "onnxruntime": [{}, {"provider": "cuda"}],
    "torch": [{}, {"device": "cuda"}],
}
#: What must run on any machine (no skip allowed).
MUST_RUN = {("onnxruntime", ()), ("torch", ())}
CASES = [(name, params) for name in BACKENDS.names() for params in VARIANTS.get(name, [{}])]


def _key(name: str, params: dict[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return name, tuple(sorted(params.items()))


def _case_id(case: tuple[str, dict[str, Any]]) -> str:
    name, params = case
    return name + "".join(f"-{v}" for v in params.values())


def small_space() -> MobileNetV3Space:
    return MobileNetV3Space(resolution=8, stages=[{"channels": 8, "depths": [1, 2]},
                                                  {"channels": 16, "stride": 2, "depths": [1, 2], "se": True}],
                            kernels=[3, 5], expand_ratios=[3])


def synthetic_table(space: MobileNetV3Space) -> LatencyTable:
    """A table with made-up but distinct per-unit numbers: the model's contract, not the device, is under test."""
    ctx = DeviceContext(device="synthetic", runtime="onnxruntime", runtime_version="1",
                        provider="CPUExecutionProvider", threads=1, input_resolution=8)
    entries = {k: Entry(median_ms=0.01 * (i + 1), p10_ms=0.01 * (i + 1), p90_ms=0.01 * (i + 1), count=5)
               for i, k in enumerate(space.all_layers())}
    return LatencyTable(space=space.name, context=ctx, entries=entries)


# -- backends -------------------------------------------------------------------------------------------
def test_every_registered_backend_is_checked():
    assert {name for name, _ in CASES} == set(BACKENDS.names())
    assert MUST_RUN <= {_key(name, params) for name, params in CASES}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_backend_conformance(case: tuple[str, dict[str, Any]]):
    name, params = case
    backend = BACKENDS.get(name)(**params)
    try:
        backend.check()
    except BackendUnavailable as exc:
        if _key(name, params) in MUST_RUN:
            raise
        pytest.skip(f"{name} {params or ''}: {exc}")
    check_backend(backend)


class _Wrapped:
    """An onnxruntime backend whose profile() result is tampered with: the suite must notice."""

    name = "wrapped"

    def __init__(self, tamper: Any) -> None:
        self.inner = BACKENDS.get("onnxruntime")()
        self.tamper = tamper

    def check(self) -> str:
        return self.inner.check()

    def context(self, device: str, *, input_resolution: int | None = None) -> DeviceContext:
        return self.inner.context(device, input_resolution=input_resolution)

    def convert(self, model: Any, input_shape: Any, workdir: Path, name: str) -> Path:
        return self.inner.convert(model, input_shape, workdir, name)

    def profile(self, artifact: Path, input_shape: Any, protocol: MeasureProtocol) -> tuple[LatencyStats, float]:
        return self.tamper(self.inner, artifact, input_shape, protocol)


@pytest.mark.parametrize(("tamper", "message"), [
    (lambda b, a, s, p: b.profile(a, s, MeasureProtocol(warmup=0, repeats=1)), "fewer than repeats"),
    (lambda b, a, s, p: b.profile(a, s, MeasureProtocol(warmup=p.warmup, repeats=p.repeats,
                                                        max_repeats=p.max_repeats)), "min_time_s="),
    (lambda b, a, s, p: b.profile(a, s, MeasureProtocol(warmup=p.warmup, repeats=p.repeats,
                                                        min_time_s=p.min_time_s)), "max_repeats="),
    (lambda b, a, s, p: (lambda st: (LatencyStats(median_ms=st[0].median_ms, p10_ms=2 * st[0].median_ms,
                                                  p90_ms=st[0].p90_ms, iqr_ms=0.0, count=st[0].count), st[1]))(
        b.profile(a, s, p)), "p10 <= median <= p90"),
], ids=["too-few-runs", "ignores-min-time", "ignores-max-repeats", "bad-percentiles"])
def test_check_backend_catches_a_broken_backend(tamper: Any, message: str):
    with pytest.raises(AssertionError, match=message):
        check_backend(_Wrapped(tamper))


# -- latency models -------------------------------------------------------------------------------------
def test_table_latency_model_conformance_synthetic():
    space = small_space()
    model = TableLatencyModel(table=synthetic_table(space), space=space, calibrated=False)
    assert isinstance(model, LatencyModel) and model.context.device == "synthetic"
    check_latency_model(model, space, np.random.default_rng(0))


def test_calibrated_table_latency_model_conformance_and_evaluator_numbers(tmp_path: Path):
    """Calibrated: predict_ms is the calibration of the unit sum, the number the latency_table evaluator reports."""
    from hwnas.evaluation import EVALUATORS, EvalContext
    from hwnas.evaluators.latency_table import LatencyTableEvaluator

    space = small_space()
    table = synthetic_table(space)
    table.calibration = Calibration(a=1.2, b=0.003, c=0.05)
    model = TableLatencyModel(table=table, space=space)
    check_latency_model(model, space, np.random.default_rng(1))
    arch = space.sample(np.random.default_rng(2))
    keys = space.layers(arch)
    raw = sum(table.entries[k].median_ms for k in keys)
    assert model.predict_ms([arch])[0] == pytest.approx(1.2 * raw + 0.003 * len(keys) + 0.05, rel=1e-12)
    uncalibrated = TableLatencyModel(table=table, space=space, calibrated=False)
    assert uncalibrated.predict_ms([arch])[0] == pytest.approx(raw, rel=1e-12)
    path = table.save(tmp_path / "t.json")
    assert EVALUATORS.get("latency_table") is LatencyTableEvaluator
    ev = LatencyTableEvaluator(context=EvalContext(space=space, seed=0), table=str(path))
    assert ev.evaluate([arch]) == [{"latency_ms@synthetic": model.predict_ms([arch])[0]}]
    assert ev.evaluate([arch])[0]["latency_ms@synthetic"] == table.predict_ms(keys)


def test_table_latency_model_names_every_missing_key_of_a_batch():
    space = small_space()
    table = synthetic_table(space)
    rng = np.random.default_rng(3)
    archs = [space.sample(rng) for _ in range(6)]
    dropped = sorted({space.layers(archs[0])[-1], space.layers(archs[1])[0]})
    for key in dropped:
        del table.entries[key]
    model = TableLatencyModel(table=table, space=space)
    with pytest.raises(MissingLatencyEntry) as info:
        model.predict_ms(archs)
    assert sorted(info.value.keys) == dropped


def test_table_latency_model_conformance_on_a_profiled_table(tmp_path: Path):
    space = small_space()
    rep = profile_space(space, BACKENDS.get("onnxruntime")(threads=1), device="here", out=tmp_path / "t.json",
                        protocol=MeasureProtocol(warmup=1, repeats=3))
    assert rep.failed == 0
    check_latency_model(TableLatencyModel(table=rep.table, space=space), space, np.random.default_rng(4))


class _ZeroForMissing:
    """A model that prices a missing unit as 0: the suite must refuse it."""

    def __init__(self, inner: TableLatencyModel) -> None:
        self.inner = inner
        self.context = inner.context

    def predict_ms(self, archs: Any) -> np.ndarray:
        return np.array([sum(self.unit_costs_ms(a)[k] for k in self.inner.space.layers(a)) for a in archs], dtype=float)

    def unit_costs_ms(self, arch: Any) -> dict[str, float]:
        entries = self.inner.table.entries
        return {k: entries[k].median_ms if k in entries else 0.0 for k in self.inner.space.layers(arch)}


def test_check_latency_model_catches_a_zero_for_a_missing_unit():
    space = small_space()
    table = synthetic_table(space)
    good = _ZeroForMissing(TableLatencyModel(table=table, space=space, calibrated=False))
    check_latency_model(good, space, np.random.default_rng(5))  # complete: nothing to catch

    def without(key: str) -> _ZeroForMissing:
        lacking = copy.copy(table)
        lacking.entries = {k: v for k, v in table.entries.items() if k != key}
        return _ZeroForMissing(TableLatencyModel(table=lacking, space=space, calibrated=False))

    with pytest.raises(AssertionError, match="raised nothing"):
        check_latency_model(good, space, np.random.default_rng(5), without=without)


def test_check_latency_model_catches_costs_that_do_not_add_up():
    space = small_space()
    model = TableLatencyModel(table=synthetic_table(space), space=space, calibrated=False)

    class Inflated(TableLatencyModel):
        def predict_ms(self, archs: Any) -> np.ndarray:
            return super().predict_ms(archs) * 1.01

    inflated = Inflated(table=model.table, space=space, calibrated=False)
    with pytest.raises(AssertionError, match="does not follow from its unit costs"):
        check_latency_model(inflated, space, np.random.default_rng(6))
