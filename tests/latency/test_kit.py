"""The board kit: make a kit, measure it where there is no torch and no hwnas, import the results.

The board is simulated by a child interpreter started with ``-I -S`` (isolated: no site-packages, no
user site, no environment variables, not even PYTHONPATH) whose ``sys.path`` gets one folder of
symbolic links to numpy, onnxruntime and the distributions onnxruntime requires (found from their
installed metadata, recursively), and nothing else. A probe in that child checks that ``torch`` and
``hwnas`` cannot be imported, runs ``run_kit.py`` in the same process, and then checks that every module
it loaded came from the standard library or that folder.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.latency.kit import run_kit
from hwnas.latency.kit.make import KitError, compute_kit_id, make_kit
from hwnas.latency.kit.results import import_results, measured_networks, read_manifest
from hwnas.latency.measure import MeasureProtocol
from hwnas.latency.tables import LatencyTable
from hwnas.search_spaces.mbv3 import MobileNetV3Space

SPACE_PARAMS: dict[str, Any] = dict(
    resolution=8,
    stages=[{"channels": 8, "depths": [1, 2]}, {"channels": 16, "stride": 2, "depths": [1, 2]}],
    kernels=[3, 5],
    expand_ratios=[3],
)
REPEATS = 5
PROGRESS_LINE = re.compile(r"^\[\s*\d+/\d+\]", re.M)


def small_space() -> MobileNetV3Space:
    return MobileNetV3Space(**SPACE_PARAMS)


# -- an environment without torch or hwnas ------------------------------------------------------------
def _distribution_closure(roots: list[str]) -> list[metadata.Distribution]:
    """The distributions ``roots`` need at run time: their ``Requires-Dist`` recursively, extras left out."""
    from packaging.requirements import Requirement  # onnxruntime requires packaging, so it is here

    found: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        dist = metadata.distribution(todo.pop())
        name = dist.metadata["Name"].lower().replace("_", "-")
        if name in found:
            continue
        found[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


def _top_level_entries(dist: metadata.Distribution) -> set[str]:
    """First path components of a distribution's installed files: packages, modules, ``*.libs`` folders."""
    entries = set()
    for f in dist.files or []:
        first = f.parts[0]
        if first in ("..", "__pycache__") or first.endswith((".dist-info", ".egg-info", ".pth")):
            continue
        entries.add(first)
    return entries


PROBE = textwrap.dedent('''
    """Runs in the child: prove what cannot be imported, run run_kit.py, report where modules came from."""
    import importlib, json, os, runpy, sys, sysconfig

    report_path, link_dir, runner = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, link_dir)
    report = {"flags": {"isolated": sys.flags.isolated, "no_site": sys.flags.no_site}, "path": list(sys.path)}
    for name in ("torch", "hwnas", "numpy", "onnxruntime"):
        try:
            importlib.import_module(name)
            report[name] = "importable"
        except ImportError as exc:
            report[name] = "ImportError: %s" % exc
    sys.argv = [runner] + sys.argv[4:]
    try:
        runpy.run_path(runner, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    stdlib = [os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
    allowed = [os.path.abspath(link_dir), os.path.dirname(os.path.abspath(__file__))] + stdlib  # + this probe
    report["foreign_modules"] = sorted(
        name for name, mod in list(sys.modules.items())
        if getattr(mod, "__file__", None)
        and not any(os.path.abspath(mod.__file__).startswith(p + os.sep) for p in allowed))
    report["loaded_torch"] = "torch" in sys.modules
    with open(report_path, "w") as fh:
        json.dump(report, fh)
    sys.exit(code)
''')


class Board:
    """Runs ``run_kit.py`` in a child with only numpy, onnxruntime and their requirements importable."""

    def __init__(self, root: Path) -> None:
        self.link_dir = root / "site"
        self.link_dir.mkdir(parents=True)
        self.linked: list[str] = []
        for dist in _distribution_closure(["numpy", "onnxruntime"]):
            for entry in _top_level_entries(dist):
                target = Path(dist.locate_file(entry))
                if target.exists() and not (self.link_dir / entry).exists():
                    (self.link_dir / entry).symlink_to(target, target_is_directory=target.is_dir())
                    self.linked.append(entry)
        probe_dir = root / "probe"  # a folder of its own: the script's folder is not on sys.path under -I anyway
        probe_dir.mkdir()
        self.probe = probe_dir / "probe.py"
        self.probe.write_text(PROBE)

    def run(self, runner: Path, *args: str, cwd: Path, extra_path: Path | None = None,
            env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        report = cwd / "probe-report.json"
        self.tmp = cwd / "board-tmp"  # the runner extracts the kit under TMPDIR and must remove it
        self.tmp.mkdir(exist_ok=True)
        path = os.environ.get("PATH", "/usr/bin:/bin")
        child_env = {"PATH": f"{extra_path}{os.pathsep}{path}" if extra_path else path, "LC_ALL": "C.UTF-8",
                     "TMPDIR": str(self.tmp), **(env or {})}
        proc = subprocess.run(
            [sys.executable, "-I", "-S", str(self.probe), str(report), str(self.link_dir), str(runner), *args],
            cwd=cwd, env=child_env, capture_output=True, text=True, timeout=300)
        assert report.exists(), f"probe did not finish: {proc.stderr[-2000:]}"
        return proc, json.loads(report.read_text())


# -- fixtures (one kit, one board run, shared by the module) ------------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("kit")
    return make_kit(small_space(), device="test-cpu", out=out, runtime="onnxruntime", threads=1,
                    protocol=MeasureProtocol(warmup=2, repeats=REPEATS), validate_archs=2,
                    rng=np.random.default_rng(0))


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Board:
    return Board(tmp_path_factory.mktemp("board"))


@pytest.fixture(scope="module")
def measured(kit, board: Board, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("measured")
    proc, report = board.run(kit.runner_path, str(kit.zip_path), "--out", "results.json", cwd=work)
    return work / "results.json", proc, report


def _results(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _rezip(src: Path, dest: Path, change: dict[str, bytes]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, change.get(info.filename, zin.read(info.filename)))


def _damaged(src: Path, member: str, dest: Path) -> Path:
    """A copy of the kit ``src`` at ``dest`` whose ``member`` has its last byte flipped."""
    with zipfile.ZipFile(src) as zf:
        data = bytearray(zf.read(member))
    data[-1] ^= 0xFF
    _rezip(src, dest, {member: bytes(data)})
    return dest


# -- the kit ---------------------------------------------------------------------------------------------
def test_kit_holds_every_unit_networks_manifest_and_runner(kit):
    space = small_space()
    m = kit.manifest
    assert m["format"] == "hwnas.latency-kit" and m["kit_id"] == compute_kit_id(m) == kit.kit_id
    assert m["space"] == "mbv3" and m["space_params"]["kernels"] == [3, 5]
    assert m["context"] == {"device": "test-cpu", "runtime": "onnxruntime", "provider": "CPUExecutionProvider",
                            "precision": "fp32", "batch_size": 1, "threads": 1, "input_resolution": 8,
                            "power_mode": None}
    assert m["protocol"]["repeats"] == REPEATS and m["failed"] == {}
    assert m["protocol"]["mode"] == "isolated" and m["carriers"] == [] and m["version"] == run_kit.KIT_VERSION
    assert all("baseline" not in u for u in m["units"])
    assert [u["key"] for u in m["units"]] == space.all_layers()
    for u in m["units"]:
        _module, shape = space.build_layer(u["key"])
        assert u["input_shape"] == [1, *shape]
    with zipfile.ZipFile(kit.zip_path) as zf:
        names = set(zf.namelist())
        for item in m["units"] + m["networks"]:
            assert run_kit.hashlib.sha256(zf.read(item["file"])).hexdigest() == item["sha256"]
        assert zf.read("run_kit.py") == kit.runner_path.read_bytes()
        assert json.loads(zf.read("manifest.json")) == m
    assert names == {"manifest.json", "run_kit.py"} | {i["file"] for i in m["units"] + m["networks"]}
    assert kit.runner_path.parent == kit.zip_path.parent and os.access(kit.runner_path, os.X_OK)
    assert len(m["networks"]) == 2 and len({n["arch_id"] for n in m["networks"]}) == 2
    for net in m["networks"]:
        arch = Architecture.from_dict(net["arch"])
        assert arch.arch_id == net["arch_id"] and net["layers"] == space.layers(arch)
    assert read_manifest(kit.zip_path) == m


def test_runner_is_python38_syntax_and_standalone():
    source = Path(run_kit.__file__).read_text()
    ast.parse(source, feature_version=(3, 8))  # boards run old Pythons
    imported = {n.names[0].name.split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import)}
    imported |= {n.module.split(".")[0] for n in ast.walk(ast.parse(source))
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported - set(sys.stdlib_module_names) == {"numpy", "onnxruntime"}


def test_unit_that_fails_to_export_is_reported_by_key_and_the_rest_written(tmp_path):
    keep = small_space().all_layers()[:3]

    class HalfBroken(MobileNetV3Space):
        def all_layers(self) -> list[str]:
            return keep

        def build_layer(self, key: str):
            if key == keep[1]:
                raise RuntimeError("this unit cannot be built")
            return super().build_layer(key)

    made = make_kit(HalfBroken(**SPACE_PARAMS), device="test-cpu", out=tmp_path / "k.zip")
    assert made.zip_path == tmp_path / "k.zip" and made.runner_path == tmp_path / "run_kit.py"
    assert made.failed == {keep[1]: "export: RuntimeError: this unit cannot be built"}
    assert [u["key"] for u in made.manifest["units"]] == [keep[0], keep[2]]
    with zipfile.ZipFile(made.zip_path) as zf:
        assert sorted(n for n in zf.namelist() if n.startswith("units/")) == ["units/0000.onnx", "units/0002.onnx"]


def test_space_without_units_interface_is_one_clear_error(tmp_path):
    class NoUnits:
        name = "bare"

        def layers(self, arch: Architecture) -> list[str]:
            return []

    with pytest.raises(KitError, match=r"space 'bare' cannot make a board kit: it is not a UnitProfiledSpace \(a "
                                       r"search space with all_layers\(\) and build_layer\(key\)"):
        make_kit(NoUnits(), device="x", out=tmp_path)
    with pytest.raises(KitError, match="precision 'fp16' needs runtime 'trtexec'"):
        make_kit(small_space(), device="x", out=tmp_path, precision="fp16")
    with pytest.raises(KitError, match="precision 'int8' needs runtime 'trtexec'"):
        make_kit(small_space(), device="x", out=tmp_path, precision="int8", provider="cuda")
    assert not any(tmp_path.iterdir())


# -- the board: no torch, no hwnas ------------------------------------------------------------------------
def test_board_run_needs_no_torch_and_no_hwnas(kit, board: Board, measured):
    path, proc, report = measured
    assert proc.returncode == 0, proc.stderr
    assert report["flags"] == {"isolated": 1, "no_site": 1}
    assert report["torch"].startswith("ImportError") and report["hwnas"].startswith("ImportError")
    assert report["numpy"] == report["onnxruntime"] == "importable"
    assert report["foreign_modules"] == [] and report["loaded_torch"] is False
    assert list((path.parent / "board-tmp").glob("hwnas-kit-*")) == []  # the extracted kit was removed
    assert "torch" not in board.linked and "hwnas" not in board.linked
    assert {"numpy", "onnxruntime"} <= set(board.linked)

    results = _results(path)
    assert results["kit_id"] == kit.kit_id and results["finished"]
    assert set(results["units"]) == {u["key"] for u in kit.manifest["units"]} and results["failed"] == {}
    assert set(results["networks"]) == {n["arch_id"] for n in kit.manifest["networks"]}
    # one round: one timing per unit and per network
    assert all(len(rounds) == 1 for rounds in [*results["units"].values(), *results["networks"].values()])
    assert results["version"] == run_kit.RESULTS_VERSION and results["carriers"] == {}
    for stats in [*(r[0] for r in results["units"].values()), *(r[0] for r in results["networks"].values())]:
        assert stats["count"] == REPEATS
        assert 0 < stats["min_ms"] <= stats["p10_ms"] <= stats["median_ms"] <= stats["p90_ms"]
    import onnxruntime

    b = results["board"]
    assert b["onnxruntime"] == onnxruntime.__version__ and "CPUExecutionProvider" in b["onnxruntime_providers"]
    assert b["cpu"] and b["platform"] and b["python"]
    assert results["settings"] == {"runtime": "onnxruntime", "provider": "CPUExecutionProvider", "threads": 1,
                                   "precision": "fp32"}
    total = len(kit.manifest["units"]) + len(kit.manifest["networks"])
    assert len(PROGRESS_LINE.findall(proc.stderr)) == total and "ETA" in proc.stderr


def test_imported_table_prices_sampled_architectures(kit, measured, tmp_path):
    space = small_space()
    table = import_results(measured[0], kit.zip_path, tmp_path / "board.json")
    assert table.space == "mbv3" and set(table.entries) == set(space.all_layers()) and table.failed == {}
    ctx = table.context
    assert (ctx.device, ctx.runtime, ctx.provider, ctx.threads, ctx.batch_size, ctx.input_resolution) == (
        "test-cpu", "onnxruntime", "CPUExecutionProvider", 1, 1, 8)
    import onnxruntime

    assert ctx.runtime_version == onnxruntime.__version__
    rng = np.random.default_rng(7)
    for _ in range(20):
        keys = space.layers(space.sample(rng))
        predicted = table.predict_ms(keys)
        assert predicted == pytest.approx(sum(table.entries[k].median_ms for k in keys)) and predicted > 0
    assert all(e.count == REPEATS for e in table.entries.values())

    loaded = LatencyTable.load(tmp_path / "board.json", space="mbv3", context=ctx)
    assert loaded.entries == table.entries
    prov = loaded.provenance
    assert prov["kit_id"] == kit.kit_id and prov["board"]["onnxruntime"] == onnxruntime.__version__
    assert prov["imported"].startswith("20") and prov["measured_finished"]
    nets = measured_networks(loaded)
    assert len(nets) == 2
    for arch, layers, median_ms in nets:
        assert layers == space.layers(arch) and median_ms > 0
        assert loaded.predict_ms(layers) > 0  # every network is priceable from the table


def test_results_of_another_kit_are_refused(kit, measured, board: Board, tmp_path):
    other = _results(measured[0])
    other["kit_id"] = "0" * 64
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    with pytest.raises(KitError, match=f"results of kit {'0' * 64}, but .* is kit {kit.kit_id}"):
        import_results(path, kit.zip_path, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    # the board refuses to resume into it, naming both ids
    proc, _ = board.run(kit.runner_path, str(kit.zip_path), "--out", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"holds results of kit {'0' * 64}, not of this kit {kit.kit_id}" in proc.stderr


def test_the_kit_records_its_resolved_space_and_results_of_another_space_are_named(kit, measured, tmp_path):
    from hwnas.search_spaces.base import resolved_params

    space = small_space()
    assert kit.manifest["space_resolved"] == resolved_params(space)
    assert kit.manifest["space_resolved"]["in_chans"] == 3 and kit.manifest["space_resolved"]["num_classes"] == 10
    results = _results(measured[0])
    assert results["space"] == "mbv3" and results["space_resolved"] == kit.manifest["space_resolved"]
    table = import_results(measured[0], kit.zip_path, tmp_path / "t.json")
    saved = LatencyTable.load(tmp_path / "t.json")
    assert saved.space_resolved == table.space_resolved == kit.manifest["space_resolved"]
    # results of a kit made for another space (1 input channel, 100 classes): both kits named, and what differs
    other = {**results, "kit_id": "1" * 64,
             "space_resolved": {**results["space_resolved"], "in_chans": 1, "num_classes": 100}}
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    with pytest.raises(KitError, match=r"is kit [0-9a-f]{64}: the results are of another space than the kit's: "
                                       r"in_chans 1 \(results\) vs 3 \(kit\); num_classes 100 \(results\) vs 10 "
                                       r"\(kit\)$"):
        import_results(path, kit.zip_path, tmp_path / "o.json")
    path.write_text(json.dumps({**other, "space": "fbnet", "space_resolved": None}))  # another space by name
    with pytest.raises(KitError, match=r'space "fbnet" \(results\) vs "mbv3" \(kit\)'):
        import_results(path, kit.zip_path, tmp_path / "o.json")
    assert not (tmp_path / "o.json").exists()


def test_a_kit_is_checked_against_an_experiments_space_by_its_resolved_parameters(kit):
    from hwnas.latency.kit.results import kit_space_differences

    assert kit_space_differences(kit.manifest, small_space()) == []
    gray = MobileNetV3Space(**SPACE_PARAMS, in_chans=1, num_classes=100)  # as a 1-channel dataset resolves it
    assert kit_space_differences(kit.manifest, gray) == [("in_chans", 3, 1), ("num_classes", 10, 100)]
    # a kit made before kits recorded the resolved space: its parameters resolved as the space resolves them
    old = {k: v for k, v in kit.manifest.items() if k != "space_resolved"}
    assert kit_space_differences(old, small_space()) == []
    assert kit_space_differences(old, gray) == [("in_chans", 3, 1), ("num_classes", 10, 100)]


def test_incomplete_results_need_allow_partial(kit, measured, tmp_path):
    results = _results(measured[0])
    dropped = kit.manifest["units"][2]["key"]
    del results["units"][dropped]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(results))
    with pytest.raises(KitError, match=r"covers 7 of 8 units .* rerun run_kit\.py with the same --out"):
        import_results(path, kit.zip_path, tmp_path / "t.json")
    table = import_results(path, kit.zip_path, tmp_path / "t.json", allow_partial=True)
    assert dropped not in table.entries and len(table.entries) == 7


def test_interrupted_run_resumes_measuring_only_what_is_missing(kit, measured, board: Board, tmp_path):
    before = _results(measured[0])
    dropped = kit.manifest["units"][3]["key"]
    partial = json.loads(json.dumps(before))
    del partial["units"][dropped]
    partial["finished"] = None
    out = tmp_path / "results.json"
    out.write_text(json.dumps(partial))
    proc, report = board.run(kit.runner_path, str(kit.zip_path), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "resuming" in proc.stderr and report["torch"].startswith("ImportError")
    lines = [line for line in proc.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert len(lines) == 1 and dropped in lines[0], proc.stderr  # exactly one unit measured again, no network
    after = _results(out)
    assert set(after["units"]) == set(before["units"]) and after["finished"]
    for key, stats in before["units"].items():
        if key != dropped:
            assert after["units"][key] == stats  # kept, not measured again
    assert after["networks"] == before["networks"]
    # results begun on another board are not resumed here
    partial["board"]["hostname"] = "some-other-board"
    out.write_text(json.dumps(partial))
    proc, _ = board.run(kit.runner_path, str(kit.zip_path), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and "was measured on another board (hostname 'some-other-board'" in proc.stderr


def test_modified_onnx_in_the_kit_is_a_hash_error(kit, board: Board, tmp_path):
    unit = kit.manifest["units"][2]
    bad = _damaged(kit.zip_path, unit["file"], tmp_path / "kit.zip")
    proc, _ = board.run(kit.runner_path, str(bad), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"kit {kit.kit_id} was modified or damaged: {unit['file']} ({unit['key']}) has sha256" in proc.stderr
    assert not (tmp_path / "r.json").exists()
    # an edited manifest (here: another device) no longer matches its kit id, on the board and at import
    manifest = dict(kit.manifest, context={**kit.manifest["context"], "device": "other"})
    edited = tmp_path / "edited.zip"
    _rezip(kit.zip_path, edited, {"manifest.json": json.dumps(manifest).encode()})
    proc, _ = board.run(kit.runner_path, str(edited), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 2 and "manifest.json was edited" in proc.stderr
    with pytest.raises(KitError, match="the manifest was edited"):
        read_manifest(edited)


# -- extraction never writes outside its folder ---------------------------------------------------------
def _symlink_member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize("members", [
    [("../evil.txt", b"x")],
    [("units/../../evil.txt", b"x")],
    [("ABSOLUTE", b"x")],
    [("..\\evil.txt", b"x")],
    [("link", None), ("link/evil.txt", b"x")],
], ids=["dotdot", "nested-dotdot", "absolute", "backslash", "symlink"])
def test_malicious_zip_is_refused_and_nothing_is_written_outside(tmp_path, members):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "a" / "dest"
    dest.mkdir(parents=True)
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("manifest.json", b"{}")  # a harmless member first: nothing may be written before refusing
        for name, data in members:
            if name == "ABSOLUTE":
                zf.writestr(zipfile.ZipInfo(str(outside / "evil.txt")), b"x")
            elif data is None:
                zf.writestr(_symlink_member(name), str(outside).encode())  # the link's target is its data
            else:
                zf.writestr(zipfile.ZipInfo(name), data)
    with pytest.raises(run_kit.KitRunError, match="refusing to extract"):
        run_kit.safe_extract(str(bad), str(dest))
    assert list(dest.iterdir()) == [] and list(outside.iterdir()) == []
    assert sorted(p.name for p in tmp_path.rglob("evil.txt")) == []


def test_board_refuses_a_malicious_kit_in_one_line(board: Board, tmp_path):
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("manifest.json", b"{}")
        zf.writestr("units/../../../escape.onnx", b"x")
    proc, _ = board.run(Path(run_kit.__file__), str(bad), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("run_kit: error: unsafe path 'units/../../../escape.onnx' in the kit "
                                   "(a '..' component); refusing to extract")
    assert not list(tmp_path.parent.rglob("escape.onnx"))


# -- trtexec --------------------------------------------------------------------------------------------
# trtexec --exportTimes writes a JSON list with one record per inference (NVIDIA/TensorRT,
# samples/common/sampleReporting.cpp, exportJSONTrace): start/end times of enqueue, H2D, compute and D2H,
# and the durations h2dMs, computeMs, d2hMs, latencyMs (older versions: also endToEndMs, and the warm-up
# inferences, whose compute starts before the warm-up time).
FAKE_TRTEXEC = '''#!{python} -IS
import json, os, sys

print("&&&& RUNNING TensorRT.trtexec [TensorRT v%s] # trtexec " % os.environ.get("FAKE_TRTEXEC_VERSION", "100300")
      + " ".join(sys.argv[1:]))
if "--help" in sys.argv:
    sys.exit(0)
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
with open(os.environ["FAKE_TRTEXEC_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if os.path.basename(opts["onnx"]) == os.environ.get("FAKE_TRTEXEC_FAIL"):
    print("[E] Error[4]: unsupported operator")
    sys.exit(1)
warmup_ms = float(opts["warmUp"])
records = []
for i in range(3):  # warm-up inferences, as older trtexec versions export them
    t = i * 0.5
    records.append(dict(computeMs=50.0, latencyMs=50.1, startComputeMs=t))
for i in range(int(opts["iterations"])):
    t = warmup_ms + 2.0 * i
    compute = 1.0 + 0.1 * i
    records.append(dict(startEnqMs=t, endEnqMs=t + 0.01, startH2dMs=t, endH2dMs=t + 0.02, startComputeMs=t + 0.02,
                        endComputeMs=t + 0.02 + compute, startD2hMs=t + 0.02 + compute,
                        endD2hMs=t + 0.03 + compute, h2dMs=0.02, computeMs=compute, d2hMs=0.01,
                        latencyMs=0.03 + compute, endToEndMs=0.03 + compute))
with open(opts["exportTimes"], "w") as fh:
    json.dump(records, fh)
print("=== Performance summary ===")
'''


def _fake_trtexec(folder: Path) -> tuple[Path, Path]:
    """A fake trtexec in ``folder/bin`` (its version from $FAKE_TRTEXEC_VERSION) and the file its calls go to."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "trtexec"
    fake.write_text(FAKE_TRTEXEC.format(python=sys.executable))
    fake.chmod(0o755)
    return fake, folder / "calls.jsonl"


def test_trtexec_runtime_parses_export_times(kit, board: Board, tmp_path):
    fake, log = _fake_trtexec(tmp_path)
    bin_dir = fake.parent
    failing = kit.manifest["units"][3]
    proc, report = board.run(
        kit.runner_path, str(kit.zip_path), "--out", "results.json", "--runtime", "trtexec",
        "--trtexec-arg=--useSpinWait", cwd=tmp_path, extra_path=bin_dir,
        env={"FAKE_TRTEXEC_LOG": str(log), "FAKE_TRTEXEC_FAIL": Path(failing["file"]).name})
    assert proc.returncode == 1, proc.stderr  # one unit failed; the others are measured
    assert report["torch"].startswith("ImportError")
    results = _results(tmp_path / "results.json")
    assert results["settings"]["runtime"] == "trtexec" and results["settings"]["trtexec_metric"] == "computeMs"
    assert results["board"]["trtexec_version"] == "10.3.0" and results["board"]["trtexec"] == str(fake)
    assert list(results["failed"]) == [failing["key"]] and "exited with status 1" in results["failed"][failing["key"]]
    assert len(results["units"]) == len(kit.manifest["units"]) - 1 and len(results["networks"]) == 2
    for (stats,) in results["units"].values():  # computeMs 1.0 .. 1.4: the warm-up records are left out
        assert stats["count"] == REPEATS and stats["min_ms"] == pytest.approx(1.0)
        assert stats["median_ms"] == pytest.approx(1.2) and stats["iqr_ms"] == pytest.approx(0.2)
        assert stats["p10_ms"] == pytest.approx(1.04) and stats["p90_ms"] == pytest.approx(1.36)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == len(kit.manifest["units"]) + 2
    assert all({"--warmUp=200", f"--iterations={REPEATS}", "--duration=0", "--useSpinWait"} <= set(c)
               and any(a.startswith("--exportTimes=") for a in c) for c in calls)

    table = import_results(tmp_path / "results.json", kit.zip_path, tmp_path / "trt.json")
    assert (table.context.runtime, table.context.runtime_version, table.context.provider,
            table.context.threads) == ("trtexec", "10.3.0", None, None)
    assert table.failed[failing["key"]].startswith("measure: RuntimeError: trtexec exited with status 1")
    assert table.protocol["trtexec_metric"] == "computeMs" and len(table.entries) == 7


def test_trtexec_latency_metric_and_version_decoding(tmp_path):
    times = tmp_path / "t.json"
    times.write_text(json.dumps([{"startComputeMs": 10.0, "computeMs": 9.0, "latencyMs": 9.5},
                                 {"startComputeMs": 300.0, "computeMs": 1.0, "latencyMs": 1.5},
                                 {"startComputeMs": 302.0, "computeMs": 2.0, "latencyMs": 2.5}]))
    measurer = run_kit.TrtexecMeasurer.__new__(run_kit.TrtexecMeasurer)
    measurer.warmup_ms, measurer.metric = 200, "latencyMs"
    assert measurer.parse_times(str(times))["median_ms"] == pytest.approx(2.0)
    measurer.metric = "computeMs"
    assert measurer.parse_times(str(times))["count"] == 2
    times.write_text(json.dumps([{"startComputeMs": 300.0, "h2dMs": 1.0}]))
    with pytest.raises(RuntimeError, match="record has no 'computeMs'"):
        measurer.parse_times(str(times))
    assert [run_kit.decode_trt_version(v) for v in ("8601", "100300", "11.1.0.106")] == ["8.6.1", "10.3.0",
                                                                                           "11.1.0.106"]


def test_statistics_match_numpy():
    samples = list(np.random.default_rng(3).gamma(2.0, 1.0, size=37))
    stats = run_kit.stats_from_ms(samples)
    q10, q25, q50, q75, q90 = np.percentile(samples, [10, 25, 50, 75, 90])
    assert stats["median_ms"] == pytest.approx(q50) and stats["iqr_ms"] == pytest.approx(q75 - q25)
    assert (stats["p10_ms"], stats["p90_ms"], stats["count"]) == (pytest.approx(q10), pytest.approx(q90), 37)



def test_trtexec_11_refuses_a_precision_flag_it_does_not_have(tmp_path):
    """TensorRT 11's trtexec has no --fp16/--int8 (precision lives in the ONNX graph): the runner says so."""
    fake = tmp_path / "trtexec"
    fake.write_text(f"#!{sys.executable} -IS\nprint('&&&& RUNNING TensorRT.trtexec [TensorRT v110100] # trtexec')\n")
    fake.chmod(0o755)
    with pytest.raises(run_kit.KitRunError, match=r"TensorRT 11.1.0's trtexec has no --fp16"):
        run_kit.TrtexecMeasurer(str(fake), "fp16", {"repeats": 5}, warmup_ms=10, metric="computeMs", extra_args=[],
                                workdir=str(tmp_path))
    ok = run_kit.TrtexecMeasurer(str(fake), "fp32", {"repeats": 5}, warmup_ms=10, metric="computeMs", extra_args=[],
                                 workdir=str(tmp_path))
    assert "--fp16" not in ok.command("x.onnx", "t.json") and ok.version == "11.1.0"


def test_a_p10_kit_imports_the_boards_tenth_percentile_as_each_central_value(kit, measured, tmp_path):
    """A kit whose protocol keeps the 10th percentile: units and networks answer with the board's p10 (the
    board's own median kept beside it for the networks); an unknown statistic is one KitError."""
    results = _results(measured[0])
    results["protocol"] = {**(results.get("protocol") or read_manifest(kit.zip_path)["protocol"]),
                           "statistic": "p10"}
    p10 = tmp_path / "p10.json"
    p10.write_text(json.dumps(results))
    table = import_results(p10, kit.zip_path, tmp_path / "board.json")
    assert table.protocol["statistic"] == "p10"
    for key, (stats,) in results["units"].items():
        assert table.entries[key].median_ms == stats["p10_ms"] and table.entries[key].p90_ms == stats["p90_ms"]
    nets = table.provenance["networks"]
    assert nets and all(n["median_ms"] == results["networks"][n["arch_id"]][0]["p10_ms"] for n in nets)
    assert all(n["run_median_ms"] == results["networks"][n["arch_id"]][0]["median_ms"] for n in nets)
    assert [m for _, _, m in measured_networks(table)] == [n["median_ms"] for n in nets]
    results["protocol"]["statistic"] = "mean"
    p10.write_text(json.dumps(results))
    with pytest.raises(KitError, match="unknown statistic 'mean'"):
        import_results(p10, kit.zip_path, tmp_path / "other.json")
    assert not (tmp_path / "other.json").exists()


# -- units timed in context on the board ------------------------------------------------------------------
ROUNDS = 2


@pytest.fixture(scope="module")
def between_kit(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("between-kit")
    return make_kit(small_space(), device="test-cpu", out=out, runtime="onnxruntime", threads=1,
                    protocol=MeasureProtocol(warmup=2, repeats=REPEATS, rounds=ROUNDS), validate_archs=2,
                    in_context="between")


@pytest.fixture(scope="module")
def between_measured(between_kit, board: Board, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("between-measured")
    proc, report = board.run(between_kit.runner_path, str(between_kit.zip_path), "--out", "results.json", cwd=work)
    return work / "results.json", proc, report


def _expected_entry(rounds: list[dict[str, Any]], baseline: list[Any], carriers: dict[str, list[dict[str, Any]]]):
    """The unit's central value per round less its carriers of that round (floored at 0), computed here by hand."""
    values = []
    for r, stats in enumerate(rounds):
        base = sum(coef * carriers[cid][r]["median_ms"] for cid, coef in baseline)
        values.append(max(stats["median_ms"] - base, 0.0))
    return values


def test_a_between_kit_holds_each_unit_between_carriers_and_lists_what_to_subtract(between_kit, kit):
    import onnx
    import torch

    space = small_space()
    m = between_kit.manifest
    assert m["protocol"]["mode"] == "between" and m["protocol"]["rounds"] == ROUNDS
    carriers = {c["id"]: c for c in m["carriers"]}
    assert len({(tuple(c["input_shape"]), c["count"]) for c in m["carriers"]}) == len(carriers)  # one per shape, count
    with zipfile.ZipFile(between_kit.zip_path) as zf:
        assert {n for n in zf.namelist() if n.startswith("carriers/")} == {c["file"] for c in m["carriers"]}
        for c in m["carriers"]:
            assert run_kit.hashlib.sha256(zf.read(c["file"])).hexdigest() == c["sha256"]
            graph = onnx.load_from_string(zf.read(c["file"])).graph
            op = "Conv" if len(c["input_shape"]) == 4 else "Identity"  # a depthwise 1x1 conv on feature maps
            assert [n.op_type for n in graph.node] == [op] * c["count"]
        for u in m["units"]:
            module, shape = space.build_layer(u["key"])
            with torch.no_grad():
                out_shape = [1, *module.eval()(torch.zeros(1, *shape)).shape[1:]]
            (twice, p2), (once, m1), (consumer, p1) = u["baseline"]
            assert (p2, m1, p1) == (1, -1, 1)
            assert carriers[twice]["count"] == 2 and carriers[twice]["input_shape"] == u["input_shape"]
            assert carriers[once]["count"] == 1 and carriers[once]["input_shape"] == u["input_shape"]
            assert carriers[consumer]["count"] == 1 and carriers[consumer]["input_shape"] == out_shape
            # the unit's own graph (as the isolated kit holds it) plus a producer and, for a feature map, a consumer
            convs = sum(n.op_type == "Conv" for n in onnx.load_from_string(zf.read(u["file"])).graph.node)
            with zipfile.ZipFile(kit.zip_path) as isolated:
                alone = next(i["file"] for i in kit.manifest["units"] if i["key"] == u["key"])
                own = sum(n.op_type == "Conv" for n in onnx.load_from_string(isolated.read(alone)).graph.node)
            assert convs == own + 1 + (len(out_shape) == 4)
    with pytest.raises(KitError, match="unknown in-context mode 'sideways'"):
        make_kit(space, device="x", out=between_kit.zip_path.parent / "other", in_context="sideways")


def test_board_times_carriers_every_round_and_the_import_subtracts_them(between_kit, between_measured, tmp_path):
    path, proc, report = between_measured
    assert proc.returncode == 0, proc.stderr
    assert report["torch"].startswith("ImportError") and report["foreign_modules"] == []
    results = _results(path)
    m = between_kit.manifest
    assert {k: len(v) for k, v in results["units"].items()} == {u["key"]: ROUNDS for u in m["units"]}
    used = {cid for u in m["units"] for cid, _ in u["baseline"]}
    assert {k: len(v) for k, v in results["carriers"].items()} == {cid: ROUNDS for cid in used}
    # whole networks are timed in rounds too, after the units
    assert {k: len(v) for k, v in results["networks"].items()} == {n["arch_id"]: ROUNDS for n in m["networks"]}
    lines = [line for line in proc.stderr.splitlines() if PROGRESS_LINE.match(line)]
    # every unit, every carrier it needs and every network, in each round
    total = ROUNDS * (len(m["units"]) + len(used) + len(m["networks"]))
    assert len(lines) == total and lines[-1].startswith(f"[{total}/{total}]") and "round 2 of 2" in proc.stderr
    assert sum("carrier" in line for line in lines) == ROUNDS * len(used)
    assert sum("(round 2/2)" in line and "network" in line for line in lines) == len(m["networks"])

    table = import_results(path, between_kit.zip_path, tmp_path / "between.json")
    assert table.protocol["mode"] == "between" and "both subtracted" in table.protocol["units"]
    for u in m["units"]:
        values = _expected_entry(results["units"][u["key"]], u["baseline"], results["carriers"])
        entry = table.entries[u["key"]]
        assert entry.rounds_ms == pytest.approx(values) and entry.median_ms == pytest.approx(float(np.median(values)))
    nets = table.provenance["networks"]  # each network: the median of its rounds
    assert len(nets) == len(m["networks"])
    for net in nets:
        values = [r["median_ms"] for r in results["networks"][net["arch_id"]]]
        assert net["rounds_ms"] == values and net["median_ms"] == pytest.approx(float(np.median(values)))
    # a results file that lacks a round of a carrier a unit needs is one clear error; nothing is written
    broken = _results(path)
    cid = m["units"][0]["baseline"][2][0]
    broken["carriers"][cid] = broken["carriers"][cid][:1]
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(broken))
    with pytest.raises(KitError, match=f"unit '{re.escape(m['units'][0]['key'])}' needs carrier {cid} of round 2"):
        import_results(bad, between_kit.zip_path, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_the_import_arithmetic_round_by_round(between_kit, between_measured, tmp_path):
    """Known numbers in: each round's unit less (producer twice - producer once + consumer), floored at zero,
    the median of the rounds out."""
    m = between_kit.manifest
    results = _results(between_measured[0])

    def timing(ms: float) -> dict[str, Any]:
        return {"median_ms": ms, "p10_ms": ms, "p90_ms": ms, "iqr_ms": 0.0, "min_ms": ms, "count": REPEATS}

    twice, once, consumer = (cid for cid, _ in m["units"][0]["baseline"])
    for cid in results["carriers"]:
        results["carriers"][cid] = [timing(0.0), timing(0.0)]
    results["carriers"][twice] = [timing(3.0), timing(3.5)]
    results["carriers"][once] = [timing(2.0), timing(2.0)]
    results["carriers"][consumer] = [timing(1.0), timing(0.5)]
    first, second = m["units"][0]["key"], m["units"][1]["key"]
    results["units"][first] = [timing(5.0), timing(7.0)]  # 5 - 2 = 3, 7 - 2 = 5: median 4
    shares = m["units"][1]["baseline"] == m["units"][0]["baseline"]
    results["units"][second] = [timing(1.0), timing(1.5)]  # below its baseline when it shares the first's: 0
    path = tmp_path / "known.json"
    path.write_text(json.dumps(results))
    table = import_results(path, between_kit.zip_path, tmp_path / "known-table.json")
    assert table.entries[first].rounds_ms == (3.0, 5.0) and table.entries[first].median_ms == 4.0
    assert table.entries[first].count == 2 * REPEATS
    if shares:
        assert table.entries[second].rounds_ms == (0.0, 0.0)


def test_a_board_run_resumes_the_missing_round_with_that_rounds_carriers(between_kit, between_measured, board: Board,
                                                                         tmp_path):
    before = _results(between_measured[0])
    key = between_kit.manifest["units"][1]["key"]
    partial = json.loads(json.dumps(before))
    partial["units"][key] = partial["units"][key][:1]
    partial["finished"] = None
    out = tmp_path / "results.json"
    out.write_text(json.dumps(partial))
    with pytest.raises(KitError, match=r"covers 7 of 8 units"):
        import_results(out, between_kit.zip_path, tmp_path / "t.json")
    proc, _ = board.run(between_kit.runner_path, str(between_kit.zip_path), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert len(lines) == 1 and key in lines[0] and "round 2 of 2" in lines[0], proc.stderr
    after = _results(out)
    assert after["carriers"] == before["carriers"]  # round 2's carriers were already timed: not again
    assert after["units"][key][0] == before["units"][key][0] and len(after["units"][key]) == 2


def test_a_board_run_resumes_a_networks_missing_round(between_kit, between_measured, board: Board, tmp_path):
    before = _results(between_measured[0])
    arch_id = between_kit.manifest["networks"][0]["arch_id"]
    partial = json.loads(json.dumps(before))
    partial["networks"][arch_id] = partial["networks"][arch_id][:1]
    partial["finished"] = None
    out = tmp_path / "results.json"
    out.write_text(json.dumps(partial))
    # until the network has every round, the import leaves it out (the units are complete)
    table = import_results(out, between_kit.zip_path, tmp_path / "t.json")
    assert arch_id not in {n["arch_id"] for n in table.provenance["networks"]}
    proc, _ = board.run(between_kit.runner_path, str(between_kit.zip_path), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert len(lines) == 1 and f"network {arch_id} (round 2/2)" in lines[0], proc.stderr
    after = _results(out)
    assert after["networks"][arch_id][0] == before["networks"][arch_id][0] and len(after["networks"][arch_id]) == 2
    assert after["units"] == before["units"]


def test_a_damaged_carrier_is_a_hash_error_on_the_board(between_kit, board: Board, tmp_path):
    carrier = between_kit.manifest["carriers"][0]
    bad = _damaged(between_kit.zip_path, carrier["file"], tmp_path / "kit.zip")
    proc, _ = board.run(between_kit.runner_path, str(bad), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 2 and f"{carrier['file']} ({carrier['id']}) has sha256" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_results_of_a_version_1_runner_still_import(kit, measured, tmp_path):
    """A results file written before rounds (one timing per unit and per network, not a list) imports as one
    round."""
    results = _results(measured[0])
    v1 = {**results, "version": 1, "units": {k: v[0] for k, v in results["units"].items()},
          "networks": {k: v[0] for k, v in results["networks"].items()}}
    v1.pop("carriers")
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(v1))
    a, b = import_results(old, kit.zip_path, tmp_path / "a.json"), import_results(measured[0], kit.zip_path,
                                                                                     tmp_path / "b.json")
    assert a.entries == b.entries and a.provenance["networks"] == b.provenance["networks"]


# -- int8 on onnxruntime: quantised here, timed on the board with onnxruntime alone ----------------------------
def test_an_int8_kit_carries_quantised_graphs_the_board_times_without_torch(board: Board, tmp_path):
    import onnx

    made = make_kit(small_space(), device="test-cpu", out=tmp_path / "k", precision="int8", threads=1,
                    protocol=MeasureProtocol(warmup=2, repeats=REPEATS), validate_archs=1, in_context="between")
    m = made.manifest
    assert m["graphs"] == "int8-qdq" and m["context"]["precision"] == "int8" and m["failed"] == {}
    with zipfile.ZipFile(made.zip_path) as zf:
        for item in m["units"] + m["networks"]:
            ops = {n.op_type for n in onnx.load_from_string(zf.read(item["file"])).graph.node}
            assert {"QuantizeLinear", "DequantizeLinear"} <= ops, item["file"]
    again = make_kit(small_space(), device="test-cpu", out=tmp_path / "k2", precision="int8", threads=1,
                     protocol=MeasureProtocol(warmup=2, repeats=REPEATS), validate_archs=1, in_context="between")
    assert again.kit_id == made.kit_id  # the quantisation is seeded: the same kit, byte for byte
    proc, report = board.run(made.runner_path, str(made.zip_path), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["torch"].startswith("ImportError") and report["foreign_modules"] == []
    results = _results(tmp_path / "r.json")
    assert results["settings"]["precision"] == "int8" and len(results["units"]) == len(m["units"])
    table = import_results(tmp_path / "r.json", made.zip_path, tmp_path / "int8.json")
    assert table.context.precision == "int8" and set(table.entries) == set(small_space().all_layers())


def test_onnxruntime_refuses_int8_from_a_kit_of_fp32_graphs(board: Board, tmp_path):
    """A kit made for trtexec int8 holds fp32 graphs (trtexec quantises them itself): timing them with onnxruntime
    would label fp32 timings int8, so the board refuses in one line."""
    made = make_kit(small_space(), device="jetson", out=tmp_path / "k", runtime="trtexec", precision="int8")
    assert made.manifest["graphs"] == "fp32"
    proc, _ = board.run(made.runner_path, str(made.zip_path), "--out", "r.json", "--runtime", "onnxruntime",
                        cwd=tmp_path)
    assert proc.returncode == 2 and "this kit's graphs are fp32" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()


# -- TensorRT 11: the precision lives in the graph -------------------------------------------------------------
def _trtexec_calls(made, board: Board, folder: Path, version: str) -> tuple[subprocess.CompletedProcess[str], list]:
    folder.mkdir()
    fake, log = _fake_trtexec(folder)
    proc, _ = board.run(made.runner_path, str(made.zip_path), "--out", "r.json", "--skip-networks", "--runtime",
                        "trtexec", cwd=folder,
                        extra_path=fake.parent, env={"FAKE_TRTEXEC_LOG": str(log), "FAKE_TRTEXEC_VERSION": version})
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, [c for c in calls if "--help" not in c]


def test_typed_kits_carry_their_precision_for_tensorrt_11(board: Board, tmp_path):
    import onnx

    space = small_space()
    typed = make_kit(space, device="orin", out=tmp_path / "fp16", runtime="trtexec", precision="fp16", typed=True,
                     protocol=MeasureProtocol(warmup=2, repeats=REPEATS))
    assert typed.manifest["graphs"] == "float16"
    with zipfile.ZipFile(typed.zip_path) as zf:
        for u in typed.manifest["units"]:
            graph = onnx.load_from_string(zf.read(u["file"])).graph
            assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
            assert all(t.data_type == onnx.TensorProto.FLOAT16 for t in graph.initializer)
    proc, calls = _trtexec_calls(typed, board, tmp_path / "trt11", "110100")
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == len(typed.manifest["units"])
    assert not any({"--fp16", "--int8", "--stronglyTyped"} & set(c) for c in calls)  # TensorRT 11: no flags at all
    proc, calls = _trtexec_calls(typed, board, tmp_path / "trt10", "100300")
    assert proc.returncode == 0, proc.stderr
    assert all("--stronglyTyped" in c and "--fp16" not in c for c in calls)  # TensorRT 10: typed from the graph

    plain = make_kit(space, device="orin", out=tmp_path / "plain", runtime="trtexec", precision="fp16")
    assert plain.manifest["graphs"] == "fp32"
    proc, calls = _trtexec_calls(plain, board, tmp_path / "plain11", "110100")
    assert proc.returncode == 2 and "--precision fp16 --typed" in proc.stderr and calls == []
    proc, calls = _trtexec_calls(plain, board, tmp_path / "plain10", "100300")
    assert proc.returncode == 0 and all("--fp16" in c and "--stronglyTyped" not in c for c in calls)


def test_typed_int8_is_symmetric_qdq_and_onnxruntime_int8_is_refused_by_tensorrt(board: Board, tmp_path):
    import onnx
    from onnx import numpy_helper

    space = small_space()
    made = make_kit(space, device="orin", out=tmp_path / "int8", runtime="trtexec", precision="int8", typed=True)
    assert made.manifest["graphs"] == "int8-qdq-symmetric"
    with zipfile.ZipFile(made.zip_path) as zf:
        graph = onnx.load_from_string(zf.read(made.manifest["units"][1]["file"])).graph
    inits = {t.name: t for t in graph.initializer}
    zero_points = [inits[n.input[2]] for n in graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2]
    assert zero_points and all(z.data_type == onnx.TensorProto.INT8 for z in zero_points)  # signed int8
    assert all(not numpy_helper.to_array(z).any() for z in zero_points)  # zero points 0: symmetric
    proc, calls = _trtexec_calls(made, board, tmp_path / "trt11", "110100")
    assert proc.returncode == 0 and calls and not any("--int8" in c for c in calls), proc.stderr

    ort_int8 = make_kit(space, device="pi", out=tmp_path / "ort", precision="int8")
    proc, calls = _trtexec_calls(ort_int8, board, tmp_path / "ort-trt", "100300")
    assert proc.returncode == 2 and "onnxruntime's (uint8 activations" in proc.stderr and calls == []
    with pytest.raises(KitError, match="typed graphs are for the trtexec runtime"):
        make_kit(space, device="pi", out=tmp_path / "x", precision="int8", typed=True)
    with pytest.raises(KitError, match="typed graphs need a reduced precision"):
        make_kit(space, device="orin", out=tmp_path / "y", runtime="trtexec", typed=True)


def test_a_kit_of_graphs_this_runner_does_not_know_is_refused(kit, board: Board, tmp_path):
    """A newer kit's graphs (say int4) must not be timed as if they were fp32: one line, nothing written."""
    manifest = dict(kit.manifest, graphs="int4-qdq")
    manifest["kit_id"] = compute_kit_id(manifest)
    newer = tmp_path / "newer.zip"
    _rezip(kit.zip_path, newer, {"manifest.json": json.dumps(manifest).encode()})
    proc, _ = board.run(kit.runner_path, str(newer), "--out", "r.json", cwd=tmp_path)
    assert proc.returncode == 2 and "the kit's graphs hold 'int4-qdq'" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists()
