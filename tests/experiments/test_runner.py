from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwnas.errors import RunDirectoryError
from hwnas.experiments import run_experiment
from hwnas.experiments.api import prepare


def _front(run_dir: Path):
    return [(t["arch_id"], t["metrics"]) for t in json.loads((run_dir / "pareto.json").read_text())["front"]]


def test_run_writes_the_run_directory(tiny_yaml, tmp_path):
    res = run_experiment(tiny_yaml)
    d = res.run_dir
    assert d == tmp_path / "runs" / "tiny"
    for name in ("config.yaml", "env.json", "trials.jsonl", "pareto.csv", "pareto.json", "pareto.png"):
        assert (d / name).is_file(), name
    assert len(res.trials) == 10 and res.evaluated == 10
    assert len({t.arch.arch_id for t in res.trials}) == 10
    env = json.loads((d / "env.json").read_text())
    assert env["versions"]["torch"] and env["cpu"]
    # infeasible candidates were never trained: they have cheap metrics only
    for t in res.trials:
        if t.status == "infeasible":
            assert "top1" not in t.metrics and t.metrics["params_m"] > 0.05
        else:
            assert "top1" in t.metrics and t.metrics["params_m"] <= 0.05
    # exported front: one ONNX file and one card per member, checked against torch
    for t in res.front:
        card = json.loads((d / "models" / f"{t.arch.arch_id}.json").read_text())
        assert (d / "models" / f"{t.arch.arch_id}.onnx").is_file()
        assert card["trained_weights"] is True and card["onnx"]["max_abs_diff_vs_torch"] < 1e-3
        assert card["measured_metrics"]["top1"] == t.metrics["top1"]
        assert abs(card["onnx"]["top1_heldout"] - t.metrics["top1"]) < 0.02


def test_a_second_run_never_overwrites_the_first(tiny_yaml, tmp_path):
    first = run_experiment(tiny_yaml, overrides=["budget.trials=2", "export.enabled=false"])
    before = (first.run_dir / "trials.jsonl").read_bytes()
    second = run_experiment(tiny_yaml, overrides=["budget.trials=2", "export.enabled=false"])
    assert second.run_dir == tmp_path / "runs" / "tiny-2"
    assert (first.run_dir / "trials.jsonl").read_bytes() == before
    with pytest.raises(RunDirectoryError, match=r"holds a run already; use --resume .*tiny to continue it"):
        prepare(tiny_yaml, run_dir=first.run_dir)
    killed = tmp_path / "killed"  # a start killed before it wrote its config left only its lock: a new run goes there
    killed.mkdir()
    (killed / ".lock").write_text("")
    assert prepare(tiny_yaml, run_dir=killed)[1] == killed


def test_resume_from_a_cut_journal_repeats_nothing_and_ends_at_the_same_front(tiny_yaml, tmp_path):
    full = run_experiment(tiny_yaml, run_dir=tmp_path / "full")
    cut = tmp_path / "cut"
    partial = run_experiment(tiny_yaml, run_dir=cut, overrides=[])
    lines = (cut / "trials.jsonl").read_text().splitlines(keepends=True)
    (cut / "trials.jsonl").write_text("".join(lines[:6]))
    resumed = run_experiment(resume=cut)
    assert resumed.reused == 6 and resumed.evaluated == 4
    assert [t.arch.arch_id for t in resumed.trials] == [t.arch.arch_id for t in full.trials]
    assert _front(cut) == _front(full.run_dir)
    assert len(partial.trials) == 10


def test_resume_refuses_a_changed_config(tiny_yaml, tmp_path):
    run_experiment(tiny_yaml, overrides=["budget.trials=2", "export.enabled=false"])
    with pytest.raises(RunDirectoryError, match=r"differs from this config at budget\.trials"):
        prepare(resume=tiny_yaml)  # the file says 10 trials, the run was started with 2


def test_resume_by_file_picks_the_latest_run(tiny_yaml, tmp_path):
    run_experiment(tiny_yaml, overrides=["export.enabled=false"])
    run_experiment(tiny_yaml, overrides=["export.enabled=false"])
    with pytest.raises(RunDirectoryError, match="differs"):
        prepare(resume=tiny_yaml)  # export.enabled differs
    _, directory, resuming = prepare(resume=tiny_yaml, overrides=["export.enabled=false"])
    assert directory.name == "tiny-2" and resuming


def test_a_failing_evaluation_is_recorded_and_the_run_goes_on(tiny_yaml, tmp_path):
    # a learning rate this large makes the loss overflow: each training fails with a clear error
    res = run_experiment(tiny_yaml, overrides=["evaluators.1.params.lr=1e30", "export.enabled=false",
                                               "budget.trials=4"])
    failed = [t for t in res.trials if t.status == "failed"]
    assert failed and all("non-finite" in t.error for t in failed)
    assert all(t.status != "ok" for t in res.trials)
    assert res.front == []
