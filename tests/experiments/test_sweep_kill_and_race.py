"""SIGKILL a real ``nas sweep`` (its whole process group: the driver and the Ray cluster it started) at random
moments, resuming after each, then race two resumes: every trial's run ends with the uninterrupted sweep's
journal, nothing lost or duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ..docs.doc_examples import own_process_group

pytest.importorskip("ray")

NAS = [sys.executable, "-c", "import sys; from hwnas.cli import main; sys.exit(main(sys.argv[1:]))"]
KILLS = 3

EXPERIMENT = """\
name: swk
seed: 1
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params: {{table: {table}, columns: {{top1: cifar10_test_200ep}}, cost_s_per_query: 0.2, cheap: false}}
objectives:
  - {{metric: top1, direction: max}}
strategy: {{name: random}}
budget: {{trials: 24, batch_size: 4}}
export: {{enabled: false}}
"""

SWEEP = "name: swk\nbase: exp.yaml\nparams: {{seed: {{grid: [0, 1]}}}}\nmax_concurrent: 2\noutput: {{root: {root}}}\n"


def _sweep(path: Path, *, resume: bool) -> subprocess.Popen[bytes]:
    # its own process group (killed at once below), in this session (own_process_group says why)
    return subprocess.Popen([*NAS, "sweep", str(path), *(["--resume"] if resume else [])], cwd=path.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **own_process_group())


def _started(sweep_dir: Path) -> bool:
    """Whether a start got as far as Tune's first file (from there on, --resume continues it)."""
    return (sweep_dir / "tune" / "tuner.pkl").is_file()


def _journals(sweep_dir: Path) -> dict[int, list[tuple[str, str, str]]]:
    """Per swept seed, the run's journal as (arch_id, status, metrics), sorted."""
    rows = json.loads((sweep_dir / "results.json").read_text())
    out = {}
    for row in rows:
        lines = (sweep_dir / "runs" / row["trial"] / "trials.jsonl").read_text().splitlines()
        trials = [json.loads(line) for line in lines if line.strip()]
        ids = [t["arch_id"] for t in trials]
        assert len(ids) == len(set(ids)), f"trial {row['trial']}: an architecture journalled twice"
        out[int(row["seed"])] = sorted((t["arch_id"], t["status"], json.dumps(t["metrics"], sort_keys=True))
                                       for t in trials)
    return out


@pytest.mark.slow
def test_random_kills_and_racing_resumes_of_a_sweep_lose_and_duplicate_nothing(tmp_path: Path, shared_data: Path
                                                                                ) -> None:
    (tmp_path / "exp.yaml").write_text(EXPERIMENT.format(table=shared_data / "nas-bench-201" / "nb201_accuracy.csv"))
    (tmp_path / "ref.yaml").write_text(SWEEP.format(root=tmp_path / "ref"))
    (tmp_path / "sw.yaml").write_text(SWEEP.format(root=tmp_path / "killed"))
    started = time.perf_counter()
    ref = _sweep(tmp_path / "ref.yaml", resume=False)
    _, err = ref.communicate(timeout=600)
    assert ref.returncode == 0, err.decode()[-2000:]
    whole = time.perf_counter() - started
    sweep_dir = tmp_path / "killed" / "swk"

    rng = np.random.default_rng(49)
    kills = early = finished_early = 0
    while kills < KILLS:
        proc = _sweep(tmp_path / "sw.yaml", resume=_started(sweep_dir))
        time.sleep(float(rng.uniform(0.35, 0.8)) * whole + early)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray processes it started, all at once
            proc.communicate()
            if _started(sweep_dir):
                kills += 1
            else:
                early += 1
        else:
            _, err = proc.communicate()
            assert proc.returncode == 0, err.decode()[-2000:]
            finished_early += 1
            break

    racers = [_sweep(tmp_path / "sw.yaml", resume=True) for _ in range(2)]
    outcomes = []
    for p in racers:
        _, e = p.communicate(timeout=600)
        outcomes.append((p.returncode, e.decode()))
    assert any(code == 0 for code, _ in outcomes), outcomes
    for code, e in outcomes:
        assert code == 0 or "in use by process" in e, e[-2000:]
    refused = sum(code != 0 for code, _ in outcomes)
    print(f"sweep kills {kills} (and {early} before Tune's first file), finished before a kill {finished_early}, "
          f"racing resumes refused {refused} of 2")
    assert kills == KILLS or finished_early
    got, want = _journals(sweep_dir), _journals(tmp_path / "ref" / "swk")
    assert sorted(got) == sorted(want) == [0, 1]
    for seed in want:
        assert got[seed] == want[seed], f"seed {seed}: the run's trials differ from the uninterrupted sweep's"


@pytest.mark.slow
def test_a_sweep_killed_between_tunes_first_two_files_resumes_with_every_grid_point(tmp_path: Path,
                                                                                    shared_data: Path) -> None:
    """Tune writes tuner.pkl before its experiment state: restoring a sweep killed in between ran one trial with
    no parameters (seed null) and dropped the grid; it is now started afresh, every grid point run once."""
    (tmp_path / "exp.yaml").write_text(EXPERIMENT.format(table=shared_data / "nas-bench-201" / "nb201_accuracy.csv")
                                       .replace("trials: 24", "trials: 8").replace(", cost_s_per_query: 0.2", ""))
    (tmp_path / "sw.yaml").write_text(SWEEP.format(root=tmp_path / "out"))
    sweep_dir = tmp_path / "out" / "swk"
    proc = _sweep(tmp_path / "sw.yaml", resume=False)
    deadline = time.monotonic() + 300
    while not _started(sweep_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep ended before Tune wrote its first file"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert not any((sweep_dir / "tune").glob("experiment_state-*.json")), "killed too late to test this moment"
    done = subprocess.run([*NAS, "sweep", str(tmp_path / "sw.yaml"), "--resume"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    rows = json.loads((sweep_dir / "results.json").read_text())
    assert sorted(r["seed"] for r in rows) == [0, 1], rows
