"""SIGKILL a real ``nas supernet train`` at random moments, resuming after each, then race two resumes: the final
weights (every tensor, bit for bit) and curves equal an uninterrupted training's."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

NAS = [sys.executable, "-c", "import sys; from hwnas.cli import main; sys.exit(main(sys.argv[1:]))"]
KILLS = 5  # each kill starts a training process: five random moments keep the check, at CI cost

SUPERNET = """\
supernet:
  name: killme
  space:
    name: mbv3
    params:
      resolution: 8
      stem_channels: 8
      head_channels: 16
      stages:
        - {channels: 8, stride: 1, depths: [1, 2]}
        - {channels: 16, stride: 2, depths: [1, 2], se: true}
  dataset: {name: digits, max_images: 320}
  phases:
    - {phase: largest, epochs: 2}
    - {phase: kernel, epochs: 1}
    - {phase: expand, epochs: 1}
  batch_size: 32
  random_subnets: 1
  calib_images: 64
  checkpoint_every: 2
  seed: 3
  device: cpu
  threads: 1
"""


def _train(exp: Path, out: Path, *, resume: bool) -> subprocess.Popen[bytes]:
    cmd = [*NAS, "supernet", "train", str(exp), "--out", str(out), "--quiet"] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _has_checkpoint(out: Path) -> bool:
    return (out / "checkpoint").is_dir() or (out / "checkpoint.old").is_dir()


def _mtime(state: Path) -> int | None:
    """The checkpoint's state file's mtime, or None: the trainer swaps the whole folder, so the file can vanish
    between any two looks (exists, then stat) while the trainer runs."""
    try:
        return state.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _weights(out: Path) -> dict[str, object]:
    from safetensors.torch import load_file

    return load_file(str(out / "checkpoint" / "supernet.safetensors"))


def _curves(out: Path) -> list[tuple[str, str, str, str]]:
    with open(out / "curves.csv", newline="") as fh:
        return [(r["phase"], r["epoch"], r["largest_top1"], r["smallest_top1"]) for r in csv.DictReader(fh)]


@pytest.mark.slow
def test_random_kills_and_racing_resumes_leave_the_uninterrupted_weights(tmp_path: Path) -> None:
    import torch

    exp = tmp_path / "sn.yaml"
    exp.write_text(SUPERNET)
    reference, out = tmp_path / "reference", tmp_path / "out"
    started = time.perf_counter()
    ref = _train(exp, reference, resume=False)
    _, err = ref.communicate(timeout=600)
    assert ref.returncode == 0, err.decode()[-2000:]
    whole = time.perf_counter() - started  # start-up and training, on this machine now

    rng = np.random.default_rng(2026)
    kills = early = finished_early = 0
    while kills < KILLS:
        state = out / "checkpoint" / "state.json"
        before = _mtime(state)
        proc = _train(exp, out, resume=_has_checkpoint(out))
        if rng.random() < 0.25:  # now and then during start-up (imports, data, the first checkpoint)
            time.sleep(float(rng.uniform(0.1, 3.0)))
        else:  # else while it trains: after it wrote a checkpoint of its own, at a random moment of the next steps
            deadline = time.monotonic() + whole + 60
            while proc.poll() is None and time.monotonic() < deadline and _mtime(state) in (None, before):
                time.sleep(0.02)
            time.sleep(float(rng.uniform(0.0, 1.5)))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
            if _has_checkpoint(out) and _mtime(state) not in (None, before):
                kills += 1
            else:
                early += 1
        else:
            _, err = proc.communicate()
            assert proc.returncode == 0, err.decode()[-2000:]
            finished_early += 1
            break

    # two resumes at once: one holds the folder, the other is refused (or finds the training finished)
    racers = [_train(exp, out, resume=True) for _ in range(2)]
    outcomes = []
    for p in racers:
        o, e = p.communicate(timeout=600)
        outcomes.append((p.returncode, o.decode(), e.decode()))
    assert any(code == 0 for code, _, _ in outcomes), outcomes
    for code, _, e in outcomes:
        assert code == 0 or "in use by process" in e, e
    refused = sum(code != 0 for code, _, _ in outcomes)
    last = _train(exp, out, resume=True)  # whatever the race left, the training is complete now
    o, e = last.communicate(timeout=600)
    assert last.returncode == 0 and "already finished" in o.decode(), (o.decode(), e.decode())

    print(f"kills {kills} (and {early} before the start wrote a checkpoint), finished before a kill {finished_early}, "
          f"racing resumes refused {refused} of 2")
    assert kills == KILLS or finished_early
    a, b = _weights(reference), _weights(out)
    assert a.keys() == b.keys()
    differ = [k for k in a if not torch.equal(a[k], b[k])]  # type: ignore[arg-type]
    assert not differ, f"weights differ from the uninterrupted training's: {differ[:5]}"
    assert _curves(out) == _curves(reference)


def test_a_second_training_of_the_same_folder_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    """The lock itself, without timing: held by this process, a resume in another process is refused naming it,
    and nothing in the folder changes."""
    from hwnas.fileio import FolderLock

    exp = tmp_path / "sn.yaml"
    exp.write_text(SUPERNET)
    out = tmp_path / "out"
    out.mkdir()
    with FolderLock(out):
        done = subprocess.run([*NAS, "supernet", "train", str(exp), "--out", str(out), "--quiet"],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "in use by process" in done.stderr and str(os.getpid()) in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".lock"]
