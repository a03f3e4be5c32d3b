"""The learned whole-network correction of a latency table: fitted at validation, chosen only when it validates
better, stored as JSON, and used by the table's latency model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwnas.latency.context import DeviceContext
from hwnas.latency.tables import Entry, LatencyTable, LatencyTableError, calibrate_table, sample_distinct
from hwnas.latency.tables.model import TableLatencyModel
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.testing import check_latency_model


def _nb201_table(space: NB201Space) -> LatencyTable:
    ctx = DeviceContext(device="dev", runtime="onnxruntime", runtime_version="1", provider="CPUExecutionProvider",
                        threads=1)
    rng = np.random.default_rng(5)
    entries = {k: Entry(median_ms=float(v), p10_ms=float(v), p90_ms=float(v), count=3)
               for k, v in zip(space.all_layers(), rng.uniform(0.01, 0.2, len(space.all_layers())))}
    return LatencyTable(space="nb201", context=ctx, entries=entries)


def _measured(space, table, archs, *, interaction: float) -> np.ndarray:
    """Whole-network 'measurements' the unit sum cannot explain: cells with a 3x3 conv on the input edge run
    ``interaction`` slower than their units (a fusion a runtime makes, say); a little multiplicative noise."""
    rng = np.random.default_rng(9)
    out = []
    for a in archs:
        ops = space.cell_ops(a)
        slow = 1.0 + interaction * (ops[0] == "nor_conv_3x3")
        out.append(table.sum_ms(space.layers(a)) * slow * rng.normal(1.0, 0.01))
    return np.array(out)


def _validated_nb201() -> tuple[NB201Space, LatencyTable, list]:
    """A table validated (and its correction fitted) on 40 networks with an interaction the sum cannot see."""
    space = NB201Space(merge_isomorphic=False)
    table = _nb201_table(space)
    archs = sample_distinct(space, 40, np.random.default_rng(0))
    calibrate_table(table, space, archs, _measured(space, table, archs, interaction=0.4),
                    rng=np.random.default_rng(1))
    return space, table, archs


def test_a_correction_the_sum_cannot_see_is_learned_chosen_and_used(tmp_path):
    space = NB201Space(merge_isomorphic=False)
    table = _nb201_table(space)
    archs = sample_distinct(space, 80, np.random.default_rng(0))
    y = _measured(space, table, archs, interaction=0.4)
    figures = calibrate_table(table, space, archs, y, rng=np.random.default_rng(1))
    learned, calibrated = figures["learned_heldout"], figures["calibrated_heldout"]
    assert learned["mape_pct"] < calibrated["mape_pct"] / 2, (learned, calibrated)
    assert table.answers == "learned" and figures["answers"] == "learned"
    path = table.save(tmp_path / "t.json")
    back = LatencyTable.load(path)
    assert back.answers == "learned" and back.learned == json.loads(path.read_text())["learned"]
    model = TableLatencyModel(table=back, space=space)
    fresh = sample_distinct(space, 40, np.random.default_rng(2))
    err = np.abs(model.predict_ms(fresh) / _measured(space, table, fresh, interaction=0.4) - 1)
    plain = TableLatencyModel(table=back, space=space, calibrated=False)
    assert model.uses_learned and not plain.uses_learned
    assert err.mean() < 0.05  # networks neither fit nor judged on
    check_latency_model(model, space, np.random.default_rng(3))


def test_where_the_sum_explains_everything_the_calibration_keeps_answering():
    space = NB201Space(merge_isomorphic=False)
    table = _nb201_table(space)
    archs = sample_distinct(space, 40, np.random.default_rng(0))
    y = _measured(space, table, archs, interaction=0.0)
    figures = calibrate_table(table, space, archs, y, rng=np.random.default_rng(1))
    assert figures["calibrated_heldout"]["mape_pct"] < 2.0
    mean = figures["mean_heldout"]
    assert mean["calibrated"]["splits"] == mean["learned"]["splits"] == 10
    assert table.answers == ("learned" if mean["learned"]["mape_pct"] < mean["calibrated"]["mape_pct"]
                             else "calibration")
    few = _nb201_table(space)
    calibrate_table(few, space, archs[:10], y[:10], rng=np.random.default_rng(1))
    assert few.learned is None and few.answers == "calibration"  # 5 training networks: no model is fitted


def test_the_choice_is_judged_on_several_halvings_the_first_of_them_the_reported_one():
    space = NB201Space(merge_isomorphic=False)
    archs = sample_distinct(space, 40, np.random.default_rng(0))
    table = _nb201_table(space)
    y = _measured(space, table, archs, interaction=0.2)
    one = calibrate_table(table, space, archs, y, rng=np.random.default_rng(1), splits=1)
    for kind, single in (("calibrated", one["calibrated_heldout"]), ("learned", one["learned_heldout"])):
        assert one["mean_heldout"][kind] == pytest.approx({**single, "splits": 1})
    many = calibrate_table(_nb201_table(space), space, archs, y, rng=np.random.default_rng(1), splits=6)
    assert many["calibrated_heldout"] == one["calibrated_heldout"]  # the reported halving is the same
    assert many["learned_heldout"] == one["learned_heldout"]
    mean = many["mean_heldout"]["calibrated"]
    assert mean["splits"] == 6 and mean["mape_pct"] != pytest.approx(one["calibrated_heldout"]["mape_pct"])
    assert 0 < mean["mape_pct"] < 50 and 0 <= mean["within_10pct"] <= 1
    with pytest.raises(ValueError, match="splits must be >= 1"):
        calibrate_table(_nb201_table(space), space, archs, y, rng=np.random.default_rng(1), splits=0)


def test_a_broken_learned_model_is_one_clear_error(tmp_path):
    space, table, _ = _validated_nb201()
    path = table.save(tmp_path / "t.json")
    data = json.loads(path.read_text())
    data["answers"] = "learned"
    data["learned"]["model"]["state"]["nodes"]["left"] = "AAAA"
    path.write_text(json.dumps(data))
    with pytest.raises(LatencyTableError, match=r"t\.json learned model"):
        TableLatencyModel(table=LatencyTable.load(path), space=space)
    data["learned"] = None
    path.write_text(json.dumps(data))
    with pytest.raises(LatencyTableError, match="answers 'learned' but the table has no learned model"):
        LatencyTable.load(path)
    data["answers"] = "oracle"
    path.write_text(json.dumps(data))
    with pytest.raises(LatencyTableError, match="answers 'oracle' is not one of"):
        LatencyTable.load(path)


def test_a_table_prices_the_space_whatever_its_latency_neutral_params(tmp_path):
    """merge_isomorphic changes which cells count as one, not any network: a table profiled with the default
    (None) prices an experiment's space where a hardware objective resolved it to False; a parameter that does
    change the networks is still refused."""
    from hwnas.errors import ConfigError
    from hwnas.evaluation import EvalContext
    from hwnas.evaluators.latency_table import LatencyTableEvaluator
    from hwnas.latency.tables import space_params_of

    small = {"resolution": 8, "channels": 8, "cells_per_stage": 1}
    table = _nb201_table(NB201Space(**small))
    table.space_params = space_params_of(NB201Space(**small))
    assert table.space_params["merge_isomorphic"] is None
    path = table.save(tmp_path / "t.json")
    ev = LatencyTableEvaluator(context=EvalContext(space=NB201Space(**small, merge_isomorphic=False)), table=str(path),
                               calibrated=False)
    ev.prepare()
    assert ev.evaluate([ev.space.sample(np.random.default_rng(0))])[0][ev.provides[0]] > 0
    other = LatencyTableEvaluator(context=EvalContext(space=NB201Space(**{**small, "channels": 16})),
                                  table=str(path), calibrated=False)
    with pytest.raises(ConfigError, match="channels 8"):
        other.prepare()


def test_the_correction_sees_unit_counts_and_tables_fitted_without_them_still_price(tmp_path):
    from hwnas.latency.tables import learned
    from hwnas.predictors.gbt import GBTPredictor

    space, table, archs = _validated_nb201()
    assert table.learned["features"] == learned.FEATURES
    assert table.learned["unit_features"]["units"] == sorted(space.all_layers())
    width = len(space.encode(archs[0])) + 2 + len(table.learned["unit_features"]["units"]) + len(
        table.learned["unit_features"]["tokens"])
    assert learned.load_model(table).model.n_features == width  # encoding, log sum, unit count, the counts

    # a table validated before the unit counts: its model saw the encoding, log sum and unit count only
    keys = [space.layers(a) for a in archs]
    sums, units = np.array([table.sum_ms(k) for k in keys]), np.array([len(k) for k in keys])
    X = learned.features(space, archs, sums, units)
    old = GBTPredictor(rng=np.random.default_rng(0), **learned.GBT_PARAMS).fit(X, np.linspace(-0.1, 0.1, len(X)))
    data = json.loads(table.save(tmp_path / "t.json").read_text())
    data["answers"] = "learned"
    data["learned"] = {"kind": "gbt", "features": learned.LEGACY_FEATURES, "model": old.to_dict()}
    (tmp_path / "old.json").write_text(json.dumps(data))
    model = TableLatencyModel(table=LatencyTable.load(tmp_path / "old.json"), space=space)
    base = np.array([table.calibration.apply(s, u) for s, u in zip(sums, units)])
    np.testing.assert_allclose(model.predict_ms(archs), base * np.exp(old.predict(X)))
    data["learned"]["features"] = "encode+magic"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(LatencyTableError, match=r"bad\.json learned model: features 'encode\+magic' are not known"):
        TableLatencyModel(table=LatencyTable.load(tmp_path / "bad.json"), space=space)
