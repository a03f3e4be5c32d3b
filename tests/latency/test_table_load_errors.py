"""A hand-corrupted latency table is one clear error naming the file and the field, never a traceback; every
shape the code writes (validated, calibrated, learned, interpolated, kit-imported, published, older minimal
files) still loads.

Real files in ``tmp_path``; the validated table is made by the project's own calibration (two halvings, so
that it takes a few seconds).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables import (
    Entry,
    LatencyTable,
    LatencyTableError,
    accuracy_figures,
    calibrate_table,
    sample_distinct,
)
from hwnas.search_spaces.nb201 import NB201Space

Change = Callable[[dict[str, Any]], None]


def _nb201_table(space: NB201Space) -> LatencyTable:
    ctx = DeviceContext(device="dev", runtime="onnxruntime", runtime_version="1", provider="CPUExecutionProvider",
                        threads=1)
    rng = np.random.default_rng(5)
    entries = {k: Entry(median_ms=float(v), p10_ms=float(v), p90_ms=float(v), count=3, rounds_ms=(float(v),))
               for k, v in zip(space.all_layers(), rng.uniform(0.01, 0.2, len(space.all_layers())))}
    return LatencyTable(space="nb201", context=ctx, entries=entries, protocol={"repeats": 3, "statistic": "median"},
                        provenance={"tool": "test", "created": "2026-01-01T00:00:00+00:00"})


@pytest.fixture(scope="module")
def validated() -> dict[str, Any]:
    """The JSON of a table with everything a table can hold: validation (with the learned correction's figures
    and an interpolation block), calibration, learned model, failed units and a board's whole networks."""
    space = NB201Space(merge_isomorphic=False)
    table = _nb201_table(space)
    archs = sample_distinct(space, 16, np.random.default_rng(0))
    rng = np.random.default_rng(9)
    measured = [table.sum_ms(space.layers(a)) * rng.normal(1.1, 0.02) for a in archs]
    calibrate_table(table, space, archs, measured, rng=np.random.default_rng(1), splits=2, how="test")
    assert table.learned is not None and table.calibration is not None
    table.failed = {"nb201:broken": "RuntimeError: no"}
    table.provenance["networks"] = [{"arch_id": f"n{i}", "arch": a.to_dict(), "layers": space.layers(a),
                                     "median_ms": float(m), "rounds_ms": [float(m)]}
                                    for i, (a, m) in enumerate(zip(archs[:3], measured))]
    figures = accuracy_figures([1.0, 2.0, 3.0], [1.1, 1.9, 3.2])
    assert table.validation is not None
    table.validation["interpolated"] = {
        **figures, "measured_resolutions": [8, 16], "resolutions": [12], "created": "2026-01-01T00:00:00+00:00",
        "how": "test", "heldout": {"interpolated": figures, "corrected": figures, "train": 2},
        "correction": {"kind": "factor per resolution", "factors": {"12": 1.05}, "used": True},
        "measured": [{"arch": archs[0].to_dict(), "measured_ms": 1.0, "predicted_ms": 1.1}]}
    return table.to_dict()


def _write(tmp_path: Path, data: dict[str, Any], name: str = "T.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _first_key(d: dict[str, Any]) -> str:
    return sorted(d["entries"])[0]


def _set(field: str, value: Any) -> Change:
    return lambda d: d.__setitem__(field, value)


def _entry(value: Any) -> Change:
    return lambda d: d["entries"].__setitem__(_first_key(d), value)


def _entry_field(field: str, value: Any) -> Change:
    return lambda d: d["entries"][_first_key(d)].__setitem__(field, value)


def _context(field: str, value: Any) -> Change:
    return lambda d: d["context"].__setitem__(field, value)


def _validation(change: Callable[[dict[str, Any]], None]) -> Change:
    return lambda d: change(d["validation"])


# -- the corruptions QA found: each one clear line through the CLI ------------------------------------------
QA = {
    "validation": (_set("validation", "x"), 'field "validation" must be an object or null, got a string'),
    "protocol": (_set("protocol", 5), 'field "protocol" must be an object or null, got a number'),
    "failed": (_set("failed", 3), 'field "failed" must be an object or null, got a number'),
    "provenance": (_set("provenance", "x"), 'field "provenance" must be an object or null, got a string'),
    "context": (_set("context", None), 'field "context" must be an object, got null'),
    "entries": (_set("entries", [1, 2]), 'field "entries" must be an object (unit key -> timing), got an array'),
    "entry": (_entry(None), "field \"entries\": entry '{key}' must be an object with median_ms, got null"),
}


@pytest.mark.parametrize("name", list(QA))
def test_qa_corruptions_are_one_line_naming_the_file_and_field(name, validated, tmp_path, capsys):
    change, expected = QA[name]
    data = copy.deepcopy(validated)
    change(data)
    path = _write(tmp_path, data)
    message = f"{path}: {expected.format(key=_first_key(validated))}"
    with pytest.raises(LatencyTableError) as info:
        LatencyTable.load(path)
    assert str(info.value) == message
    capsys.readouterr()
    assert main(["latency", "show", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err == f"error: {message}\n" and "Traceback" not in out + err


# -- every other field, nested ones included --------------------------------------------------------------
MORE: dict[str, tuple[Change, str]] = {
    "version true": (_set("version", True), "table format version True is not supported"),
    "space": (_set("space", 3), 'field "space" must be a non-empty string, got 3'),
    "space_params": (_set("space_params", [1]), 'field "space_params" must be an object or null, got an array'),
    "unit": (_set("unit", ["ms"]), r"unit \['ms'\] is not one of 'ms', 'mJ'"),
    "answers": (_set("answers", 5), "answers 5 is not one of 'sum', 'calibration', 'learned'"),
    "learned": (_set("learned", "x"), 'field "learned" must be an object or null, got a string'),
    "calibration": (_set("calibration", "x"), 'field "calibration" must be an object, got a string'),
    "calibration coefficient": (lambda d: d["calibration"].__setitem__("c_ms", "0.1"),
                                "field \"calibration\" coefficients must be finite numbers, got c_ms '0.1'"),
    "calibration missing": (lambda d: d["calibration"].pop("a_per_sum"), 'field "calibration" has no a_per_sum'),
    "context field": (_context("threads", "1"), "field \"context.threads\" must be an integer >= 0 or null, got '1'"),
    "context device": (_context("device", ""), "field \"context.device\" must be a non-empty string, got ''"),
    "context batch": (_context("batch_size", 0), 'field "context.batch_size" must be an integer >= 1, got 0'),
    "context unknown": (_context("colour", "red"), "unknown device context field\\(s\\): colour"),
    "entry median string": (_entry_field("median_ms", "1.0"),
                            "entry '{key}': median_ms must be a finite non-negative number, got '1.0'"),
    "entry median missing": (lambda d: d["entries"][_first_key(d)].pop("median_ms"),
                             "entry '{key}': median_ms is missing"),
    "entry count": (_entry_field("count", True), "entry '{key}': count must be a non-negative integer, got true"),
    "entry rounds": (_entry_field("rounds_ms", "x"), "entry '{key}': rounds_ms must be an array of finite numbers"),
    "entry p90": (_entry_field("p90_ms", None), "entry '{key}': p90_ms must be a finite number, got null"),
    "failed value": (lambda d: d["failed"].__setitem__("u", 5), "field \"failed\" must map each unit key to its "
                                                                 "error \\(a string\\), got a number for 'u'"),
    "networks": (lambda d: d["provenance"].__setitem__("networks", "x"),
                 'field "provenance.networks" must be an array or null, got a string'),
    "network": (lambda d: d["provenance"]["networks"].__setitem__(1, None),
                r'field "provenance.networks\[1\]" must be an object, got null'),
    "network median": (lambda d: d["provenance"]["networks"][0].__setitem__("median_ms", -2.0),
                       r'field "provenance.networks\[0\].median_ms" must be a finite positive number, got -2.0'),
    "network layers": (lambda d: d["provenance"]["networks"][0].__setitem__("layers", [1]),
                       r'field "provenance.networks\[0\].layers" must be an array of unit keys'),
    "raw figures": (_validation(lambda v: v.__setitem__("raw", [])),
                    'field "validation.raw" must be an object or null, got an array'),
    "splits": (_validation(lambda v: v["mean_heldout"]["calibrated"].__setitem__("splits", 0)),
               'field "validation.mean_heldout.calibrated.splits" must be an integer >= 1, got 0'),
    "measured_ms": (_validation(lambda v: v["measured"][2].__setitem__("measured_ms", None)),
                    r'field "validation.measured\[2\].measured_ms" must be a finite number, got null'),
    "a figure": (_validation(lambda v: v["raw"].__setitem__("mape_pct", "x")),
                 "field \"validation.raw.mape_pct\" must be a number, got 'x'"),
    "mean held-out": (_validation(lambda v: v.__setitem__("mean_heldout", 3)),
                      'field "validation.mean_heldout" must be an object or null, got a number'),
    "measured": (_validation(lambda v: v["measured"].__setitem__(0, None)),
                 r'field "validation.measured\[0\]" must be an object, got null'),
    "interpolated": (_validation(lambda v: v["interpolated"]["correction"].__setitem__("factors", {"abc": 1.0})),
                     "field \"validation.interpolated.correction.factors\" must be keyed by resolution, got 'abc'"),
    "interpolated used": (_validation(lambda v: v["interpolated"]["correction"].__setitem__("used", "yes")),
                          "field \"validation.interpolated.correction.used\" must be true or false, got 'yes'"),
}


@pytest.mark.parametrize("name", list(MORE))
def test_every_field_is_checked_and_named(name, validated, tmp_path):
    change, expected = MORE[name]
    data = copy.deepcopy(validated)
    change(data)
    path = _write(tmp_path, data)
    with pytest.raises(LatencyTableError) as info:
        LatencyTable.load(path)
    assert str(info.value).startswith(f"{path}: ")
    assert re.search(expected.format(key=re.escape(_first_key(validated))), str(info.value)), str(info.value)


# -- what is valid still loads ----------------------------------------------------------------------------
def test_a_table_with_everything_loads_and_round_trips(validated, tmp_path):
    path = _write(tmp_path, validated)
    table = LatencyTable.load(path, space="nb201")
    assert table.to_dict() == validated
    assert table.validation and table.validation["interpolated"]["correction"]["used"] is True
    assert table.learned is not None and table.calibration is not None and len(table.provenance["networks"]) == 3
    # saved by the code and read again: the same bytes
    again = table.save(tmp_path / "again.json")
    assert LatencyTable.load(again).to_dict() == validated


def test_older_and_smaller_shapes_still_load(tmp_path):
    """A version-1 file with only the required fields and entries of a median alone; null for every optional
    field; an empty validation; a published energy table."""
    minimal = {"format": "hwnas.latency-table", "version": 1, "space": "nb201",
               "context": {"device": "dev", "runtime": "onnxruntime"}, "entries": {"a": {"median_ms": 0.5}}}
    table = LatencyTable.load(_write(tmp_path, minimal, "old.json"))
    assert table.entries["a"] == Entry(median_ms=0.5, p10_ms=0.5, p90_ms=0.5, count=1)
    assert (table.unit, table.answers, table.validation, table.calibration) == ("ms", "sum", None, None)
    nulls = {**minimal, "protocol": None, "provenance": None, "space_params": None, "failed": None,
             "validation": None, "calibration": None, "learned": None}
    assert LatencyTable.load(_write(tmp_path, nulls, "nulls.json")).failed == {}
    assert LatencyTable.load(_write(tmp_path, {**minimal, "validation": {}}, "empty.json")).validation == {}
    # validation blocks may be partial (only judged for interpolation, or by an older version): what is there is
    # checked, what is not is not required
    for i, partial in enumerate([{"networks": 0}, {"interpolated": {"measured_resolutions": [128, 160],
                                                                    "correction": {"factors": {"144": 1.25},
                                                                                   "used": True}}}]):
        path = _write(tmp_path, {**minimal, "validation": partial}, f"partial{i}.json")
        assert LatencyTable.load(path).validation == partial
    published = {**minimal, "unit": "mJ", "context": {"device": "edgegpu", "runtime": "published",
                                                      "runtime_version": "HW-NAS-Bench", "provider": None,
                                                      "precision": "fp32", "batch_size": 1, "threads": None,
                                                      "input_resolution": 32, "power_mode": None},
                 "entries": {"k3_e1": {"median_ms": 9.0, "p10_ms": 9.0, "p90_ms": 9.0, "iqr_ms": 0.0, "count": 1}},
                 "protocol": {"mode": "published"}, "provenance": {"source": "lut.json"}}
    back = LatencyTable.load(_write(tmp_path, published, "published.json"))
    assert back.unit == "mJ" and back.entries["k3_e1"].median_ms == 9.0


def test_show_prints_a_partial_validation_without_failing(tmp_path: Path, capsys: Any) -> None:
    """Validations that hold only some of their blocks (too few networks for figures, an interpolation block whose
    correction is missing) still show: what is there, and "incomplete" for the rest."""
    table = _nb201_table(NB201Space(merge_isomorphic=False))
    table.validation = {"how": "test", "networks": 0, "calibrated_heldout": {"n": 3},
                        "interpolated": {"measured_resolutions": [32], "resolutions": [48]}}
    path = table.save(tmp_path / "partial.json")
    assert main(["latency", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "calibrated (held-out)  (incomplete figures)" in out and "interpolated: (incomplete figures)" in out


def test_a_folder_or_another_hwnas_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    with pytest.raises(LatencyTableError, match=r"is a folder; give the table's \.json file"):
        LatencyTable.load(tmp_path)
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"format": "hwnas.latency-model", "kind": "fewshot"}))
    with pytest.raises(LatencyTableError, match=r"not an hwnas latency table .*: it is a latency model \(nas latency "
                                                r"fewshot"):
        LatencyTable.load(model)
