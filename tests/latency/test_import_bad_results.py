"""``nas latency import`` of a bad or inconsistent ``results.json``: one clear line naming the file and the field
(the unit or network, the setting and both values), no traceback, and nothing at ``--out``, so that the same
command succeeds once the results are fixed.

A real kit made by the project's kit maker; the board's results are written here from its manifest (timings of
known size), so that no board run is needed.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.errors import OutputExists
from hwnas.latency.kit.make import Kit, KitError, make_kit
from hwnas.latency.kit.results import import_results, read_results
from hwnas.latency.kit.run_kit import RESULTS_FORMAT, RESULTS_VERSION
from hwnas.latency.measure import MeasureProtocol
from hwnas.latency.tables import MIN_NETWORKS, LatencyTable
from hwnas.search_spaces.mbv3 import MobileNetV3Space

SPACE_PARAMS: dict[str, Any] = dict(
    resolution=8,
    stages=[{"channels": 8, "depths": [1, 2]}, {"channels": 16, "stride": 2, "depths": [1, 2]}],
    kernels=[3, 5],
    expand_ratios=[3],
)
Change = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    return make_kit(MobileNetV3Space(**SPACE_PARAMS), device="test-cpu", out=tmp_path_factory.mktemp("kit"),
                    threads=1, protocol=MeasureProtocol(warmup=1, repeats=3, min_time_s=0.0),
                    validate_archs=MIN_NETWORKS, rng=np.random.default_rng(0))


def _timing(ms: float) -> dict[str, Any]:
    return {"median_ms": ms, "p10_ms": 0.95 * ms, "p90_ms": 1.05 * ms, "iqr_ms": 0.05 * ms, "min_ms": 0.9 * ms,
            "count": 3}


def _results(kit: Kit) -> dict[str, Any]:
    """What run_kit.py writes for the kit (version 3: a list of timings per unit and per network, one per round):
    each network timed a little above the sum of its units."""
    m = kit.manifest
    unit_ms = {u["key"]: 0.02 * (i + 1) for i, u in enumerate(m["units"])}
    networks = {n["arch_id"]: [_timing((1.2 + 0.05 * math.sin(i)) * sum(unit_ms[k] for k in n["layers"]) + 0.01)]
                for i, n in enumerate(m["networks"])}
    assert len(networks) >= MIN_NETWORKS
    return {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, "kit_id": kit.kit_id, "runner_version": "test",
            "space": m["space"], "protocol": copy.deepcopy(m["protocol"]), "started": "2026-01-01T00:00:00+00:00",
            "finished": "2026-01-01T00:01:00+00:00",
            "settings": {"runtime": "onnxruntime", "provider": "CPUExecutionProvider", "threads": 1,
                         "precision": "fp32"},
            "board": {"onnxruntime": "1.0", "cpu": "test cpu", "hostname": "board"},
            "units": {k: [_timing(v)] for k, v in unit_ms.items()}, "carriers": {}, "failed": {},
            "networks": networks, "failed_networks": {}}


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def _import(capsys: pytest.CaptureFixture[str], results: Path, kit: Kit, out: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["latency", "import", str(results), "--kit", str(kit.zip_path), "--out", str(out)])
    out_text, err = capsys.readouterr()
    return code, out_text, err


def _first_network(kit: Kit) -> str:
    return str(kit.manifest["networks"][0]["arch_id"])


def _network_median(value: Any) -> Change:
    return lambda d: d["networks"][_first_network_of(d)][0].__setitem__("median_ms", value)


def _first_network_of(d: dict[str, Any]) -> str:
    return next(iter(d["networks"]))


# -- a whole network's latency: positive and finite, named; nothing written, the rerun not refused ----------------
@pytest.mark.parametrize("value, shown", [(-2.0, "-2.0"), (0, "0"), (float("nan"), "nan"), ("3", "'3'")],
                         ids=["negative", "zero", "nan", "string"])
def test_a_bad_network_latency_is_one_line_and_writes_nothing(value, shown, kit, tmp_path, capsys):
    data = _results(kit)
    arch_id = _first_network_of(data)
    _network_median(value)(data)
    results = _write(tmp_path / "results.json", data)
    out = tmp_path / "t.json"
    code, _, err = _import(capsys, results, kit, out)
    assert code == 2 and "Traceback" not in err
    assert err == (f"error: kit results {results}: field \"networks\": network '{arch_id}', round 1: median_ms must "
                   f"be a finite positive number (ms), got {shown}\n")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
    # fixed, the same command imports and calibrates (the refused import left nothing that would be "replaced")
    _write(results, _results(kit))
    code, stdout, err = _import(capsys, results, kit, out)
    assert code == 0, err
    assert "calibrated (held-out)" in stdout and LatencyTable.load(out).calibration is not None


# -- versions, settings and types --------------------------------------------------------------------------
def _set(field: str, value: Any) -> Change:
    return lambda d: d.__setitem__(field, value)


def _setting(field: str, value: Any) -> Change:
    return lambda d: d["settings"].__setitem__(field, value)


def _unit(value: Any) -> Change:
    return lambda d: d["units"].__setitem__(next(iter(d["units"])), value)


BAD: dict[str, tuple[Change, str]] = {
    "unknown version": (_set("version", 9),
                        "results version 9 is not one this hwnas reads (it reads versions 1, 2, 3)"),
    "version string": (_set("version", "3"), "results version '3' is not one this hwnas reads"),
    "precision": (_setting("precision", "int8"), "field \"settings.precision\" is 'int8', but kit {kit_id} ({zip}) is "
                                                 "for precision 'fp32' (run_kit.py always measures the kit's "
                                                 "precision)"),
    "runtime": (_setting("runtime", "tflite"), "field \"settings.runtime\" must be one of onnxruntime, trtexec (what "
                                               "run_kit.py measures with), got 'tflite'"),
    "threads": (_setting("threads", "1"), "field \"settings.threads\" must be an integer >= 0 or null, got '1'"),
    "settings": (_set("settings", []), 'field "settings" must be an object, got an array'),
    "space": (_set("space", "nb201"), "field \"space\" is 'nb201', but kit {kit_id} ({zip}) is for space 'mbv3'"),
    "units null": (_set("units", None), 'field "units" must be an object, got null'),
    "networks list": (_set("networks", [1]), 'field "networks" must be an object or null, got an array'),
    "carriers": (_set("carriers", "x"), 'field "carriers" must be an object or null, got a string'),
    "board": (_set("board", 5), 'field "board" must be an object or null, got a number'),
    "a unit null": (_unit(None), "field \"units\": unit '{unit}' must be a list of timings (one per round), got null"),
    "a round null": (_unit([None]), "field \"units\": unit '{unit}', round 1 must be a timing (an object with "
                                    "median_ms), got null"),
    "a unit median": (_unit([{"median_ms": -1.0}]), "field \"units\": unit '{unit}', round 1: median_ms must be a "
                                                    "finite non-negative number (ms), got -1.0"),
    "a unit count": (_unit([{"median_ms": 1.0, "count": 2.5}]),
                     "field \"units\": unit '{unit}', round 1: count must be an integer >= 0, got 2.5"),
    "no median": (_unit([{"p10_ms": 1.0}]), "field \"units\": unit '{unit}', round 1 has no median_ms"),
    "failed": (lambda d: d["failed"].__setitem__("x", 1),
               "field \"failed\" must map each unit to its error (a string), got a number for 'x'"),
    "rounds": (lambda d: d["protocol"].__setitem__("rounds", "2"), "field \"protocol.rounds\" must be an integer >= 1, "
                                                                   "got '2'"),
    "statistic": (lambda d: d["protocol"].__setitem__("statistic", "mean"),
                  "kit protocol: unknown statistic 'mean' (choose from median, p10)"),
    "statistic array": (lambda d: d["protocol"].__setitem__("statistic", ["p10"]),
                        "kit protocol: unknown statistic an array (choose from median, p10)"),
    "mode": (lambda d: d["protocol"].__setitem__("mode", "sideways"),
             "field \"protocol.mode\" must be one of isolated, in_context, between, got 'sideways'"),
    "unknown network": (lambda d: d["networks"].__setitem__("feedbeef", [_timing(1.0)]),
                        "field \"networks\" has network(s) kit {kit_id} does not: feedbeef"),
    "nan elsewhere": (lambda d: d["board"].__setitem__("temperature", float("nan")),
                      'field "board.temperature" holds nan, which is not a number a table can keep'),
    "p10 missing": (lambda d: (d["protocol"].__setitem__("statistic", "p10"),
                               d["networks"][_first_network_of(d)][0].pop("p10_ms")),
                    "field \"networks\": network '{net}', round 1: no p10_ms, which the kit protocol's statistic "
                    "'p10' reads"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_inconsistent_or_malformed_results_are_one_line_and_write_nothing(name, kit, tmp_path, capsys):
    change, expected = BAD[name]
    data = _results(kit)
    unit, net = next(iter(data["units"])), _first_network_of(data)
    change(data)
    results = _write(tmp_path / "results.json", data)
    out = tmp_path / "t.json"
    code, _, err = _import(capsys, results, kit, out)
    expected = expected.format(kit_id=kit.kit_id[:16], zip=kit.zip_path, unit=unit, net=net)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: ") and expected in err, err
    assert str(results) in err  # the results file is named
    assert not out.exists()


def test_older_results_versions_still_read(kit, tmp_path):
    """Version 1 (one timing per unit and network) and 2 (lists per unit, one timing per network) still import."""
    data = _results(kit)
    v1 = {**data, "version": 1, "units": {k: v[0] for k, v in data["units"].items()},
          "networks": {k: v[0] for k, v in data["networks"].items()}}
    v1.pop("carriers")
    v2 = {**data, "version": 2, "networks": v1["networks"]}
    tables = [import_results(_write(tmp_path / f"v{v}.json", d), kit.zip_path, tmp_path / f"t{v}.json")
              for v, d in ((1, v1), (2, v2), (3, data))]
    assert tables[0].entries == tables[1].entries == tables[2].entries
    assert len(tables[0].provenance["networks"]) == len(kit.manifest["networks"])
    assert read_results(tmp_path / "v1.json")["version"] == 1


def test_a_network_the_table_cannot_price_is_left_out_of_its_calibration(kit, tmp_path, capsys):
    """A unit that failed on the board: the networks that need it are named under failed_networks (they cannot
    calibrate the table) and the import still completes, calibrated on the others, written once."""
    data = _results(kit)
    m = kit.manifest
    counts: dict[str, int] = {}
    for n in m["networks"]:
        for k in set(n["layers"]):
            counts[k] = counts.get(k, 0) + 1
    # the unit fewest networks need, so that enough are left to calibrate on
    key = min((k for k in counts), key=lambda k: (counts[k], k))
    del data["units"][key]
    data["failed"] = {key: "RuntimeError: the board could not run it"}
    results = _write(tmp_path / "results.json", data)
    out = tmp_path / "t.json"
    code, stdout, err = _import(capsys, results, kit, out)
    assert code == 0, err
    table = LatencyTable.load(out)
    left_out = {n["arch_id"] for n in m["networks"] if key in n["layers"]}
    assert left_out and set(table.provenance["failed_networks"]) == left_out
    assert all("no entry for 1 of its units" in table.provenance["failed_networks"][a] for a in left_out)
    assert {n["arch_id"] for n in table.provenance["networks"]} == {n["arch_id"] for n in m["networks"]} - left_out
    assert table.failed[key].startswith("measure: RuntimeError")
    priced = len(m["networks"]) - len(left_out)
    assert (table.calibration is not None) == (priced >= MIN_NETWORKS), stdout


def test_save_false_writes_nothing_but_still_refuses_an_existing_file(kit, tmp_path):
    results = _write(tmp_path / "results.json", _results(kit))
    out = tmp_path / "t.json"
    table = import_results(results, kit.zip_path, out, save=False)
    assert not out.exists() and len(table.entries) == len(kit.manifest["units"])
    table.save(out)
    assert LatencyTable.load(out).entries == table.entries
    with pytest.raises(OutputExists, match="exists; not replacing it"):
        import_results(results, kit.zip_path, out, save=False)


def test_read_results_names_the_field_for_the_api_too(tmp_path):
    data = {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, "kit_id": "k", "settings": {}, "units": None}
    path = _write(tmp_path / "r.json", copy.deepcopy(data))
    with pytest.raises(KitError, match=f'kit results {path}: field "units" must be an object, got null'):
        read_results(path)
