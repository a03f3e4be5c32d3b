"""Published tables become hwnas tables that price architectures exactly as their authors' own tools."""

from __future__ import annotations

import json

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


def test_fbnet_import_errors_name_the_metric(shared_data):
    lut = shared_data / "hw-nas-bench" / "fbnet_lut.json"
    with pytest.raises(ConfigError, match=r"no metric 'pixel9_latency'; it has .*pixel3_latency"):
        hw_nas_bench_fbnet_table(lut, space=FBNetSpace(), metric="pixel9_latency")
    with pytest.raises(ConfigError, match="not a latency metric"):
        hw_nas_bench_fbnet_table(lut, space=FBNetSpace(), metric="edgegpu_energy")
