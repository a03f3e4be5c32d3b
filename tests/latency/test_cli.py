"""``nas latency`` as a user runs it."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

SMALL = ["--space", "mbv3", "--space-param", "resolution=8", "--space-param",
         'stages=[{channels: 8, depths: [1, 2]}, {channels: 16, stride: 2, depths: [1, 2]}]',
         "--space-param", "kernels=[3, 5]", "--space-param", "expand_ratios=[3]"]
FAST = ["--warmup", "2", "--repeats", "5", "--min-time", "0"]


def nas(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "hwnas.cli", *args], capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"nas {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_profile_validate_show(tmp_path):
    table = tmp_path / "t.json"
    out = nas("latency", "profile", *SMALL, *FAST, "--device", "here", "--out", str(table))
    assert "8 of 8 units (8 measured now" in out.stdout and "overhead" in out.stdout
    again = nas("latency", "profile", *SMALL, *FAST, "--device", "here", "--out", str(table))
    assert "0 measured now, 8 kept from before" in again.stdout
    val = nas("latency", "validate", str(table), "-n", "8", *FAST)
    assert "calibrated (held-out)" in val.stdout
    data = json.loads(table.read_text())
    # the fitted coefficients themselves are noise at these sizes (30 us networks, 5 repeats): only stored, finite
    assert data["validation"]["networks"] == 8 and set(data["calibration"]) == {"a_per_sum", "b_per_unit_ms", "c_ms"}
    assert all(math.isfinite(v) for v in data["calibration"].values())
    assert data["validation"]["mean_heldout"]["calibrated"]["splits"] == 10
    assert data["validation"]["mean_heldout"]["learned"] is None  # 4 training networks: too few for a model
    shown = nas("latency", "show", str(table)).stdout
    assert "Kendall" in shown and "calibrated, 10 halvings" in shown
    assert "priced by: calibration (the lower mean held-out MAPE over 10 random halvings)" in shown
    assert "incomplete" not in shown
    again = nas("latency", "validate", str(table), "-n", "8", *FAST, check=False)
    assert again.returncode == 2 and "already holds a validation" in again.stderr and "--force" in again.stderr
    other = nas("latency", "validate", str(table), "--space-param", "resolution=16", check=False)
    assert other.returncode == 2 and "validate takes only resolutions=[...]" in other.stderr
    assert json.loads(table.read_text()) == data  # the refused run changed nothing
    data["entries"].pop(sorted(data["entries"])[0])
    table.write_text(json.dumps(data))
    assert "incomplete: 1 of the 8 units of the space have no entry" in nas("latency", "show", str(table)).stdout


@pytest.mark.parametrize("context", [[], ["--in-context", "between", "--rounds", "2"]], ids=["isolated", "between"])
def test_kit_and_import_round_trip(tmp_path, context):
    kit = tmp_path / "kit.zip"
    made = nas("latency", "kit", *SMALL, "--device", "board", "--networks", "8", "--repeats", "5", "--min-time", "0",
               *context, "--out", str(kit))
    assert "with 8 units (between, 7 carriers)" in made.stdout if context else "with 8 units (isolated)" in made.stdout
    subprocess.run([sys.executable, str(tmp_path / "run_kit.py"), str(kit), "--out", str(tmp_path / "r.json")],
                   check=True, capture_output=True, timeout=600)
    out = nas("latency", "import", str(tmp_path / "r.json"), "--kit", str(kit), "--out", str(tmp_path / "t.json"))
    assert "8 units (0 failed)" in out.stdout and "calibrated (held-out)" in out.stdout
    table = json.loads((tmp_path / "t.json").read_text())
    assert table["protocol"]["mode"] == ("between" if context else "isolated")
    assert all(len(e.get("rounds_ms", [0])) == (2 if context else 1) for e in table["entries"].values())


def test_bad_table_and_missing_backend_are_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "hwnas.latency-table", "version": 1')
    proc = nas("latency", "show", str(bad), check=False)
    assert proc.returncode == 2 and "corrupt or truncated" in proc.stderr and "Traceback" not in proc.stderr
    proc = nas("latency", "profile", *SMALL, "--provider", "cuda", "--device", "gpu", "--out", str(tmp_path / "g.json"),
               check=False)
    assert proc.returncode == 2 and "CUDAExecutionProvider" in proc.stderr and "onnxruntime-gpu" in proc.stderr
    assert not (tmp_path / "g.json").exists()
    for backend, message in (("onnxruntime", "--cuda-graph: only the torch backend captures CUDA graphs"),
                             ("torch", "cuda_graph needs a CUDA device")):
        proc = nas("latency", "profile", *SMALL, "--backend", backend, "--cuda-graph", "--device", "gpu",
                   "--out", str(tmp_path / "g.json"), check=False)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1
        assert not (tmp_path / "g.json").exists()


def test_an_output_path_that_cannot_be_written_is_one_line_and_a_closed_pipe_is_quiet(tmp_path):
    note = tmp_path / "notes.txt"
    note.write_text("keep me")
    for args in (["profile", *SMALL, "--device", "d", "--out", str(note / "t.json")],
                 ["kit", *SMALL, "--device", "d", "--out", str(note / "kit.zip")]):
        proc = nas("latency", *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"{note} is not a folder; cannot write {note}/" in proc.stderr
    assert note.read_text() == "keep me"
    # the reader of the output goes away after one line (nas list | head -1): no BrokenPipeError traceback
    proc = subprocess.run(f"{sys.executable} -m hwnas.cli list -v | head -1", shell=True, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_mistyped_provider_lists_the_providers(tmp_path):
    proc = nas("latency", "profile", *SMALL, "--provider", "cdua", "--device", "d", "--out", str(tmp_path / "t.json"),
               check=False)
    assert proc.returncode == 2 and "unknown provider 'cdua'; one of cpu, cuda, tensorrt" in proc.stderr
    assert "onnxruntime-gpu" not in proc.stderr and not (tmp_path / "t.json").exists()
