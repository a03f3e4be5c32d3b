"""``nas export`` replaces nothing without --force, exports no untrained model without --random-init, and
``nas report`` / ``nas export`` leave a run (its journal included) byte for byte as it was. Real runs, no mocks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hwnas.cli import main
from hwnas.experiments import run_experiment

TORN = b'{"number": 99, "arch": {"spa'  # a crash in the middle of a journal write


def _run(tiny_yaml: Path) -> Path:
    """A finished tiny run (trained weights kept, front exported to models/)."""
    result = run_experiment(tiny_yaml, overrides=["budget.trials=4"])
    assert list((result.run_dir / "models").glob("*.onnx")), "the run itself exports its front"
    return result.run_dir


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included), by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _deterministic(snapshot: dict[str, bytes]) -> dict[str, object]:
    """A snapshot of exported models without what is measured anew or dated on each export (the cards'
    re-measured latency, the index's creation time): everything else must be byte for byte the same."""
    out: dict[str, object] = {}
    for name, data in snapshot.items():
        if name.endswith(".json"):
            doc = json.loads(data)
            for key in ("latency", "created", "summary"):
                doc.pop(key, None)
            out[name] = doc
        else:
            out[name] = data
    return out


def _cards(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run_dir / "models").glob("*.json")) if p.name != "export.json"]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_export_refuses_to_replace_any_file_unless_forced(tiny_yaml, tmp_path, capsys):
    run_dir = _run(tiny_yaml)
    models = run_dir / "models"
    before = _snapshot(models)
    capsys.readouterr()

    assert main(["export", str(run_dir)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--force" in line and any(name in line for name in before)
    assert _snapshot(models) == before  # nothing written, nothing left behind (no .part file either)

    # the same through a real process: exactly one line on stderr, exit 2
    proc = subprocess.run([sys.executable, "-m", "hwnas.cli", "export", str(run_dir)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2 and "--force" in _one_error_line(proc.stderr)
    assert _snapshot(models) == before

    assert main(["export", str(run_dir), "--force", "--formats", "onnx"]) == 0
    assert sorted(_snapshot(models)) == sorted(before)
    assert all(card["trained_weights"] is True for card in _cards(run_dir))

    # --out naming an existing file: one clear line, and the file is untouched
    target = tmp_path / "not-a-folder"
    target.write_text("keep me\n")
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(target)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(target) in line and "folder" in line
    assert target.read_text() == "keep me\n"

    # a fresh --out folder needs no --force
    assert main(["export", str(run_dir), "--out", str(tmp_path / "fresh"), "--formats", "onnx"]) == 0
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == sorted(before)


def test_export_without_trained_weights_needs_random_init(tiny_yaml, tmp_path, capsys):
    run_dir = _run(tiny_yaml)
    models = run_dir / "models"
    before = _snapshot(models)
    weights = sorted((run_dir / "weights").glob("*.pt"))
    front_ids = [card["arch_id"] for card in _cards(run_dir)]
    shutil.move(run_dir / "weights", tmp_path / "weights-moved")
    capsys.readouterr()

    assert main(["export", str(run_dir), "--force"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--random-init" in line and f"weights/{front_ids[0]}.pt" in line
    assert _snapshot(models) == before  # trained exports are not replaced by untrained ones

    assert main(["export", str(run_dir), "--random-init"]) == 2  # still no replacing without --force
    assert "--force" in _one_error_line(capsys.readouterr().err)
    assert _snapshot(models) == before

    assert main(["export", str(run_dir), "--random-init", "--force", "--formats", "onnx"]) == 0
    cards = _cards(run_dir)
    assert [c["arch_id"] for c in cards] == front_ids
    assert all(c["trained_weights"] is False and "seeded initialisation" in c["note"] for c in cards)

    shutil.move(tmp_path / "weights-moved", run_dir / "weights")
    assert sorted((run_dir / "weights").glob("*.pt")) == weights
    assert main(["export", str(run_dir), "--force", "--formats", "onnx"]) == 0
    assert all(c["trained_weights"] is True and "note" not in c for c in _cards(run_dir))
    # the same trained export as the run's own (deterministic, but for the re-measured latency)
    assert _deterministic(_snapshot(models)) == _deterministic(before)


def test_report_and_export_leave_a_torn_journal_alone_resume_repairs_it(tiny_yaml, tmp_path, capsys):
    run_dir = _run(tiny_yaml)
    journal = run_dir / "trials.jsonl"
    with open(journal, "ab") as fh:
        fh.write(TORN)
    before = _snapshot(run_dir)

    assert main(["report", str(run_dir)]) == 0
    assert main(["report", str(run_dir), "--all"]) == 0
    assert "4 trials" in capsys.readouterr().out
    assert _snapshot(run_dir) == before  # the journal byte for byte, and no file added (no .torn)
    assert not (run_dir / "trials.jsonl.torn").exists()

    assert main(["export", str(run_dir), "--out", str(tmp_path / "elsewhere")]) == 0
    assert _snapshot(run_dir) == before

    # the runner's resume is the one reader that repairs; it re-exports into its own models/ folder
    resumed = run_experiment(resume=run_dir)
    assert resumed.reused == 4 and resumed.evaluated == 0
    assert journal.read_bytes() == before["trials.jsonl"][: -len(TORN)]
    assert (run_dir / "trials.jsonl.torn").read_bytes() == TORN + b"\n"
    assert _deterministic(_snapshot(run_dir / "models")) == _deterministic({
        k.split("/", 1)[1]: v for k, v in before.items() if k.startswith("models/")})


def test_export_with_a_corrupt_weights_file_is_one_line_and_writes_nothing(tiny_yaml, tmp_path, capsys):
    run_dir = _run(tiny_yaml)
    weights = sorted((run_dir / "weights").glob("*.pt"))
    front_ids = {c["arch_id"] for c in _cards(run_dir)}
    victim = next(w for w in weights if w.stem in front_ids)
    victim.write_bytes(victim.read_bytes()[:100])  # truncated, as by a full disk
    before = _snapshot(run_dir)
    capsys.readouterr()
    assert main(["export", str(run_dir), "--force"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert victim.name in line and "cannot read the weights" in line
    assert _snapshot(run_dir) == before
