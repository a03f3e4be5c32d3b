"""Few-shot supernets: the one-shot phases as before, then one sub-supernet per value of the split gene."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from hwnas.errors import ConfigError
from hwnas.supernet.checkpoint import load_supernet, read_identity
from hwnas.supernet.fewshot import FewShotSupernet
from hwnas.supernet.train import SupernetTrainConfig, score_subnet, train_supernet

from .test_train import SPACE  # the tiny mbv3 space: stage 1 has depth 1 or 2 (gene d1)

ONE_SHOT = [{"phase": "largest", "epochs": 1}, {"phase": "kernel", "epochs": 1}]


def config(split: str | None = "d1", phases: list[dict[str, Any]] | None = None) -> SupernetTrainConfig:
    return SupernetTrainConfig.model_validate({
        "name": "tiny", "space": SPACE, "dataset": {"name": "digits", "max_images": 320},
        "params": {"split": split} if split else {},
        "phases": phases if phases is not None else ONE_SHOT + ([{"phase": "split", "epochs": 1}] if split else []),
        "batch_size": 32, "random_subnets": 1, "calib_images": 64, "seed": 5, "device": "cpu",
    })


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "checkpoint" / "supernet.safetensors"))


def test_the_one_shot_phases_are_unchanged_and_each_split_phase_trains_only_its_group(tmp_path: Path) -> None:
    plain = train_supernet(config(split=None), tmp_path / "plain")
    one_shot = weights(tmp_path / "plain")
    steps_per_epoch = plain.steps // 2
    # stopped where the one-shot phases end: the shared sub-supernet holds exactly the plain run's weights
    train_supernet(config(), tmp_path / "split", stop_after_steps=plain.steps)
    at_split = weights(tmp_path / "split")
    assert all(torch.equal(at_split[f"subs.1.{k}"], v) for k, v in one_shot.items())
    # through the first split phase (d1=1): the d1=2 copy still holds the one-shot weights, the d1=1 one moved on
    train_supernet(config(), tmp_path / "split", resume=True, stop_after_steps=steps_per_epoch)
    mid = weights(tmp_path / "split")
    assert int(mid["split_done"]) == 1
    assert all(torch.equal(mid[f"subs.2.{k}"], v) for k, v in one_shot.items())
    assert not all(torch.equal(mid[f"subs.1.{k}"], v) for k, v in one_shot.items())
    result = train_supernet(config(), tmp_path / "split", resume=True)
    assert [r["phase"] for r in result.curves] == ["largest", "kernel", "split:d1=1", "split:d1=2"]
    assert all(0.0 <= r["largest_top1"] <= 1.0 and 0.0 <= r["smallest_top1"] <= 1.0 for r in result.curves)
    end = weights(tmp_path / "split")
    assert not all(torch.equal(end[f"subs.2.{k}"], v) for k, v in one_shot.items())
    # interrupted twice, the run ends exactly where an uninterrupted one does
    train_supernet(config(), tmp_path / "whole")
    whole = weights(tmp_path / "whole")
    assert whole.keys() == end.keys() and all(torch.equal(whole[k], end[k]) for k in whole)


def test_a_split_checkpoint_scores_each_architecture_with_its_groups_weights(tmp_path: Path) -> None:
    out = tmp_path / "sn"
    train_supernet(config(), out)
    ident = read_identity(out)
    assert ident.supernet == "mbv3" and ident.supernet_params["split"] == "d1"
    sn = load_supernet(out).eval()
    assert isinstance(sn, FewShotSupernet) and sn.values == (1, 2) and int(sn.split_done) == 1
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))
    for depth in (1, 2):
        arch = sn.sample_subnet(rng, f"split:d1={depth}")
        assert arch.genes["d1"] == depth
        # the wrapper's output is its group's sub-supernet's, and the extracted network's
        own = sn.subs[str(depth)](x, arch)
        assert torch.equal(sn(x, arch), own)
        with torch.no_grad():
            assert torch.allclose(sn.extract(arch).eval()(x), own, atol=1e-5)
        other = sn.subs[str(3 - depth)](x, arch)
        assert not torch.allclose(other, own, atol=1e-4)
    # sampling over the whole space after the split ("split", as the scorers ask) draws both groups
    assert {sn.sample_subnet(rng, "split").genes["d1"] for _ in range(30)} == {1, 2}
    # the supernet evaluator's path: extract, recalibrate, held-out top-1
    from hwnas.data.datasets import DataConfig, DataSource

    data = DataSource(DataConfig(name="digits", max_images=320))(8)
    top1, _ = score_subnet(sn, sn.largest(), data, calib_images=64)
    assert 0.0 <= top1 <= 1.0


@pytest.mark.parametrize(("split", "phases", "message"), [
    ("zz", None, r"supernet.params.split: the mbv3 space has no gene 'zz' \(its genes: d0, k0_0"),
    ("k1_1", None, r"gene 'k1_1' is switched off in some mbv3 architectures"),
    ("d1", ONE_SHOT, r"needs a \{phase: split, epochs: N\} phase, the last one"),
    ("d1", [{"phase": "split", "epochs": 1}, *ONE_SHOT], r"the last one"),
    (None, [*ONE_SHOT, {"phase": "split", "epochs": 1}], r"'split' is not a phase .* needs supernet.params.split"),
])
def test_bad_splits_are_named(tmp_path: Path, split: str | None, phases: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        train_supernet(config(split=split, phases=phases), tmp_path / "sn")
    assert not (tmp_path / "sn").exists()


def test_a_stages_first_block_gene_can_be_split_on_as_no_depth_switches_it_off() -> None:
    from hwnas.search_spaces import SPACES
    from hwnas.supernet.fewshot import make_supernet

    space = SPACES.create("mbv3", SPACE["params"])
    gene = next(g for g in space.genes() if g.name == "e1_0")
    assert gene.inactive is not None  # declared switchable, like every block gene, but block 0 is always there
    sn = make_supernet("mbv3", {"split": "e1_0"}, space=space, generator=torch.Generator().manual_seed(0))
    assert isinstance(sn, FewShotSupernet) and sn.values == tuple(gene.choices)
    rng = np.random.default_rng(0)
    for value in gene.choices:
        assert sn.sample_subnet(rng, f"split:e1_0={value}").genes["e1_0"] == value


def test_an_architecture_outside_the_split_values_is_refused_by_gene(tmp_path: Path) -> None:
    out = tmp_path / "sn"
    train_supernet(config(), out)
    sn = load_supernet(out).eval()
    from hwnas.architecture import Architecture

    odd = Architecture("mbv3", {**sn.largest().genes, "d1": 3})
    with pytest.raises(ConfigError, match=r"has d1=3; the supernet is split on d1 into \[1, 2\]"):
        sn(torch.zeros(1, 1, 8, 8), odd)


def test_before_the_split_a_few_shot_supernet_conforms_as_its_base_does() -> None:
    from hwnas.search_spaces import SPACES
    from hwnas.supernet.fewshot import make_supernet
    from hwnas.testing import check_supernet

    space = SPACES.create("mbv3", SPACE["params"])
    sn = make_supernet("mbv3", {"split": "d1"}, space=space, generator=torch.Generator().manual_seed(0))
    assert isinstance(sn, FewShotSupernet) and sn.phases[-1] == "split"
    check_supernet(sn, np.random.default_rng(0))


def test_a_search_scores_and_exports_with_each_groups_weights(tmp_path: Path) -> None:
    from hwnas.data.datasets import DataConfig, DataSource
    from hwnas.experiments import run_experiment

    from ..evaluators.test_supernet import experiment_yaml

    out = tmp_path / "sn"
    train_supernet(config(), out)
    # scored on the data it was trained on (another max_images is refused: another split)
    result = run_experiment(experiment_yaml(tmp_path, out, dataset="{name: digits, max_images: 320}"))
    ok = [t for t in result.trials if t.status == "ok"]
    assert len(ok) == 6 and {t.arch.genes["d1"] for t in ok} == {1, 2}
    sn = load_supernet(out)
    data = DataSource(DataConfig(name="digits", max_images=320))(8)
    for t in ok:
        assert t.metrics["top1"] == pytest.approx(score_subnet(sn, t.arch, data, calib_images=64)[0], abs=1e-6)
    for t in result.front:
        kept = torch.load(result.run_dir / "weights" / f"{t.arch.arch_id}.pt", weights_only=True)
        own = sn.subs[str(t.arch.genes["d1"])].extract(t.arch).state_dict()
        conv = next(k for k in own if k.endswith("weight") and own[k].dim() == 4)
        assert torch.equal(kept[conv], own[conv])


def test_the_shipped_few_shot_file_splits_the_convnext_on_its_last_stage_width() -> None:
    import argparse

    from hwnas.cli.supernet import _load_config
    from hwnas.supernet.train import build_parts, phase_plan

    repo = Path(__file__).resolve().parents[2]
    cfg = _load_config(argparse.Namespace(file=str(repo / "experiments" / "supernet_convnext_fewshot.yaml"),
                                          overrides=[]))
    _, sn, _, _ = build_parts(cfg)
    assert isinstance(sn, FewShotSupernet) and sn.gene == "w2" and sn.values == (16, 32, 64, 96)
    plan = [ph.phase for ph in phase_plan(cfg, sn)]
    assert plan == ["largest", "kernel", "depth", "width", "split:w2=16", "split:w2=32", "split:w2=64", "split:w2=96"]
    rng = np.random.default_rng(0)
    assert {sn.sample_subnet(rng, "split:w2=32").genes["w2"] for _ in range(10)} == {32}
    assert sn.largest_in("split:w2=16").genes["w2"] == 16 and sn.smallest("split:w2=96").genes["w2"] == 96


def test_the_shipped_vit_few_shot_file_splits_on_the_embedding_width_and_extracts_each_group() -> None:
    import argparse

    from hwnas.cli.supernet import _load_config
    from hwnas.supernet.train import build_parts, phase_plan

    repo = Path(__file__).resolve().parents[2]
    cfg = _load_config(argparse.Namespace(file=str(repo / "experiments" / "supernet_vit_fewshot.yaml"), overrides=[]))
    _, sn, _, _ = build_parts(cfg)
    assert isinstance(sn, FewShotSupernet) and sn.gene == "embed" and sn.values == (32, 48, 64)
    assert [ph.phase for ph in phase_plan(cfg, sn)] == ["largest", "uniform", "split:embed=32", "split:embed=48",
                                                        "split:embed=64"]
    sn.begin_phase("split:embed=32")  # copies the shared weights into every width's sub-supernet
    with torch.no_grad():  # the 48 copy moves away from the others, as its own training would take it
        for p in sn.subs["48"].parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    sn.eval()
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((2, *sn.space.input_shape)).astype(np.float32))  # MNIST: 1x16x16
    arch = sn.sample_subnet(rng, "split:embed=48")
    assert arch.genes["embed"] == 48
    assert {sn.sample_subnet(rng, "split:embed=64").genes["embed"] for _ in range(8)} == {64}
    with torch.no_grad():
        own = sn.subs["48"](x, arch)
        assert torch.equal(sn(x, arch), own)
        assert torch.allclose(sn.extract(arch).eval()(x), own, atol=1e-5)
        assert not torch.allclose(sn.subs["32"](x, arch), own, atol=1e-4)
