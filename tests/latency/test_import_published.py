"""Published tables become hwnas tables that price architectures exactly as their authors' own tools."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.latency.published import hw_nas_bench_fbnet_table, ofa_table
from hwnas.latency.tables import LatencyTable
from hwnas.search_spaces.fbnet import FBNetSpace
from hwnas.search_spaces.ofa import OFAMobileNetV3Space


def test_note10_table_through_the_hwnas_format_gives_29_97_ms(shared_data, tmp_path):
    space = OFAMobileNetV3Space(width_mult=1.2)
    table = ofa_table(shared_data / "ofa-lut" / "note10" / "224_lookup_table.yaml", space=space, device="note10")
    table.save(tmp_path / "note10.json")
    back = LatencyTable.load(tmp_path / "note10.json", space="ofa_mbv3")
    assert back.context.device == "note10" and back.context.input_resolution == 224
    assert back.protocol["statistic"] == "mean"
    folder = shared_data / "ofa-lut" / "ofa_specialized" / "note10_lat-30ms_top1-78.4_finetune-75"
    arch = space.from_net_config(folder)
    assert round(back.sum_ms(space.layers(arch)), 2) == 29.97


def test_fbnet_table_reproduces_hw_nas_bench_reference_values_exactly(shared_data, tmp_path):
    records = [r for r in json.loads((shared_data / "hw-nas-bench" / "reference_values_from_example_notebook.json")
                                     .read_text())["records"] if r["search_space"] == "fbnet"]
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    checked = 0
    for metric in ("pixel3_latency", "edgegpu_latency", "raspi4_latency"):
        tables = {}
        for setting in ("cifar100", "imagenet"):
            space = FBNetSpace(setting=setting)
            tables[setting] = (space, hw_nas_bench_fbnet_table(lut, space=space, metric=metric))
        for rec in records:
            space, table = tables["cifar100" if rec["dataset"] == "cifar100" else "imagenet"]
            keys = space.layers(space.from_op_indices(rec["arch"]))
            assert table.sum_ms(keys) == rec["metrics"][metric]
            checked += 1
    assert checked == 18


def test_fbnet_import_errors_name_the_metric(shared_data, tmp_path):
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    with pytest.raises(ConfigError, match=r"no metric 'pixel9_latency'; it has .*pixel3_latency"):
        hw_nas_bench_fbnet_table(lut, space=FBNetSpace(), metric="pixel9_latency")
    with pytest.raises(ConfigError, match=r"'average_hw_metric' is not a latency or energy metric \(those are: "
                                          r"edgegpu_energy, edgegpu_latency, eyeriss_energy"):
        bad = tmp_path / "lut.json"
        data = json.loads(lut.read_text())
        data["average_hw_metric"] = {"x": 1.0}
        bad.write_text(json.dumps(data))
        hw_nas_bench_fbnet_table(bad, space=FBNetSpace(), metric="average_hw_metric")


def test_fbnet_energy_tables_reproduce_hw_nas_bench_and_report_energy_mj(shared_data, tmp_path):
    """Energy metrics import as mJ tables: the reference architectures' energies exactly, the evaluator's metric
    energy_mj@<device>, and the latency-only commands refuse them by name."""
    from hwnas.evaluation import EvalContext
    from hwnas.evaluators.latency_table import LatencyTableEvaluator
    from hwnas.latency.tables import LatencyTableError, validate_table

    records = [r for r in json.loads((shared_data / "hw-nas-bench" / "reference_values_from_example_notebook.json")
                                     .read_text())["records"] if r["search_space"] == "fbnet"]
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    checked = 0
    for metric in ("edgegpu_energy", "eyeriss_energy", "fpga_energy"):
        tables = {s: hw_nas_bench_fbnet_table(lut, space=FBNetSpace(setting=s), metric=metric)
                  for s in ("cifar100", "imagenet")}
        for rec in records:
            space = FBNetSpace(setting="cifar100" if rec["dataset"] == "cifar100" else "imagenet")
            table = tables[space.params.setting]
            assert table.unit == "mJ" and table.metric_prefix == "energy_mj"
            assert table.sum_ms(space.layers(space.from_op_indices(rec["arch"]))) == rec["metrics"][metric]
            checked += 1
    assert checked == 18
    space = FBNetSpace(setting="cifar100")
    path = hw_nas_bench_fbnet_table(lut, space=space, metric="edgegpu_energy").save(tmp_path / "energy.json")
    back = LatencyTable.load(path, space="fbnet")
    assert back.unit == "mJ" and back.context.device == "edgegpu"
    ev = LatencyTableEvaluator(context=EvalContext(space=space), table=str(path))
    assert ev.provides == ("energy_mj@edgegpu",)
    rec = next(r for r in records if r["dataset"] == "cifar100")
    [metrics] = ev.evaluate([space.from_op_indices(rec["arch"])])
    assert metrics == {"energy_mj@edgegpu": pytest.approx(rec["metrics"]["edgegpu_energy"])}
    with pytest.raises(LatencyTableError, match=r"energy\.json holds energy_mj .*nas latency validate works on "
                                                r"latency tables only"):
        validate_table(back, space, backend=None, n=20, rng=None, protocol=None)  # type: ignore[arg-type]
    data = json.loads(path.read_text())
    data["unit"] = "W"
    path.write_text(json.dumps(data))
    with pytest.raises(LatencyTableError, match=r"unit 'W' is not one of 'ms', 'mJ'"):
        LatencyTable.load(path)


def test_a_published_table_records_what_it_prices_and_refuses_another_space(shared_data, tmp_path):
    """A once-for-all table holds one input size: imported for the space's default resolutions, it says so (and
    prices an experiment at that resolution); FBNet's default class count is recorded as the number it resolves to;
    a file imported for another space or other parameters is refused at import, naming the gap."""
    from hwnas.evaluation import EvalContext
    from hwnas.evaluators.latency_table import LatencyTableEvaluator
    from hwnas.search_spaces.nb201 import NB201Space

    note10 = shared_data / "ofa-lut" / "note10" / "224_lookup_table.yaml"
    table = ofa_table(note10, space=OFAMobileNetV3Space(width_mult=1.2), device="note10")
    assert table.space_params["resolutions"] == [224]
    path = table.save(tmp_path / "note10.json")
    space = OFAMobileNetV3Space(width_mult=1.2, resolutions=[224])
    ev = LatencyTableEvaluator(context=EvalContext(space=space), table=str(path))
    ev.prepare()
    assert ev.evaluate([space.sample(np.random.default_rng(0))])[0]["latency_ms@note10"] > 0
    with pytest.raises(ConfigError, match=r"prices only 0 of the 96 units of space 'ofa_mbv3' \(width_mult=1.0"):
        ofa_table(note10, space=OFAMobileNetV3Space(), device="note10")
    with pytest.raises(ConfigError, match=r"a table for input size 224, which the space's resolutions \[160\]"):
        ofa_table(note10, space=OFAMobileNetV3Space(width_mult=1.2, resolutions=[160]), device="note10")

    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    pixel3 = hw_nas_bench_fbnet_table(lut, space=FBNetSpace(), metric="pixel3_latency")
    assert pixel3.space_params["num_classes"] == 100
    path = pixel3.save(tmp_path / "pixel3.json")
    for space in (FBNetSpace(num_classes=100), FBNetSpace()):  # spelled out or left to the setting's default
        LatencyTableEvaluator(context=EvalContext(space=space), table=str(path)).prepare()
    with pytest.raises(ConfigError, match=r"num_classes 100 \(table\) vs 10 \(experiment\)"):
        LatencyTableEvaluator(context=EvalContext(space=FBNetSpace(num_classes=10)), table=str(path)).prepare()
    with pytest.raises(ConfigError, match=r"prices only 0 of the 22 units of space 'nb201'"):
        hw_nas_bench_fbnet_table(lut, space=NB201Space(), metric="pixel3_latency")
