"""Nothing lost, nothing overwritten: ``nas latency`` refuses to replace files without ``--force``, and the
board runner extracts only the members the kit's manifest lists, each no bigger than declared.

Real files in ``tmp_path``, real kits made by the project's kit maker, the real runner; no mocks.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.latency.kit import run_kit
from hwnas.latency.kit.make import make_kit
from hwnas.latency.measure import MeasureProtocol
from hwnas.search_spaces.mbv3 import MobileNetV3Space

SPACE_PARAMS = dict(resolution=8, stages=[{"channels": 8, "depths": [1, 2]}, {"channels": 16, "stride": 2,
                                                                               "depths": [1, 2]}],
                    kernels=[3, 5], expand_ratios=[3])
SMALL = ["--space", "mbv3", "--space-param", "resolution=8", "--space-param",
         'stages=[{channels: 8, depths: [1, 2]}, {channels: 16, stride: 2, depths: [1, 2]}]',
         "--space-param", "kernels=[3, 5]", "--space-param", "expand_ratios=[3]"]
FAST = ["--warmup", "2", "--repeats", "5", "--min-time", "0"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative name -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], path: Path) -> str:
    """Run ``nas ARGV``; it must fail with exactly one stderr line naming ``path`` and ``--force``."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and str(path) in lines[0] and "--force" in lines[0], err
    assert "Traceback" not in err
    return lines[0]


def _ok(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


# -- nas latency kit ------------------------------------------------------------------------------------
def test_kit_refuses_an_existing_zip_and_force_replaces_it(tmp_path, capsys):
    kit = tmp_path / "kit.zip"
    argv = ["latency", "kit", *SMALL, "--device", "board", "--networks", "0", *FAST, "--out", str(kit)]
    _ok(capsys, argv)
    before = _snapshot(tmp_path)
    assert set(before) == {"kit.zip", "run_kit.py"}

    line = _refused(capsys, argv, kit)
    assert "exists" in line
    assert _snapshot(tmp_path) == before  # byte-identical, nothing new

    _ok(capsys, [*argv, "--force"])
    assert set(_snapshot(tmp_path)) == {"kit.zip", "run_kit.py"}
    with zipfile.ZipFile(kit) as zf:
        assert json.loads(zf.read("manifest.json"))["context"]["device"] == "board"


def test_kit_checks_every_output_before_writing_any(tmp_path, capsys):
    first = ["latency", "kit", *SMALL, "--device", "board", "--networks", "0", *FAST]
    _ok(capsys, [*first, "--out", str(tmp_path / "a.zip")])
    # a second kit beside it shares this hwnas's run_kit.py: an identical runner is not a conflict
    _ok(capsys, [*first, "--out", str(tmp_path / "b.zip")])
    assert set(_snapshot(tmp_path)) == {"a.zip", "b.zip", "run_kit.py"}

    # a run_kit.py of someone else's: the new zip is not written either
    runner = tmp_path / "run_kit.py"
    runner.write_text("# my own runner\n")
    before = _snapshot(tmp_path)
    _refused(capsys, [*first, "--out", str(tmp_path / "c.zip")], runner)
    assert _snapshot(tmp_path) == before and not (tmp_path / "c.zip").exists()
    _ok(capsys, [*first, "--out", str(tmp_path / "c.zip"), "--force"])
    assert runner.read_bytes() == run_kit_source() and (tmp_path / "c.zip").is_file()

    # a folder where the zip goes is refused even with --force
    (tmp_path / "d.zip").mkdir()
    capsys.readouterr()
    assert main([*first, "--out", str(tmp_path / "d.zip"), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a directory" in err and str(tmp_path / "d.zip") in err


def run_kit_source() -> bytes:
    from hwnas.latency.kit.make import runner_source

    return runner_source()


# -- nas latency import ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory):
    return make_kit(MobileNetV3Space(**SPACE_PARAMS), device="test-cpu", out=tmp_path_factory.mktemp("kit"),
                    threads=1, protocol=MeasureProtocol(warmup=1, repeats=3, min_time_s=0.0),
                    rng=np.random.default_rng(0))


@pytest.fixture(scope="module")
def results(kit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("board") / "results.json"
    assert run_kit.main([str(kit.zip_path), "--out", str(out), "--quiet"]) == 0
    return out


def test_import_refuses_an_existing_table_and_force_replaces_it(kit, results, tmp_path, capsys):
    table = tmp_path / "t.json"
    argv = ["latency", "import", str(results), "--kit", str(kit.zip_path), "--out", str(table)]
    assert "8 units (0 failed)" in _ok(capsys, argv)
    before = _snapshot(tmp_path)
    _refused(capsys, argv, table)
    assert _snapshot(tmp_path) == before
    _ok(capsys, [*argv, "--force"])
    assert json.loads(table.read_text())["provenance"]["kit_id"] == kit.kit_id


# -- nas latency import-published -----------------------------------------------------------------------
def test_import_published_refuses_an_existing_table_and_force_replaces_it(tmp_path, capsys, shared_data):
    data = json.loads((shared_data / "hw-nas-bench" / "fbnet_lut.json").read_text())
    lut = tmp_path / "fbnet_lut.json"
    lut.write_text(json.dumps(data))
    out_dir = tmp_path / "tables"
    table = out_dir / "pixel3.json"
    argv = ["latency", "import-published", "hw-nas-bench-fbnet", str(lut), "--space", "fbnet", "--out", str(table)]
    _ok(capsys, argv)
    before = _snapshot(out_dir)
    _refused(capsys, argv, table)
    assert _snapshot(out_dir) == before
    key = sorted(data["pixel3_latency"])[0]
    data["pixel3_latency"][key] = 2.5
    lut.write_text(json.dumps(data))
    _ok(capsys, [*argv, "--force"])
    assert json.loads(table.read_text())["entries"][key]["median_ms"] == 2.5


# -- nas latency profile --------------------------------------------------------------------------------
def test_profile_resumes_its_own_table_refuses_any_other_file_and_force_replaces(tmp_path, capsys):
    table = tmp_path / "t.json"
    argv = ["latency", "profile", *SMALL, *FAST, "--device", "here", "--out", str(table)]
    _ok(capsys, argv)
    before = _snapshot(tmp_path)
    # the same command again resumes the table it wrote (nothing to measure, nothing lost)
    assert "0 measured now, 8 kept from before" in _ok(capsys, argv)
    assert _snapshot(tmp_path) == before
    # a validated table keeps its calibration and validation when the profile is run again
    doc = json.loads(table.read_text())
    doc["calibration"] = {"a_per_sum": 1.1, "b_per_unit_ms": 0.01, "c_ms": 0.2}
    doc["validation"] = {"networks": 3, "note": "made up for this test"}
    table.write_text(json.dumps(doc))
    before = _snapshot(tmp_path)
    assert "0 measured now, 8 kept from before" in _ok(capsys, argv)
    assert _snapshot(tmp_path) == before

    # another protocol cannot resume it: refused, the table untouched
    other = ["latency", "profile", *SMALL, "--warmup", "2", "--repeats", "6", "--min-time", "0", "--device", "here",
             "--out", str(table)]
    assert "measurement protocol" in _refused(capsys, other, table)
    assert _snapshot(tmp_path) == before

    # a file that is not a table is not replaced either
    notes = tmp_path / "notes.json"
    notes.write_text("my notes, not a table\n")
    before = _snapshot(tmp_path)
    _refused(capsys, [*other[:-1], str(notes)], notes)
    assert _snapshot(tmp_path) == before

    # --force measures afresh and replaces the file; no temporary file is left beside it
    _ok(capsys, [*other, "--force"])
    assert json.loads(table.read_text())["protocol"]["repeats"] == 6
    assert set(_snapshot(tmp_path)) == {"t.json", "notes.json"}

    (tmp_path / "dir.json").mkdir()
    capsys.readouterr()
    assert main([*argv[:-1], str(tmp_path / "dir.json"), "--force"]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- the board runner extracts only what the manifest lists -----------------------------------------------
def _copy(src: Path, dest: Path) -> Path:
    dest.write_bytes(src.read_bytes())
    return dest


def _rezip(src: Path, dest: Path, change: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, change.get(info.filename, zin.read(info.filename)))
    return dest


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_manifest_declares_every_file_size(kit):
    with zipfile.ZipFile(kit.zip_path) as zf:
        for item in kit.manifest["units"] + kit.manifest["networks"]:
            assert item["size"] == zf.getinfo(item["file"]).file_size == len(zf.read(item["file"]))
        assert kit.manifest["runner"]["size"] == zf.getinfo("run_kit.py").file_size
    assert kit.manifest["version"] == run_kit.KIT_VERSION == 3


def test_undeclared_huge_member_is_never_extracted(kit, tmp_path, capsys):
    bombed = _copy(kit.zip_path, tmp_path / "kit.zip")
    block = bytes(1 << 20)
    with zipfile.ZipFile(bombed, "a", compression=zipfile.ZIP_DEFLATED) as zf, zf.open("units/zeros.bin", "w") as fh:
        for _ in range(256):  # 256 MiB of zeros, deflated to about 250 KB, written in 1 MiB blocks
            fh.write(block)
    with zipfile.ZipFile(bombed) as zf:
        assert zf.getinfo("units/zeros.bin").file_size == 256 << 20
    assert bombed.stat().st_size < kit.zip_path.stat().st_size + (2 << 20)

    dest = tmp_path / "dest"
    dest.mkdir()
    capsys.readouterr()
    names = run_kit.safe_extract(str(bombed), str(dest))
    err = capsys.readouterr().err
    assert "units/zeros.bin" not in names and not (dest / "units" / "zeros.bin").exists()
    declared = {item["file"] for item in kit.manifest["units"] + kit.manifest["networks"]}
    assert set(names) == {"manifest.json"} | declared == set(_snapshot(dest))
    assert _size(dest) < 4 << 20  # the kit's own files only
    assert err.splitlines() == ["run_kit: ignoring 1 kit member(s) the manifest does not list (not extracted): "
                                "units/zeros.bin"]

    # and the whole run measures the kit as if the extra member were not there
    out = tmp_path / "results.json"
    assert run_kit.main([str(bombed), "--out", str(out), "--quiet"]) == 0
    assert set(json.loads(out.read_text())["units"]) == {u["key"] for u in kit.manifest["units"]}


def test_declared_member_bigger_than_declared_is_refused_in_one_line(kit, tmp_path, capsys):
    unit = kit.manifest["units"][1]
    with zipfile.ZipFile(kit.zip_path) as zf:
        data = zf.read(unit["file"])
    bigger = _rezip(kit.zip_path, tmp_path / "kit.zip", {unit["file"]: data + bytes(1 << 20)})
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(run_kit.KitRunError, match="refusing to extract"):
        run_kit.safe_extract(str(bigger), str(dest))
    assert list(dest.iterdir()) == []  # nothing extracted is left behind

    out = tmp_path / "results.json"
    capsys.readouterr()
    assert run_kit.main([str(bigger), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"run_kit: error: kit member {unit['file']!r} ({unit['key']}) is {len(data) + (1 << 20)} bytes, the manifest "
        f"says {unit['size']}; refusing to extract"]
    assert not out.exists()


def test_copy_counts_the_bytes_itself_and_stops_one_past_the_declared_size():
    out = io.BytesIO()
    with pytest.raises(run_kit.KitRunError, match=r"'units/x.onnx' \(k\) is more than 10 bytes, the manifest says 10"):
        run_kit.copy_limited(io.BytesIO(bytes(1 << 22)), out, 10, "units/x.onnx", "k")
    assert len(out.getvalue()) <= 10
    with pytest.raises(run_kit.KitRunError, match=r"is 5 bytes, the manifest says 10"):
        run_kit.copy_limited(io.BytesIO(bytes(5)), io.BytesIO(), 10, "units/x.onnx", "k")
    assert run_kit.copy_limited(io.BytesIO(b"0123456789"), out, 10, "units/x.onnx", "k") == 10


def test_manifest_without_sizes_is_refused(kit, tmp_path, capsys):
    manifest = json.loads(json.dumps(kit.manifest))
    del manifest["units"][0]["size"]
    manifest["kit_id"] = run_kit.kit_id_of(manifest)
    old = _rezip(kit.zip_path, tmp_path / "kit.zip", {"manifest.json": json.dumps(manifest).encode()})
    capsys.readouterr()
    assert run_kit.main([str(old), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"declares no size in bytes for {manifest['units'][0]['file']}" in err


@pytest.mark.parametrize("name", ["../evil", "/abs", "units/../../evil", "ABSOLUTE"])
def test_member_outside_the_folder_is_never_written(kit, tmp_path, capsys, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "a" / "dest"
    dest.mkdir(parents=True)
    member = str(outside / "evil") if name == "ABSOLUTE" else name
    abs_existed = Path("/abs").exists()
    bad = _copy(kit.zip_path, tmp_path / "kit.zip")
    with zipfile.ZipFile(bad, "a") as zf:
        zf.writestr(zipfile.ZipInfo(member), b"evil")
    with pytest.raises(run_kit.KitRunError, match="refusing to extract"):
        run_kit.safe_extract(str(bad), str(dest))
    capsys.readouterr()
    assert run_kit.main([str(bad), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    reason = "absolute, drive or backslash" if member.startswith("/") else "a '..' component"
    assert err.splitlines() == [f"run_kit: error: unsafe path {member!r} in the kit ({reason}); refusing to extract"]
    assert list(dest.iterdir()) == [] and list(outside.iterdir()) == []
    assert not list(tmp_path.rglob("evil")) and Path("/abs").exists() == abs_existed


def test_a_device_file_as_output_is_refused_even_with_force(capsys):
    from hwnas.errors import OutputExists
    from hwnas.fileio import refuse_overwrite

    for force in (False, True):
        with pytest.raises(OutputExists, match=r"/dev/null is not a regular file \(a device or a pipe\)"):
            refuse_overwrite([Path("/dev/null")], force=force)
