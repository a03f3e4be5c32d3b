"""The ``nas`` command as a user runs it: real processes, a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

NAS = [sys.executable, "-m", "hwnas.cli"]


def nas(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*NAS, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"nas {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.slow
def test_run_report_export_end_to_end(tiny_yaml, tmp_path):
    out = nas("run", str(tiny_yaml), "--quiet")
    run_dir = tmp_path / "runs" / "tiny"
    assert "Pareto front" in out.stdout and (run_dir / "pareto.png").stat().st_size > 10_000
    front = json.loads((run_dir / "pareto.json").read_text())["front"]
    rep = nas("report", str(run_dir))
    for member in front:
        assert member["arch_id"][:6] in rep.stdout
    assert "10 trials" in rep.stdout
    exp = nas("export", str(run_dir), "--out", str(tmp_path / "exported"), "--repeats", "5", "--rounds", "1")
    exported = tmp_path / "exported"
    for member in front:
        names = {p.name for p in exported.glob(f"{member['arch_id']}.*")}
        assert names == {f"{member['arch_id']}{ext}" for ext in (".onnx", ".fp16.onnx", ".int8.onnx", ".pt2", ".json")}
    assert "max |onnx - torch|" in exp.stdout and "cpu-int8" in exp.stdout


def test_validate_and_list():
    repo = Path(__file__).resolve().parents[2]
    out = nas("validate", str(repo / "experiments" / "quickstart.yaml"))
    assert "ok" in out.stdout and "objective  max top1 (from train; hypervolume reference 0" in out.stdout
    assert ("min latency_ms (from ort_latency; hypervolume reference from constraints[0].max, once the run measures "
            "its largest member)") in out.stdout
    assert "constraint latency_ms <= 0.7 x largest" in out.stdout
    assert "executor   local (threads=2)" in out.stdout
    ls = nas("list", "strategies")
    assert "nsga2" in ls.stdout and "evolution" in ls.stdout
    ex = nas("list", "executors", "-v")
    assert "process" in ex.stdout and "workers = 2" in ex.stdout and "fake" not in ex.stdout
    sp = nas("list", "spaces", "-v").stdout  # defaults as one would write them in YAML, not as Python reprs
    assert "stages = [{widths: [16, 24, 32], depths: [1, 2, 3]}," in sp and "Spec(" not in sp
    assert "usage: nas" in nas("--help").stdout


def test_bad_input_is_one_clear_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsaed: 1\n")
    proc = nas("validate", str(bad), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "saed: unknown key; did you mean 'seed'?" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = nas("run", "--resume", str(tmp_path / "nothing-here"), check=False)
    assert proc.returncode == 2 and "no such run directory" in proc.stderr


def test_corrupt_journal_on_resume_names_the_line_and_keeps_the_file(tiny_yaml, tmp_path):
    nas("run", str(tiny_yaml), "--quiet", "--set", "budget.trials=3", "--set", "export.enabled=false")
    run_dir = tmp_path / "runs" / "tiny"
    journal = run_dir / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"status": "', '"status": "bogus')
    journal.write_text("".join(lines))
    before = journal.read_bytes()
    proc = nas("run", "--resume", str(run_dir), "--quiet", check=False)
    assert proc.returncode == 2 and "trials.jsonl:2: corrupt journal line" in proc.stderr
    assert journal.read_bytes() == before


def test_a_resumed_run_reports_the_journals_evaluation_time_beside_its_own(tiny_yaml, tmp_path):
    nas("run", str(tiny_yaml), "--quiet", "--set", "budget.trials=4", "--set", "export.enabled=false")
    run_dir = tmp_path / "runs" / "tiny"
    journal = run_dir / "trials.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:2]))  # as a kill after two trials
    (run_dir / "summary.json").unlink()
    text = " ".join(nas("run", "--resume", str(run_dir), "--quiet").stdout.split())  # rich wraps at 80 columns
    assert "2 evaluated now, 2 reused from the journal" in text
    assert "s of evaluation in the journal, earlier sessions included)" in text
    total = sum(json.loads(line)["cost_s"] for line in journal.read_text().splitlines())
    search = json.loads((run_dir / "summary.json").read_text())["search"]
    assert search["journal_evaluation_s"] == pytest.approx(total, abs=1e-3) and total > 0


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing_and_matches_an_uninterrupted_run(tiny_yaml, tmp_path):
    """Kill a real ``nas run`` with SIGKILL mid-search, resume it, and compare with a run never interrupted."""
    reference = tmp_path / "reference"
    nas("run", str(tiny_yaml), "--quiet", "--run-dir", str(reference), "--set", "export.enabled=false")

    killed = tmp_path / "killed"
    proc = subprocess.Popen([*NAS, "run", str(tiny_yaml), "--quiet", "--run-dir", str(killed),
                             "--set", "export.enabled=false"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = killed / "trials.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) >= 4:
            break
        if proc.poll() is not None:
            pytest.fail("the run finished before it could be killed")
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = journal.read_text().splitlines()
    finished_before = [json.loads(line) for line in before if line.strip().endswith("}")]
    assert 4 <= len(finished_before) < 10

    nas("run", "--resume", str(killed), "--quiet")
    after = [json.loads(line) for line in journal.read_text().splitlines()]
    # nothing lost: every trial finished before the kill is still there, unchanged, and none was repeated
    assert after[: len(finished_before)] == finished_before
    assert len({t["arch_id"] for t in after}) == len(after) == 10
    ref = [json.loads(line) for line in (reference / "trials.jsonl").read_text().splitlines()]
    key = lambda t: (t["number"], t["arch_id"], t["status"], t["metrics"])  # noqa: E731
    assert sorted(map(key, after)) == sorted(map(key, ref))
    front = lambda d: [(t["arch_id"], t["metrics"]) for t in json.loads((d / "pareto.json").read_text())["front"]]  # noqa: E731
    assert front(killed) == front(reference) and front(reference)


def test_list_says_required_for_a_parameter_without_default(capsys):
    from hwnas.cli import main

    assert main(["list", "evaluators", "-v"]) == 0
    out = capsys.readouterr().out
    assert "PydanticUndefined" not in out
    assert "      table = (required)  CSV file with a header row" in out  # benchmark's table
    assert "      file = (required)  a predictor saved by `nas predictor fit` (JSON)" in out
