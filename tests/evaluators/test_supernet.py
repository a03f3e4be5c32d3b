"""The `supernet` evaluator in a real experiment: inherited-weight top-1, kept weights, export, refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hwnas.data.datasets import DataConfig, DataSource
from hwnas.errors import ConfigError
from hwnas.experiments import run_experiment
from hwnas.experiments.config import load_experiment
from hwnas.supernet.checkpoint import load_supernet
from hwnas.supernet.train import SupernetTrainConfig, score_subnet, train_supernet

SPACE_YAML = """\
space:
  name: mbv3
  params:
    resolution: 8
    stem_channels: 8
    head_channels: 16
    stages:
      - {channels: 8, stride: 1, depths: [1, 2]}
      - {channels: 16, stride: 2, depths: [1, 2], se: true}
"""


def _train_tiny(out: Path, seed: int = 0) -> Path:
    """The tiny `mbv3` supernet of these tests, trained with ``seed`` into ``out``."""
    import yaml

    cfg = SupernetTrainConfig.model_validate({
        "name": "tiny", **yaml.safe_load(SPACE_YAML), "dataset": {"name": "digits", "max_images": 240},
        "phases": [{"phase": "largest", "epochs": 2, "lr": 0.2}, {"phase": "expand", "epochs": 1}],
        "batch_size": 32, "random_subnets": 1, "calib_images": 64, "device": "cpu", "seed": seed,
    })
    train_supernet(cfg, out)
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train_tiny(tmp_path_factory.mktemp("sn") / "tiny")


def experiment_yaml(tmp_path: Path, checkpoint: Path, space_yaml: str = SPACE_YAML,
                    dataset: str = "{name: digits, max_images: 240}") -> Path:
    text = f"""\
name: sn_search
seed: 1
{space_yaml}
dataset: {dataset}
evaluators:
  - name: complexity
  - name: supernet
    params: {{checkpoint: {checkpoint}, calib_images: 64}}
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: flops_m, direction: min}}
strategy: {{name: random}}
budget: {{trials: 6, batch_size: 3}}
export: {{enabled: true}}
output: {{root: {tmp_path / 'runs'}}}
"""
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


def test_a_search_scores_with_inherited_weights_and_exports_them(tmp_path: Path, checkpoint: Path) -> None:
    result = run_experiment(experiment_yaml(tmp_path, checkpoint))
    ok = [t for t in result.trials if t.status == "ok"]
    assert len(ok) == 6
    supernet = load_supernet(checkpoint)
    data = DataSource(DataConfig(name="digits", max_images=240))(8)
    for t in ok[:3]:  # the evaluator's batched pass gives what one subnet scored alone gives
        top1, loss = score_subnet(supernet, t.arch, data, calib_images=64)
        assert t.metrics["top1"] == pytest.approx(top1, abs=1e-6)
        assert t.metrics["val_loss"] == pytest.approx(loss, rel=1e-4)
    assert len({round(t.metrics["top1"], 6) for t in ok}) > 1, "every subnet scored the same"
    for t in result.front:
        kept = torch.load(result.run_dir / "weights" / f"{t.arch.arch_id}.pt", weights_only=True)
        extracted = supernet.extract(t.arch).state_dict()
        conv = next(k for k in extracted if k.endswith("weight") and extracted[k].dim() == 4)
        assert torch.equal(kept[conv], extracted[conv])  # inherited (BN statistics recalibrated, weights as is)
        card = json.loads((result.run_dir / "models" / f"{t.arch.arch_id}.json").read_text())
        assert card["trained_weights"] is True
        assert card["weights_source"].startswith("inherited from the supernet")
        assert card["onnx"]["max_abs_diff_vs_torch"] < 1e-4


def test_a_checkpoint_of_another_space_or_width_is_refused_at_build(tmp_path: Path, checkpoint: Path) -> None:
    wider = SPACE_YAML.replace("channels: 16, stride: 2", "channels: 24, stride: 2")
    with pytest.raises(ConfigError, match=r"supernet: checkpoint .*other parameters: stages"):
        load_experiment(experiment_yaml(tmp_path, checkpoint, wider))
    nb201 = "space: {name: nb201, params: {resolution: 8, channels: 4, cells_per_stage: 1}}\n"
    with pytest.raises(ConfigError, match="a supernet of space 'mbv3', not 'nb201'"):
        load_experiment(experiment_yaml(tmp_path, checkpoint, nb201))
    with pytest.raises(ConfigError, match="no supernet checkpoint there"):
        load_experiment(experiment_yaml(tmp_path, tmp_path / "nowhere"))


def test_a_cell_supernet_serves_an_experiment_whatever_it_resolves_merge_isomorphic_to(tmp_path: Path) -> None:
    """merge_isomorphic changes no network (which cells count as one): a checkpoint trained with it unset scores an
    experiment that resolves it to True (no hardware metric) or False; another width is still refused."""
    cfg = SupernetTrainConfig.model_validate({
        "name": "cells", "space": {"name": "nb201", "params": {"resolution": 8, "channels": 4, "cells_per_stage": 1}},
        "dataset": {"name": "digits", "max_images": 240}, "phases": [{"phase": "uniform", "epochs": 1}],
        "batch_size": 32, "random_subnets": 1, "calib_images": 64, "device": "cpu"})
    ckpt = tmp_path / "cells"
    train_supernet(cfg, ckpt)
    for merge in ("", ", merge_isomorphic: false", ", merge_isomorphic: true"):
        space = f"space: {{name: nb201, params: {{resolution: 8, channels: 4, cells_per_stage: 1{merge}}}}}\n"
        exp = load_experiment(experiment_yaml(tmp_path, ckpt, space))
        assert exp.space.params.merge_isomorphic is (merge != ", merge_isomorphic: false")
        result = exp.evaluators[1].evaluate([exp.space.sample(np.random.default_rng(0))])[0]
        assert isinstance(result, dict) and 0 <= result["top1"] <= 1
    wider = "space: {name: nb201, params: {resolution: 8, channels: 8, cells_per_stage: 1}}\n"
    with pytest.raises(ConfigError, match=r"other parameters: channels \(checkpoint 4, here 8\)"):
        load_experiment(experiment_yaml(tmp_path, ckpt, wider))


def test_a_checkpoint_trained_on_other_data_is_refused_at_build_naming_both(tmp_path: Path, checkpoint: Path) -> None:
    # the same 8x8 space (resolution is a space parameter, refused above), another dataset or another split of it
    with pytest.raises(ConfigError, match=r"supernet: checkpoint .*trained on digits \(val_fraction 0.25, split_seed "
                                          r"0, max_images 240\), the scoring data is mnist5k .*differ in max_images, "
                                          r"name"):
        load_experiment(experiment_yaml(tmp_path, checkpoint, dataset="{name: mnist5k}"))
    with pytest.raises(ConfigError, match=r"differ in val_fraction"):
        load_experiment(experiment_yaml(tmp_path, checkpoint, dataset="{name: digits, max_images: 240, "
                                                                      "val_fraction: 0.4}"))
    # the weights file copied out of its training folder still records its dataset
    alone = tmp_path / "alone"
    alone.mkdir()
    weights = checkpoint / "checkpoint" / "supernet.safetensors"
    (alone / "supernet.safetensors").write_bytes(weights.read_bytes())
    with pytest.raises(ConfigError, match=r"trained on digits .*the scoring data is mnist5k"):
        load_experiment(experiment_yaml(tmp_path, alone, dataset="{name: mnist5k}"))
    # a checkpoint written before the metadata held the dataset, outside its folder: nothing to check against
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(weights), framework="pt") as fh:
        meta = json.loads(fh.metadata()["hwnas"])
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    assert meta.pop("dataset")["name"] == "digits"
    save_file(tensors, str(alone / "supernet.safetensors"), metadata={"hwnas": json.dumps(meta)})
    load_experiment(experiment_yaml(tmp_path, alone, dataset="{name: mnist5k}"))


def test_an_architecture_the_supernet_cannot_express_fails_that_trial_naming_the_gene(checkpoint: Path) -> None:
    from hwnas.architecture import Architecture
    from hwnas.errors import InvalidArchitecture

    supernet = load_supernet(checkpoint)
    arch = supernet.largest()
    bad = Architecture(arch.space, {**arch.genes, "k0_0": 9})
    with pytest.raises(InvalidArchitecture, match="k0_0"):
        supernet(torch.zeros(1, 1, 8, 8), bad)
    rng = np.random.default_rng(0)
    assert supernet.space.validate(supernet.sample_subnet(rng, "expand")) is None


def test_nas_supernet_score_prints_the_largest_smallest_and_random_subnets(checkpoint: Path, capsys) -> None:
    from hwnas.cli import main

    assert main(["supernet", "score", str(checkpoint), "--samples", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "held-out split of digits" in lines[0]
    rows = [ln.split() for ln in lines[1:]]
    assert [r[0] for r in rows] == ["largest", "smallest", "random", "random"]
    assert all(0.0 <= float(r[-1]) <= 100.0 for r in rows)
    supernet = load_supernet(checkpoint)
    data = DataSource(DataConfig(name="digits", max_images=240))(8)
    top1, _ = score_subnet(supernet, supernet.largest(), data, calib_images=500)
    assert float(rows[0][-1]) == pytest.approx(100 * top1, abs=0.006)


def test_finetune_epochs_fine_tunes_the_kept_subnet_and_the_card_says_so(tmp_path: Path, checkpoint: Path) -> None:
    from hwnas.evaluation import EvalContext
    from hwnas.evaluators.supernet import SupernetEvaluator
    from hwnas.search_spaces import SPACES

    supernet = load_supernet(checkpoint)
    space = SPACES.create("mbv3", supernet.space.params.model_dump())
    source = DataSource(DataConfig(name="digits", max_images=240))
    arch = supernet.sample_subnet(np.random.default_rng(3), "expand")
    scores = {}
    for epochs in (0, 1):
        ctx = EvalContext(space=space, data=source, artifacts_dir=tmp_path / f"ft{epochs}", seed=1)
        ev = SupernetEvaluator(context=ctx, checkpoint=str(checkpoint), calib_images=64, finetune_epochs=epochs)
        (scores[epochs],) = ev.evaluate([arch])
    assert scores[0]["top1"] != scores[1]["top1"] or scores[0]["val_loss"] != scores[1]["val_loss"]
    kept0 = torch.load(tmp_path / "ft0" / "weights" / f"{arch.arch_id}.pt", weights_only=True)
    kept1 = torch.load(tmp_path / "ft1" / "weights" / f"{arch.arch_id}.pt", weights_only=True)
    assert any(not torch.equal(kept0[k], kept1[k]) for k in kept0 if kept0[k].is_floating_point())
    assert ev.fingerprint() != SupernetEvaluator(
        context=EvalContext(space=space, data=source, seed=1), checkpoint=str(checkpoint), calib_images=64,
    ).fingerprint()


def test_finetuning_with_adamw_is_its_own_seeded_recipe(tmp_path: Path, checkpoint: Path) -> None:
    """optimizer: adamw fine-tunes otherwise than sgd, the same seed twice gives the same weights, the default
    (sgd) leaves the fingerprint of runs from before the option as it was, and a wrong name is one clear error."""
    from pydantic import ValidationError

    from hwnas.evaluation import EvalContext
    from hwnas.evaluators.supernet import SupernetEvaluator
    from hwnas.search_spaces import SPACES

    supernet = load_supernet(checkpoint)
    space = SPACES.create("mbv3", supernet.space.params.model_dump())
    source = DataSource(DataConfig(name="digits", max_images=240))
    arch = supernet.sample_subnet(np.random.default_rng(4), "expand")
    kept = {}
    for name, opt in (("sgd", "sgd"), ("adamw", "adamw"), ("adamw2", "adamw")):
        ctx = EvalContext(space=space, data=source, artifacts_dir=tmp_path / name, seed=1)
        ev = SupernetEvaluator(context=ctx, checkpoint=str(checkpoint), calib_images=64, finetune_epochs=1,
                               optimizer=opt)
        (score,) = ev.evaluate([arch])
        assert 0 <= score["top1"] <= 1
        kept[name] = torch.load(tmp_path / name / "weights" / f"{arch.arch_id}.pt", weights_only=True)
    floats = [k for k in kept["sgd"] if kept["sgd"][k].is_floating_point()]
    assert any(not torch.equal(kept["sgd"][k], kept["adamw"][k]) for k in floats)
    assert all(torch.equal(kept["adamw"][k], kept["adamw2"][k]) for k in floats)

    def fingerprint(**params: object) -> str:
        ctx = EvalContext(space=space, data=source, seed=1)
        return SupernetEvaluator(context=ctx, checkpoint=str(checkpoint), calib_images=64, **params).fingerprint()

    assert fingerprint() == fingerprint(optimizer="sgd") != fingerprint(optimizer="adamw")
    with pytest.raises((ValidationError, ConfigError), match="optimizer"):
        fingerprint(optimizer="adam")


@pytest.fixture(scope="module")
def second_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same supernet file trained from another seed: an ensemble member."""
    return _train_tiny(tmp_path_factory.mktemp("sn2") / "tiny_seed1", seed=1)


def test_an_ensemble_scores_the_mean_and_keeps_the_best_members_weights(tmp_path: Path, checkpoint: Path,
                                                                        second_checkpoint: Path) -> None:
    path = experiment_yaml(tmp_path, checkpoint)
    ensemble = f"calib_images: 64, ensemble: [{second_checkpoint}]}}"
    path.write_text(path.read_text().replace("calib_images: 64}", ensemble))
    result = run_experiment(path)
    ok = [t for t in result.trials if t.status == "ok"]
    assert len(ok) == 6
    members = [load_supernet(checkpoint), load_supernet(second_checkpoint)]
    data = DataSource(DataConfig(name="digits", max_images=240))(8)
    differ = 0
    for t in ok:
        scores = [score_subnet(m, t.arch, data, calib_images=64) for m in members]
        differ += scores[0][0] != scores[1][0]
        assert t.metrics["top1"] == pytest.approx((scores[0][0] + scores[1][0]) / 2, abs=1e-6)
        assert t.metrics["val_loss"] == pytest.approx((scores[0][1] + scores[1][1]) / 2, rel=1e-4)
        best = members[int(scores[1][0] > scores[0][0])]
        kept = torch.load(result.run_dir / "weights" / f"{t.arch.arch_id}.pt", weights_only=True)
        extracted = best.extract(t.arch).state_dict()
        conv = next(k for k in extracted if k.endswith("weight") and extracted[k].dim() == 4)
        assert torch.equal(kept[conv], extracted[conv])
    assert differ, "the two supernets scored every subnet the same: the test shows nothing"
    card = json.loads((result.run_dir / "models" / f"{result.front[0].arch.arch_id}.json").read_text())
    assert card["weights_source"].startswith("inherited from the ensemble member that scored it best of ")


def test_an_ensemble_member_of_another_width_or_twice_the_same_is_refused(tmp_path: Path, checkpoint: Path,
                                                                           second_checkpoint: Path) -> None:
    import yaml

    wider = tmp_path / "wider"
    space = yaml.safe_load(SPACE_YAML.replace("channels: 16, stride: 2", "channels: 24, stride: 2"))
    train_supernet(SupernetTrainConfig.model_validate({
        "name": "wide", **space, "dataset": {"name": "digits", "max_images": 96},
        "phases": [{"phase": "largest", "epochs": 1}], "batch_size": 32, "device": "cpu"}), wider)
    path = experiment_yaml(tmp_path, checkpoint)
    text = path.read_text()
    members = f"calib_images: 64, ensemble: [{tmp_path / 'nowhere'}, {second_checkpoint}, {wider}]}}"
    path.write_text(text.replace("calib_images: 64}", members))
    with pytest.raises(ConfigError) as err:  # every member's problem, each named
        load_experiment(path)
    assert re.search(r"supernet: ensemble\[0\]: .*nowhere: no supernet checkpoint there", str(err.value))
    assert re.search(r"supernet: ensemble\[2\] .*wider.*other parameters: stages", str(err.value))
    path.write_text(text.replace("calib_images: 64}", f"calib_images: 64, ensemble: [{checkpoint}]}}"))
    with pytest.raises(ConfigError, match=r"ensemble\[0\]: .* is already in the ensemble"):
        load_experiment(path)
