from __future__ import annotations

import json

import pytest

from hwnas.architecture import Architecture
from hwnas.errors import JournalError
from hwnas.experiments.journal import Journal, read_trials
from hwnas.objectives import Trial


def _trials(n):
    return [Trial(i, Architecture("toy", {"i": i}), {"top1": 0.5 + i / 100}, "ok", 0.1) for i in range(n)]


def test_append_and_read_back(tmp_path):
    j = Journal(tmp_path / "trials.jsonl")
    for t in _trials(3):
        j.append(t, "fp")
    back = j.read()
    assert [t.number for t, _ in back] == [0, 1, 2] and {fp for _, fp in back} == {"fp"}
    assert back[2][0].metrics["top1"] == pytest.approx(0.52)


def test_torn_last_line_is_set_aside_and_the_rest_kept_on_repair(tmp_path):
    path = tmp_path / "trials.jsonl"
    j = Journal(path)
    for t in _trials(2):
        j.append(t, "fp")
    with open(path, "a") as fh:
        fh.write('{"number": 2, "arch": {"spa')  # a crash in the middle of a write
    back = j.read(repair=True)
    assert [t.number for t, _ in back] == [0, 1]
    assert path.read_text().endswith("\n") and len(path.read_text().splitlines()) == 2
    assert (tmp_path / "trials.jsonl.torn").read_text().startswith('{"number": 2')


def test_plain_read_skips_a_torn_last_line_and_changes_nothing(tmp_path, caplog):
    path = tmp_path / "trials.jsonl"
    j = Journal(path)
    for t in _trials(2):
        j.append(t, "fp")
    with open(path, "a") as fh:
        fh.write('{"number": 2, "arch": {"spa')
    before, listing = path.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
    with caplog.at_level("WARNING", logger="hwnas.experiments.journal"):
        assert [t.number for t, _ in j.read()] == [0, 1]
    assert [t.number for t in j] == [0, 1]
    assert [t.number for t in read_trials(tmp_path)] == [0, 1]
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == listing
    assert not (tmp_path / "trials.jsonl.torn").exists()
    assert "cut off by a crash" in caplog.text and "skipped" in caplog.text


def test_corrupt_line_in_the_middle_names_its_line_and_changes_nothing(tmp_path):
    path = tmp_path / "trials.jsonl"
    j = Journal(path)
    for t in _trials(3):
        j.append(t, "fp")
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = "not json\n"
    path.write_text("".join(lines))
    before = path.read_bytes()
    with pytest.raises(JournalError, match=r"trials.jsonl:2: corrupt journal line"):
        j.read()
    assert path.read_bytes() == before


def test_line_with_a_wrong_arch_id_is_corrupt(tmp_path):
    path = tmp_path / "trials.jsonl"
    j = Journal(path)
    j.append(_trials(1)[0], "fp")
    path.write_text(path.read_text().replace('"arch_id": "', '"arch_id": "f'))
    with pytest.raises(JournalError, match=":1:"):
        j.read()


def test_costly_trials_are_flushed_at_once_cheap_ones_with_the_batch(tmp_path):
    """What another process (the OS after a kill) sees: a costly trial at once, cheap ones after sync()."""
    path = tmp_path / "trials.jsonl"
    with Journal(path).writer("fp") as w:
        w.append(Trial(0, Architecture("toy", {"i": 0}), {"top1": 0.5}, "ok", cost_s=1e-5))
        assert path.read_text() == ""  # buffered: cheaper to redo than to flush
        w.append(Trial(1, Architecture("toy", {"i": 1}), {"top1": 0.6}, "ok", cost_s=30.0))
        assert [json.loads(line)["number"] for line in path.read_text().splitlines()] == [0, 1]
        w.append(Trial(2, Architecture("toy", {"i": 2}), {"top1": 0.7}, "ok", cost_s=1e-5))
        w.sync()  # the runner's per-batch call, before the strategy is told
        assert len(path.read_text().splitlines()) == 3
    assert [t.number for t in Journal(path)] == [0, 1, 2]


def test_journal_line_is_the_trial_dict(tmp_path):
    """The fast line writer gives exactly to_dict() (plus the fingerprint), NaN as null."""
    t = Trial(7, Architecture("toy", {"i": 3, "w": [1, 2]}), {"top1": 0.5, "lat\"ms": float("nan"), "up": float("inf"),
                                                               "down": -float("inf"), "é": 1e-300}, "failed",
              0.25, error='bad "cell"\n')
    with Journal(tmp_path / "trials.jsonl").writer("fp") as w:
        w.append(t)
    line = json.loads((tmp_path / "trials.jsonl").read_text())
    assert line == {**t.to_dict(), "fingerprint": "fp"} and line["metrics"]["lat\"ms"] is None
    assert line["metrics"]["up"] is None and line["metrics"]["down"] is None and line["metrics"]["é"] == 1e-300
    assert json.loads(t.to_json(a="x", b='"y\\')) == {**t.to_dict(), "a": "x", "b": '"y\\'}
