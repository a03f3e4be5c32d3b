"""The equal-time benchmark (benchmarks/supernet_search.py): supernet search against training every candidate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from supernet_search import RESCORE_SEED, main

TINY = """\
supernet:
  name: tiny
  space: {name: nb201, params: {resolution: 8, channels: 4, cells_per_stage: 1}}
  dataset: {name: digits, max_images: 240}
  phases: [{phase: uniform, epochs: 1}]
  batch_size: 32
  random_subnets: 1
  calib_images: 64
  device: cpu
"""


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("error: ") for line in err), err
    return err


def test_both_searches_run_at_equal_wall_time_and_their_fronts_are_retrained(tmp_path: Path) -> None:
    file = tmp_path / "tiny.yaml"
    file.write_text(TINY)
    out = tmp_path / "out"
    assert main([str(file), "--candidates", "6", "--batch", "3", "--strategy-params", '{"pop_size": 3}',
                 "--epochs", "1", "--rescore-seeds", "1", "--workers", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "supernet_search.json").read_text())
    assert summary["rescore_seeds"] == [RESCORE_SEED]
    assert 0 < summary["box"]["top1"] <= 1 and summary["box"]["flops_m"] > 0
    result = summary["seeds"]["0"]
    sup, alone = result["supernet"], result["train"]
    assert sup["candidates"] == 6
    # the train search counts only what finished within the supernet search's whole cost (its training included)
    assert sup["cost_s"] == alone["cost_s"] >= summary["supernet_training_s"] + sup["search_wall_s"] - 1e-6
    assert alone["candidates"] >= 1 and alone["last_counted_s"] <= alone["cost_s"]
    for arm in (sup, alone):
        assert arm["front_size"] == len(arm["members"]) >= 1
        assert all(0 <= m["rescored_top1"] <= 1 and m["flops_m"] > 0 for m in arm["members"])
        assert arm["best_top1"] == max(m["rescored_top1"] for m in arm["members"])
        assert 0 <= arm["hypervolume_fraction_of_both"] <= 1
    assert (out / "seed0" / "supernet" / "trials.jsonl").is_file()
    assert (out / "seed0" / "train" / "trials.jsonl").is_file()
    assert (out / "supernet_search.png").is_file()
    # a second run into the same folder is refused: nothing there is overwritten
    before = (out / "supernet_search.json").read_bytes()
    assert main([str(file), "--out", str(out)]) == 2
    assert (out / "supernet_search.json").read_bytes() == before


def test_bad_numbers_are_refused_before_any_work_one_line_each(tmp_path: Path, capsys) -> None:
    file = tmp_path / "tiny.yaml"
    file.write_text(TINY)
    out = tmp_path / "out"
    assert main([str(file), "--candidates", "1", "--rescore-seeds", "0", "--seeds", "3", "3",
                 "--flops-fracs", "1.5", "--strategy-params", "[1]", "--out", str(out)]) == 2
    err = _errors(capsys)
    assert "error: --candidates must be at least 2, got 1" in err
    assert "error: --rescore-seeds must be at least 1, got 0" in err
    assert "error: --seeds: a seed given twice (3 3)" in err
    assert "error: --flops-fracs must lie in (0, 1], got 1.5" in err
    assert "error: --strategy-params: a JSON object, not '[1]'" in err
    assert not out.exists()


def test_a_checkpoint_of_other_data_is_refused_naming_both(tmp_path: Path, capsys) -> None:
    import argparse

    from hwnas.cli.supernet import _load_config
    from hwnas.supernet.train import train_supernet

    file = tmp_path / "tiny.yaml"
    file.write_text(TINY)
    ckpt = tmp_path / "sn"
    train_supernet(_load_config(argparse.Namespace(file=str(file), overrides=[])), ckpt)
    other = tmp_path / "mnist.yaml"
    other.write_text(TINY.replace("{name: digits, max_images: 240}", "{name: mnist5k}"))
    out = tmp_path / "out"
    assert main([str(other), "--checkpoint", str(ckpt), "--out", str(out)]) == 2
    (err,) = _errors(capsys)
    assert f"--checkpoint {ckpt}: the checkpoint was trained on digits" in err and "the scoring data is mnist5k" in err
    assert not out.exists()
