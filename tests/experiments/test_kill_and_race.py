"""SIGKILL a real ``nas run`` at 20 random moments, resuming after each, then race two resumes: the final
journal equals an uninterrupted run's, with no trial lost or duplicated."""

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

# the real CLI in its own process, with the test evaluators registered ("fake" sleeps like a real evaluation)
NAS = [sys.executable, "-c", "import sys, hwnas.testing; from hwnas.cli import main; sys.exit(main(sys.argv[1:]))"]

EXPERIMENT = """\
name: killme
seed: 5
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params: {{table: {table}, columns: {{top1: cifar10_test_200ep}}}}
  - name: fake
    params: {{sleep_s: 0.25}}
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: fake_cost_ms, direction: min}}
strategy: {{name: evolution, params: {{population_size: 8, sample_size: 4}}}}
budget: {{trials: 100, batch_size: 4}}
export: {{enabled: false}}
"""


def _key(t: dict) -> tuple:
    return (t["number"], t["arch_id"], t["status"], json.dumps(t["metrics"], sort_keys=True))


def journal_lines(run: Path) -> list[dict]:
    """A run's journal, one dict per line, in the file's order."""
    return [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines() if line.strip()]


def kill_at_random_moments(exp: Path, run: Path, *, kills: int, rng: np.random.Generator,
                           window: tuple[float, float] = (0.2, 3.2)) -> tuple[int, int, int]:
    """``nas run exp --run-dir run`` (then ``nas run --resume run``) SIGKILLed after a random wait drawn from
    ``window`` seconds, again and again, until ``kills`` kills landed on a run whose folder existed or a session
    finished first. Returns (kills, kills before the run folder existed, sessions that finished before a kill).

    Start-up (imports) takes about 2 s, so some kills land before it; on a loaded machine it takes longer, and every
    start killed before it wrote its run folder waits a second more next time."""
    done = early = finished_early = 0
    first = True
    while done < kills:
        cmd = [*NAS, "run", str(exp), "--quiet", "--run-dir", str(run)] if first else \
              [*NAS, "run", "--resume", str(run), "--quiet"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(float(rng.uniform(*window)) + early)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            if (run / "config.yaml").exists():
                first = False
                done += 1
            else:
                early += 1
        else:
            assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
            finished_early += 1
            break
        proc.stderr.close()
    return done, early, finished_early


@pytest.mark.slow
def test_twenty_random_kills_and_racing_resumes_lose_and_duplicate_nothing(tmp_path, shared_data):
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(table=shared_data / "nas-bench-201" / "nb201_accuracy.csv"))
    reference, run = tmp_path / "reference", tmp_path / "run"
    subprocess.run([*NAS, "run", str(exp), "--quiet", "--run-dir", str(reference)], check=True,
                   capture_output=True, timeout=600)

    kills, early, finished_early = kill_at_random_moments(exp, run, kills=20, rng=np.random.default_rng(2026))

    # two resumes at once: one holds the run, the other is refused (or finds nothing left to do)
    racers = [subprocess.Popen([*NAS, "run", "--resume", str(run), "--quiet"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE) for _ in range(2)]
    outcomes = []
    for p in racers:
        _, err = p.communicate(timeout=600)
        outcomes.append((p.returncode, err.decode()))
    assert any(code == 0 for code, _ in outcomes), outcomes
    for code, err in outcomes:
        assert code == 0 or "in use by process" in err, err
    if any(code != 0 for code, _ in outcomes):  # the refused one: resume once more to be sure the run is complete
        subprocess.run([*NAS, "run", "--resume", str(run), "--quiet"], check=True, capture_output=True, timeout=600)

    got, want = journal_lines(run), journal_lines(reference)
    ids = [t["arch_id"] for t in got]
    torn = (run / "trials.jsonl.torn").read_text().splitlines() if (run / "trials.jsonl.torn").exists() else []
    print(f"kills {kills} (and {early} before the run folder existed), finished before a kill {finished_early}, "
          f"torn lines set aside {len(torn)}, journal {len(got)} lines, duplicated {len(ids) - len(set(ids))}")
    assert kills == 20 or finished_early
    assert len(ids) == len(set(ids)) == len(want) >= 90, "a trial was duplicated or lost"
    assert sorted(map(_key, got)) == sorted(map(_key, want))  # the same trials, numbers and metrics
    assert [t["number"] for t in sorted(got, key=lambda t: t["number"])] == list(range(len(want)))


def test_a_lock_whose_holder_has_not_named_itself_yet_is_still_refused_as_in_use(tmp_path):
    """The holder takes the flock a moment before it writes its id: a racer reading in between
    must still be refused with the same message (the race the kill test above once lost)."""
    import fcntl

    from hwnas.errors import RunDirectoryError
    from hwnas.experiments.rundir import LOCK, RunLock

    run = tmp_path / "run"
    run.mkdir()
    with open(run / LOCK, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, but the file is still blank
        with pytest.raises(RunDirectoryError, match="in use by process"):
            with RunLock(run):
                pass
    with RunLock(run):  # released by the holder: taken
        assert str(os.getpid()) in (run / LOCK).read_text()
