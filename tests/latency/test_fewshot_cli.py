"""A new device from a few measured networks (nas latency fewshot) and the latency_model evaluator, on HW-NAS-Bench's
FBNet devices: one device's table is held out and plays the new device."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from hwnas.cli import main
from hwnas.evaluation import EVALUATORS, EvalContext
from hwnas.latency.published import hw_nas_bench_fbnet_table
from hwnas.latency.tables.model import TableLatencyModel
from hwnas.search_spaces.fbnet import FBNetSpace

KNOWN = ("edgegpu_latency", "raspi4_latency", "pixel3_latency", "fpga_latency")
NEW = "eyeriss_latency"


@pytest.fixture(scope="module")
def tables(shared_data, tmp_path_factory):
    space = FBNetSpace()
    folder = tmp_path_factory.mktemp("tables")
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    out = {}
    for metric in (*KNOWN, NEW):
        out[metric] = hw_nas_bench_fbnet_table(lut, space=space, metric=metric).save(folder / f"{metric}.json")
    return space, out


def _measured(space, table_path, n, seed):
    from hwnas.latency.tables import LatencyTable

    model = TableLatencyModel(table=LatencyTable.load(table_path), space=space)
    archs = [space.sample(np.random.default_rng(seed + i)) for i in range(n)]
    return archs, model.predict_ms(archs)


def test_fewshot_fits_a_new_device_that_the_evaluator_then_prices(tables, tmp_path, capsys):
    space, paths = tables
    archs, ms = _measured(space, paths[NEW], 20, seed=100)
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps([{"arch": a.to_dict(), "latency_ms": float(m)} for a, m in zip(archs, ms)]))
    out = tmp_path / "eyeriss.json"
    args = ["latency", "fewshot", "--space", "fbnet", "--measured", str(measured), "--device", "eyeriss",
            "--out", str(out), *(x for m in KNOWN for x in ("--source", str(paths[m])))]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "latency_ms@eyeriss" in printed and "leave-one-out" in printed
    data = json.loads(out.read_text())
    assert data["measured"] == 20 and data["validation"]["loo"]["n"] == 20
    ev = EVALUATORS.get("latency_model")(context=EvalContext(space=space), model=str(out))
    ev.prepare()
    assert ev.provides == ("latency_ms@eyeriss",)
    fresh, truth = _measured(space, paths[NEW], 200, seed=5000)  # networks the model never saw
    pred = [m["latency_ms@eyeriss"] for m in ev.evaluate(fresh)]
    assert spearmanr(pred, truth).statistic > 0.8
    assert main(args) != 0 and "exists" in capsys.readouterr().err  # never overwritten without --force


def test_fewshot_bad_inputs_are_one_clear_error_each(tables, tmp_path, capsys, shared_data):
    space, paths = tables
    archs, ms = _measured(space, paths[NEW], 4, seed=7)
    few = tmp_path / "few.json"
    few.write_text(json.dumps({"measurements": [{"arch": a.to_dict(), "latency_ms": float(m)}
                                                for a, m in zip(archs, ms)]}))
    base = ["latency", "fewshot", "--space", "fbnet", "--device", "x", "--source", str(paths["pixel3_latency"])]
    assert main([*base, "--measured", str(few), "--out", str(tmp_path / "a.json")]) != 0
    assert "at least 5 distinct measured networks, got 4: measure 1 more" in capsys.readouterr().err
    from hwnas.search_spaces.nb201 import NB201Space

    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"arch": NB201Space().sample(np.random.default_rng(i)).to_dict(), "latency_ms": 1.0}
                                 for i in range(6)]))
    assert main([*base, "--measured", str(other), "--out", str(tmp_path / "b.json")]) != 0
    assert "entry 0: an architecture of space 'nb201', not 'fbnet'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"arch": archs[0].to_dict(), "latency_ms": -2}]))
    assert main([*base, "--measured", str(bad), "--out", str(tmp_path / "c.json")]) != 0
    assert "latency -2 is not a finite positive number" in capsys.readouterr().err
    archs, ms = _measured(space, paths[NEW], 8, seed=7)
    few.write_text(json.dumps([{"arch": a.to_dict(), "latency_ms": float(m)} for a, m in zip(archs, ms)]))
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    energy = hw_nas_bench_fbnet_table(lut, space=space, metric="edgegpu_energy").save(tmp_path / "energy.json")
    assert main(["latency", "fewshot", "--space", "fbnet", "--device", "x", "--source", str(energy), "--measured",
                 str(few), "--out", str(tmp_path / "d.json")]) != 0
    assert "the table holds energy_mj (mJ), not latency" in capsys.readouterr().err
    results = tmp_path / "results.json"  # a board's raw results, not yet imported
    results.write_text(json.dumps({"format": "hwnas.latency-kit-results", "version": 3, "kit_id": "k", "units": {},
                                   "networks": {"a": [1.0]}}))
    assert main([*base, "--measured", str(results), "--out", str(tmp_path / "e.json")]) != 0
    assert "the results of a board kit (run_kit.py); import them first" in capsys.readouterr().err
    from hwnas.latency.published import ofa_table
    from hwnas.search_spaces.ofa import OFAMobileNetV3Space

    note10 = ofa_table(shared_data / "ofa-lut" / "note10" / "224_lookup_table.yaml",
                       space=OFAMobileNetV3Space(width_mult=1.2), device="note10").save(tmp_path / "note10.json")
    assert main([*base, "--source", str(note10), "--measured", str(few), "--out", str(tmp_path / "f.json")]) != 0
    err = capsys.readouterr().err  # a known device of another space: named, with the space it is for
    assert err.count("error:") == 1 and f"{note10} is for space 'ofa_mbv3', not 'fbnet'" in err
    assert not any((tmp_path / n).exists() for n in ("a.json", "b.json", "c.json", "d.json", "f.json"))


def test_a_device_unlike_every_known_one_is_learnt_from_its_own_measurements(tables, tmp_path, capsys):
    """HW-NAS-Bench's edge GPU ranks FBNet networks unlike the other four devices (a mix of them explains
    it with rho ~0.08); with 50 measurements the unit-count model of its own samples has to carry it."""
    space, paths = tables
    new, known = "edgegpu_latency", ("raspi4_latency", "pixel3_latency", "fpga_latency", NEW)
    archs, ms = _measured(space, paths[new], 50, seed=300)
    measured = tmp_path / "edgegpu_measured.json"
    measured.write_text(json.dumps([{"arch": a.to_dict(), "latency_ms": float(m)} for a, m in zip(archs, ms)]))
    out = tmp_path / "edgegpu.json"
    assert main(["latency", "fewshot", "--space", "fbnet", "--measured", str(measured), "--device", "edgegpu",
                 "--out", str(out), *(x for m in known for x in ("--source", str(paths[m])))]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["version"] == 3 and data["features"]["kind"] == "encoding+units+tokens"
    # the mix explains little of it: its own measurements carry it, through the feature kernel of the evidence
    # correction or the own model blended in
    assert data["correction"]["evidence"]["features"] > 0 or data["blend"]["own"] > 0.5
    assert "corrected from its own 50 measurements where their marginal likelihood says so: " in printed
    assert "the networks' features" in printed
    ev = EVALUATORS.get("latency_model")(context=EvalContext(space=space), model=str(out))
    ev.prepare()
    fresh, truth = _measured(space, paths[new], 300, seed=6000)
    pred = np.array([m["latency_ms@edgegpu"] for m in ev.evaluate(fresh)])
    assert spearmanr(pred, truth).statistic > 0.8
    assert np.mean(np.abs(pred - truth) / truth) < 0.05


def test_version_1_model_files_still_price_with_the_space_encoding(tables):
    from hwnas.latency.fewshot import FewShotLatencyModel
    from hwnas.latency.predictors import FewShotLatencyPredictor

    space, paths = tables
    archs, _ = _measured(space, paths[NEW], 300, seed=9)
    X = np.stack([space.encode(a) for a in archs])
    sources = np.column_stack([_measured(space, paths[m], 300, seed=9)[1] for m in KNOWN])
    _, truth = _measured(space, paths[NEW], 300, seed=9)
    predictor = FewShotLatencyPredictor(own=False).fit_sources(X[:200], sources[:200]).fit(X[:20], truth[:20])
    data = {"format": "hwnas.latency-model", "version": 1, "kind": "fewshot", "space": "fbnet", "device": "eyeriss",
            "predictor": predictor.to_dict()}  # what hwnas wrote before the unit features (no "features")
    model = FewShotLatencyModel(data)
    assert model.features is None
    assert np.array_equal(model.predict_ms(space, archs[200:]), predictor.predict(X[200:]))
