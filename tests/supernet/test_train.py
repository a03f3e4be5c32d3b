"""Supernet training end to end on a tiny mbv3 space and digits: curves, checkpoints, resume, refusals, NaN."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from hwnas.errors import ConfigError, TrainingDiverged
from hwnas.supernet.checkpoint import load_supernet, read_identity
from hwnas.supernet.train import SupernetTrainConfig, resolved, train_supernet

SPACE = {
    "name": "mbv3",
    "params": {
        "resolution": 8, "stem_channels": 8, "head_channels": 16,
        "stages": [{"channels": 8, "stride": 1, "depths": [1, 2]},
                   {"channels": 16, "stride": 2, "depths": [1, 2], "se": True}],
    },
}


def config(**over: Any) -> SupernetTrainConfig:
    base: dict[str, Any] = {
        "name": "tiny", "space": SPACE, "dataset": {"name": "digits", "max_images": 320},
        "phases": [{"phase": "largest", "epochs": 1}, {"phase": "kernel", "epochs": 1},
                   {"phase": "expand", "epochs": 1}],
        "batch_size": 32, "random_subnets": 1, "calib_images": 64, "seed": 5, "device": "cpu",
        "checkpoint_every": 3,
    }
    base.update(over)
    return SupernetTrainConfig.model_validate(base)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "checkpoint" / "supernet.safetensors"))


def test_trains_writes_curves_and_a_loadable_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "sn"
    result = train_supernet(config(phases=[{"phase": "largest", "epochs": 3, "lr": 0.2},
                                           {"phase": "kernel", "epochs": 1}, {"phase": "expand", "epochs": 1}]), out)
    assert [r["phase"] for r in result.curves] == ["largest"] * 3 + ["kernel", "expand"]
    assert (out / "curves.png").stat().st_size > 1000
    rows = (out / "curves.csv").read_text().splitlines()
    assert rows[0].startswith("phase,phase_index,epoch") and len(rows) == 6
    assert all(0.0 <= r["largest_top1"] <= 1.0 for r in result.curves)
    # the supernet learnt something: digits has 10 balanced classes (chance 0.1)
    assert result.curves[-1]["largest_top1"] > 0.5, result.curves
    ident = read_identity(out)
    assert ident.space == "mbv3" and ident.space_params["in_chans"] == 1 and ident.space_params["num_classes"] == 10
    sn = load_supernet(out)
    for k, v in weights(out).items():
        assert torch.equal(sn.state_dict()[k], v), k
    assert json.loads((out / "supernet.json").read_text())["seed"] == 5


def test_resume_after_an_interruption_reproduces_the_uninterrupted_run(tmp_path: Path) -> None:
    full = train_supernet(config(), tmp_path / "a")
    part = train_supernet(config(), tmp_path / "b", stop_after_steps=4)
    assert part.steps == 4
    rest = train_supernet(config(), tmp_path / "b", resume=True)
    assert rest.steps == full.steps
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ from the uninterrupted run's"
    assert [r["largest_top1"] for r in rest.curves] == [r["largest_top1"] for r in full.curves]


def test_a_changed_config_or_an_existing_run_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    out = tmp_path / "sn"
    train_supernet(config(), out, stop_after_steps=2)
    before = weights(out)
    with pytest.raises(ConfigError, match="already holds a supernet training run; pass --resume"):
        train_supernet(config(), out)
    with pytest.raises(ConfigError, match=r"config changed since this run started \(batch_size, optimizer.lr\)"):
        train_supernet(config(batch_size=16, optimizer={"lr": 0.1}), out, resume=True)
    after = weights(out)
    assert all(torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(ConfigError, match="no checkpoint to resume from"):
        train_supernet(config(), tmp_path / "empty", resume=True)


def test_a_new_run_refuses_a_folder_of_other_files_and_leaves_them(tmp_path: Path) -> None:
    from hwnas.errors import OutputExists

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "curves.csv").write_text("MINE")
    (mine / "supernet.json").write_text("MINE")
    with pytest.raises(OutputExists, match=r"already holds other files \(supernet.json of another config\)"):
        train_supernet(config(), mine)
    (mine / "supernet.json").unlink()
    (mine / "keep.txt").write_text("MINE")
    with pytest.raises(OutputExists, match=r"already holds other files \(keep.txt\)"):
        train_supernet(config(), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["curves.csv", "keep.txt"]
    assert all(p.read_text() == "MINE" for p in mine.iterdir())
    # a start of the same config killed before its first checkpoint left only its own files: it starts again
    started = tmp_path / "started"
    started.mkdir()
    (started / "supernet.json").write_text(json.dumps(resolved(config())))
    assert train_supernet(config(), started, stop_after_steps=1).steps == 1


def test_a_non_finite_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "sn"
    cfg = config(optimizer={"lr": 1e30, "grad_clip": None, "momentum": 0.0}, checkpoint_every=1)
    with pytest.raises(TrainingDiverged, match=r"non-finite loss .* in phase largest epoch 1 step \d+ .*last good "
                                               r"checkpoint is kept"):
        train_supernet(cfg, out)
    state = weights(out)
    assert all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())
    assert load_supernet(out) is not None


def test_a_checkpoint_of_other_space_parameters_is_refused_naming_them(tmp_path: Path) -> None:
    from hwnas.search_spaces import SPACES

    out = tmp_path / "sn"
    train_supernet(config(), out, stop_after_steps=1)
    params = dict(SPACE["params"], in_chans=1, num_classes=10, resolution=16)
    other = SPACES.create("mbv3", params)
    with pytest.raises(ConfigError, match=r"other parameters: resolution \(checkpoint 8, here 16\)"):
        load_supernet(out, space=other)
    with pytest.raises(ConfigError, match="of space 'mbv3', not 'nb201'"):
        load_supernet(out, space=SPACES.create("nb201", {}))
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match="cannot read the supernet weights"):
        load_supernet(tmp_path / "junk.safetensors")


def test_bad_config_values_are_named(monkeypatch) -> None:
    from hwnas.supernet import SUPERNETS
    from hwnas.supernet.train import build_parts

    with pytest.raises(ConfigError, match="'fast' is not a phase of the mbv3 supernet"):
        build_parts(config(phases=[{"phase": "fast", "epochs": 1}]))
    # every shipped space has a supernet: one without (a plug-in's space, say) is named
    monkeypatch.delitem(SUPERNETS._items, "fbnet", raising=False)  # loaded by an earlier test, or
    monkeypatch.delitem(SUPERNETS._builtins(), "fbnet", raising=False)  # still waiting to be (run alone)
    with pytest.raises(ConfigError, match="no supernet for space 'fbnet'"):
        build_parts(config(space={"name": "fbnet"}))


TINY_SPACES = {
    "mbv3": SPACE["params"],
    "ofa_mbv3": {"resolutions": [32, 40]},
    "vit": {"resolution": 8, "patch_sizes": [4], "embed_dims": [8, 16], "depths": [1, 2], "num_heads": [2],
            "mlp_ratios": [2.0]},
    "convnext": {"resolution": 8, "stages": [{"widths": [8, 16], "depths": [1, 2]}, {"widths": [16], "depths": [1]}],
                 "kernels": [3, 5], "mlp_ratios": [2]},
    "nb201": {"resolution": 8, "channels": 4, "cells_per_stage": 1},
    "darts": {"resolution": 8, "cells": 3, "init_channels": 4, "nodes": 2},
    "fbnet": {},  # fixed at 32 px (HW-NAS-Bench's CIFAR setting)
}


@pytest.mark.parametrize("space", sorted(TINY_SPACES))
def test_every_shipped_supernet_trains_through_its_last_phase(tmp_path: Path, space: str) -> None:
    from hwnas.supernet.train import build_parts

    probe = config(space={"name": space, "params": TINY_SPACES[space]}, phases=None)
    _, supernet, _, _ = build_parts(probe)
    last = supernet.phases[-1]
    cfg = config(space={"name": space, "params": TINY_SPACES[space]}, dataset={"name": "digits", "max_images": 96},
                 phases=[{"phase": last, "epochs": 1}], calib_images=32, eval_images=32)
    out = tmp_path / space
    result = train_supernet(cfg, out)
    assert [r["phase"] for r in result.curves] == [last] and result.steps == 2
    before = supernet.state_dict()
    after = load_supernet(out).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point()), (
        "training changed no weight")


def test_the_command_line_trains_and_names_a_bad_key_with_its_line(tmp_path: Path, capsys: Any) -> None:
    import yaml

    from hwnas.cli import main

    good = {"supernet": {"name": "cli", "space": SPACE, "dataset": {"name": "digits", "max_images": 96},
                         "phases": [{"phase": "expand", "epochs": 1}], "batch_size": 32, "calib_images": 32}}
    path = tmp_path / "sn.yaml"
    path.write_text(yaml.safe_dump(good, sort_keys=False))
    assert main(["supernet", "train", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert "held-out top-1 (digits val split)" in capsys.readouterr().out
    assert main(["supernet", "train", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "pass --resume" in capsys.readouterr().err

    def refused(old: str, new: str, message: str) -> None:
        """The file with ``old`` replaced by ``new``: refused, ``message`` at the line of ``new``, nothing made."""
        text = yaml.safe_dump(good, sort_keys=False).replace(old, new)
        path.write_text(text)
        line = next(i for i, t in enumerate(text.splitlines(), 1) if new in t)
        assert main(["supernet", "train", str(path), "--out", str(tmp_path / "other"), "--quiet"]) == 2
        assert f"sn.yaml:{line}: {message}" in capsys.readouterr().err
        assert not (tmp_path / "other").exists()

    refused("batch_size: 32", "batch_sise: 32", "supernet.batch_sise: unknown key; did you mean 'batch_size'?")
    refused("phase: expand", "phase: expnad", "supernet.phases[0].phase: 'expnad' is not a phase of the mbv3 supernet")


def test_the_resume_command_printed_on_an_interruption_repeats_the_overrides(tmp_path: Path, capsys: Any,
                                                                             monkeypatch: Any) -> None:
    import shlex

    import yaml

    import hwnas.supernet.train as train_mod
    from hwnas.cli import main

    good = {"supernet": {"name": "cli", "space": SPACE, "dataset": {"name": "digits", "max_images": 96},
                         "phases": [{"phase": "expand", "epochs": 2}], "batch_size": 32, "calib_images": 32}}
    path = tmp_path / "sn.yaml"
    path.write_text(yaml.safe_dump(good, sort_keys=False))
    real = train_mod.train_supernet

    def killed(*args: Any, **kw: Any) -> Any:  # a Ctrl-C after the first step's checkpoint
        real(*args, **kw, stop_after_steps=1)
        raise KeyboardInterrupt

    monkeypatch.setattr(train_mod, "train_supernet", killed)
    out = tmp_path / "out dir"
    args = ["supernet", "train", str(path), "--set", "supernet.phases.0.epochs=1", "--out", str(out), "--quiet"]
    assert main(args) == 130
    hint = capsys.readouterr().out.strip().split("continue from the last checkpoint with ")[1]
    assert "--set supernet.phases.0.epochs=1 --resume" in hint
    monkeypatch.setattr(train_mod, "train_supernet", real)
    assert main([*shlex.split(hint)[1:], "--quiet"]) == 0  # the printed command, as a shell would split it
    assert "trained" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bf16 autocast and channels-last)")
def test_trains_on_a_gpu_with_autocast_and_channels_last(tmp_path: Path) -> None:
    cfg = config(device="cuda", amp=True, channels_last=True, phases=[{"phase": "expand", "epochs": 1}])
    result = train_supernet(cfg, tmp_path / "gpu")
    assert result.curves and 0.0 <= result.curves[0]["largest_top1"] <= 1.0
    sn = load_supernet(tmp_path / "gpu", device="cuda")
    assert next(sn.parameters()).is_cuda
