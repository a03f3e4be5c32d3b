"""A table measured at some resolutions of ofa_mbv3 prices the others by interpolation in pixel count."""

from __future__ import annotations

import numpy as np
import pytest

import hwnas.latency.evaluator  # noqa: F401  (registers latency_table)
from hwnas.errors import ConfigError
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.latency.context import DeviceContext
from hwnas.latency.model import TableLatencyModel
from hwnas.latency.tables import Calibration, Entry, LatencyTable, LatencyTableError, space_params_of
from hwnas.search_spaces.ofa import OFAMobileNetV3Space
from hwnas.testing import check_latency_model

FULL = [128, 136, 144, 152, 160, 168, 176]


def _table(measured: list[int]) -> LatencyTable:
    """Every unit of the measured space priced by its input pixels and channels (any positive numbers do)."""
    space = OFAMobileNetV3Space(resolutions=measured, num_classes=10)
    ctx = DeviceContext(device="dev", runtime="onnxruntime", runtime_version="1", provider="CPUExecutionProvider",
                        threads=1)
    entries = {}
    for key in space.all_layers():
        _, shape = space.build_layer(key)
        v = 1e-5 * float(np.prod(shape)) + 0.01
        entries[key] = Entry(median_ms=v, p10_ms=v, p90_ms=v, count=3)
    t = LatencyTable(space="ofa_mbv3", context=ctx, entries=entries, space_params=space_params_of(space))
    t.calibration, t.answers = Calibration(a=1.1, b=0.002, c=0.05), "calibration"
    return t


def test_unmeasured_resolutions_interpolate_between_the_measured_ones():
    table = _table([128, 160, 176])
    full = OFAMobileNetV3Space(resolutions=FULL, num_classes=10)
    model = TableLatencyModel(table=table, space=full)
    assert model.measured_resolutions == (128, 160, 176)
    arch = full.at_resolution(full.sample(np.random.default_rng(0)), 144)
    at = {r: float(model.predict_ms([full.at_resolution(arch, r)])[0]) for r in (128, 144, 160, 168)}
    w = (144**2 - 128**2) / (160**2 - 128**2)
    assert at[144] == pytest.approx((1 - w) * at[128] + w * at[160], rel=1e-12)
    assert at[128] < at[144] < at[160] < at[168]
    direct = TableLatencyModel(table=table, space=OFAMobileNetV3Space(resolutions=[128, 160, 176], num_classes=10))
    assert at[160] == pytest.approx(float(direct.predict_ms([full.at_resolution(arch, 160)])[0]), rel=1e-12)
    check_latency_model(model, full, np.random.default_rng(1))  # unit costs interpolate the same way
    check_latency_model(direct, direct.space, np.random.default_rng(1))  # and a missing unit is named


def test_resolutions_outside_the_measured_range_are_refused_by_name(tmp_path):
    table = _table([136, 160])
    full = OFAMobileNetV3Space(resolutions=FULL, num_classes=10)
    with pytest.raises(LatencyTableError, match=r"\[128, 168, 176\] lie outside them"):
        TableLatencyModel(table=table, space=full)
    path = table.save(tmp_path / "t.json")
    ctx = EvalContext(space=full)
    with pytest.raises(ConfigError, match="cannot be interpolated"):
        EVALUATORS.get("latency_table")(context=ctx, table=str(path))
    ok = _table([128, 176]).save(tmp_path / "ok.json")
    ev = EVALUATORS.get("latency_table")(context=ctx, table=str(ok))
    ev.prepare()  # the resolutions differ, every other parameter matches: accepted
    arch = full.sample(np.random.default_rng(2))
    assert ev.evaluate([arch])[0]["latency_ms@dev"] > 0
    other = _table([128, 176])
    other.space_params["num_classes"] = 1000
    with pytest.raises(ConfigError, match="num_classes"):
        EVALUATORS.get("latency_table")(context=ctx, table=str(other.save(tmp_path / "other.json"))).prepare()


def test_validate_judges_the_interpolation_at_unmeasured_resolutions_only(tmp_path):
    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import validate_interpolation

    table = _table([128, 136])
    path = table.save(tmp_path / "t.json")
    full = OFAMobileNetV3Space(resolutions=[128, 132, 136], num_classes=10)
    backend = BACKENDS.get("onnxruntime")()
    fast = MeasureProtocol(warmup=1, repeats=3)
    with pytest.raises(ValueError, match="not validated at its own resolutions"):
        validate_interpolation(table, full, backend, n=6, rng=np.random.default_rng(0), protocol=fast)
    table.validation = {"networks": 0}
    figures = validate_interpolation(table, full, backend, n=6,
                                     rng=np.random.default_rng(0), protocol=fast, out=path)
    assert figures["resolutions"] == [132] and figures["n"] == 6 and figures["measured_resolutions"] == [128, 136]
    assert LatencyTable.load(path).validation["interpolated"]["n"] == 6
    with pytest.raises(ValueError, match="nothing is interpolated"):
        validate_interpolation(table, OFAMobileNetV3Space(resolutions=[128, 136], num_classes=10), backend, n=6,
                               rng=np.random.default_rng(0), protocol=fast)
