"""``nas export`` replaces nothing without --force, exports no untrained model without --random-init, and
``nas report`` leaves a run (its journal included) byte for byte as it was; ``nas export --out DIR`` changes one file
of it, the record of DIR in ``models/export.json`` (so ``nas report`` finds DIR), never its journal (torn or not),
config, weights or run.json, and a read-only run still exports. Real runs, no mocks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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

    # an export elsewhere changes one file of the run: its record in models/export.json; the torn journal (and
    # everything else) byte for byte, not repaired
    assert main(["export", str(run_dir), "--out", str(tmp_path / "elsewhere")]) == 0
    after = _snapshot(run_dir)
    assert _without_index(after) == _without_index(before)
    assert not (run_dir / "trials.jsonl.torn").exists()
    recorded = json.loads(after[INDEX_IN_RUN])
    (entry,) = recorded.pop("exports")
    assert recorded == json.loads(before[INDEX_IN_RUN]) and entry["path"] == str((tmp_path / "elsewhere").resolve())

    # the runner's resume is the one reader that repairs; it re-exports into its own models/ folder, keeping the
    # record of the export elsewhere
    resumed = run_experiment(resume=run_dir)
    assert resumed.reused == 4 and resumed.evaluated == 0
    assert journal.read_bytes() == before["trials.jsonl"][: -len(TORN)]
    assert (run_dir / "trials.jsonl.torn").read_bytes() == TORN + b"\n"
    assert _deterministic(_snapshot(run_dir / "models")) == _deterministic({
        k.split("/", 1)[1]: v for k, v in after.items() if k.startswith("models/")})


INDEX_IN_RUN = "models/export.json"


def _without_index(snapshot: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in snapshot.items() if k != INDEX_IN_RUN}


def test_an_export_elsewhere_is_recorded_in_the_run_and_the_report_finds_it(tiny_yaml, tmp_path, capsys):
    run_dir = _run(tiny_yaml)
    index_path = run_dir / INDEX_IN_RUN
    own = json.loads(index_path.read_text())
    before = _snapshot(run_dir)
    out = tmp_path / "exported"
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(out), "--formats", "onnx", "--no-measure"]) == 0
    assert "note:" not in capsys.readouterr().err
    assert _without_index(_snapshot(run_dir)) == _without_index(before)
    index = json.loads(index_path.read_text())
    (entry,) = index.pop("exports")
    assert index == own  # every other key of the run's own index as it was
    assert entry["path"] == str(out.resolve()) and Path(entry["path"]).is_absolute()
    assert entry["models"] == json.loads((out / "export.json").read_text())["models"] and entry["models"]
    assert entry["created"] == json.loads((out / "export.json").read_text())["created"]

    # the same folder again (--force): one entry, renewed; another folder, given relative: a second, absolute
    assert main(["export", str(run_dir), "--out", str(out), "--formats", "onnx", "--no-measure", "--force",
                 "--top-k", "1", "--by", "top1"]) == 0
    (entry,) = json.loads(index_path.read_text())["exports"]
    assert entry["path"] == str(out.resolve()) and len(entry["models"]) == 1
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert main(["export", str(run_dir), "--out", "second", "--formats", "onnx", "--no-measure"]) == 0
    finally:
        os.chdir(cwd)
    paths = [e["path"] for e in json.loads(index_path.read_text())["exports"]]
    assert paths == [str(out.resolve()), str((tmp_path / "second").resolve())]

    # the run's own export into models/ keeps the record
    assert main(["export", str(run_dir), "--force", "--formats", "onnx", "--no-measure"]) == 0
    assert [e["path"] for e in json.loads(index_path.read_text())["exports"]] == paths

    # nas report finds both folders through the run's index, without --exports
    page = tmp_path / "page.html"
    capsys.readouterr()
    assert main(["report", str(run_dir), "--html", "--out", str(page)]) == 0
    text = page.read_text()
    assert text.count(f"listed in {index_path}") == 2 and str(out.resolve()) in text
    assert "warning:" not in capsys.readouterr().err

    # a folder moved away since: named in one note, not an error; the other is still shown
    out.rename(tmp_path / "moved")
    assert main(["report", str(run_dir), "--html", "--out", str(page), "--force"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(notes) == 1 and str(out.resolve()) in notes[0] and "missing (moved or deleted)" in notes[0], notes
    assert page.read_text().count(f"listed in {index_path}") == 1


def _read_only_export(run_dir: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """``nas export`` in a child process that cannot write into ``run_dir``: its files and folders made read-only
    with chmod (restored afterwards) or, as root (whom file modes do not stop), ``run_dir`` bind-mounted read-only
    in a private mount namespace (``unshare --mount``)."""
    cmd = [sys.executable, "-m", "hwnas.cli", *args]
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [run_dir, *run_dir.rglob("*")]}
        for p, mode in modes.items():
            p.chmod(mode & ~0o222)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        finally:
            for p, mode in sorted(modes.items(), key=lambda kv: len(kv[0].parts)):
                p.chmod(mode)
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("as root, file modes do not stop writes, and this host allows no private read-only mount "
                    "(unshare --mount) to make the run read-only")
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99; shift; exec "$@"'
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(run_dir), *cmd], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode == 99:
        pytest.skip(f"as root, file modes do not stop writes, and a read-only bind mount is refused: {proc.stderr}")
    return proc


def test_a_read_only_run_still_exports_and_says_it_was_not_recorded(tiny_yaml, tmp_path):
    run_dir = _run(tiny_yaml)
    before = _snapshot(run_dir)
    out = tmp_path / "exported"
    proc = _read_only_export(run_dir, ["export", str(run_dir), "--out", str(out), "--formats", "onnx",
                                       "--no-measure"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "error:" not in proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, proc.stderr
    assert "is not recorded in the run" in notes[0] and str(run_dir / INDEX_IN_RUN) in notes[0]
    assert f"--exports {out}" in notes[0]
    assert _snapshot(run_dir) == before  # nothing of the run changed, no temporary file left
    index = json.loads((out / "export.json").read_text())
    assert index["models"] and all((out / f"{m}.onnx").is_file() for m in index["models"])


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
