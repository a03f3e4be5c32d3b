"""A table measured at some resolutions of ofa_mbv3 prices the others by interpolation in pixel count."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables import Calibration, Entry, LatencyTable, LatencyTableError, space_params_of
from hwnas.latency.tables.model import TableLatencyModel
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


def test_the_per_resolution_factor_is_fitted_where_networks_were_and_interpolated_between():
    from hwnas.latency.tables.model import resolution_factor
    from hwnas.latency.tables.validate import fit_resolution_factors

    fitted = fit_resolution_factors([132, 132, 132, 140], [1.1, 2.2, 3.6, 5.0], [1.0, 2.0, 3.0, 5.0])
    assert fitted == {132: pytest.approx(1.1), 140: pytest.approx(1.0)}  # the median ratio per resolution
    measured = (128, 160)
    factors = {132: 1.1, 148: 1.21}
    assert resolution_factor(factors, measured, 132) == pytest.approx(1.1)
    assert resolution_factor(factors, measured, 128) == 1.0  # the table's own resolution: its own price
    assert resolution_factor(factors, measured, 130) == pytest.approx(1.1 ** 0.5)  # log-linear toward 128's 1
    assert resolution_factor(factors, measured, 140) == pytest.approx(1.1 ** 0.5 * 1.21 ** 0.5)
    assert resolution_factor(factors, measured, 156) == pytest.approx(1.21 ** (1 / 3))  # a third of the way back to 1
    assert resolution_factor({132: 1.1}, (), 170) == pytest.approx(1.1)  # beyond every known one: the nearest


def test_a_used_correction_scales_interpolated_prices_only_and_an_unused_one_is_ignored():
    table = _table([128, 160])
    full = OFAMobileNetV3Space(resolutions=[128, 144, 160], num_classes=10)
    plain = TableLatencyModel(table=table, space=full)
    arch = full.sample(np.random.default_rng(3))
    at144, at128 = full.at_resolution(arch, 144), full.at_resolution(arch, 128)
    table.validation = {"interpolated": {"measured_resolutions": [128, 160],
                                         "correction": {"factors": {"144": 1.25}, "used": True}}}
    corrected = TableLatencyModel(table=table, space=full)
    assert corrected.resolution_factors == {144: 1.25}
    assert corrected.predict_ms([at144])[0] == pytest.approx(1.25 * plain.predict_ms([at144])[0], rel=1e-12)
    assert corrected.predict_ms([at128])[0] == pytest.approx(plain.predict_ms([at128])[0], rel=1e-12)
    check_latency_model(corrected, full, np.random.default_rng(4))
    assert TableLatencyModel(table=table, space=full, calibrated=False).resolution_factors is None
    table.validation["interpolated"]["correction"]["used"] = False
    assert TableLatencyModel(table=table, space=full).resolution_factors is None
    table.validation["interpolated"]["correction"]["used"] = True
    table.validation["interpolated"]["measured_resolutions"] = [128, 152]  # fitted for another set of anchors
    assert TableLatencyModel(table=table, space=full).resolution_factors is None


def test_validate_fits_the_correction_on_one_half_judges_it_on_the_other_and_says_which_answers(tmp_path, capsys):
    from hwnas.cli.latency import _print_interpolated
    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import validate_interpolation

    table = _table([128, 136])
    table.validation = {"networks": 0}
    path = table.save(tmp_path / "t.json")
    full = OFAMobileNetV3Space(resolutions=[128, 132, 136], num_classes=10)
    backend = BACKENDS.get("onnxruntime")()
    with pytest.raises(ValueError, match="at least 4 networks"):
        validate_interpolation(table, full, backend, n=3, rng=np.random.default_rng(0),
                               protocol=MeasureProtocol(warmup=1, repeats=3))
    f = validate_interpolation(table, full, backend, n=8, rng=np.random.default_rng(0),
                               protocol=MeasureProtocol(warmup=1, repeats=3), out=path)
    held = f["heldout"]
    assert held["train"] == 4 and held["interpolated"]["n"] == held["corrected"]["n"] == 4
    assert set(f["correction"]["factors"]) == {"132"}
    ratios = np.log([m["measured_ms"] / m["predicted_ms"] for m in f["measured"]])
    assert f["correction"]["factors"]["132"] == pytest.approx(float(np.exp(np.median(ratios))))
    assert f["correction"]["used"] == (held["corrected"]["mape_pct"] < held["interpolated"]["mape_pct"])
    reloaded = TableLatencyModel(table=LatencyTable.load(path), space=full)
    assert (reloaded.resolution_factors is not None) == f["correction"]["used"]
    _print_interpolated(f)
    out = capsys.readouterr().out
    assert "per-resolution (held-out)" in out and "132: " in out


def test_a_run_reports_the_figures_at_unmeasured_resolutions_that_answer(tmp_path):
    from types import SimpleNamespace

    from hwnas.experiments.report.trust import describe_trust, latency_trust

    held = {"n": 30, "mape_pct": 6.7, "within_5pct": 0.3, "within_10pct": 0.8, "kendall_tau": 0.93}
    fixed = {**held, "mape_pct": 1.0, "within_10pct": 1.0, "kendall_tau": 0.97}
    table = _table([128, 160])
    table.validation = {"networks": 50, "raw": held, "calibrated_heldout": held, "answers": "calibration",
                        "interpolated": {"n": 60, "mape_pct": 6.5, "within_5pct": 0.4, "within_10pct": 0.83,
                                         "kendall_tau": 0.9, "measured_resolutions": [128, 160],
                                         "heldout": {"interpolated": held, "corrected": fixed, "train": 30},
                                         "correction": {"factors": {"144": 1.05}, "used": True}}}
    path = table.save(tmp_path / "t.json")
    full = EvalContext(space=OFAMobileNetV3Space(resolutions=[128, 144, 160], num_classes=10))
    ev = EVALUATORS.get("latency_table")(context=full, table=str(path))
    lines = describe_trust(latency_trust(SimpleNamespace(evaluators=[ev])))
    assert lines[1] == ("latency_ms@dev: at resolutions other than the measured [128, 160] (corrected per resolution, "
                        "held-out, 30 networks): MAPE 1.0%, 100% within ±10%, Kendall τ 0.97")
    own = EvalContext(space=OFAMobileNetV3Space(resolutions=[128, 160], num_classes=10))  # nothing interpolated
    ev = EVALUATORS.get("latency_table")(context=own, table=str(path))
    assert len(describe_trust(latency_trust(SimpleNamespace(evaluators=[ev])))) == 1
    # a table validated on several halvings reports their mean
    table.validation["mean_heldout"] = {"calibrated": {**held, "mape_pct": 2.5, "train": 25, "splits": 10},
                                        "learned": None}
    path = table.save(tmp_path / "t.json")
    ev = EVALUATORS.get("latency_table")(context=own, table=str(path))
    assert describe_trust(latency_trust(SimpleNamespace(evaluators=[ev]))) == [
        "latency_ms@dev: table validated on 50 networks (calibrated, held-out, mean of 10 halvings): MAPE 2.5%, "
        "80% within ±10%, Kendall τ 0.93"]
